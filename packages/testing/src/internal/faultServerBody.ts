/**
 * The bodies the fault server answers with, and what the APIs it speaks share: the generated reply
 * and its token counts, server-sent event framing, the error bodies of OpenAI, Mistral and
 * Anthropic, a proxy's HTML error page; and the OpenAI / Mistral chat completions (their chunks
 * too) and embeddings lists, with the bodies that break their contract. The Responses API's bodies
 * are in `responsesBody`, Anthropic's messages in `messagesBody`.
 *
 * Pure functions of plain values, apart from any server, so the recorded `Fixtures` use the same
 * formatting as the server. `FaultServer` re-exports the generated reply, which its users read; the
 * tests and the e2e bench's server reach the rest through the package's internal entry.
 */
import { Buffer } from "node:buffer"
import * as Http from "node:http"
import { prng } from "./prng.js"

/** The content of every generated chat reply. */
export const replyText = "The fault server answered."

/** How a generated reply is streamed: one content delta per piece, so its `completion_tokens` is 4. */
export const replyPieces: ReadonlyArray<string> = ["The", " fault", " server", " answered."]

/** The dimension of generated embeddings when the request does not ask for one. */
export const defaultDimensions = 8

/** A rough token count (four characters a token), so usage figures are plausible and deterministic. */
export const tokenCount = (text: string): number => Math.max(1, Math.ceil(text.length / 4))

const fnv1a = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return hash >>> 0
}

/**
 * The embedding served for an input: unit length and deterministic. The values are float32, so the
 * JSON numbers and the base64 encoding carry exactly the same vector.
 */
export const embedding = (input: string, dimensions: number = defaultDimensions): ReadonlyArray<number> => {
  const random = prng(fnv1a(input))
  const raw = Array.from({ length: dimensions }, () => random() * 2 - 1)
  const norm = Math.sqrt(raw.reduce((sum, x) => sum + x * x, 0)) || 1
  return raw.map((x) => Math.fround(x / norm))
}

/** Little-endian float32 bytes in base64, as OpenAI answers `encoding_format: "base64"`. */
export const toBase64 = (vector: ReadonlyArray<number>): string => {
  const bytes = Buffer.alloc(vector.length * 4)
  vector.forEach((x, i) => bytes.writeFloatLE(x, i * 4))
  return bytes.toString("base64")
}

/** The token counts of a chat completion, under the names the API gives them. */
export interface Usage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens: number
}

/** The usage of a completion of `completionTokens` answering a prompt of `promptTokens`. */
export const usage = (promptTokens: number, completionTokens: number): Usage => ({
  prompt_tokens: promptTokens,
  completion_tokens: completionTokens,
  total_tokens: promptTokens + completionTokens
})

/** What tells one chat completion from another: its id, when it was created (Unix seconds), the model. */
export interface Completion {
  readonly id: string
  readonly created: number
  readonly model: string
}

/** A chat completion whose one choice is the assistant's `content`, finished with `stop`. */
export const chatCompletion = (completion: Completion, content: string, tokens: Usage) => ({
  id: completion.id,
  object: "chat.completion",
  created: completion.created,
  model: completion.model,
  choices: [
    {
      index: 0,
      message: { role: "assistant", content, refusal: null },
      logprobs: null,
      finish_reason: "stop"
    }
  ],
  usage: tokens
})

/**
 * A chat completion with all that OpenAI's API adds today and the generated reply leaves out: the
 * message's `annotations`, token details, `service_tier` and `system_fingerprint`.
 */
export const openAiChatCompletion = (
  completion: Completion,
  content: string,
  tokens: Usage,
  systemFingerprint: string
) => {
  const plain = chatCompletion(completion, content, tokens)
  return {
    ...plain,
    choices: plain.choices.map((choice) => ({ ...choice, message: { ...choice.message, annotations: [] } })),
    usage: {
      ...tokens,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: {
        reasoning_tokens: 0,
        audio_tokens: 0,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0
      }
    },
    service_tier: "default",
    system_fingerprint: systemFingerprint
  }
}

