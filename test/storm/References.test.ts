/**
 * The storm's reference budgets, pinned to their sources: each test drives a budget through the
 * sequence its source describes and checks the figures the source publishes or implies. The line
 * next to each test names the source (repository, file, lines, commit).
 *
 * Finagle: twitter/finagle at 4feb34cb949918c572a6152327212e062527bd62 (finagle-core
 * `service/RetryBudget.scala`, its test `RetryBudgetTest.scala`, `doc/src/sphinx/Clients.rst`) and
 * the bucket under it, twitter/util at 17c8187d948846756fabcdbb2ff6838b3665968b (util-core
 * `TokenBucket.scala`, `WindowedAdder.scala`, `TokenBucketTest.scala`).
 *
 * gRPC: gRFC A6, grpc/proposal `A6-client-retries.md` at 1fd061ad8e7c46422b326e5a60cf68d042476205,
 * and grpc-java's throttle, `core/src/main/java/io/grpc/internal/RetriableStream.java` at
 * 5fda0c7c35a938b2b0be05cdbe168dcb0700d64a.
 */
import { TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Failure, type RetryBudget } from "@resilient-ai/policy"
import { FastPath } from "@resilient-ai/policy/internal"
import { Simulation, StormPolicies } from "@resilient-ai/storm/internal"
import { Effect, Exit } from "effect"

const overloaded = new Failure.Overloaded({ status: 503 })

/** Finagle's `balance`: the retries the budget would grant now, a whole number. */
const balance = (budget: RetryBudget.Service) =>
  Effect.map(budget.snapshot, ({ allowance, retries }) => Math.trunc(allowance - retries))

/** A request into Finagle's `RetryFilter`: it deposits before its first attempt. */
const deposit = (budget: RetryBudget.Service) => FastPath.budget(budget)!.recordCall!

/** A retry: `tryWithdraw()`. */
const withdraw = (budget: RetryBudget.Service) => budget.tryAcquire(overloaded)

/** Withdraws until refused; how many were granted. */
const drain = (budget: RetryBudget.Service) =>
  Effect.gen(function*() {
    let granted = 0
    while (yield* withdraw(budget)) granted++
    return granted
  })

const finagleDefault = StormPolicies.references.find((contender) => contender.name === "finagle-budget")!
const grpcDefault = StormPolicies.references.find((contender) => contender.name === "grpc-throttling")!

