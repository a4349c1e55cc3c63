/**
 * What the tests of an SDK on the resilient layer share (`ResilientFetch` under openai, Vercel AI,
 * Mistral's client, LangChain; `ResilientHttpClient` under @effect/ai): a target at the fault
 * server, the SDK's rejection as a value, waiting for the backoff's sleep, the SDK-retry counter.
 */
import { assert } from "@effect/vitest"
import { Target } from "@resilient-ai/client"
import { sdkRetries } from "@resilient-ai/client/internal"
import type { FaultServer } from "@resilient-ai/testing"
import { Chunk, Effect, Metric, Redacted, TestClock } from "effect"
import { canary } from "../canary.js"
import { freshName } from "./support.js"

export { captureLogs } from "../policy/support.js"
export { apiKey, quiet } from "./support.js"

/** A managed target at `url` (the SDK's base URL), with tiny backoff so a live test stays fast. */
export const targetAt = (url: string, options: Partial<Target.Options> = {}) =>
  Target.managed({
    name: freshName("sdk"),
    baseUrl: url,
    model: "gpt-4o-mini",
    apiKey: Redacted.make(canary),
    baseDelay: "1 millis",
    maxDelay: "5 millis",
    hintSpread: 0,
    ...options
  })

/** The SDK's rejection, as a value; a call that resolves fails the test. */
export const rejection = <A>(f: () => Promise<A>): Effect.Effect<unknown> =>
  Effect.flip(Effect.tryPromise({ try: f, catch: (error) => error })).pipe(
    Effect.catchAll((value) => Effect.die(new Error(`expected the SDK to reject, it resolved with ${String(value)}`)))
  )

/**
 * On the real clock, until a sleep of `millis` is on the TestClock: an abort sent then lands in the
 * backoff, however slowly a busy machine got there.
 */
export const untilSleeping = (millis: number): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 4_000; turn++) {
      if (Chunk.some(yield* TestClock.sleeps(), (wake) => wake === millis)) return
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
    return yield* Effect.die(new Error(`the call never slept for ${millis} ms`))
  })

/** How many requests an SDK sent as its own retry to `target`, as the adapter counted them. */
export const sdkRetriesOf = (target: Target.Target): Effect.Effect<number> =>
  Effect.map(Metric.value(sdkRetries.pipe(Metric.tagged("target", target.name))), (state) => state.count)

/** Asserts that every request of one call carried the same idempotency key, and that it carried one. */
export const assertOneIdempotencyKey = (arrivals: ReadonlyArray<FaultServer.Arrival>): void => {
  const keys = new Set(arrivals.map((arrival) => arrival.headers["idempotency-key"]))
  assert.strictEqual(keys.size, 1, "one idempotency key for every attempt of the call")
  assert.isDefined([...keys][0], "an idempotency key on every attempt")
}
