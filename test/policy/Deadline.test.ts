import { pollFiber, TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Deadline, Failure } from "@resilient-ai/policy"
import { Deadlines, EffectLine } from "@resilient-ai/policy/internal"
import { Duration, Effect, Fiber, Option, Ref } from "effect"

/** The time left, in milliseconds, or `undefined` without a deadline. */
const remainingMillis = Effect.map(
  Deadline.remaining,
  Option.match({
    onNone: () => undefined,
    onSome: Duration.toMillis
  })
)

/** A failure's fields, tag included, to compare with exact values. */
const fieldsOf = (failure: Failure.Failure): { readonly [field: string]: unknown } => ({ ...failure })

const isRunning = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.map(pollFiber(fiber), Option.isNone)

describe("Deadline without one", () => {
  it.effect("current and remaining are none", () =>
    Effect.gen(function*() {
      assert.isTrue(Option.isNone(yield* Deadline.current))
      assert.isTrue(Option.isNone(yield* Deadline.remaining))
      assert.strictEqual(yield* EffectLine.getRef(Deadlines.CurrentDeadline), Infinity)
    }))
})

describe("Deadline.within", () => {
  it.effect("sets the deadline at now + duration, in epoch milliseconds of the Clock", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* Deadline.within(Deadline.current, "10 seconds"), Option.some(10_000))
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(yield* Deadline.within(Deadline.current, "10 seconds"), Option.some(15_000))
      assert.deepStrictEqual(yield* Deadline.current.pipe(Deadline.within(Duration.millis(250))), Option.some(5_250))
      assert.deepStrictEqual(yield* Deadline.current.pipe(Deadline.within(1_500)), Option.some(6_500))
    }))

  it.effect("only applies to the effect it wraps", () =>
    Effect.gen(function*() {
      yield* Deadline.within(Effect.void, "1 second")
      assert.isTrue(Option.isNone(yield* Deadline.current))
    }))

  it.effect("nested, keeps the outer deadline when the inner one is later", () =>
    Effect.gen(function*() {
      const [inner, outer] = yield* Effect.zip(Deadline.within(Deadline.current, "20 seconds"), Deadline.current).pipe(
        Deadline.within("10 seconds")
      )
      assert.deepStrictEqual(inner, Option.some(10_000))
      assert.deepStrictEqual(outer, Option.some(10_000))
    }))

  it.effect("nested, takes the inner deadline when it is earlier, then restores the outer one", () =>
    Effect.gen(function*() {
      const [inner, outer] = yield* Effect.zip(Deadline.within(Deadline.current, "3 seconds"), Deadline.current).pipe(
        Deadline.within("10 seconds")
      )
      assert.deepStrictEqual(inner, Option.some(3_000))
      assert.deepStrictEqual(outer, Option.some(10_000))
    }))

  it.effect("nested later, measures the inner duration from the time it starts", () =>
    Effect.gen(function*() {
      const fiber = yield* EffectLine.fork(
        Deadline.within(
          Effect.gen(function*() {
            yield* Effect.sleep("4 seconds")
            const shorter = yield* Deadline.within(Deadline.current, "5 seconds")
            const longer = yield* Deadline.within(Deadline.current, "7 seconds")
            return [shorter, longer] as const
          }),
          "10 seconds"
        )
      )
      yield* TestClock.adjust("4 seconds")
      const [shorter, longer] = yield* Fiber.join(fiber)
      assert.deepStrictEqual(shorter, Option.some(9_000))
      assert.deepStrictEqual(longer, Option.some(10_000))
    }))
})

describe("Deadline.at", () => {
  it.effect("sets the deadline at the given epoch milliseconds", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* Deadline.at(Deadline.current, 7_000), Option.some(7_000))
      assert.deepStrictEqual(
        yield* Deadline.current.pipe(Deadline.at(1_700_000_000_000)),
        Option.some(1_700_000_000_000)
      )
    }))

  it.effect("nested, takes the earlier of the two", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* Deadline.current.pipe(Deadline.at(9_000), Deadline.at(7_000)), Option.some(7_000))
      assert.deepStrictEqual(yield* Deadline.current.pipe(Deadline.at(4_000), Deadline.at(7_000)), Option.some(4_000))
      assert.deepStrictEqual(
        yield* Deadline.current.pipe(Deadline.within("2 seconds"), Deadline.at(7_000)),
        Option.some(2_000)
      )
      assert.deepStrictEqual(
        yield* Deadline.current.pipe(Deadline.at(9_000), Deadline.within("8 seconds")),
        Option.some(8_000)
      )
    }))

  it.effect("keeps a deadline that is already past", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust("10 seconds")
      assert.deepStrictEqual(yield* Deadline.at(Deadline.current, 3_000), Option.some(3_000))
      assert.strictEqual(yield* Deadline.at(remainingMillis, 3_000), 0)
    }))
})

describe("Deadline.remaining", () => {
  it.effect("decreases as the clock advances and is zero after the deadline", () =>
    Effect.gen(function*() {
      const seen = yield* Deadline.within(
        Effect.gen(function*() {
          const seen: Array<number | undefined> = [yield* remainingMillis]
          yield* TestClock.adjust("4 seconds")
          seen.push(yield* remainingMillis)
          yield* TestClock.adjust(5_999)
          seen.push(yield* remainingMillis)
          yield* TestClock.adjust(1)
          seen.push(yield* remainingMillis)
          yield* TestClock.adjust("1 minute")
          seen.push(yield* remainingMillis)
          return seen
        }),
        "10 seconds"
      )
      assert.deepStrictEqual(seen, [10_000, 6_000, 1, 0, 0])
      // The deadline itself does not move.
      assert.deepStrictEqual(yield* Deadline.at(Deadline.current, 10_000), Option.some(10_000))
    }))
})

