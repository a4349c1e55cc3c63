import { assert, describe, it } from "@effect/vitest"
import { FaultServer } from "@resilient-ai/testing"
import { FaultServerBody } from "@resilient-ai/testing/internal"
import { Effect } from "effect"
import OpenAI from "openai"

const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [{ role: "user", content: "Say hello" }]

const clientFor = (server: FaultServer.Service) => new OpenAI({ apiKey: "test", baseURL: server.url, maxRetries: 0 })

/** The SDK's rejection, as a value. */
const rejection = <A>(f: () => Promise<A>) => Effect.flip(Effect.tryPromise({ try: f, catch: (error) => error }))

describe("the official OpenAI SDK against the fault server", () => {
  it.live("reads a chat completion with its choices and usage", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const completion: OpenAI.Chat.ChatCompletion = yield* Effect.promise(() =>
        clientFor(server).chat.completions.create({ model: "mistral-small-latest", messages })
      )
      assert.strictEqual(completion.id, "chatcmpl-fault000001")
      assert.strictEqual(completion.object, "chat.completion")
      assert.strictEqual(completion.model, "mistral-small-latest")
      assert.strictEqual(completion.choices.length, 1)
      const [choice] = completion.choices
      assert.strictEqual(choice!.index, 0)
      assert.strictEqual(choice!.finish_reason, "stop")
      assert.deepStrictEqual(choice!.message, { role: "assistant", content: FaultServer.replyText, refusal: null })
      assert.deepStrictEqual(completion.usage, { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 })
      const [arrival] = yield* server.arrivals
      assert.strictEqual(arrival!.path, "/v1/chat/completions")
      assert.strictEqual(arrival!.headers["authorization"], "Bearer test")
      assert.deepStrictEqual(arrival!.body, { model: "mistral-small-latest", messages })
    })))

  it.live("iterates a streamed completion to the end and gets the content and usage", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const chunks = yield* Effect.promise(async () => {
        const stream = await clientFor(server).chat.completions.create({
          model: "gpt-4o-mini",
          messages,
          stream: true,
          stream_options: { include_usage: true }
        })
        const all: Array<OpenAI.Chat.ChatCompletionChunk> = []
        for await (const chunk of stream) all.push(chunk)
        return all
      })
      assert.strictEqual(chunks.length, 7)
      assert.strictEqual(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join(""), FaultServer.replyText)
      assert.strictEqual(chunks[0]!.choices[0]!.delta.role, "assistant")
      assert.strictEqual(chunks[5]!.choices[0]!.finish_reason, "stop")
      assert.deepStrictEqual(chunks[6]!.choices, [])
      assert.deepStrictEqual(chunks[6]!.usage, { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 })
      for (const chunk of chunks) assert.strictEqual(chunk.id, "chatcmpl-fault000001")
    })))

  it.live("reads embeddings: the SDK asks for base64 by default and decodes our float32 vectors", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const client = clientFor(server)
      const response: OpenAI.CreateEmbeddingResponse = yield* Effect.promise(() =>
        client.embeddings.create({ model: "text-embedding-3-small", input: ["alpha", "beta gamma"] })
      )
      assert.strictEqual(response.object, "list")
      assert.strictEqual(response.model, "text-embedding-3-small")
      assert.deepStrictEqual(response.data.map((item) => [item.object, item.index]), [["embedding", 0], [
        "embedding",
        1
      ]])
      assert.deepStrictEqual(response.data[0]!.embedding, FaultServerBody.embedding("alpha"))
      assert.deepStrictEqual(response.data[1]!.embedding, FaultServerBody.embedding("beta gamma"))
      assert.deepStrictEqual(response.usage, { prompt_tokens: 5, total_tokens: 5 })
      const floats = yield* Effect.promise(() =>
        client.embeddings.create({ model: "e", input: "alpha", encoding_format: "float", dimensions: 4 })
      )
      assert.deepStrictEqual(floats.data[0]!.embedding, FaultServerBody.embedding("alpha", 4))
      const bodies = (yield* server.arrivals).map((arrival) => arrival.body)
      assert.deepStrictEqual(bodies, [
        { model: "text-embedding-3-small", input: ["alpha", "beta gamma"], encoding_format: "base64" },
        { model: "e", input: "alpha", encoding_format: "float", dimensions: 4 }
      ])
    })))

  it.live("surfaces the rate-limit fixture as RateLimitError with its code, type and hints", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Fixture", name: "rateLimited" }] })
      const error = yield* rejection(() => clientFor(server).chat.completions.create({ model: "m", messages }))
      assert.instanceOf(error, OpenAI.RateLimitError)
      const rateLimited = error as InstanceType<typeof OpenAI.RateLimitError>
      assert.strictEqual(rateLimited.status, 429)
      assert.strictEqual(rateLimited.code, "rate_limit_exceeded")
      assert.strictEqual(rateLimited.type, "requests")
      assert.strictEqual(rateLimited.requestID, "req_7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b")
      assert.strictEqual(rateLimited.headers?.get("retry-after-ms"), "2000")
    })))

  it.live("maps quota, model and auth fixtures to APIError subclasses carrying the provider code", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [
          { _tag: "Fixture", name: "quotaExhausted" },
          { _tag: "Fixture", name: "modelNotFound" },
          { _tag: "Fixture", name: "auth" },
          { _tag: "Fixture", name: "modelNotFound503" }
        ]
      })
      const client = clientFor(server)
      const errors = []
      for (let i = 0; i < 4; i++) {
        errors.push(yield* rejection(() => client.chat.completions.create({ model: "m", messages })))
      }
      const [quota, model, auth, gateway] = errors as Array<InstanceType<typeof OpenAI.APIError>>
      assert.instanceOf(quota, OpenAI.RateLimitError)
      assert.deepStrictEqual([quota!.status, quota!.code], [429, "insufficient_quota"])
      assert.instanceOf(model, OpenAI.NotFoundError)
      assert.deepStrictEqual([model!.status, model!.code], [404, "model_not_found"])
      assert.instanceOf(auth, OpenAI.AuthenticationError)
      assert.deepStrictEqual([auth!.status, auth!.code], [401, "invalid_api_key"])
      assert.instanceOf(gateway, OpenAI.InternalServerError)
      assert.deepStrictEqual([gateway!.status, gateway!.code], [503, "model_not_found"])
    })))

  it.live("cannot read a code from Mistral's unwrapped error body", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Fixture", name: "rateLimitedMistral" }] })
      const error = yield* rejection(() => clientFor(server).chat.completions.create({ model: "m", messages }))
      assert.instanceOf(error, OpenAI.RateLimitError)
      const rateLimited = error as InstanceType<typeof OpenAI.RateLimitError>
      assert.strictEqual(rateLimited.status, 429)
      assert.isUndefined(rateLimited.code)
      assert.strictEqual(rateLimited.message, "429 status code (no body)")
    })))

  it.live("sees a reset as APIConnectionError, a stall past its timeout as APIConnectionTimeoutError", () =>
    Effect.scoped(Effect.gen(function*() {
      // Only the stalled request has the short timeout: on a busy machine 80 ms can pass before any
      // answer, and the stall never ends, so only the timeout can end it.
      const server = yield* FaultServer.make({
        steps: [{ _tag: "ResetHeaders" }, { _tag: "StallHeaders", ms: FaultServer.never }, { _tag: "HtmlError" }]
      })
      const client = clientFor(server)
      const reset = yield* rejection(() => client.chat.completions.create({ model: "m", messages }))
      assert.instanceOf(reset, OpenAI.APIConnectionError)
      assert.notInstanceOf(reset, OpenAI.APIConnectionTimeoutError)
      const stalled = yield* rejection(() => client.chat.completions.create({ model: "m", messages }, { timeout: 80 }))
      assert.instanceOf(stalled, OpenAI.APIConnectionTimeoutError)
      const html = yield* rejection(() => client.chat.completions.create({ model: "m", messages }))
      assert.instanceOf(html, OpenAI.InternalServerError)
      assert.strictEqual((html as InstanceType<typeof OpenAI.APIError>).status, 502)
      const arrivals = yield* server.arrivals
      assert.deepStrictEqual(arrivals.map((arrival) => [arrival.fault, arrival.aborted]), [
        ["ResetHeaders", false],
        ["StallHeaders", true],
        ["HtmlError", false]
      ])
    })))

  it.live("passes a contract break through unvalidated, which is why the client must decode", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "SchemaBreak" }] })
      const completion = yield* Effect.promise(() =>
        clientFor(server).chat.completions.create({ model: "m", messages })
      )
      assert.isUndefined(completion.choices)
      assert.strictEqual(completion.usage?.prompt_tokens as unknown, "12")
    })))
})
