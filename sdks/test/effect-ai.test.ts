/**
 * `@effect/ai` 0.37 on `@effect/ai-openai` 0.41 (the Responses API) and `@effect/ai-anthropic` 0.27
 * (the Messages API), with `ResilientHttpClient` as the HttpClient their clients are given, against
 * the real fault server: what the server saw decides each test. These SDKs do not retry by
 * themselves; "left retrying" is an `HttpClient.retryTransient` a user added in `transformClient`.
 */
import { AiError, LanguageModel } from "@effect/ai"
import { AnthropicClient, AnthropicLanguageModel } from "@effect/ai-anthropic"
import { OpenAiClient, OpenAiLanguageModel } from "@effect/ai-openai"
import { HttpClient } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { ResilientHttpClient, type Target } from "@resilient-ai/client"
import { Coordination, RetryBudget } from "@resilient-ai/policy"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect, Exit, Fiber, Layer, Redacted, Stream, TestClock } from "effect"
import { canary } from "../../test/canary.js"
import {
  assertOneIdempotencyKey,
  captureLogs,
  quiet,
  sdkRetriesOf,
  targetAt,
  untilSleeping
} from "../../test/client/sdkSupport.js"
import { haikuFromAnthropic, haikuFromOpenAi } from "../examples/effect-ai.js"

/** What a test gives the SDK's client: a retry layer of its own above the resilient client, or none. */
type TransformClient = (client: HttpClient.HttpClient) => HttpClient.HttpClient

/** A provider of `@effect/ai`, as the tests drive it. */
interface Provider {
  readonly name: string
  /** The provider's base URL on the fault server, as its client takes it. */
  readonly apiUrl: (server: FaultServer.Service) => string
  /** Its language model, its client on the HttpClient in context. */
  readonly model: (apiUrl: string, transformClient?: TransformClient) => Layer.Layer<
    LanguageModel.LanguageModel,
    never,
    HttpClient.HttpClient
  >
  /** The status the provider answers when it is overloaded. */
  readonly overloaded: number
  /** A request the provider refuses for good: a spent quota, or a spent credit balance. */
  readonly spent: FaultPlan.Fault
  readonly example: (apiUrl: string) => Effect.Effect<string, unknown>
}

const providers: ReadonlyArray<Provider> = [
  {
    name: "@effect/ai-openai 0.41.0 (Responses API)",
    apiUrl: (server) => server.url,
    model: (apiUrl, transformClient) =>
      OpenAiLanguageModel.layer({ model: "gpt-4o-mini" }).pipe(
        Layer.provide(OpenAiClient.layer({
          apiKey: Redacted.make(canary),
          apiUrl,
          ...(transformClient === undefined ? {} : { transformClient })
        }))
      ),
    overloaded: 503,
    spent: { _tag: "Status", status: 429, code: "insufficient_quota" },
    example: haikuFromOpenAi
  },
  {
    name: "@effect/ai-anthropic 0.27.0 (Messages API)",
    apiUrl: (server) => server.origin,
    model: (apiUrl, transformClient) =>
      AnthropicLanguageModel.layer({ model: "claude-sonnet-4-5", config: { max_tokens: 256 } }).pipe(
        Layer.provide(AnthropicClient.layer({
          apiKey: Redacted.make(canary),
          apiUrl,
          ...(transformClient === undefined ? {} : { transformClient })
        }))
      ),
    // Anthropic's own status for overloaded_error.
    overloaded: 529,
    spent: { _tag: "Status", status: 402, type: "billing_error", message: "Your credit balance is too low" },
    example: haikuFromAnthropic
  }
]

const prompt = "Say hello"

/** The provider's model on the resilient client for `target`, over the Node client. */
const resilientModel = (
  provider: Provider,
  server: FaultServer.Service,
  target: Effect.Effect<Target.Target, unknown>,
  transformClient?: TransformClient
) =>
  provider.model(provider.apiUrl(server), transformClient).pipe(
    Layer.provide(ResilientHttpClient.layer(target)),
    Layer.provide(NodeHttpClient.layerUndici),
    Layer.orDie
  )

/** The status of the provider's error response the SDK failed with; anything else fails the test. */
const statusOf = (error: AiError.AiError): number => {
  assert.strictEqual(error._tag, "HttpResponseError", `expected an HttpResponseError, got ${error.message}`)
  return (error as AiError.HttpResponseError).response.status
}

