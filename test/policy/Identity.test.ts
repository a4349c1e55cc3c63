/**
 * The toolkit's failures are known by their type id, not their tag: a caller's own error named like
 * one of ours (`RateLimited`, `ReadTimeout`) is the caller's, judged by its `classify` and never read
 * by the gate as the provider's overload.
 */
import { TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Coordination, Failure, Resilient, RetryBudget } from "@resilient-ai/policy"
import { Diagnoses, EffectLine, Either, Failures, Gates } from "@resilient-ai/policy/internal"
import { Data, Duration, Effect, Fiber } from "effect"
import { failureOf, freshTarget, policyOf } from "./support.js"

/** A caller's own errors, tagged like two of the toolkit's. */
class RateLimited extends Data.TaggedError("RateLimited")<{}> {}
class ReadTimeout extends Data.TaggedError("ReadTimeout")<{}> {}

const settle = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const fiber = yield* EffectLine.fork(effect)
    yield* TestClock.adjust("10 minutes")
    return yield* Fiber.await(fiber)
  })

/** The state of `target` (called without an API key) in the `Coordination` in context, once made. */
const stateOf = (target: string) =>
  Effect.map(Coordination.Coordination, (coordination) => coordination.targets.get(target)?.get(undefined))

/** The health of `target`'s gate, read through the `Coordination` in context. */
const healthOf = (target: string) =>
  Effect.gen(function*() {
    const state = yield* stateOf(target)
    assert.isDefined(state, "the target's state was made")
    return (yield* state!.gate.snapshot).health
  })

/**
 * What the health diagnosis reads of `target`'s calls while `calls` run, and what it concludes with
 * the probe answering: the call totals before and after, in one 30-second window.
 */
const diagnosedAround = <A, E, R>(target: string, calls: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const diagnoser = new Diagnoses.Diagnoser(Either.getOrThrow(Diagnoses.settings({})))
    const up = { up: true, millis: 20 }
    diagnoser.observe(0, up, Diagnoses.callTotals(target, yield* stateOf(target)))
    const result = yield* calls
    const step = diagnoser.observe(10_000, up, Diagnoses.callTotals(target, yield* stateOf(target)))
    return { result, diagnosis: step.diagnosis, trouble: diagnoser.trouble() }
  })

/**
 * Eight attempts of an Effect failing with `errors` in turn, every one called retryable by a
 * `classify` that records what it judged; the gate degrades after 3 capacity failures in a row.
 */
const retriedEightTimes = <E extends { readonly _tag: string }>(target: string, errors: ReadonlyArray<E>) =>
  Effect.gen(function*() {
    const judged: Array<string> = []
    let attempts = 0
    const attempt = Effect.suspend(() => Effect.fail(errors[attempts++ % errors.length]!))
    const policy = policyOf({
      target,
      maxAttempts: 8,
      baseDelay: "10 millis",
      maxDelay: "10 millis",
      gate: { limit: 4, degradeAfter: 3 }
    })
    const exit = yield* settle(attempt.pipe(Resilient.retry(policy, {
      classify: (error: E) => {
        judged.push(error._tag)
        return "retryable"
      }
    })))
    return { failure: failureOf(exit), judged, attempts }
  })

