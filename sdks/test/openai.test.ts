/**
 * The `openai` SDK's current major (7, Node 22) with `ResilientFetch` under it, its own retries off,
 * against the real fault server: what the server saw decides each test.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ResilientFetch } from "@resilient-ai/client"
import { Coordination, RetryBudget } from "@resilient-ai/policy"
import { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import OpenAI, { APIUserAbortError, BadRequestError, InternalServerError, RateLimitError } from "openai"
import { apiKey, assertOneIdempotencyKey, quiet, rejection } from "../../test/client/sdkSupport.js"
import { haiku } from "../examples/openai.js"
import { abortedInBackoff, atFaultServer, brokenStream, leftRetrying, requestsTo } from "./scenarios.js"

const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [{ role: "user", content: "Say hello" }]

/** An OpenAI client on `fetch`, its own retries off unless `maxRetries` says otherwise. */
const openAiOn = (baseURL: string, fetch: ResilientFetch.Fetch, maxRetries = 0) =>
  new OpenAI({ apiKey, baseURL, fetch, maxRetries })

/** One chat completion, as the SDK's caller asks for it. */
const chat = (client: OpenAI, options?: OpenAI.RequestOptions) =>
  client.chat.completions.create({ model: "gpt-4o-mini", messages }, options)

describe("openai 7.55.0 on ResilientFetch", () => {
  it.scopedLive("the README set-up: the SDK's 503 is retried by the policy under it", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
      assert.strictEqual(yield* haiku(server.url), FaultServer.replyText)
      const arrivals = yield* server.arrivals
      assert.deepStrictEqual(arrivals.map((arrival) => arrival.headers["x-stainless-retry-count"]), ["0", "0"])
    }).pipe(Effect.provide(quiet)))

  it.scopedLive("503s are retried by the policy, not the SDK, up to the attempt ceiling, under one key", () =>
    Effect.gen(function*() {
      const { fetch, server } = yield* atFaultServer({ otherwise: { _tag: "Status", status: 503 } }, { maxAttempts: 3 })
      const error = yield* rejection(() => chat(openAiOn(server.url, fetch)))
      // The SDK raises its own error for the provider's last answer.
      assert.instanceOf(error, InternalServerError)
      assert.strictEqual((error as InternalServerError).status, 503)
      const arrivals = yield* server.arrivals
      assert.deepStrictEqual(arrivals.map((arrival) => arrival.headers["x-stainless-retry-count"]), ["0", "0", "0"])
      assert.isDefined(arrivals[0]!.headers["idempotency-key"])
      assertOneIdempotencyKey(arrivals)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("the budget bounds the retries: a budget that grants nothing sends one request", () =>
    Effect.gen(function*() {
      const { fetch, server } = yield* atFaultServer({ otherwise: { _tag: "Status", status: 503 } }, { maxAttempts: 5 })
      assert.instanceOf(yield* rejection(() => chat(openAiOn(server.url, fetch))), InternalServerError)
      assert.strictEqual(yield* requestsTo(server), 1)
    }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.disabled })), Effect.provide(quiet)))

  it.scopedLive("the provider's retry-after-ms is honoured, then the success reaches the SDK's caller", () =>
    Effect.gen(function*() {
      const { fetch, server } = yield* atFaultServer({
        steps: [{ _tag: "Status", status: 429, retryAfterMs: "300" }, { _tag: "Ok" }]
      })
      const completion = yield* Effect.promise(() => chat(openAiOn(server.url, fetch)))
      assert.strictEqual(completion.choices[0]!.message.content, FaultServer.replyText)
      const [first, second] = yield* server.arrivals
      assert.isAtLeast(second!.at - first!.at, 300)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a 400 and a spent quota are one request each, each the SDK's own error", () =>
    Effect.gen(function*() {
      const { fetch, server } = yield* atFaultServer({
        steps: [{ _tag: "Status", status: 400 }, { _tag: "Status", status: 429, code: "insufficient_quota" }]
      })
      const client = openAiOn(server.url, fetch)
      const bad = yield* rejection(() => chat(client))
      const quota = yield* rejection(() => chat(client))
      assert.instanceOf(bad, BadRequestError)
      assert.instanceOf(quota, RateLimitError)
      assert.strictEqual((quota as RateLimitError).code, "insufficient_quota")
      assert.strictEqual(yield* requestsTo(server), 2)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scoped("an abort during the backoff's sleep ends the call at once with the SDK's abort error, and no other request is sent", () =>
    Effect.gen(function*() {
      const { error, requests } = yield* abortedInBackoff((fetch, baseURL, signal) =>
        chat(openAiOn(baseURL, fetch), { signal })
      )
      assert.instanceOf(error, APIUserAbortError)
      assert.strictEqual(requests, 1)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a stream is retried before its first chunk, never after it", () =>
    Effect.gen(function*() {
      const { error, received, requests } = yield* brokenStream(async (fetch, baseURL, received) => {
        const stream = await openAiOn(baseURL, fetch).chat.completions.create({
          model: "gpt-4o-mini",
          messages,
          stream: true
        })
        for await (const chunk of stream) received.push(chunk)
      })
      // At least the first: a chunk still queued in the response body when the reset lands is dropped with it.
      assert.isAtLeast(received.length, 1, "the chunks sent before the break reached the SDK's caller")
      assert.instanceOf(error, Error)
      // The 503 was retried; the break after the first chunk was not.
      assert.strictEqual(requests, 2)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("an SDK left retrying is noticed: one warning per target, and a counter of its retries", () =>
    Effect.gen(function*() {
      // retry-after-ms: 1 sets the SDK's own backoff (client.ts, retryRequest), 0.5 s and more by default.
      const { error, retryCounts, sdkRetries, warnings } = yield* leftRetrying(
        { _tag: "Status", status: 500, retryAfterMs: "1" },
        (fetch, baseURL) => chat(openAiOn(baseURL, fetch, 2))
      )
      assert.instanceOf(error, InternalServerError)
      // The SDK's two retries, each marked x-stainless-retry-count above 0, and nothing more.
      assert.deepStrictEqual(retryCounts, ["0", "1", "2"])
      assert.strictEqual(sdkRetries, 2)
      assert.strictEqual(warnings, 1)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))
})

describe("openai 7.55.0's Responses API on ResilientFetch", () => {
  it.scopedLive("a stream is retried while nothing reached the SDK (a 503, an error as its first event), never after", () =>
    Effect.gen(function*() {
      const { fetch, server } = yield* atFaultServer({
        steps: [
          { _tag: "Status", status: 503 },
          { _tag: "StreamError", afterChunks: 0 },
          // response.created, .in_progress, .output_item.added, .content_part.added, two deltas.
          { _tag: "StreamBreak", afterChunks: 6 }
        ]
      })
      const deltas: Array<string> = []
      const error = yield* rejection(async () => {
        const stream = await openAiOn(server.url, fetch).responses.create({
          model: "gpt-4o-mini",
          input: "Say hello",
          stream: true
        })
        for await (const event of stream) if (event.type === "response.output_text.delta") deltas.push(event.delta)
      })
      assert.isAtLeast(deltas.length, 1, "the first pieces of text reached the SDK's caller")
      assert.notStrictEqual(deltas.join(""), FaultServer.replyText)
      assert.isDefined(error)
      assert.strictEqual(yield* requestsTo(server), 3)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("an answer is retried through an overload, and reaches the SDK's caller whole", () =>
    Effect.gen(function*() {
      const { fetch, server } = yield* atFaultServer({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
      const response = yield* Effect.promise(() =>
        openAiOn(server.url, fetch).responses.create({ model: "gpt-4o-mini", input: "Say hello" })
      )
      assert.strictEqual(response.output_text, FaultServer.replyText)
      assert.strictEqual(yield* requestsTo(server), 2)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))
})
