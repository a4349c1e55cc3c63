import { assert, describe, it } from "@effect/vitest"
import type { FaultPlan } from "@resilient-ai/testing"
import { type Decision, FaultEngine, type Incoming } from "../../packages/testing/src/internal/faultEngine.js"

// The decisions the server tests cannot pin on the real clock or through a socket: exact window
// edges, which rule wins when several could apply, and how a request is read before any of them.

const chat = { model: "m", messages: [{ role: "user", content: "Say hello" }] }

const post = (at: number, body: unknown = chat, path = "/v1/chat/completions"): Incoming => ({
  method: "POST",
  path,
  body,
  at
})

const status = (code: number): FaultPlan.Fault => ({ _tag: "Status", status: code })

/** The status a decision answers with: a refusal's, a `Status` fault's, 200 for `Ok`. */
const answer = (decision: Decision): number => {
  if (decision._tag === "Refuse") return decision.status
  if (decision.fault._tag === "Status") return decision.fault.status
  assert.strictEqual(decision.fault._tag, "Ok")
  return 200
}

describe("FaultEngine plan", () => {
  it("applies a window from fromMs up to but not including toMs, counted from the last setPlan", () => {
    const plan: FaultPlan.Plan = {
      windows: [
        { fromMs: 100, toMs: 200, fault: status(503) },
        { fromMs: 200, toMs: 300, fault: status(500) }
      ]
    }
    const engine = new FaultEngine(plan)
    const at = (ms: number) => answer(engine.decide(post(ms), 0))
    assert.deepStrictEqual([99.9, 100, 199.9, 200, 299.9, 300].map(at), [200, 503, 503, 500, 500, 200])
    engine.setPlan(plan, 1_000)
    assert.deepStrictEqual([1_099.9, 1_100, 1_200, 1_300].map(at), [200, 503, 500, 200])
  })

  it("takes the next step before any window, and the first covering window that wins its draw", () => {
    const engine = new FaultEngine({
      steps: [status(400)],
      windows: [
        { fromMs: 0, toMs: 100, fault: status(429), share: 0 },
        { fromMs: 0, toMs: 100, fault: status(503) },
        { fromMs: 0, toMs: 100, fault: status(500) }
      ],
      otherwise: status(502)
    })
    const at = (ms: number) => answer(engine.decide(post(ms), 0))
    // The step applies inside the windows; the 429 window never wins its draw, so the 503 one
    // answers and hides the 500 one; after the windows, otherwise.
    assert.deepStrictEqual([0, 0, 50, 100].map(at), [400, 503, 503, 502])
  })

  it("refuses beyond capacity without taking a step", () => {
    const engine = new FaultEngine({ capacity: { concurrent: 2 }, steps: [status(500)] })
    const full = engine.decide(post(0), 2)
    assert.deepStrictEqual(full, {
      _tag: "Refuse",
      status: 503,
      error: {
        message: "The server is at capacity (2 requests in flight). Please try again later.",
        type: "overloaded",
        code: null
      },
      headers: {}
    })
    assert.strictEqual(answer(engine.decide(post(0), 1)), 500, "the step is still the next one")
    assert.strictEqual(answer(engine.decide(post(0), 1)), 200)
  })

  it("answers a probe's GET /v1/models by the windows and otherwise alone: no step, no capacity", () => {
    const engine = new FaultEngine({
      capacity: { concurrent: 1 },
      steps: [status(500)],
      windows: [{ fromMs: 100, toMs: 200, fault: status(503) }],
      otherwise: status(502)
    })
    const models = (at: number): Incoming => ({ method: "GET", path: "/v1/models", body: "", at })
    // At capacity, before the window: otherwise; in the window: the window's fault.
    assert.deepStrictEqual([answer(engine.decide(models(0), 5)), answer(engine.decide(models(150), 5))], [502, 503])
    assert.strictEqual(answer(engine.decide(post(0), 0)), 500, "the step is still the chat request's")
  })
})

