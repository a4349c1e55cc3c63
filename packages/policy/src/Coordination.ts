/**
 * Where each target's retry budget, concurrency gate and rate limiter live: the one seam through
 * which every resilient call gets them, whether it is made by `Resilient.retry` or by a `ModelClient`.
 *
 * By default they live in this process. Providing another `Coordination` moves them, with no
 * change to the code that calls: `RedisCoordination` (in `@resilient-ai/redis`) shares them across
 * a fleet, and `layerWith` swaps one part in a test:
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
 * A target's budget and gate are made on first use and then shared by every call to that target
 * (and API key) through the same `Coordination`, so two clients or two policies of one target
 * spend one budget. They are kept for as long as the coordination lives (the process's own, for
 * the process): a target is a deployment's, few and named in advance, never one per request. The API key is passed along so a fleet can share per key (a provider's limits
 * are per key), and is the implementation's to fingerprint, never to store.
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as ConcurrencyGate from "./ConcurrencyGate.js"
import { Learned } from "./internal/learned.js"
import * as RateLimiter from "./RateLimiter.js"
import * as RetryBudget from "./RetryBudget.js"
import type { InvalidSettings } from "./Settings.js"

/** The budget of one target, called with one API key. */
export interface BudgetOptions extends RetryBudget.Options {
  readonly target: string
  readonly apiKey?: Redacted.Redacted | undefined
}

/** The gate of one target, called with one API key. */
export interface GateOptions extends ConcurrencyGate.Options {
  readonly apiKey?: Redacted.Redacted | undefined
}

/** The rate limiter of one target, called with one API key (a provider's limits are per key). */
export interface RateLimiterOptions extends RateLimiter.Options {
  readonly apiKey?: Redacted.Redacted | undefined
}

/** Builds budgets, gates and rate limiters. Bad options fail with `InvalidSettings` naming them, as `RetryBudget.make` does. */
export interface Service {
  readonly budget: (options: BudgetOptions) => Effect.Effect<RetryBudget.Service, InvalidSettings>
  readonly gate: (options: GateOptions) => Effect.Effect<ConcurrencyGate.Service, InvalidSettings>
  /** Without it, each target's rate limiter is in this process's memory. */
  readonly rateLimiter?:
    | ((options: RateLimiterOptions) => Effect.Effect<RateLimiter.Service, InvalidSettings>)
    | undefined
}

/** Where budgets and gates live. Optional: without it, they live in the process. */
export class Coordination extends Context.Tag("@resilient-ai/policy/Coordination")<Coordination, Service>() {}

/** Budgets and gates in this process's memory. */
export const makeMemory = (): Service => ({
  budget: (options) => RetryBudget.make(options),
  gate: (options) => ConcurrencyGate.make(options),
  rateLimiter: (options) => RateLimiter.make(options)
})

/** The process's own coordination: what is used when no `Coordination` is provided. */
export const memory: Service = makeMemory()

/** Provides a coordination in memory of its own: its targets share nothing with another's. */
export const layerMemory: Layer.Layer<Coordination> = Layer.sync(Coordination, makeMemory)

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
}): Layer.Layer<Coordination> =>
  Layer.sync(Coordination, () => {
    const base = makeMemory()
    const { budget, gate, rateLimiter } = parts
    return {
      budget: budget === undefined ? base.budget : () => Effect.succeed(budget),
      gate: gate === undefined ? base.gate : () => Effect.succeed(gate),
      rateLimiter: rateLimiter === undefined ? base.rateLimiter : () => Effect.succeed(rateLimiter)
    }
  })

/** The `Coordination` in context, or `memory`. */
export const current: Effect.Effect<Service> = Effect.map(
  Effect.serviceOption(Coordination),
  (coordination) => coordination._tag === "Some" ? coordination.value : memory
)

/** What a target's budget and gate are made from, on first use. */
export interface TargetOptions {
  readonly target: string
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
}

/** A target's state from a budget and a gate (and a rate limiter) made elsewhere: for `Resilient.retryWith`. */
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

/** A target's services, once made; or the making that callers who came meanwhile wait for. */
type Entry =
  | { readonly _tag: "Made"; readonly services: TargetServices }
  | { readonly _tag: "Making"; readonly made: Deferred.Deferred<TargetServices, InvalidSettings> }

// Each coordination's targets, by name, then by API key (the `Redacted` a target holds).
const targetsOf = new WeakMap<Service, Map<string, Map<Redacted.Redacted | undefined, Entry>>>()

const entriesOf = (coordination: Service, target: string): Map<Redacted.Redacted | undefined, Entry> => {
  let targets = targetsOf.get(coordination)
  if (targets === undefined) targetsOf.set(coordination, targets = new Map())
  let byKey = targets.get(target)
  if (byKey === undefined) targets.set(target, byKey = new Map())
  return byKey
}

/** The services of `target` in `coordination`, if they were made already: the hot path of a call. */
export const madeServices = (
  coordination: Service,
  target: string,
  apiKey?: Redacted.Redacted | undefined
): TargetServices | undefined => {
  const entry = targetsOf.get(coordination)?.get(target)?.get(apiKey)
  return entry?._tag === "Made" ? entry.services : undefined
}

/**
 * The budget and gate of a target in `coordination`: made from `options` on first use, then the
 * same for every caller of that target and API key (the settings of later callers are not read).
 * Callers that come while they are being made wait for them; a failure to make them is each
 * waiter's, and the next caller tries again.
 */
export const servicesOf = (
  coordination: Service,
  options: TargetOptions
): Effect.Effect<TargetServices, InvalidSettings> =>
  Effect.suspend(() => {
    const entries = entriesOf(coordination, options.target)
    const entry = entries.get(options.apiKey)
    if (entry !== undefined) return entry._tag === "Made" ? Effect.succeed(entry.services) : Deferred.await(entry.made)
    const made = Deferred.unsafeMake<TargetServices, InvalidSettings>(FiberId.none)
    entries.set(options.apiKey, { _tag: "Making", made })
    const { apiKey, target } = options
    const limiterOptions = { ...options.rateLimit, target, apiKey }
    return Effect.all({
      budget: coordination.budget({ ...options.budget, target, apiKey }),
      gate: coordination.gate({ limit: Number.POSITIVE_INFINITY, ...options.gate, target, apiKey }),
      limiter: coordination.rateLimiter?.(limiterOptions) ?? RateLimiter.make(limiterOptions)
    }).pipe(
      Effect.map(targetServices),
      // Made whole or not at all: an interrupted maker would leave its waiters waiting.
      Effect.uninterruptible,
      Effect.onExit((exit) => {
        if (Exit.isSuccess(exit)) entries.set(apiKey, { _tag: "Made", services: exit.value })
        else entries.delete(apiKey)
        return Deferred.done(made, exit)
      })
    )
  })
