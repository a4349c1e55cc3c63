import { either } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { EffectLine, Either } from "@resilient-ai/policy/internal"
import { FaultPlan, FaultServer } from "@resilient-ai/testing"
import { FaultServerBody, Fixtures } from "@resilient-ai/testing/internal"
import { Effect, Exit, Fiber, Scope } from "effect"
import * as Net from "node:net"
import { performance } from "node:perf_hooks"
import { eventually, patienceMillis, settled } from "../client/support.js"
import { type FetchFailure, json, post, readUntil, resetCodes, text } from "./support.js"

const chat = { model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello" }] }
const chatStream = { ...chat, stream: true }

const status = (server: FaultServer.Service, body: unknown = chat) =>
  Effect.map(Effect.orDie(post(server, "/chat/completions", body)), (response) => response.status)

/** The `data:` payloads of an SSE body, in order. */
const events = (body: string): ReadonlyArray<string> =>
  body.split("\n\n").filter((event) => event !== "").map((event) => {
    assert.isTrue(event.startsWith("data: "), event)
    return event.slice("data: ".length)
  })

const now = Effect.sync(() => performance.now())

/** Runs `self` and how long it took, in real milliseconds. */
const timed = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = yield* now
    const value = yield* self
    return [value, (yield* now) - start] as const
  })

const headersOf = (response: Response): Record<string, string> => Object.fromEntries(response.headers.entries())

describe("FaultServer Ok", () => {
  it.live("answers a chat completion as OpenAI does, echoing the model", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      assert.strictEqual(server.url, `http://127.0.0.1:${server.port}/v1`)
      const response = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "application/json")
      assert.strictEqual(response.headers.get("x-request-id"), "req_fault000001")
      const body = yield* json(response)
      assert.deepStrictEqual(body, {
        id: "chatcmpl-fault000001",
        object: "chat.completion",
        created: body.created,
        model: "gpt-4o-mini",
        choices: [{
          index: 0,
          message: { role: "assistant", content: "The fault server answered.", refusal: null },
          logprobs: null,
          finish_reason: "stop"
        }],
        usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }
      })
      assert.isTrue(Number.isInteger(body.created) && Math.abs(body.created - Date.now() / 1000) < 5)
    })))

  it.live("streams server-sent events: role, content deltas, finish_reason stop, then [DONE]", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const response = yield* post(server, "/chat/completions", chatStream)
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "text/event-stream; charset=utf-8")
      assert.strictEqual(response.headers.get("cache-control"), "no-cache")
      const data = events(yield* text(response))
      assert.strictEqual(data.at(-1), "[DONE]")
      const chunks = data.slice(0, -1).map((chunk) => JSON.parse(chunk))
      const base = {
        id: "chatcmpl-fault000001",
        object: "chat.completion.chunk",
        created: chunks[0].created,
        model: "gpt-4o-mini"
      }
      const choice = (delta: object, finish_reason: string | null) => ({
        ...base,
        choices: [{ index: 0, delta, logprobs: null, finish_reason }]
      })
      assert.deepStrictEqual(chunks, [
        choice({ role: "assistant", content: "" }, null),
        choice({ content: "The" }, null),
        choice({ content: " fault" }, null),
        choice({ content: " server" }, null),
        choice({ content: " answered." }, null),
        choice({}, "stop")
      ])
    })))

  it.live("adds usage in a last chunk with empty choices when stream_options.include_usage is set", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const response = yield* post(server, "/chat/completions", {
        ...chatStream,
        stream_options: { include_usage: true }
      })
      const data = events(yield* text(response))
      assert.strictEqual(data.length, 8)
      assert.strictEqual(data[7], "[DONE]")
      const chunks = data.slice(0, -1).map((chunk) => JSON.parse(chunk))
      for (const chunk of chunks.slice(0, 6)) assert.strictEqual(chunk.usage, null)
      assert.strictEqual(chunks[5].choices[0].finish_reason, "stop")
      assert.deepStrictEqual(chunks[6].choices, [])
      assert.deepStrictEqual(chunks[6].usage, { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 })
    })))

  it.live("answers embeddings with one deterministic unit vector per input, 8 dimensions by default", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const response = yield* post(server, "/embeddings", {
        model: "mistral-embed",
        input: ["first text", "second"]
      })
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "application/json")
      const body = yield* json(response)
      assert.deepStrictEqual(body, {
        object: "list",
        data: [
          { object: "embedding", index: 0, embedding: FaultServerBody.embedding("first text") },
          { object: "embedding", index: 1, embedding: FaultServerBody.embedding("second") }
        ],
        model: "mistral-embed",
        usage: { prompt_tokens: 5, total_tokens: 5 }
      })
      const vector: ReadonlyArray<number> = body.data[0].embedding
      assert.strictEqual(vector.length, 8)
      assert.closeTo(Math.hypot(...vector), 1, 1e-6)
      assert.notDeepEqual(body.data[0].embedding, body.data[1].embedding)
      assert.deepStrictEqual(FaultServerBody.embedding("first text"), FaultServerBody.embedding("first text"))
    })))

  it.live("honours dimensions and answers base64 little-endian float32 for encoding_format base64", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const sized = yield* json(yield* post(server, "/embeddings", { model: "e", input: "abc", dimensions: 3 }))
      assert.deepStrictEqual(sized.data[0].embedding, FaultServerBody.embedding("abc", 3))
      assert.strictEqual(sized.data[0].embedding.length, 3)
      const encoded = yield* json(
        yield* post(server, "/embeddings", { model: "e", input: "abc", encoding_format: "base64" })
      )
      const base64: string = encoded.data[0].embedding
      assert.strictEqual(base64, FaultServerBody.toBase64(FaultServerBody.embedding("abc")))
      const bytes = Buffer.from(base64, "base64")
      assert.strictEqual(bytes.length, 32)
      const decoded = Array.from({ length: 8 }, (_, i) => bytes.readFloatLE(i * 4))
      assert.deepStrictEqual(decoded, FaultServerBody.embedding("abc"))
    })))

  it.live("treats an array of token ids as one input", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const body = yield* json(yield* post(server, "/embeddings", { model: "e", input: [101, 2023, 102] }))
      assert.strictEqual(body.data.length, 1)
      const several = yield* json(yield* post(server, "/embeddings", { model: "e", input: [[1, 2], [3]] }))
      assert.strictEqual(several.data.length, 2)
    })))

  // A busy machine only ever adds time, so time gives lower bounds alone; which delay applies to
  // which request shows with delays that never end.
  it.live("delays an Ok by delayMs instead of the plan's latencyMs, and the other requests by latencyMs", () =>
    Effect.scoped(Effect.gen(function*() {
      const replaced = yield* FaultServer.make({ steps: [{ _tag: "Ok", delayMs: 120 }], latencyMs: FaultServer.never })
      const [first, firstMs] = yield* timed(status(replaced))
      assert.strictEqual(first, 200)
      assert.isAtLeast(firstMs, 118)
      const server = yield* FaultServer.make({ steps: [{ _tag: "Ok", delayMs: FaultServer.never }], latencyMs: 60 })
      const stalled = yield* EffectLine.fork(status(server))
      yield* eventually(Effect.map(server.arrivals, (arrivals) => arrivals.length === 1))
      const [second, secondMs] = yield* timed(status(server))
      assert.strictEqual(second, 200)
      assert.isAtLeast(secondMs, 58)
      yield* Fiber.interrupt(stalled)
    })))
})

