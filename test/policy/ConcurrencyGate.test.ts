import { dieMessage, pollFiber, TestClock, yieldNow } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { ConcurrencyGate, Deadline, Failure } from "@resilient-ai/policy"
import { EffectLine, Either, FastPath, Gates } from "@resilient-ai/policy/internal"
import { Duration, Effect, Exit, Fiber, Option, Ref } from "effect"
import { invalidSettings, valid } from "./support.js"

/** A failure's fields, tag included, to compare with exact values. */
const fieldsOf = (failure: Failure.Failure): { readonly [field: string]: unknown } => ({ ...failure })

/** Lets forked fibers run up to their next suspension, without moving the clock. */
const settle = TestClock.adjust(0)

/** Forks an acquire that appends `name` to `order` once it holds a permit. */
const enqueue = (
  gate: ConcurrencyGate.Service,
  order: Ref.Ref<ReadonlyArray<string>>,
  name: string,
  deadline = Number.POSITIVE_INFINITY
) =>
  Effect.tap(
    EffectLine.fork(Effect.andThen(gate.acquire(deadline), Ref.update(order, (names) => [...names, name]))),
    () => settle
  )

/** Takes `n` permits at once. */
const hold = (gate: ConcurrencyGate.Service, n: number) =>
  Effect.asVoid(Effect.replicateEffect(gate.acquire(Number.POSITIVE_INFINITY), n))

/** One attempt that ends with `outcome`. */
const attempt = (gate: ConcurrencyGate.Service, outcome: ConcurrencyGate.Outcome) =>
  Effect.andThen(gate.acquire(Number.POSITIVE_INFINITY), gate.release(outcome))

const isRunning = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.map(pollFiber(fiber), Option.isNone)

/** A gate of 100 that has just started recovering, at the current time. */
const recovering = Effect.gen(function*() {
  const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
  yield* gate.markDegraded
  yield* attempt(gate, "success")
  return gate
})

describe("Gates.settings", () => {
  it("fills in queue mode, a ramp from 10% ×1.5 every 5 s, 5 failures to degrade and no waiting bound", () => {
    assert.deepStrictEqual(valid(Gates.settings({ target: "llm", limit: 100 })), {
      target: "llm",
      limit: 100,
      mode: "queue",
      adaptive: true,
      minLimit: 1,
      backoffRatio: 0.9,
      backoffIntervalMillis: 1_000,
      rampStart: 0.1,
      rampFactor: 1.5,
      rampStepMillis: 5_000,
      degradeAfter: 5,
      maxWaiting: Number.POSITIVE_INFINITY
    })
  })

  it("keeps the values given, with the ramp step in milliseconds", () => {
    assert.deepStrictEqual(
      valid(Gates.settings({
        target: "gpu",
        limit: 8,
        mode: "shed",
        rampStart: 0.25,
        rampFactor: 2,
        rampStep: "1 second",
        degradeAfter: 3,
        maxWaiting: 0
      })),
      {
        target: "gpu",
        limit: 8,
        mode: "shed",
        adaptive: false,
        minLimit: 1,
        backoffRatio: 0.9,
        backoffIntervalMillis: 1_000,
        rampStart: 0.25,
        rampFactor: 2,
        rampStepMillis: 1_000,
        degradeAfter: 3,
        maxWaiting: 0
      }
    )
    assert.strictEqual(valid(Gates.settings({ target: "any", limit: Infinity })).limit, Infinity)
    assert.strictEqual(valid(Gates.settings({ target: "one", limit: 1, rampStart: 1 })).rampStart, 1)
  })

  const invalid: ReadonlyArray<readonly [string, Partial<ConcurrencyGate.Options>, string]> = [
    ["zero limit", { limit: 0 }, "limit must be an integer >= 1, got 0"],
    ["fractional limit", { limit: 2.5 }, "limit must be an integer >= 1, got 2.5"],
    ["NaN limit", { limit: NaN }, "limit must be a number, got NaN"],
    ["zero rampStart", { rampStart: 0 }, "rampStart must be in (0, 1], got 0"],
    ["rampStart above 1", { rampStart: 1.5 }, "rampStart must be in (0, 1], got 1.5"],
    ["rampFactor of 1", { rampFactor: 1 }, "rampFactor must be a finite number > 1, got 1"],
    ["infinite rampFactor", { rampFactor: Infinity }, "rampFactor must be a finite number > 1, got Infinity"],
    ["zero rampStep", { rampStep: 0 }, "rampStep must be positive, got 0"],
    ["infinite rampStep", { rampStep: Duration.infinity }, "rampStep must be finite, got Infinity"],
    ["zero degradeAfter", { degradeAfter: 0 }, "degradeAfter must be an integer >= 1, got 0"],
    ["fractional degradeAfter", { degradeAfter: 2.5 }, "degradeAfter must be an integer >= 1, got 2.5"],
    ["negative maxWaiting", { maxWaiting: -1 }, "maxWaiting must be an integer >= 0, got -1"],
    ["fractional maxWaiting", { maxWaiting: 1.5 }, "maxWaiting must be an integer >= 0, got 1.5"]
  ]
  for (const [name, options, message] of invalid) {
    it(`is an InvalidSettings naming the option for a ${name}`, () => {
      const settings = Gates.settings({ target: "llm", limit: 10, ...options })
      assert.isTrue(Either.isLeft(settings))
      if (Either.isLeft(settings)) {
        assert.strictEqual(Either.leftOf(settings).message, `concurrency gate for llm: ${message}`)
      }
    })
  }

  it("fails when the gate is assembled, and never throws", () => {
    assert.include(invalidSettings(ConcurrencyGate.make({ target: "llm", limit: 0 })), "limit")
    assert.include(
      invalidSettings(ConcurrencyGate.make({ target: "llm", limit: 10, rampFactor: 0.5 })),
      "rampFactor"
    )
  })
})

