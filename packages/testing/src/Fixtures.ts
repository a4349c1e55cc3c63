/**
 * Recorded responses, one for every row of the classification table, as the providers send them.
 *
 * Each body is the exact text a client receives (OpenAI pretty-prints its JSON, Mistral does not),
 * so a test that serves one checks the client against the real wire format rather than against
 * our idea of it. Identifiers, organisations and timestamps are made up; shapes, types, codes,
 * messages and headers are the providers'.
 */
import * as FaultServerBody from "./internal/faultServerBody.js"

/** The names of every recorded response, in a stable order. */
export const fixtureNames = [
  "chatSuccess",
  "chatSuccessMistral",
  "chatStream",
  "embeddingsSuccess",
  "rateLimited",
  "rateLimitedMistral",
  "quotaExhausted",
  "serverError",
  "overloaded",
  "overloadedMistral",
  "auth",
  "badRequest",
  "modelNotFound",
  "modelNotFound503",
  "badGatewayHtml",
  "malformedJson",
  "schemaMismatch"
] as const

/** The name of a recorded response. */
export type FixtureName = typeof fixtureNames[number]

/** One recorded response: served verbatim, with a `content-length` for the body. */
export interface Fixture {
  readonly status: number
  /** Response headers, lower-case names. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** What the response is and which failure a client must map it to. */
  readonly description: string
}

// OpenAI pretty-prints success bodies with two spaces, ending in a newline (error bodies with four).
const openAiJson = (value: unknown): string => JSON.stringify(value, null, 2) + "\n"

const jsonHeaders = (requestId: string, extra: Readonly<Record<string, string>> = {}): Record<string, string> => ({
  "content-type": "application/json",
  "x-request-id": requestId,
  "openai-version": "2020-10-01",
  "openai-processing-ms": "312",
  ...extra
})

const chatSuccessBody = openAiJson(FaultServerBody.openAiChatCompletion(
  { id: "chatcmpl-CfAUl2x6TzPbX0v4nD9kQe7HrYw3s", created: 1764450120, model: "gpt-4o-mini-2024-07-18" },
  "Paris is the capital of France.",
  FaultServerBody.usage(14, 8),
  "fp_560af6e559"
))

const streamChunk = (
  delta: Readonly<Record<string, unknown>>,
  finishReason: string | null,
  choices = true
): string => {
  const base = {
    id: "chatcmpl-CfAV0c1oZJp4mWq8sRt2Ld6NbXe9u",
    object: "chat.completion.chunk",
    created: 1764450135,
    model: "gpt-4o-mini-2024-07-18",
    service_tier: "default",
    system_fingerprint: "fp_560af6e559"
  }
  const value = choices
    ? { ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }], usage: null }
    : { ...base, choices: [], usage: { prompt_tokens: 14, completion_tokens: 3, total_tokens: 17 } }
  return FaultServerBody.sseEvent(value)
}