describe("FaultServer Status", () => {
  it.live("sends an OpenAI error body with the retry headers and extra headers", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{
          _tag: "Status",
          status: 429,
          retryAfter: "1",
          retryAfterMs: "1500",
          shouldRetry: false,
          headers: { "x-ratelimit-remaining-requests": "0" }
        }]
      })
      const response = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(response.status, 429)
      const headers = headersOf(response)
      assert.strictEqual(headers["content-type"], "application/json")
      assert.strictEqual(headers["retry-after"], "1")
      assert.strictEqual(headers["retry-after-ms"], "1500")
      assert.strictEqual(headers["x-should-retry"], "false")
      assert.strictEqual(headers["x-ratelimit-remaining-requests"], "0")
      assert.deepStrictEqual(yield* json(response), {
        error: {
          message: "Rate limit reached for requests. Please try again later.",
          type: "requests",
          param: null,
          code: "rate_limit_exceeded"
        }
      })
    })))

  it.live("sends Mistral's top-level error object, the 1300 body for a 429", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 429, style: "mistral" }] })
      const response = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(response.status, 429)
      assert.isNull(response.headers.get("retry-after"))
      assert.strictEqual(
        yield* text(response),
        `{"object":"error","message":"Requests rate limit exceeded","type":"rate_limited","param":null,"code":"1300"}`
      )
    })))

  it.live("uses the code, type and message given, and null for a code not given", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [
          { _tag: "Status", status: 503, code: "model_not_found", type: "invalid_request_error", message: "gone" },
          { _tag: "Status", status: 500 },
          { _tag: "Status", status: 502, style: "mistral" },
          { _tag: "Status", status: 401, shouldRetry: true }
        ]
      })
      const first = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(first.status, 503)
      assert.deepStrictEqual(yield* json(first), {
        error: { message: "gone", type: "invalid_request_error", param: null, code: "model_not_found" }
      })
      assert.deepStrictEqual(yield* json(yield* post(server, "/chat/completions", chat)), {
        error: {
          message: "The server had an error while processing your request. Sorry about that!",
          type: "server_error",
          param: null,
          code: null
        }
      })
      assert.deepStrictEqual(yield* json(yield* post(server, "/embeddings", { model: "e", input: "x" })), {
        object: "error",
        message: "Bad Gateway",
        type: "server_error",
        param: null,
        code: null
      })
      const auth = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(auth.status, 401)
      assert.strictEqual(auth.headers.get("x-should-retry"), "true")
      assert.strictEqual((yield* json(auth)).error.code, "invalid_api_key")
    })))
})