describe("ConcurrencyGate ramp", () => {
  it("starts at 10 for a limit of 100 and grows ×1.5, rounded up, to the limit", () => {
    const settings = valid(Gates.settings({ target: "llm", limit: 100 }))
    assert.strictEqual(Gates.rampFloor(settings), 10)
    assert.deepStrictEqual(
      [0, 1, 2, 3, 4, 5, 6, 7].map((steps) => Gates.rampLimit(settings, steps)),
      [10, 15, 23, 35, 53, 80, 100, 100]
    )
    assert.strictEqual(Gates.rampLimit(settings, 1_000), 100)
  })

  it("rounds each step up, not to the nearest", () => {
    const settings = valid(Gates.settings({ target: "llm", limit: 100, rampFactor: 1.3 }))
    assert.deepStrictEqual(
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((steps) => Gates.rampLimit(settings, steps)),
      [10, 13, 17, 23, 30, 39, 51, 67, 88, 100]
    )
  })

  it("never goes below one", () => {
    const settings = valid(Gates.settings({ target: "gpu", limit: 3 }))
    assert.strictEqual(Gates.rampFloor(settings), 1)
    assert.deepStrictEqual([0, 1, 2, 3].map((steps) => Gates.rampLimit(settings, steps)), [1, 2, 3, 3])
    assert.strictEqual(Gates.rampFloor(valid(Gates.settings({ target: "one", limit: 1 }))), 1)
  })

  it("follows rampStart and rampFactor", () => {
    const settings = valid(Gates.settings({ target: "llm", limit: 50, rampStart: 0.25, rampFactor: 2 }))
    assert.strictEqual(Gates.rampFloor(settings), 12)
    assert.deepStrictEqual([0, 1, 2, 3].map((steps) => Gates.rampLimit(settings, steps)), [12, 24, 48, 50])
  })
})

describe("ConcurrencyGate shed mode", () => {
  it.effect("fails the (limit + 1)-th concurrent acquire at once with Shed", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "gpu-pool", limit: 2, mode: "shed" })
      yield* hold(gate, 2)
      const error = yield* Effect.flip(gate.acquire(Number.POSITIVE_INFINITY))
      assert.deepStrictEqual(fieldsOf(error), { _tag: "Shed", target: "gpu-pool", limit: 2, inFlight: 2 })
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 2, inFlight: 2, waiting: 0, health: "steady" })
      // A released permit can be taken again.
      yield* gate.release("success")
      yield* gate.acquire(Number.POSITIVE_INFINITY)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 2, inFlight: 2, waiting: 0, health: "steady" })
    }))

  it.effect("sheds at the lowered limit once degraded", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "gpu-pool", limit: 100, mode: "shed" })
      yield* hold(gate, 50)
      yield* gate.markDegraded
      const error = yield* Effect.flip(gate.acquire(Number.POSITIVE_INFINITY))
      assert.deepStrictEqual(fieldsOf(error), { _tag: "Shed", target: "gpu-pool", limit: 10, inFlight: 50 })
    }))
})

