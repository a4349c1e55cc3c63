/**
 * What the tests of an SDK on the resilient layer share (`ResilientFetch` under openai, Vercel AI,
 * Mistral's client, LangChain; `ResilientHttpClient` under @effect/ai): a target at the fault
 * server, the SDK's rejection as a value, waiting for the backoff's sleep, the SDK-retry counter.
 */
import { sleeps } from "#test-line"
import { assert } from "@effect/vitest"
import { Target } from "@resilient-ai/client"
import { sdkRetries } from "@resilient-ai/client/internal"
import { EffectLine } from "@resilient-ai/policy/internal"
import type { FaultServer } from "@resilient-ai/testing"
import { Effect, Redacted } from "effect"
import { canary } from "../canary.js"
import { freshName } from "./support.js"

// The SDK tests (sdks/, a package of its own) reach the tests' seam through here.
export { recordingSleeps, TestClock } from "#test-line"
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
  Effect.matchEffect(Effect.tryPromise({ try: f, catch: (error) => error }), {
    onFailure: Effect.succeed,
    onSuccess: (value) => Effect.die(new Error(`expected the SDK to reject, it resolved with ${String(value)}`))
  })

/** What a constructor (or any function) threw; one that returns fails the test. */
export const thrown = (f: () => unknown): unknown => {
  try {
    f()
  } catch (error) {
    return error
  }
  throw new Error("expected a throw")
}

/**
 * On the real clock, until a sleep of `millis` is on the TestClock: an abort sent then lands in the
 * backoff, however slowly a busy machine got there. The test runs under `recordingSleeps` (#test-line).
 */
export const untilSleeping = (millis: number): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 4_000; turn++) {
      if ((yield* sleeps).includes(millis)) return
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
    return yield* Effect.die(new Error(`the call never slept for ${millis} ms`))
  })

/** How many requests an SDK sent as its own retry to `target`, as the adapter counted them. */
export const sdkRetriesOf = (target: Target.Target): Effect.Effect<number> =>
  Effect.sync(() => EffectLine.counted(EffectLine.tagged(sdkRetries, { target: target.name })))

/** Asserts that every request of one call carried the same idempotency key, and that it carried one. */
export const assertOneIdempotencyKey = (arrivals: ReadonlyArray<FaultServer.Arrival>): void => {
  const keys = new Set(arrivals.map((arrival) => arrival.headers["idempotency-key"]))
  assert.strictEqual(keys.size, 1, "one idempotency key for every attempt of the call")
  assert.isDefined([...keys][0], "an idempotency key on every attempt")
}