describe("FaultServer stalls", () => {
  it.live("StallHeaders sends nothing for ms, then a normal answer", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "StallHeaders", ms: 150 }] })
      const [response, headersMs] = yield* timed(post(server, "/chat/completions", chat))
      assert.strictEqual(response.status, 200)
      assert.isAtLeast(headersMs, 148)
      assert.strictEqual((yield* json(response)).choices[0].message.content, FaultServer.replyText)
      assert.strictEqual((yield* server.arrivals)[0]!.fault, "StallHeaders")
    })))

  // What comes before the stall shows on a stall that never ends: time on a busy machine cannot
  // tell "at once" from "after ms". The finite stall gives the lower bound.
  it.live("StallBody sends the headers and half the body at once, the rest after ms", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "StallBody", ms: FaultServer.never }, { _tag: "StallBody", ms: 200 }]
      })
      const stalled = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(stalled.status, 200)
      const half = Math.floor(Number(stalled.headers.get("content-length")) / 2)
      const first = yield* readUntil(stalled, (received) => received.length >= half)
      assert.strictEqual(first.length, half)
      assert.isTrue(first.startsWith(`{"id":"chatcmpl-fault000001","object":"chat.completion",`))
      const [all, ms] = yield* timed(
        Effect.flatMap(
          Effect.orDie(post(server, "/chat/completions", chat)),
          (response) => Effect.orDie(json(response))
        )
      )
      assert.isAtLeast(ms, 198)
      assert.strictEqual(all.choices[0].message.content, FaultServer.replyText)
    })))

  it.live("StallBody on a stream sends the first event, then the rest after ms", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "StallBody", ms: FaultServer.never }, { _tag: "StallBody", ms: 150 }]
      })
      const stalled = yield* post(server, "/chat/completions", chatStream)
      const first = yield* readUntil(stalled, (received) => received.endsWith("\n\n"))
      assert.strictEqual(events(first).length, 1)
      assert.deepStrictEqual(JSON.parse(events(first)[0]!).choices[0].delta, { role: "assistant", content: "" })
      const [all, ms] = yield* timed(
        Effect.flatMap(
          Effect.orDie(post(server, "/chat/completions", chatStream)),
          (response) => Effect.orDie(text(response))
        )
      )
      assert.isAtLeast(ms, 148)
      assert.strictEqual(events(all).length, 7)
      assert.strictEqual(events(all).at(-1), "[DONE]")
    })))
  it.live("StallBody afterChunks sends that many events of a stream (0: the headers alone) before stalling", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [
          { _tag: "StallBody", ms: FaultServer.never, afterChunks: 0 },
          { _tag: "StallBody", ms: FaultServer.never, afterChunks: 3 },
          { _tag: "StallBody", ms: 150, afterChunks: 0 }
        ]
      })
      const headersAlone = yield* post(server, "/chat/completions", chatStream)
      assert.strictEqual(headersAlone.status, 200, "the headers came before the stall")
      const three = yield* post(server, "/chat/completions", chatStream)
      assert.strictEqual(events(yield* readUntil(three, (received) => received.split("\n\n").length > 3)).length, 3)
      const [all, ms] = yield* timed(
        Effect.flatMap(
          Effect.orDie(post(server, "/chat/completions", chatStream)),
          (response) => Effect.orDie(text(response))
        )
      )
      assert.isAtLeast(ms, 148)
      assert.strictEqual(events(all).length, 7)
    })))
})