describe("ConcurrencyGate queue mode", () => {
  it.effect("serves waiters first come, first served as permits are released", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      yield* hold(gate, 1)
      const a = yield* enqueue(gate, order, "a")
      const b = yield* enqueue(gate, order, "b")
      const c = yield* enqueue(gate, order, "c")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 3, health: "steady" })
      assert.deepStrictEqual(yield* Ref.get(order), [])

      yield* gate.release("success")
      yield* settle
      assert.deepStrictEqual(yield* Ref.get(order), ["a"])
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 2, health: "steady" })

      yield* gate.release("success")
      yield* settle
      assert.deepStrictEqual(yield* Ref.get(order), ["a", "b"])
      assert.isTrue(yield* isRunning(c))

      yield* gate.release("success")
      yield* settle
      assert.deepStrictEqual(yield* Ref.get(order), ["a", "b", "c"])
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
      yield* Fiber.join(a)
      yield* Fiber.join(b)
    }))

  it.effect("bounds a wait by the deadline passed to acquire", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      yield* hold(gate, 1)
      const waiter = yield* EffectLine.fork(Effect.flip(gate.acquire(1_000)))
      yield* TestClock.adjust(999)
      assert.isTrue(yield* isRunning(waiter))
      assert.strictEqual((yield* gate.snapshot).waiting, 1)
      yield* TestClock.adjust(1)
      const error = yield* Fiber.join(waiter)
      assert.deepStrictEqual(fieldsOf(error), { _tag: "DeadlineExceeded", deadline: 1_000, phase: "queue" })
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
    }))

  it.effect("fails at once when the deadline has already passed", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      yield* TestClock.adjust(5_000)
      // A free permit is taken whatever the deadline: only the wait is bounded.
      yield* gate.acquire(4_000)
      const error = yield* Effect.flip(gate.acquire(5_000))
      assert.deepStrictEqual(fieldsOf(error), { _tag: "DeadlineExceeded", deadline: 5_000, phase: "queue" })
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
    }))

  it.effect("removes an interrupted waiter without losing a permit", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      yield* hold(gate, 1)
      const a = yield* enqueue(gate, order, "a")
      yield* enqueue(gate, order, "b")
      yield* Fiber.interrupt(a)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 1, health: "steady" })

      yield* gate.release("success")
      yield* settle
      assert.deepStrictEqual(yield* Ref.get(order), ["b"])
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
      yield* gate.release("success")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 0, waiting: 0, health: "steady" })
      yield* gate.acquire(Number.POSITIVE_INFINITY)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
    }))

  it.effect("a waiter interrupted just after being granted gives the permit back", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      yield* hold(gate, 1)
      const waiter = yield* enqueue(gate, order, "w")
      // The release hands the permit to the waiter, which is interrupted before it runs again.
      yield* gate.release("success")
      yield* Fiber.interrupt(waiter)
      assert.deepStrictEqual(yield* Ref.get(order), [])
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 0, waiting: 0, health: "steady" })
      yield* gate.acquire(Number.POSITIVE_INFINITY)
    }))

  it.effect("removes a waiter interrupted while its deadline runs", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      yield* hold(gate, 1)
      const waiter = yield* EffectLine.fork(gate.acquire(10_000))
      yield* TestClock.adjust(1_000)
      yield* Fiber.interrupt(waiter)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
      yield* gate.release("success")
      yield* TestClock.adjust(10_000)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 0, waiting: 0, health: "steady" })
    }))

  // No clock is involved, so the test runs live: joining each fiber in turn is quicker than letting
  // the TestClock look over 1,500 suspended fibers after every release.
  it.live("serves thousands of waiters in the order they came, those that gave up left out", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      const order: Array<number> = []
      yield* hold(gate, 1)
      // More than the line keeps before it compacts itself (1,024 taken).
      const waiters = 1_500
      const fibers: Array<Fiber.Fiber<unknown, unknown>> = []
      for (let i = 0; i < waiters; i++) {
        fibers.push(
          yield* EffectLine.fork(
            Effect.andThen(gate.acquire(Number.POSITIVE_INFINITY), Effect.sync(() => order.push(i)))
          )
        )
      }
      yield* yieldNow
      assert.strictEqual((yield* gate.snapshot).waiting, waiters)
      // Some leave before their turn: early in the line, in the middle, and at its end.
      const leaving = new Set([0, 750, 1_499])
      for (const i of leaving) yield* Fiber.interrupt(fibers[i]!)
      assert.strictEqual((yield* gate.snapshot).waiting, waiters - leaving.size)
      const expected = fibers.map((_, i) => i).filter((i) => !leaving.has(i))
      for (const i of expected) {
        yield* gate.release("success")
        yield* Fiber.join(fibers[i]!).pipe(
          (self) =>
            EffectLine.timeoutFail(self, {
              duration: "30 seconds",
              onTimeout: () => `waiter ${i} not served; served ${order.join(",")}`
            })
        )
      }
      assert.deepStrictEqual(order, expected)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
    }))

  it.effect("sheds beyond maxWaiting", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1, maxWaiting: 2 })
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      yield* hold(gate, 1)
      yield* enqueue(gate, order, "a")
      yield* enqueue(gate, order, "b")
      const error = yield* Effect.flip(gate.acquire(Number.POSITIVE_INFINITY))
      assert.deepStrictEqual(fieldsOf(error), { _tag: "Shed", target: "llm", limit: 1, inFlight: 1 })
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 2, health: "steady" })
      // Once one leaves the line, there is room for one more.
      yield* gate.release("success")
      yield* settle
      yield* enqueue(gate, order, "c")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 2, health: "steady" })
    }))

  it.effect("with maxWaiting 0 sheds as soon as it is full", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 3, maxWaiting: 0 })
      yield* hold(gate, 3)
      const error = yield* Effect.flip(gate.acquire(Number.POSITIVE_INFINITY))
      assert.deepStrictEqual(fieldsOf(error), { _tag: "Shed", target: "llm", limit: 3, inFlight: 3 })
    }))
})

// On the real clock a waiter's deadline is the platform's own timer, not a forked sleep.
describe("ConcurrencyGate queue mode on the real clock", () => {
  it.live("a waiter's deadline ends its wait once it has passed, and the line is left as it was", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      yield* hold(gate, 1)
      const started = Date.now()
      const deadline = started + 60
      const error = yield* Effect.flip(gate.acquire(deadline))
      assert.isAtLeast(Date.now(), deadline)
      assert.deepStrictEqual(fieldsOf(error), { _tag: "DeadlineExceeded", deadline, phase: "queue" })
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
    }))

  it.live("a waiter interrupted before its deadline is gone: the next release goes to the one behind it", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      yield* hold(gate, 1)
      const first = yield* EffectLine.fork(gate.acquire(Date.now() + 60_000))
      const second = yield* EffectLine.fork(gate.acquire(Date.now() + 60_000))
      yield* yieldNow
      assert.strictEqual((yield* gate.snapshot).waiting, 2)
      yield* Fiber.interrupt(first)
      assert.strictEqual((yield* gate.snapshot).waiting, 1)
      yield* gate.release("success")
      yield* Fiber.join(second)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
    }))

  it.live("a granted waiter with a deadline gets its permit at once, not at the deadline", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      yield* hold(gate, 1)
      const waiter = yield* EffectLine.fork(gate.acquire(Date.now() + 60_000))
      yield* yieldNow
      yield* gate.release("success")
      // Joined long before the deadline: the timer beside the wait did not hold it.
      yield* Fiber.join(waiter).pipe((self) =>
        EffectLine.timeoutFail(self, { duration: "30 seconds", onTimeout: () => "still waiting" })
      )
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
    }))
})

