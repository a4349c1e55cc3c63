import {
  drawing,
  isInterrupted,
  line,
  pollFiber,
  printLogfmtInto,
  seeded,
  TestClock,
  withMinimumLogLevel
} from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Classifier, ConcurrencyGate, Deadline, Failure, Metrics, Resilient, RetryBudget } from "@resilient-ai/policy"
import {
  Attempts,
  Coordinations,
  EffectLine,
  Engine,
  Failures,
  FastPath,
  Meters,
  Retries
} from "@resilient-ai/policy/internal"
import { Duration, Effect, Exit, Fiber, Redacted, Ref, Schedule } from "effect"
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { bundled } from "../built.js"
import { canary } from "../canary.js"
import { captureLogs, failureOf, freshTarget, invalidSettings, Parts, policyOf, scripted, services } from "./support.js"

const serverError = new Failure.ServerError({ status: 500 })
const millis = (duration: Duration.Duration) => Duration.toMillis(duration)

/** Runs `effect` in the background, moves the test clock far enough, and returns its exit. */
const settle = <A, E, R>(effect: Effect.Effect<A, E, R>, by: EffectLine.DurationInput = "10 minutes") =>
  Effect.gen(function*() {
    const fiber = yield* EffectLine.fork(effect)
    yield* TestClock.adjust(by)
    return yield* Fiber.await(fiber)
  })

describe("Resilient.retry on the real clock (its attempt timeout is a timer of the platform's own)", () => {
  it.live("an attempt that outlives its timeout is interrupted, its finalizer run, and the call told ReadTimeout", () => {
    const target = freshTarget("live-timeout")
    return Effect.gen(function*() {
      let finalized = 0
      const hangs = Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => finalized++)))
      const policy = policyOf({
        target,
        maxAttempts: 2,
        attemptTimeout: "30 millis",
        minAttemptTime: "1 millis",
        baseDelay: "1 millis",
        maxDelay: "2 millis"
      })
      const failure = failureOf(yield* Effect.exit(Resilient.retry(hangs, policy, { replaySafe: true })))
      assert.strictEqual(failure.reason, "attempts")
      assert.deepStrictEqual(failure.attempts.map((attempt) => attempt.outcome), ["ReadTimeout", "ReadTimeout"])
      assert.strictEqual(finalized, 2, "each attempt was interrupted and awaited before the call went on")
    }).pipe(Effect.provide(services(target)), withMinimumLogLevel("None"))
  })

  it.live("an attempt cut off by its timeout gives back its own permit, once", () => {
    const target = freshTarget("live-one-release")
    return Effect.gen(function*() {
      const gate = (yield* Parts).gate
      const policy = policyOf({
        target,
        maxAttempts: 1,
        attemptTimeout: "20 millis",
        minAttemptTime: "1 millis"
      })
      const holder = yield* EffectLine.fork(Resilient.retry(Effect.never, policyOf({ target, maxAttempts: 1 })))
      assert.strictEqual(failureOf(yield* Effect.exit(Resilient.retry(Effect.never, policy))).last._tag, "ReadTimeout")
      assert.strictEqual((yield* gate.snapshot).inFlight, 1, "the holder's permit is still counted")
      yield* Fiber.interrupt(holder)
      assert.strictEqual((yield* gate.snapshot).inFlight, 0)
    }).pipe(Effect.provide(services(target)), withMinimumLogLevel("None"))
  })

  it.live("an attempt that ends in time is not cut off", () => {
    const target = freshTarget("live-in-time")
    return Effect.gen(function*() {
      const policy = policyOf({ target, attemptTimeout: "10 seconds", minAttemptTime: "1 millis" })
      const answer = yield* Resilient.retry(Effect.as(Effect.sleep("5 millis"), "answer"), policy)
      assert.strictEqual(answer, "answer")
    }).pipe(Effect.provide(services(target)), withMinimumLogLevel("None"))
  })

  // The timer's end is read from a process of its own: one left armed keeps Node's event loop, and
  // so the process, alive. Counting the worker's timers instead would count vitest's as well.
  it.live(
    "no timer outlives an attempt that ended in time, or a gate waiter granted before its deadline",
    () =>
      Effect.gen(function*() {
        const fixture = bundled(new URL("fixtures/timersEnd.ts", import.meta.url), line)
        const ran = yield* Effect.tryPromise({
          try: () =>
            promisify(execFile)(process.execPath, [fixture], {
              // A second on a quiet machine, tens of seconds on a busy one. A timer left armed would
              // hold the process ten minutes.
              timeout: 180_000,
              killSignal: "SIGKILL"
            }),
          catch: (error) =>
            new Error(`the process did not end on its own (a timer outlived its wait?): ${String(error)}`)
        })
        assert.strictEqual(ran.stdout.trim(), "attempt waiter")
      }),
    200_000
  )
})

describe("Resilient.retry and the gate's permits", () => {
  it.effect("an attempt cut off by its timeout gives back its own permit, once: another caller's stays held", () => {
    const target = freshTarget("one-release")
    return Effect.gen(function*() {
      const gate = (yield* Parts).gate
      const policy = policyOf({
        target,
        maxAttempts: 1,
        attemptTimeout: "1 second",
        minAttemptTime: "1 millis"
      })
      const holder = yield* EffectLine.fork(Resilient.retry(Effect.never, policyOf({ target, maxAttempts: 1 })))
      const timesOut = yield* EffectLine.fork(Resilient.retry(Effect.never, policy, { replaySafe: true }))
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(failureOf(yield* Fiber.await(timesOut)).last._tag, "ReadTimeout")
      assert.strictEqual((yield* gate.snapshot).inFlight, 1, "the holder's permit is still counted")
      yield* Fiber.interrupt(holder)
      assert.strictEqual((yield* gate.snapshot).inFlight, 0)
    }).pipe(Effect.provide(services(target)))
  })
})

