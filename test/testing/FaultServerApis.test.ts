import { either } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Either } from "@resilient-ai/policy/internal"
import { FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import { json, post, readAll, readUntil, resetCodes, text } from "./support.js"

// The two APIs the fault server speaks beside chat completions and embeddings: OpenAI's Responses
// API and Anthropic's Messages API, each read with a plain fetch and checked field by field, and
// every fault in the endpoint's own wire format.

const responsesRequest = { model: "gpt-4.1-mini", input: "Say hello" }
const messagesRequest = {
  model: "claude-sonnet-4-5",
  max_tokens: 64,
  messages: [{ role: "user", content: "Say hello" }]
}

/** The events of a stream whose events are named after their `type`, each checked to be so, in order. */
const namedEvents = (body: string): Array<any> =>
  body.split("\n\n").filter((event) => event !== "").map((event) => {
    const match = /^event: (\S+)\ndata: (.+)$/.exec(event)
    assert.isNotNull(match, event)
    const data = JSON.parse(match![2]!)
    assert.strictEqual(data.type, match![1], event)
    return data
  })

/** Checks the head of a streamed answer: a 200 of server-sent events, with the request id under `idHeader`. */
const assertStreamed = (response: Response, idHeader: string) => {
  assert.strictEqual(response.status, 200)
  assert.strictEqual(response.headers.get("content-type"), "text/event-stream; charset=utf-8")
  assert.strictEqual(response.headers.get("cache-control"), "no-cache")
  assert.strictEqual(response.headers.get(idHeader), "req_fault000001")
}

const responsesUsage = {
  input_tokens: 3,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: 4,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: 7
}

/** The response object the server answers `responsesRequest` with, in `status`. */
const responseObject = (
  createdAt: number,
  status: string,
  output: ReadonlyArray<unknown>,
  usage: unknown,
  error: unknown = null
) => ({
  id: "resp_fault000001",
  object: "response",
  created_at: createdAt,
  status,
  background: false,
  error,
  incomplete_details: null,
  instructions: null,
  max_output_tokens: null,
  model: "gpt-4.1-mini",
  output,
  parallel_tool_calls: true,
  previous_response_id: null,
  reasoning: { effort: null, summary: null },
  service_tier: "default",
  store: true,
  temperature: 1,
  text: { format: { type: "text" } },
  tool_choice: "auto",
  tools: [],
  top_p: 1,
  truncation: "disabled",
  usage,
  user: null,
  metadata: {}
})

const outputText = (text: string) => ({ type: "output_text", text, annotations: [] })

const outputMessage = (status: string, content: ReadonlyArray<unknown>) => ({
  id: "msg_fault000001",
  type: "message",
  status,
  role: "assistant",
  content
})

const responseEventTypes = [
  "response.created",
  "response.in_progress",
  "response.output_item.added",
  "response.content_part.added",
  "response.output_text.delta",
  "response.output_text.delta",
  "response.output_text.delta",
  "response.output_text.delta",
  "response.output_text.done",
  "response.content_part.done",
  "response.output_item.done",
  "response.completed"
]

const messageEventTypes = [
  "message_start",
  "content_block_start",
  "ping",
  "content_block_delta",
  "content_block_delta",
  "content_block_delta",
  "content_block_delta",
  "content_block_stop",
  "message_delta",
  "message_stop"
]

describe("FaultServer /v1/responses", () => {
  it.live("answers a response object: one completed assistant message of the reply, and the usage", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      assert.strictEqual(server.origin, `http://127.0.0.1:${server.port}`)
      const response = yield* post(server, "/responses", responsesRequest)
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "application/json")
      assert.strictEqual(response.headers.get("x-request-id"), "req_fault000001")
      assert.isNull(response.headers.get("request-id"))
      const body = yield* json(response)
      assert.isTrue(Number.isInteger(body.created_at) && Math.abs(body.created_at - Date.now() / 1000) < 5)
      assert.deepStrictEqual(
        body,
        responseObject(
          body.created_at,
          "completed",
          [outputMessage("completed", [outputText(FaultServer.replyText)])],
          responsesUsage
        )
      )
      assert.strictEqual((yield* server.arrivals)[0]!.path, "/v1/responses")
    })))

  it.live("streams OpenAI's named events, numbered from 0, the text in deltas, no [DONE]", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const response = yield* post(server, "/responses", { ...responsesRequest, stream: true })
      assertStreamed(response, "x-request-id")
      const body = yield* text(response)
      assert.notInclude(body, "[DONE]")
      const events = namedEvents(body)
      assert.deepStrictEqual(events.map((event) => event.type), responseEventTypes)
      assert.deepStrictEqual(events.map((event) => event.sequence_number), events.map((_, i) => i))
      const createdAt = events[0].response.created_at
      const inProgress = responseObject(createdAt, "in_progress", [], null)
      const part = { item_id: "msg_fault000001", output_index: 0, content_index: 0 }
      const done = [outputMessage("completed", [outputText(FaultServer.replyText)])]
      const at = (i: number) => ({ type: responseEventTypes[i], sequence_number: i })
      assert.deepStrictEqual(events, [
        { ...at(0), response: inProgress },
        { ...at(1), response: inProgress },
        { ...at(2), output_index: 0, item: outputMessage("in_progress", []) },
        { ...at(3), ...part, part: outputText("") },
        { ...at(4), ...part, delta: "The" },
        { ...at(5), ...part, delta: " fault" },
        { ...at(6), ...part, delta: " server" },
        { ...at(7), ...part, delta: " answered." },
        { ...at(8), ...part, text: FaultServer.replyText },
        { ...at(9), ...part, part: outputText(FaultServer.replyText) },
        { ...at(10), output_index: 0, item: done[0] },
        { ...at(11), response: responseObject(createdAt, "completed", done, responsesUsage) }
      ])
      const deltas = events.filter((event) => event.type === "response.output_text.delta")
      assert.strictEqual(deltas.map((event) => event.delta).join(""), FaultServer.replyText)
    })))

  it.live("reads input as a string or input items, and counts the instructions in the input tokens", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const body = yield* json(
        yield* post(server, "/responses", {
          model: "m",
          // 9 characters, a newline, 10 more and a newline before an item with no text: 21 characters, 6 tokens.
          instructions: "Be brief.",
          input: [
            { role: "user", content: [{ type: "input_text", text: "Say hello " }] },
            { type: "function_call_output", call_id: "c", output: "{}" }
          ]
        })
      )
      assert.strictEqual(body.usage.input_tokens, 6)
      assert.strictEqual(body.usage.total_tokens, 10)
    })))

  it.live("refuses a request the Responses API refuses, in OpenAI's words", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 500 }] })
      const refusal = (body: unknown) =>
        Effect.flatMap(post(server, "/responses", body), (response) =>
          Effect.map(json(response), (answer) => [response.status, answer]))
      assert.deepStrictEqual(yield* refusal({ input: "x" }), [400, {
        error: { message: "you must provide a model parameter", type: "invalid_request_error", param: null, code: null }
      }])
      assert.deepStrictEqual(yield* refusal({ model: "m" }), [400, {
        error: {
          message: "Missing required parameter: 'input'.",
          type: "invalid_request_error",
          param: "input",
          code: "missing_required_parameter"
        }
      }])
      assert.deepStrictEqual(yield* refusal({ model: "m", input: 3 }), [400, {
        error: {
          message: "Invalid type for 'input': expected a string or an array of input items.",
          type: "invalid_request_error",
          param: "input",
          code: "invalid_type"
        }
      }])
      const [notJson, notJsonBody] = yield* refusal("{model")
      assert.strictEqual(notJson, 400)
      assert.isTrue(notJsonBody.error.message.startsWith("We could not parse the JSON body of your request."))
      const missing = yield* post(server, "/response", responsesRequest)
      assert.strictEqual(missing.status, 404)
      assert.strictEqual((yield* json(missing)).error.message, "Invalid URL (POST /v1/response)")
      // None was the plan's to answer: its first step is still there.
      assert.strictEqual((yield* post(server, "/responses", responsesRequest)).status, 500)
    })))

  it.live("Status sends OpenAI's error body (Mistral's when asked) with the retry headers", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [
          { _tag: "Status", status: 429, retryAfter: "2", shouldRetry: true },
          { _tag: "Status", status: 503, style: "mistral" }
        ]
      })
      const limited = yield* post(server, "/responses", responsesRequest)
      assert.strictEqual(limited.status, 429)
      assert.strictEqual(limited.headers.get("retry-after"), "2")
      assert.strictEqual(limited.headers.get("x-should-retry"), "true")
      assert.strictEqual(limited.headers.get("x-request-id"), "req_fault000001")
      assert.deepStrictEqual((yield* json(limited)).error, {
        message: "Rate limit reached for requests. Please try again later.",
        type: "requests",
        param: null,
        code: "rate_limit_exceeded"
      })
      assert.strictEqual((yield* json(yield* post(server, "/responses", responsesRequest))).object, "error")
    })))

  it.live("StreamError sends afterChunks events, OpenAI's error event and response.failed, then ends", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [
          { _tag: "StreamError", afterChunks: 5 },
          { _tag: "StreamError", afterChunks: 0, status: 429, message: "slow down" },
          { _tag: "StreamError", afterChunks: 2 }
        ]
      })
      const response = yield* post(server, "/responses", { ...responsesRequest, stream: true })
      assert.strictEqual(response.status, 200)
      const events = namedEvents(yield* text(response))
      assert.deepStrictEqual(events.map((event) => event.type), [
        ...responseEventTypes.slice(0, 5),
        "error",
        "response.failed"
      ])
      const message = "The engine is currently overloaded, please try again later."
      assert.deepStrictEqual(events[5], {
        type: "error",
        sequence_number: 5,
        error: { type: "server_error", code: null, message, param: null }
      })
      assert.deepStrictEqual(
        events[6],
        {
          type: "response.failed",
          sequence_number: 6,
          response: responseObject(events[0].response.created_at, "failed", [], null, {
            code: "server_error",
            message
          })
        }
      )
      const limited = namedEvents(
        yield* text(yield* post(server, "/responses", { ...responsesRequest, stream: true }))
      )
      assert.deepStrictEqual(limited.map((event) => [event.type, event.sequence_number]), [
        ["error", 0],
        ["response.failed", 1]
      ])
      assert.deepStrictEqual(limited[0].error, {
        type: "requests",
        code: "rate_limit_exceeded",
        message: "slow down",
        param: null
      })
      assert.deepStrictEqual(limited[1].response.error, { code: "rate_limit_exceeded", message: "slow down" })
      // A request that did not ask to stream gets the error as a status.
      const unstreamed = yield* post(server, "/responses", responsesRequest)
      assert.strictEqual(unstreamed.status, 503)
      assert.strictEqual((yield* json(unstreamed)).error.message, message)
      assert.deepStrictEqual((yield* server.arrivals).map((arrival) => arrival.fault), [
        "StreamError",
        "StreamError",
        "StreamError"
      ])
    })))

  it.live("StreamBreak never sends response.completed; SchemaBreak drops output and counts in a string", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "StreamBreak", afterChunks: 100 }, { _tag: "SchemaBreak" }, { _tag: "SchemaBreak" }]
      })
      const broken = yield* readAll(yield* post(server, "/responses", { ...responsesRequest, stream: true }))
      assert.oneOf(broken.failure?.cause?.code, resetCodes)
      assert.deepStrictEqual(namedEvents(broken.received).map((event) => event.type), responseEventTypes.slice(0, -1))
      const body = yield* json(yield* post(server, "/responses", responsesRequest))
      assert.isUndefined(body.output)
      assert.deepStrictEqual(body.usage, { ...responsesUsage, input_tokens: "3" })
      assert.strictEqual(body.id, "resp_fault000002")
      const stream = namedEvents(
        yield* text(yield* post(server, "/responses", { ...responsesRequest, stream: true }))
      )
      assert.deepStrictEqual(stream.map((event) => event.type), ["response.completed"])
      assert.isUndefined(stream[0].response.output)
      assert.strictEqual(stream[0].response.usage.input_tokens, "3")
    })))

  it.live("StallBody counts the events of the stream; TruncatedJson cuts the response object", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "StallBody", ms: FaultServer.never, afterChunks: 6 }, { _tag: "TruncatedJson" }]
      })
      const stalled = yield* post(server, "/responses", { ...responsesRequest, stream: true })
      const first = namedEvents(yield* readUntil(stalled, (received) => received.split("\n\n").length > 6))
      assert.deepStrictEqual(first.map((event) => event.type), responseEventTypes.slice(0, 6))
      const truncated = yield* text(yield* post(server, "/responses", responsesRequest))
      assert.isTrue(truncated.startsWith(`{"id":"resp_fault000002","object":"response",`))
      assert.throws(() => JSON.parse(truncated), SyntaxError)
    })))
})

