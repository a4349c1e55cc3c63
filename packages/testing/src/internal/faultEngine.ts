/**
 * What the fault server does with each request, decided from the plan and the request alone: no
 * sockets and no clock of its own (the server says when a request arrived and how many are in
 * flight), so every decision can be checked without a server.
 *
 * A request is first read as the API reads it: an unknown path is refused 404, another method 405,
 * a body that is not a JSON object or lacks what the endpoint needs 400. Then the plan's capacity
 * may refuse it. Only an admitted request gets a fault: the next step, else the first window that
 * covers its arrival and wins its draw, else `otherwise`. A refusal takes no step and no draw.
 */
import type * as FaultPlan from "../FaultPlan.js"
import * as FaultServerBody from "./faultServerBody.js"
import { prng } from "./prng.js"

/** A chat completions request, as far as the answer depends on it. */
export interface ChatRequest {
  readonly endpoint: "chat"
  readonly model: string
  readonly stream: boolean
  /** `stream_options.include_usage`: the stream ends with a chunk carrying the usage. */
  readonly includeUsage: boolean
  readonly promptTokens: number
}

/** An embeddings request, as far as the answer depends on it. */
export interface EmbeddingsRequest extends FaultServerBody.Embeddings {
  readonly endpoint: "embeddings"
}

/** A well-formed request to one of the endpoints the server answers. */
export type ModelRequest = ChatRequest | EmbeddingsRequest

/** A request as the server received it. */
export interface Incoming {
  readonly method: string
  /** The path without the query string, as `/v1/chat/completions`. */
  readonly path: string
  /** The parsed JSON body, or the raw text when it was not JSON. */
  readonly body: unknown
  /** Milliseconds since the server started. */
  readonly at: number
}

/** A request answered at once with an OpenAI error body: not the plan's to answer, or beyond its capacity. */
export interface Refuse {
  readonly _tag: "Refuse"
  readonly status: number
  readonly error: FaultServerBody.ErrorObject
  /** Headers beside the body's own. */
  readonly headers: Readonly<Record<string, string>>
}

/** A request the plan answers, with the fault it gets. */
export interface Admit {
  readonly _tag: "Admit"
  readonly request: ModelRequest
  readonly fault: FaultPlan.Fault
}

/** What the server does with a request. */
export type Decision = Refuse | Admit

const endpoints: Readonly<Record<string, ModelRequest["endpoint"]>> = {
  "/v1/chat/completions": "chat",
  "/v1/embeddings": "embeddings"
}

const refuse = (
  status: number,
  error: FaultServerBody.ErrorObject,
  headers: Readonly<Record<string, string>> = {}
): Refuse => ({ _tag: "Refuse", status, error, headers })

const invalidRequest = (message: string, param: string | null, code: string | null): FaultServerBody.ErrorObject => ({
  message,
  type: "invalid_request_error",
  param,
  code
})

const unparsable = invalidRequest(
  "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP " +
    "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have " +
    "trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)",
  null,
  null
)

const missing = (param: string) =>
  refuse(400, invalidRequest(`Missing required parameter: '${param}'.`, param, "missing_required_parameter"))

/** The inputs of an embeddings request, one string each, or undefined when `input` is not valid. */
const embeddingInputs = (input: unknown): ReadonlyArray<string> | undefined => {
  if (typeof input === "string") return [input]
  if (!Array.isArray(input) || input.length === 0) return undefined
  // An array of numbers is one input of token ids; an array of arrays is several.
  if (input.every((x) => typeof x === "number")) return [input.join(" ")]
  if (input.every((x) => typeof x === "string" || (Array.isArray(x) && x.every((n) => typeof n === "number")))) {
    return input.map((x: string | ReadonlyArray<number>) => typeof x === "string" ? x : x.join(" "))
  }
  return undefined
}

const messageText = (messages: ReadonlyArray<unknown>): string =>
  messages.map((message: unknown) => {
    const content = typeof message === "object" && message !== null
      ? (message as { readonly content?: unknown }).content
      : undefined
    if (typeof content === "string") return content
    if (Array.isArray(content)) {
      return content.map((part: unknown) =>
        typeof part === "object" && part !== null && typeof (part as { text?: unknown }).text === "string"
          ? (part as { text: string }).text
          : ""
      ).join("")
    }
    return ""
  }).join("\n")

