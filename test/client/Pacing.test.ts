/**
 * A target's pace against the real fault server: the limits the provider states in its headers are
 * learned, the calls after them wait their turn (on the TestClock), the provider's `usage` settles
 * each reservation, and a call whose turn is after its deadline is never sent.
 */
import { TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { ModelClient } from "@resilient-ai/client"
import { Coordination, Failure } from "@resilient-ai/policy"
import { EffectLine, Meters } from "@resilient-ai/policy/internal"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect, Fiber } from "effect"
import { recordingSleeps, untilSleeping } from "./sdkSupport.js"
import { hello, HttpLive, managedAt } from "./support.js"

/** A chat completion that used 15 tokens, from a provider that allows the key 60 requests a minute. */
const limitedAnswer: FaultPlan.Fault = {
  _tag: "Raw",
  headers: {
    "content-type": "application/json",
    "x-ratelimit-limit-requests": "60",
    "x-ratelimit-limit-tokens": "60000"
  },
  body: JSON.stringify({
    id: "chatcmpl-paced",
    object: "chat.completion",
    created: 0,
    model: "test-model",
    choices: [{ index: 0, message: { role: "assistant", content: "Hello." }, finish_reason: "stop" }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
  })
}

describe("a target's pace, against the fault server", () => {
  it.scoped("learns 60 a minute from the headers: the call after the next waits its second, then goes", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: limitedAnswer })
      const target = managedAt(server.url)
      const client = yield* ModelClient.make(target)
      // Nothing is known before the first answer: it goes at once, and teaches the limits. The one
      // after it is the 1 s burst (one request at 60 a minute).
      yield* client.chat(hello)
      yield* client.chat(hello)
      const third = yield* EffectLine.fork(client.chat(hello))
      yield* untilSleeping(1_000)
      assert.strictEqual((yield* server.arrivals).length, 2, "the third call waits for its turn")
      yield* TestClock.adjust(1_000)
      yield* Fiber.join(third)
      assert.strictEqual((yield* server.arrivals).length, 3)
      const waited = EffectLine.histogramState(Meters.forTarget(target.name, "test-model").pacedWait)
      assert.deepStrictEqual([waited.count, waited.sum], [1, 1])
    }).pipe(recordingSleeps, Effect.provide(HttpLive), Effect.provide(Coordination.layerMemory)))

  it.scoped("the usage settles the reservation: a request reserved at 2,000 tokens that used 15 leaves the key free", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: limitedAnswer })
      // 600 tokens a minute: 10 a second; each call reserves about 2,000 (max_tokens).
      const target = managedAt(server.url, { tokensPerMinute: 600 })
      const client = yield* ModelClient.make(target)
      yield* client.chat({ ...hello, max_tokens: 2_000 })
      // Had the 2,000 stood, the next call would wait 200 s; it used 15, so it waits 1.5 s.
      const next = yield* EffectLine.fork(client.chat({ ...hello, max_tokens: 2_000 }))
      yield* untilSleeping(1_500)
      assert.strictEqual((yield* server.arrivals).length, 1)
      yield* TestClock.adjust(1_500)
      yield* Fiber.join(next)
      assert.strictEqual((yield* server.arrivals).length, 2)
    }).pipe(recordingSleeps, Effect.provide(HttpLive), Effect.provide(Coordination.layerMemory)))

  it.scoped("a call whose turn comes after its deadline stops with RateLimitedLocally, and is never sent", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: limitedAnswer })
      const client = yield* ModelClient.make(managedAt(server.url, { requestsPerMinute: 60 }))
      yield* client.chat(hello)
      const failed = yield* Effect.flip(client.chat(hello, { timeout: "900 millis" }))
      assert.strictEqual(failed.reason, "rate-limited-locally")
      assert.instanceOf(failed.last, Failure.RateLimitedLocally)
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(Effect.provide(HttpLive), Effect.provide(Coordination.layerMemory)))
})
