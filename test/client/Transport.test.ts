import { collect } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { ChatCompletion } from "@resilient-ai/client"
import { ClientLine, ProviderError, Requests, Transport } from "@resilient-ai/client/internal"
import { Failure } from "@resilient-ai/policy"
import { Duration, Effect, Redacted, Schema, Stream } from "effect"

const endpoint: Transport.Endpoint = {
  target: "t",
  baseUrl: "http://127.0.0.1:1/v1",
  apiKey: undefined,
  idempotencyHeader: "Idempotency-Key",
  maxResponseBytes: 1024,
  connectTimeout: Duration.seconds(3)
}

const withCode = (code: string, extra: Record<string, unknown> = {}) =>
  Object.assign(new Error(`${code} happened`), { code, ...extra })

describe("Transport.fromRequestError", () => {
  it("a connection that was never made is ConnectFailed, through cause chains and aggregate errors", () => {
    for (const code of ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]) {
      const failure = Transport.fromRequestError(new Error("fetch failed", { cause: withCode(code) }), endpoint)
      assert.deepStrictEqual(failure, new Failure.ConnectFailed({ detail: `${code}: ${code} happened`, code }))
    }
    const aggregate = new AggregateError([new Error("no code"), withCode("ECONNREFUSED")], "all failed")
    assert.strictEqual(Transport.fromRequestError(aggregate, endpoint)._tag, "ConnectFailed")
  })

  it("undici's connect timeout is ConnectTimeout with the dispatcher's timeout", () => {
    assert.deepStrictEqual(
      Transport.fromRequestError(withCode("UND_ERR_CONNECT_TIMEOUT"), endpoint),
      new Failure.ConnectTimeout({ timeout: Duration.seconds(3) })
    )
  })

  it("a reset on a connection that wrote nothing happened before the request was sent", () => {
    const failure = Transport.fromRequestError(withCode("UND_ERR_SOCKET", { socket: { bytesWritten: 0 } }), endpoint)
    assert.deepStrictEqual(
      failure,
      new Failure.ConnectionReset({ afterSend: false, detail: "UND_ERR_SOCKET: UND_ERR_SOCKET happened" })
    )
  })

  it("a reset after bytes were written, or without knowing, is after the request was sent", () => {
    const written = Transport.fromRequestError(withCode("UND_ERR_SOCKET", { socket: { bytesWritten: 812 } }), endpoint)
    assert.deepStrictEqual((written as Failure.ConnectionReset).afterSend, true)
    const unknown = Transport.fromRequestError(withCode("ECONNRESET"), endpoint)
    assert.deepStrictEqual((unknown as Failure.ConnectionReset).afterSend, true)
  })

  it("an error without a code is treated as possibly delivered", () => {
    assert.deepStrictEqual(
      Transport.fromRequestError(new Error("something odd"), endpoint),
      new Failure.ConnectionReset({ afterSend: true, detail: "something odd" })
    )
  })

  it("an abort is Cancelled", () => {
    assert.strictEqual(Transport.fromRequestError(withCode("UND_ERR_ABORTED"), endpoint)._tag, "Cancelled")
  })
})

describe("Transport.contractViolation", () => {
  it("names every field that breaks the schema, with its path", () => {
    const issues = Effect.runSync(Effect.flip(
      ClientLine.decoder(ChatCompletion.ChatCompletion)({
        id: "x",
        object: "chat.completion",
        created: 1,
        model: "m",
        choices: [{ index: 0, message: { role: "assistant", content: 5 }, finish_reason: "stop" }],
        usage: { prompt_tokens: "3", completion_tokens: 1, total_tokens: 4 }
      })
    ))
    const violation = Transport.contractViolation(issues)
    // Effect 3 names a field twice when it fits neither side of a union (one issue per side), Effect 4 once.
    assert.deepStrictEqual([...new Set(violation.issues.map((issue) => issue.path))], [
      "choices[0].message.content",
      "usage.prompt_tokens"
    ])
  })
})

