/**
 * What a user of the combinator meets first: any Effect retried with its own errors judged by
 * `classify`, a call's own attempt ceiling, and the one seam (`Coordination`) through which a
 * target gets its budget and gate, swapped in a test in one line.
 */
import { seeded, TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import {
  ConcurrencyGate,
  Coordination,
  Failure,
  Metrics,
  RateLimiter,
  Resilient,
  RetryBudget,
  Settings
} from "@resilient-ai/policy"
import { EffectLine, Limiters, Meters, Retries } from "@resilient-ai/policy/internal"
import { Clock, Data, Duration, Effect, Exit, Fiber, Option } from "effect"
import { failureOf, freshTarget, policyOf, scripted } from "./support.js"

/** A database's error: the caller's own type, which the toolkit knows nothing about. */
class DbError extends Data.TaggedError("DbError")<{
  readonly code: "deadlock" | "unique_violation" | "busy"
  readonly retryAfterMs?: number
}> {}

const judgeDb = (error: DbError): Resilient.Judgement =>
  error.code === "unique_violation"
    ? "terminal"
    : error.code === "busy" && error.retryAfterMs !== undefined
    ? { verdict: "retryable", retryAfter: Duration.millis(error.retryAfterMs) }
    : "retryable"

const settle = <A, E, R>(effect: Effect.Effect<A, E, R>, by: EffectLine.DurationInput = "10 minutes") =>
  Effect.gen(function*() {
    const fiber = yield* EffectLine.fork(effect)
    yield* TestClock.adjust(by)
    return yield* Fiber.await(fiber)
  })

/** An attempt that fails with `errors` in order, then succeeds with "row"; the times it started at. */
const database = (errors: ReadonlyArray<DbError>) =>
  Effect.gen(function*() {
    const starts: Array<number> = []
    const attempt: Effect.Effect<string, DbError> = Effect.suspend(() =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        starts.push(now)
        const error = errors[starts.length - 1]
        return error === undefined ? Effect.succeed("row") : Effect.fail(error)
      })
    )
    return { attempt, starts }
  })

describe("Resilient.retry with classify: any Effect, its errors its own", () => {
  it.effect("retries what classify calls retryable, with the policy's backoff, and returns the success", () => {
    const target = freshTarget("db-retry")
    return Effect.gen(function*() {
      const { attempt, starts } = yield* database([
        new DbError({ code: "deadlock" }),
        new DbError({ code: "deadlock" })
      ])
      const policy = policyOf({ target, maxAttempts: 3, baseDelay: "100 millis", maxDelay: "1 second" })
      const exit = yield* settle(attempt.pipe(Resilient.retry(policy, { classify: judgeDb })))
      assert.deepStrictEqual(exit, Exit.succeed("row"))
      assert.strictEqual(starts.length, 3)
      // Full jitter: each delay within its bound, base·2^n capped.
      assert.isAtMost(starts[1]! - starts[0]!, 100)
      assert.isAtMost(starts[2]! - starts[1]!, 200)
      const summary = yield* Metrics.summary(target)
      assert.strictEqual(summary.retriesSucceeded, 1)
      // Counted by the error's own tag, beside the toolkit's failures.
      assert.strictEqual(EffectLine.counted(Meters.forTarget(target).failures("DbError")), 2)
    }).pipe(seeded(7))
  })

  it.effect("stops at a terminal error; CallFailed.last is the caller's own error, typed", () => {
    const target = freshTarget("db-terminal")
    return Effect.gen(function*() {
      const { attempt, starts } = yield* database([new DbError({ code: "unique_violation" })])
      const call = attempt.pipe(Resilient.retry(policyOf({ target }), { classify: judgeDb }))
      const failure = failureOf(yield* settle(call))
      assert.strictEqual(failure.reason, "terminal")
      // Typed: `last` is a DbError or one of the sequence's own refusals, nothing else.
      const last: DbError | Retries.Refusal = failure.last
      assert.instanceOf(last, DbError)
      assert.strictEqual(last._tag === "DbError" ? last.code : undefined, "unique_violation")
      assert.deepStrictEqual(failure.attempts.map((record) => record.outcome), ["DbError"])
      assert.strictEqual(starts.length, 1)
    })
  })

  it.effect("a wait classify names wins over the backoff, as a provider's Retry-After does", () => {
    const target = freshTarget("db-hint")
    return Effect.gen(function*() {
      const { attempt, starts } = yield* database([new DbError({ code: "busy", retryAfterMs: 3_000 })])
      const policy = policyOf({ target, baseDelay: "10 millis", maxDelay: "20 millis", hintSpread: 0 })
      const exit = yield* settle(attempt.pipe(Resilient.retry(policy, { classify: judgeDb })))
      assert.deepStrictEqual(exit, Exit.succeed("row"))
      assert.deepStrictEqual(starts, [0, 3_000])
    })
  })

  it.effect("the budget, the deadline and the attempt timeout hold as for any call", () => {
    const target = freshTarget("db-bounds")
    return Effect.gen(function*() {
      // A budget that grants nothing: one attempt, reason budget.
      const refused = yield* database([new DbError({ code: "deadlock" })])
      const failure = failureOf(
        yield* settle(
          refused.attempt.pipe(Resilient.retry(policyOf({ target }), { classify: judgeDb })),
          "1 minute"
        ).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.disabled })))
      )
      assert.strictEqual(failure.reason, "budget")
      assert.strictEqual(refused.starts.length, 1)

      // An attempt that hangs is cut at the policy's attempt timeout; the policy, not classify,
      // judges that ReadTimeout: ambiguous, so not replayed by a call that is not replay-safe.
      const hangs: Effect.Effect<string, DbError> = Effect.never
      const timedOut = failureOf(
        yield* settle(
          hangs.pipe(Resilient.retry(policyOf({ target: `${target}-hang`, attemptTimeout: "2 seconds" }), {
            classify: () => "retryable"
          }))
        )
      )
      assert.strictEqual(timedOut.reason, "not-replay-safe")
      assert.strictEqual(timedOut.last._tag, "ReadTimeout")
    })
  })
})

