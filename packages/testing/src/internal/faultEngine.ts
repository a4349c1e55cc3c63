/**
 * What the fault server does with each request, decided from the plan and the request alone: no
 * sockets and no clock of its own (the server says when a request arrived and how many are in
 * flight), so every decision can be checked without a server.
 *
 * A request is first read as its API reads it (one table of endpoints, a reader each): an unknown
 * path is refused 404, another method 405, a body that is not a JSON object or lacks what the
 * endpoint needs 400, each in the words of the endpoint's API. Then the plan's capacity may refuse
 * it. Only an admitted request gets a fault: the next step, else the first window that covers its
 * arrival and wins its draw, else `otherwise`. A refusal takes no step and no draw.
 */
import type * as FaultPlan from "../FaultPlan.js"
import * as FaultServerBody from "./faultServerBody.js"
import { prng } from "./prng.js"

/** The wire format an API speaks: OpenAI's (chat completions, embeddings, responses) or Anthropic's (messages). */
export type Api = "openai" | "anthropic"

/**
 * A request for a generated reply, as far as the answer depends on it: OpenAI's chat completions
 * and Responses API, Anthropic's Messages API.
 */
interface ReplyRequest {
  readonly endpoint: "chat" | "responses" | "messages"
  readonly model: string
  readonly stream: boolean
  /** A stream carries the usage: for chat, when `stream_options.include_usage` asks; the others always do. */
  readonly includeUsage: boolean
  readonly promptTokens: number
}

/** An embeddings request, as far as the answer depends on it. */
interface EmbeddingsRequest extends FaultServerBody.Embeddings {
  readonly endpoint: "embeddings"
}

/**
 * `GET /v1/models`, the cheap request a health probe sends. A provider serves its model list apart
 * from inference, so it takes no place in the plan's `capacity` and no step: it gets the window of
 * its arrival or `otherwise`, as the provider's state, and is answered without `latencyMs`.
 */
interface ModelsRequest {
  readonly endpoint: "models"
  readonly model: string
}

/** A well-formed request to one of the endpoints the server answers. */
export type ModelRequest = ReplyRequest | EmbeddingsRequest | ModelsRequest

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

/**
 * A request answered at once with an error body in its API's format (OpenAI's for a path no API
 * has): not the plan's to answer, or beyond its capacity. The error's `type` is in the API's words.
 */
interface Refuse {
  readonly _tag: "Refuse"
  readonly status: number
  readonly error: FaultServerBody.ErrorObject
  /** Headers beside the body's own. */
  readonly headers: Readonly<Record<string, string>>
}

/** A request the plan answers, with the fault it gets. */
interface Admit {
  readonly _tag: "Admit"
  readonly request: ModelRequest
  readonly fault: FaultPlan.Fault
}

/** What the server does with a request. */
export type Decision = Refuse | Admit

type Fields = Readonly<Record<string, unknown>>

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

const invalidType = (param: string, expected: string) =>
  refuse(400, invalidRequest(`Invalid type for '${param}': expected ${expected}.`, param, "invalid_type"))

/** Anthropic names the field and the problem, as its validation reports them. */
const invalidField = (field: string, problem: string) => refuse(400, invalidRequest(`${field}: ${problem}`, null, null))

/** How each API refuses a body it cannot read at all: not a JSON object, or no model. */
const unreadable: Readonly<Record<Api, { readonly notJson: Refuse; readonly noModel: Refuse }>> = {
  openai: {
    notJson: refuse(400, unparsable),
    noModel: refuse(400, invalidRequest("you must provide a model parameter", null, null))
  },
  anthropic: {
    notJson: refuse(400, invalidRequest("The request body is not valid JSON.", null, null)),
    noModel: invalidField("model", "Field required")
  }
}

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

/**
 * The tokens of a prompt: the text of its messages (a string, or the text of each part), after
 * `system` (Anthropic's `system`, the Responses API's `instructions`: a string or text parts) when given.
 */
const promptTokens = (messages: ReadonlyArray<unknown>, system?: unknown): number =>
  FaultServerBody.tokenCount(messageText(system === undefined ? messages : [{ content: system }, ...messages]))

const readChat = (body: Fields, model: string): ReplyRequest | Refuse => {
  const messages = body["messages"]
  if (messages === undefined) return missing("messages")
  if (!Array.isArray(messages)) return invalidType("messages", "an array")
  const options = body["stream_options"]
  return {
    endpoint: "chat",
    model,
    stream: body["stream"] === true,
    includeUsage: typeof options === "object" && options !== null &&
      (options as { readonly include_usage?: unknown }).include_usage === true,
    promptTokens: promptTokens(messages)
  }
}