describe("Transport requests", () => {
  const Ok = Schema.Struct({ ok: Schema.Boolean })

  it.effect("each endpoint's calls go to its own URL with its own key; a stream asks for events", () =>
    Effect.gen(function*() {
      const sent: Array<ClientLine.HttpClientRequest.HttpClientRequest> = []
      const client = ClientLine.HttpClient.make((request) => {
        sent.push(request)
        const events = request.headers.accept === "text/event-stream"
        const body = events ? "data: {\"ok\":true}\n\n" : "{\"ok\":true}"
        return Effect.succeed(ClientLine.HttpClientResponse.fromWeb(request, new Response(body)))
      })
      // The request of an endpoint and path is prepared once: neither may take the other's.
      const one: Transport.Endpoint = { ...endpoint, baseUrl: "http://one.test/v1//", apiKey: Redacted.make("sk-one") }
      const two: Transport.Endpoint = { ...endpoint, baseUrl: "http://two.test/v1" }
      const post = (to: Transport.Endpoint, model: string) =>
        Transport.postJsonWith(client, to, "/embeddings", { model }, Ok, () => undefined)
      yield* post(one, "a")
      yield* post(two, "b")
      yield* post(one, "c")
      yield* Effect.scoped(
        Transport.postStream(one, "/embeddings", { model: "d" }, Ok, () => undefined, Duration.seconds(5)).pipe(
          Effect.provideService(ClientLine.HttpClient.HttpClient, client)
        )
      )
      const json = "application/json"
      assert.deepStrictEqual(
        sent.map((request) => [request.url, request.headers.authorization, request.headers.accept]),
        [
          ["http://one.test/v1/embeddings", "Bearer sk-one", json],
          ["http://two.test/v1/embeddings", undefined, json],
          ["http://one.test/v1/embeddings", "Bearer sk-one", json],
          ["http://one.test/v1/embeddings", "Bearer sk-one", "text/event-stream"]
        ]
      )
      const bodies = sent.map((request) =>
        request.body._tag === "Uint8Array" ? new TextDecoder().decode(request.body.body) : request.body._tag
      )
      assert.deepStrictEqual(bodies, [
        "{\"model\":\"a\"}",
        "{\"model\":\"b\"}",
        "{\"model\":\"c\"}",
        "{\"model\":\"d\"}"
      ])
    }))

  it.effect("postJson sends with the HTTP client in context, and decodes the body with the schema", () =>
    Effect.gen(function*() {
      const sent: Array<string> = []
      const client = ClientLine.HttpClient.make((request) => {
        sent.push(request.url)
        const body = request.url.endsWith("/broken") ? "{\"ok\":\"yes\"}" : "{\"ok\":true}"
        return Effect.succeed(ClientLine.HttpClientResponse.fromWeb(request, new Response(body)))
      })
      const post = (path: string) =>
        Transport.postJson(endpoint, path, {}, Ok, () => undefined).pipe(
          Effect.provideService(ClientLine.HttpClient.HttpClient, client)
        )
      assert.deepStrictEqual(yield* post("/chat/completions"), { ok: true })
      assert.strictEqual((yield* Effect.flip(post("/broken")))._tag, "ContractViolation")
      assert.deepStrictEqual(sent, ["http://127.0.0.1:1/v1/chat/completions", "http://127.0.0.1:1/v1/broken"])
    }))
})

