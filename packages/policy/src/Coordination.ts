/**
 * Where each target's retry budget, concurrency gate and rate limiter live: the one seam through
 * which every resilient call gets them, whether it is made by `Resilient.retry` or by a `ModelClient`.
 *
 * A coordination holds its targets' state itself. Without one provided, the calls of a program use
 * `Coordination`'s default value (Effect makes it once, on first use, as it makes every
 * `Context.Reference`'s), whose state is in this process's memory. Providing another moves it, with
 * no change to the code that calls: `layerMemory` gives a program state of its own, `RedisCoordination`
 * (in `@resilient-ai/redis`) shares it across a fleet, and `layerWith` swaps one part in a test:
 *
 * ```ts
 * import { Coordination, RetryBudget } from "@resilient-ai/policy"
 * import { Effect } from "effect"
 *
 * declare const program: Effect.Effect<void>
 * // Every target's budget grants every retry; the gates are this process's as usual.
 * program.pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.unlimited })))
 * ```
 *
 * A target's budget, gate and rate limiter are made on first use and then shared by every call to
 * that target and API key through the same coordination, so two clients or two policies of one
 * target spend one budget. The key counts by its text (a provider's limits are per key): two
 * `Redacted` holding the same key are one key. Only its fingerprint is kept, and given to the
 * makers; never the key. A coordination keeps its targets for as long as it lives: a target is a
 * deployment's, few and named in advance, never one per request.
 */
import { makeDeferredUnsafe, type Reference, reference } from "#effect-line"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ConcurrencyGate from "./ConcurrencyGate.js"
import {
  type ForKey,
  type Service,
  type TargetOptions,
  type TargetServices,
  targetServices
} from "./internal/coordination.js"
import { keyFingerprint } from "./internal/keyFingerprint.js"
import * as RateLimiter from "./RateLimiter.js"
import * as RetryBudget from "./RetryBudget.js"
import type { InvalidSettings } from "./Settings.js"

/**
 * How a coordination makes a target's parts, for a coordination of your own (as `RedisCoordination`
 * makes Redis's). Each maker is given the part's options for one target and API key: the target's
 * name, and the key's fingerprint (the first 16 hexadecimal digits of its text's SHA-256), never the
 * key; none without a key. A provider's limits are per key, so each key of a target has parts of its
 * own. Bad options fail with `InvalidSettings` naming them, as `RetryBudget.make` does.
 */
export interface Makers {
  readonly budget: (options: ForKey<RetryBudget.Options>) => Effect.Effect<RetryBudget.Service, InvalidSettings>
  readonly gate: (options: ForKey<ConcurrencyGate.Options>) => Effect.Effect<ConcurrencyGate.Service, InvalidSettings>
  /** Without it, each target's rate limiter is in this process's memory. */
  readonly rateLimiter?:
    | ((options: ForKey<RateLimiter.Options>) => Effect.Effect<RateLimiter.Service, InvalidSettings>)
    | undefined
}

/** Budgets, gates and rate limiters in this process's memory. */
const inMemory: Makers = {
  budget: (options) => RetryBudget.make(options),
  gate: (options) => ConcurrencyGate.make(options),
  rateLimiter: (options) => RateLimiter.make(options)
}

/** The map under `key` in `maps`, made if missing. */
const mapOf = <K, V>(maps: Map<string, Map<K, V>>, key: string): Map<K, V> => {
  let map = maps.get(key)
  if (map === undefined) maps.set(key, map = new Map())
  return map
}