describe("FaultServer /v1/messages", () => {
  it.live("answers an Anthropic message: one text block of the reply, end_turn, the usage, a request-id", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      // The query string Anthropic's beta endpoint adds is no part of the path.
      const response = yield* post(server, "/messages?beta=true", messagesRequest)
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "application/json")
      assert.strictEqual(response.headers.get("request-id"), "req_fault000001")
      assert.isNull(response.headers.get("x-request-id"))
      assert.isNull(response.headers.get("openai-processing-ms"))
      assert.deepStrictEqual(yield* json(response), {
        id: "msg_fault000001",
        type: "message",
        role: "assistant",
        model: "claude-sonnet-4-5",
        content: [{ type: "text", text: FaultServer.replyText }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { input_tokens: 3, output_tokens: 4 }
      })
      assert.strictEqual((yield* server.arrivals)[0]!.path, "/v1/messages")
    })))

  it.live("streams Anthropic's named events: start, block, ping, text deltas, stop, delta, message_stop", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const response = yield* post(server, "/messages", { ...messagesRequest, stream: true })
      assertStreamed(response, "request-id")
      const events = namedEvents(yield* text(response))
      assert.deepStrictEqual(events.map((event) => event.type), messageEventTypes)
      const delta = (text: string) => ({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })
      assert.deepStrictEqual(events, [
        {
          type: "message_start",
          message: {
            id: "msg_fault000001",
            type: "message",
            role: "assistant",
            model: "claude-sonnet-4-5",
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: 3, output_tokens: 1 }
          }
        },
        { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
        { type: "ping" },
        delta("The"),
        delta(" fault"),
        delta(" server"),
        delta(" answered."),
        { type: "content_block_stop", index: 0 },
        { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 4 } },
        { type: "message_stop" }
      ])
      const text_ = events.filter((event) => event.type === "content_block_delta").map((event) => event.delta.text)
      assert.strictEqual(text_.join(""), FaultServer.replyText)
    })))

  it.live("refuses what Anthropic refuses, in its error format, with a request-id", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 500 }] })
      const refusal = (body: unknown) =>
        Effect.flatMap(post(server, "/messages", body), (response) =>
          Effect.map(json(response), (answer) => {
            assert.match(response.headers.get("request-id") ?? "", /^req_/)
            return [response.status, answer.type, answer.error.type, answer.error.message]
          }))
      const invalid = (message: string) => [400, "error", "invalid_request_error", message]
      const { model: _, ...noModel } = messagesRequest
      const { max_tokens: __, ...noMaxTokens } = messagesRequest
      assert.deepStrictEqual(yield* refusal(noModel), invalid("model: Field required"))
      assert.deepStrictEqual(yield* refusal(noMaxTokens), invalid("max_tokens: Field required"))
      assert.deepStrictEqual(
        yield* refusal({ ...messagesRequest, max_tokens: "64" }),
        invalid("max_tokens: Input should be a valid integer")
      )
      assert.deepStrictEqual(yield* refusal({ model: "m", max_tokens: 8 }), invalid("messages: Field required"))
      assert.deepStrictEqual(
        yield* refusal({ ...messagesRequest, messages: "hi" }),
        invalid("messages: Input should be a valid list")
      )
      assert.deepStrictEqual(yield* refusal("{model"), invalid("The request body is not valid JSON."))
      const get = yield* Effect.promise(() => fetch(`${server.origin}/v1/messages`))
      assert.strictEqual(get.status, 405)
      assert.deepStrictEqual(yield* json(get), {
        type: "error",
        error: { type: "invalid_request_error", message: "Invalid method for URL (GET /v1/messages)" }
      })
      assert.strictEqual((yield* post(server, "/messages", messagesRequest)).status, 500)
    })))

  it.live("Status sends Anthropic's error type for each status, the fault's type and message over them", () =>
    Effect.scoped(Effect.gen(function*() {
      const expected: ReadonlyArray<readonly [number, string, string]> = [
        [400, "invalid_request_error", "Invalid request"],
        [401, "authentication_error", "invalid x-api-key"],
        [402, "billing_error", "Billing error"],
        [403, "permission_error", "Permission denied"],
        [404, "not_found_error", "Not found"],
        [413, "request_too_large", "Request exceeds the maximum allowed number of bytes."],
        [429, "rate_limit_error", "Rate limited"],
        [500, "api_error", "Internal server error"],
        [504, "timeout_error", "Request timeout"],
        [529, "overloaded_error", "Overloaded"],
        [418, "invalid_request_error", "I'm a Teapot"],
        [502, "api_error", "Bad Gateway"]
      ]
      const server = yield* FaultServer.make({
        steps: [
          ...expected.map(([status]) => ({ _tag: "Status" as const, status })),
          // Mistral's style and a code have no place in Anthropic's format.
          { _tag: "Status", status: 529, type: "api_error", message: "busy", code: "x", style: "mistral" },
          {
            _tag: "Status",
            status: 429,
            retryAfter: "7",
            retryAfterMs: "7000",
            shouldRetry: false,
            headers: { "anthropic-ratelimit-requests-remaining": "0" }
          }
        ]
      })
      for (const [status, type, message] of expected) {
        const response = yield* post(server, "/messages", messagesRequest)
        assert.strictEqual(response.status, status)
        assert.strictEqual(yield* text(response), JSON.stringify({ type: "error", error: { type, message } }))
      }
      const overridden = yield* post(server, "/messages", messagesRequest)
      assert.strictEqual(overridden.status, 529)
      assert.deepStrictEqual(yield* json(overridden), { type: "error", error: { type: "api_error", message: "busy" } })
      const hinted = yield* post(server, "/messages", messagesRequest)
      assert.strictEqual(hinted.headers.get("content-type"), "application/json")
      assert.strictEqual(hinted.headers.get("request-id"), `req_fault${String(expected.length + 2).padStart(6, "0")}`)
      assert.strictEqual(hinted.headers.get("retry-after"), "7")
      assert.strictEqual(hinted.headers.get("retry-after-ms"), "7000")
      assert.strictEqual(hinted.headers.get("x-should-retry"), "false")
      assert.strictEqual(hinted.headers.get("anthropic-ratelimit-requests-remaining"), "0")
      assert.strictEqual((yield* json(hinted)).error.type, "rate_limit_error")
    })))

  it.live("StreamError sends afterChunks events, then Anthropic's error event, and ends the response", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [
          { _tag: "StreamError", afterChunks: 4 },
          { _tag: "StreamError", afterChunks: 100, status: 500 },
          { _tag: "StreamError", afterChunks: 1 }
        ]
      })
      const response = yield* post(server, "/messages", { ...messagesRequest, stream: true })
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("request-id"), "req_fault000001")
      const body = yield* text(response)
      assert.isTrue(
        body.endsWith(
          `event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n`
        )
      )
      const events = namedEvents(body)
      assert.deepStrictEqual(events.map((event) => event.type), [...messageEventTypes.slice(0, 4), "error"])
      assert.strictEqual(events[3].delta.text, "The")
      // However many events are asked for, the stream never ends before its error.
      const late = namedEvents(yield* text(yield* post(server, "/messages", { ...messagesRequest, stream: true })))
      assert.deepStrictEqual(late.map((event) => event.type), [...messageEventTypes.slice(0, -1), "error"])
      assert.deepStrictEqual(late.at(-1), {
        type: "error",
        error: { type: "api_error", message: "Internal server error" }
      })
      const unstreamed = yield* post(server, "/messages", messagesRequest)
      assert.strictEqual(unstreamed.status, 529)
      assert.deepStrictEqual(yield* json(unstreamed), {
        type: "error",
        error: { type: "overloaded_error", message: "Overloaded" }
      })
    })))

  it.live("StreamBreak never sends message_stop; SchemaBreak drops content and counts in a string", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "StreamBreak", afterChunks: 100 }, { _tag: "SchemaBreak" }, { _tag: "SchemaBreak" }]
      })
      const broken = yield* readAll(yield* post(server, "/messages", { ...messagesRequest, stream: true }))
      assert.oneOf(broken.failure?.cause?.code, resetCodes)
      assert.deepStrictEqual(namedEvents(broken.received).map((event) => event.type), messageEventTypes.slice(0, -1))
      assert.deepStrictEqual(yield* json(yield* post(server, "/messages", messagesRequest)), {
        id: "msg_fault000002",
        type: "message",
        role: "assistant",
        model: "claude-sonnet-4-5",
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { input_tokens: "3", output_tokens: 4 }
      })
      const stream = namedEvents(yield* text(yield* post(server, "/messages", { ...messagesRequest, stream: true })))
      assert.deepStrictEqual(stream.map((event) => event.type), ["message_start", "message_stop"])
      assert.isUndefined(stream[0].message.content)
      assert.strictEqual(stream[0].message.usage.input_tokens, "3")
    })))

  it.live("StallBody and ResetBody cut the stream of events; TruncatedJson the message", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "StallBody", ms: FaultServer.never, afterChunks: 3 }, { _tag: "ResetBody" }, {
          _tag: "TruncatedJson"
        }]
      })
      const stalled = yield* post(server, "/messages", { ...messagesRequest, stream: true })
      const first = namedEvents(yield* readUntil(stalled, (received) => received.split("\n\n").length > 3))
      assert.deepStrictEqual(first.map((event) => event.type), ["message_start", "content_block_start", "ping"])
      const reset = yield* readAll(yield* post(server, "/messages", { ...messagesRequest, stream: true }))
      assert.oneOf(reset.failure?.cause?.code, resetCodes)
      assert.deepStrictEqual(namedEvents(reset.received).map((event) => event.type), ["message_start"])
      const truncated = yield* text(yield* post(server, "/messages", messagesRequest))
      assert.isTrue(truncated.startsWith(`{"id":"msg_fault000003","type":"message",`))
      assert.throws(() => JSON.parse(truncated), SyntaxError)
    })))

  it.live("capacity refuses in Anthropic's format, keeping the plan's status", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ capacity: { concurrent: 0 } })
      const full = yield* post(server, "/messages", messagesRequest)
      assert.strictEqual(full.status, 503)
      assert.match(full.headers.get("request-id") ?? "", /^req_/)
      assert.deepStrictEqual(yield* json(full), {
        type: "error",
        error: {
          type: "api_error",
          message: "The server is at capacity (0 requests in flight). Please try again later."
        }
      })
      yield* server.setPlan({ capacity: { concurrent: 0, status: 429, retryAfter: "3" } })
      const limited = yield* post(server, "/messages", messagesRequest)
      assert.strictEqual(limited.status, 429)
      assert.strictEqual(limited.headers.get("retry-after"), "3")
      assert.strictEqual((yield* json(limited)).error.type, "rate_limit_error")
    })))
})