describe("Deadline across fibers", () => {
  it.effect("is inherited by forked fibers", () =>
    Effect.gen(function*() {
      const child = yield* Deadline.within(EffectLine.fork(Effect.zip(Deadline.current, remainingMillis)), "10 seconds")
      const [current, remaining] = yield* Fiber.join(child)
      assert.deepStrictEqual(current, Option.some(10_000))
      assert.strictEqual(remaining, 10_000)
    }))

  it.effect("a forked fiber sees the time left shrink with the clock", () =>
    Effect.gen(function*() {
      const child = yield* Deadline.within(
        EffectLine.fork(Effect.andThen(Effect.sleep("3 seconds"), remainingMillis)),
        "10 seconds"
      )
      yield* TestClock.adjust("3 seconds")
      assert.strictEqual(yield* Fiber.join(child), 7_000)
    }))

  it.effect("applies to every fiber of a concurrent effect", () =>
    Effect.gen(function*() {
      const all = yield* Deadline.within(
        Effect.all([Deadline.current, Deadline.current], { concurrency: 2 }),
        "1 second"
      )
      assert.deepStrictEqual(all, [Option.some(1_000), Option.some(1_000)])
    }))

  it.effect("a joining child does not change the parent's deadline", () =>
    Effect.gen(function*() {
      // The child moves its own deadline; the parent's must survive the join.
      const moveChild = EffectLine.locally(Deadline.current, Deadlines.CurrentDeadline, 5_000)
      const withoutDeadline = yield* EffectLine.fork(moveChild)
      assert.deepStrictEqual(yield* Fiber.join(withoutDeadline), Option.some(5_000))
      assert.isTrue(Option.isNone(yield* Deadline.current))

      const [inChild, afterJoin] = yield* Deadline.within(
        Effect.flatMap(EffectLine.fork(moveChild), (fiber) => Effect.zip(Fiber.join(fiber), Deadline.current)),
        "10 seconds"
      )
      assert.deepStrictEqual(inChild, Option.some(5_000))
      assert.deepStrictEqual(afterJoin, Option.some(10_000))
    }))
})

describe("Deadline.enforce", () => {
  it.effect("fails with DeadlineExceeded and interrupts the effect when it runs past the deadline", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const work = Effect.sleep("5 seconds").pipe(
        Effect.andThen(Ref.update(log, (entries) => [...entries, "finished"])),
        Effect.onInterrupt(() => Ref.update(log, (entries) => [...entries, "interrupted"]))
      )
      const fiber = yield* Deadline.enforce(work).pipe(Deadline.within("1 second"), Effect.flip, EffectLine.fork)
      yield* TestClock.adjust(999)
      assert.isTrue(yield* isRunning(fiber))
      assert.deepStrictEqual(yield* Ref.get(log), [])
      yield* TestClock.adjust(1)
      const error = yield* Fiber.join(fiber)
      assert.deepStrictEqual(fieldsOf(error), { _tag: "DeadlineExceeded", deadline: 1_000, phase: "attempt" })
      assert.strictEqual(error.message, "deadline 1970-01-01T00:00:01.000Z reached (attempt)")
      assert.deepStrictEqual(yield* Ref.get(log), ["interrupted"])
      yield* TestClock.adjust("10 seconds")
      assert.deepStrictEqual(yield* Ref.get(log), ["interrupted"])
    }))

  it.effect("bounds by the time left when it starts, not by a fresh duration", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.gen(function*() {
        yield* Effect.sleep("4 seconds")
        return yield* Deadline.enforce(Effect.sleep("7 seconds"))
      }).pipe(Deadline.within("10 seconds"), Effect.flip, EffectLine.fork)
      yield* TestClock.adjust(9_999)
      assert.isTrue(yield* isRunning(fiber))
      yield* TestClock.adjust(1)
      const error = yield* Fiber.join(fiber)
      assert.deepStrictEqual(fieldsOf(error), { _tag: "DeadlineExceeded", deadline: 10_000, phase: "attempt" })
    }))

  it.effect("passes the value through when the effect finishes in time", () =>
    Effect.gen(function*() {
      const fiber = yield* Deadline.enforce(Effect.as(Effect.sleep(999), 42)).pipe(
        Deadline.within("1 second"),
        EffectLine.fork
      )
      yield* TestClock.adjust(999)
      assert.strictEqual(yield* Fiber.join(fiber), 42)
    }))

  it.effect("passes the effect's own failure through", () =>
    Effect.gen(function*() {
      const error = yield* Deadline.enforce(Effect.fail("boom" as const)).pipe(Deadline.within("1 second"), Effect.flip)
      assert.strictEqual(error, "boom")
    }))

  it.effect("fails once the clock reaches a deadline that has already passed", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust("2 seconds")
      const fiber = yield* Deadline.enforce(Effect.never).pipe(Deadline.at(1_000), Effect.flip, EffectLine.fork)
      yield* TestClock.adjust(0)
      const error = yield* Fiber.join(fiber)
      assert.deepStrictEqual(fieldsOf(error), { _tag: "DeadlineExceeded", deadline: 1_000, phase: "attempt" })
    }))

  it.effect("is a no-op without a deadline", () =>
    Effect.gen(function*() {
      const fiber = yield* EffectLine.fork(Deadline.enforce(Effect.as(Effect.sleep("1 hour"), "done")))
      yield* TestClock.adjust("59 minutes")
      assert.isTrue(yield* isRunning(fiber))
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(yield* Fiber.join(fiber), "done")
    }))
})
