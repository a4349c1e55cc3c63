/**
 * The error bodies providers send, and what they mean for the caller.
 *
 * OpenAI wraps the error: `{"error": {"message", "type", "param", "code"}}`. Mistral sends it flat:
 * `{"object": "error", "message", "type", "param", "code"}`, its 429 reading
 * `{"type": "rate_limited", "code": "1300"}`. Codes arrive as strings or numbers, messages as strings
 * or (Mistral validation errors) objects, so both are read leniently: an error body is evidence,
 * not a contract, and a body that matches neither shape still leaves the status to decide.
 *
 * The same bodies arrive as events of a 200 stream when the provider fails after accepting it
 * (Anthropic adds its own: `event: error` with `{"type": "error", "error": {"type", "message"}}`,
 * which reads as OpenAI's shape); `fromErrorEvent` maps them onto the failure their status would give.
 */
import * as Failure from "@resilient-ai/policy/Failure"
import * as Failures from "@resilient-ai/policy/internal/failures"
import * as RetryHint from "@resilient-ai/policy/internal/retryHint"
import * as Option from "effect/Option"

/** What an error body said, whichever shape it had. */
export interface Details {
  readonly code?: string | undefined
  readonly type?: string | undefined
  readonly message?: string | undefined
}

/** The fields both shapes share: `message` and `param` may be anything, `type` and `code` have their types or are null. */
interface Fields {
  readonly message?: unknown
  readonly type?: string | null | undefined
  readonly code?: string | number | null | undefined
}

/** `candidate` as the error's fields, when it is an object whose `type` and `code` have their types. */
const fieldsOf = (candidate: unknown): Fields | undefined => {
  if (typeof candidate !== "object" || candidate === null) return undefined
  const { code, type } = candidate as { readonly code?: unknown; readonly type?: unknown }
  const typeFits = type === undefined || type === null || typeof type === "string"
  const codeFits = code === undefined || code === null || typeof code === "string" || typeof code === "number"
  return typeFits && codeFits ? candidate as Fields : undefined
}

const text = (message: unknown): string | undefined => {
  if (message === undefined || message === null) return undefined
  return typeof message === "string" ? message : JSON.stringify(message)
}

/** Reads an error body (already parsed JSON) in OpenAI's shape, else Mistral's; anything else gives no details. */
export const details = (body: unknown): Details => {
  if (typeof body !== "object" || body === null) return {}
  const shaped = body as { readonly error?: unknown; readonly object?: unknown }
  const fields = fieldsOf(shaped.error) ?? (shaped.object === "error" ? fieldsOf(body) : undefined)
  if (fields === undefined) return {}
  return {
    code: fields.code === undefined || fields.code === null ? undefined : String(fields.code),
    type: fields.type ?? undefined,
    message: text(fields.message)
  }
}

/** An error response: its status, its headers, its body (parsed when it is JSON), the model asked for. */
export interface ErrorResponse {
  readonly status: number
  readonly headers: RetryHint.HeaderSource
  readonly body: unknown
  readonly model?: string | undefined
}

/** The response headers and body of an error, mapped onto the policy's failure for it. */
export const toFailure = (response: ErrorResponse, nowMillis: number): Failure.Failure =>
  fromDetails(details(response.body), response, nowMillis)

const fromDetails = ({ code, message, type }: Details, response: ErrorResponse, nowMillis: number): Failure.Failure => {
  const shouldRetry = RetryHint.header(response.headers, "x-should-retry")?.trim().toLowerCase()
  return Failures.fromResponse({
    status: response.status,
    providerCode: code,
    providerType: type,
    detail: message ?? (typeof response.body === "string" ? excerpt(response.body) : undefined),
    retryAfter: Option.getOrUndefined(Option.orElse(
      RetryHint.fromHeaders(response.headers, nowMillis),
      // A rate-limited answer with no Retry-After still says when its limit resets.
      () => response.status === 429 ? RetryHint.fromRateLimitHeaders(response.headers, nowMillis) : Option.none()
    )),
    shouldRetry: shouldRetry === "true" ? true : shouldRetry === "false" ? false : undefined,
    model: response.model
  })
}

/** The status each provider answers an error with, by code or type: Anthropic's types, then OpenAI's and Mistral's. */
const statusOfKind: ReadonlyMap<string, number> = new Map([
  ["invalid_request_error", 400],
  ["authentication_error", 401],
  ["permission_error", 403],
  ["not_found_error", 404],
  ["request_too_large", 413],
  ["rate_limit_error", 429],
  ["api_error", 500],
  ["overloaded_error", 529],
  ["invalid_api_key", 401],
  ["model_not_found", 404],
  ["insufficient_quota", 429],
  ["rate_limit_exceeded", 429],
  // The types of OpenAI's request-rate and token-rate 429s.
  ["requests", 429],
  ["tokens", 429],
  ["server_error", 500],
  ["service_unavailable_error", 503],
  ["server_is_overloaded", 503],
  ["overloaded", 503],
  ["rate_limited", 429]
])

/**
 * The status of the error response an error body belongs in, for an error that arrived without one
 * (inside a 200 stream): a code that is itself an HTTP error status (OpenRouter, vLLM and Gemini
 * send `"code": 503`), else the status the provider gives its code, else its type. Anything else is
 * 500: a provider rejects a bad request or a spent account with a status before the stream starts,
 * so an unnamed error after it is the provider's own failure.
 */
export const statusFor = ({ code, type }: Details): number => {
  const numeric = code === undefined ? Number.NaN : Number(code)
  if (Number.isInteger(numeric) && numeric >= 400 && numeric <= 599) return numeric
  return (code === undefined ? undefined : statusOfKind.get(code)) ??
    (type === undefined ? undefined : statusOfKind.get(type)) ?? 500
}

/**
 * Whether an event of a 200 stream is the provider reporting an error instead of a chunk: Anthropic's
 * `event: error`, or data (with or without an `event:` line) that is an error object — OpenAI's
 * `{"error": {…}}`, Anthropic's `{"type": "error", …}`, Mistral's and vLLM's `{"object": "error", …}`.
 */
export const isErrorEvent = (event: string, body: unknown): boolean => {
  if (event === "error") return true
  if (typeof body !== "object" || body === null) return false
  const fields = body as { readonly error?: unknown; readonly type?: unknown; readonly object?: unknown }
  return (typeof fields.error === "object" && fields.error !== null) || fields.type === "error" ||
    fields.object === "error"
}

/**
 * An error event of a 200 stream (see `isErrorEvent`; `body` is its data, parsed when it is JSON)
 * mapped onto the failure the same body gets in an error response, under the status of `statusFor`:
 * an overloaded or rate-limited stream is retried like a 529 or a 429, a spent quota stops like one.
 */
export const fromErrorEvent = (event: Omit<ErrorResponse, "status">, nowMillis: number): Failure.Failure => {
  const found = details(event.body)
  return fromDetails(found, { ...event, status: statusFor(found) }, nowMillis)
}

/** The start of a body, on one line, for a person to recognise what came back. */
export const excerpt = (body: string, length = 200): string => {
  const flat = body.replace(/\s+/g, " ").trim()
  return flat.length > length ? `${flat.slice(0, length)}…` : flat
}

/**
 * The provider's own id of a response, which its support asks for: OpenAI's and Mistral's
 * `x-request-id`, Anthropic's `request-id`.
 */
export const requestIdOf = (headers: RetryHint.HeaderSource): string | undefined =>
  RetryHint.header(headers, "x-request-id") ?? RetryHint.header(headers, "request-id")
