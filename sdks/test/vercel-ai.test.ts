/**
 * The Vercel AI SDK (`ai` 7, `generateText` and `streamText`) on its OpenAI chat-completions and
 * Mistral providers, with `ResilientFetch` under them and the SDK's own retries off
 * (`maxRetries: 0` per call), against the real fault server: what the server saw decides each test.
 */
import { createMistral } from "@ai-sdk/mistral"
import { createOpenAI } from "@ai-sdk/openai"
import { assert, describe, it } from "@effect/vitest"
import { ResilientFetch } from "@resilient-ai/client"
import { Coordination, RetryBudget, type Settings } from "@resilient-ai/policy"
import { EffectLine } from "@resilient-ai/policy/internal"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { APICallError, generateText, type LanguageModel, RetryError, streamText } from "ai"
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
import { haikuFromMistral, haikuFromOpenAi } from "../examples/vercel-ai.js"

/** A provider of the SDK, as the tests drive it. */
interface Provider {
  readonly name: string
  /** The provider's model at `baseURL`, its requests sent by `fetch`. */
  readonly model: (baseURL: string, fetch: ResilientFetch.Fetch) => LanguageModel
  /** Whose error bodies the fault server answers with, so the provider can read them. */
  readonly style: "openai" | "mistral"
  /** How many events of its stream come before the first piece of text, and one more. */
  readonly firstTextAfter: number
  /** The example's set-up for this provider. */
  readonly example: (baseURL: string) => Effect.Effect<string, Settings.InvalidSettings>
}

const providers: ReadonlyArray<Provider> = [
  {
    name: "@ai-sdk/openai 4.0.118 (chat completions)",
    // `.chat`: chat completions; the provider called as a function sends to /v1/responses instead.
    model: (baseURL, fetch) => createOpenAI({ baseURL, apiKey: canary, fetch }).chat("gpt-4o-mini"),
    style: "openai",
    firstTextAfter: 2,
    example: haikuFromOpenAi
  },
  {
    name: "@ai-sdk/openai 4.0.118 (the Responses API, its default)",
    model: (baseURL, fetch) => createOpenAI({ baseURL, apiKey: canary, fetch })("gpt-4o-mini"),
    style: "openai",
    // response.created, .in_progress, .output_item.added, .content_part.added, then the text.
    firstTextAfter: 5,
    example: haikuFromOpenAi
  },
  {
    name: "@ai-sdk/mistral 4.0.87",
    model: (baseURL, fetch) => createMistral({ baseURL, apiKey: canary, fetch })("mistral-small-latest"),
    style: "mistral",
    firstTextAfter: 2,
    example: haikuFromMistral
  }
]

const prompt = "Say hello"

/** An error status as `provider` writes it. */
const status = (provider: Provider, fault: Omit<Extract<FaultPlan.Fault, { _tag: "Status" }>, "_tag" | "style">) =>
  ({ _tag: "Status", style: provider.style, ...fault }) as const

/** The status of the `APICallError` the SDK raised; anything else fails the test. */
const statusOf = (error: unknown): number | undefined => {
  assert.isTrue(APICallError.isInstance(error), `expected an APICallError, got ${String(error)}`)
  return (error as APICallError).statusCode
}

