/**
 * What a sequence does after a failed attempt, as pure functions of the call's rules, the judged
 * attempt, the time and the backoff's proposal: stop, and why, or retry after a delay.
 *
 * The engine steps the backoff (an Effect `Schedule`, which may draw from `Random`) between the two
 * halves: `beforeBackoff` applies the rules that need no delay; if it goes on, the engine steps the
 * backoff, draws the hint's spread when `drawsSpread` says so, and `afterBackoff` fits the delay to
 * the deadline. The budget is the engine's to ask, and only on `Retry`.
 */
import type { Verdict } from "../Classifier.js"
import type { StopReason } from "../Failure.js"

/** The rules of one call, as its policy and options set them. */
export interface Rules {
  /** Attempts per call, the first included. */
  readonly maxAttempts: number
  /** Whether ambiguous failures may be replayed. */
  readonly replaySafe: boolean
  /** A call inside another's attempt: it leaves retrying to the enclosing call. */
  readonly nested: boolean
  /** The call's deadline, in epoch milliseconds. */
  readonly deadline: number
  /** An attempt with less time than this before the deadline is not started. */
  readonly minAttemptMillis: number
  /** A hint longer than this ends the call. */
  readonly maxRetryAfterMillis: number
  /** The cap of the random spread added to a hint. */
  readonly hintSpreadMillis: number
  /** Whether a hint replaces the backoff's delay (the default backoff), or the backoff decides alone. */
  readonly readsHints: boolean
}

/** A failed attempt, judged. */
export interface Judged {
  /** Its number, 1 for the first. */
  readonly attempt: number
  readonly verdict: Verdict
  /** The wait the failure (or the caller's `classify`) asked for, in milliseconds. */
  readonly hintMillis: number | undefined
  /** The failure is the deadline's own (`DeadlineExceeded`): nothing is left to retry in. */
  readonly deadlineExceeded: boolean
  /** The failure is a gate's refusal (`Shed`). */
  readonly shed: boolean
}

/** The sequence ends, for `reason`; `deadlineSkip`: because no next attempt would get its time. */
export interface Stop {
  readonly _tag: "Stop"
  readonly reason: StopReason
  readonly deadlineSkip: boolean
}

/** The sequence goes on after `delay` milliseconds, if the budget grants it. */
export interface Retry {
  readonly _tag: "Retry"
  readonly delay: number
}

export type Decision = Stop | Retry

const stopFor = (reason: StopReason): Stop => ({ _tag: "Stop", reason, deadlineSkip: false })

// One value per outcome: the hot path of a failure allocates no stop.
const stops = {
  deferred: stopFor("deferred"),
  deadline: stopFor("deadline"),
  shed: stopFor("shed"),
  terminal: stopFor("terminal"),
  notReplaySafe: stopFor("not-replay-safe"),
  attempts: stopFor("attempts"),
  tooLong: stopFor("retry-after-too-long")
}

/** Stopped because no next attempt could get its time before the deadline. */
export const deadlineSkip: Stop = { _tag: "Stop", reason: "deadline", deadlineSkip: true }

/**
 * Whether an attempt would still get its time after sleeping `delay` from `now`. With no minimum, a
 * sleep ending exactly at the deadline would otherwise be granted, spent and then wasted.
 */
export const leavesRoom = (rules: Rules, now: number, delay: number): boolean => {
  const left = rules.deadline - (now + delay)
  return left > 0 && left >= rules.minAttemptMillis
}

/**
 * The rules that need no delay, in order: a nested call defers; the deadline's own failure, a
 * terminal verdict, an ambiguous one not replay-safe, and the attempt ceiling stop; then the hint
 * against the policy's ceiling and the time left. `undefined`: step the backoff.
 *
 * A hint the call cannot afford says this target cannot serve it in time, while the time left may
 * well be enough for another target: that is a failover (`retry-after-too-long`), not a deadline.
 */
export const beforeBackoff = (rules: Rules, judged: Judged, now: number): Stop | undefined => {
  if (rules.nested) return stops.deferred
  if (judged.deadlineExceeded) return stops.deadline
  const verdict = judged.verdict
  if (verdict === "terminal") return judged.shed ? stops.shed : stops.terminal
  if (verdict === "ambiguous" && !rules.replaySafe) return stops.notReplaySafe
  if (judged.attempt >= rules.maxAttempts) return stops.attempts
  const hint = judged.hintMillis
  if (hint === undefined) return undefined
  if (hint > rules.maxRetryAfterMillis) return stops.tooLong
  if (leavesRoom(rules, now, hint)) return undefined
  return leavesRoom(rules, now, 0) ? stops.tooLong : deadlineSkip
}

/** Whether the engine draws a random fraction for the hint's spread, once the backoff has stepped. */
export const drawsSpread = (rules: Rules, judged: Judged): boolean =>
  rules.readsHints && judged.hintMillis !== undefined

/**
 * The delay before the next attempt, fitted to the deadline. `proposed` is the backoff's delay
 * (`"done"` when the backoff allows no more); `fraction`, drawn when `drawsSpread` said so, places
 * the hint's spread in `[0, min(hintSpread, hint / 2))`: a hint read replaces the backoff's delay.
 *
 * When the delay does not leave the next attempt its time but the hint alone would, what was added
 * to the hint gives way, down to the last whole millisecond that still leaves an attempt its time.
 */
export const afterBackoff = (
  rules: Rules,
  judged: Judged,
  now: number,
  proposed: number | "done",
  fraction: number | undefined
): Decision => {
  if (proposed === "done") return stops.attempts
  const hint = judged.hintMillis
  const delay = fraction !== undefined && hint !== undefined
    ? hint + Math.floor(fraction * Math.min(rules.hintSpreadMillis, hint / 2))
    : proposed
  if (leavesRoom(rules, now, delay)) return { _tag: "Retry", delay }
  if (hint === undefined || !leavesRoom(rules, now, hint)) return deadlineSkip
  return { _tag: "Retry", delay: Math.max(hint, Math.ceil(rules.deadline - now - rules.minAttemptMillis) - 1) }
}

/**
 * The whole decision, for a backoff that proposed `proposed` and a spread drawn as `fraction`: what
 * the engine reaches through its two halves, in one call.
 */
export const decide = (
  rules: Rules,
  judged: Judged,
  now: number,
  proposed: number | "done",
  fraction: number | undefined
): Decision =>
  beforeBackoff(rules, judged, now) ??
    afterBackoff(rules, judged, now, proposed, drawsSpread(rules, judged) ? fraction : undefined)
