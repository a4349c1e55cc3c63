/**
 * The decision after a failed attempt, as pure functions, against the documented rules: a sleep
 * never ends past the deadline (nor leaves less than the minimum attempt time); a hint wins over
 * the backoff and is capped by `maxRetryAfter`; the budget is asked only for retries; a terminal
 * verdict never retries; an ambiguous one replays only when replay-safe.
 *
 * Every `fc.assert` runs from a fixed seed; each property counts the kinds of cases it saw, so a
 * generator that drifts into trivial cases fails instead of passing.
 */
import { promiseRunner, seeded, TestClock, withoutDefaultLogger } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Coordination, Failure, Resilient, RetryBudget } from "@resilient-ai/policy"
import { Decision, EffectLine } from "@resilient-ai/policy/internal"
import { Duration, Effect, Exit, Fiber, Layer } from "effect"
import * as fc from "fast-check"
import { captureLogs, freshTarget, policyOf } from "./support.js"

const runs = (numRuns: number) => ({ seed: 42, numRuns })

const tally = () => {
  const counts = new Map<string, number>()
  return {
    add: (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1),
    get: (key: string) => counts.get(key) ?? 0
  }
}

const verdicts = fc.constantFrom<Decision.Judged["verdict"]>("retryable", "terminal", "ambiguous")

/** Rules of a call; the deadline is relative to `now`, which the cases place at 1,000,000. */
const rules: fc.Arbitrary<Decision.Rules> = fc.record({
  maxAttempts: fc.integer({ min: 1, max: 6 }),
  replaySafe: fc.boolean(),
  nested: fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  deadline: fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: 1_000_000 - 100, max: 1_000_000 + 30_000 }) },
    { weight: 1, arbitrary: fc.constant(Number.POSITIVE_INFINITY) }
  ),
  minAttemptMillis: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 2_000 })),
  maxRetryAfterMillis: fc.oneof(fc.integer({ min: 0, max: 20_000 }), fc.constant(Number.POSITIVE_INFINITY)),
  hintSpreadMillis: fc.integer({ min: 0, max: 2_000 }),
  readsHints: fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) })
})

const judged: fc.Arbitrary<Decision.Judged> = fc.record({
  attempt: fc.integer({ min: 1, max: 6 }),
  verdict: verdicts,
  hintMillis: fc.oneof(
    { weight: 2, arbitrary: fc.constant(undefined) },
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 25_000 }) }
  ),
  deadlineExceeded: fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  shed: fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) })
})

const now = 1_000_000

/** A backoff's proposal: a delay, or done. */
const proposed = fc.oneof(
  { weight: 9, arbitrary: fc.integer({ min: 0, max: 30_000 }) },
  { weight: 1, arbitrary: fc.constant("done" as const) }
)

/** A random fraction in [0, 1), as `Random.next` draws it. */
const fraction = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })

const decisionCase = fc.record({ rules, judged, proposed, fraction })

type DecisionCase = {
  readonly rules: Decision.Rules
  readonly judged: Decision.Judged
  readonly proposed: number | "done"
  readonly fraction: number
}

const decideCase = (c: DecisionCase) => Decision.decide(c.rules, c.judged, now, c.proposed, c.fraction)

/** The two halves, as the engine calls them, agree with the composed decision. */
const byHalves = (c: DecisionCase): Decision.Decision =>
  Decision.beforeBackoff(c.rules, c.judged, now) ??
    Decision.afterBackoff(
      c.rules,
      c.judged,
      now,
      c.proposed,
      Decision.drawsSpread(c.rules, c.judged) ? c.fraction : undefined
    )

