/**
 * Mistral's own client (`@mistralai/mistralai` 2) with `ResilientFetch` as its `HTTPClient`'s
 * fetcher and its retries off (`retryConfig: { strategy: "none" }`), against the real fault server
 * answering with Mistral's error bodies: what the server saw decides each test.
 */
import { assert, describe, it } from "@effect/vitest"
import { HTTPClient, Mistral, type SDKOptions } from "@mistralai/mistralai"
import { RequestAbortedError, SDKError } from "@mistralai/mistralai/models/errors"
import { ResilientFetch } from "@resilient-ai/client"
import { Coordination, RetryBudget } from "@resilient-ai/policy"
import { EffectLine } from "@resilient-ai/policy/internal"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect, Fiber } from "effect"
import { canary } from "../../test/canary.js"
import {
  assertOneIdempotencyKey,
  captureLogs,
  quiet,
  recordingSleeps,
  rejection,
  sdkRetriesOf,
  targetAt,
  TestClock,
  untilSleeping
} from "../../test/client/sdkSupport.js"
import { haiku } from "../examples/mistral.js"

/** The API's root at the fault server: the client adds `/v1/chat/completions` itself. */
const rootOf = (server: FaultServer.Service) => `http://127.0.0.1:${server.port}`

/** A Mistral client on `fetch`, its own retries off unless `retryConfig` says otherwise. */
const mistralOn = (
  server: FaultServer.Service,
  fetch: ResilientFetch.Fetch,
  retryConfig: SDKOptions["retryConfig"] = { strategy: "none" }
) =>
  new Mistral({
    apiKey: canary,
    serverURL: rootOf(server),
    httpClient: new HTTPClient({ fetcher: fetch }),
    retryConfig
  })

const request = { model: "mistral-small-latest", messages: [{ role: "user" as const, content: "Say hello" }] }

/** An error status with Mistral's error body. */
const status = (fault: Omit<Extract<FaultPlan.Fault, { _tag: "Status" }>, "_tag" | "style">) =>
  ({ _tag: "Status", style: "mistral", ...fault }) as const