describe("ConcurrencyGate health", () => {
  it.effect("degrades after 5 overloads in a row and drops the limit to 10% of steady", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      for (let i = 0; i < 4; i++) yield* attempt(gate, "overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 100, inFlight: 0, waiting: 0, health: "steady" })
      yield* attempt(gate, "overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "degraded" })
      // It stays degraded, at the floor, however long it waits: only a success starts the ramp.
      yield* TestClock.adjust("1 hour")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "degraded" })
    }))

  it.effect("a success in between resets the count", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      for (let i = 0; i < 4; i++) yield* attempt(gate, "overload")
      yield* attempt(gate, "success")
      for (let i = 0; i < 4; i++) yield* attempt(gate, "overload")
      assert.strictEqual((yield* gate.snapshot).health, "steady")
      yield* attempt(gate, "overload")
      assert.strictEqual((yield* gate.snapshot).health, "degraded")
    }))

  it.effect("a neutral outcome neither counts nor resets", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      for (let i = 0; i < 10; i++) yield* attempt(gate, "neutral")
      assert.strictEqual((yield* gate.snapshot).health, "steady")
      for (let i = 0; i < 4; i++) yield* attempt(gate, "overload")
      for (let i = 0; i < 3; i++) yield* attempt(gate, "neutral")
      assert.strictEqual((yield* gate.snapshot).health, "steady")
      yield* attempt(gate, "overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "degraded" })
    }))

  it.effect("follows degradeAfter", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 40, degradeAfter: 2 })
      yield* attempt(gate, "overload")
      assert.strictEqual((yield* gate.snapshot).health, "steady")
      yield* attempt(gate, "overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 4, inFlight: 0, waiting: 0, health: "degraded" })
    }))

  it.effect("counts overloads reported by calls that overlap", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* hold(gate, 20)
      for (let i = 0; i < 5; i++) yield* gate.release("overload")
      // The 15 calls still in flight count against the lowered limit of 10.
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 15, waiting: 0, health: "degraded" })
    }))

  it.effect("ramps back from the first success: 10, 15, 23, 35, 53, 80, 100 every 5 s", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* TestClock.adjust("1 minute")
      for (let i = 0; i < 5; i++) yield* attempt(gate, "overload")
      yield* TestClock.adjust("30 seconds")
      // The success comes 90 s after the epoch: the ramp counts from it, not from the degradation.
      yield* attempt(gate, "success")
      const seen: Array<readonly [number, ConcurrencyGate.Health]> = []
      for (let step = 0; step < 8; step++) {
        const { health, limit } = yield* gate.snapshot
        seen.push([limit, health])
        yield* TestClock.adjust(4_999)
        assert.strictEqual((yield* gate.snapshot).limit, limit)
        yield* TestClock.adjust(1)
      }
      assert.deepStrictEqual(seen, [
        [10, "recovering"],
        [15, "recovering"],
        [23, "recovering"],
        [35, "recovering"],
        [53, "recovering"],
        [80, "recovering"],
        [100, "steady"],
        [100, "steady"]
      ])
    }))

  it.effect("a further success while recovering does not restart the ramp", () =>
    Effect.gen(function*() {
      const gate = yield* recovering
      yield* TestClock.adjust("10 seconds")
      yield* attempt(gate, "success")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 23, inFlight: 0, waiting: 0, health: "recovering" })
    }))

  it.effect("degrades again on overloads while recovering", () =>
    Effect.gen(function*() {
      const gate = yield* recovering
      yield* TestClock.adjust("10 seconds")
      for (let i = 0; i < 5; i++) yield* attempt(gate, "overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "degraded" })
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual((yield* gate.snapshot).limit, 10)
    }))

  it.effect("admits a waiter when the ramp raises the limit, with no permit released", () =>
    Effect.gen(function*() {
      const gate = yield* recovering
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      yield* hold(gate, 10)
      for (const name of ["a", "b", "c", "d", "e", "f"]) yield* enqueue(gate, order, name)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 10, waiting: 6, health: "recovering" })
      yield* TestClock.adjust(4_999)
      assert.strictEqual((yield* Ref.get(order)).length, 0)
      yield* TestClock.adjust(1)
      assert.strictEqual((yield* Ref.get(order)).length, 5)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 15, inFlight: 15, waiting: 1, health: "recovering" })
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual((yield* Ref.get(order)).length, 6)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 23, inFlight: 16, waiting: 0, health: "recovering" })
    }))

  it.effect("a waiter with a deadline is still admitted at the raise before it", () =>
    Effect.gen(function*() {
      const gate = yield* recovering
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      yield* hold(gate, 10)
      const late = yield* enqueue(gate, order, "late", 12_000)
      yield* TestClock.adjust("5 seconds")
      yield* Fiber.join(late)
      assert.deepStrictEqual(yield* Ref.get(order), ["late"])
    }))

  /**
   * BUG (ConcurrencyGate.ts, `waitForPermit`, `const wakeAt`): a waiter takes its ramp wake-up from
   * `nextRaiseAt` only when it starts waiting. One that started while the target was degraded (or
   * steady) has no wake-up at the raises, so once the ramp runs it stays queued while the limit is
   * above `inFlight`, until a release or a new `acquire` happens to call `grantWaiting`.
   */
  it.effect("wakes a waiter at a ramp step a sliver of a millisecond away, instead of spinning at the same instant", () =>
    Effect.gen(function*() {
      // Times with fractions: the next step is 1e-9 ms away, which `Duration` would round to no wait at all.
      yield* TestClock.setTime(0.1)
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* gate.markDegraded
      yield* gate.markRecovered
      yield* hold(gate, 10)
      yield* TestClock.setTime(5000.1 - 1e-9)
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      yield* enqueue(gate, order, "just before the step")
      yield* TestClock.adjust("2 millis")
      assert.deepStrictEqual(yield* Ref.get(order), ["just before the step"])
      assert.strictEqual((yield* gate.snapshot).limit, 15)
    }))

  it.effect("while a probe holds recovery, a success does not start the ramp; markRecovered does, and so does a success once let go", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* gate.markDegraded
      yield* FastPath.gate(gate)!.holdRecovery!(true)
      yield* gate.observe("success")
      assert.strictEqual((yield* gate.snapshot).health, "degraded")
      yield* gate.markRecovered
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "recovering" })
      yield* gate.markDegraded
      yield* FastPath.gate(gate)!.holdRecovery!(false)
      yield* gate.observe("success")
      assert.strictEqual((yield* gate.snapshot).health, "recovering")
    }))

  it.effect("admits a waiter queued while degraded when the ramp raises the limit", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* hold(gate, 10)
      yield* gate.markDegraded
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      yield* enqueue(gate, order, "queued-while-degraded")
      yield* gate.markRecovered
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 10, waiting: 1, health: "recovering" })
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 15, inFlight: 11, waiting: 0, health: "recovering" })
      assert.deepStrictEqual(yield* Ref.get(order), ["queued-while-degraded"])
    }))

  // Waiters keep their place in line across ramp raises (once, each lost it at every raise); while
  // the target recovers the newest is served first, since the oldest has the least time left.
  it.effect("serves the newest waiter first while recovering, and keeps the others in line across raises", () =>
    Effect.gen(function*() {
      // A limit of 3 ramps 1, 2, 3: one more permit at each step.
      const gate = yield* ConcurrencyGate.make({ target: "gpu", limit: 3 })
      yield* hold(gate, 1)
      yield* gate.markDegraded
      yield* gate.markRecovered
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      for (const name of ["a", "b", "c"]) yield* enqueue(gate, order, name)
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(yield* Ref.get(order), ["c"])
      yield* TestClock.adjust("5 seconds")
      // Steady again at 3: the rest in their order of arrival.
      assert.deepStrictEqual(yield* Ref.get(order), ["c", "a"])
      assert.strictEqual((yield* gate.snapshot).health, "steady")
    }))

  it.effect("serves the newest waiter first while degraded, so a probe goes to a caller with time left", () =>
    Effect.gen(function*() {
      // Degraded, a limit of 10 lets one probe through.
      const gate = yield* ConcurrencyGate.make({ target: "gpu", limit: 10 })
      yield* gate.markDegraded
      yield* hold(gate, 1)
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      for (const name of ["oldest", "older", "newest"]) yield* enqueue(gate, order, name)
      yield* gate.release("neutral")
      yield* settle
      assert.deepStrictEqual(yield* Ref.get(order), ["newest"])
    }))

  it.effect("markDegraded and markRecovered act as a health check would", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      // Recovering needs a degraded target.
      yield* gate.markRecovered
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 100, inFlight: 0, waiting: 0, health: "steady" })
      yield* gate.markDegraded
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "degraded" })
      yield* TestClock.adjust("2 seconds")
      yield* gate.markRecovered
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "recovering" })
      // A second call does not restart the ramp.
      yield* TestClock.adjust("5 seconds")
      yield* gate.markRecovered
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 15, inFlight: 0, waiting: 0, health: "recovering" })
      yield* gate.markDegraded
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "degraded" })
    }))

  it.effect("markDegraded resets the overload count", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      for (let i = 0; i < 4; i++) yield* attempt(gate, "overload")
      yield* gate.markDegraded
      yield* gate.markRecovered
      for (let i = 0; i < 4; i++) yield* attempt(gate, "overload")
      assert.strictEqual((yield* gate.snapshot).health, "recovering")
      yield* attempt(gate, "overload")
      assert.strictEqual((yield* gate.snapshot).health, "degraded")
    }))
})