/** A coordination with a registry of its own, whose parts `makers` make. */
const unsafeMake = (makers: Makers): Service => {
  const targets = new Map<string, Map<string | undefined, TargetServices>>()
  // The targets being made, by name and fingerprint: callers who come meanwhile wait for these.
  const making = new Map<string, Map<string | undefined, Deferred.Deferred<TargetServices, InvalidSettings>>>()
  const stateOf = (options: TargetOptions): Effect.Effect<TargetServices, InvalidSettings> =>
    Effect.suspend(() => {
      const { target } = options
      const fingerprint = keyFingerprint(options.apiKey)
      const made = targets.get(target)?.get(fingerprint)
      if (made !== undefined) return Effect.succeed(made)
      const waiting = making.get(target)?.get(fingerprint)
      if (waiting !== undefined) return Deferred.await(waiting)
      const deferred = makeDeferredUnsafe<TargetServices, InvalidSettings>()
      mapOf(making, target).set(fingerprint, deferred)
      const limiterOptions = { ...options.rateLimit, target, keyFingerprint: fingerprint }
      return Effect.all({
        budget: makers.budget({ ...options.budget, target, keyFingerprint: fingerprint }),
        gate: makers.gate({ limit: Number.POSITIVE_INFINITY, ...options.gate, target, keyFingerprint: fingerprint }),
        limiter: makers.rateLimiter?.(limiterOptions) ?? RateLimiter.make(limiterOptions)
      }).pipe(
        Effect.map(targetServices),
        // Made whole or not at all: an interrupted maker would leave its waiters waiting.
        Effect.uninterruptible,
        Effect.onExit((exit) => {
          const pending = making.get(target)
          pending?.delete(fingerprint)
          if (pending?.size === 0) making.delete(target)
          if (Exit.isSuccess(exit)) mapOf(targets, target).set(fingerprint, exit.value)
          return Deferred.done(deferred, exit)
        })
      )
    })
  return { targets, stateOf }
}

/**
 * Where targets' state lives. Optional: without one provided, its default value, a coordination in
 * this process's memory made once for the process, is used.
 */
export const Coordination: Reference<Service> = reference(
  "@resilient-ai/policy/Coordination",
  () => unsafeMake(inMemory)
)

/** A coordination: the `Service` it provides. */
export type Coordination = Service

/**
 * A coordination whose targets' parts `makers` make (those not given are in this process's
 * memory), holding their state itself: what `RedisCoordination` makes from Redis's parts.
 */
export const make = (makers: {
  readonly budget?: Makers["budget"] | undefined
  readonly gate?: Makers["gate"] | undefined
  readonly rateLimiter?: Makers["rateLimiter"] | undefined
} = {}): Effect.Effect<Service> =>
  Effect.sync(() =>
    unsafeMake({
      budget: makers.budget ?? inMemory.budget,
      gate: makers.gate ?? inMemory.gate,
      rateLimiter: makers.rateLimiter ?? inMemory.rateLimiter
    })
  )

/** Provides a coordination in memory of its own: its targets share nothing with another's. */
export const layerMemory: Layer.Layer<never> = Layer.effect(Coordination, make())

/**
 * Provides a coordination in memory whose targets all get the given `budget` and/or `gate` instead
 * of their own: for a test that swaps one part, such as `RetryBudget.unlimited`, a
 * `RetryBudget.recording` or `ConcurrencyGate.unbounded`.
 *
 * ```ts
 * import { Coordination, type Failure, RetryBudget } from "@resilient-ai/policy"
 * import { Effect } from "effect"
 *
 * declare const findFortyTwo: Effect.Effect<string, Failure.CallFailed<Failure.Failure>>
 * // A budget that grants nothing: the call stops after its first attempt.
 * findFortyTwo.pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.disabled })))
 * ```
 */
export const layerWith = (parts: {
  readonly budget?: RetryBudget.Service | undefined
  readonly gate?: ConcurrencyGate.Service | undefined
  readonly rateLimiter?: RateLimiter.Service | undefined
}): Layer.Layer<never> => {
  const { budget, gate, rateLimiter } = parts
  return Layer.effect(
    Coordination,
    make({
      budget: budget === undefined ? undefined : () => Effect.succeed(budget),
      gate: gate === undefined ? undefined : () => Effect.succeed(gate),
      rateLimiter: rateLimiter === undefined ? undefined : () => Effect.succeed(rateLimiter)
    })
  )
}
