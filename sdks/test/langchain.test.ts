/**
 * LangChain's `ChatOpenAI` (`@langchain/openai` 1.6.0 on `@langchain/core` 1.4.0, chat completions)
 * with `ResilientFetch` under it, against the real fault server: what the server saw decides each
 * test. LangChain retries at two layers of its own: its `AsyncCaller` (`maxRetries`, default 6,
 * p-retry's backoff), which `maxRetries: 0` switches off, and the openai client inside it, which
 * LangChain builds with `maxRetries: 0` (chat_models/base.js, `_getClientOptions`) but which a
 * `maxRetries` in `configuration` turns back on, as it is sent along with every request.
 */
import { assert, describe, it } from "@effect/vitest"
import { ChatOpenAI } from "@langchain/openai"
import type { ResilientFetch } from "@resilient-ai/client"
import { Coordination, RetryBudget } from "@resilient-ai/policy"
import { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import { BadRequestError, InternalServerError, RateLimitError } from "openai"
import { apiKey, assertOneIdempotencyKey, quiet, rejection } from "../../test/client/sdkSupport.js"
import { haiku } from "../examples/langchain.js"
import { abortedInBackoff, atFaultServer, brokenStream, leftRetrying, requestsTo } from "./scenarios.js"

/** LangChain's retrying layers: its AsyncCaller's (`maxRetries`) and the openai client's inside it. */
interface Retries {
  readonly maxRetries?: number | undefined
  readonly clientRetries?: number | undefined
}

/** A ChatOpenAI on `fetch`, both of its retrying layers off unless `retries` turns one on. */
const chatOn = (baseURL: string, fetch: ResilientFetch.Fetch, { clientRetries, maxRetries = 0 }: Retries = {}) =>
  new ChatOpenAI({
    model: "gpt-4o-mini",
    apiKey,
    maxRetries,
    configuration: { baseURL, fetch, ...(clientRetries === undefined ? {} : { maxRetries: clientRetries }) }
  })

const prompt = "Say hello"

describe("@langchain/openai 1.6.0 on ResilientFetch", () => {
  it.scopedLive("the README set-up: LangChain's 503 is retried by the policy under it", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
      assert.strictEqual(yield* haiku(server.url), FaultServer.replyText)
      assert.strictEqual(yield* requestsTo(server), 2)
    }).pipe(Effect.provide(quiet)))

  it.scopedLive("503s are retried by the policy, not LangChain, up to the attempt ceiling, under one key", () =>
    Effect.gen(function*() {
      const { fetch, server } = yield* atFaultServer({ otherwise: { _tag: "Status", status: 503 } }, { maxAttempts: 3 })
      const error = yield* rejection(() => chatOn(server.url, fetch).invoke(prompt))
      // LangChain passes the openai client's error for the provider's last answer on as it is.
      assert.instanceOf(error, InternalServerError)
      assert.strictEqual((error as InternalServerError).status, 503)
      const arrivals = yield* server.arrivals
      assert.strictEqual(arrivals.length, 3)
      assert.isDefined(arrivals[0]!.headers["idempotency-key"])
      assertOneIdempotencyKey(arrivals)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("the budget bounds the retries: a budget that grants nothing sends one request", () =>
    Effect.gen(function*() {
      const { fetch, server } = yield* atFaultServer({ otherwise: { _tag: "Status", status: 503 } }, { maxAttempts: 5 })
      assert.instanceOf(yield* rejection(() => chatOn(server.url, fetch).invoke(prompt)), InternalServerError)
      assert.strictEqual(yield* requestsTo(server), 1)
    }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.disabled })), Effect.provide(quiet)))

  it.scopedLive("the provider's retry-after-ms is honoured, then the success reaches LangChain's caller", () =>
    Effect.gen(function*() {
      const { fetch, server } = yield* atFaultServer({
        steps: [{ _tag: "Status", status: 429, retryAfterMs: "300" }, { _tag: "Ok" }]
      })
      const message = yield* Effect.promise(() => chatOn(server.url, fetch).invoke(prompt))
      assert.strictEqual(message.text, FaultServer.replyText)
      const [first, second] = yield* server.arrivals
      assert.isAtLeast(second!.at - first!.at, 300)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a 400 and a spent quota are one request each, each the error LangChain raises", () =>
    Effect.gen(function*() {
      const { fetch, server } = yield* atFaultServer({
        steps: [{ _tag: "Status", status: 400 }, { _tag: "Status", status: 429, code: "insufficient_quota" }]
      })
      const model = chatOn(server.url, fetch)
      const bad = yield* rejection(() => model.invoke(prompt))
      const quota = yield* rejection(() => model.invoke(prompt))
      assert.instanceOf(bad, BadRequestError)
      // The openai client's error, marked by LangChain as a spent quota, not to be retried
      // (utils/client.js, wrapOpenAIClientError; core's utils/async_caller.js, defaultFailedAttemptHandler).
      assert.instanceOf(quota, RateLimitError)
      assert.strictEqual((quota as RateLimitError).name, "InsufficientQuotaError")
      assert.propertyVal(quota, "lc_error_code", "MODEL_RATE_LIMIT")
      assert.strictEqual(yield* requestsTo(server), 2)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scoped("an abort during the backoff's sleep ends the call at once with LangChain's abort error, and no other request is sent", () =>
    Effect.gen(function*() {
      const { error, requests } = yield* abortedInBackoff((fetch, baseURL, signal) =>
        chatOn(baseURL, fetch).invoke(prompt, { signal })
      )
      // LangChain turns the openai client's APIUserAbortError into an Error named AbortError
      // (utils/client.js, wrapOpenAIClientError).
      assert.instanceOf(error, Error)
      assert.strictEqual((error as Error).name, "AbortError")
      assert.strictEqual(requests, 1)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a stream is retried before its first chunk, never after it", () =>
    Effect.gen(function*() {
      const { error, received, requests } = yield* brokenStream(async (fetch, baseURL, received) => {
        for await (const chunk of await chatOn(baseURL, fetch).stream(prompt)) received.push(chunk)
      })
      // At least the first: a chunk still queued in the response body when the reset lands is dropped with it.
      assert.isAtLeast(received.length, 1, "the chunks sent before the break reached LangChain's caller")
      assert.instanceOf(error, Error)
      // The 503 was retried; the break after the first chunk was not.
      assert.strictEqual(requests, 2)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("LangChain's AsyncCaller left retrying is noticed: the same body, sent again after a failure", () =>
    Effect.gen(function*() {
      // One retry, after LangChain's own real wait of 1 to 2 s: the AsyncCaller gives p-retry no
      // minTimeout (core's utils/async_caller.js, callWithRetries), so p-retry's 1 s default times a
      // random 1 to 2 (utils/p-retry/index.js, calculateDelay) is the shortest it sleeps, and a
      // Retry-After can only lengthen it.
      const { error, retryCounts, sdkRetries, warnings } = yield* leftRetrying(
        { _tag: "Status", status: 500 },
        (fetch, baseURL) => chatOn(baseURL, fetch, { maxRetries: 1 }).invoke(prompt)
      )
      assert.instanceOf(error, InternalServerError)
      // Marked as a retry neither by x-stainless-retry-count nor by a key the SDK sent before.
      assert.deepStrictEqual(retryCounts, ["0", "0"])
      assert.strictEqual(sdkRetries, 1)
      assert.strictEqual(warnings, 1)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("the openai client inside LangChain, left retrying through configuration, is noticed too", () =>
    Effect.gen(function*() {
      // retry-after-ms: 1 sets the openai client's own backoff (0.5 s and more by default).
      const { error, retryCounts, sdkRetries, warnings } = yield* leftRetrying(
        { _tag: "Status", status: 500, retryAfterMs: "1" },
        (fetch, baseURL) => chatOn(baseURL, fetch, { clientRetries: 2 }).invoke(prompt)
      )
      assert.instanceOf(error, InternalServerError)
      assert.deepStrictEqual(retryCounts, ["0", "1", "2"])
      assert.strictEqual(sdkRetries, 2)
      assert.strictEqual(warnings, 1)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))
})