describe("FaultServer resets and broken bodies", () => {
  it.live("ResetHeaders resets the connection after reading the request: the client sees ECONNRESET", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "ResetHeaders" }] })
      const failure = yield* Effect.flip(post(server, "/chat/completions", chat))
      assert.strictEqual(failure.name, "TypeError")
      assert.strictEqual(failure.message, "fetch failed")
      assert.strictEqual(failure.cause?.code, "ECONNRESET")
      const [arrival] = yield* server.arrivals
      assert.strictEqual(arrival!.fault, "ResetHeaders")
      assert.deepStrictEqual(arrival!.body, chat)
      assert.isFalse(arrival!.aborted)
    })))

  it.live("ResetBody sends the headers and half the body, then resets", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "ResetBody" }] })
      const response = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(response.status, 200)
      const length = Number(response.headers.get("content-length"))
      const reader = response.body!.getReader()
      let received = ""
      const failure = yield* Effect.flip(Effect.tryPromise({
        try: async () => {
          for (;;) {
            const next = await reader.read()
            if (next.done) return
            received += new TextDecoder().decode(next.value)
          }
        },
        catch: (error) => error as FetchFailure
      }))
      assert.strictEqual(failure.message, "terminated")
      assert.oneOf(failure.cause?.code, resetCodes)
      assert.strictEqual(received.length, Math.floor(length / 2))
      assert.isTrue(received.startsWith(`{"id":"chatcmpl-fault000001","object":"chat.completion",`))
      assert.isFalse((yield* server.arrivals)[0]!.aborted)
    })))

  it.live("StreamBreak sends afterChunks events and resets, with no [DONE]", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "StreamBreak", afterChunks: 2 }, { _tag: "StreamBreak", afterChunks: 0 }]
      })
      const response = yield* post(server, "/chat/completions", chatStream)
      assert.strictEqual(response.status, 200)
      const reader = response.body!.getReader()
      let received = ""
      const failure = yield* Effect.flip(Effect.tryPromise({
        try: async () => {
          for (;;) {
            const next = await reader.read()
            if (next.done) return
            received += new TextDecoder().decode(next.value)
          }
        },
        catch: (error) => error as FetchFailure
      }))
      assert.oneOf(failure.cause?.code, resetCodes)
      const data = events(received).map((chunk) => JSON.parse(chunk))
      assert.deepStrictEqual(data.map((chunk) => chunk.choices[0].delta), [{ role: "assistant", content: "" }, {
        content: "The"
      }])
      const empty = yield* post(server, "/chat/completions", chatStream)
      assert.strictEqual(empty.status, 200)
      assert.oneOf((yield* Effect.flip(text(empty))).cause?.code, resetCodes)
    })))

  it.live("StreamBreak on a request that did not ask to stream resets the body", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "StreamBreak", afterChunks: 3 }] })
      const response = yield* post(server, "/embeddings", { model: "e", input: "x" })
      assert.strictEqual(response.status, 200)
      assert.oneOf((yield* Effect.flip(text(response))).cause?.code, resetCodes)
    })))

  it.live("TruncatedJson ends a chunked 200 normally with half the JSON", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "TruncatedJson" }, { _tag: "TruncatedJson" }] })
      const response = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "application/json")
      assert.strictEqual(response.headers.get("transfer-encoding"), "chunked")
      assert.isNull(response.headers.get("content-length"))
      const body = yield* text(response)
      assert.isTrue(body.startsWith(`{"id":"chatcmpl-fault000001","object":"chat.completion",`))
      assert.throws(() => JSON.parse(body), SyntaxError)
      const streamed = yield* post(server, "/chat/completions", chatStream)
      assert.strictEqual(streamed.headers.get("content-type"), "application/json")
      const streamedBody = yield* text(streamed)
      assert.isTrue(streamedBody.startsWith(`{"id":"chatcmpl-fault000002","object":"chat.completion",`))
      assert.throws(() => JSON.parse(streamedBody), SyntaxError)
    })))

  it.live("SchemaBreak sends valid JSON that breaks the contract", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "SchemaBreak" } })
      const completion = yield* json(yield* post(server, "/chat/completions", chat))
      assert.deepStrictEqual(completion, {
        id: "chatcmpl-fault000001",
        object: "chat.completion",
        created: completion.created,
        model: "gpt-4o-mini",
        usage: { prompt_tokens: "12", completion_tokens: 4, total_tokens: 16 }
      })
      const embeddings = yield* json(yield* post(server, "/embeddings", { model: "e", input: "x" }))
      assert.deepStrictEqual(embeddings, { object: "list", model: "e", usage: { prompt_tokens: "3", total_tokens: 3 } })
      const stream = events(yield* text(yield* post(server, "/chat/completions", chatStream)))
      assert.strictEqual(stream.length, 2)
      assert.isUndefined(JSON.parse(stream[0]!).choices)
      assert.strictEqual(stream[1], "[DONE]")
    })))

  it.live("HtmlError sends a proxy's HTML page, 502 unless told", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "HtmlError" }, { _tag: "HtmlError", status: 504 }] })
      const first = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(first.status, 502)
      assert.strictEqual(first.headers.get("content-type"), "text/html")
      assert.strictEqual(
        yield* text(first),
        "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n" +
          "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"
      )
      const second = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(second.status, 504)
      assert.include(yield* text(second), "<title>504 Gateway Timeout</title>")
    })))

  it.live("Fixture serves every recorded response verbatim", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: Fixtures.fixtureNames.map((name) => ({ _tag: "Fixture" as const, name }))
      })
      for (const name of Fixtures.fixtureNames) {
        const fixture = Fixtures.fixtures[name]
        const response = yield* post(server, "/chat/completions", chat)
        assert.strictEqual(response.status, fixture.status, name)
        const headers = headersOf(response)
        for (const [header, value] of Object.entries(fixture.headers)) assert.strictEqual(headers[header], value, name)
        assert.strictEqual(headers["content-length"], String(Buffer.byteLength(fixture.body)), name)
        assert.strictEqual(yield* text(response), fixture.body, name)
      }
      const arrivals = yield* server.arrivals
      assert.deepStrictEqual(arrivals.map((arrival) => arrival.fault), Fixtures.fixtureNames.map(() => "Fixture"))
    })))
})

describe("FaultServer Raw and Close", () => {
  it.live("Raw sends the status, headers and body given, the body repeated, with its length", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [
          { _tag: "Raw", headers: { "content-type": "text/plain" }, body: "ab", repeat: 3 },
          { _tag: "Raw", status: 502, bodyBase64: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]).toString("base64") },
          { _tag: "Raw" }
        ]
      })
      const plain = yield* Effect.orDie(post(server, "/chat/completions", chat))
      assert.strictEqual(plain.status, 200)
      assert.strictEqual(plain.headers.get("content-type"), "text/plain")
      assert.strictEqual(plain.headers.get("content-length"), "6")
      assert.strictEqual(yield* Effect.orDie(text(plain)), "ababab")
      const bytes = yield* Effect.orDie(post(server, "/chat/completions", chat))
      assert.strictEqual(bytes.status, 502)
      const raw = yield* Effect.promise(() => bytes.arrayBuffer())
      assert.deepStrictEqual([...new Uint8Array(raw)], [0x7b, 0xff, 0xfe, 0x7d])
      const empty = yield* Effect.orDie(post(server, "/chat/completions", chat))
      assert.strictEqual(empty.status, 200)
      assert.strictEqual(yield* Effect.orDie(text(empty)), "")
      assert.deepStrictEqual((yield* server.arrivals).map((a) => a.fault), ["Raw", "Raw", "Raw"])
    })))

  it.live("Close ends the connection without a response, and it is not the client's abort", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Close" }] })
      const failure = yield* Effect.flip(post(server, "/chat/completions", chat))
      assert.strictEqual(failure.message, "fetch failed")
      assert.strictEqual(failure.cause?.code, "UND_ERR_SOCKET")
      const [arrival] = yield* server.arrivals
      assert.strictEqual(arrival!.fault, "Close")
      assert.isFalse(arrival!.aborted)
      assert.strictEqual(yield* settled(server.openConnections, (n) => n === 0), 0)
    })))

  it.live("counts the connections it accepted and those still open", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      assert.deepStrictEqual([yield* server.openConnections, yield* server.connectionsAccepted], [0, 0])
      const socket = yield* EffectLine.callback<Net.Socket>((resume) => {
        const opened = Net.connect(server.port, "127.0.0.1", () => resume(Effect.succeed(opened)))
      })
      assert.strictEqual(yield* settled(server.openConnections, (n) => n === 1), 1)
      socket.destroy()
      assert.strictEqual(yield* settled(server.openConnections, (n) => n === 0), 0)
      assert.strictEqual(yield* server.connectionsAccepted, 1)
    })))
})