describe("ConcurrencyGate adaptive limit", () => {
  const limitOf = (gate: ConcurrencyGate.Service) => Effect.map(gate.snapshot, (snapshot) => snapshot.limit)
  /** Ends one of the attempts in flight with `outcome` and starts another at once: the gate stays as full. */
  const turnOver = (gate: ConcurrencyGate.Service, outcome: ConcurrencyGate.Outcome, times = 1) =>
    Effect.replicateEffect(Effect.andThen(gate.release(outcome), gate.acquire(Number.POSITIVE_INFINITY)), times, {
      discard: true
    })

  it("is on in queue mode and off in shed mode unless set", () => {
    assert.isTrue(valid(Gates.settings({ target: "llm", limit: 8 })).adaptive)
    assert.isFalse(valid(Gates.settings({ target: "gpu", limit: 8, mode: "shed" })).adaptive)
    assert.isFalse(valid(Gates.settings({ target: "llm", limit: 8, adaptive: false })).adaptive)
    assert.isTrue(valid(Gates.settings({ target: "gpu", limit: 8, mode: "shed", adaptive: true })).adaptive)
  })

  const invalid: ReadonlyArray<readonly [string, Partial<ConcurrencyGate.Options>, string]> = [
    ["backoffRatio of 1", { backoffRatio: 1 }, "backoffRatio must be in [0.5, 1), got 1"],
    ["backoffRatio below 0.5", { backoffRatio: 0.4 }, "backoffRatio must be in [0.5, 1), got 0.4"],
    ["zero backoffInterval", { backoffInterval: 0 }, "backoffInterval must be positive, got 0"],
    ["zero minLimit", { minLimit: 0 }, "minLimit must be an integer >= 1, got 0"],
    ["minLimit above the limit", { minLimit: 11 }, "minLimit must not exceed limit (10), got 11"]
  ]
  for (const [name, options, message] of invalid) {
    it(`is an InvalidSettings naming the option for a ${name}`, () => {
      const settings = Gates.settings({ target: "llm", limit: 10, ...options })
      assert.isTrue(Either.isLeft(settings))
      if (Either.isLeft(settings)) {
        assert.strictEqual(Either.leftOf(settings).message, `concurrency gate for llm: ${message}`)
      }
    })
  }

  it("cuts ×0.9, rounded down, at least one less, to minLimit at the lowest", () => {
    const settings = valid(Gates.settings({ target: "llm", limit: 100, minLimit: 3 }))
    assert.deepStrictEqual([100, 64, 10, 5, 4, 3].map((learned) => Gates.backoffLimit(settings, learned)), [
      90,
      57,
      9,
      4,
      3,
      3
    ])
  })

  it.effect("a target never overloaded stays at the setting, however full", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 10 })
      yield* hold(gate, 10)
      yield* turnOver(gate, "success", 100)
      yield* TestClock.adjust("1 minute")
      yield* turnOver(gate, "success", 100)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 10, waiting: 0, health: "steady" })
    }))

  it.effect("an overload with the gate at least half full cuts the limit, and the snapshot and Shed report it", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* hold(gate, 50)
      yield* gate.release("overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 90, inFlight: 49, waiting: 0, health: "steady" })
      const shedding = yield* ConcurrencyGate.make({ target: "gpu", limit: 10, mode: "shed", adaptive: true })
      yield* hold(shedding, 10)
      yield* shedding.release("overload")
      const error = yield* Effect.flip(shedding.acquire(Number.POSITIVE_INFINITY))
      assert.deepStrictEqual(fieldsOf(error), { _tag: "Shed", target: "gpu", limit: 9, inFlight: 9 })
    }))

  it.effect("an overload with the gate less than half full, or not adaptive, leaves the limit", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* hold(gate, 49)
      yield* gate.release("overload")
      assert.strictEqual(yield* limitOf(gate), 100)
      for (const options of [{ mode: "shed" }, { adaptive: false }] as const) {
        const fixed = yield* ConcurrencyGate.make({ target: "llm", limit: 100, ...options })
        yield* hold(fixed, 100)
        yield* fixed.release("overload")
        assert.strictEqual(yield* limitOf(fixed), 100)
      }
    }))

  it.effect("cuts once per backoffInterval, however many overloads come between", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* hold(gate, 100)
      yield* gate.release("overload")
      assert.strictEqual(yield* limitOf(gate), 90)
      // Back within the limit, each overload after a success: not again within the second.
      for (let i = 0; i < 9; i++) yield* gate.release("success")
      for (let i = 0; i < 3; i++) yield* turnOver(gate, "overload").pipe(Effect.tap(() => turnOver(gate, "success")))
      yield* TestClock.adjust(999)
      yield* turnOver(gate, "overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 90, inFlight: 90, waiting: 0, health: "steady" })
      yield* TestClock.adjust(1)
      yield* turnOver(gate, "success")
      yield* gate.release("overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 81, inFlight: 89, waiting: 0, health: "steady" })
    }))

  it.effect("ignores overloads of attempts in flight above the limit, admitted before the cut", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* hold(gate, 100)
      // Four in a row, one short of degrading: the first cuts, the rest were admitted under 100.
      for (let i = 0; i < 4; i++) yield* gate.release("overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 90, inFlight: 96, waiting: 0, health: "steady" })
    }))

  it.effect("within backoffInterval, an overload right after another within the limit cuts again", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* hold(gate, 100)
      yield* gate.release("overload")
      // Neutral outcomes neither break the run of overloads nor count in it.
      for (let i = 0; i < 9; i++) yield* gate.release("neutral")
      yield* gate.release("overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 81, inFlight: 89, waiting: 0, health: "steady" })
    }))

  it.effect("grows by one per limit's worth of successes while full, to the setting at most", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 10 })
      yield* hold(gate, 10)
      yield* gate.release("overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 9, inFlight: 9, waiting: 0, health: "steady" })
      // Not within backoffInterval of the cut.
      yield* turnOver(gate, "success", 20)
      assert.strictEqual(yield* limitOf(gate), 9)
      yield* TestClock.adjust("1 second")
      yield* turnOver(gate, "success", 8)
      assert.strictEqual(yield* limitOf(gate), 9)
      yield* turnOver(gate, "success")
      assert.strictEqual(yield* limitOf(gate), 10)
      yield* gate.acquire(Number.POSITIVE_INFINITY)
      yield* turnOver(gate, "success", 100)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 10, waiting: 0, health: "steady" })
    }))

  it.effect("does not grow while the gate has room, however many successes", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 10 })
      yield* hold(gate, 10)
      yield* gate.release("overload")
      yield* gate.release("success")
      yield* TestClock.adjust("1 minute")
      yield* turnOver(gate, "success", 1_000)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 9, inFlight: 8, waiting: 0, health: "steady" })
    }))

  it.effect("stops at minLimit, and at one by default", () =>
    Effect.gen(function*() {
      const cut = (gate: ConcurrencyGate.Service) =>
        Effect.gen(function*() {
          const limits: Array<number> = []
          for (let i = 0; i < 4; i++) {
            const { inFlight, limit } = yield* gate.snapshot
            yield* hold(gate, limit - inFlight)
            yield* gate.release("overload")
            yield* gate.release("success")
            limits.push(yield* limitOf(gate))
            yield* TestClock.adjust("1 second")
          }
          return limits
        })
      assert.deepStrictEqual(yield* cut(yield* ConcurrencyGate.make({ target: "llm", limit: 10, minLimit: 8 })), [
        9,
        8,
        8,
        8
      ])
      assert.deepStrictEqual(yield* cut(yield* ConcurrencyGate.make({ target: "llm", limit: 3 })), [2, 1, 1, 1])
    }))

  it.effect("learns nothing while degraded: the provider is down, not smaller", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* gate.markDegraded
      yield* hold(gate, 10)
      yield* TestClock.adjust("1 second")
      yield* turnOver(gate, "overload")
      yield* gate.markRecovered
      yield* TestClock.adjust("30 seconds")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 100, inFlight: 10, waiting: 0, health: "steady" })
    }))

  it.effect("the ramp after an incident ends at the learned limit, not at the setting", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* hold(gate, 100)
      yield* gate.release("overload")
      for (let i = 0; i < 99; i++) yield* gate.release("success")
      assert.strictEqual(yield* limitOf(gate), 90)
      yield* gate.markDegraded
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "degraded" })
      yield* gate.markRecovered
      const seen: Array<readonly [number, ConcurrencyGate.Health]> = []
      for (let step = 0; step < 8; step++) {
        const { health, limit } = yield* gate.snapshot
        seen.push([limit, health])
        yield* TestClock.adjust("5 seconds")
      }
      assert.deepStrictEqual(seen, [
        [10, "recovering"],
        [15, "recovering"],
        [23, "recovering"],
        [35, "recovering"],
        [53, "recovering"],
        [80, "recovering"],
        [90, "steady"],
        [90, "steady"]
      ])
    }))

  it.effect("degraded, the floor is the learned limit when that is lower", () =>
    Effect.gen(function*() {
      // A floor of the whole setting, 10, above what the gate learned.
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 10, rampStart: 1 })
      yield* hold(gate, 10)
      yield* gate.release("overload")
      yield* gate.markDegraded
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 9, inFlight: 9, waiting: 0, health: "degraded" })
    }))

  it.effect("an overload while the ramp runs cuts the learned limit, and the ramp ends there", () =>
    Effect.gen(function*() {
      const gate = yield* recovering
      yield* TestClock.adjust("15 seconds")
      assert.strictEqual(yield* limitOf(gate), 35)
      yield* hold(gate, 35)
      yield* gate.release("overload")
      // Learned 100 → 90: the ramp goes on ×1.5 every 5 s, and ends at 90.
      const limits: Array<number> = []
      for (let step = 0; step < 4; step++) {
        limits.push(yield* limitOf(gate))
        yield* TestClock.adjust("5 seconds")
      }
      assert.deepStrictEqual(limits, [35, 53, 80, 90])
    }))
})

