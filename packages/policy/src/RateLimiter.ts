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
import { type DurationInput } from "#effect-line"
import * as Effect from "effect/Effect"
import type * as Failure from "./Failure.js"
import * as FastPath from "./internal/fastPath.js"
import { free, makeShared } from "./internal/rateLimiter.js"
import type { InvalidSettings } from "./Settings.js"

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
  readonly burst?: DurationInput | undefined
  /** Share of the burst a batch call may not take, kept for interactive calls. Default 0.5. */
  readonly interactiveReserve?: number | undefined
  /** Whether the provider's limit headers lower the limits. Default true. */
  readonly learn?: boolean | undefined
}

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

/** Builds a limiter in memory. Bad options fail with `InvalidSettings`, when the program is assembled. */
export const make = (options: Options): Effect.Effect<Service, InvalidSettings> => makeShared(options)

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