describe("FaultServer plan", () => {
  it.live("consumes steps in arrival order, then applies otherwise", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 500 }, { _tag: "Status", status: 503 }, { _tag: "Ok" }],
        otherwise: { _tag: "Status", status: 429 }
      })
      const statuses = []
      for (let i = 0; i < 5; i++) statuses.push(yield* status(server))
      assert.deepStrictEqual(statuses, [500, 503, 200, 429, 429])
      assert.deepStrictEqual((yield* server.arrivals).map((arrival) => arrival.fault), [
        "Status",
        "Status",
        "Ok",
        "Status",
        "Status"
      ])
    })))

  it.live("answers Ok once the steps run out when there is no otherwise", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 500 }] })
      assert.deepStrictEqual([yield* status(server), yield* status(server), yield* status(server)], [500, 200, 200])
    })))

  it.live("applies windows by time since start, and setPlan restarts steps and the window clock", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        windows: [
          { fromMs: 0, toMs: 100, fault: { _tag: "Status", status: 503 } },
          { fromMs: 100, toMs: 200, fault: { _tag: "Status", status: 500 } }
        ]
      })
      const early = yield* status(server)
      yield* Effect.sleep(120)
      const middle = yield* status(server)
      yield* Effect.sleep(100)
      const late = yield* status(server)
      // On a quiet machine that is 503, 500, 200; a busy one may hold a request into the next window.
      // Each answer is the one for the time the server recorded the request's arrival.
      const windowAt = (at: number) => at < 100 ? 503 : at < 200 ? 500 : 200
      assert.deepStrictEqual([early, middle, late], (yield* server.arrivals).map((arrival) => windowAt(arrival.at)))
      // The window counts from setPlan when a request sent within 100 ms of it meets it: counted from
      // the server's start (220 ms and more ago), it would be over. Requests slower than that prove
      // nothing, and setting the plan again starts the clock again for another try.
      const afterSetPlan = Effect.gen(function*() {
        const start = yield* now
        yield* server.setPlan({
          steps: [{ _tag: "Status", status: 400 }],
          windows: [{ fromMs: 0, toMs: 100, fault: { _tag: "Status", status: 502 } }]
        })
        const answers = [yield* status(server), yield* status(server)]
        return (yield* now) - start < 100 ? answers : undefined
      })
      let answers: Array<number> | undefined
      for (let tries = 0; tries < 50 && answers === undefined; tries++) answers = yield* afterSetPlan
      assert.deepStrictEqual(answers, [400, 502], "the steps and the window start again with the plan")
    })))

  it.live("draws window shares from a seeded PRNG, so the same plan gives the same decisions", () =>
    Effect.scoped(Effect.gen(function*() {
      const plan = (seed: number): FaultPlan.Plan => ({
        seed,
        windows: [{ fromMs: 0, toMs: 60_000, fault: { _tag: "Status", status: 503 }, share: 0.5 }]
      })
      const decisions = (server: FaultServer.Service) =>
        Effect.gen(function*() {
          const statuses: Array<number> = []
          for (let i = 0; i < 16; i++) statuses.push(yield* status(server))
          return statuses
        })
      const first = yield* FaultServer.make(plan(42))
      const second = yield* FaultServer.make(plan(42))
      const once = yield* decisions(first)
      assert.deepStrictEqual(once, [
        200,
        503,
        200,
        200,
        503,
        200,
        503,
        200,
        200,
        503,
        503,
        200,
        200,
        503,
        503,
        200
      ])
      assert.deepStrictEqual(yield* decisions(second), once)
      yield* first.setPlan(plan(42))
      assert.deepStrictEqual(yield* decisions(first), once)
      yield* first.setPlan(plan(7))
      assert.notDeepEqual(yield* decisions(first), once)
      yield* first.setPlan({ windows: [{ fromMs: 0, toMs: 60_000, fault: { _tag: "Status", status: 503 }, share: 0 }] })
      assert.deepStrictEqual(yield* decisions(first), Array.from({ length: 16 }, () => 200))
    })))

  it.live("refuses requests beyond capacity at once with 503, OpenAI-style", () =>
    Effect.scoped(Effect.gen(function*() {
      // The admitted requests never end, so the refusals cannot have waited for them.
      const server = yield* FaultServer.make({
        capacity: { concurrent: 2 },
        otherwise: { _tag: "Ok", delayMs: FaultServer.never }
      })
      const admitted = new AbortController()
      const answered: Array<readonly [number, unknown]> = []
      const call = post(server, "/chat/completions", chat, { signal: admitted.signal }).pipe(
        Effect.flatMap((response) => Effect.map(json(response), (body) => void answered.push([response.status, body]))),
        either
      )
      const fibers = yield* Effect.forEach(Array.from({ length: 4 }, () => call), EffectLine.fork)
      yield* eventually(Effect.sync(() => answered.length === 2), patienceMillis, "two requests were answered")
      assert.strictEqual(yield* server.inFlight, 2)
      for (const [status, body] of answered) {
        assert.strictEqual(status, 503)
        assert.deepStrictEqual(body, {
          error: {
            message: "The server is at capacity (2 requests in flight). Please try again later.",
            type: "overloaded",
            param: null,
            code: null
          }
        })
      }
      const faults = (yield* server.arrivals).map((arrival) => arrival.fault).sort()
      assert.deepStrictEqual(faults, ["Ok", "Ok", "Status", "Status"])
      admitted.abort()
      const outcomes = yield* Effect.forEach(fibers, Fiber.join)
      assert.deepStrictEqual(
        outcomes.map((outcome) => Either.isLeft(outcome) ? Either.leftOf(outcome).name : "answered").sort(),
        ["AbortError", "AbortError", "answered", "answered"]
      )
      // Leaving frees an admitted request's place.
      assert.strictEqual(yield* settled(server.inFlight, (n) => n === 0), 0)
      yield* server.setPlan({ capacity: { concurrent: 2 } })
      assert.strictEqual(yield* status(server), 200)
    })))

  it.live("capacity can answer 429 with a Retry-After", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        capacity: { concurrent: 0, status: 429, retryAfter: "3" }
      })
      const response = yield* post(server, "/chat/completions", chat)
      assert.strictEqual(response.status, 429)
      assert.strictEqual(response.headers.get("retry-after"), "3")
      assert.strictEqual((yield* json(response)).error.type, "rate_limited")
    })))
})

