import { TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Failure, RetryBudget } from "@resilient-ai/policy"
import { Budgets, EffectLine, Either, FastPath } from "@resilient-ai/policy/internal"
import { Duration, Effect, Fiber } from "effect"
import { invalidSettings, valid } from "./support.js"

/** The failure a retry is asked for after; the ratio budget does not look at it. */
const anyFailure = new Failure.ServerError({ status: 503 })

const defaults = valid(Budgets.settings())

/** Asks `n` times and counts the grants. */
const acquireTimes = (budget: RetryBudget.Service, n: number) =>
  Effect.map(
    Effect.replicateEffect(budget.tryAcquire(anyFailure), n),
    (answers) => answers.filter((granted) => granted).length
  )

const recordTimes = (budget: RetryBudget.Service, n: number) =>
  Effect.asVoid(Effect.replicateEffect(budget.recordSuccess(1), n))

const windowAcquireTimes = (window: Budgets.Window, nowMillis: number, n: number): number => {
  let granted = 0
  for (let i = 0; i < n; i++) if (window.tryAcquire(nowMillis)) granted++
  return granted
}

describe("Budgets.settings", () => {
  it("fills in ratio 0.1, a 60 s window, 5 per second and 60 buckets", () => {
    assert.deepStrictEqual(valid(Budgets.settings()), {
      ratio: 0.1,
      windowMillis: 60_000,
      minPerSecond: 5,
      buckets: 60,
      shareWhenRetriesFail: 1
    })
    assert.deepStrictEqual(valid(Budgets.settings({})), defaults)
    assert.deepStrictEqual(
      valid(Budgets.settings({ ratio: undefined, window: undefined, minPerSecond: undefined, buckets: undefined })),
      defaults
    )
  })

  it("keeps the values given, with the window in milliseconds", () => {
    assert.deepStrictEqual(
      valid(Budgets.settings({ ratio: 0.25, window: "30 seconds", minPerSecond: 2, buckets: 15 })),
      { ratio: 0.25, windowMillis: 30_000, minPerSecond: 2, buckets: 15, shareWhenRetriesFail: 1 }
    )
    assert.strictEqual(valid(Budgets.settings({ window: 1500 })).windowMillis, 1500)
    assert.strictEqual(valid(Budgets.settings({ window: Duration.minutes(2) })).windowMillis, 120_000)
  })

  it("accepts a zero ratio and a zero floor", () => {
    const settings = valid(Budgets.settings({ ratio: 0, minPerSecond: 0 }))
    assert.strictEqual(settings.ratio, 0)
    assert.strictEqual(settings.minPerSecond, 0)
  })

  const invalid: ReadonlyArray<readonly [string, RetryBudget.Options, string]> = [
    ["negative ratio", { ratio: -0.1 }, "ratio must be between 0 and 1 (0.1 allows 10% retries), got -0.1"],
    ["ratio above 1", { ratio: 1.5 }, "ratio must be between 0 and 1 (0.1 allows 10% retries), got 1.5"],
    ["NaN ratio", { ratio: NaN }, "ratio must be a number, got NaN"],
    ["infinite ratio", { ratio: Infinity }, "ratio must be between 0 and 1 (0.1 allows 10% retries), got Infinity"],
    ["zero window", { window: 0 }, "window must be positive, got 0"],
    ["negative window", { window: "-5 seconds" }, "window must not be negative, got -5 seconds"],
    ["infinite window", { window: Duration.infinity }, "window must be finite, got Infinity"],
    ["negative minPerSecond", { minPerSecond: -1 }, "minPerSecond must be a finite number >= 0, got -1"],
    ["NaN minPerSecond", { minPerSecond: NaN }, "minPerSecond must be a number, got NaN"],
    ["non-integer buckets", { buckets: 1.5 }, "buckets must be an integer >= 1, got 1.5"],
    ["zero buckets", { buckets: 0 }, "buckets must be an integer >= 1, got 0"],
    ["negative buckets", { buckets: -60 }, "buckets must be an integer >= 1, got -60"]
  ]
  for (const [name, options, message] of invalid) {
    it(`is an InvalidSettings naming the option for a ${name}`, () => {
      const settings = Budgets.settings(options)
      assert.isTrue(Either.isLeft(settings))
      if (Either.isLeft(settings)) assert.strictEqual(Either.leftOf(settings).message, `retry budget: ${message}`)
    })
  }

  it("fails when the budget is assembled, not on the first retry, and never throws", () => {
    assert.include(invalidSettings(RetryBudget.make({ ratio: -1 })), "ratio")
    assert.include(invalidSettings(RetryBudget.make({ buckets: 0 })), "buckets")
  })
})