describe("Transport.serverSentEvents", () => {
  const eventsOf = (bytes: Stream.Stream<Uint8Array>) => collect(Transport.serverSentEvents(bytes))
  const events = (parts: ReadonlyArray<string>) =>
    eventsOf(Stream.fromIterable(parts.map((part) => new TextEncoder().encode(part))))
  const message = (data: string) => ({ event: "message", data })

  it.effect("yields the data of each event, whatever the byte boundaries", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* events(["data: {\"a\":1}\n\nda", "ta: {\"b\":2}\r\n\r\n", "data: [DONE]\n\n"]), [
        message("{\"a\":1}"),
        message("{\"b\":2}"),
        message("[DONE]")
      ])
    }))

  it.effect("decodes characters split across chunks, and fails with NotJson on bytes that are not UTF-8", () =>
    Effect.gen(function*() {
      const euro = new TextEncoder().encode("data: €\n\n")
      assert.deepStrictEqual(yield* eventsOf(Stream.fromIterable([euro.slice(0, 7), euro.slice(7)])), [message("€")])
      const broken = Stream.make(new TextEncoder().encode("data: {\"a\":1}\n\n"), new Uint8Array([0x64, 0xc3, 0x28]))
      const failure = yield* Effect.flip(eventsOf(broken))
      assert.strictEqual(failure._tag, "NotJson")
      assert.strictEqual(failure.contentType, "text/event-stream")
    }))

  it.effect("joins multi-line data, skips comments and other fields", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* events([": keep-alive\n\nevent: message\ndata:one\ndata: two\nid: 7\n\n"]), [
        message("one\ntwo")
      ])
    }))

  it.effect("names each event by its `event:` line, for that event only; an event without data is none", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* events([
          "event: ping\n\n",
          "event: error\ndata: {\"type\": \"error\"}\n\n",
          "event:message_stop\ndata: {}\n\n",
          "data: {}\n\n"
        ]),
        [{ event: "error", data: "{\"type\": \"error\"}" }, { event: "message_stop", data: "{}" }, message("{}")]
      )
    }))
})

describe("request bodies", () => {
  it("chat takes the target's model unless the request names one, and streams ask for usage", () => {
    assert.deepStrictEqual(
      Requests.chatBody(
        { messages: [{ role: "user", content: "hi" }], temperature: 0.2, max_tokens: undefined },
        "m",
        false
      ),
      { messages: [{ role: "user", content: "hi" }], temperature: 0.2, model: "m" }
    )
    assert.deepStrictEqual(
      Requests.chatBody({ messages: [], model: "other", extra: { safe_prompt: true } }, "m", true),
      { messages: [], safe_prompt: true, model: "other", stream: true, stream_options: { include_usage: true } }
    )
  })

  it("embeddings ask for floats", () => {
    assert.deepStrictEqual(Requests.embeddingsBody({ input: ["a"], dimensions: 8 }, "e"), {
      input: ["a"],
      dimensions: 8,
      encoding_format: "float",
      model: "e"
    })
  })
})