/**
 * The chunks of a streamed chat completion, as OpenAI sends them: the role first, one content delta
 * per piece, an empty delta with `finish_reason: "stop"`. With `tokens` (the request set
 * `stream_options.include_usage`), `usage: null` on each of those and a last chunk with empty
 * `choices` carrying the usage.
 */
export const chatCompletionChunks = (
  completion: Completion,
  pieces: ReadonlyArray<string>,
  tokens: Usage | undefined
): ReadonlyArray<unknown> => {
  const base = {
    id: completion.id,
    object: "chat.completion.chunk",
    created: completion.created,
    model: completion.model
  }
  const chunk = (delta: Readonly<Record<string, unknown>>, finishReason: string | null) => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...(tokens === undefined ? {} : { usage: null })
  })
  return [
    chunk({ role: "assistant", content: "" }, null),
    ...pieces.map((piece) => chunk({ content: piece }, null)),
    chunk({}, "stop"),
    ...(tokens === undefined ? [] : [{ ...base, choices: [], usage: tokens }])
  ]
}

/** What an embeddings answer depends on: the request's model and inputs, the dimensions and encoding it asked for. */
export interface Embeddings {
  readonly model: string
  readonly inputs: ReadonlyArray<string>
  readonly dimensions: number
  /** `encoding_format: "base64"`: each vector as base64 float32 bytes instead of numbers. */
  readonly base64: boolean
}

/** An embeddings list: the `embedding` of each input, in order. */
/** OpenAI's `GET /v1/models` answer: the list a health probe reads. */
export const modelList = () => ({
  object: "list",
  data: ["mistral-small-latest", "mistral-embed"].map((id) => ({
    id,
    object: "model",
    created: 1_700_000_000,
    owned_by: "fault-server"
  }))
})

export const embeddingList = (request: Embeddings) => {
  const promptTokens = request.inputs.reduce((sum, input) => sum + tokenCount(input), 0)
  return {
    object: "list",
    data: request.inputs.map((input, index) => {
      const vector = embedding(input, request.dimensions)
      return { object: "embedding", index, embedding: request.base64 ? toBase64(vector) : vector }
    }),
    model: request.model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens }
  }
}

/** Valid JSON that breaks the chat completion contract: no `choices`, and a token count as a string. */
export const brokenChatCompletion = (completion: Completion, stream: boolean) => ({
  id: completion.id,
  object: stream ? "chat.completion.chunk" : "chat.completion",
  created: completion.created,
  model: completion.model,
  usage: { prompt_tokens: "12", completion_tokens: 4, total_tokens: 16 }
})

/** Valid JSON that breaks the embeddings contract: no `data`, and a token count as a string. */
export const brokenEmbeddingList = (model: string) => ({
  object: "list",
  model,
  usage: { prompt_tokens: "3", total_tokens: 3 }
})

