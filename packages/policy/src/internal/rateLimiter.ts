/**
 * `RateLimiter` with what only the toolkit uses of it: the settings with their defaults, the limits
 * a provider states in its headers, the pacing arithmetic without Effect (`Pacer`) and the steps of
 * an `admit` built on it, shared by the limiter in memory and the fleet's on Redis, and the rough
 * count of a prompt's tokens.
 */
import { currentClock, Either, makeSemaphoreUnsafe, nowMillis, thenInterruptible, timeoutFail } from "#effect-line"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Demand, Lane, Limits, Options, Reservation, Service, Snapshot } from "../RateLimiter.js"
import * as Failures from "./failures.js"
import * as FastPath from "./fastPath.js"
import * as Checked from "./settings.js"

export * from "../RateLimiter.js"

/** `Options` with every default filled in. */
export interface Settings {
  readonly target: string
  readonly requestsPerMinute: number
  readonly tokensPerMinute: number
  readonly burstMillis: number
  readonly interactiveReserve: number
  readonly learn: boolean
}

const perMinute = Checked.withDefault(Checked.integerAtLeast(1, { orInfinite: true }), Number.POSITIVE_INFINITY)

const LimiterSettings = Checked.struct({
  target: Checked.nonEmpty,
  requestsPerMinute: perMinute,
  tokensPerMinute: perMinute,
  burst: Checked.withDefault(Checked.finitePositiveDuration, Duration.seconds(1)),
  interactiveReserve: Checked.withDefault(
    Checked.refine(Checked.number, (share) => (share >= 0 && share < 1) || `must be in [0, 1), got ${share}`),
    0.5
  ),
  learn: Checked.withDefault(Checked.flag, true)
})

const decodeSettings = Checked.decoder(LimiterSettings, (input) => {
  const target = (input as { readonly target?: unknown } | undefined)?.target
  return typeof target === "string" && target !== "" ? `rate limiter for ${target}` : "rate limiter"
})

/** Fills in the defaults and checks the values; bad ones are one `InvalidSettings` naming each. */
export const settings = (options: Options): Either.Either<Settings, Checked.InvalidSettings> =>
  Either.map(decodeSettings(options), ({ burst, ...rest }) => ({ ...rest, burstMillis: Duration.toMillis(burst) }))

/** A reservation with nothing to settle: the limiter paces nothing. */
export const free: Reservation = { tokens: 0, settle: () => Effect.void, giveBack: Effect.void }

/**
 * The limits a provider states in an answer's headers, if any (`header` reads one by its lower-case
 * name): OpenAI's and Mistral's `x-ratelimit-limit-*`, and Anthropic's `anthropic-ratelimit-*-limit`.
 */
export const limitsOf = (header: (name: string) => string | null | undefined): Limits => {
  const read = (name: string) => {
    const value = header(name)
    const number = value === null || value === undefined ? Number.NaN : Number(value)
    return Number.isFinite(number) && number > 0 ? number : undefined
  }
  return {
    requestsPerMinute: read("x-ratelimit-limit-requests") ?? read("anthropic-ratelimit-requests-limit"),
    tokensPerMinute: read("x-ratelimit-limit-tokens") ?? read("anthropic-ratelimit-tokens-limit")
  }
}

/** When a demand may go: now (`reserved`), later (`wait` until `at`), or never in time (`refused`). */
export type Decision =
  | { readonly _tag: "reserved"; readonly at: number }
  | { readonly _tag: "wait"; readonly at: number }
  | { readonly _tag: "refused"; readonly at: number; readonly dimension: "requests" | "tokens" }

/**
 * The limiter's arithmetic without Effect: one theoretical arrival time per limit (the instant the
 * bucket would be empty again), moved by each reservation. Time is passed in, so the storm
 * simulator and the Redis layer's fallback use the same; `share` scales the limits, for one
 * process's part of a fleet's.
 */
export class Pacer {
  private requestsAt = Number.NEGATIVE_INFINITY
  private tokensAt = Number.NEGATIVE_INFINITY
  private learned: Limits = {}

  constructor(readonly settings: Settings, private readonly share: () => number = () => 1) {}

  /** The limits in force: the lower of the settings' and the provider's, times this process's share. */
  limits(): { readonly requestsPerMinute: number; readonly tokensPerMinute: number } {
    const share = this.share()
    return {
      requestsPerMinute: Math.min(this.settings.requestsPerMinute, this.learned.requestsPerMinute ?? Infinity) * share,
      tokensPerMinute: Math.min(this.settings.tokensPerMinute, this.learned.tokensPerMinute ?? Infinity) * share
    }
  }