describe("a call's own maxAttempts", () => {
  it.effect("overrides the policy's ceiling, lower or higher, for that call only", () => {
    const target = freshTarget("per-call-attempts")
    return Effect.gen(function*() {
      const policy = policyOf({ target, maxAttempts: 3, baseDelay: "1 millis", maxDelay: "2 millis" })
      const serverError = new Failure.ServerError({ status: 500 })
      for (const [maxAttempts, expected] of [[1, 1], [5, 5], [undefined, 3]] as const) {
        const { attempt, times } = yield* scripted<string>([{ fail: serverError }])
        const failure = failureOf(yield* settle(attempt.pipe(Resilient.retry(policy, { maxAttempts }))))
        assert.strictEqual(failure.reason, "attempts")
        assert.strictEqual((yield* times).length, expected, `maxAttempts ${maxAttempts}`)
      }
    }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.unlimited })))
  })

  it.effect("one that cannot work is a defect naming it, and no attempt is made", () => {
    const target = freshTarget("bad-per-call")
    return Effect.gen(function*() {
      const { attempt, times } = yield* scripted<string>([{ succeed: "ok" }])
      for (const maxAttempts of [0, 1.5, Number.NaN]) {
        const exit = yield* Effect.exit(attempt.pipe(Resilient.retry(policyOf({ target }), { maxAttempts })))
        assert.isTrue(Exit.isFailure(exit) && EffectLine.hasDefect(exit.cause))
        const defect = Exit.isFailure(exit) ? Option.getOrUndefined(EffectLine.defectOf(exit.cause)) : undefined
        assert.instanceOf(defect, Settings.InvalidSettings)
        assert.include(String((defect as Settings.InvalidSettings).message), "maxAttempts must be an integer >= 1")
      }
      assert.strictEqual((yield* times).length, 0)
    })
  })
})

