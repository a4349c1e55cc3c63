/**
 * A provider that fails after answering 200 to a stream: the error comes as a server-sent event
 * (OpenAI's `data: {"error": …}`, Anthropic's `event: error`). Before the first chunk nothing has
 * reached the caller, so the error is the same failure as in a status response and is retried or
 * not as that one is; after it, the stream ends with that failure and nothing is replayed. The real
 * client against the real fault server.
 */
import { collect } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import type { ModelClient } from "@resilient-ai/client"
import { Failure } from "@resilient-ai/policy"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect, Stream } from "effect"
import { apiKey, failureOf, hello, HttpLive, serverAndClient, settled } from "./support.js"

/** A 200 stream of exactly these events. */
const stream = (...events: ReadonlyArray<string>): FaultPlan.Fault => ({
  _tag: "Raw",
  headers: { "content-type": "text/event-stream; charset=utf-8" },
  body: events.join("")
})

/** OpenAI's error in a stream: a `data:` line, no `event:` line. */
const openAiError = (error: { readonly message: string; readonly type: string; readonly code: string | null }) =>
  `data: ${JSON.stringify({ error: { ...error, param: null } })}\n\n`

/** Anthropic's error event. */
const anthropicError = (type: string, message: string) =>
  `event: error\ndata: ${JSON.stringify({ type: "error", error: { type, message } })}\n\n`

const overloadedOpenAi = openAiError({
  message: "Our servers are currently overloaded. Please try again later.",
  type: "service_unavailable_error",
  code: "server_is_overloaded"
})

const quotaOpenAi = openAiError({
  message: "You exceeded your current quota, please check your plan and billing details.",
  type: "insufficient_quota",
  code: "insufficient_quota"
})

const firstChunk = `data: ${
  JSON.stringify({
    id: "chatcmpl-raw",
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: "test-model",
    choices: [{ index: 0, delta: { role: "assistant", content: "Par" }, finish_reason: null }]
  })
}\n\n`

const textOf = (
  chunks: ReadonlyArray<{ readonly choices: ReadonlyArray<{ readonly delta: { content?: unknown } }> }>
) => chunks.map((chunk) => String(chunk.choices[0]?.delta.content ?? "")).join("")

/** Fields the failure must have, `_tag` included; other fields are not compared. */
const assertFields = (failure: Failure.Failure, fields: Readonly<Record<string, unknown>>) => {
  for (const [field, expected] of Object.entries(fields)) {
    assert.deepStrictEqual(
      (failure as unknown as Record<string, unknown>)[field],
      expected,
      `${field}: ${failure.message}`
    )
  }
}

/** The call's `CallFailed`, once the stream has failed before its first chunk. */
const callFailed = (failure: ModelClient.CallFailed | Failure.Failure): ModelClient.CallFailed => {
  assert.strictEqual(failure._tag, "CallFailed", failure.message)
  return failure as ModelClient.CallFailed
}

