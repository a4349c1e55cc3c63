import { unwrapLayer } from "#test-line"
/** Helpers shared by the policy tests: scripted attempts, their arrival times, captured log lines. */
import { ConcurrencyGate, Coordination, type Failure, Resilient, RetryBudget, Settings } from "@resilient-ai/policy"
import { EffectLine, Either, Policies } from "@resilient-ai/policy/internal"
import { Cause, Clock, Effect, Exit, Layer, Option, Ref } from "effect"
import type { Schedule, Scope } from "effect"

/** One scripted attempt: fail with a failure, succeed with a value, or run an effect. */
export type Step<A> =
  | { readonly fail: Failure.Failure; readonly after?: number }
  | { readonly succeed: A; readonly after?: number }
  | { readonly run: Effect.Effect<A, Failure.Failure> }

export interface Arrival {
  readonly at: number
  readonly info: Resilient.AttemptInfo | undefined
}

/**
 * An attempt that plays `steps` in order (the last one repeats), recording when each attempt
 * started and the `AttemptInfo` it saw.
 */
export const scripted = <A>(steps: ReadonlyArray<Step<A>>) =>
  Effect.gen(function*() {
    const arrivals = yield* Ref.make<ReadonlyArray<Arrival>>([])
    const attempt: Effect.Effect<A, Failure.Failure> = Effect.gen(function*() {
      const at = yield* Clock.currentTimeMillis
      const info = yield* EffectLine.getRef(Resilient.CurrentAttempt)
      const index = (yield* Ref.getAndUpdate(arrivals, (all) => [...all, { at, info }])).length
      const step = steps[Math.min(index, steps.length - 1)]!
      if ("run" in step) return yield* step.run
      if (step.after !== undefined) yield* Effect.sleep(step.after)
      if ("fail" in step) return yield* Effect.fail(step.fail)
      return step.succeed
    })
    return { attempt, arrivals: Ref.get(arrivals), times: Effect.map(Ref.get(arrivals), (all) => all.map((a) => a.at)) }
  })

/** The budget and gate a test's calls use, for a test that reads or drives them. */
export class Parts extends EffectLine.Service<Parts, {
  readonly budget: RetryBudget.Service
  readonly gate: ConcurrencyGate.Service
}>()("test/Parts") {}

/**
 * A `Coordination` whose targets all get an in-memory budget and an ample queueing gate for
 * `target` (or the `budget` given), and the two as `Parts`; settings that cannot work fail the test.
 */
export const services = (
  target: string,
  options: {
    readonly budget?: RetryBudget.Options | RetryBudget.Service
    readonly gate?: Partial<ConcurrencyGate.Options>
  } = {}
): Layer.Layer<Parts> =>
  unwrapLayer(
    Effect.gen(function*() {
      const budget = options.budget !== undefined && "tryAcquire" in options.budget
        ? options.budget
        : yield* RetryBudget.make(options.budget as RetryBudget.Options | undefined)
      const gate = yield* ConcurrencyGate.make({ target, limit: 100, ...options.gate })
      return Layer.merge(Layer.succeed(Parts, { budget, gate }), Coordination.layerWith({ budget, gate }))
    }).pipe(Effect.orDie)
  )

/**
 * A policy for a test: its settings are the test's own, so one that cannot work fails the test. A
 * `schedule` replaces full jitter and reads no hint, as the storm's reference policies do.
 */
export const policyOf = (
  options: Resilient.PolicyOptions & { readonly schedule?: Schedule.Schedule<unknown, Failure.Failure> | undefined }
): Resilient.Policy => {
  const { schedule, ...settings } = options
  return Effect.runSync(
    schedule === undefined
      ? Resilient.policy(settings)
      : Policies.withSchedule(settings, schedule, { readsHints: false })
  )
}

/** Settings a test knows to be good: a bad one fails the test. */
export const valid = <A>(checked: Either.Either<A, Settings.InvalidSettings>): A =>
  Either.getOrThrowWith(checked, (invalid) => new Error(invalid.message))

/**
 * The message of the `InvalidSettings` that `effect` (a constructor, or `Layer.build` of a layer)
 * fails with, run at once; a success, a defect or any other failure fails the test.
 */
export const invalidSettings = (effect: Effect.Effect<unknown, unknown, Scope.Scope>): string => {
  const exit = Effect.runSyncExit(Effect.scoped(effect))
  if (Exit.isSuccess(exit)) throw new Error("built, though its settings cannot work")
  const failure = EffectLine.failureOf(exit.cause)
  if (Option.isNone(failure) || !(failure.value instanceof Settings.InvalidSettings)) {
    throw new Error(`not an InvalidSettings: ${Cause.pretty(exit.cause)}`)
  }
  return failure.value.message
}

let targets = 0
/** A target name no other test uses, so metrics read back belong to this test alone. */
export const freshTarget = (name: string) => `${name}-${++targets}`

/** A logger that keeps every line, with its annotations. */
export { captureLogs } from "#test-line"

/** The typed failure `exit` ended with; throws, saying what it got instead, on a success or a defect. */
export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  if (Exit.isSuccess(exit)) throw new Error(`expected a failure, got ${String(exit.value)}`)
  const failure = EffectLine.failureOf(exit.cause)
  if (Option.isNone(failure)) throw new Error(`expected a typed failure, got ${Cause.pretty(exit.cause)}`)
  return failure.value
}