describe("Coordination: the one seam for a target's budget and gate", () => {
  it.effect("a test swaps the budget in one line, and a recording budget shows what was asked", () => {
    const target = freshTarget("recorded")
    return Effect.gen(function*() {
      const recording = yield* RetryBudget.recording(RetryBudget.disabled)
      const serverError = new Failure.ServerError({ status: 500 })
      const { attempt } = yield* scripted<string>([{ fail: serverError }, { succeed: "ok" }])
      const failure = failureOf(
        yield* settle(attempt.pipe(Resilient.retry(policyOf({ target })))).pipe(
          Effect.provide(Coordination.layerWith({ budget: recording }))
        )
      )
      assert.strictEqual(failure.reason, "budget")
      assert.deepStrictEqual(yield* recording.decisions, [{ _tag: "Retry", failure: serverError, granted: false }])
    })
  })

  it.effect("an unbounded gate takes the gate out of the way", () => {
    const target = freshTarget("ungated")
    return Effect.gen(function*() {
      // The policy's own gate would admit one call at a time.
      const policy = policyOf({ target, gate: { limit: 1, mode: "shed" } })
      const call = Effect.sleep("1 second").pipe(Effect.as("ok"), Resilient.retry(policy))
      const shed = yield* settle(Effect.all([call, call].map(Effect.exit), { concurrency: 2 }))
      assert.deepStrictEqual(
        Exit.map(shed, (exits) => exits.map((exit) => Exit.isSuccess(exit) ? "ok" : failureOf(exit).reason)),
        Exit.succeed(["ok", "shed"])
      )
      const unbounded = yield* settle(Effect.all([call, call], { concurrency: 2 })).pipe(
        Effect.provide(Coordination.layerWith({ gate: ConcurrencyGate.unbounded }))
      )
      assert.deepStrictEqual(unbounded, Exit.succeed(["ok", "ok"]))
    })
  })

  it.effect("two policies of one target share its budget, its gate and what its calls learned", () => {
    const target = freshTarget("shared-state")
    return Effect.gen(function*() {
      const settings = { target, gate: { limit: 1, mode: "shed" as const }, budget: { minPerSecond: 0 } }
      const first = policyOf(settings)
      const second = policyOf(settings)
      assert.notStrictEqual(first, second)
      // One permit for the target, whichever policy object a call holds.
      const slow = (policy: Resilient.Policy) => Effect.sleep("1 second").pipe(Effect.as("ok"), Resilient.retry(policy))
      const both = yield* settle(Effect.all([slow(first), slow(second)].map(Effect.exit), { concurrency: 2 }))
      assert.deepStrictEqual(
        Exit.map(both, (exits) => exits.map((exit) => Exit.isSuccess(exit) ? "ok" : failureOf(exit).reason)),
        Exit.succeed(["ok", "shed"])
      )
      // What the first policy's successes taught (they take a second) raises the bar for the
      // second's: with 900 ms left, its attempt is not started.
      const skipped = failureOf(
        yield* settle(Effect.succeed("ok").pipe(Resilient.retry(second, { timeout: "900 millis" })))
      )
      assert.strictEqual(skipped.reason, "deadline")
      assert.deepStrictEqual(skipped.attempts, [])
    }).pipe(Effect.provide(Coordination.layerMemory))
  })

  it.effect("each Coordination keeps its own targets: a fresh one shares nothing", () => {
    const target = freshTarget("isolated")
    return Effect.gen(function*() {
      const policy = policyOf({ target, budget: { minPerSecond: 0 } })
      const serverError = new Failure.ServerError({ status: 500 })
      const healthy = Effect.succeed("ok").pipe(Resilient.retry(policy))
      const { attempt } = yield* scripted<string>([{ fail: serverError }, { succeed: "ok" }])
      const lone = attempt.pipe(Resilient.retry(policy))
      // Successes in one coordination earn a retry there...
      const earned = yield* Effect.gen(function*() {
        yield* Effect.replicateEffect(healthy, 20, { discard: true })
        return yield* settle(lone)
      }).pipe(Effect.provide(Coordination.layerMemory))
      assert.deepStrictEqual(earned, Exit.succeed("ok"))
      // ...and none in another, whose budget for the target starts empty.
      const { attempt: again } = yield* scripted<string>([{ fail: serverError }, { succeed: "ok" }])
      const refused = yield* settle(again.pipe(Resilient.retry(policy))).pipe(Effect.provide(Coordination.layerMemory))
      assert.strictEqual(failureOf(refused).reason, "budget")
    })
  })
})

describe("a user's own budget, gate and limiter, written with the documented methods only", () => {
  it.effect("work in Coordination.layerWith: retries granted and refused as the budget says, every permit given back", () => {
    const target = freshTarget("fakes")
    return Effect.gen(function*() {
      const asked: Array<boolean> = []
      const grants = [true, false]
      // Grants the first retry it is asked for, refuses the second.
      const budget: RetryBudget.Service = {
        tryAcquire: () =>
          Effect.sync(() => {
            const granted = grants[asked.length] ?? false
            asked.push(granted)
            return granted
          }),
        recordSuccess: () => Effect.void,
        snapshot: RetryBudget.unlimited.snapshot
      }
      const permits = { taken: 0, given: 0 }
      const gate: ConcurrencyGate.Service = {
        acquire: () => Effect.sync(() => void permits.taken++),
        release: () => Effect.sync(() => void permits.given++),
        observe: () => Effect.void,
        markDegraded: Effect.void,
        markRecovered: Effect.void,
        snapshot: ConcurrencyGate.unbounded.snapshot
      }
      let admitted = 0
      const limiter: RateLimiter.Service = {
        admit: () => Effect.sync(() => (admitted++, Limiters.free)),
        learn: () => Effect.void,
        snapshot: RateLimiter.unlimited.snapshot
      }
      const { attempt, times } = yield* scripted<string>([{ fail: new Failure.ServerError({ status: 500 }) }])
      const exit = yield* settle(
        attempt.pipe(
          Resilient.retry(policyOf({ target, maxAttempts: 5 })),
          Effect.provide(Coordination.layerWith({ budget, gate, rateLimiter: limiter }))
        )
      )
      const failure = failureOf(exit)
      assert.strictEqual(failure.reason, "budget")
      assert.deepStrictEqual(asked, [true, false])
      assert.strictEqual((yield* times).length, 2)
      assert.deepStrictEqual(permits, { taken: 2, given: 2 })
      assert.strictEqual(admitted, 2)

      // A budget that grants: the call succeeds on its second attempt.
      grants.splice(0, grants.length, true)
      asked.length = 0
      const second = yield* scripted<string>([{ fail: new Failure.ServerError({ status: 500 }) }, { succeed: "ok" }])
      const succeeded = yield* settle(
        second.attempt.pipe(
          Resilient.retry(policyOf({ target, maxAttempts: 5 })),
          Effect.provide(Coordination.layerWith({ budget, gate, rateLimiter: limiter }))
        )
      )
      assert.deepStrictEqual(succeeded, Exit.succeed("ok"))
      assert.deepStrictEqual(asked, [true])
      assert.deepStrictEqual(permits, { taken: 4, given: 4 })
    })
  })
})