describe("Budgets.allowance", () => {
  it("is the floor of minPerSecond × window until ratio × successes passes it", () => {
    assert.strictEqual(Budgets.allowance(defaults, 0), 300)
    assert.strictEqual(Budgets.allowance(defaults, 2_000), 300)
    assert.strictEqual(Budgets.allowance(defaults, 3_000), 300)
    assert.strictEqual(Budgets.allowance(defaults, 5_000), 500)
    assert.strictEqual(Budgets.allowance(defaults, 10_000), 1_000)
  })

  it("follows the settings", () => {
    const settings = valid(Budgets.settings({ ratio: 0.5, window: "10 seconds", minPerSecond: 1 }))
    assert.strictEqual(Budgets.allowance(settings, 0), 10)
    assert.strictEqual(Budgets.allowance(settings, 30), 15)
    assert.strictEqual(Budgets.allowance(valid(Budgets.settings({ ratio: 0, minPerSecond: 0 })), 1_000_000), 0)
  })
})

describe("RetryBudget.make", () => {
  it.effect("starts empty, allowing the floor", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make()
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 0, retries: 0, paid: 0, allowance: 300 })
    }))

  it.effect("with 10,000 successes allows 1,000 retries and refuses the 1,001st", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make()
      yield* recordTimes(budget, 10_000)
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 10_000, retries: 0, paid: 0, allowance: 1_000 })
      assert.strictEqual(yield* acquireTimes(budget, 1_000), 1_000)
      assert.isFalse(yield* budget.tryAcquire(anyFailure))
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 10_000, retries: 1_000, paid: 0, allowance: 1_000 })
    }))

  it.effect("counts only granted retries, and a new success makes room for more", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make()
      yield* recordTimes(budget, 10_000)
      assert.strictEqual(yield* acquireTimes(budget, 1_500), 1_000)
      assert.strictEqual((yield* budget.snapshot).retries, 1_000)
      // 10 more successes raise the allowance by exactly one retry.
      yield* recordTimes(budget, 10)
      assert.strictEqual(yield* acquireTimes(budget, 5), 1)
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 10_010, retries: 1_001, paid: 0, allowance: 1_001 })
    }))

  it.effect("lets a lone retry through a healthy stream of 100 successes a second", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make()
      const traffic = yield* EffectLine.fork(
        Effect.forEach(Array.from({ length: 60 }), () =>
          Effect.andThen(recordTimes(budget, 100), Effect.sleep("1 second")), { discard: true })
      )
      yield* TestClock.adjust("59 seconds")
      // Seconds 0 to 59 are all in the window.
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 6_000, retries: 0, paid: 0, allowance: 600 })
      assert.isTrue(yield* budget.tryAcquire(anyFailure))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(traffic)
      // Second 0 has left the window; the retry granted at second 59 is still in it.
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 5_900, retries: 1, paid: 0, allowance: 590 })
      assert.isTrue(yield* budget.tryAcquire(anyFailure))
    }))

  it.effect("grants exactly the floor, 300 retries a window, in a total outage", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make()
      assert.strictEqual(yield* acquireTimes(budget, 1_000), 300)
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 0, retries: 300, paid: 0, allowance: 300 })
      // Spreading the asks over the window does not get more: the 300 are for the whole window.
      yield* TestClock.adjust("30 seconds")
      assert.isFalse(yield* budget.tryAcquire(anyFailure))
      yield* TestClock.adjust("29 seconds")
      assert.isFalse(yield* budget.tryAcquire(anyFailure))
    }))

  it.effect("slides: successes and granted retries leave the window after it passes", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make()
      yield* recordTimes(budget, 10_000)
      assert.strictEqual(yield* acquireTimes(budget, 1_000), 1_000)
      assert.isFalse(yield* budget.tryAcquire(anyFailure))

      yield* TestClock.adjust(59_999)
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 10_000, retries: 1_000, paid: 0, allowance: 1_000 })
      assert.isFalse(yield* budget.tryAcquire(anyFailure))

      // The bucket of t = 0 leaves the window at t = 60 s.
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 0, retries: 0, paid: 0, allowance: 300 })
      // With the successes gone, retries collapse to the floor.
      assert.strictEqual(yield* acquireTimes(budget, 1_000), 300)
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 0, retries: 300, paid: 0, allowance: 300 })

      yield* TestClock.adjust("61 seconds")
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 0, retries: 0, paid: 0, allowance: 300 })
      assert.isTrue(yield* budget.tryAcquire(anyFailure))
    }))

  it.effect("slides one bucket at a time", () =>
    Effect.gen(function*() {
      // A 10 s window in five buckets of 2 s.
      const budget = yield* RetryBudget.make({ window: "10 seconds", buckets: 5, minPerSecond: 0, ratio: 1 })
      yield* TestClock.adjust("1 second")
      yield* recordTimes(budget, 7)
      yield* TestClock.adjust("2 seconds")
      yield* recordTimes(budget, 3)
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 10, retries: 0, paid: 0, allowance: 10 })
      // The 7 were recorded in the bucket [0 s, 2 s), which leaves at 10 s, 9 s after they were recorded.
      yield* TestClock.adjust(6_999)
      assert.strictEqual((yield* budget.snapshot).successes, 10)
      yield* TestClock.adjust(1)
      assert.strictEqual((yield* budget.snapshot).successes, 3)
      // The 3 were recorded in [2 s, 4 s) and leave at 12 s.
      yield* TestClock.adjust(1_999)
      assert.strictEqual((yield* budget.snapshot).successes, 3)
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 0, retries: 0, paid: 0, allowance: 0 })
      assert.isFalse(yield* budget.tryAcquire(anyFailure))
    }))

  it.effect("make builds a budget driven by the clock", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make({ minPerSecond: 1 })
      yield* recordTimes(budget, 5_000)
      const before = yield* acquireTimes(budget, 600)
      // Only the wait runs beside the clock: what a forked fiber does before it sleeps is not
      // waited for by every line's TestClock.
      const fiber = yield* EffectLine.fork(
        Effect.andThen(Effect.sleep("60 seconds"), Effect.all([acquireTimes(budget, 600), budget.snapshot]))
      )
      yield* TestClock.adjust("60 seconds")
      const [after, snapshot] = yield* Fiber.join(fiber)
      assert.strictEqual(before, 500)
      assert.strictEqual(after, 60)
      assert.deepStrictEqual(snapshot, { successes: 0, retries: 60, paid: 0, allowance: 60 })
    }))
})