describe("Finagle RetryBudget (finagle-budget)", () => {
  // RetryBudget.scala:97-99, 113-114 (DefaultTtl 10.seconds, DefaultMinRetriesPerSec 10, 0.2);
  // Clients.rst:292-294 ("about 20% of the total requests ... on top of 10 retries per second").
  it.effect("the storm's budget is Finagle's default: 100 retries in reserve, then one per 5 requests", () =>
    Effect.gen(function*() {
      assert.include(finagleDefault.description, "ttl = 10 s, minRetriesPerSec = 10, percentCanRetry = 0.2")
      const budget = yield* StormPolicies.finagleBudget(10_000, 10, 0.2)
      assert.strictEqual(yield* balance(budget), 100, "10 retries/s over a ttl of 10 s")
      assert.strictEqual(yield* drain(budget), 100)
      for (let request = 1; request <= 4; request++) yield* deposit(budget)
      assert.isFalse(yield* withdraw(budget), "4 requests at 20% are 0.8 of a retry")
      yield* deposit(budget)
      assert.isTrue(yield* withdraw(budget), "the fifth makes one")
      assert.isFalse(yield* withdraw(budget))
    }))

  // RetryBudgetTest.scala:37-70 (time frozen; 10000 requests, each deposit() then tryWithdraw();
  // retried == nReqs·percentCanRetry + ttl·minRetriesPerSec within 1; balance 0 when refused),
  // run with the storm's parameters; RetryBudget.scala:159-168 (integer tokens) make it exactly 2100.
  it.effect("10000 requests that each retry once: 20% of them plus the reserve are retried, 2100", () =>
    Effect.gen(function*() {
      const budget = yield* StormPolicies.finagleBudget(10_000, 10, 0.2)
      let retried = 0
      for (let request = 0; request < 10_000; request++) {
        yield* deposit(budget)
        if (yield* withdraw(budget)) retried++
        else assert.strictEqual(yield* balance(budget), 0)
      }
      assert.strictEqual(retried, 2100)
    }))

  // RetryBudgetTest.scala:98-118, 137-145 (every case of testBudget), 65-68 (the margin of 1,
  // "because TokenRetryBudget.ScaleFactor doesn't give us perfect precision"); RetryBudget.scala:157-168.
  it.effect("Finagle's own cases: retried within 1 of nReqs · percentCanRetry + ttl · minRetriesPerSec", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [ttlSeconds: number, minRetriesPerSec: number, percentCanRetry: number]> = [
        ...[0.1, 0.5, 0.25, 0.75, 0.99, 0.999, 0.9999, 0.01, 0.001, 0.0001].map((percent) => [60, 0, percent] as const),
        [1, 10, 0],
        [2, 5, 0],
        [1, 10, 0.1],
        [2, 5, 0.5]
      ]
      const requests = 10_000
      const retriedBy = new Map<number, number>()
      for (const [ttlSeconds, minRetriesPerSec, percentCanRetry] of cases) {
        const budget = yield* StormPolicies.finagleBudget(ttlSeconds * 1000, minRetriesPerSec, percentCanRetry)
        const reserve = ttlSeconds * minRetriesPerSec
        assert.strictEqual(yield* balance(budget), reserve)
        if (reserve === 0) assert.isFalse(yield* withdraw(budget))
        let retried = 0
        for (let request = 0; request < requests; request++) {
          yield* deposit(budget)
          if (yield* withdraw(budget)) retried++
          else assert.strictEqual(yield* balance(budget), 0)
        }
        const expected = Math.trunc(requests * percentCanRetry) + reserve
        assert.isAtMost(Math.abs(retried - expected), 1, `${ttlSeconds} s, ${minRetriesPerSec}/s, ${percentCanRetry}`)
        if (reserve === 0) retriedBy.set(percentCanRetry, retried)
      }
      // Where the margin is used: a withdrawal of trunc(1000 / 0.75) = 1333 tokens buys 7501 retries
      // with 10^7 deposited, and trunc(1000 / 0.9999) = 1000 makes every request retry.
      assert.strictEqual(retriedBy.get(0.75), 7501)
      assert.strictEqual(retriedBy.get(0.9999), 10_000)
    }))

  // RetryBudget.scala:129-133 ("if 0.1 is used, then for every 10 calls to deposit(), 1 retry will be
  // allowed. If 2.0 is used then every deposit allows for 2 retries"); RetryBudgetTest.scala:120-135.
  it.effect("percentCanRetry 0.1: ten deposits make one retry; 2.0: 10000 deposits make a balance of 20000", () =>
    Effect.gen(function*() {
      const tenth = yield* StormPolicies.finagleBudget(60_000, 0, 0.1)
      for (let request = 1; request <= 9; request++) yield* deposit(tenth)
      assert.isFalse(yield* withdraw(tenth))
      yield* deposit(tenth)
      assert.strictEqual(yield* drain(tenth), 1)

      const twice = yield* StormPolicies.finagleBudget(60_000, 0, 2)
      assert.strictEqual(yield* balance(twice), 0)
      assert.isFalse(yield* withdraw(twice))
      for (let request = 0; request < 10_000; request++) yield* deposit(twice)
      assert.strictEqual(yield* balance(twice), 20_000)
    }))

  // TokenBucketTest.scala:7-16 ("a leaky bucket is leaky": ttl 3 s, put 100, tryGet(1) true;
  // advance 3 s, tryGet(1) false); TokenBucket.scala:86-88 (a WindowedAdder of ttl in 10 slices).
  it.effect("deposits leak: after ttl, what they allowed is gone", () =>
    Effect.gen(function*() {
      // percentCanRetry 1: a deposit and a withdrawal are both 1000 tokens, so each request is one retry.
      const budget = yield* StormPolicies.finagleBudget(3_000, 0, 1)
      for (let request = 0; request < 100; request++) yield* deposit(budget)
      assert.isTrue(yield* withdraw(budget))
      yield* TestClock.adjust("3 seconds")
      assert.isFalse(yield* withdraw(budget))
    }))

  // TokenBucketTest.scala:34-63 ("provisions reserves": reserve 100 over ttl 3 s; spent at once, still
  // spent at +1 s, +2 s and +3 s, "This is what you get for eating all of your candy right away";
  // back at +4 s; what was taken then is back 3 s later); TokenBucket.scala:113 (count = sum + reserve);
  // WindowedAdder.scala:45-66 (a slice ends at the first use after its length, `old = now()`).
  it.effect("the reserve: spent at once, it stays spent until the slices that spent it have aged out", () =>
    Effect.gen(function*() {
      // The reserve is 10/s · 3 s = 30 retries; a deposit of 1000 tokens buys one more.
      const budget = yield* StormPolicies.finagleBudget(3_000, 10, 1)
      assert.strictEqual(yield* drain(budget), 30)
      yield* deposit(budget)
      assert.strictEqual(yield* drain(budget), 1)
      for (let second = 1; second <= 3; second++) {
        yield* TestClock.adjust("1 second")
        assert.isFalse(yield* withdraw(budget), `at +${second} s`)
      }
      yield* TestClock.adjust("1 second")
      for (let retry = 0; retry < 15; retry++) assert.isTrue(yield* withdraw(budget), "at +4 s")
      yield* TestClock.adjust("3 seconds")
      assert.strictEqual(yield* drain(budget), 30, "at +7 s")
    }))

  // TokenBucket.scala:73-78 ("expires tokens after approximately `ttl` time"); WindowedAdder.scala:24-27
  // (slices of range / 10, nine kept besides the current), 56-64 (unused whole slices skipped, the
  // next slice starting at the use that ended the last).
  it.effect("with the storm's ttl of 10 s, a deposit counts for 10 s when the budget is busy, longer when not", () =>
    Effect.gen(function*() {
      const busy = yield* StormPolicies.finagleBudget(10_000, 0, 0.2)
      const quiet = yield* StormPolicies.finagleBudget(10_000, 0, 0.2)
      for (let request = 0; request < 50; request++) {
        yield* deposit(busy)
        yield* deposit(quiet)
      }
      // Busy: used every half second, its slices end on the second.
      for (let tick = 1; tick < 20; tick++) {
        yield* TestClock.adjust("500 millis")
        assert.strictEqual(yield* balance(busy), 10, `at ${tick * 500} ms`)
      }
      yield* TestClock.adjust("400 millis")
      // Quiet: first used again at 9.9 s, which ends its first slice and skips eight unused ones;
      // the one begun then ends at 10.9 s, and pushes the deposits out.
      assert.strictEqual(yield* balance(quiet), 10, "at 9.9 s")
      yield* TestClock.adjust("100 millis")
      assert.strictEqual(yield* balance(busy), 0, "busy, at 10 s")
      assert.strictEqual(yield* balance(quiet), 10, "quiet, at 10 s")
      yield* TestClock.adjust("800 millis")
      assert.strictEqual(yield* balance(quiet), 10, "quiet, at 10.8 s")
      yield* TestClock.adjust("100 millis")
      assert.strictEqual(yield* balance(quiet), 0, "quiet, at 10.9 s")
    }))

  // RetryFilter.scala:153-156 (apply: `retryBudget.deposit()` once per request), 118-124 (a retry the
  // policy wants is made only if `tryWithdraw()`); RetryPolicy.scala:310-312 (`tries`: no retry
  // after the last try, so no withdrawal asked).
  it("through the reference policy: each call deposits once, each retry withdraws, the last attempt asks nothing", () => {
    const { value } = Simulation.run(
      Effect.gen(function*() {
        const call = yield* finagleDefault.make({ attemptTimeoutMillis: 1_000, providerSlots: 1 })
        let attempts = 0
        const failing = Effect.suspend(() => {
          attempts++
          return Effect.fail(overloaded)
        })
        for (let i = 0; i < 60; i++) yield* Effect.exit(call(failing, 60_000))
        return attempts
      }),
      { seed: 1 }
    )
    // 3 attempts a call: 55 calls take their 2 retries from the reserve of 100 and their own
    // deposits (100 + 55 / 5 = 111 retries' worth, 110 spent); the 56th has one left; the next four
    // deposit 0.8 of a retry, and the 60th's deposit completes it.
    assert.strictEqual(value, 60 + 55 * 2 + 1 + 1)
  })
})