  learn(limits: Limits): void {
    if (!this.settings.learn) return
    this.learned = {
      requestsPerMinute: limits.requestsPerMinute ?? this.learned.requestsPerMinute,
      tokensPerMinute: limits.tokensPerMinute ?? this.learned.tokensPerMinute
    }
  }

  /** Whether any limit is in force: without one, nothing is paced. */
  get pacing(): boolean {
    // Read on every attempt: from the limits as they are, without building `limits()`'s record.
    const { learned, settings } = this
    return Math.min(settings.requestsPerMinute, learned.requestsPerMinute ?? Infinity) < Infinity ||
      Math.min(settings.tokensPerMinute, learned.tokensPerMinute ?? Infinity) < Infinity
  }

  /**
   * Decides a demand at `now`. Capacity returns at the limit's rate: a request costs
   * `60 000 / requestsPerMinute` ms of the requests' bucket, a token `60 000 / tokensPerMinute` ms of
   * the tokens'. A lane may go once its cost fits in its buckets within its tolerance of now: the
   * burst for an interactive call, less the interactive reserve for a batch one. So a burst of 1 s
   * sends at most one second's worth at once, what a provider enforcing per second accepts.
   */
  decide(now: number, tokens: number, lane: Lane, deadline: number): Decision {
    const { requestsPerMinute, tokensPerMinute } = this.limits()
    const requestCost = 60_000 / requestsPerMinute
    const tokenCost = 60_000 / tokensPerMinute
    const burst = this.settings.burstMillis
    const tolerance = lane === "interactive" ? burst : burst * (1 - this.settings.interactiveReserve)
    // It goes once it fits within the tolerance; one larger than the tolerance, once the bucket is
    // empty, running it into debt.
    const requestsFrom = requestCost > 0
      ? this.requestsAt + Math.min(requestCost, tolerance) - tolerance
      : Number.NEGATIVE_INFINITY
    const tokensFrom = tokenCost > 0 && tokens > 0
      ? this.tokensAt + Math.min(tokens * tokenCost, tolerance) - tolerance
      : Number.NEGATIVE_INFINITY
    const at = Math.max(now, requestsFrom, tokensFrom)
    if (at > deadline) return { _tag: "refused", at, dimension: requestsFrom >= tokensFrom ? "requests" : "tokens" }
    // A batch call does not hold a place in the future: an interactive call may take it first.
    if (at > now && lane === "batch") return { _tag: "wait", at }
    if (requestCost > 0) this.requestsAt = Math.max(this.requestsAt, at) + requestCost
    if (tokenCost > 0) this.tokensAt = Math.max(this.tokensAt, at) + tokens * tokenCost
    return { _tag: "reserved", at }
  }

  /** When a request of `lane` with no tokens could go next, at `now` or later. */
  nextFree(now: number, lane: Lane): number {
    const { requestsPerMinute } = this.limits()
    const burst = this.settings.burstMillis
    const tolerance = lane === "interactive" ? burst : burst * (1 - this.settings.interactiveReserve)
    return Math.max(now, this.requestsAt + Math.min(60_000 / requestsPerMinute, tolerance) - tolerance)
  }

  /** Moves the tokens' bucket by `tokens` (negative: given back), as a settled reservation does. */
  adjustTokens(tokens: number): void {
    const { tokensPerMinute } = this.limits()
    if (Number.isFinite(tokensPerMinute)) this.tokensAt += tokens * (60_000 / tokensPerMinute)
  }

  /** Gives back one request. */
  giveBackRequest(): void {
    const { requestsPerMinute } = this.limits()
    if (Number.isFinite(requestsPerMinute)) this.requestsAt -= 60_000 / requestsPerMinute
  }

  snapshot(now: number): Snapshot {
    const limits = this.limits()
    const burst = this.settings.burstMillis
    return {
      ...limits,
      requestsWaitMillis: Math.max(0, this.requestsAt - burst - now),
      tokensWaitMillis: Math.max(0, this.tokensAt - burst - now)
    }
  }
}

/**
 * What a decision made at `now` comes to: the place taken (after sleeping until its turn, a sleep
 * whose interruption gives the place back), the refusal, or, for a batch call that must wait, a
 * sleep until its turn and `"wait"`: it holds no place, and must be decided again.
 */
export const takeTurn = (
  target: string,
  decision: Decision,
  now: number,
  taken: () => Reservation
): Effect.Effect<Reservation | "wait", Failures.RateLimitedLocally> => {
  switch (decision._tag) {
    case "refused":
      return Effect.fail(refusal(target, decision, now))
    case "wait":
      return Effect.as(thenInterruptible(Effect.sleep(Duration.millis(Math.ceil(decision.at - now)))), "wait" as const)
    case "reserved": {
      const place = taken()
      if (decision.at <= now) return Effect.succeed(place)
      return Effect.as(
        // An interruption that comes as the turn does gives the place back on Effect 4 too.
        Effect.onInterrupt(
          thenInterruptible(Effect.sleep(Duration.millis(Math.ceil(decision.at - now)))),
          () => place.giveBack
        ),
        place
      )
    }
  }
}