describe("RetryBudget.disabled", () => {
  const budget = RetryBudget.disabled
  {
    it.effect("never grants a retry, however many successes", () =>
      Effect.gen(function*() {
        assert.isFalse(yield* budget.tryAcquire(anyFailure))
        yield* recordTimes(budget, 10_000)
        assert.strictEqual(yield* acquireTimes(budget, 100), 0)
      }))

    it.effect("reports an empty budget allowing nothing", () =>
      Effect.gen(function*() {
        yield* recordTimes(budget, 10)
        assert.deepStrictEqual(yield* budget.snapshot, { successes: 0, retries: 0, paid: 0, allowance: 0 })
      }))
  }
})

describe("RetryBudget.recording", () => {
  it.effect("records each retry asked for, whether the wrapped budget granted it, and each success", () =>
    Effect.gen(function*() {
      const recording = yield* RetryBudget.recording(RetryBudget.disabled)
      assert.isFalse(yield* recording.tryAcquire(anyFailure))
      yield* recording.recordSuccess(2)
      assert.deepStrictEqual(yield* recording.decisions, [
        { _tag: "Retry", failure: anyFailure, granted: false },
        { _tag: "Success", attempts: 2 }
      ])
      const granting = yield* RetryBudget.recording()
      assert.isTrue(yield* granting.tryAcquire(anyFailure))
      assert.deepStrictEqual(yield* granting.decisions, [{ _tag: "Retry", failure: anyFailure, granted: true }])
    }))
})