describe("ProviderError", () => {
  it("reads OpenAI's and Mistral's error shapes, codes as strings", () => {
    assert.deepStrictEqual(
      ProviderError.details({
        error: { message: "slow down", type: "requests", code: "rate_limit_exceeded", param: null }
      }),
      { code: "rate_limit_exceeded", type: "requests", message: "slow down" }
    )
    assert.deepStrictEqual(
      ProviderError.details({
        object: "error",
        message: "Requests rate limit exceeded",
        type: "rate_limited",
        param: null,
        code: 1300
      }),
      { code: "1300", type: "rate_limited", message: "Requests rate limit exceeded" }
    )
    assert.deepStrictEqual(ProviderError.details("<html>"), {})
  })

  it("maps a response onto its failure: the code before the status, the headers' hint and verdict", () => {
    const failure = ProviderError.toFailure({
      status: 429,
      headers: { "retry-after": "3", "x-should-retry": "true" },
      body: { object: "error", message: "Requests rate limit exceeded", type: "rate_limited", code: "1300" }
    }, 0)
    assert.deepStrictEqual(
      failure,
      new Failure.RateLimited({
        status: 429,
        providerCode: "1300",
        detail: "Requests rate limit exceeded",
        retryAfter: Duration.seconds(3),
        shouldRetry: true
      })
    )
    const quota = ProviderError.toFailure({
      status: 429,
      headers: {},
      body: {
        error: { message: "You exceeded your current quota", type: "insufficient_quota", code: "insufficient_quota" }
      }
    }, 0)
    assert.strictEqual(quota._tag, "QuotaExhausted")
    const html = ProviderError.toFailure({
      status: 502,
      headers: {},
      body: "<html><body>502 Bad Gateway</body></html>"
    }, 0)
    assert.deepStrictEqual(
      html,
      new Failure.ServerError({ status: 502, detail: "<html><body>502 Bad Gateway</body></html>" })
    )
  })

  it("an error without a status gets its provider's: a numeric code, else by code, else by type, else 500", () => {
    const cases: ReadonlyArray<readonly [ProviderError.Details, number]> = [
      // Anthropic's types.
      [{ type: "invalid_request_error" }, 400],
      [{ type: "authentication_error" }, 401],
      [{ type: "permission_error" }, 403],
      [{ type: "not_found_error" }, 404],
      [{ type: "request_too_large" }, 413],
      [{ type: "rate_limit_error" }, 429],
      [{ type: "api_error" }, 500],
      [{ type: "overloaded_error" }, 529],
      // OpenAI's: the code before the type.
      [{ type: "invalid_request_error", code: "invalid_api_key" }, 401],
      [{ type: "invalid_request_error", code: "model_not_found" }, 404],
      [{ type: "invalid_request_error", code: "context_length_exceeded" }, 400],
      [{ type: "insufficient_quota", code: "insufficient_quota" }, 429],
      [{ type: "requests", code: "rate_limit_exceeded" }, 429],
      [{ type: "tokens" }, 429],
      [{ type: "server_error" }, 500],
      [{ type: "service_unavailable_error", code: "server_is_overloaded" }, 503],
      // Mistral's 429, whose code is not a status.
      [{ type: "rate_limited", code: "1300" }, 429],
      // A code that is a status (OpenRouter, vLLM, Gemini).
      [{ code: "503" }, 503],
      [{ type: "BadRequestError", code: "400" }, 400],
      [{ code: "200" }, 500],
      [{ type: "something_new" }, 500],
      [{}, 500]
    ]
    for (const [details, status] of cases) {
      assert.strictEqual(ProviderError.statusFor(details), status, JSON.stringify(details))
    }
  })

  it("tells an error event of a stream from a chunk", () => {
    const chunk = { id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [] }
    assert.isFalse(ProviderError.isErrorEvent("message", chunk))
    assert.isFalse(ProviderError.isErrorEvent("message", "[DONE]"))
    assert.isFalse(ProviderError.isErrorEvent("message", { error: "a string is not an error object" }))
    assert.isTrue(ProviderError.isErrorEvent("message", { error: { message: "boom" } }))
    assert.isTrue(ProviderError.isErrorEvent("message", { type: "error", error: { type: "overloaded_error" } }))
    assert.isTrue(ProviderError.isErrorEvent("message", { object: "error", message: "boom", code: 400 }))
    assert.isTrue(ProviderError.isErrorEvent("error", "Overloaded"))
  })

  it("maps an error event onto the failure of the same body in a status response", () => {
    const anthropic = { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }
    assert.deepStrictEqual(
      ProviderError.fromErrorEvent({ headers: {}, body: anthropic }, 0),
      ProviderError.toFailure({ status: 529, headers: {}, body: anthropic }, 0)
    )
    assert.deepStrictEqual(
      ProviderError.fromErrorEvent({ headers: {}, body: anthropic }, 0),
      new Failure.Overloaded({ status: 529, detail: "Overloaded" })
    )
    const quota = {
      error: { message: "You exceeded your current quota", type: "insufficient_quota", code: "insufficient_quota" }
    }
    assert.deepStrictEqual(
      ProviderError.fromErrorEvent({ headers: {}, body: quota }, 0),
      new Failure.QuotaExhausted({
        status: 429,
        providerCode: "insufficient_quota",
        detail: "You exceeded your current quota"
      })
    )
    assert.deepStrictEqual(
      ProviderError.fromErrorEvent({
        headers: {},
        body: { error: { type: "authentication_error", message: "bad key" } }
      }, 0),
      new Failure.AuthenticationFailed({ status: 401, detail: "bad key" })
    )
    assert.deepStrictEqual(
      ProviderError.fromErrorEvent({ headers: {}, body: "Overloaded" }, 0),
      new Failure.ServerError({ status: 500, detail: "Overloaded" })
    )
  })
})