describe("FaultServer arrivals", () => {
  it.live("records method, path, lower-case headers, body and the fault served", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 500 }] })
      yield* post(server, "/chat/completions?api-version=1", chat, {
        headers: { "Authorization": "Bearer sk-test", "Idempotency-Key": "key-1" }
      })
      yield* post(server, "/embeddings", { model: "e", input: "x" }, { headers: { "Idempotency-Key": "key-2" } })
      const arrivals = yield* server.arrivals
      assert.strictEqual(arrivals.length, 2)
      const [first, second] = arrivals
      assert.strictEqual(first!.index, 0)
      assert.strictEqual(first!.method, "POST")
      assert.strictEqual(first!.path, "/v1/chat/completions")
      assert.strictEqual(first!.headers["authorization"], "Bearer sk-test")
      assert.strictEqual(first!.headers["idempotency-key"], "key-1")
      assert.strictEqual(first!.headers["content-type"], "application/json")
      assert.deepStrictEqual(first!.body, chat)
      assert.strictEqual(first!.fault, "Status")
      assert.isFalse(first!.aborted)
      assert.deepStrictEqual(
        { index: second!.index, path: second!.path, body: second!.body, fault: second!.fault },
        { index: 1, path: "/v1/embeddings", body: { model: "e", input: "x" }, fault: "Ok" }
      )
      assert.strictEqual(second!.headers["idempotency-key"], "key-2")
      assert.isTrue(first!.at >= 0 && second!.at >= first!.at)
      yield* server.clearArrivals
      assert.deepStrictEqual(yield* server.arrivals, [])
      yield* post(server, "/embeddings", { model: "e", input: "x" })
      assert.strictEqual((yield* server.arrivals)[0]!.index, 0)
    })))

  it.live("marks an arrival aborted when the client gives up during a stall", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "StallHeaders", ms: FaultServer.never }, { _tag: "StallBody", ms: FaultServer.never }]
      })
      const controller = new AbortController()
      const fiber = yield* EffectLine.fork(
        Effect.flip(post(server, "/chat/completions", chat, { signal: controller.signal }))
      )
      yield* eventually(Effect.map(server.inFlight, (n) => n === 1), patienceMillis, "the request is in flight")
      controller.abort()
      const failure = yield* Fiber.await(fiber).pipe(Effect.flatMap((exit) => exit))
      assert.strictEqual(failure.name, "AbortError")
      const [arrival] = yield* settled(server.arrivals, (arrivals) => arrivals[0]?.aborted === true)
      assert.isTrue(arrival!.aborted)
      assert.strictEqual(arrival!.fault, "StallHeaders")
      assert.strictEqual(yield* settled(server.inFlight, (n) => n === 0), 0)

      const midBody = new AbortController()
      const response = yield* post(server, "/chat/completions", chat, { signal: midBody.signal })
      assert.strictEqual(response.status, 200)
      midBody.abort()
      const arrivals = yield* settled(server.arrivals, (arrivals) => arrivals[1]?.aborted === true)
      assert.deepStrictEqual(arrivals.map((a) => [a.fault, a.aborted]), [["StallHeaders", true], ["StallBody", true]])
    })))

  it.live("answers unknown paths 404, other methods 405 and bodies that are not JSON 400", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 500 }] })
      const missing = yield* post(server, "/chat/completion", chat)
      assert.strictEqual(missing.status, 404)
      assert.deepStrictEqual(yield* json(missing), {
        error: {
          message: "Invalid URL (POST /v1/chat/completion)",
          type: "invalid_request_error",
          param: null,
          code: null
        }
      })
      const get = yield* Effect.promise(() => fetch(`${server.url}/chat/completions`))
      assert.strictEqual(get.status, 405)
      assert.strictEqual(get.headers.get("allow"), "POST")
      assert.strictEqual((yield* json(get)).error.message, "Invalid method for URL (GET /v1/chat/completions)")
      const garbled = yield* post(server, "/chat/completions", "{model: gpt")
      assert.strictEqual(garbled.status, 400)
      const error = (yield* json(garbled)).error
      assert.strictEqual(error.type, "invalid_request_error")
      assert.isTrue(error.message.startsWith("We could not parse the JSON body of your request."))
      const incomplete = yield* post(server, "/chat/completions", { model: "m" })
      assert.strictEqual(incomplete.status, 400)
      assert.deepStrictEqual(yield* json(incomplete), {
        error: {
          message: "Missing required parameter: 'messages'.",
          type: "invalid_request_error",
          param: "messages",
          code: "missing_required_parameter"
        }
      })
      const arrivals = yield* server.arrivals
      assert.deepStrictEqual(arrivals.map((a) => [a.method, a.path, a.fault]), [
        ["POST", "/v1/chat/completion", "Status"],
        ["GET", "/v1/chat/completions", "Status"],
        ["POST", "/v1/chat/completions", "Status"],
        ["POST", "/v1/chat/completions", "Status"]
      ])
      assert.strictEqual(arrivals[2]!.body, "{model: gpt")
      // None of them was the plan's to answer: its first step is still there.
      assert.strictEqual(yield* status(server), 500)
    })))
})

