/**
 * `Coordination` with what only the toolkit uses of it: a coordination's shape (its targets' state,
 * and the one way to it), what a target's state is, and a target's state from parts made elsewhere
 * (the storm's, a test's).
 */
import { type RefValue } from "#effect-line"
import type * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import type * as ConcurrencyGate from "../ConcurrencyGate.js"
import * as RateLimiter from "../RateLimiter.js"
import type * as RetryBudget from "../RetryBudget.js"
import type { InvalidSettings } from "../Settings.js"
import { Learned } from "./learned.js"

export * from "../Coordination.js"

/**
 * A part's options for one target called with one API key (what `Makers` are given): the target's
 * name, and the key's fingerprint, never the key; none without a key.
 */
export type ForKey<Options> = Options & {
  readonly target: string
  readonly keyFingerprint?: string | undefined
}

/** What a target's budget and gate are made from, on first use. */
export interface TargetOptions {
  readonly target: string
  /** Read for its fingerprint only. */
  readonly apiKey?: Redacted.Redacted | undefined
  readonly budget?: RetryBudget.Options | undefined
  /** Without one, in-flight calls are not limited (the target's health is still tracked). */
  readonly gate?: Omit<ConcurrencyGate.Options, "target"> | undefined
  /** Without limits, calls are paced only once the provider's headers state them. */
  readonly rateLimit?: Omit<RateLimiter.Options, "target"> | undefined
}

/** A target's state: its budget, gate and rate limiter, and what its calls have learned (per model). */
export interface TargetServices {
  readonly budget: RetryBudget.Service
  readonly gate: ConcurrencyGate.Service
  readonly limiter: RateLimiter.Service
  readonly learned: Learned
  /**
   * FiberRef values every attempt of the target runs with, such as `HttpClient.currentTracerPropagation`:
   * given to each attempt's fiber as it is made, where an `Effect.locally` around every call would
   * copy the fiber's refs twice per call.
   */
  readonly attemptRefs?: ReadonlyArray<RefValue> | undefined
}

/** A coordination: its targets' state, and the one way to it. */
export interface Service {
  /**
   * The state of every target made so far, by name, then by the fingerprint of its API key
   * (`undefined` for calls without one, such as `Resilient.retry`'s).
   */
  readonly targets: ReadonlyMap<string, ReadonlyMap<string | undefined, TargetServices>>
  /**
   * The state of a target: made from `options` on first use, then the same for every caller of that
   * target and API key (the settings of later callers are not read). Callers that come while it is
   * being made wait for it; a failure to make it is each waiter's, and the next caller tries again.
   */
  readonly stateOf: (options: TargetOptions) => Effect.Effect<TargetServices, InvalidSettings>
}

/** A target's state from a budget and a gate (and a rate limiter) made elsewhere: for `retryWith`. */
export const targetServices = (parts: {
  readonly budget: RetryBudget.Service
  readonly gate: ConcurrencyGate.Service
  readonly limiter?: RateLimiter.Service | undefined
}): TargetServices => ({
  budget: parts.budget,
  gate: parts.gate,
  limiter: parts.limiter ?? RateLimiter.unlimited,
  learned: new Learned()
})