for (const provider of providers) {
  describe(`@effect/ai 0.37.0 with ${provider.name} on ResilientHttpClient`, () => {
    it.scopedLive("an overloaded provider is retried by the policy up to the attempt ceiling, under one key", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: provider.overloaded } })
        const target = targetAt(provider.apiUrl(server), { maxAttempts: 3 })
        const error = yield* Effect.flip(
          LanguageModel.generateText({ prompt }).pipe(Effect.provide(resilientModel(provider, server, target)))
        )
        // The SDK judges the provider's last answer as it always does.
        assert.strictEqual(statusOf(error), provider.overloaded)
        const arrivals = yield* server.arrivals
        assert.strictEqual(arrivals.length, 3)
        assertOneIdempotencyKey(arrivals)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scopedLive("the budget bounds them: a budget that grants nothing sends one request", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: provider.overloaded } })
        const target = targetAt(provider.apiUrl(server), { maxAttempts: 5 })
        yield* Effect.flip(
          LanguageModel.generateText({ prompt }).pipe(Effect.provide(resilientModel(provider, server, target)))
        )
        assert.strictEqual((yield* server.arrivals).length, 1)
      }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.disabled })), Effect.provide(quiet)))

    it.scopedLive("the provider's retry-after-ms is honoured, then the answer reaches the SDK", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({
          steps: [{ _tag: "Status", status: 429, retryAfterMs: "300" }, { _tag: "Ok" }]
        })
        const target = targetAt(provider.apiUrl(server))
        const response = yield* LanguageModel.generateText({ prompt }).pipe(
          Effect.provide(resilientModel(provider, server, target))
        )
        assert.strictEqual(response.text, FaultServer.replyText)
        const [first, second] = yield* server.arrivals
        assert.isAtLeast(second!.at - first!.at, 300)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scopedLive("a 400 and a spent account are one request each, each the SDK's own error", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 400 }, provider.spent] })
        const model = resilientModel(provider, server, targetAt(provider.apiUrl(server)))
        const call = Effect.flip(LanguageModel.generateText({ prompt }))
        const [bad, spent] = yield* Effect.all([call, call]).pipe(Effect.provide(model))
        assert.strictEqual(statusOf(bad), 400)
        assert.strictEqual(statusOf(spent), provider.spent._tag === "Status" ? provider.spent.status : 0)
        assert.strictEqual((yield* server.arrivals).length, 2)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scoped("interrupting the call during the backoff's sleep ends it at once, and no other request is sent", () =>
      Effect.gen(function*() {
        // The sleep is on the TestClock, which never moves by itself: only the interruption can end it.
        const server = yield* FaultServer.make({
          otherwise: { _tag: "Status", status: provider.overloaded, retryAfter: "5" }
        })
        const target = targetAt(provider.apiUrl(server))
        const call = yield* Effect.fork(
          LanguageModel.generateText({ prompt }).pipe(Effect.provide(resilientModel(provider, server, target)))
        )
        yield* untilSleeping(5_000)
        const exit = yield* Fiber.interrupt(call)
        assert.isTrue(Exit.isInterrupted(exit))
        yield* TestClock.adjust("1 minute")
        assert.strictEqual((yield* server.arrivals).length, 1)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scopedLive("a stream is retried before its first chunk (an error event as the first is none), never after", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({
          steps: [
            { _tag: "Status", status: provider.overloaded },
            // Overloaded after accepting the stream: the error is its first event.
            { _tag: "StreamError", afterChunks: 0 },
            { _tag: "StreamBreak", afterChunks: 4 }
          ]
        })
        const target = targetAt(provider.apiUrl(server))
        const received: Array<string> = []
        const exit = yield* LanguageModel.streamText({ prompt }).pipe(
          Stream.runForEach((part) => Effect.sync(() => received.push(part.type))),
          Effect.provide(resilientModel(provider, server, target)),
          Effect.exit
        )
        assert.isTrue(Exit.isFailure(exit), "the break after the first chunks reaches the SDK")
        assert.isAtLeast(received.length, 1, "the first chunks reached the SDK")
        // The 503 and the error event that reached nobody were retried; the break was not.
        assert.strictEqual((yield* server.arrivals).length, 3)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

    it.scopedLive("a retry layer left above the resilient client is noticed: one warning per target, and a counter", () =>
      Effect.gen(function*() {
        const logs = yield* captureLogs
        // A 500: `retryTransient` does not know Anthropic's 529.
        const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 500 } })
        const target = yield* targetAt(provider.apiUrl(server), { maxAttempts: 1 })
        // What a user writes to make the SDK retry: its requests come back through the resilient client.
        const retrying: TransformClient = (client) =>
          client.pipe(HttpClient.filterStatusOk, HttpClient.retryTransient({ times: 2 }))
        yield* Effect.flip(
          LanguageModel.generateText({ prompt }).pipe(
            Effect.provide(resilientModel(provider, server, Effect.succeed(target), retrying)),
            Effect.provide(logs.layer)
          )
        )
        assert.strictEqual((yield* server.arrivals).length, 3)
        assert.strictEqual(yield* sdkRetriesOf(target), 2)
        const warnings = (yield* logs.lines).filter((line) =>
          line.message.includes("retries this target's calls itself")
        )
        assert.strictEqual(warnings.length, 1)
      }).pipe(Effect.provide(Coordination.layerMemory)))

    it.scopedLive("the README's set-up: the answer after an overload, through the resilient client", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({
          steps: [{ _tag: "Status", status: provider.overloaded, retryAfterMs: "1" }, { _tag: "Ok" }]
        })
        assert.strictEqual(yield* provider.example(provider.apiUrl(server)), FaultServer.replyText)
        assert.strictEqual((yield* server.arrivals).length, 2)
      }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))
  })
}
