/**
 * The error bodies providers send, and what they mean for the caller.
 *
 * OpenAI wraps the error: `{"error": {"message", "type", "param", "code"}}`. Mistral sends it flat:
 * `{"object": "error", "message", "type", "param", "code"}`, its 429 reading
 * `{"type": "rate_limited", "code": "1300"}`. Codes arrive as strings or numbers, messages as strings
 * or (Mistral validation errors) objects, so both are read leniently: an error body is evidence,
 * not a contract, and a body that matches neither shape still leaves the status to decide.
 */
import { Failure, RetryHint } from "@resilient-ai/policy"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

const Code = Schema.Union(Schema.String, Schema.Number)

const Fields = {
  message: Schema.optional(Schema.Unknown),
  type: Schema.optional(Schema.NullOr(Schema.String)),
  code: Schema.optional(Schema.NullOr(Code)),
  param: Schema.optional(Schema.Unknown)
}

/** OpenAI's shape. */
export const OpenAiError = Schema.Struct({ error: Schema.Struct(Fields) }).annotations({ identifier: "OpenAiError" })

/** Mistral's shape. */
export const MistralError = Schema.Struct({ object: Schema.Literal("error"), ...Fields }).annotations({
  identifier: "MistralError"
})

/** Either shape. */
export const ProviderError = Schema.Union(OpenAiError, MistralError)
export type ProviderError = typeof ProviderError.Type

/** What an error body said, whichever shape it had. */
export interface Details {
  readonly code?: string | undefined
  readonly type?: string | undefined
  readonly message?: string | undefined
}

const decodeError = Schema.decodeUnknownOption(ProviderError)

const text = (message: unknown): string | undefined => {
  if (message === undefined || message === null) return undefined
  return typeof message === "string" ? message : JSON.stringify(message)
}

/** Reads an error body (already parsed JSON); anything else gives no details. */
export const details = (body: unknown): Details => {
  const decoded = decodeError(body)
  if (Option.isNone(decoded)) return {}
  const fields = "error" in decoded.value ? decoded.value.error : decoded.value
  return {
    code: fields.code === undefined || fields.code === null ? undefined : String(fields.code),
    type: fields.type ?? undefined,
    message: text(fields.message)
  }
}

/** The response headers and body of an error, mapped onto the policy's failure for it. */
export const toFailure = (
  response: {
    readonly status: number
    readonly headers: RetryHint.HeaderSource
    readonly body: unknown
    readonly model?: string | undefined
  },
  nowMillis: number
): Failure.Failure => {
  const { code, message, type } = details(response.body)
  const shouldRetry = RetryHint.header(response.headers, "x-should-retry")?.trim().toLowerCase()
  return Failure.fromResponse({
    status: response.status,
    providerCode: code,
    providerType: type,
    detail: message ?? (typeof response.body === "string" ? excerpt(response.body) : undefined),
    retryAfter: Option.getOrUndefined(RetryHint.fromHeaders(response.headers, nowMillis)),
    shouldRetry: shouldRetry === "true" ? true : shouldRetry === "false" ? false : undefined,
    model: response.model
  })
}

/** The start of a body, on one line, for a person to recognise what came back. */
export const excerpt = (body: string, length = 200): string => {
  const flat = body.replace(/\s+/g, " ").trim()
  return flat.length > length ? `${flat.slice(0, length)}…` : flat
}