/** Every recorded response, by name. */
export const fixtures: Readonly<Record<FixtureName, Fixture>> = {
  chatSuccess: {
    status: 200,
    headers: jsonHeaders("req_5d1f0c6a2e8b4b7f9a3c1d2e4f6a8b0c", {
      "x-ratelimit-limit-requests": "10000",
      "x-ratelimit-remaining-requests": "9999",
      "x-ratelimit-reset-requests": "6ms",
      "x-ratelimit-limit-tokens": "200000",
      "x-ratelimit-remaining-tokens": "199985",
      "x-ratelimit-reset-tokens": "4ms"
    }),
    body: chatSuccessBody,
    description: "OpenAI chat completion, 200 with usage (and the message's `refusal`/`annotations`, " +
      "`service_tier`, `system_fingerprint`, token details): a success"
  },
  chatSuccessMistral: {
    status: 200,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      id: "5b1e2f3c9d8a4e6f8a7b6c5d4e3f2a1b",
      object: "chat.completion",
      model: "mistral-small-latest",
      usage: { prompt_tokens: 10, total_tokens: 19, completion_tokens: 9 },
      created: 1764450200,
      choices: [
        {
          index: 0,
          message: { role: "assistant", tool_calls: null, content: "Paris is the capital of France." },
          finish_reason: "stop"
        }
      ]
    }),
    description: "Mistral chat completion, 200: compact JSON, `tool_calls: null` and no `logprobs` in the choice; " +
      "a success"
  },
  chatStream: {
    status: 200,
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "x-request-id": "req_9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f"
    },
    body: streamChunk({ role: "assistant", content: "", refusal: null }, null) +
      streamChunk({ content: "Paris" }, null) +
      streamChunk({ content: "." }, null) +
      streamChunk({}, "stop") +
      streamChunk({}, null, false) +
      FaultServerBody.sseDone,
    description: "OpenAI streamed chat completion with `stream_options.include_usage`: every chunk has " +
      "`usage: null` until a last chunk with empty `choices` carries it, then `data: [DONE]`; a success"
  },
  embeddingsSuccess: {
    status: 200,
    headers: jsonHeaders("req_1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d", { "openai-model": "text-embedding-3-small" }),
    body: openAiJson({
      object: "list",
      data: [
        {
          object: "embedding",
          index: 0,
          embedding: [-0.0069292835, 0.5324011, -0.29015473, 0.10283749, 0.6001752, -0.31855613, 0.23006189, -0.3317215]
        }
      ],
      model: "text-embedding-3-small",
      usage: { prompt_tokens: 5, total_tokens: 5 }
    }),
    description: "OpenAI embeddings with `encoding_format: \"float\"` and `dimensions: 8`: a success " +
      "(without `encoding_format` the official SDK asks for base64 and would misread this body)"
  },
  rateLimited: {
    status: 429,
    headers: jsonHeaders("req_7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b", {
      "retry-after": "2",
      "retry-after-ms": "2000",
      "x-ratelimit-limit-requests": "500",
      "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-requests": "2s"
    }),
    body: FaultServerBody.errorBody("openai", {
      message: "Rate limit reached for gpt-4o-mini in organization org-FaultServer0000000000000 on requests per " +
        "min (RPM): Limit 500, Used 500, Requested 1. Please try again in 2s. Visit " +
        "https://platform.openai.com/account/rate-limits to learn more.",
      type: "requests",
      param: null,
      code: "rate_limit_exceeded"
    }),
    description: "OpenAI 429 \"slow down\" with `retry-after: 2` and `retry-after-ms: 2000`: RateLimited, " +
      "retryable after the hint"
  },
  rateLimitedMistral: {
    status: 429,
    headers: { "content-type": "application/json" },
    body: FaultServerBody.errorBody("mistral", {
      message: "Requests rate limit exceeded",
      type: "rate_limited",
      code: "1300"
    }),
    description: "Mistral 429: a top-level error object (no `error` wrapper), code \"1300\" as a string, no " +
      "`Retry-After`: RateLimited, retryable with backoff"
  },
  quotaExhausted: {
    status: 429,
    headers: jsonHeaders("req_3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c"),
    body: FaultServerBody.errorBody("openai", {
      message: "You exceeded your current quota, please check your plan and billing details. For more " +
        "information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
      type: "insufficient_quota",
      param: null,
      code: "insufficient_quota"
    }),
    description: "OpenAI 429 whose code is `insufficient_quota`: QuotaExhausted, terminal despite the 429"
  },
  serverError: {
    status: 500,
    headers: jsonHeaders("req_0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"),
    body: FaultServerBody.errorBody("openai", {
      message: "The server had an error while processing your request. Sorry about that!",
      type: "server_error",
      param: null,
      code: null
    }),
    description: "OpenAI 500 with `type: server_error` and `code: null`: ServerError, retryable"
  },
  overloaded: {
    status: 503,
    headers: jsonHeaders("req_6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d"),
    body: FaultServerBody.errorBody("openai", {
      message: "That model is currently overloaded with other requests. You can retry your request, or contact " +
        "us through our help center at help.openai.com if the error persists. (Please include the request ID " +
        "req_6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d in your message.)",
      type: "server_error",
      param: null,
      code: "overloaded"
    }),
    description: "OpenAI-style 503 \"model overloaded\" (OpenAI has sent `code: null` here too; the status " +
      "decides): Overloaded, retryable"
  },
  overloadedMistral: {
    status: 503,
    headers: { "content-type": "application/json" },
    body: FaultServerBody.errorBody("mistral", {
      message: "Service tier capacity exceeded for this model.",
      type: "invalid_request_error",
      code: null
    }),
    description: "Mistral 503 \"service tier capacity exceeded\": note `type: invalid_request_error` on a " +
      "capacity failure, so only the status says Overloaded, retryable"
  },
  auth: {
    status: 401,
    headers: jsonHeaders("req_2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f"),
    body: FaultServerBody.errorBody("openai", {
      message: "Incorrect API key provided: sk-test. You can find your API key at " +
        "https://platform.openai.com/account/api-keys.",
      type: "invalid_request_error",
      param: null,
      code: "invalid_api_key"
    }),
    description: "OpenAI 401 `invalid_api_key`: AuthenticationFailed, terminal"
  },
  badRequest: {
    status: 400,
    headers: jsonHeaders("req_8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a"),
    body: FaultServerBody.errorBody("openai", {
      message: "Invalid type for 'temperature': expected a decimal, but got a string instead.",
      type: "invalid_request_error",
      param: "temperature",
      code: "invalid_type"
    }),
    description: "OpenAI 400 `invalid_request_error` naming the parameter: ClientError, terminal"
  },
  modelNotFound: {
    status: 404,
    headers: jsonHeaders("req_4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b"),
    body: FaultServerBody.errorBody("openai", {
      message: "The model `gpt-5-turbo` does not exist or you do not have access to it.",
      type: "invalid_request_error",
      param: null,
      code: "model_not_found"
    }),
    description: "OpenAI 404 `model_not_found`: ModelUnavailable, terminal"
  },
  modelNotFound503: {
    status: 503,
    headers: { "content-type": "application/json; charset=utf-8" },
    body: JSON.stringify({
      error: {
        code: "model_not_found",
        message: "No available channel for model gpt-4o-mini under group default (distributor) " +
          "(request id: 20251128223112878876944RINyIMpQ)",
        type: "new_api_error"
      }
    }),
    description: "An OpenAI-compatible gateway's 503 with code `model_not_found` (and no `param`): " +
      "ModelUnavailable, terminal whatever the 503 says"
  },
  badGatewayHtml: {
    status: 502,
    headers: { "content-type": "text/html", "server": "cloudflare" },
    body: FaultServerBody.htmlErrorPage(502),
    description: "A proxy's HTML 502 page in front of the API: ServerError by status, the body is not JSON"
  },
  malformedJson: {
    status: 200,
    headers: jsonHeaders("req_5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c"),
    body: chatSuccessBody.slice(0, 260),
    description: "200 `application/json` whose body stops in the middle of the JSON: NotJson, terminal"
  },
  schemaMismatch: {
    status: 200,
    headers: jsonHeaders("req_9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e"),
    body: openAiJson({
      id: "chatcmpl-CfAX3kq8Yv1bN5mT0pLr6Wd2Hs9Ec",
      object: "chat.completion",
      created: 1764450301,
      model: "gpt-4o-mini-2024-07-18",
      usage: { prompt_tokens: "14", completion_tokens: 8, total_tokens: 22 }
    }),
    description: "200 JSON without `choices` and with `usage.prompt_tokens` a string: ContractViolation, terminal"
  }
}