describe("Budgets.Window", () => {
  it("gives the same answers with explicit times", () => {
    const window = new Budgets.Window(defaults)
    assert.strictEqual(window.settings, defaults)
    assert.deepStrictEqual(window.snapshot(0), { successes: 0, retries: 0, paid: 0, allowance: 300 })
    for (let i = 0; i < 10_000; i++) window.recordSuccess(0)
    assert.strictEqual(windowAcquireTimes(window, 0, 1_001), 1_000)
    assert.deepStrictEqual(window.snapshot(59_999), { successes: 10_000, retries: 1_000, paid: 0, allowance: 1_000 })
    assert.isFalse(window.tryAcquire(59_999))
    assert.deepStrictEqual(window.snapshot(60_000), { successes: 0, retries: 0, paid: 0, allowance: 300 })
    assert.strictEqual(windowAcquireTimes(window, 60_000, 1_000), 300)
    assert.deepStrictEqual(window.snapshot(60_000), { successes: 0, retries: 300, paid: 0, allowance: 300 })
  })

  it.effect("agrees with the service decision for decision", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make()
      const window = new Budgets.Window(defaults)
      const fromService: Array<boolean> = []
      const fromWindow: Array<boolean> = []
      // 90 s of traffic: 160 successes and 40 asks per second for 45 s, then 45 s of asks alone.
      for (let second = 0; second < 90; second++) {
        const now = second * 1_000
        for (let i = 0; i < 40; i++) {
          if (second < 45) {
            for (let j = 0; j < 4; j++) {
              yield* budget.recordSuccess(1)
              window.recordSuccess(now)
            }
          }
          fromService.push(yield* budget.tryAcquire(anyFailure))
          fromWindow.push(window.tryAcquire(now))
        }
        assert.deepStrictEqual(yield* budget.snapshot, window.snapshot(now))
        yield* TestClock.adjust("1 second")
      }
      assert.deepStrictEqual(fromService, fromWindow)
      // 720 while successes come in (the floor's 300, then 10% of 7,200), 172 more as the first buckets leave.
      assert.strictEqual(fromService.filter((granted) => granted).length, 892)
    }))

  it("keeps its memory constant over 1,000,000 operations across 1,000 seconds", () => {
    const window = new Budgets.Window(defaults)
    // Memory is not observable through the API, so this reads the ring the window keeps.
    const ring = (window as unknown as {
      readonly counts: { readonly rings: { readonly successes: Float64Array; readonly retries: Float64Array } }
    }).counts.rings
    const successes = ring.successes
    const retries = ring.retries
    assert.strictEqual(successes.length, 60)
    assert.strictEqual(retries.length, 60)

    // 1,000 operations a second, a success then an ask, for 1,000 seconds.
    let granted = 0
    for (let i = 0; i < 1_000_000; i++) {
      const now = Math.floor(i / 1_000) * 1_000
      if (i % 2 === 0) window.recordSuccess(now)
      else if (window.tryAcquire(now)) granted++
    }
    // 10% of the 500,000 successes: the floor's early retries are paid back as the window fills.
    assert.strictEqual(granted, 50_000)
    assert.deepStrictEqual(window.snapshot(999_000), { successes: 30_000, retries: 3_000, paid: 0, allowance: 3_000 })
    assert.strictEqual(ring.successes, successes)
    assert.strictEqual(ring.retries, retries)
    assert.strictEqual(successes.length, 60)
    assert.strictEqual(retries.length, 60)

    // Nothing older than the window is kept: a quiet minute forgets the whole history.
    assert.deepStrictEqual(window.snapshot(1_058_999), { successes: 500, retries: 50, paid: 0, allowance: 300 })
    assert.deepStrictEqual(window.snapshot(1_059_000), { successes: 0, retries: 0, paid: 0, allowance: 300 })
    assert.strictEqual(windowAcquireTimes(window, 1_059_000, 1_000), 300)
  })
})

/**
 * A first use at a time whose bucket index is below `buckets - 1` once left the totals `NaN` (the
 * ring's slot was computed with a negative modulo), and then every retry was granted. `TestClock`
 * starts there, and a simulator's own clock may too.
 */
