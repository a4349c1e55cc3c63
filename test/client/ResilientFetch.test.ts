/**
 * The `openai` SDK (v6, the last major that runs on Node 20) with `ResilientFetch` under it, its own
 * retries off, against the real fault server: what the server saw decides each test.
 */
import { TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { ResilientFetch } from "@resilient-ai/client"
import { Coordination, Failure, RetryBudget } from "@resilient-ai/policy"
import { EffectLine } from "@resilient-ai/policy/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Effect, Fiber } from "effect"
import OpenAI from "openai"
import { messages, openAiOn as openAiAt, streamInto } from "./openai.js"
import {
  assertOneIdempotencyKey,
  captureLogs,
  quiet,
  recordingSleeps,
  rejection,
  sdkRetriesOf,
  targetAt,
  untilSleeping
} from "./sdkSupport.js"
import { oversized, settled, stateOf } from "./support.js"

/** An OpenAI client at the fault server on `fetch`, its own retries off unless `maxRetries` says otherwise. */
const openAiOn = (server: FaultServer.Service, fetch: ResilientFetch.Fetch, maxRetries = 0) =>
  openAiAt(server.url, fetch, maxRetries)

describe("ResilientFetch under the openai SDK", () => {
  it.scopedLive("503s are retried by the policy, not the SDK, up to the attempt ceiling", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503 } })
      const fetch = yield* ResilientFetch.make(targetAt(server.url, { maxAttempts: 3 }))
      const error = yield* rejection(() =>
        openAiOn(server, fetch).chat.completions.create({ model: "gpt-4o-mini", messages })
      )
      // The SDK raises its own error for the provider's last answer.
      assert.instanceOf(error, OpenAI.InternalServerError)
      assert.strictEqual((error as InstanceType<typeof OpenAI.APIError>).status, 503)
      const arrivals = yield* server.arrivals
      assert.strictEqual(arrivals.length, 3)
      // One logical call: every attempt carries the same idempotency key; the SDK never retried.
      assertOneIdempotencyKey(arrivals)
      assert.deepStrictEqual(arrivals.map((arrival) => arrival.headers["x-stainless-retry-count"]), ["0", "0", "0"])
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("the budget bounds them: a budget that grants nothing sends one request", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503 } })
      const fetch = yield* ResilientFetch.make(targetAt(server.url, { maxAttempts: 5 }))
      yield* rejection(() => openAiOn(server, fetch).chat.completions.create({ model: "gpt-4o-mini", messages }))
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.disabled })), Effect.provide(quiet)))

  it.scopedLive("the provider's Retry-After is honoured, then the success reaches the SDK", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 429, retryAfterMs: "300" }, { _tag: "Ok" }]
      })
      const fetch = yield* ResilientFetch.make(targetAt(server.url))
      const completion = yield* Effect.promise(() =>
        openAiOn(server, fetch).chat.completions.create({ model: "gpt-4o-mini", messages })
      )
      assert.strictEqual(completion.choices[0]!.message.content, FaultServer.replyText)
      const [first, second] = yield* server.arrivals
      assert.isAtLeast(second!.at - first!.at, 300)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a 400 and a spent quota are one request each", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 400 }, { _tag: "Status", status: 429, code: "insufficient_quota" }]
      })
      const fetch = yield* ResilientFetch.make(targetAt(server.url))
      const client = openAiOn(server, fetch)
      const bad = yield* rejection(() => client.chat.completions.create({ model: "gpt-4o-mini", messages }))
      const quota = yield* rejection(() => client.chat.completions.create({ model: "gpt-4o-mini", messages }))
      assert.instanceOf(bad, OpenAI.BadRequestError)
      assert.instanceOf(quota, OpenAI.RateLimitError)
      assert.strictEqual((yield* server.arrivals).length, 2)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scoped("an abort during the backoff's sleep ends the call at once, and no other request is sent", () =>
    Effect.gen(function*() {
      // The sleep is on the TestClock, which never moves by itself: only the abort can end it.
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503, retryAfter: "5" } })
      const fetch = yield* ResilientFetch.make(targetAt(server.url))
      const controller = new AbortController()
      const call = yield* EffectLine.fork(
        rejection(() =>
          openAiOn(server, fetch).chat.completions.create({ model: "gpt-4o-mini", messages }, {
            signal: controller.signal
          })
        )
      )
      yield* untilSleeping(5_000)
      controller.abort()
      const error = yield* Fiber.join(call)
      assert.instanceOf(error, OpenAI.APIUserAbortError)
      yield* TestClock.adjust("1 minute")
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(recordingSleeps, Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a stream is retried before its first chunk (an error event as the first is none), never after it", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [
          { _tag: "Status", status: 503 },
          // Anthropic's answer when overloaded after accepting a stream: its first event is the error.
          {
            _tag: "Raw",
            headers: { "content-type": "text/event-stream" },
            body: `event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n`
          },
          { _tag: "StreamBreak", afterChunks: 2 }
        ]
      })
      const fetch = yield* ResilientFetch.make(targetAt(server.url))
      const received: Array<string> = []
      const error = yield* rejection(() => streamInto(openAiOn(server, fetch), received))
      assert.isAtLeast(received.length, 1, "the first chunks reached the SDK")
      assert.isDefined(error)
      // The 503 and the error event that reached nobody were retried; the break after the first chunk was not.
      assert.strictEqual((yield* server.arrivals).length, 3)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a stream whose first event is a terminal error is one request, the SDK raising its own error for it", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        otherwise: {
          _tag: "Raw",
          headers: { "content-type": "text/event-stream" },
          body: `data: {"error":{"message":"context too long","type":"invalid_request_error","code":null}}\n\n`
        }
      })
      const fetch = yield* ResilientFetch.make(targetAt(server.url))
      const error = yield* rejection(async () => {
        const stream = await openAiOn(server, fetch).chat.completions.create({
          model: "gpt-4o-mini",
          messages,
          stream: true
        })
        for await (const _ of stream) {
          // Nothing arrives before the error.
        }
      })
      assert.instanceOf(error, OpenAI.APIError)
      assert.include((error as Error).message, "context too long")
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("an SDK left retrying is noticed: one warning per target, and a counter", () =>
    Effect.gen(function*() {
      const logs = yield* captureLogs
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 500 } })
      const target = yield* targetAt(server.url, { maxAttempts: 1 })
      const fetch = yield* ResilientFetch.make(target).pipe(Effect.provide(logs.layer))
      // The SDK's own two retries, each a request our layer sees with x-stainless-retry-count above 0.
      yield* rejection(() => openAiOn(server, fetch, 2).chat.completions.create({ model: "gpt-4o-mini", messages }))
      assert.strictEqual((yield* server.arrivals).length, 3)
      assert.strictEqual(yield* sdkRetriesOf(target), 2)
      const warnings = (yield* logs.lines).filter((line) => line.message.includes("retries this target's calls itself"))
      assert.strictEqual(warnings.length, 1)
    }).pipe(Effect.provide(Coordination.layerMemory)))

  it.scopedLive("a call sent again with the idempotency key of one before is an SDK retrying too", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const target = yield* targetAt(server.url)
      const fetch = yield* ResilientFetch.make(target)
      const send = (key: string) =>
        Effect.promise(() =>
          fetch(`${server.url}/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json", "idempotency-key": key },
            body: JSON.stringify({ model: "gpt-4o-mini", messages })
          }).then((response) => response.status)
        )
      assert.deepStrictEqual([yield* send("call-1"), yield* send("call-2")], [200, 200])
      assert.strictEqual(yield* sdkRetriesOf(target), 0)
      assert.strictEqual(yield* send("call-1"), 200)
      assert.strictEqual(yield* sdkRetriesOf(target), 1)
      // Every attempt of a call carries the key the SDK chose.
      assert.deepStrictEqual((yield* server.arrivals).map((arrival) => arrival.headers["idempotency-key"]), [
        "call-1",
        "call-2",
        "call-1"
      ])
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scoped("the body of a call that just failed, sent again, is a layer above retrying it", () =>
    Effect.gen(function*() {
      // As an SDK that marks its retries neither way (Vercel AI, Mistral's, LangChain's caller) sends them.
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Ok" }, { _tag: "Ok" }, { _tag: "Status", status: 400 }, { _tag: "Status", status: 400 }]
      })
      const target = yield* targetAt(server.url)
      const fetch = yield* ResilientFetch.make(target)
      const send = (content: string) =>
        Effect.promise(() =>
          fetch(`${server.url}/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content }] })
          }).then((response) => response.status)
        )
      // The same prompt twice, both answered: a user's second question, not a retry.
      assert.deepStrictEqual([yield* send("hello"), yield* send("hello")], [200, 200])
      assert.strictEqual(yield* sdkRetriesOf(target), 0)
      assert.deepStrictEqual([yield* send("fails"), yield* send("fails")], [400, 400])
      assert.strictEqual(yield* sdkRetriesOf(target), 1)
      // Two minutes on, the same body is a new call.
      yield* TestClock.adjust("121 seconds")
      assert.strictEqual(yield* send("fails"), 200)
      assert.strictEqual(yield* sdkRetriesOf(target), 1)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("requests that are not model calls pass through untouched", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503 } })
      const fetch = yield* ResilientFetch.make(targetAt(server.url))
      const response = yield* Effect.promise(() => fetch(`${server.url}/models`))
      // The model list answers 503 as the provider's state does: passed on as it came, not retried.
      assert.strictEqual(response.status, 503)
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(Effect.provide(Coordination.layerMemory)))

  it.scopedLive("a success over maxResponseBytes is ResponseTooLarge: one request, rejected as fetch rejects", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: oversized })
      const fetch = yield* ResilientFetch.make(targetAt(server.url, { maxResponseBytes: 1024 }))
      const error = yield* rejection(() =>
        fetch(`${server.url}/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ model: "gpt-4o-mini", messages })
        })
      )
      assert.instanceOf(error, TypeError)
      const failed = (error as TypeError).cause as Failure.CallFailed
      assert.instanceOf(failed, Failure.CallFailed)
      assert.strictEqual(failed.reason, "terminal")
      assert.deepStrictEqual(failed.last, new Failure.ResponseTooLarge({ status: 200, limitBytes: 1024 }))
      assert.strictEqual((yield* server.arrivals).length, 1)
      assert.strictEqual(yield* settled(server.openConnections, (open) => open === 0), 0)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("the answer's usage settles the call's place in the key's pace, not its max_tokens", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({})
      // 600 tokens a minute: 100 ms a token.
      const target = yield* targetAt(server.url, { tokensPerMinute: 600 })
      const fetch = yield* ResilientFetch.make(target)
      const response = yield* Effect.promise(() =>
        fetch(`${server.url}/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ model: "gpt-4o-mini", messages, max_tokens: 2_000 })
        })
      )
      const { usage } = (yield* Effect.promise(() => response.json())) as { usage: { total_tokens: number } }
      const { limiter } = (yield* stateOf(target))!
      // Reserved at over 2,000 tokens (200 s of the key), settled at what the provider said it used
      // (less the real time since, which only shortens the wait).
      assert.isAtMost((yield* limiter.snapshot).tokensWaitMillis, Math.max(0, usage.total_tokens * 100 - 1_000))
    }).pipe(Effect.provide(Coordination.layerMemory)))
})