const readChat = (body: Readonly<Record<string, unknown>>, model: string): ChatRequest | Refuse => {
  const messages = body["messages"]
  if (messages === undefined) return missing("messages")
  if (!Array.isArray(messages)) {
    return refuse(400, invalidRequest("Invalid type for 'messages': expected an array.", "messages", "invalid_type"))
  }
  const options = body["stream_options"]
  return {
    endpoint: "chat",
    model,
    stream: body["stream"] === true,
    includeUsage: typeof options === "object" && options !== null &&
      (options as { readonly include_usage?: unknown }).include_usage === true,
    promptTokens: FaultServerBody.tokenCount(messageText(messages))
  }
}

const readEmbeddings = (body: Readonly<Record<string, unknown>>, model: string): EmbeddingsRequest | Refuse => {
  if (body["input"] === undefined) return missing("input")
  const inputs = embeddingInputs(body["input"])
  if (inputs === undefined) {
    return refuse(
      400,
      invalidRequest(
        "Invalid 'input': expected a string, an array of strings, or an array of token arrays.",
        "input",
        "invalid_value"
      )
    )
  }
  const dimensions = body["dimensions"]
  return {
    endpoint: "embeddings",
    model,
    inputs,
    dimensions: typeof dimensions === "number" && Number.isInteger(dimensions) && dimensions > 0
      ? dimensions
      : FaultServerBody.defaultDimensions,
    base64: body["encoding_format"] === "base64"
  }
}

/** The request as the API reads it, or the refusal the API sends when it cannot. */
const read = ({ body, method, path }: Incoming): ModelRequest | Refuse => {
  const endpoint = endpoints[path]
  if (endpoint === undefined) return refuse(404, invalidRequest(`Invalid URL (${method} ${path})`, null, null))
  if (method !== "POST") {
    return refuse(405, invalidRequest(`Invalid method for URL (${method} ${path})`, null, null), { allow: "POST" })
  }
  // Text that was not JSON arrives as a string, so it is refused here with JSON that is not an object.
  if (typeof body !== "object" || body === null || Array.isArray(body)) return refuse(400, unparsable)
  const fields = body as Readonly<Record<string, unknown>>
  const model = fields["model"]
  if (typeof model !== "string") return refuse(400, invalidRequest("you must provide a model parameter", null, null))
  return endpoint === "chat" ? readChat(fields, model) : readEmbeddings(fields, model)
}

/** A plan and how far the server has come through it: the steps taken, the window clock, the PRNG. */
export class FaultEngine {
  private current: FaultPlan.Plan
  private planStartedAt = 0
  private stepsTaken = 0
  private random: () => number

  constructor(plan: FaultPlan.Plan) {
    this.current = plan
    this.random = prng(plan.seed ?? 1)
  }

  get plan(): FaultPlan.Plan {
    return this.current
  }

  /** Replaces the plan at `at`: the steps start again, windows count from `at`, the PRNG from the seed. */
  setPlan(plan: FaultPlan.Plan, at: number): void {
    this.current = plan
    this.planStartedAt = at
    this.stepsTaken = 0
    this.random = prng(plan.seed ?? 1)
  }

  /** What `incoming` gets while `admitted` admitted requests are in flight. */
  decide(incoming: Incoming, admitted: number): Decision {
    const request = read(incoming)
    if ("_tag" in request) return request
    const capacity = this.current.capacity
    if (capacity !== undefined && admitted >= capacity.concurrent) {
      const status = capacity.status ?? 503
      return refuse(
        status,
        {
          message: `The server is at capacity (${admitted} requests in flight). Please try again later.`,
          type: status === 429 ? "rate_limited" : "overloaded",
          code: null
        },
        capacity.retryAfter === undefined ? {} : { "retry-after": capacity.retryAfter }
      )
    }
    return { _tag: "Admit", request, fault: this.choose(incoming.at) }
  }

  /** The next step, else the first window that covers the arrival and wins its draw, else `otherwise`. */
  private choose(at: number): FaultPlan.Fault {
    const step = this.current.steps?.[this.stepsTaken++]
    if (step !== undefined) return step
    const since = at - this.planStartedAt
    for (const window of this.current.windows ?? []) {
      if (since >= window.fromMs && since < window.toMs) {
        const share = window.share ?? 1
        if (share >= 1 || this.random() < share) return window.fault
      }
    }
    return this.current.otherwise ?? { _tag: "Ok" }
  }
}