describe("FaultServer release", () => {
  it.live("closes every socket and the listener when the scope closes", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const server = yield* Effect.provideService(
        FaultServer.make({
          // The second stall holds a real timer, which must go with the scope; it cannot end first.
          steps: [{ _tag: "StallHeaders", ms: FaultServer.never }, { _tag: "StallHeaders", ms: 600_000 }]
        }),
        Scope.Scope,
        scope
      )
      const stalled = yield* EffectLine.fork(either(post(server, "/chat/completions", chat)))
      const timed = yield* EffectLine.fork(either(post(server, "/chat/completions", chat)))
      yield* eventually(Effect.map(server.inFlight, (n) => n === 2), patienceMillis, "both requests are in flight")
      const timers = process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length
      yield* Scope.close(scope, Exit.void)
      const left = process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length
      assert.isAtMost(left, timers - 1)
      for (const fiber of [stalled, timed]) {
        const result = yield* Fiber.await(fiber).pipe(Effect.flatMap((exit) => exit))
        assert.isTrue(Either.isLeft(result))
        if (Either.isLeft(result)) assert.strictEqual(Either.leftOf(result).message, "fetch failed")
      }
      const arrivals = yield* server.arrivals
      assert.deepStrictEqual(arrivals.map((a) => a.aborted), [false, false])
      const refused = yield* EffectLine.callback<string>((resume) => {
        const socket = Net.connect(server.port, "127.0.0.1")
        socket.on("connect", () => {
          socket.destroy()
          resume(Effect.succeed("connected"))
        })
        socket.on("error", (error: NodeJS.ErrnoException) => resume(Effect.succeed(error.code ?? "unknown")))
      })
      assert.strictEqual(refused, "ECONNREFUSED")
    }))
})

describe("FaultPlan.decode", () => {
  it.effect("decodes a plan written as JSON", () =>
    Effect.gen(function*() {
      const plan = yield* FaultPlan.decodeJson(JSON.stringify({
        steps: [{ _tag: "Status", status: 429, style: "mistral", retryAfter: "2" }, { _tag: "Fixture", name: "auth" }],
        windows: [{ fromMs: 0, toMs: 1000, fault: { _tag: "ResetBody" }, share: 0.25 }],
        capacity: { concurrent: 8, status: 429 },
        otherwise: { _tag: "Ok", delayMs: 5 },
        latencyMs: 10,
        seed: 3
      }))
      assert.deepStrictEqual(plan, {
        steps: [{ _tag: "Status", status: 429, style: "mistral", retryAfter: "2" }, { _tag: "Fixture", name: "auth" }],
        windows: [{ fromMs: 0, toMs: 1000, fault: { _tag: "ResetBody" }, share: 0.25 }],
        capacity: { concurrent: 8, status: 429 },
        otherwise: { _tag: "Ok", delayMs: 5 },
        latencyMs: 10,
        seed: 3
      })
      assert.deepStrictEqual(yield* FaultPlan.decode({}), {})
    }))

  it.effect("rejects a status that is not an error, an unknown fixture and an unknown fault", () =>
    Effect.gen(function*() {
      for (
        const bad of [
          { steps: [{ _tag: "Status", status: 200 }] },
          { steps: [{ _tag: "Fixture", name: "nope" }] },
          { otherwise: { _tag: "Explode" } },
          { windows: [{ fromMs: 0, toMs: 10, fault: { _tag: "Ok" }, share: 2 }] },
          { capacity: { concurrent: 1, status: 500 } }
        ]
      ) {
        const result = yield* either(FaultPlan.decode(bad))
        assert.isTrue(Either.isLeft(result), JSON.stringify(bad))
        if (Either.isLeft(result)) assert.strictEqual(Either.leftOf(result)._tag, "ParseError")
      }
    }))
})

