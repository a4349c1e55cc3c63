/**
 * The stream combinator on its own, as a user wraps a streamed call of their own: the attempt that
 * opens the stream is retried until it delivers the first element, and never after.
 */
import { eitherStream, TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Failure, Resilient } from "@resilient-ai/policy"
import { EffectLine, Either } from "@resilient-ai/policy/internal"
import { Effect, Fiber, Stream } from "effect"
import { freshTarget, policyOf, scripted } from "./support.js"

const retryable = new Failure.ServerError({ status: 503 })

describe("Resilient.retryStream", () => {
  it.effect("retries the opening attempt until it delivers the first element, then streams the rest", () =>
    Effect.gen(function*() {
      const { arrivals, attempt } = yield* scripted<Resilient.Opened<number, never, never>>([
        { fail: retryable },
        { succeed: { first: 1, rest: Stream.make(2, 3) } }
      ])
      const policy = policyOf({ target: freshTarget("stream"), maxAttempts: 3, baseDelay: "10 millis" })
      const fiber = yield* EffectLine.fork(Stream.runCollect(Resilient.retryStream(attempt, policy)))
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(Array.from(yield* Fiber.join(fiber)), [1, 2, 3])
      assert.strictEqual((yield* arrivals).length, 2)
    }))

  it.effect("a failure after the first element ends the stream with it, and nothing is replayed", () =>
    Effect.gen(function*() {
      const { arrivals, attempt } = yield* scripted<Resilient.Opened<number, Failure.ServerError, never>>([
        { succeed: { first: 1, rest: Stream.concat(Stream.make(2), Stream.fail(retryable)) } }
      ])
      const policy = policyOf({ target: freshTarget("stream"), maxAttempts: 3, baseDelay: "10 millis" })
      const fiber = yield* EffectLine.fork(Stream.runCollect(eitherStream(Resilient.retryStream(attempt, policy))))
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(Array.from(yield* Fiber.join(fiber)), [
        Either.right(1),
        Either.right(2),
        Either.left(retryable)
      ])
      assert.strictEqual((yield* arrivals).length, 1)
    }))
})