describe("gRPC retry throttling (grpc-throttling)", () => {
  const tokens = (throttle: RetryBudget.Service) => Effect.map(throttle.snapshot, (snapshot) => snapshot.allowance)
  const fail = (throttle: RetryBudget.Service) => FastPath.budget(throttle)!.recordFailure!(overloaded, 1)

  // A6-client-retries.md:172-178, 399-406 ("maxTokens": 10, "tokenRatio": 0.1), 85-93 ("maxAttempts": 4).
  it("the storm's throttle is A6's example: maxTokens 10, tokenRatio 0.1, 4 attempts", () => {
    assert.include(grpcDefault.description, "4 attempts")
    assert.include(grpcDefault.description, "maxTokens 10, tokenRatio 0.1")
  })

  // A6-client-retries.md:183-187 (starts at maxTokens; a failure -1; no retry while
  // token_count <= maxTokens / 2); RetriableStream.java:1511-1520 (decrement, then check
  // `decremented > threshold`), 1075-1080 (the check comes before the attempt ceiling's).
  it.effect("from 10 tokens, four failures leave retries allowed; the fifth reaches 5 and stops them", () =>
    Effect.gen(function*() {
      const throttle = yield* StormPolicies.grpcThrottling(10, 0.1)
      assert.strictEqual(yield* tokens(throttle), 10)
      for (let failure = 1; failure <= 4; failure++) {
        yield* fail(throttle)
        assert.isTrue(yield* throttle.tryAcquire(overloaded), `${10 - failure} tokens`)
      }
      yield* fail(throttle)
      assert.strictEqual(yield* tokens(throttle), 5)
      assert.isFalse(yield* throttle.tryAcquire(overloaded), "5 is not over 10 / 2")
    }))

  // A6-client-retries.md:183 ("can take values between `0` and `maxTokens`"); RetriableStream.java:1518
  // (`Math.max(decremented, 0)`), 1533 (`Math.min(incremented, maxTokens)`).
  it.effect("the count stays within 0 and maxTokens: 51 successes after a long outage bring retries back", () =>
    Effect.gen(function*() {
      const throttle = yield* StormPolicies.grpcThrottling(10, 0.1)
      for (let success = 0; success < 5; success++) yield* throttle.recordSuccess(1)
      assert.strictEqual(yield* tokens(throttle), 10, "not above maxTokens")
      for (let failure = 0; failure < 20; failure++) yield* fail(throttle)
      assert.strictEqual(yield* tokens(throttle), 0, "not below 0")
      for (let success = 0; success < 50; success++) yield* throttle.recordSuccess(1)
      assert.strictEqual(yield* tokens(throttle), 5)
      assert.isFalse(yield* throttle.tryAcquire(overloaded))
      yield* throttle.recordSuccess(1)
      assert.isTrue(yield* throttle.tryAcquire(overloaded), "5.1 is over the threshold")
    }))

  // A6-client-retries.md:400 ("throttles retry attempts and hedged RPCs when the client's ratio of
  // failures to successes exceeds ~10%"), 184-185 (-1 per failure, +tokenRatio per success).
  it.effect("one failure per ten successes never throttles; one per nine throttles at the 41st failure", () =>
    Effect.gen(function*() {
      const tenToOne = yield* StormPolicies.grpcThrottling(10, 0.1)
      for (let round = 0; round < 1_000; round++) {
        yield* fail(tenToOne)
        assert.isTrue(yield* tenToOne.tryAcquire(overloaded))
        for (let success = 0; success < 10; success++) yield* tenToOne.recordSuccess(1)
      }
      assert.strictEqual(yield* tokens(tenToOne), 10)

      // Each round of one failure and nine successes loses a tenth of a token: before the 41st
      // failure 6 are left, and that failure leaves 5.
      const nineToOne = yield* StormPolicies.grpcThrottling(10, 0.1)
      let throttledAt = 0
      for (let round = 1; throttledAt === 0; round++) {
        yield* fail(nineToOne)
        if (!(yield* nineToOne.tryAcquire(overloaded))) throttledAt = round
        for (let success = 0; success < 9; success++) yield* nineToOne.recordSuccess(1)
      }
      assert.strictEqual(throttledAt, 41)
    }))

  // A6-client-retries.md:199 ("Decimal places beyond 3 are ignored. (eg. 0.5466 is treated as 0.546.)");
  // RetriableStream.java:1494 (`(int) (tokenRatio * THREE_DECIMAL_PLACES_SCALE_UP)`, a truncation).
  it.effect("tokenRatio 0.5466 earns 0.546 a success", () =>
    Effect.gen(function*() {
      const throttle = yield* StormPolicies.grpcThrottling(10, 0.5466)
      yield* fail(throttle)
      yield* throttle.recordSuccess(1)
      assert.strictEqual(yield* tokens(throttle), 9.546)
      // A decimal whose binary product falls just short (1.005 · 1000 = 1004.99…) keeps its third place.
      const exact = yield* StormPolicies.grpcThrottling(10, 1.005)
      yield* fail(exact)
      yield* exact.recordSuccess(1)
      assert.strictEqual(yield* tokens(exact), 10)
      yield* fail(exact)
      yield* fail(exact)
      yield* exact.recordSuccess(1)
      assert.strictEqual(yield* tokens(exact), 9.005)
    }))

  // A6-client-retries.md:184 ("Every failed RPC"), 328 (each retry attempt is a distinct RPC);
  // RetriableStream.java:1070-1080 (every failed attempt with a retryable status spends a token,
  // the last one too), 896 (a success earns, once per call).
  it("through the reference policy: every failed attempt spends a token, and the failure that would be retried counts first", () => {
    const { value } = Simulation.run(
      Effect.gen(function*() {
        const call = yield* grpcDefault.make({ attemptTimeoutMillis: 1_000, providerSlots: 1 })
        const attempted = (outcomes: ReadonlyArray<"fail" | "ok">) =>
          Effect.gen(function*() {
            let attempts = 0
            const attempt = Effect.suspend(() => outcomes[attempts++] === "ok" ? Effect.void : Effect.fail(overloaded))
            const exit = yield* Effect.exit(call(attempt, 60_000))
            return { attempts, ok: Exit.isSuccess(exit) }
          })
        // 4 attempts, 4 tokens: 10 → 6. Then 1 attempt: 6 → 5, throttled. Then 5 → 4.
        const first = yield* attempted(["fail", "fail", "fail", "fail"])
        const second = yield* attempted(["fail", "fail"])
        const third = yield* attempted(["fail", "fail"])
        // 20 successes make 6.0: a failure takes it back to 5, not over the threshold.
        for (let i = 0; i < 20; i++) yield* attempted(["ok"])
        const atSix = yield* attempted(["fail", "ok"])
        // 5 again; 11 successes make 6.1, and a failure leaves 5.1: retried.
        for (let i = 0; i < 11; i++) yield* attempted(["ok"])
        const overSix = yield* attempted(["fail", "ok"])
        return { first, second, third, atSix, overSix }
      }),
      { seed: 1 }
    )
    assert.deepStrictEqual(value, {
      first: { attempts: 4, ok: false },
      second: { attempts: 1, ok: false },
      third: { attempts: 1, ok: false },
      atSix: { attempts: 1, ok: false },
      overSix: { attempts: 2, ok: true }
    })
  })
})