describe("Fixtures", () => {
  it("records every row of the classification table with the providers' bodies", () => {
    const body = (name: Fixtures.FixtureName): any => JSON.parse(Fixtures.fixtures[name].body)
    assert.deepStrictEqual(Fixtures.fixtures.rateLimited.status, 429)
    assert.strictEqual(Fixtures.fixtures.rateLimited.headers["retry-after"], "2")
    assert.strictEqual(Fixtures.fixtures.rateLimited.headers["retry-after-ms"], "2000")
    assert.deepStrictEqual([body("rateLimited").error.type, body("rateLimited").error.code], [
      "requests",
      "rate_limit_exceeded"
    ])
    assert.strictEqual(
      Fixtures.fixtures.rateLimitedMistral.body,
      `{"object":"error","message":"Requests rate limit exceeded","type":"rate_limited","param":null,"code":"1300"}`
    )
    assert.deepStrictEqual(
      [Fixtures.fixtures.quotaExhausted.status, body("quotaExhausted").error.code],
      [429, "insufficient_quota"]
    )
    assert.deepStrictEqual([Fixtures.fixtures.serverError.status, body("serverError").error.type], [
      500,
      "server_error"
    ])
    assert.deepStrictEqual([Fixtures.fixtures.overloaded.status, body("overloaded").error.code], [503, "overloaded"])
    assert.deepStrictEqual([Fixtures.fixtures.auth.status, body("auth").error.code], [401, "invalid_api_key"])
    assert.deepStrictEqual([Fixtures.fixtures.badRequest.status, body("badRequest").error.type], [
      400,
      "invalid_request_error"
    ])
    assert.deepStrictEqual([Fixtures.fixtures.modelNotFound.status, body("modelNotFound").error.code], [
      404,
      "model_not_found"
    ])
    assert.deepStrictEqual([Fixtures.fixtures.modelNotFound503.status, body("modelNotFound503").error.code], [
      503,
      "model_not_found"
    ])
    assert.deepStrictEqual(body("chatSuccess").usage.total_tokens, 22)
    // The fields OpenAI sends today, in its order, beyond those of the generated reply.
    assert.deepStrictEqual(Object.keys(body("chatSuccess")), [
      "id",
      "object",
      "created",
      "model",
      "choices",
      "usage",
      "service_tier",
      "system_fingerprint"
    ])
    assert.deepStrictEqual(body("chatSuccess").choices[0].message, {
      role: "assistant",
      content: "Paris is the capital of France.",
      refusal: null,
      annotations: []
    })
    // OpenAI's error bodies: four spaces, its key order, a final newline (the fault server formats its own alike).
    assert.strictEqual(
      Fixtures.fixtures.serverError.body,
      `{\n    "error": {\n        "message": "The server had an error while processing your request. Sorry about that!",` +
        `\n        "type": "server_error",\n        "param": null,\n        "code": null\n    }\n}\n`
    )
    assert.deepStrictEqual(body("embeddingsSuccess").data[0].embedding.length, 8)
    assert.strictEqual(Fixtures.fixtures.malformedJson.status, 200)
    assert.throws(() => body("malformedJson"), SyntaxError)
    assert.isTrue(Fixtures.fixtures.chatSuccess.body.startsWith(Fixtures.fixtures.malformedJson.body))
    assert.isUndefined(body("schemaMismatch").choices)
    assert.strictEqual(body("schemaMismatch").usage.prompt_tokens, "14")
    assert.strictEqual(events(Fixtures.fixtures.chatStream.body).at(-1), "[DONE]")
    for (const name of Fixtures.fixtureNames) {
      assert.isAbove(Fixtures.fixtures[name].description.length, 0, name)
      assert.isDefined(Fixtures.fixtures[name].headers["content-type"], name)
    }
  })
})

describe("FaultServer.serve", () => {
  it.live("listens on the port it is given, and fails typed when the port is taken", () =>
    Effect.scoped(Effect.gen(function*() {
      const first = yield* FaultServer.make({})
      const taken = yield* either(FaultServer.serve({}, first.port))
      assert.isTrue(Either.isLeft(taken))
      if (Either.isLeft(taken)) {
        assert.strictEqual(Either.leftOf(taken)._tag, "ListenError")
        assert.strictEqual(Either.leftOf(taken).port, first.port)
        assert.match(Either.leftOf(taken).message, /EADDRINUSE/)
      }
      const free = yield* EffectLine.callback<number>((resume) => {
        const probe = Net.createServer().listen(0, "127.0.0.1", () => {
          const { port } = probe.address() as Net.AddressInfo
          probe.close(() => resume(Effect.succeed(port)))
        })
      })
      const chosen = yield* FaultServer.serve({}, free)
      assert.strictEqual(chosen.port, free)
      assert.strictEqual(chosen.url, `http://127.0.0.1:${free}/v1`)
    })))
})