const readEmbeddings = (body: Fields, model: string): EmbeddingsRequest | Refuse => {
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

/** `input` is a string (one user message) or an array of input items (messages with text content, or other items). */
const readResponses = (body: Fields, model: string): ReplyRequest | Refuse => {
  const input = body["input"]
  if (input === undefined) return missing("input")
  if (typeof input !== "string" && !Array.isArray(input)) {
    return invalidType("input", "a string or an array of input items")
  }
  const instructions = body["instructions"]
  return {
    endpoint: "responses",
    model,
    stream: body["stream"] === true,
    includeUsage: true,
    promptTokens: promptTokens(typeof input === "string" ? [{ content: input }] : input, instructions ?? undefined)
  }
}

const readMessages = (body: Fields, model: string): ReplyRequest | Refuse => {
  const maxTokens = body["max_tokens"]
  if (maxTokens === undefined) return invalidField("max_tokens", "Field required")
  if (!Number.isInteger(maxTokens)) return invalidField("max_tokens", "Input should be a valid integer")
  const messages = body["messages"]
  if (messages === undefined) return invalidField("messages", "Field required")
  if (!Array.isArray(messages)) return invalidField("messages", "Input should be a valid list")
  return {
    endpoint: "messages",
    model,
    stream: body["stream"] === true,
    includeUsage: true,
    promptTokens: promptTokens(messages, body["system"])
  }
}

/** An endpoint the server answers: the API whose wire format it speaks, and how that API reads a request. */
interface Endpoint {
  readonly api: Api
  readonly read: (body: Fields, model: string) => ModelRequest | Refuse
}

const endpoints: Readonly<Record<string, Endpoint>> = {
  "/v1/chat/completions": { api: "openai", read: readChat },
  "/v1/embeddings": { api: "openai", read: readEmbeddings },
  "/v1/responses": { api: "openai", read: readResponses },
  "/v1/messages": { api: "anthropic", read: readMessages }
}

/** The wire format of the API at `path`: OpenAI's for a path the server does not answer. */
export const apiOf = (path: string): Api => endpoints[path]?.api ?? "openai"

/** The request as the API reads it, or the refusal the API sends when it cannot. */
const read = ({ body, method, path }: Incoming): ModelRequest | Refuse => {
  if (path === "/v1/models") {
    return method === "GET"
      ? { endpoint: "models", model: "" }
      : refuse(405, invalidRequest(`Invalid method for URL (${method} ${path})`, null, null), { allow: "GET" })
  }
  const endpoint = endpoints[path]
  if (endpoint === undefined) return refuse(404, invalidRequest(`Invalid URL (${method} ${path})`, null, null))
  if (method !== "POST") {
    return refuse(405, invalidRequest(`Invalid method for URL (${method} ${path})`, null, null), { allow: "POST" })
  }
  // Text that was not JSON arrives as a string, so it is refused here with JSON that is not an object.
  if (typeof body !== "object" || body === null || Array.isArray(body)) return unreadable[endpoint.api].notJson
  const fields = body as Fields
  const model = fields["model"]
  if (typeof model !== "string") return unreadable[endpoint.api].noModel
  return endpoint.read(fields, model)
}

/**
 * The error of a request refused for capacity: OpenAI's words (as a self-hosted pool says it), or
 * Anthropic's type for the status.
 */
const atCapacity = (api: Api, status: number, admitted: number): FaultServerBody.ErrorObject => ({
  message: `The server is at capacity (${admitted} requests in flight). Please try again later.`,
  type: api === "anthropic"
    ? FaultServerBody.defaultError(status, "anthropic").type
    : status === 429
    ? "rate_limited"
    : "overloaded",
  code: null
})

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
    if (request.endpoint === "models") return { _tag: "Admit", request, fault: this.byTime(incoming.at) }
    const capacity = this.current.capacity
    if (capacity !== undefined && admitted >= capacity.concurrent) {
      const status = capacity.status ?? 503
      return refuse(
        status,
        atCapacity(apiOf(incoming.path), status, admitted),
        capacity.retryAfter === undefined ? {} : { "retry-after": capacity.retryAfter }
      )
    }
    return { _tag: "Admit", request, fault: this.choose(incoming.at) }
  }

  /** The next step, else the first window that covers the arrival and wins its draw, else `otherwise`. */
  private choose(at: number): FaultPlan.Fault {
    const step = this.current.steps?.[this.stepsTaken++]
    if (step !== undefined) return step
    return this.byTime(at)
  }

  /** The first window that covers the arrival and wins its draw, else `otherwise`. */
  private byTime(at: number): FaultPlan.Fault {
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