describe("the toolkit's failures, known by their type id", () => {
  it("isFailure: a caller's error tagged like ours is not ours; ours is, whatever its fields", () => {
    assert.isFalse(Failure.isFailure(new RateLimited()))
    assert.isFalse(Failure.isFailure(new ReadTimeout()))
    assert.isFalse(Failure.isFailure({ _tag: "RateLimited", status: 429 }))
    assert.isTrue(Failure.isFailure(new Failure.RateLimited({ status: 429 })))
    assert.isTrue(Failure.isFailure(new Failure.ReadTimeout({ timeout: Duration.seconds(1), phase: "body" })))
    const stopped = new Failure.CallFailed({
      reason: "attempts",
      last: new Failure.RateLimited({ status: 429 }),
      attempts: [],
      target: "t"
    })
    // The aggregate has an id of its own: it is not an attempt's failure.
    assert.isFalse(Failure.isFailure(stopped))
    assert.isTrue(Failures.isCallFailed(stopped))
    assert.isFalse(Failures.isCallFailed({ _tag: "CallFailed", reason: "attempts" }))
    assert.isFalse(Failures.isCallFailed(new Failure.RateLimited({ status: 429 })))
  })

  it("the id is on the prototype, not a field: the name, message, fields and JSON are as before", () => {
    const ours = new Failure.RateLimited({ status: 429 })
    assert.strictEqual(ours._tag, "RateLimited")
    assert.strictEqual(ours.name, "RateLimited")
    assert.strictEqual(ours.message, "rate limited (HTTP 429)")
    assert.deepStrictEqual(Object.keys(ours).sort(), ["_tag", "status"])
    assert.isFalse(Object.getOwnPropertySymbols(ours).includes(Failures.TypeId))
    assert.deepStrictEqual(JSON.parse(JSON.stringify(ours)), { _tag: "RateLimited", status: 429 })
    assert.strictEqual(Failures.TypeId, Symbol.for("@resilient-ai/policy/Failure"))
  })

  it("the gate reads capacity only from the toolkit's failures", () => {
    assert.strictEqual(Gates.outcomeOf(new RateLimited()), "neutral")
    assert.strictEqual(Gates.outcomeOf(new ReadTimeout()), "neutral")
    assert.strictEqual(Gates.outcomeOf(new Failure.RateLimited({ status: 429 })), "overload")
  })

  it.effect("retried with classify, a caller's RateLimited and ReadTimeout are judged by it and leave the gate steady", () => {
    const target = freshTarget("own-tags")
    return Effect.gen(function*() {
      const { attempts, failure, judged } = yield* retriedEightTimes(target, [new RateLimited(), new ReadTimeout()])
      assert.strictEqual(failure.reason, "attempts")
      assert.strictEqual(attempts, 8)
      assert.deepStrictEqual(
        failure.attempts.map((record) => record.outcome),
        Array.from({ length: 8 }, (_, index) => index % 2 === 0 ? "RateLimited" : "ReadTimeout")
      )
      assert.deepStrictEqual(judged, failure.attempts.map((record) => record.outcome))
      // Every error was the classify's to judge, the toolkit's table none.
      assert.isFalse(Failure.isFailure(failure.last))
      // Eight in a row, past `degradeAfter` (3): had the gate read them as overload, it would be degraded.
      assert.strictEqual(yield* healthOf(target), "steady")
    }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.unlimited })))
  })

  it.effect("the toolkit's own RateLimited, retried the same way, degrades the gate", () => {
    const target = freshTarget("our-tags")
    return Effect.gen(function*() {
      const { failure } = yield* retriedEightTimes(target, [new Failure.RateLimited({ status: 429 })])
      assert.isTrue(Failure.isFailure(failure.last))
      assert.strictEqual(yield* healthOf(target), "degraded")
    }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.unlimited })))
  })

  it.effect("a caller's RateLimited, retried eight times, is no trouble the diagnosis reads; the toolkit's is", () => {
    const theirs = freshTarget("own-tags-health")
    const ours = freshTarget("our-tags-health")
    return Effect.gen(function*() {
      const caller = yield* diagnosedAround(theirs, retriedEightTimes(theirs, [new RateLimited()]))
      assert.strictEqual(caller.result.attempts, 8)
      assert.deepStrictEqual(caller.trouble, { ratio: 0, troubles: 0 })
      assert.strictEqual(caller.diagnosis, "healthy")
      const toolkit = yield* diagnosedAround(ours, retriedEightTimes(ours, [new Failure.RateLimited({ status: 429 })]))
      assert.strictEqual(toolkit.result.attempts, 8)
      assert.deepStrictEqual(toolkit.trouble, { ratio: 1, troubles: 8 })
      assert.strictEqual(toolkit.diagnosis, "self-inflicted")
    }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.unlimited })))
  })

  it.effect("a nested call's aggregate is known by its id: one made by another copy of the package is unwrapped too", () => {
    /** `CallFailed` as another copy of `@resilient-ai/policy` would make it: another class, the same id. */
    class OtherCopyCallFailed extends Data.TaggedError("CallFailed")<{
      readonly reason: Failure.StopReason
      readonly last: Failure.Failure
      readonly attempts: ReadonlyArray<Failure.AttemptRecord>
      readonly target: string
    }> {
      readonly [Failures.CallFailedTypeId]: Failures.CallFailedTypeId = Failures.CallFailedTypeId
    }
    const inner = new Failure.RateLimited({ status: 429 })
    const target = freshTarget("other-copy")
    return Effect.gen(function*() {
      let attempts = 0
      const nested = Effect.suspend(() => {
        attempts++
        return Effect.fail(new OtherCopyCallFailed({ reason: "attempts", last: inner, attempts: [], target: "inner" }))
      })
      const exit = yield* settle(nested.pipe(Resilient.retry(policyOf({ target, maxAttempts: 3 }))))
      const failure = failureOf(exit)
      // Already retried by the nested call: stopped at once, on the nested call's last failure.
      assert.strictEqual(attempts, 1)
      assert.strictEqual(failure.last, inner)
    }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.unlimited })))
  })
})