for (const provider of providers) {
  describe(`Vercel AI SDK ai 7.0.173 with ${provider.name} on ResilientFetch`, () => {
    it.scopedLive("503s are retried by the policy, not the SDK, up to the attempt ceiling, under one key", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({ otherwise: status(provider, { status: 503 }) })
        const fetch = yield* ResilientFetch.make(targetAt(server.url, { maxAttempts: 3 }))
        const error = yield* rejection(() =>
          generateText({ model: provider.model(server.url, fetch), prompt, maxRetries: 0 })
        )
        // With its retries off the SDK raises the provider's last answer as it is, not a RetryError.
        assert.strictEqual(statusOf(error), 503)
        const arrivals = yield* server.arrivals
        assert.strictEqual(arrivals.length, 3)
        // The SDK sends no idempotency key: the policy gives every attempt of the call the same one.
        assertOneIdempotencyKey(arrivals)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scopedLive("the budget bounds them: a budget that grants nothing sends one request", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({ otherwise: status(provider, { status: 503 }) })
        const fetch = yield* ResilientFetch.make(targetAt(server.url, { maxAttempts: 5 }))
        yield* rejection(() => generateText({ model: provider.model(server.url, fetch), prompt, maxRetries: 0 }))
        assert.strictEqual((yield* server.arrivals).length, 1)
      }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.disabled })), Effect.provide(quiet)))

    it.scopedLive("the provider's Retry-After is honoured, then the success reaches the SDK's caller", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({
          steps: [status(provider, { status: 429, retryAfterMs: "300" }), { _tag: "Ok" }]
        })
        const fetch = yield* ResilientFetch.make(targetAt(server.url))
        const result = yield* Effect.promise(() =>
          generateText({ model: provider.model(server.url, fetch), prompt, maxRetries: 0 })
        )
        assert.strictEqual(result.text, FaultServer.replyText)
        const [first, second] = yield* server.arrivals
        assert.isAtLeast(second!.at - first!.at, 300)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scopedLive("a 400 and a spent quota are one request each, each the SDK's APICallError", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({
          steps: [status(provider, { status: 400 }), status(provider, { status: 429, code: "insufficient_quota" })]
        })
        const fetch = yield* ResilientFetch.make(targetAt(server.url))
        const model = provider.model(server.url, fetch)
        const bad = yield* rejection(() => generateText({ model, prompt, maxRetries: 0 }))
        const quota = yield* rejection(() => generateText({ model, prompt, maxRetries: 0 }))
        assert.strictEqual(statusOf(bad), 400)
        assert.strictEqual(statusOf(quota), 429)
        assert.strictEqual((yield* server.arrivals).length, 2)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scoped("an abort during the backoff's sleep ends the call at once, and no other request is sent", () =>
      Effect.gen(function*() {
        // The sleep is on the TestClock, which never moves by itself: only the abort can end it.
        const server = yield* FaultServer.make({ otherwise: status(provider, { status: 503, retryAfter: "5" }) })
        const fetch = yield* ResilientFetch.make(targetAt(server.url))
        const controller = new AbortController()
        const call = yield* EffectLine.fork(
          rejection(() =>
            generateText({
              model: provider.model(server.url, fetch),
              prompt,
              maxRetries: 0,
              abortSignal: controller.signal
            })
          )
        )
        yield* untilSleeping(5_000)
        controller.abort()
        const error = yield* Fiber.join(call)
        // The SDK passes the abort on as it is (provider-utils' isAbortError): a DOMException AbortError.
        assert.instanceOf(error, DOMException)
        assert.strictEqual((error as DOMException).name, "AbortError")
        yield* TestClock.adjust("1 minute")
        assert.strictEqual((yield* server.arrivals).length, 1)
      }).pipe(recordingSleeps, Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scopedLive("a stream is retried before its first chunk, never after it", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({
          steps: [status(provider, { status: 503 }), { _tag: "StreamBreak", afterChunks: provider.firstTextAfter }]
        })
        const fetch = yield* ResilientFetch.make(targetAt(server.url))
        const received: Array<string> = []
        const error = yield* rejection(async () => {
          const result = streamText({
            model: provider.model(server.url, fetch),
            prompt,
            maxRetries: 0,
            onError: () => {}
          })
          for await (const part of result.stream) {
            if (part.type === "text-delta") received.push(part.text)
            // The Responses provider reports the break as a part of the stream, the others by throwing.
            if (part.type === "error") throw part.error
          }
        })
        assert.isAtLeast(received.length, 1, "the first chunks reached the SDK's caller")
        assert.notInclude(received.join(""), FaultServer.replyText)
        // The break, as the SDK reports a body that failed while it read it.
        assert.isTrue(APICallError.isInstance(error))
        assert.include(String(error), "Failed to process successful response")
        // The 503 was retried; the break after the first chunk was not.
        assert.strictEqual((yield* server.arrivals).length, 2)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scopedLive("a stream whose first event is the provider's error reached nobody: it is retried", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({ steps: [{ _tag: "StreamError", afterChunks: 0 }, { _tag: "Ok" }] })
        const fetch = yield* ResilientFetch.make(targetAt(server.url))
        const text = yield* Effect.promise(() =>
          streamText({ model: provider.model(server.url, fetch), prompt, maxRetries: 0 }).text
        )
        assert.strictEqual(text, FaultServer.replyText)
        assert.strictEqual((yield* server.arrivals).length, 2)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scopedLive("an SDK left retrying is noticed by its body sent again: one warning per target, and a counter", () =>
      Effect.gen(function*() {
        const logs = yield* captureLogs
        // The SDK's own backoff is 2 s then 4 s and no call option shortens it (ai's
        // retry-with-exponential-backoff.ts: initialDelayInMs = 2000), but it waits what the provider's
        // retry-after-ms says instead (getRetryDelayInMs, 0 to 60 s): 1 ms here.
        const server = yield* FaultServer.make({ otherwise: status(provider, { status: 503, retryAfterMs: "1" }) })
        const target = yield* targetAt(server.url, { maxAttempts: 1 })
        const fetch = yield* ResilientFetch.make(target).pipe(Effect.provide(logs.layer))
        const error = yield* rejection(() =>
          generateText({ model: provider.model(server.url, fetch), prompt, maxRetries: 2 })
        )
        // Its retries carry no retry count and no idempotency key: the adapter knows them by the
        // body of the call that just failed, sent again.
        assert.strictEqual((yield* server.arrivals).length, 3)
        assert.strictEqual(yield* sdkRetriesOf(target), 2)
        assert.isTrue(RetryError.isInstance(error))
        assert.strictEqual((error as RetryError).errors.length, 3)
        const warnings = (yield* logs.lines).filter((line) =>
          line.message.includes("retries this target's calls itself")
        )
        assert.strictEqual(warnings.length, 1)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scopedLive("the example's set-up answers through a 503", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({ steps: [status(provider, { status: 503 }), { _tag: "Ok" }] })
        assert.strictEqual(yield* provider.example(server.url), FaultServer.replyText)
        assert.strictEqual((yield* server.arrivals).length, 2)
      }).pipe(Effect.provide(quiet)))
  })
}