/** One server-sent event carrying `value` as JSON, as the API frames each chunk of a stream. */
export const sseEvent = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`

/** One server-sent event named after the `type` of the `value` it carries, as Anthropic and the Responses API do. */
export const namedEvent = (value: { readonly type: string } & Readonly<Record<string, unknown>>): string =>
  `event: ${value.type}\n${sseEvent(value)}`

/**
 * Valid JSON that breaks the contract of a success: `body` without its `content` field, and the
 * `count` of its `usage` as a string.
 */
export const breakContract = (body: Readonly<Record<string, unknown>>, content: string, count: string): unknown => {
  const { [content]: _content, ...rest } = body
  const usage = body["usage"] as Readonly<Record<string, unknown>>
  return { ...rest, usage: { ...usage, [count]: String(usage[count]) } }
}

/** The event that ends an OpenAI stream. */
export const sseDone = "data: [DONE]\n\n"

/**
 * Whose error body: OpenAI's `{"error": {...}}`, Mistral's top-level `{"object": "error", ...}` or
 * Anthropic's `{"type": "error", "error": {"type", "message"}}`.
 */
export type ErrorStyle = "openai" | "mistral" | "anthropic"

/** The fields of a provider error; a `param` not given is sent as `null`. */
export interface ErrorObject {
  readonly message: string
  readonly type: string
  readonly param?: string | null | undefined
  readonly code: string | null
}

/** OpenAI's error object, as its error bodies and a failed chat stream carry it. */
export const openAiError = (error: ErrorObject) => ({ error: { ...error, param: error.param ?? null } })

/** Anthropic's error object, as its error bodies and the error event of its streams carry it: no `param`, no `code`. */
export const anthropicError = (error: ErrorObject) => ({
  type: "error",
  error: { type: error.type, message: error.message }
})

/**
 * An error body as the provider sends it: OpenAI's pretty-printed with four spaces and a newline,
 * Mistral's and Anthropic's compact.
 */
export const errorBody = (style: ErrorStyle, error: ErrorObject): string => {
  switch (style) {
    case "mistral":
      return JSON.stringify({
        object: "error",
        message: error.message,
        type: error.type,
        param: null,
        code: error.code
      })
    case "anthropic":
      return JSON.stringify(anthropicError(error))
    case "openai":
      return JSON.stringify(openAiError(error), null, 4) + "\n"
  }
}

/**
 * Anthropic's error type for each status it documents, with its words; another 4xx is an
 * `invalid_request_error`, another 5xx an `api_error`.
 */
const anthropicErrors: Readonly<Record<number, { readonly type: string; readonly message: string }>> = {
  400: { type: "invalid_request_error", message: "Invalid request" },
  401: { type: "authentication_error", message: "invalid x-api-key" },
  402: { type: "billing_error", message: "Billing error" },
  403: { type: "permission_error", message: "Permission denied" },
  404: { type: "not_found_error", message: "Not found" },
  413: { type: "request_too_large", message: "Request exceeds the maximum allowed number of bytes." },
  429: { type: "rate_limit_error", message: "Rate limited" },
  500: { type: "api_error", message: "Internal server error" },
  504: { type: "timeout_error", message: "Request timeout" },
  529: { type: "overloaded_error", message: "Overloaded" }
}

/**
 * The error a provider sends with `status` when nothing more is said: OpenAI's and Mistral's own
 * words for 429, 401, 500 and 503, Anthropic's type and words for each status it documents.
 */
export const defaultError = (status: number, style: ErrorStyle): ErrorObject => {
  if (style === "anthropic") {
    return {
      ...(anthropicErrors[status] ?? {
        type: status >= 500 ? "api_error" : "invalid_request_error",
        message: Http.STATUS_CODES[status] ?? `HTTP ${status}`
      }),
      code: null
    }
  }
  if (status === 429) {
    return style === "mistral"
      ? { message: "Requests rate limit exceeded", type: "rate_limited", code: "1300" }
      : {
        message: "Rate limit reached for requests. Please try again later.",
        type: "requests",
        code: "rate_limit_exceeded"
      }
  }
  if (status === 401 && style === "openai") {
    return {
      message: "Incorrect API key provided: sk-test. You can find your API key at " +
        "https://platform.openai.com/account/api-keys.",
      type: "invalid_request_error",
      code: "invalid_api_key"
    }
  }
  if (status === 500) {
    return {
      message: "The server had an error while processing your request. Sorry about that!",
      type: "server_error",
      code: null
    }
  }
  if (status === 503) {
    return { message: "The engine is currently overloaded, please try again later.", type: "server_error", code: null }
  }
  return {
    message: Http.STATUS_CODES[status] ?? `HTTP ${status}`,
    type: status >= 500 ? "server_error" : "invalid_request_error",
    code: null
  }
}

/** The HTML error page a proxy (Cloudflare) in front of the API sends with `status`. */
export const htmlErrorPage = (status: number): string => {
  const title = `${status} ${Http.STATUS_CODES[status] ?? "Error"}`
  return `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n<center><h1>${title}</h1></center>\r\n` +
    `<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n`
}
