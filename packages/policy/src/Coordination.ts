/**
 * Where each target's retry budget and concurrency gate live: in this process (the default), or
 * shared by every process of a fleet (`RedisCoordination` in `@resilient-ai/redis`).
 *
 * Clients ask for their target's budget and gate when they are built, so moving an application
 * from one process to a fleet is providing one more layer, with no change to the code that calls.
 * The API key is passed along so a fleet can share per key (a provider's limits are per key), and
 * is the implementation's to fingerprint, never to store.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as ConcurrencyGate from "./ConcurrencyGate.js"
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

/** Builds budgets and gates. Bad options fail with `InvalidSettings` naming them, as `RetryBudget.make` does. */
export interface Service {
  readonly budget: (options: BudgetOptions) => Effect.Effect<RetryBudget.Service, InvalidSettings>
  readonly gate: (options: GateOptions) => Effect.Effect<ConcurrencyGate.Service, InvalidSettings>
}

/** Where budgets and gates live. Optional: without it, they live in the process. */
export class Coordination extends Context.Tag("@resilient-ai/policy/Coordination")<Coordination, Service>() {}

/** Budgets and gates in this process's memory. */
export const memory: Service = {
  budget: (options) => RetryBudget.make(options),
  gate: (options) => ConcurrencyGate.make(options)
}

/** Provides `memory`: what is used when no `Coordination` is provided. */
export const layerMemory: Layer.Layer<Coordination> = Layer.succeed(Coordination, memory)

/** The `Coordination` in context, or `memory`. */
export const current: Effect.Effect<Service> = Effect.map(
  Effect.serviceOption(Coordination),
  Option.getOrElse(() => memory)
)