describe("FaultServer StreamError on chat completions and embeddings", () => {
  it.live("a chat stream gets OpenAI's error object as a chunk of its own, and no [DONE]", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "StreamError", afterChunks: 2, code: "overloaded" }, { _tag: "StreamError", afterChunks: 2 }]
      })
      const response = yield* post(server, "/chat/completions", {
        model: "m",
        messages: [{ role: "user", content: "Say hello" }],
        stream: true
      })
      assert.strictEqual(response.status, 200)
      const chunks = (yield* text(response)).split("\n\n").filter((event) => event !== "").map((event) => {
        assert.isTrue(event.startsWith("data: "), event)
        return JSON.parse(event.slice("data: ".length))
      })
      assert.strictEqual(chunks.length, 3)
      assert.deepStrictEqual(chunks[1].choices[0].delta, { content: "The" })
      assert.deepStrictEqual(chunks[2], {
        error: {
          message: "The engine is currently overloaded, please try again later.",
          type: "server_error",
          param: null,
          code: "overloaded"
        }
      })
      const embeddings = yield* post(server, "/embeddings", { model: "e", input: "x" })
      assert.strictEqual(embeddings.status, 503)
      assert.strictEqual(embeddings.headers.get("x-request-id"), "req_fault000002")
      assert.strictEqual((yield* json(embeddings)).error.type, "server_error")
    })))
})

describe("FaultPlan StreamError", () => {
  it.effect("decodes from JSON, and refuses a status that is not an error", () =>
    Effect.gen(function*() {
      const plan = yield* FaultPlan.decodeJson(JSON.stringify({
        steps: [{ _tag: "StreamError", afterChunks: 3, status: 529, type: "overloaded_error", message: "Overloaded" }]
      }))
      assert.deepStrictEqual(plan.steps, [{
        _tag: "StreamError",
        afterChunks: 3,
        status: 529,
        type: "overloaded_error",
        message: "Overloaded"
      }])
      for (const bad of [{ _tag: "StreamError", afterChunks: 1, status: 200 }, { _tag: "StreamError" }]) {
        assert.isTrue(Either.isLeft(yield* either(FaultPlan.decode({ steps: [bad] }))), JSON.stringify(bad))
      }
    }))
})