/** Defined at module level, as a program would: nothing is checked until it is used. */
const moduleLevel = Resilient.policy({ target: freshTarget("module-level"), maxAttempts: 3 })
const cannotWork = Resilient.policy({ target: "cannot-work", maxAttempts: 0 })

describe("wrapping an Effect in one expression", () => {
  it.effect("a policy defined at module level retries as any other; yielding it gives the checked policy, the same object each time", () =>
    Effect.gen(function*() {
      const { attempt, times } = yield* scripted<string>([
        { fail: new Failure.ServerError({ status: 500 }) },
        { succeed: "ok" }
      ])
      assert.deepStrictEqual(yield* settle(attempt.pipe(Resilient.retry(moduleLevel))), Exit.succeed("ok"))
      assert.strictEqual((yield* times).length, 2)
      const checked = yield* moduleLevel
      assert.strictEqual(checked.maxAttempts, 3)
      assert.strictEqual(yield* moduleLevel, checked)
    }))

  it.effect("an invalid setting is a typed InvalidSettings: from yielding the policy, and on each call, never a throw", () =>
    Effect.gen(function*() {
      let sent = 0
      const attempt = Effect.sync(() => ++sent)
      const yielded = yield* Effect.flip(cannotWork)
      assert.instanceOf(yielded, Settings.InvalidSettings)
      assert.strictEqual(yielded.message, "policy for cannot-work: maxAttempts must be an integer >= 1, got 0")
      const first = yield* Effect.flip(attempt.pipe(Resilient.retry(cannotWork)))
      const second = yield* Effect.flip(Resilient.retry(attempt, cannotWork, { timeout: "1 second" }))
      // Checked once: the same failure every time, and nothing was sent.
      assert.strictEqual(first, yielded)
      assert.strictEqual(second, yielded)
      assert.strictEqual(sent, 0)
      const inline = yield* Effect.flip(attempt.pipe(Resilient.retry({ target: "inline-bad", maxAttempts: 0 })))
      assert.strictEqual(inline._tag, "InvalidSettings")
      assert.strictEqual(sent, 0)
    }))

  it.effect("the options inline, with while: retried while it says true, terminal when it says false", () => {
    const target = freshTarget("inline")
    return Effect.gen(function*() {
      const { attempt, starts } = yield* database([
        new DbError({ code: "deadlock" }),
        new DbError({ code: "unique_violation" })
      ])
      const exit = yield* settle(
        attempt.pipe(
          Resilient.retry({
            target,
            maxAttempts: 5,
            timeout: "1 minute",
            while: (error: DbError) => error.code === "deadlock"
          })
        )
      )
      const failure = failureOf(exit)
      assert.strictEqual(failure._tag, "CallFailed")
      if (failure._tag !== "CallFailed") return
      assert.strictEqual(failure.reason, "terminal")
      assert.deepStrictEqual(failure.last, new DbError({ code: "unique_violation" }))
      assert.strictEqual(starts.length, 2)
      // Data first, as Effect.retry takes it: a success on the second attempt.
      const again = yield* database([new DbError({ code: "deadlock" })])
      const answer = yield* settle(
        Resilient.retry(again.attempt, { target, maxAttempts: 5, while: (error) => error.code === "deadlock" })
      )
      assert.deepStrictEqual(answer, Exit.succeed("row"))
    })
  })
})