describe("Gates.outcomeOf", () => {
  const timeout = Duration.seconds(10)
  const cases: ReadonlyArray<readonly [Failure.Failure, ConcurrencyGate.Outcome]> = [
    [new Failure.Overloaded({ status: 529 }), "overload"],
    [new Failure.RateLimited({ status: 429 }), "overload"],
    [new Failure.ServerError({ status: 500 }), "neutral"],
    [new Failure.ServerError({ status: 502 }), "overload"],
    [new Failure.ServerError({ status: 504 }), "overload"],
    [new Failure.ReadTimeout({ timeout, phase: "body" }), "overload"],
    [new Failure.ConnectTimeout({ timeout }), "overload"],
    [new Failure.ConnectFailed({ detail: "ECONNREFUSED" }), "overload"],
    [new Failure.ConnectionReset({ afterSend: true }), "overload"],
    [new Failure.DeadlineExceeded({ deadline: 1_000, phase: "attempt" }), "neutral"],
    [new Failure.DeadlineExceeded({ deadline: 1_000, phase: "before-attempt" }), "neutral"],
    [new Failure.DeadlineExceeded({ deadline: 1_000, phase: "sleep" }), "neutral"],
    [new Failure.DeadlineExceeded({ deadline: 1_000, phase: "queue" }), "neutral"],
    [new Failure.QuotaExhausted({ status: 429, providerCode: "insufficient_quota" }), "neutral"],
    [new Failure.ClientError({ status: 400 }), "neutral"],
    [new Failure.AuthenticationFailed({ status: 401 }), "neutral"],
    [new Failure.ModelUnavailable({ status: 404, model: "gpt-x" }), "neutral"],
    [new Failure.NotJson({ status: 200, excerpt: "<html>" }), "neutral"],
    [new Failure.ContractViolation({ issues: [{ path: "choices", message: "missing" }] }), "neutral"],
    [new Failure.Shed({ target: "llm", limit: 1, inFlight: 1 }), "neutral"],
    [new Failure.Cancelled({ reason: "aborted" }), "neutral"]
  ]
  for (const [failure, outcome] of cases) {
    const phase = "phase" in failure ? ` (${failure.phase})` : ""
    it(`${failure._tag}${phase} is ${outcome}`, () => {
      assert.strictEqual(Gates.outcomeOf(failure), outcome)
    })
  }
})