describe("a budget that learns whether retries pay", () => {
  const learning: Budgets.Settings = { ...defaults, shareWhenRetriesFail: 0.05 }

  /**
   * Asks for `n` retries at `now`, one after another, each settled before the next is asked for:
   * `paying` says which granted ones a call then succeeds on; the others fail.
   */
  const spend = (window: Budgets.Window, now: number, n: number, paying: (granted: number) => boolean) => {
    let granted = 0
    for (let i = 0; i < n; i++) {
      if (!window.tryAcquire(now)) continue
      granted++
      if (paying(granted)) window.recordSuccess(now, 2)
      else window.recordFailure(now, 2)
    }
    return granted
  }

  it("keeps 5% of the allowance while no retry pays, all of it while they all do, in proportion between", () => {
    assert.strictEqual(Budgets.payoff(learning, 0, 0), 1)
    assert.closeTo(Budgets.payoff(learning, 0, 18), 0.05 + 0.95 * (2 / 20), 1e-12)
    assert.strictEqual(Budgets.payoff(learning, 18, 0), 1)
    assert.closeTo(Budgets.payoff(learning, 48, 50), 0.05 + 0.95 * 0.5, 1e-12)
    // Learning off: the whole allowance whatever the retries did.
    assert.strictEqual(Budgets.payoff(defaults, 0, 1_000), 1)
  })

  it("retries that never pay stop after a handful, out of a floor of 300", () => {
    const window = new Budgets.Window(learning)
    // Granted while retries + 1 ≤ 300 × (0.05 + 0.95 × 2 / (failed + 2)): 32.
    assert.strictEqual(spend(window, 0, 300, () => false), 32)
    const { allowance, paid, retries } = window.snapshot(0)
    assert.deepStrictEqual({ retries, paid }, { retries: 32, paid: 0 })
    assert.closeTo(allowance, 300 * (0.05 + 0.95 * (2 / 34)), 1e-9)
    // Once they leave the window, the budget trusts retries again.
    assert.strictEqual(spend(window, 60_000, 400, () => true), 300)
  })

  it("retries that all pay keep the whole allowance; half of them, about half", () => {
    assert.strictEqual(spend(new Budgets.Window(learning), 0, 400, () => true), 300)
    assert.strictEqual(spend(new Budgets.Window(learning), 0, 400, (granted) => granted % 2 === 0), 159)
    // Without learning, the floor whatever the retries did.
    assert.strictEqual(spend(new Budgets.Window(defaults), 0, 400, () => false), 300)
  })

  it("does not judge retries still in flight: a burst sent together gets the whole allowance", () => {
    const window = new Budgets.Window(learning)
    assert.strictEqual(windowAcquireTimes(window, 0, 400), 300)
  })

  it.effect("the service learns from the attempts each success took and each failed retry", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make({ shareWhenRetriesFail: 0.05 })
      let granted = 0
      for (let i = 0; i < 300; i++) {
        if (!(yield* budget.tryAcquire(anyFailure))) continue
        granted++
        // The retry's attempt failed too.
        yield* FastPath.budget(budget)!.recordFailure!(anyFailure, 2)
      }
      assert.strictEqual(granted, 32)
      // A first attempt's failure says nothing of retries.
      yield* FastPath.budget(budget)!.recordFailure!(anyFailure, 1)
      // A call that succeeded on its second attempt: a retry paid.
      yield* budget.recordSuccess(2)
      assert.strictEqual((yield* budget.snapshot).paid, 1)
      yield* budget.recordSuccess(1)
      assert.strictEqual((yield* budget.snapshot).paid, 1)
      // Without learning, no failure needs to be heard.
      assert.isUndefined(FastPath.budget(yield* RetryBudget.make())?.recordFailure)
    }))

  it("is a share from 0 to 1", () => {
    for (const bad of [-0.1, 1.5, Number.NaN, "most"]) {
      assert.isTrue(Either.isLeft(Budgets.settings({ shareWhenRetriesFail: bad as number })), String(bad))
    }
  })
})

describe("RetryBudget first used at any time", () => {
  for (const first of [0, 1, 58_999, 59_000, 1_700_000_000_123]) {
    it(`counts from a first use at ${first} ms`, () => {
      const window = new Budgets.Window(defaults)
      assert.deepStrictEqual(window.snapshot(first), { successes: 0, retries: 0, paid: 0, allowance: 300 })
      for (let i = 0; i < 5_000; i++) window.recordSuccess(first)
      assert.strictEqual(windowAcquireTimes(window, first, 600), 500)
      assert.deepStrictEqual(window.snapshot(first), { successes: 5_000, retries: 500, paid: 0, allowance: 500 })
      // The first bucket leaves the window 60 s after it began, at the latest.
      assert.deepStrictEqual(window.snapshot(first + 60_000), { successes: 0, retries: 0, paid: 0, allowance: 300 })
      assert.strictEqual(windowAcquireTimes(window, first + 60_000, 600), 300)
    })
  }

  it.effect("grants exactly 300 retries in a total outage from TestClock's epoch 0", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make()
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 0, retries: 0, paid: 0, allowance: 300 })
      assert.strictEqual(yield* acquireTimes(budget, 1_000), 300)
    }))
})
