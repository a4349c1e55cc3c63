/**
 * The shortcuts and hooks the engine uses when a budget, gate or limiter offers them, kept off
 * their public interfaces under one symbol-keyed member: a service written with the documented
 * methods only (a user's fake) works without them, and the engine takes the documented way.
 *
 * The toolkit's own services (in memory, on Redis, the storm's reference budgets) carry them: the
 * synchronous forms spare a call an effect on its hot path, and the hooks let other budget designs
 * run on the same engine (some count every call, some spend on every failed attempt).
 */
import type * as Effect from "effect/Effect"
import type * as ConcurrencyGate from "../ConcurrencyGate.js"
import type * as RateLimiter from "../RateLimiter.js"
import type * as RetryBudget from "../RetryBudget.js"

/** The member's key. */
export const key: unique symbol = Symbol.for("@resilient-ai/policy/FastPath")

/** What a budget offers the engine besides its documented methods. */
export interface Budget {
  /** `recordSuccess` without an effect, for a budget that keeps its window in this process. */
  readonly recordSuccessNow?: ((attempts: number) => void) | undefined
  /** Called once when a logical call starts, before its first attempt. */
  readonly recordCall?: Effect.Effect<void> | undefined
  /** Called for every failed attempt, with its number (above 1: a retry that did not pay). */
  readonly recordFailure?: ((failure: unknown, attempt: number) => Effect.Effect<void>) | undefined
}

/** What a gate offers the engine besides its documented methods. */
export interface Gate {
  /**
   * Takes a permit at once, without an effect, when one is free and nobody waits for it; `false`
   * means: ask `acquire`. For the hot path of a call, which runs it where it cannot be interrupted.
   */
  readonly tryAcquireNow?: (() => boolean) | undefined
  /** `release` without an effect, for a permit `tryAcquireNow` or `acquire` gave. */
  readonly releaseNow?: ((outcome: ConcurrencyGate.Outcome) => void) | undefined
  /**
   * What the target's health probe says: `true` while it finds the provider down, so a lucky call
   * does not start the recovery ramp, which starts when the probe says the provider is back
   * (`markRecovered`); `false` gives recovery back to the calls' successes.
   */
  readonly holdRecovery?: ((held: boolean) => Effect.Effect<void>) | undefined
}

/** What a limiter offers the engine besides its documented methods. */
export interface Limiter {
  /** Takes the place at once, without an effect, when no wait is needed; `undefined` means: ask `admit`. */
  readonly admitNow?: ((tokens: number, lane: RateLimiter.Lane) => RateLimiter.Reservation | undefined) | undefined
}

/** A service with the engine's member. */
export type With<S, F> = S & { readonly [key]: F }

/** What `budget` offers the engine, if anything. */
export const budget = (budget: RetryBudget.Service): Budget | undefined =>
  (budget as Partial<With<RetryBudget.Service, Budget>>)[key]

/** What `gate` offers the engine, if anything. */
export const gate = (gate: ConcurrencyGate.Service): Gate | undefined =>
  (gate as Partial<With<ConcurrencyGate.Service, Gate>>)[key]

/** What `limiter` offers the engine, if anything. */
export const limiter = (limiter: RateLimiter.Service): Limiter | undefined =>
  (limiter as Partial<With<RateLimiter.Service, Limiter>>)[key]