describe("ConcurrencyGate.withPermit", () => {
  it.effect("holds a permit while the effect runs and reports a success", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* gate.markDegraded
      const inside = yield* ConcurrencyGate.withPermit(gate.snapshot, gate).pipe()
      assert.strictEqual(inside.inFlight, 1)
      // The success started the recovery.
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "recovering" })
    }))

  it.effect("reports a capacity failure of the effect to the gate's health", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100, degradeAfter: 2 })
      const overloaded = ConcurrencyGate.withPermit(Effect.fail(new Failure.Overloaded({ status: 503 })), gate).pipe(
        Effect.flip
      )
      yield* overloaded
      assert.strictEqual((yield* gate.snapshot).health, "steady")
      yield* overloaded
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "degraded" })
    }))

  it.effect("releases the permit when the effect fails, as a neutral outcome", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 100 })
      yield* gate.markDegraded
      const error = yield* ConcurrencyGate.withPermit(Effect.fail("boom" as const), gate).pipe(
        Effect.flip
      )
      assert.strictEqual(error, "boom")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "degraded" })
    }))

  it.effect("releases the permit when the effect dies", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      const exit = yield* ConcurrencyGate.withPermit(dieMessage("defect"), gate).pipe(
        Effect.exit
      )
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 0, waiting: 0, health: "steady" })
    }))

  it.effect("releases the permit when the effect is interrupted", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      const released = yield* Ref.make(false)
      const fiber = yield* ConcurrencyGate.withPermit(
        Effect.onInterrupt(Effect.never, () => Ref.set(released, true)),
        gate
      )
        .pipe(EffectLine.fork)
      yield* settle
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
      yield* Fiber.interrupt(fiber)
      assert.isTrue(yield* Ref.get(released))
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 0, waiting: 0, health: "steady" })
      yield* gate.acquire(Number.POSITIVE_INFINITY)
    }))

  it.effect("bounds the wait by the current deadline", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      const ran = yield* Ref.make(false)
      yield* hold(gate, 1)
      yield* TestClock.adjust("1 second")
      const fiber = yield* ConcurrencyGate.withPermit(Ref.set(ran, true), gate).pipe(
        Deadline.within("2 seconds"),
        Effect.flip,
        EffectLine.fork
      )
      yield* TestClock.adjust(1_999)
      assert.isTrue(yield* isRunning(fiber))
      yield* TestClock.adjust(1)
      const error = yield* Fiber.join(fiber)
      assert.deepStrictEqual(fieldsOf(error), { _tag: "DeadlineExceeded", deadline: 3_000, phase: "queue" })
      assert.isFalse(yield* Ref.get(ran))
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
    }))

  it.effect("without a deadline waits until a permit is released", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      yield* hold(gate, 1)
      const fiber = yield* ConcurrencyGate.withPermit(Effect.succeed("served"), gate).pipe(
        EffectLine.fork
      )
      yield* TestClock.adjust("1 hour")
      assert.isTrue(yield* isRunning(fiber))
      yield* gate.release("success")
      assert.strictEqual(yield* Fiber.join(fiber), "served")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 0, waiting: 0, health: "steady" })
    }))

  it.effect("an interrupted wait leaves the gate as it was", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "llm", limit: 1 })
      const ran = yield* Ref.make(false)
      yield* hold(gate, 1)
      const fiber = yield* ConcurrencyGate.withPermit(Ref.set(ran, true), gate).pipe(
        EffectLine.fork
      )
      yield* settle
      assert.strictEqual((yield* gate.snapshot).waiting, 1)
      yield* Fiber.interrupt(fiber)
      yield* gate.release("success")
      assert.isFalse(yield* Ref.get(ran))
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 1, inFlight: 0, waiting: 0, health: "steady" })
    }))

  it.effect("fails with Shed from a full shedding gate, without running the effect", () =>
    Effect.gen(function*() {
      const ran = yield* Ref.make(false)
      const gate = yield* ConcurrencyGate.make({ target: "gpu-pool", limit: 2, mode: "shed" })
      yield* hold(gate, 2)
      const error = yield* Effect.flip(ConcurrencyGate.withPermit(Ref.set(ran, true), gate))
      assert.deepStrictEqual(fieldsOf(error), { _tag: "Shed", target: "gpu-pool", limit: 2, inFlight: 2 })
      assert.isFalse(yield* Ref.get(ran))
    }))
})

describe("an unbounded gate", () => {
  it.effect("admits any number of concurrent calls, and still tracks health", () =>
    Effect.gen(function*() {
      const gate = yield* ConcurrencyGate.make({ target: "anything", limit: Infinity })
      yield* hold(gate, 10_000)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: Infinity, inFlight: 10_000, waiting: 0, health: "steady" })
      for (let i = 0; i < 5; i++) yield* gate.release("overload")
      assert.deepStrictEqual(yield* gate.snapshot, {
        limit: Infinity,
        inFlight: 9_995,
        waiting: 0,
        health: "degraded"
      })
    }))

  it.effect("ConcurrencyGate.unbounded never waits and tracks nothing", () =>
    Effect.gen(function*() {
      const gate = ConcurrencyGate.unbounded
      yield* hold(gate, 10_000)
      for (let i = 0; i < 5; i++) yield* gate.release("overload")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: Infinity, inFlight: 0, waiting: 0, health: "steady" })
      assert.deepStrictEqual(yield* ConcurrencyGate.withPermit(Effect.succeed("ran"), gate), "ran")
    }))
})
