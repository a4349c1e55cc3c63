/**
 * An attempt as the engine gives it its context and as it answers: the context is a parameter of
 * the attempt (`AttemptContext`); what the attempt learned besides its value or failure (the tokens
 * it used, the provider's stated limits, its log annotations, its span's attributes) comes back
 * with the value (`Answered`) or with the failure (`Reported`), which the engine unwraps.
 * `CurrentAttempt` is a read-only view of the attempt for the caller's own effects.
 * Kept apart from the engine so a transport's import of it loads nothing else.
 */
import { makeRef, type Ref } from "#effect-line"
import * as Effect from "effect/Effect"

/** What an attempt knows about itself: read it to set an idempotency key or a timeout. */
export interface AttemptView {
  /** The same for every attempt of one logical call: use it as the idempotency key. */
  readonly requestId: string
  /** 1 for the first attempt. */
  readonly attempt: number
  readonly target: string
  /** When this attempt's time runs out, in epoch milliseconds of Effect's `Clock`. */
  readonly deadline: number
  readonly replaySafe: boolean
}

/** How far an attempt got: its request on its way (`headers` awaited), or its answer's `body` being read. */
export type Phase = "headers" | "body"

/** The context an attempt of a transport is run with. */
export interface AttemptContext extends AttemptView {
  /**
   * Says how far the attempt got, and what it has learned so far (`said`): if the attempt's time
   * runs out, its `ReadTimeout` names the phase it stalled in, and what it had learned still counts.
   */
  readonly reached: (phase: Phase, said?: Report) => void
}

/** The limits a provider states in an answer's headers. */
export interface Limits {
  readonly requestsPerMinute?: number | undefined
  readonly tokensPerMinute?: number | undefined
}

/**
 * What an attempt learned besides its value or failure, built as it goes and handed back with it:
 * the tokens the provider says it used (its place in the key's pace is settled with them), the
 * limits it stated (the key's limiter learns them), its log line's annotations (the provider's
 * request id, token counts), and its span's attributes (the call's too, if its value is the call's).
 */
export class Report {
  usage: number | undefined = undefined
  limits: Limits | undefined = undefined
  annotations: Record<string, unknown> | undefined = undefined
  /** Keys and values in turn. */
  attributes: Array<unknown> | undefined = undefined

  annotate(key: string, value: unknown): void {
    ;(this.annotations ??= {})[key] = value
  }

  attribute(key: string, value: unknown): void {
    ;(this.attributes ??= []).push(key, value)
  }
}

/** A value, with what its attempt (or a stream's later chunk) said of itself. */
export class Answered<A> {
  constructor(readonly value: A, readonly report: Report) {}
}

/** A failure, with what its attempt said of itself: the engine unwraps it, so the call's failure is `failure`. */
export class Reported<E> {
  constructor(readonly failure: E, readonly report: Report) {}
}

/** One attempt of a transport: a function of its context, its report handed back with its outcome. */
export type Attempt<A, E, R> = (context: AttemptContext) => Effect.Effect<A | Answered<A>, E | Reported<E>, R>

/** `effect`'s value or failure, with `report`. */
export const reporting = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  report: Report
): Effect.Effect<Answered<A>, Reported<E>, R> =>
  Effect.mapBoth(effect, {
    onFailure: (failure) => new Reported(failure, report),
    onSuccess: (value) => new Answered(value, report)
  })

/** A value without its report. */
export const valueOf = <A>(answer: A | Answered<A>): A => answer instanceof Answered ? answer.value : answer

/** A failure without its report. */
export const failureOf = <E>(failure: E | Reported<E>): E => failure instanceof Reported ? failure.failure : failure

/** The attempt the current fiber is running, inside a resilient call; `undefined` outside one. */
export const CurrentAttempt: Ref<AttemptView | undefined> = makeRef<AttemptView | undefined>(
  "@resilient-ai/policy/Resilient/CurrentAttempt",
  undefined
)