describe("Mistral's client @mistralai/mistralai 2.7.0 on ResilientFetch", () => {
  it.scopedLive("503s are retried by the policy, not the client, up to the attempt ceiling, under one key", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: status({ status: 503 }) })
      const fetch = yield* ResilientFetch.make(targetAt(server.url, { maxAttempts: 3 }))
      const error = yield* rejection(() => mistralOn(server, fetch).chat.complete(request))
      // The client raises its own error for the provider's last answer.
      assert.instanceOf(error, SDKError)
      assert.strictEqual((error as SDKError).statusCode, 503)
      const arrivals = yield* server.arrivals
      assert.deepStrictEqual(arrivals.map((arrival) => arrival.path), Array(3).fill("/v1/chat/completions"))
      // The client sends no idempotency key: the policy gives every attempt of the call the same one.
      assertOneIdempotencyKey(arrivals)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("the budget bounds them: a budget that grants nothing sends one request", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: status({ status: 503 }) })
      const fetch = yield* ResilientFetch.make(targetAt(server.url, { maxAttempts: 5 }))
      yield* rejection(() => mistralOn(server, fetch).chat.complete(request))
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.disabled })), Effect.provide(quiet)))

  it.scopedLive("the provider's Retry-After is honoured, then the success reaches the client's caller", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [status({ status: 429, retryAfterMs: "300" }), { _tag: "Ok" }] })
      const fetch = yield* ResilientFetch.make(targetAt(server.url))
      // The client's response Schemas accept the fault server's completion as it is.
      const completion = yield* Effect.promise(() => mistralOn(server, fetch).chat.complete(request))
      assert.strictEqual(completion.choices[0]?.message?.content, FaultServer.replyText)
      const [first, second] = yield* server.arrivals
      assert.isAtLeast(second!.at - first!.at, 300)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a 400 and a spent quota are one request each, each the client's SDKError", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [status({ status: 400 }), status({ status: 429, code: "insufficient_quota" })]
      })
      const fetch = yield* ResilientFetch.make(targetAt(server.url))
      const client = mistralOn(server, fetch)
      const bad = yield* rejection(() => client.chat.complete(request))
      const quota = yield* rejection(() => client.chat.complete(request))
      assert.instanceOf(bad, SDKError)
      assert.strictEqual((bad as SDKError).statusCode, 400)
      assert.instanceOf(quota, SDKError)
      assert.strictEqual((quota as SDKError).statusCode, 429)
      assert.strictEqual((yield* server.arrivals).length, 2)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scoped("an abort during the backoff's sleep ends the call at once, and no other request is sent", () =>
    Effect.gen(function*() {
      // The sleep is on the TestClock, which never moves by itself: only the abort can end it.
      const server = yield* FaultServer.make({ otherwise: status({ status: 503, retryAfter: "5" }) })
      const fetch = yield* ResilientFetch.make(targetAt(server.url))
      const controller = new AbortController()
      const call = yield* EffectLine.fork(
        rejection(() => mistralOn(server, fetch).chat.complete(request, { signal: controller.signal }))
      )
      yield* untilSleeping(5_000)
      controller.abort()
      const error = yield* Fiber.join(call)
      assert.instanceOf(error, RequestAbortedError)
      yield* TestClock.adjust("1 minute")
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(recordingSleeps, Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a stream is retried before its first chunk, never after it", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [status({ status: 503 }), { _tag: "StreamBreak", afterChunks: 2 }]
      })
      const fetch = yield* ResilientFetch.make(targetAt(server.url))
      const received: Array<string> = []
      const error = yield* rejection(async () => {
        const stream = await mistralOn(server, fetch).chat.stream(request)
        for await (const event of stream) {
          const content = event.data.choices[0]?.delta.content
          if (typeof content === "string") received.push(content)
        }
      })
      assert.isAtLeast(received.length, 1, "the first chunks reached the client's caller")
      assert.notInclude(received.join(""), FaultServer.replyText)
      // The client's event stream passes the body's read error on as it is: undici's "terminated".
      assert.instanceOf(error, TypeError)
      // The 503 was retried; the break after the first chunk was not.
      assert.strictEqual((yield* server.arrivals).length, 2)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a client left retrying is noticed by its body sent again: one warning per target, and a counter", () =>
    Effect.gen(function*() {
      const logs = yield* captureLogs
      const server = yield* FaultServer.make({
        steps: [status({ status: 503 }), status({ status: 503 }), { _tag: "Ok" }]
      })
      const target = yield* targetAt(server.url, { maxAttempts: 1 })
      const fetch = yield* ResilientFetch.make(target).pipe(Effect.provide(logs.layer))
      // Its backoff counts no attempts, only time (lib/retries.ts, retryBackoff: until maxElapsedTime),
      // so the script ends it with a success; maxInterval caps each of its waits at 1 ms.
      const retrying = mistralOn(server, fetch, {
        strategy: "backoff",
        backoff: { initialInterval: 1, maxInterval: 1, exponent: 1, maxElapsedTime: 60_000 }
      })
      const completion = yield* Effect.promise(() => retrying.chat.complete(request))
      assert.strictEqual(completion.choices[0]?.message?.content, FaultServer.replyText)
      // Its retries carry no retry count and no idempotency key: the adapter knows them by the
      // body of the call that just failed, sent again.
      assert.strictEqual((yield* server.arrivals).length, 3)
      assert.strictEqual(yield* sdkRetriesOf(target), 2)
      const warnings = (yield* logs.lines).filter((line) => line.message.includes("retries this target's calls itself"))
      assert.strictEqual(warnings.length, 1)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("the example's set-up answers through a 503", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [status({ status: 503 }), { _tag: "Ok" }] })
      assert.strictEqual(yield* haiku(rootOf(server)), FaultServer.replyText)
      assert.strictEqual((yield* server.arrivals).length, 2)
    }).pipe(Effect.provide(quiet)))
})