describe("Decision", () => {
  it("a sleep never ends past the deadline, nor leaves less than the minimum attempt time", () => {
    const seen = tally()
    fc.assert(
      fc.property(decisionCase, (c) => {
        const decision = decideCase(c)
        assert.deepStrictEqual(decision, byHalves(c))
        if (decision._tag === "Stop") {
          seen.add(decision.deadlineSkip ? "stop: no room before the deadline" : `stop: ${decision.reason}`)
          if (decision.deadlineSkip) assert.strictEqual(decision.reason, "deadline")
          return
        }
        const left = c.rules.deadline - (now + decision.delay)
        assert.isTrue(left > 0, `a sleep of ${decision.delay} ms ends ${-left} ms past the deadline`)
        assert.isAtLeast(left, c.rules.minAttemptMillis)
        assert.isAtLeast(decision.delay, 0)
        const hint = c.judged.hintMillis
        if (hint !== undefined && c.rules.readsHints && decision.delay < hint + c.fraction * c.rules.hintSpreadMillis) {
          seen.add("retry: the spread cut to fit")
        } else if (Number.isFinite(c.rules.deadline) && left - c.rules.minAttemptMillis < 50) {
          seen.add("retry: ends just in time")
        } else {
          seen.add("retry")
        }
      }),
      runs(3_000)
    )
    for (
      const kind of [
        "retry",
        "retry: ends just in time",
        "retry: the spread cut to fit",
        "stop: no room before the deadline",
        "stop: attempts",
        "stop: retry-after-too-long"
      ]
    ) {
      assert.isAbove(seen.get(kind), 10, kind)
    }
  })

  it("a hint wins over the backoff and is capped by maxRetryAfter: longer, the call stops retry-after-too-long", () => {
    const seen = tally()
    const hinted = decisionCase.map((c) => ({
      ...c,
      rules: { ...c.rules, nested: false, readsHints: true },
      judged: {
        ...c.judged,
        verdict: "retryable" as const,
        deadlineExceeded: false,
        attempt: Math.min(c.judged.attempt, c.rules.maxAttempts - 1),
        hintMillis: c.judged.hintMillis ?? 1_000
      }
    })).filter((c) => c.judged.attempt >= 1)
    fc.assert(
      fc.property(hinted, (c) => {
        const hint = c.judged.hintMillis
        const decision = decideCase(c)
        if (hint > c.rules.maxRetryAfterMillis) {
          assert.deepStrictEqual(decision, { _tag: "Stop", reason: "retry-after-too-long", deadlineSkip: false })
          seen.add("longer than maxRetryAfter")
          return
        }
        if (decision._tag === "Stop" && decision.reason === "attempts") {
          // The backoff allows no more: a hint does not extend the attempts.
          assert.strictEqual(c.proposed, "done")
          seen.add("backoff done")
          return
        }
        if (decision._tag === "Stop") {
          // It cannot fit before the deadline: another target could serve it, or no time is left.
          assert.isFalse(Decision.leavesRoom(c.rules, now, hint))
          assert.include(["retry-after-too-long", "deadline"], decision.reason)
          seen.add("does not fit")
          return
        }
        // Whatever the backoff proposed: the hint, plus at most its spread.
        assert.isAtLeast(decision.delay, hint)
        assert.isAtMost(decision.delay, hint + Math.min(c.rules.hintSpreadMillis, hint / 2))
        assert.deepStrictEqual(Decision.decide(c.rules, c.judged, now, 12_345, c.fraction), decision)
        seen.add(decision.delay > hint ? "slept the hint and a spread" : "slept the hint")
      }),
      runs(2_000)
    )
    for (const kind of ["longer than maxRetryAfter", "does not fit", "slept the hint and a spread", "slept the hint"]) {
      assert.isAbove(seen.get(kind), 10, kind)
    }
  })

  it("a terminal verdict never retries; an ambiguous one replays only when replay-safe", () => {
    const seen = tally()
    fc.assert(
      fc.property(decisionCase, (c) => {
        const decision = decideCase(c)
        const { verdict } = c.judged
        if (verdict === "terminal") {
          assert.strictEqual(decision._tag, "Stop")
          seen.add(`terminal: ${(decision as Decision.Stop).reason}`)
        } else if (verdict === "ambiguous" && !c.rules.replaySafe) {
          assert.strictEqual(decision._tag, "Stop")
          seen.add(`ambiguous, not replay-safe: ${(decision as Decision.Stop).reason}`)
        } else if (verdict === "ambiguous") {
          seen.add(`ambiguous, replay-safe: ${decision._tag}`)
        }
      }),
      runs(3_000)
    )
    for (
      const kind of [
        "terminal: terminal",
        "terminal: shed",
        "ambiguous, not replay-safe: not-replay-safe",
        "ambiguous, replay-safe: Retry",
        "ambiguous, replay-safe: Stop"
      ]
    ) {
      assert.isAbove(seen.get(kind), 10, kind)
    }
  })

  it.effect("the engine asks the budget for every Retry decision and for nothing else", () =>
    Effect.gen(function*() {
      const seen = tally()
      const run = yield* promiseRunner
      const failures = [
        new Failure.ServerError({ status: 500 }),
        new Failure.RateLimited({ status: 429, retryAfter: Duration.seconds(2) }),
        new Failure.ClientError({ status: 400 }),
        new Failure.ReadTimeout({ timeout: Duration.seconds(1), phase: "body" })
      ] as const
      const caseOf = fc.record({
        maxAttempts: fc.integer({ min: 1, max: 5 }),
        replaySafe: fc.boolean(),
        timeoutSeconds: fc.integer({ min: 1, max: 30 }),
        script: fc.array(fc.integer({ min: 0, max: failures.length }), { minLength: 1, maxLength: 6 }),
        grants: fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
        seed: fc.integer()
      })
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(caseOf, (c) =>
            run(Effect.gen(function*() {
              const target = freshTarget("asked")
              let asked = 0
              // A budget written with the documented methods only, granting as the case says.
              const scripted: RetryBudget.Service = {
                tryAcquire: () => Effect.sync(() => c.grants[asked++] ?? true),
                recordSuccess: () => Effect.void,
                snapshot: RetryBudget.unlimited.snapshot
              }
              const recording = yield* RetryBudget.recording(scripted)
              let index = 0
              const attempt = Effect.suspend(() => {
                const step = c.script[Math.min(index++, c.script.length - 1)]!
                return step === failures.length ? Effect.succeed("ok") : Effect.fail(failures[step]!)
              })
              const logs = yield* captureLogs
              const policy = policyOf({ target, maxAttempts: c.maxAttempts, replaySafe: c.replaySafe })
              const fiber = yield* EffectLine.fork(
                attempt.pipe(
                  Resilient.retry(policy, { timeout: `${c.timeoutSeconds} seconds` }),
                  Effect.exit,
                  seeded(c.seed),
                  Effect.provide(Layer.merge(Coordination.layerWith({ budget: recording }), logs.layer)),
                  Effect.provide(withoutDefaultLogger)
                )
              )
              yield* TestClock.adjust("1 hour")
              const exit = yield* Fiber.join(fiber)
              const failed = (yield* logs.lines).filter((line) => line.message.startsWith("attempt failed"))
              // A Retry decision asks the budget: granted, the attempt is logged as retrying; refused,
              // the call stops for the budget. Any other stop is a decision that asked nothing.
              const retries = failed.filter((line) =>
                line.message === "attempt failed, retrying" || line.annotations.stop === "budget"
              )
              const decisions = yield* recording.decisions
              const asks = decisions.filter((decision) => decision._tag === "Retry")
              assert.strictEqual(asks.length, retries.length)
              asks.forEach((ask, i) => {
                assert.strictEqual((ask.failure as Failure.Failure)._tag, retries[i]!.annotations.failure)
              })
              for (const line of failed) {
                if (line.annotations.stop === undefined) seen.add("Retry, granted")
                else if (line.annotations.stop === "budget") seen.add("Retry, refused")
                else seen.add(`Stop: ${String(line.annotations.stop)}`)
              }
              seen.add(Exit.isSuccess(exit) ? "call succeeded" : "call failed")
            }))),
          runs(150)
        )
      )
      for (
        const kind of [
          "Retry, granted",
          "Retry, refused",
          "Stop: terminal",
          "Stop: attempts",
          "Stop: not-replay-safe",
          "call succeeded",
          "call failed"
        ]
      ) {
        assert.isAbove(seen.get(kind), 5, kind)
      }
    }))
})