describe("FaultEngine reading a request", () => {
  it("refuses what the API refuses, each with its status, parameter and code, before any capacity", () => {
    const engine = new FaultEngine({ capacity: { concurrent: 0 } })
    const refusal = (incoming: Incoming) => {
      const decision = engine.decide(incoming, 0)
      assert.strictEqual(decision._tag, "Refuse", JSON.stringify(incoming))
      return decision._tag === "Refuse"
        ? [decision.status, decision.error.param ?? null, decision.error.code, decision.error.message]
        : []
    }
    const embeddings = (body: unknown) => post(0, body, "/v1/embeddings")
    assert.deepStrictEqual(refusal({ ...post(0), method: "GET", path: "/v1/files" }), [
      404,
      null,
      null,
      "Invalid URL (GET /v1/files)"
    ])
    assert.deepStrictEqual(refusal({ ...post(0), method: "POST", path: "/v1/models" }), [
      405,
      null,
      null,
      "Invalid method for URL (POST /v1/models)"
    ])
    assert.deepStrictEqual(refusal(post(0, { messages: [] })), [400, null, null, "you must provide a model parameter"])
    assert.deepStrictEqual(refusal(post(0, { model: "m", messages: "hi" })), [
      400,
      "messages",
      "invalid_type",
      "Invalid type for 'messages': expected an array."
    ])
    assert.deepStrictEqual(refusal(embeddings({ model: "m" })), [
      400,
      "input",
      "missing_required_parameter",
      "Missing required parameter: 'input'."
    ])
    for (const input of [[], [{}], ["a", 1], 3]) {
      assert.deepStrictEqual(refusal(embeddings({ model: "m", input })).slice(0, 3), [400, "input", "invalid_value"])
    }
    // Well formed, the same requests meet the capacity of 0.
    assert.strictEqual(refusal(post(0))[0], 503)
    assert.strictEqual(refusal(embeddings({ model: "m", input: "x" }))[0], 503)
  })

  it("reads what the answer depends on: the model, the stream and its usage, the prompt, the inputs", () => {
    const engine = new FaultEngine({})
    const request = (incoming: Incoming) => {
      const decision = engine.decide(incoming, 0)
      return decision._tag === "Admit" ? decision.request : decision
    }
    assert.deepStrictEqual(
      request(post(0, {
        model: "m",
        stream: true,
        stream_options: { include_usage: true },
        // 9 characters, a newline and 10 more: 20 characters, 5 tokens; parts that are not text count nothing.
        messages: [{ role: "system", content: "Be brief." }, {
          role: "user",
          content: [{ type: "text", text: "Say hello " }, { type: "image_url", image_url: "x" }]
        }]
      })),
      { endpoint: "chat", model: "m", stream: true, includeUsage: true, promptTokens: 5 }
    )
    assert.deepStrictEqual(
      request(
        post(0, { model: "e", input: ["a", [1, 2]], dimensions: 2.5, encoding_format: "base64" }, "/v1/embeddings")
      ),
      { endpoint: "embeddings", model: "e", inputs: ["a", "1 2"], dimensions: 8, base64: true }
    )
  })
})

describe("FaultEngine reading the Responses and Messages APIs", () => {
  const engine = new FaultEngine({})
  const request = (path: string, body: unknown) => {
    const decision = engine.decide(post(0, body, path), 0)
    return decision._tag === "Admit" ? decision.request : decision
  }

  it("reads a response request and a message request: the model, the stream, the prompt with its system text", () => {
    // "Be brief." and a newline and "Say hello": 19 characters, 5 tokens.
    assert.deepStrictEqual(
      request("/v1/responses", { model: "o", input: "Say hello", instructions: "Be brief.", stream: true }),
      { endpoint: "responses", model: "o", stream: true, includeUsage: true, promptTokens: 5 }
    )
    assert.deepStrictEqual(
      request("/v1/messages", {
        model: "c",
        max_tokens: 16,
        system: [{ type: "text", text: "Be brief." }],
        messages: [{ role: "user", content: [{ type: "text", text: "Say hello" }] }]
      }),
      { endpoint: "messages", model: "c", stream: false, includeUsage: true, promptTokens: 5 }
    )
  })

  it("refuses a message request in Anthropic's words, and beyond capacity with Anthropic's type for the status", () => {
    const refusal = (decision: Decision) => {
      assert.strictEqual(decision._tag, "Refuse")
      return decision._tag === "Refuse" ? [decision.status, decision.error.type, decision.error.message] : []
    }
    assert.deepStrictEqual(refusal(engine.decide(post(0, { max_tokens: 1, messages: [] }, "/v1/messages"), 0)), [
      400,
      "invalid_request_error",
      "model: Field required"
    ])
    const full = new FaultEngine({ capacity: { concurrent: 1, status: 429 } })
    const message = { model: "c", max_tokens: 1, messages: [] }
    assert.deepStrictEqual(refusal(full.decide(post(0, message, "/v1/messages"), 1)), [
      429,
      "rate_limit_error",
      "The server is at capacity (1 requests in flight). Please try again later."
    ])
    assert.strictEqual(refusal(full.decide(post(0, { model: "o", input: "x" }, "/v1/responses"), 1))[1], "rate_limited")
  })
})