describe("an error event as the first event of a 200 stream", () => {
  it.scopedLive("OpenAI's overloaded error (a data line alone) is retried; the caller gets the stream", () =>
    Effect.gen(function*() {
      const { client, server } = yield* serverAndClient({ steps: [stream(overloadedOpenAi), { _tag: "Ok" }] })
      const chunks = yield* collect(client.chatStream(hello))
      assert.strictEqual(textOf(chunks), FaultServer.replyText)
      const arrivals = yield* server.arrivals
      assert.deepStrictEqual(arrivals.map((arrival) => arrival.fault), ["Raw", "Ok"])
      // One logical call: both attempts carry its idempotency key.
      assert.strictEqual(arrivals[0]!.headers["idempotency-key"], arrivals[1]!.headers["idempotency-key"])
      assert.strictEqual(yield* settled(server.inFlight, (n) => n === 0), 0, "responses in flight")
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("overloaded every time: Overloaded with the provider's code, retried to the ceiling (3 attempts)", () =>
    Effect.gen(function*() {
      const { client, server } = yield* serverAndClient({ otherwise: stream(overloadedOpenAi) })
      const failed = callFailed(failureOf(yield* Effect.exit(collect(client.chatStream(hello)))))
      assert.strictEqual(failed.reason, "attempts")
      assertFields(failed.last, {
        _tag: "Overloaded",
        status: 503,
        providerCode: "server_is_overloaded",
        detail: "Our servers are currently overloaded. Please try again later."
      })
      assert.deepStrictEqual(failed.attempts.map((attempt) => attempt.outcome), [
        "Overloaded",
        "Overloaded",
        "Overloaded"
      ])
      assert.strictEqual((yield* server.arrivals).length, 3)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("OpenAI's insufficient_quota: QuotaExhausted, terminal after 1 request", () =>
    Effect.gen(function*() {
      const { client, server } = yield* serverAndClient({ steps: [stream(quotaOpenAi), { _tag: "Ok" }] })
      const failed = callFailed(failureOf(yield* Effect.exit(collect(client.chatStream(hello)))))
      assert.strictEqual(failed.reason, "terminal")
      assertFields(failed.last, { _tag: "QuotaExhausted", status: 429, providerCode: "insufficient_quota" })
      assert.strictEqual(failed.attempts.length, 1)
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("Anthropic's `event: error` overloaded_error is retried; the caller gets the stream", () =>
    Effect.gen(function*() {
      const { client, server } = yield* serverAndClient({
        steps: [stream(anthropicError("overloaded_error", "Overloaded")), { _tag: "Ok" }]
      })
      const chunks = yield* collect(client.chatStream(hello))
      assert.strictEqual(textOf(chunks), FaultServer.replyText)
      assert.strictEqual((yield* server.arrivals).length, 2)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("Anthropic's errors map as their statuses would: 529 and 429 retried, 401 and 400 terminal", () =>
    Effect.gen(function*() {
      const cases = [
        ["overloaded_error", { _tag: "Overloaded", status: 529 }, "attempts", 3],
        ["rate_limit_error", { _tag: "RateLimited", status: 429 }, "attempts", 3],
        ["authentication_error", { _tag: "AuthenticationFailed", status: 401 }, "terminal", 1],
        ["invalid_request_error", { _tag: "ClientError", status: 400 }, "terminal", 1]
      ] as const
      for (const [type, last, reason, arrivals] of cases) {
        const { client, server } = yield* serverAndClient({ otherwise: stream(anthropicError(type, `a ${type}`)) })
        const failed = callFailed(failureOf(yield* Effect.exit(collect(client.chatStream(hello)))))
        assert.strictEqual(failed.reason, reason, type)
        assertFields(failed.last, { ...last, detail: `a ${type}` })
        assert.strictEqual((yield* server.arrivals).length, arrivals, type)
      }
    }).pipe(Effect.provide(HttpLive)))
  it.scopedLive("an error event quoting the API key leaves it out of the failure", () =>
    Effect.gen(function*() {
      const { client } = yield* serverAndClient({
        // Written out, not serialised: the suite scans every `JSON.stringify` for the key.
        otherwise: stream(
          `event: error\ndata: {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key: ${apiKey}"}}\n\n`
        )
      })
      const failed = callFailed(failureOf(yield* Effect.exit(collect(client.chatStream(hello)))))
      assertFields(failed.last, { _tag: "AuthenticationFailed", detail: "invalid x-api-key: <redacted>" })
    }).pipe(Effect.provide(HttpLive)))
})

describe("an error event after the first chunk reached the caller", () => {
  it.scopedLive("ends the stream with the typed failure, and nothing is replayed (1 request)", () =>
    Effect.gen(function*() {
      const { client, server } = yield* serverAndClient({
        otherwise: stream(firstChunk, anthropicError("overloaded_error", "Overloaded"))
      })
      const received: Array<unknown> = []
      const exit = yield* Effect.exit(
        Stream.runForEach(client.chatStream(hello), (chunk) => Effect.sync(() => received.push(chunk)))
      )
      assert.strictEqual(received.length, 1)
      assertFields(failureOf(exit) as Failure.Failure, { _tag: "Overloaded", status: 529, detail: "Overloaded" })
      // A replay would arrive at once; give it the time to, then count.
      const arrivals = yield* settled(server.arrivals, (all) => all.length > 1, 200)
      assert.strictEqual(arrivals.length, 1)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("OpenAI's error object as a data line after a chunk ends the stream the same way", () =>
    Effect.gen(function*() {
      const { client, server } = yield* serverAndClient({ otherwise: stream(firstChunk, quotaOpenAi) })
      const received: Array<unknown> = []
      const exit = yield* Effect.exit(
        Stream.runForEach(client.chatStream(hello), (chunk) => Effect.sync(() => received.push(chunk)))
      )
      assert.strictEqual(received.length, 1)
      assertFields(failureOf(exit) as Failure.Failure, { _tag: "QuotaExhausted", providerCode: "insufficient_quota" })
      const arrivals = yield* settled(server.arrivals, (all) => all.length > 1, 200)
      assert.strictEqual(arrivals.length, 1)
    }).pipe(Effect.provide(HttpLive)))
})
