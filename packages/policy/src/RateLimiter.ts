/**
 * Paces a target's calls under the provider's per-key limits, requests per minute and tokens per
 * minute, so a process (or, on Redis, a fleet) stays under them instead of finding them through 429s.
 *
 * Each attempt reserves its place before it is sent: one request, and the tokens it may use (its
 * prompt's estimate and its `max_tokens`, which is what providers count a request at when it
 * arrives). The reservation is settled with the `usage` the provider reports: tokens not used are
 * given back, tokens used beyond the estimate are owed. An attempt that would go over the limit
 * waits for its turn when its turn comes before its deadline, and otherwise fails at once with
 * `RateLimitedLocally`, which says when capacity returns: it never starts a wait it cannot finish.
 *
 * Pacing is GCRA (the generic cell rate algorithm, a token bucket kept as one instant per limit):
 * capacity returns continuously, at the limit's rate, with a burst of `burst` (1 s) of it at once,
 * never a whole minute's worth at the top of the minute. A reservation may run the bucket into debt
 * (a request larger than the burst still goes, and those after it wait for its tokens).
 *
 * Two lanes share the key. An `interactive` call reserves its turn, first come first served, and
 * waits for it. A `batch` call only goes while the bucket holds more than `interactiveReserve` of
 * the burst, and otherwise waits without reserving, so an interactive call that arrives meanwhile
 * goes first: a batch job saturating the key leaves an interactive caller a bounded wait.
 *
 * Limits are settings, and are learned from the provider's `x-ratelimit-limit-*` (OpenAI, Mistral)
 * and `anthropic-ratelimit-*-limit` headers: the lower of the setting and the provider's number
 * holds. Without either, calls are not paced.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Failure from "./Failure.js"
import * as FastPath from "./internal/fastPath.js"
import * as Checked from "./Settings.js"

/** Which calls yield first under pressure. */
export type Lane = "interactive" | "batch"

/** The limits a provider states for a key, per minute. */
export interface Limits {
  readonly requestsPerMinute?: number | undefined
  readonly tokensPerMinute?: number | undefined
}

/** Settings of a limiter. */
export interface Options extends Limits {
  /** Names the target in `RateLimitedLocally` failures. */
  readonly target: string
  /** How much of the limit may go at once. Default 1 second's worth. */
  readonly burst?: Duration.DurationInput | undefined
  /** Share of the burst a batch call may not take, kept for interactive calls. Default 0.5. */
  readonly interactiveReserve?: number | undefined
  /** Whether the provider's limit headers lower the limits. Default true. */
  readonly learn?: boolean | undefined
}

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