/**
 * A limiter's `admit` around its one decision (`decideNow`, as `takeTurn` answers): batch calls
 * that must wait do so one at a time, first come first served, so only the first looks at the pace
 * again when its turn was due rather than all of them at once; the deadline bounds the wait in line
 * too, and `nextTurn` names when capacity returns should it end it.
 */
export const admitting = (
  target: string,
  now: () => number,
  decideNow: (demand: Demand) => Effect.Effect<Reservation | "wait", Failures.RateLimitedLocally>,
  nextTurn: () => number
): (demand: Demand) => Effect.Effect<Reservation, Failures.RateLimitedLocally> => {
  const batchLine = makeSemaphoreUnsafe(1)
  const untilAdmitted = (demand: Demand): Effect.Effect<Reservation, Failures.RateLimitedLocally> =>
    Effect.flatMap(decideNow(demand), (decided) => decided === "wait" ? untilAdmitted(demand) : Effect.succeed(decided))
  const inBatchLine = (demand: Demand): Effect.Effect<Reservation, Failures.RateLimitedLocally> => {
    const waited = batchLine.withPermits(1)(untilAdmitted(demand))
    if (!Number.isFinite(demand.deadline)) return waited
    return timeoutFail(waited, {
      duration: Duration.millis(Math.max(0, demand.deadline - now())),
      onTimeout: () => refusal(target, { _tag: "refused", at: nextTurn(), dimension: "requests" }, now())
    })
  }
  return (demand) =>
    Effect.flatMap(decideNow(demand), (decided) => decided === "wait" ? inBatchLine(demand) : Effect.succeed(decided))
}

/** The failure of a demand whose turn comes after its deadline. */
export const refusal = (target: string, decision: Extract<Decision, { _tag: "refused" }>, now: number) =>
  new Failures.RateLimitedLocally({
    target,
    dimension: decision.dimension,
    availableAt: decision.at,
    retryAfter: Duration.millis(Math.ceil(decision.at - now))
  })

/**
 * `RateLimiter.make`, with `share`: one process's part of a fleet's limits, for the fleet's limiter
 * on Redis, which falls back to one in process.
 */
export const makeShared = (
  options: Options,
  share?: () => number
): Effect.Effect<Service, Checked.InvalidSettings> =>
  Effect.flatMap(
    Effect.suspend(() => Either.toEffect(settings(options))),
    (checked) =>
      Effect.map(currentClock, (clock) => {
        const pacer = new Pacer(checked, share)
        const now = () => nowMillis(clock)
        const reservation = (tokens: number): Reservation => ({
          tokens,
          settle: (used) => Effect.sync(() => pacer.adjustTokens(used - tokens)),
          giveBack: Effect.sync(() => {
            pacer.giveBackRequest()
            pacer.adjustTokens(-tokens)
          })
        })
        const admitNow = (tokens: number, lane: Lane): Reservation | undefined => {
          if (!pacer.pacing) return free
          const at = now()
          // Only a demand that goes now is decided here; any other is `admit`'s, which can wait.
          const decision = pacer.decide(at, tokens, lane, at)
          return decision._tag === "reserved" ? reservation(tokens) : undefined
        }
        const admit = admitting(
          checked.target,
          now,
          (demand) =>
            Effect.suspend(() => {
              const at = now()
              return takeTurn(
                checked.target,
                pacer.decide(at, demand.tokens, demand.lane, demand.deadline),
                at,
                () => reservation(demand.tokens)
              )
            }),
          () => pacer.nextFree(now(), "batch")
        )
        const pacedAdmit = (demand: Demand): Effect.Effect<Reservation, Failures.RateLimitedLocally> =>
          Effect.suspend(() => pacer.pacing ? admit(demand) : Effect.succeed(free))
        const service: FastPath.With<Service, FastPath.Limiter> = {
          admit: pacedAdmit,
          learn: (limits) => Effect.sync(() => pacer.learn(limits)),
          snapshot: Effect.sync(() => pacer.snapshot(now())),
          [FastPath.key]: { admitNow }
        }
        return service
      })
  )

/**
 * About four characters a token in English text (fewer in code and other scripts): how an attempt's
 * prompt is counted before the provider counts it exactly, and settles the difference.
 */
export const charactersPerToken = 4

/** A rough count of the tokens of `text`. */
export const estimateTokens = (text: string): number => Math.ceil(text.length / charactersPerToken)