describe("Resilient.retry", () => {
  describe("classification", () => {
    it.effect("a terminal failure stops after one attempt", () => {
      const target = freshTarget("terminal")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{ fail: new Failure.ClientError({ status: 400 }) }])
        const exit = yield* settle(attempt.pipe(Resilient.retry(policyOf({ target, maxAttempts: 5 }))))
        const failure = failureOf(exit)
        assert.strictEqual(failure.reason, "terminal")
        assert.strictEqual(failure.last._tag, "ClientError")
        assert.deepStrictEqual(yield* times, [0])
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("retryable failures are retried until one succeeds", () => {
      const target = freshTarget("recovers")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted<string>([
          { fail: serverError },
          { fail: new Failure.ConnectFailed({ detail: "ECONNREFUSED" }) },
          { succeed: "answer" }
        ])
        const exit = yield* settle(attempt.pipe(Resilient.retry(policyOf({ target, maxAttempts: 5 }))))
        assert.deepStrictEqual(exit, Exit.succeed("answer"))
        assert.strictEqual((yield* times).length, 3)
      }).pipe(Effect.provide(services(target)), seeded(1))
    })

    it.effect("a read timeout is replayed only when the call is replay-safe", () => {
      const target = freshTarget("ambiguous")
      const readTimeout = new Failure.ReadTimeout({ timeout: Duration.seconds(30), phase: "body" })
      const policy = policyOf({ target, maxAttempts: 3 })
      return Effect.gen(function*() {
        const unsafe = yield* scripted<string>([{ fail: readTimeout }, { succeed: "ok" }])
        const refused = failureOf(yield* settle(unsafe.attempt.pipe(Resilient.retry(policy))))
        assert.strictEqual(refused.reason, "not-replay-safe")
        assert.strictEqual((yield* unsafe.times).length, 1)

        const safe = yield* scripted<string>([{ fail: readTimeout }, { succeed: "ok" }])
        const replayed = yield* settle(safe.attempt.pipe(Resilient.retry(policy, { replaySafe: true })))
        assert.deepStrictEqual(replayed, Exit.succeed("ok"))
        assert.strictEqual((yield* safe.times).length, 2)
        assert.deepStrictEqual((yield* safe.arrivals).map((a) => a.info?.replaySafe), [true, true])
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("a reset before the request was sent is retried, after it only when replay-safe", () => {
      const target = freshTarget("reset")
      const policy = policyOf({ target, maxAttempts: 2 })
      return Effect.gen(function*() {
        const before = yield* scripted<string>([{ fail: new Failure.ConnectionReset({ afterSend: false }) }, {
          succeed: "ok"
        }])
        assert.deepStrictEqual(yield* settle(before.attempt.pipe(Resilient.retry(policy))), Exit.succeed("ok"))
        const after = yield* scripted<string>([{ fail: new Failure.ConnectionReset({ afterSend: true }) }, {
          succeed: "ok"
        }])
        assert.strictEqual(
          failureOf(yield* settle(after.attempt.pipe(Resilient.retry(policy)))).reason,
          "not-replay-safe"
        )
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("exhausted quota behind a 429 is terminal", () => {
      const target = freshTarget("quota")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{
          fail: new Failure.RateLimited({ status: 429, providerCode: "insufficient_quota" })
        }])
        const failure = failureOf(yield* settle(attempt.pipe(Resilient.retry(policyOf({ target })))))
        assert.strictEqual(failure.reason, "terminal")
        assert.strictEqual((yield* times).length, 1)
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("a target's own classifier layer decides", () => {
      const target = freshTarget("classifier")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted<string>([
          { fail: new Failure.ClientError({ status: 400, providerCode: "busy_try_again" }) },
          { succeed: "ok" }
        ])
        const exit = yield* settle(attempt.pipe(Resilient.retry(policyOf({ target }))))
        assert.deepStrictEqual(exit, Exit.succeed("ok"))
        assert.strictEqual((yield* times).length, 2)
      }).pipe(
        Effect.provide(services(target)),
        Effect.provide(
          Classifier.layerOverriding((failure) =>
            failure._tag === "ClientError" && failure.providerCode === "busy_try_again" ? "retryable" : undefined
          )
        )
      )
    })

    it.effect("a defect is not a failure: it propagates at once and is not retried", () => {
      const target = freshTarget("defect")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted<string>([{ run: Effect.die(new Error("bug")) }])
        const exit = yield* settle(attempt.pipe(Resilient.retry(policyOf({ target }))))
        assert.isTrue(Exit.isFailure(exit) && EffectLine.hasDefect(exit.cause))
        assert.strictEqual((yield* times).length, 1)
      }).pipe(Effect.provide(services(target)))
    })
  })

  describe("backoff", () => {
    it.effect("sleeps the seeded full-jitter delays between attempts", () => {
      const target = freshTarget("schedule")
      // base 100 ms, cap 1 s: retry n draws from [0, min(1000, 100·2^n)]; with seed 7 the draws are these.
      const expected = [1, 12, 391, 559]
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{ fail: serverError }])
        const policy = policyOf({ target, maxAttempts: 5, baseDelay: "100 millis", maxDelay: "1 second" })
        const failure = failureOf(yield* settle(attempt.pipe(Resilient.retry(policy))))
        assert.strictEqual(failure.reason, "attempts")
        const delays = failure.attempts.map((record) => millis(record.delayBefore))
        assert.deepStrictEqual(delays, [0, ...expected])
        expected.forEach((delay, retry) => assert.isAtMost(delay, Math.min(1000, 100 * 2 ** retry)))
        // The attempts happened exactly that far apart.
        const at = yield* times
        assert.deepStrictEqual(at.slice(1).map((time, i) => time - at[i]!), expected)
      }).pipe(Effect.provide(services(target)), seeded(7))
    })

    it.effect("a 7 s Retry-After is slept as 7 s plus the spread, not the formula", () => {
      const target = freshTarget("hint")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted<string>([
          { fail: new Failure.RateLimited({ status: 429, retryAfter: Duration.seconds(7) }) },
          { succeed: "ok" }
        ])
        const fiber = yield* attempt.pipe(Resilient.retry(policyOf({ target })), EffectLine.fork)
        yield* TestClock.adjust("6999 millis")
        assert.deepStrictEqual(yield* times, [0])
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(yield* Fiber.join(fiber), "ok")
        const [, second] = yield* times
        // 7 s, plus a whole-millisecond draw from [0, 1 s) that seed 7 makes 61 ms.
        assert.strictEqual(second, 7_061)
      }).pipe(Effect.provide(services(target)), seeded(7))
    })

    it.effect("a hint longer than maxRetryAfter ends the call instead of being slept through", () => {
      const target = freshTarget("long-hint")
      return Effect.gen(function*() {
        const { attempt } = yield* scripted([{
          fail: new Failure.RateLimited({ status: 429, retryAfter: Duration.minutes(2) })
        }])
        const fiber = yield* attempt.pipe(
          Resilient.retry(policyOf({ target, maxRetryAfter: "60 seconds" })),
          EffectLine.fork
        )
        yield* TestClock.adjust(0)
        const failure = failureOf(yield* Fiber.await(fiber))
        assert.strictEqual(failure.reason, "retry-after-too-long")
        assert.deepStrictEqual(failure.last, new Failure.RateLimited({ status: 429, retryAfter: Duration.minutes(2) }))
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("a hint longer than the time left ends the call at once as retry-after-too-long, not deadline", () => {
      const target = freshTarget("hint-deadline")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{
          fail: new Failure.RateLimited({ status: 429, retryAfter: Duration.seconds(30) }),
          after: 10
        }])
        const fiber = yield* attempt.pipe(
          Resilient.retry(policyOf({ target }), { timeout: "20 seconds" }),
          EffectLine.fork
        )
        yield* TestClock.adjust(10)
        // 19.99 s are left: enough for another target, so the reason is one `Failover` acts on.
        const exit = yield* pollFiber(fiber)
        if (exit._tag === "None") return assert.fail("the call slept towards its deadline")
        const failure = failureOf(exit.value)
        assert.strictEqual(failure.reason, "retry-after-too-long")
        assert.deepStrictEqual(failure.last, new Failure.RateLimited({ status: 429, retryAfter: Duration.seconds(30) }))
        assert.deepStrictEqual(yield* times, [0])
        assert.strictEqual((yield* (yield* Parts).budget.snapshot).retries, 0)
        const summary = yield* Metrics.summary(target)
        assert.strictEqual(summary.deadlineSkips, 0)
        assert.strictEqual(summary.retries, 0)
        assert.deepStrictEqual(summary.callsFailedByReason, { "retry-after-too-long": 1 })
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("a hint when the time is gone ends the call with deadline", () => {
      const target = freshTarget("hint-no-time")
      return Effect.gen(function*() {
        // The attempt used 4.95 s of 5: less than minAttemptTime (100 ms) is left, hint or none.
        const { attempt, times } = yield* scripted([{
          fail: new Failure.RateLimited({ status: 429, retryAfter: Duration.millis(10) }),
          after: 4_950
        }])
        const failure = failureOf(
          yield* settle(attempt.pipe(Resilient.retry(policyOf({ target }), { timeout: "5 seconds" })))
        )
        assert.strictEqual(failure.reason, "deadline")
        assert.strictEqual(failure.last._tag, "RateLimited")
        assert.deepStrictEqual(yield* times, [0])
        assert.strictEqual((yield* Metrics.summary(target)).deadlineSkips, 1)
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("a hint that fits with a spread that does not is slept with the spread cut to fit", () => {
      const target = freshTarget("hint-spread-cut")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted<string>([
          { fail: new Failure.RateLimited({ status: 429, retryAfter: Duration.seconds(4) }) },
          { succeed: "ok" }
        ])
        const policy = policyOf({ target, hintSpread: "1 second", minAttemptTime: "100 millis" })
        const exit = yield* settle(attempt.pipe(Resilient.retry(policy, { timeout: "5 seconds" })))
        assert.deepStrictEqual(exit, Exit.succeed("ok"))
        // Drawn at the top, the spread would make it 4999 ms, leaving 1 ms: it ends instead at the
        // last moment that leaves the attempt its 100 ms.
        assert.deepStrictEqual(yield* times, [0, 4_899])
      }).pipe(Effect.provide(services(target)), drawing([0.999]))
    })

    it.effect("a hint on a retryable client error is slept, exactly, like a 429's", () => {
      const target = freshTarget("client-error-hint")
      const responses: ReadonlyArray<Failures.ResponseSummary> = [
        { status: 408, retryAfter: Duration.seconds(2) },
        { status: 409, retryAfter: Duration.seconds(2) },
        { status: 400, shouldRetry: true, retryAfter: Duration.seconds(2) }
      ]
      return Effect.gen(function*() {
        for (const response of responses) {
          const { attempt, times } = yield* scripted<string>([
            { fail: Failures.fromResponse(response) },
            { succeed: "ok" }
          ])
          const policy = policyOf({ target, hintSpread: 0 })
          const fiber = yield* attempt.pipe(Resilient.retry(policy), EffectLine.fork)
          yield* TestClock.adjust("1999 millis")
          assert.strictEqual((yield* times).length, 1, `HTTP ${response.status}: retried before its hint`)
          yield* TestClock.adjust("1 millis")
          assert.deepStrictEqual(yield* Fiber.join(fiber), "ok")
          const [first, second] = yield* times
          assert.strictEqual(second! - first!, 2_000, `HTTP ${response.status}`)
        }
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("a hint that ends exactly at the deadline is not slept, even with no minAttemptTime", () => {
      const target = freshTarget("hint-at-deadline")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{
          fail: new Failure.RateLimited({ status: 429, retryAfter: Duration.seconds(5) })
        }])
        const policy = policyOf({ target, minAttemptTime: 0, hintSpread: 0 })
        const fiber = yield* attempt.pipe(Resilient.retry(policy, { timeout: "5 seconds" }), EffectLine.fork)
        yield* TestClock.adjust(0)
        // Woken at the deadline, the retry could only be skipped: the sleep and the budget would be wasted.
        const exit = yield* pollFiber(fiber)
        if (exit._tag === "None") return assert.fail("the call slept towards its deadline")
        const failure = failureOf(exit.value)
        assert.strictEqual(failure.reason, "retry-after-too-long")
        assert.strictEqual(failure.last._tag, "RateLimited")
        assert.deepStrictEqual(yield* times, [0])
        assert.strictEqual((yield* (yield* Parts).budget.snapshot).retries, 0)
      }).pipe(Effect.provide(services(target)))
    })
  })

  describe("the aggregate failure", () => {
    it.effect("says why the sequence stopped and carries every attempt", () => {
      const target = freshTarget("history")
      return Effect.gen(function*() {
        const { attempt } = yield* scripted([
          { fail: serverError, after: 120 },
          { fail: new Failure.RateLimited({ status: 429, retryAfter: Duration.seconds(2) }), after: 80 },
          { fail: new Failure.Overloaded({ status: 503, providerCode: "overloaded" }), after: 40 }
        ])
        const policy = policyOf({ target, maxAttempts: 3, baseDelay: "100 millis", maxDelay: "1 second" })
        const failure = failureOf(yield* settle(attempt.pipe(Resilient.retry(policy))))
        assert.strictEqual(failure.reason, "attempts")
        assert.strictEqual(failure.target, target)
        assert.deepStrictEqual(failure.last, new Failure.Overloaded({ status: 503, providerCode: "overloaded" }))
        assert.deepStrictEqual(
          failure.attempts.map((record) => ({
            ...record,
            latency: millis(record.latency),
            delayBefore: millis(record.delayBefore)
          })),
          [
            { attempt: 1, outcome: "ServerError", status: 500, latency: 120, delayBefore: 0 },
            { attempt: 2, outcome: "RateLimited", status: 429, latency: 80, delayBefore: 1 },
            { attempt: 3, outcome: "Overloaded", status: 503, latency: 40, delayBefore: 2_976 }
          ]
        )
        assert.match(failure.message, /stopped \(attempts\) after 3 attempt\(s\)/)
      }).pipe(Effect.provide(services(target)), seeded(7))
    })
  })

  describe("deadline", () => {
    it.effect("an attempt that cannot finish before the deadline is not started", () => {
      const target = freshTarget("deadline-skip")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{ fail: serverError, after: 400 }])
        const policy = policyOf({
          target,
          maxAttempts: 10,
          schedule: Schedule.spaced("100 millis"),
          minAttemptTime: "300 millis"
        })
        const fiber = yield* attempt.pipe(Resilient.retry(policy, { timeout: "1 second" }), EffectLine.fork)
        yield* TestClock.adjust("900 millis")
        // Attempt 1 ran 0–400 ms, attempt 2 500–900 ms. A third would start at 1000 ms with no time left.
        const failure = failureOf(yield* Fiber.await(fiber))
        assert.deepStrictEqual(yield* times, [0, 500])
        assert.strictEqual(failure.reason, "deadline")
        assert.strictEqual(failure.last._tag, "ServerError")
        assert.strictEqual((yield* Metrics.summary(target)).deadlineSkips, 1)
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("each attempt's timeout is the smaller of its own and what remains", () => {
      const target = freshTarget("attempt-timeout")
      return Effect.gen(function*() {
        const { arrivals, attempt } = yield* scripted([{ run: Effect.never }])
        const policy = policyOf({
          target,
          maxAttempts: 10,
          schedule: Schedule.spaced("50 millis"),
          attemptTimeout: "400 millis",
          minAttemptTime: "100 millis"
        })
        const failure = failureOf(
          yield* settle(attempt.pipe(Resilient.retry(policy, { timeout: "1 second", replaySafe: true })), "2 seconds")
        )
        const seen = yield* arrivals
        assert.deepStrictEqual(seen.map((a) => a.at), [0, 450, 900])
        assert.deepStrictEqual(seen.map((a) => a.info?.deadline), [400, 850, 1_000])
        assert.deepStrictEqual(failure.attempts.map((record) => record.outcome), [
          "ReadTimeout",
          "ReadTimeout",
          "DeadlineExceeded"
        ])
        assert.deepStrictEqual(failure.last, new Failure.DeadlineExceeded({ deadline: 1_000, phase: "attempt" }))
        assert.strictEqual(failure.reason, "deadline")
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("a timed-out attempt is reported in the phase it said it had reached", () => {
      const target = freshTarget("phase")
      return Effect.gen(function*() {
        const stallIn = (phase: "headers" | "body" | undefined) => (context: Attempts.AttemptContext) =>
          Effect.suspend((): Effect.Effect<never, Failure.Failure> => {
            if (phase !== undefined) context.reached(phase)
            return Effect.never
          })
        const policy = policyOf({ target, maxAttempts: 1, attemptTimeout: "2 seconds" })
        const phases: Array<unknown> = []
        for (const phase of ["headers", "body", undefined] as const) {
          const failure = failureOf(yield* settle(Engine.run(stallIn(phase), policy, undefined), "3 seconds"))
          phases.push(failure.last)
        }
        assert.deepStrictEqual(phases, [
          new Failure.ReadTimeout({ timeout: Duration.seconds(2), phase: "headers" }),
          new Failure.ReadTimeout({ timeout: Duration.seconds(2), phase: "body" }),
          new Failure.ReadTimeout({ timeout: Duration.seconds(2), phase: "attempt" })
        ])
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("an attempt that waited for a permit is timed from when it got it, and ends by the deadline", () => {
      const target = freshTarget("late-permit")
      return Effect.gen(function*() {
        const { arrivals, attempt } = yield* scripted([{ run: Effect.never }])
        const policy = policyOf({ target, maxAttempts: 1, attemptTimeout: "3 seconds" })
        yield* EffectLine.fork(attempt.pipe(Resilient.retry(policy, { replaySafe: true })))
        const waiting = yield* EffectLine.fork(attempt.pipe(Resilient.retry(policy, { timeout: "5 seconds" })))
        yield* TestClock.adjust("3 seconds")
        // The first attempt timed out at 3 s and gave its permit to the second, with 2 s left.
        const seen = yield* arrivals
        assert.deepStrictEqual(seen.map((a) => [a.at, a.info?.deadline]), [[0, 3_000], [3_000, 5_000]])
        yield* TestClock.adjust("2 seconds")
        const failure = failureOf(yield* Fiber.await(waiting))
        assert.deepStrictEqual(failure.last, new Failure.DeadlineExceeded({ deadline: 5_000, phase: "attempt" }))
      }).pipe(Effect.provide(services(target, { gate: { limit: 1 } })))
    })

    it.effect("a permit granted too late for an attempt to finish is given back, and nothing is sent", () => {
      const target = freshTarget("too-late")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{ run: Effect.never }])
        const gate = (yield* Parts).gate
        const policy = policyOf({
          target,
          maxAttempts: 1,
          attemptTimeout: "2950 millis",
          minAttemptTime: "100 millis"
        })
        yield* EffectLine.fork(attempt.pipe(Resilient.retry(policy, { replaySafe: true })))
        const waiting = yield* EffectLine.fork(attempt.pipe(Resilient.retry(policy, { timeout: "3 seconds" })))
        yield* TestClock.adjust("2950 millis")
        // The permit came free with 50 ms left: less than an attempt needs.
        const failure = failureOf(yield* Fiber.await(waiting))
        assert.strictEqual(failure.reason, "deadline")
        assert.deepStrictEqual(failure.last, new Failure.DeadlineExceeded({ deadline: 3_000, phase: "queue" }))
        assert.deepStrictEqual(yield* times, [0])
        assert.strictEqual((yield* gate.snapshot).inFlight, 0)
      }).pipe(Effect.provide(services(target, { gate: { limit: 1 } })))
    })

    it.effect("the bar for starting an attempt rises to what successful attempts take lately", () => {
      const target = freshTarget("typical")
      return Effect.gen(function*() {
        const policy = policyOf({ target, minAttemptTime: "10 millis" })
        const slow = yield* scripted<string>([{ succeed: "ok", after: 500 }])
        yield* settle(slow.attempt.pipe(Resilient.retry(policy)), "1 second")
        // Successes take 500 ms here: with 300 ms left, an attempt would only be cut off.
        const next = yield* scripted<string>([{ succeed: "ok", after: 500 }])
        const failure = failureOf(yield* settle(next.attempt.pipe(Resilient.retry(policy, { timeout: "300 millis" }))))
        assert.strictEqual(failure.reason, "deadline")
        assert.deepStrictEqual(yield* next.times, [])
        // With 600 ms left it goes ahead.
        const enough = yield* settle(next.attempt.pipe(Resilient.retry(policy, { timeout: "600 millis" })))
        assert.deepStrictEqual(enough, Exit.succeed("ok"))
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("the deadline set at the entry point bounds a call below it", () => {
      const target = freshTarget("entry-deadline")
      return Effect.gen(function*() {
        const { attempt } = yield* scripted([{ run: Effect.never }])
        const call = attempt.pipe(Resilient.retry(policyOf({ target }), { timeout: "1 hour" }))
        const fiber = yield* EffectLine.fork(Deadline.within(call, "3 seconds"))
        yield* TestClock.adjust("3 seconds")
        const failure = failureOf(yield* Fiber.await(fiber))
        assert.deepStrictEqual(failure.last, new Failure.DeadlineExceeded({ deadline: 3_000, phase: "attempt" }))
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("a call whose deadline has passed makes no attempt", () => {
      const target = freshTarget("late")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{ succeed: 1 }])
        yield* TestClock.adjust("5 seconds")
        const exit = yield* attempt.pipe(Resilient.retry(policyOf({ target })), Deadline.at(4_000), Effect.exit)
        const failure = failureOf(exit)
        assert.strictEqual(failure.reason, "deadline")
        assert.deepStrictEqual(failure.last, new Failure.DeadlineExceeded({ deadline: 4_000, phase: "before-attempt" }))
        assert.deepStrictEqual(failure.attempts, [])
        assert.deepStrictEqual(yield* times, [])
      }).pipe(Effect.provide(services(target)))
    })
  })

  describe("cancellation", () => {
    it.effect("interrupting during a sleep starts no further attempt", () => {
      const target = freshTarget("interrupt-sleep")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{ fail: serverError }])
        const policy = policyOf({ target, maxAttempts: 5, schedule: Schedule.spaced("1 second") })
        const fiber = yield* EffectLine.fork(attempt.pipe(Resilient.retry(policy)))
        yield* TestClock.adjust("500 millis")
        yield* Fiber.interrupt(fiber)
        yield* TestClock.adjust("1 minute")
        assert.deepStrictEqual(yield* times, [0])
        const exit = yield* Fiber.await(fiber)
        assert.isTrue(isInterrupted(exit))
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("interrupting during an attempt interrupts it, returns its permit and starts no other", () => {
      const target = freshTarget("interrupt-attempt")
      return Effect.gen(function*() {
        const finalized = yield* Ref.make(0)
        const { attempt, times } = yield* scripted([{
          run: Effect.never.pipe(Effect.onInterrupt(() => Ref.update(finalized, (n) => n + 1)))
        }])
        const fiber = yield* EffectLine.fork(attempt.pipe(Resilient.retry(policyOf({ target, replaySafe: true }))))
        yield* TestClock.adjust("1 second")
        const gate = (yield* Parts).gate
        assert.strictEqual((yield* gate.snapshot).inFlight, 1)
        yield* Fiber.interrupt(fiber)
        assert.strictEqual(yield* Ref.get(finalized), 1)
        assert.strictEqual((yield* gate.snapshot).inFlight, 0)
        yield* TestClock.adjust("10 minutes")
        assert.deepStrictEqual(yield* times, [0])
      }).pipe(Effect.provide(services(target)))
    })

    it("an aborted AbortSignal stops the sequence the same way", async () => {
      const target = freshTarget("abort")
      let attempts = 0
      let finalized = 0
      let started: () => void = () => {}
      const firstStarted = new Promise<void>((resolve) => (started = resolve))
      const attempt = Effect.suspend(() => {
        attempts++
        started()
        return Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => finalized++)))
      })
      const controller = new AbortController()
      const running = Effect.runPromise(
        attempt.pipe(
          Resilient.retry(policyOf({ target, replaySafe: true, attemptTimeout: "1 hour" })),
          Effect.provide(services(target))
        ),
        { signal: controller.signal }
      )
      await firstStarted
      controller.abort()
      const outcome = await running.then(() => "resolved", () => "rejected")
      await new Promise((resolve) => setImmediate(resolve))
      assert.strictEqual(outcome, "rejected")
      assert.strictEqual(attempts, 1)
      assert.strictEqual(finalized, 1)
    })
  })

  describe("one retrying layer", () => {
    it.effect("a nested resilient call makes one attempt per outer attempt, and says so", () => {
      const outerTarget = freshTarget("outer")
      const innerTarget = freshTarget("inner")
      return Effect.gen(function*() {
        const logs = yield* captureLogs
        const { attempt, arrivals } = yield* scripted([{ fail: serverError }])
        const inner = attempt.pipe(Resilient.retry(policyOf({ target: innerTarget, maxAttempts: 5 })))
        const outer = inner.pipe(Resilient.retry(policyOf({ target: outerTarget, maxAttempts: 3 })))
        const failure = failureOf(yield* settle(outer.pipe(Effect.provide(logs.layer))))

        const seen = yield* arrivals
        assert.strictEqual(seen.length, 3)
        assert.deepStrictEqual(seen.map((a) => a.info?.attempt), [1, 1, 1])
        assert.strictEqual(new Set(seen.map((a) => a.info?.requestId)).size, 1)
        assert.strictEqual(failure.reason, "attempts")
        assert.deepStrictEqual(failure.last, serverError)
        assert.deepStrictEqual(failure.attempts.map((record) => record.outcome), [
          "ServerError",
          "ServerError",
          "ServerError"
        ])
        assert.strictEqual((yield* Metrics.summary(innerTarget)).nestedSingleAttempts, 3)
        assert.strictEqual((yield* Metrics.summary(innerTarget)).attempts, 0)
        assert.strictEqual((yield* Metrics.summary(outerTarget)).attempts, 3)
        const deferred = (yield* logs.lines).filter((line) => line.annotations.stop === "deferred")
        assert.strictEqual(deferred.length, 3)
        assert.match(deferred[0]!.message, /left to the enclosing resilient call/)
        assert.strictEqual(deferred[0]!.annotations.target, innerTarget)
      }).pipe(
        Effect.provide(services("shared", { gate: { limit: 10 } })),
        seeded(3)
      )
    })

    it.effect("a nested call to the same target does not wait on the outer call's own permit", () => {
      const target = freshTarget("same-target")
      return Effect.gen(function*() {
        const { attempt } = yield* scripted<string>([{ succeed: "ok" }])
        const policy = policyOf({ target })
        const nested = attempt.pipe(Resilient.retry(policy), Resilient.retry(policy))
        assert.deepStrictEqual(yield* settle(nested, "1 second"), Exit.succeed("ok"))
      }).pipe(Effect.provide(services(target, { gate: { limit: 1 } })))
    })

    it.effect("a nested call to another target through the same gate does not wait on the outer call's permit", () => {
      const outerTarget = freshTarget("shared-gate-outer")
      const innerTarget = freshTarget("shared-gate-inner")
      return Effect.gen(function*() {
        const { attempt } = yield* scripted<string>([{ succeed: "ok" }])
        const nested = attempt.pipe(
          Resilient.retry(policyOf({ target: innerTarget })),
          Resilient.retry(policyOf({ target: outerTarget }), { timeout: "5 seconds" })
        )
        const fiber = yield* EffectLine.fork(nested)
        yield* TestClock.adjust(0)
        const exit = yield* pollFiber(fiber)
        if (exit._tag === "None") return assert.fail("the inner call waited for the gate its outer call holds")
        assert.deepStrictEqual(exit.value, Exit.succeed("ok"))
        const gate = (yield* Parts).gate
        assert.strictEqual((yield* gate.snapshot).inFlight, 0)
      }).pipe(Effect.provide(services("one-gate", { gate: { limit: 1 } })))
    })

    it.effect("a nested call under the outer call's target name but through another gate takes its own permit", () => {
      const target = freshTarget("same-name")
      return Effect.gen(function*() {
        const budget = yield* RetryBudget.make()
        const outerGate = yield* ConcurrencyGate.make({ target, limit: 1 })
        const innerGate = yield* ConcurrencyGate.make({ target, limit: 1 })
        const seen = yield* Ref.make<ReadonlyArray<number>>([])
        const attempt = Effect.flatMap(
          innerGate.snapshot,
          ({ inFlight }) => Ref.update(seen, (all) => [...all, inFlight])
        )
        const policy = policyOf({ target })
        yield* settle(
          attempt.pipe(
            Retries.retryWith(policy, Coordinations.targetServices({ budget, gate: innerGate })),
            Retries.retryWith(policy, Coordinations.targetServices({ budget, gate: outerGate }))
          ),
          "1 second"
        )
        assert.deepStrictEqual(yield* Ref.get(seen), [1], "the inner attempt held a permit of its own gate")
        assert.strictEqual((yield* innerGate.snapshot).inFlight, 0)
        assert.strictEqual((yield* outerGate.snapshot).inFlight, 0)
      })
    })

    it.effect("a call nested two deep, back through the outermost call's gate, does not wait on it", () => {
      const target = freshTarget("two-deep")
      return Effect.gen(function*() {
        const budget = yield* RetryBudget.make()
        const first = yield* ConcurrencyGate.make({ target: "first", limit: 1 })
        const second = yield* ConcurrencyGate.make({ target: "second", limit: 1 })
        const { attempt } = yield* scripted<string>([{ succeed: "ok" }])
        const through = (gate: ConcurrencyGate.Service, name: string) =>
          Retries.retryWith(policyOf({ target: `${target}-${name}` }), Coordinations.targetServices({ budget, gate }))
        const call = attempt.pipe(through(first, "inner"), through(second, "middle"), through(first, "outer"))
        const fiber = yield* EffectLine.fork(Deadline.within(call, "5 seconds"))
        yield* TestClock.adjust(0)
        const exit = yield* pollFiber(fiber)
        if (exit._tag === "None") return assert.fail("the innermost call waited for the outermost call's permit")
        assert.deepStrictEqual(exit.value, Exit.succeed("ok"))
      })
    })

    it.effect("an inner call that already retried on its own is not retried again", () => {
      const target = freshTarget("settled")
      return Effect.gen(function*() {
        const { attempt } = yield* scripted([{ fail: serverError }])
        const finished = attempt.pipe(
          Effect.mapError((last) =>
            new Failure.CallFailed({ reason: "budget", last, attempts: [], target: "elsewhere" })
          )
        )
        const failure = failureOf(yield* settle(finished.pipe(Resilient.retry(policyOf({ target })))))
        assert.strictEqual(failure.reason, "terminal")
        assert.strictEqual(failure.attempts.length, 1)
      }).pipe(Effect.provide(services(target)))
    })
  })

  describe("budget", () => {
    it.effect("a refused retry stops the call with reason budget and is counted", () => {
      const target = freshTarget("no-budget")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{ fail: serverError }])
        const failure = failureOf(yield* settle(attempt.pipe(Resilient.retry(policyOf({ target })))))
        assert.strictEqual(failure.reason, "budget")
        assert.deepStrictEqual(yield* times, [0])
        assert.strictEqual((yield* Metrics.summary(target)).budgetExhausted, 1)
      }).pipe(
        Effect.provide(services(target, { budget: RetryBudget.disabled, gate: { limit: 10 } }))
      )
    })

    it.effect("one budget bounds the retries of many calls during an outage", () => {
      const target = freshTarget("outage")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted([{ fail: serverError }])
        const policy = policyOf({ target, maxAttempts: 3 })
        // A floor of 0.05/s over 60 s allows 3 retries in the window, whatever the number of calls.
        yield* settle(Effect.all(Array.from({ length: 10 }, () => Effect.exit(attempt.pipe(Resilient.retry(policy))))))
        assert.strictEqual((yield* times).length, 13)
        const summary = yield* Metrics.summary(target)
        assert.strictEqual(summary.retries, 3)
        // Call 1 retries twice, call 2 once before the budget refuses; calls 3–10 are refused at once.
        assert.strictEqual(summary.budgetExhausted, 9)
        assert.deepStrictEqual(summary.callsFailedByReason, { attempts: 1, budget: 9 })
      }).pipe(
        Effect.provide(services(target, { budget: { minPerSecond: 0.05 } })),
        seeded(11)
      )
    })

    it.effect("successful traffic earns retries for a lone failure", () => {
      const target = freshTarget("healthy")
      return Effect.gen(function*() {
        const policy = policyOf({ target })
        const healthy = yield* scripted<number>([{ succeed: 1 }])
        yield* Effect.replicateEffect(healthy.attempt.pipe(Resilient.retry(policy)), 100, { discard: true })
        const lone = yield* scripted<number>([{ fail: serverError }, { succeed: 2 }])
        assert.deepStrictEqual(yield* settle(lone.attempt.pipe(Resilient.retry(policy)), "1 second"), Exit.succeed(2))
        const budget = (yield* Parts).budget
        assert.deepStrictEqual(yield* budget.snapshot, {
          successes: 101,
          retries: 1,
          paid: 1,
          allowance: 10.100000000000001
        })
      }).pipe(Effect.provide(services(target, { budget: { minPerSecond: 0 } })))
    })
  })

  describe("budget hooks", () => {
    it.effect("a budget sees each call, each failure, each retry asked for and the attempts of each success", () => {
      const target = freshTarget("hooks")
      return Effect.gen(function*() {
        const seen: Array<string> = []
        const recording: FastPath.With<RetryBudget.Service, FastPath.Budget> = {
          tryAcquire: (failure) =>
            Effect.sync(() => (seen.push(`ask after ${(failure as Failure.Failure)._tag}`), true)),
          recordSuccess: (attempts) => Effect.sync(() => void seen.push(`success after ${attempts}`)),
          snapshot: RetryBudget.unlimited.snapshot,
          [FastPath.key]: {
            recordCall: Effect.sync(() => void seen.push("call")),
            recordFailure: (failure) =>
              Effect.sync(() => void seen.push(`failure ${(failure as Failure.Failure)._tag}`))
          }
        }
        const gate = yield* ConcurrencyGate.make({ target, limit: 10 })
        const { attempt } = yield* scripted<string>([
          { fail: serverError },
          { fail: new Failure.Overloaded({ status: 503 }) },
          { succeed: "ok" }
        ])
        yield* settle(
          attempt.pipe(
            Retries.retryWith(policyOf({ target }), Coordinations.targetServices({ budget: recording, gate }))
          )
        )
        assert.deepStrictEqual(seen, [
          "call",
          "failure ServerError",
          "ask after ServerError",
          "failure Overloaded",
          "ask after Overloaded",
          "success after 3"
        ])
      })
    })
  })

  describe("gate", () => {
    it.effect("a full gate of a shedding target refuses at once", () => {
      const target = freshTarget("shed")
      return Effect.gen(function*() {
        const { attempt } = yield* scripted<string>([{ run: Effect.never }])
        const policy = policyOf({ target, attemptTimeout: "1 hour" })
        yield* EffectLine.fork(attempt.pipe(Resilient.retry(policy)))
        yield* TestClock.adjust(0)
        const failure = failureOf(yield* Effect.exit(attempt.pipe(Resilient.retry(policy))))
        assert.strictEqual(failure.reason, "shed")
        assert.deepStrictEqual(failure.last, new Failure.Shed({ target, limit: 1, inFlight: 1 }))
        assert.deepStrictEqual(failure.attempts, [])
        assert.strictEqual((yield* Metrics.summary(target)).shed, 1)
      }).pipe(Effect.provide(services(target, { gate: { limit: 1, mode: "shed" } })))
    })

    it.effect("a queued call waits no longer than its deadline", () => {
      const target = freshTarget("queue")
      return Effect.gen(function*() {
        const { attempt, times } = yield* scripted<string>([{ run: Effect.never }])
        const policy = policyOf({ target, attemptTimeout: "1 hour" })
        yield* EffectLine.fork(attempt.pipe(Resilient.retry(policy)))
        const waiting = yield* EffectLine.fork(attempt.pipe(Resilient.retry(policy, { timeout: "2 seconds" })))
        yield* TestClock.adjust("2 seconds")
        const failure = failureOf(yield* Fiber.await(waiting))
        assert.strictEqual(failure.reason, "deadline")
        assert.deepStrictEqual(failure.last, new Failure.DeadlineExceeded({ deadline: 2_000, phase: "queue" }))
        assert.deepStrictEqual(yield* times, [0])
      }).pipe(Effect.provide(services(target, { gate: { limit: 1 } })))
    })

    it.effect("capacity failures through the combinator degrade the gate and a success starts the ramp", () => {
      const target = freshTarget("degrade")
      return Effect.gen(function*() {
        const gate = (yield* Parts).gate
        const failing = yield* scripted([{ fail: new Failure.Overloaded({ status: 503 }) }])
        const policy = policyOf({ target, maxAttempts: 1 })
        yield* Effect.replicateEffect(Effect.exit(failing.attempt.pipe(Resilient.retry(policy))), 5, { discard: true })
        assert.deepStrictEqual(yield* gate.snapshot, { limit: 2, inFlight: 0, waiting: 0, health: "degraded" })
        const healthy = yield* scripted([{ succeed: 1 }])
        yield* healthy.attempt.pipe(Resilient.retry(policy))
        assert.deepStrictEqual(yield* gate.snapshot, { limit: 2, inFlight: 0, waiting: 0, health: "recovering" })
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual((yield* gate.snapshot).limit, 3)
      }).pipe(Effect.provide(services(target, { gate: { limit: 20 } })))
    })
    it.effect("an attempt the caller's deadline cuts short is no capacity signal; one its own timeout ends is", () => {
      const target = freshTarget("deadline-cut")
      return Effect.gen(function*() {
        const gate = (yield* Parts).gate
        const { attempt } = yield* scripted<string>([{ run: Effect.never }])
        const late = policyOf({ target, maxAttempts: 1, attemptTimeout: "1 hour" })
        for (let call = 0; call < 5; call++) {
          const failure = failureOf(yield* settle(attempt.pipe(Resilient.retry(late, { timeout: "2 seconds" }))))
          assert.strictEqual(failure.last._tag, "DeadlineExceeded")
        }
        assert.strictEqual((yield* gate.snapshot).health, "steady")
        const slow = policyOf({ target, maxAttempts: 1, attemptTimeout: "1 second" })
        for (let call = 0; call < 5; call++) {
          const failure = failureOf(yield* settle(attempt.pipe(Resilient.retry(slow, { timeout: "1 hour" }))))
          assert.strictEqual(failure.last._tag, "ReadTimeout")
        }
        assert.strictEqual((yield* gate.snapshot).health, "degraded")
      }).pipe(Effect.provide(services(target, { gate: { limit: 20 } })))
    })
  })

  describe("observability", () => {
    it.effect("metrics count attempts, successes, retries, delays and failures by kind", () => {
      const target = freshTarget("metrics")
      return Effect.gen(function*() {
        const policy = policyOf({
          target,
          model: "small",
          maxAttempts: 3,
          schedule: Schedule.spaced("250 millis")
        })
        const recovers = yield* scripted<number>([{ fail: serverError }, { fail: serverError }, { succeed: 1 }])
        const firstTry = yield* scripted<number>([{ succeed: 2 }])
        const fails = yield* scripted<number>([{ fail: new Failure.AuthenticationFailed({ status: 401 }) }])
        yield* settle(recovers.attempt.pipe(Resilient.retry(policy)))
        yield* firstTry.attempt.pipe(Resilient.retry(policy))
        yield* Effect.exit(fails.attempt.pipe(Resilient.retry(policy)))

        const summary = yield* Metrics.summary(target, "small")
        assert.strictEqual(summary.attempts, 5)
        assert.strictEqual(summary.successes, 2)
        assert.strictEqual(summary.attemptsPerSuccess, 2.5)
        assert.strictEqual(summary.retries, 2)
        assert.strictEqual(summary.retriesSucceeded, 1)
        assert.strictEqual(summary.retryDelay.count, 2)
        assert.strictEqual(summary.retryDelay.sum, 0.5)
        assert.deepStrictEqual(summary.failuresByKind, { ServerError: 2, AuthenticationFailed: 1 })
        assert.deepStrictEqual(summary.callsFailedByReason, { terminal: 1 })
        const perSuccess = EffectLine.histogramState(Meters.forTarget(target, "small").attemptsPerSuccess)
        assert.strictEqual(perSuccess.count, 2)
        assert.strictEqual(perSuccess.sum, 4)
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("one log line per attempt, with request id, attempt, duration and failure kind", () => {
      const target = freshTarget("logs")
      return Effect.gen(function*() {
        const logs = yield* captureLogs
        const { attempt } = yield* scripted<string>([
          { fail: serverError, after: 30 },
          { fail: new Failure.Overloaded({ status: 503 }), after: 20 },
          { succeed: "ok", after: 10 }
        ])
        const policy = policyOf({ target, model: "large", schedule: Schedule.spaced("1 second") })
        yield* settle(
          attempt.pipe(
            Resilient.retry(policy, { requestId: "req-42" }),
            Effect.provide(logs.layer),
            withMinimumLogLevel("Debug")
          )
        )
        const lines = yield* logs.lines
        assert.deepStrictEqual(lines.map((line) => [line.level, line.message]), [
          ["INFO", "attempt failed, retrying"],
          ["INFO", "attempt failed, retrying"],
          ["DEBUG", "attempt succeeded"]
        ])
        assert.deepStrictEqual(lines.map((line) => line.annotations), [
          {
            requestId: "req-42",
            target,
            model: "large",
            attempt: 1,
            durationMs: 30,
            failure: "ServerError",
            status: 500,
            verdict: "retryable",
            retryInMs: 1000
          },
          {
            requestId: "req-42",
            target,
            model: "large",
            attempt: 2,
            durationMs: 20,
            failure: "Overloaded",
            status: 503,
            verdict: "retryable",
            retryInMs: 1000
          },
          { requestId: "req-42", target, model: "large", attempt: 3, durationMs: 10 }
        ])
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("an attempt's own notes (token usage) join its log line", () => {
      const target = freshTarget("notes")
      return Effect.gen(function*() {
        const logs = yield* captureLogs
        // The transport hands its notes back with its answer or its failure.
        const attempt = (context: Attempts.AttemptContext) =>
          Effect.suspend(() => {
            const report = new Attempts.Report()
            report.annotate("promptTokens", 12)
            report.annotate("completionTokens", 30)
            return context.attempt === 1
              ? Effect.fail(new Attempts.Reported(serverError, report))
              : Effect.succeed(new Attempts.Answered("ok", report))
          })
        yield* settle(
          Engine.run(attempt, policyOf({ target, schedule: Schedule.spaced("1 second") }), undefined, {
            requestId: "r"
          }).pipe(
            Effect.provide(logs.layer),
            withMinimumLogLevel("Debug")
          )
        )
        const lines = yield* logs.lines
        assert.deepStrictEqual(
          lines.map((
            line
          ) => [line.annotations.attempt, line.annotations.promptTokens, line.annotations.completionTokens]),
          [[1, 12, 30], [2, 12, 30]]
        )
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("a Redacted value in scope is never printed by the attempt log lines", () => {
      const target = freshTarget("redacted")
      return Effect.gen(function*() {
        const printed: Array<string> = []
        const { attempt } = yield* scripted<string>([{ fail: serverError }, { fail: serverError }])
        yield* settle(
          attempt.pipe(
            Resilient.retry(policyOf({ target, maxAttempts: 2 })),
            Effect.annotateLogs("apiKey", Redacted.make(canary)),
            Effect.provide(printLogfmtInto(printed))
          )
        )
        assert.strictEqual(printed.length, 2)
        for (const line of printed) {
          assert.notInclude(line, canary)
          assert.include(line, "<redacted>")
        }
      }).pipe(Effect.provide(services(target)))
    })

    it.effect("every attempt of one call, and its log lines, see the same generated request id", () => {
      const target = freshTarget("request-id")
      return Effect.gen(function*() {
        const logs = yield* captureLogs
        const { arrivals, attempt } = yield* scripted<string>([{ fail: serverError }, { succeed: "ok" }])
        yield* settle(
          attempt.pipe(
            Resilient.retry(policyOf({ target })),
            Effect.provide(logs.layer),
            withMinimumLogLevel("Debug")
          )
        )
        const ids = (yield* arrivals).map((a) => a.info?.requestId)
        assert.strictEqual(ids.length, 2)
        assert.strictEqual(ids[0], ids[1])
        assert.match(ids[0]!, /^[0-9a-f-]{36}$/)
        assert.deepStrictEqual((yield* logs.lines).map((line) => line.annotations.requestId), [ids[0], ids[0]])
      }).pipe(Effect.provide(services(target)))
    })
  })

  describe("retryWith", () => {
    it.effect("takes the target's budget and gate as values, needing nothing from the context", () => {
      const target = freshTarget("with")
      return Effect.gen(function*() {
        const budget = yield* RetryBudget.make({ minPerSecond: 0 })
        const gate = yield* ConcurrencyGate.make({ target, limit: 1, mode: "shed" })
        const { attempt, times } = yield* scripted<string>([{ fail: serverError }, { succeed: "ok" }])
        // No successes yet and no floor: the budget refuses the retry.
        const call: Effect.Effect<string, Failure.CallFailed<Retries.LastFailure<Failure.Failure>>> = attempt.pipe(
          Retries.retryWith(policyOf({ target }), Coordinations.targetServices({ budget, gate }))
        )
        const failure = failureOf(yield* settle(call))
        assert.strictEqual(failure.reason, "budget")
        assert.deepStrictEqual(yield* times, [0])
        assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 0, waiting: 0, health: "steady" })
      })
    })
  })

  describe("retryWith's attemptRefs", () => {
    it.effect("every attempt runs with the target's FiberRef values; the caller keeps its own", () => {
      const target = freshTarget("attempt-refs")
      return Effect.gen(function*() {
        const budget = yield* RetryBudget.make()
        const gate = yield* ConcurrencyGate.make({ target, limit: 1 })
        const level = EffectLine.makeRef("test/attempt-refs/level", "caller")
        const seen = yield* Ref.make<ReadonlyArray<string>>([])
        const attempt = Effect.flatMap(EffectLine.getRef(level), (value) => Ref.update(seen, (all) => [...all, value]))
        const { attempt: failing } = yield* scripted<void>([{ fail: serverError }, { succeed: undefined }])
        yield* settle(
          Effect.andThen(attempt, failing).pipe(
            Retries.retryWith(policyOf({ target }), {
              ...Coordinations.targetServices({ budget, gate }),
              attemptRefs: [[level, "attempt"]]
            })
          )
        )
        assert.deepStrictEqual(yield* Ref.get(seen), ["attempt", "attempt"])
        assert.strictEqual(yield* EffectLine.getRef(level), "caller")
      }).pipe(seeded(1))
    })
  })

  describe("policy", () => {
    it("rejects values that cannot work, naming them", () => {
      const refused = (options: Resilient.PolicyOptions) => invalidSettings(Resilient.policy(options))
      assert.strictEqual(
        refused({ target: "t", maxAttempts: 0 }),
        "policy for t: maxAttempts must be an integer >= 1, got 0"
      )
      assert.include(refused({ target: "t", maxAttempts: 1.5 }), "maxAttempts must be an integer >= 1, got 1.5")
      assert.include(refused({ target: "t", attemptTimeout: 0 }), "attemptTimeout must be positive, got 0")
      assert.include(
        refused({ target: "t", baseDelay: "2 seconds", maxDelay: "1 second" }),
        "baseDelay (2s) must not exceed maxDelay (1s)"
      )
      assert.strictEqual(refused({ target: "" }), "policy: target must not be empty")
      assert.include(
        refused({ target: "t", minAttemptTime: "2 minutes" }),
        "minAttemptTime (2m) must be shorter than attemptTimeout (1m)"
      )
      // Every problem at once, not the first.
      assert.strictEqual(
        refused({ target: "t", maxAttempts: 0, baseDelay: "soon" as never, replaySafe: "maybe" as never }),
        "policy for t: maxAttempts must be an integer >= 1, got 0; " +
          `baseDelay must be a duration such as 30000 or "30 seconds", got soon; ` +
          `replaySafe must be true or false, got "maybe"`
      )
    })

    it("fills in the defaults", () => {
      const policy = policyOf({ target: "t" })
      assert.strictEqual(policy.maxAttempts, 3)
      assert.strictEqual(millis(policy.attemptTimeout), 60_000)
      assert.strictEqual(millis(policy.minAttemptTime), 100)
      assert.strictEqual(millis(policy.maxRetryAfter), 60_000)
      assert.strictEqual(policy.replaySafe, false)
    })
  })
})