const LimiterSettings = Schema.Struct({
  target: Checked.nonEmpty,
  requestsPerMinute: perMinute,
  tokensPerMinute: perMinute,
  burst: Checked.withDefault(Checked.finitePositiveDuration, Duration.seconds(1)),
  interactiveReserve: Checked.withDefault(
    Checked.number.pipe(Schema.filter((share) => (share >= 0 && share < 1) || `must be in [0, 1), got ${share}`)),
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

/** What one attempt asks of the limiter. */
export interface Demand {
  /** The tokens the attempt may use: its prompt's estimate and its `max_tokens`. */
  readonly tokens: number
  readonly lane: Lane
  /** The caller's deadline (epoch ms): a turn after it is refused at once. */
  readonly deadline: number
}

/** A place taken: settled with what the provider says was used, or given back if the attempt never ran. */
export interface Reservation {
  /** The tokens reserved. */
  readonly tokens: number
  /** The provider reported `used` tokens: the difference is given back, or owed. */
  readonly settle: (used: number) => Effect.Effect<void>
  /** The attempt was not sent (or the provider refused it unread): its request and tokens go back. */
  readonly giveBack: Effect.Effect<void>
}

/** What the limiter holds now: the limits in force, and how far ahead each is reserved. */
export interface Snapshot {
  readonly requestsPerMinute: number
  readonly tokensPerMinute: number
  /** How far the requests' bucket is reserved past the burst, in milliseconds (0: it has room). */
  readonly requestsWaitMillis: number
  readonly tokensWaitMillis: number
}

/** A target's pacing. */
export interface Service {
  /**
   * Takes the attempt's place: at once, after waiting for its turn, or not at all
   * (`RateLimitedLocally`) when its turn comes after its deadline. Interrupting the wait gives the
   * place back.
   */
  readonly admit: (demand: Demand) => Effect.Effect<Reservation, Failure.RateLimitedLocally>
  /** The provider's limits, read from an answer's headers: they lower the settings'. */
  readonly learn: (limits: Limits) => Effect.Effect<void>
  readonly snapshot: Effect.Effect<Snapshot>
}

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
): Effect.Effect<Reservation | "wait", Failure.RateLimitedLocally> => {
  switch (decision._tag) {
    case "refused":
      return Effect.fail(refusal(target, decision, now))
    case "wait":
      return Effect.as(Effect.sleep(Duration.millis(Math.ceil(decision.at - now))), "wait" as const)
    case "reserved": {
      const place = taken()
      if (decision.at <= now) return Effect.succeed(place)
      return Effect.as(
        Effect.onInterrupt(Effect.sleep(Duration.millis(Math.ceil(decision.at - now))), () => place.giveBack),
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
  decideNow: (demand: Demand) => Effect.Effect<Reservation | "wait", Failure.RateLimitedLocally>,
  nextTurn: () => number
): (demand: Demand) => Effect.Effect<Reservation, Failure.RateLimitedLocally> => {
  const batchLine = Effect.unsafeMakeSemaphore(1)
  const untilAdmitted = (demand: Demand): Effect.Effect<Reservation, Failure.RateLimitedLocally> =>
    Effect.flatMap(decideNow(demand), (decided) => decided === "wait" ? untilAdmitted(demand) : Effect.succeed(decided))
  const inBatchLine = (demand: Demand): Effect.Effect<Reservation, Failure.RateLimitedLocally> => {
    const waited = batchLine.withPermits(1)(untilAdmitted(demand))
    if (!Number.isFinite(demand.deadline)) return waited
    return Effect.timeoutFail(waited, {
      duration: Duration.millis(Math.max(0, demand.deadline - now())),
      onTimeout: () => refusal(target, { _tag: "refused", at: nextTurn(), dimension: "requests" }, now())
    })
  }
  return (demand) =>
    Effect.flatMap(decideNow(demand), (decided) => decided === "wait" ? inBatchLine(demand) : Effect.succeed(decided))
}

/** The failure of a demand whose turn comes after its deadline. */
export const refusal = (target: string, decision: Extract<Decision, { _tag: "refused" }>, now: number) =>
  new Failure.RateLimitedLocally({
    target,
    dimension: decision.dimension,
    availableAt: decision.at,
    retryAfter: Duration.millis(Math.ceil(decision.at - now))
  })

/**
 * Builds a limiter in memory (with `share`, one process's part of a fleet's limits). Bad options
 * fail with `InvalidSettings`, when the program is assembled.
 */
export const make = (options: Options, share?: () => number): Effect.Effect<Service, Checked.InvalidSettings> =>
  Effect.flatMap(Effect.suspend(() => settings(options)), (checked) =>
    Effect.map(Effect.clock, (clock) => {
      const pacer = new Pacer(checked, share)
      const now = () => clock.unsafeCurrentTimeMillis()
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
      const pacedAdmit = (demand: Demand): Effect.Effect<Reservation, Failure.RateLimitedLocally> =>
        Effect.suspend(() => pacer.pacing ? admit(demand) : Effect.succeed(free))
      const service: FastPath.With<Service, FastPath.Limiter> = {
        admit: pacedAdmit,
        learn: (limits) => Effect.sync(() => pacer.learn(limits)),
        snapshot: Effect.sync(() => pacer.snapshot(now())),
        [FastPath.key]: { admitNow }
      }
      return service
    }))

const unlimitedLimiter: FastPath.With<Service, FastPath.Limiter> = {
  admit: () => Effect.succeed(free),
  learn: () => Effect.void,
  snapshot: Effect.succeed({
    requestsPerMinute: Number.POSITIVE_INFINITY,
    tokensPerMinute: Number.POSITIVE_INFINITY,
    requestsWaitMillis: 0,
    tokensWaitMillis: 0
  }),
  [FastPath.key]: { admitNow: () => free }
}

/** A limiter that paces nothing: for a test that wants it out of the way. */
export const unlimited: Service = unlimitedLimiter

/**
 * About four characters a token in English text (fewer in code and other scripts): how an attempt's
 * prompt is counted before the provider counts it exactly, and settles the difference.
 */
export const charactersPerToken = 4

/** A rough count of the tokens of `text`. */
export const estimateTokens = (text: string): number => Math.ceil(text.length / charactersPerToken)
