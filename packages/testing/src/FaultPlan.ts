/**
 * What the fault server does to each request, as plain data.
 *
 * A plan is a script (`steps`, one per arrival), time windows of faults drawn from a seeded PRNG,
 * a capacity limit, and a default. It is a `Schema` so the CLI can load the same plan from a JSON
 * file that a test writes inline, and a mistyped plan fails with a message instead of misbehaving.
 */
import {
  between,
  decoder,
  jsonDecoder,
  literals,
  nonNegative,
  type ParseError,
  StringRecord,
  union
} from "#testing-line"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { fixtureNames } from "./Fixtures.js"

const Millis = Schema.Number.pipe(nonNegative)

/** A normal success after `delayMs` (default: the plan's `latencyMs`, else 0). */
export const Ok = Schema.TaggedStruct("Ok", {
  delayMs: Schema.optional(Millis)
})

/**
 * An error response with a provider error body in the wire format of the endpoint: on OpenAI's
 * endpoints OpenAI's `{"error": {...}}` or, with `style: "mistral"`, Mistral's top-level
 * `{"object": "error", ...}`; on `/v1/messages` Anthropic's `{"type": "error", "error": {...}}`,
 * whose `type` follows the status (529 `overloaded_error`…) and which has no `code`. `type`,
 * `code` and `message` replace the API's own. `retryAfter` becomes `Retry-After`, `retryAfterMs`
 * `retry-after-ms`, `shouldRetry` `x-should-retry`; `headers` are added as given.
 */
export const Status = Schema.TaggedStruct("Status", {
  status: Schema.Int.pipe(between(400, 599)),
  style: Schema.optional(literals(["openai", "mistral"])),
  code: Schema.optional(Schema.String),
  type: Schema.optional(Schema.String),
  message: Schema.optional(Schema.String),
  retryAfter: Schema.optional(Schema.String),
  retryAfterMs: Schema.optional(Schema.String),
  shouldRetry: Schema.optional(Schema.Boolean),
  headers: Schema.optional(StringRecord)
})

/** Read the request, send nothing for `ms`, then answer as `Ok`. `ms` of 1e9 or more: never answer. */
export const StallHeaders = Schema.TaggedStruct("StallHeaders", { ms: Millis })

/**
 * Send the status, the headers and the first half of an `Ok` body (of a stream, the first
 * `afterChunks` events, default 1; 0 sends the headers alone), stall `ms`, then send the rest.
 * `ms` of 1e9 or more: never send the rest.
 */
export const StallBody = Schema.TaggedStruct("StallBody", {
  ms: Millis,
  afterChunks: Schema.optional(Schema.Int.pipe(nonNegative))
})

/** Read the whole request, then reset the connection before any response byte. */
export const ResetHeaders = Schema.TaggedStruct("ResetHeaders", {})

/** Send the headers and part of the body (the first event of a stream), then reset the connection. */
export const ResetBody = Schema.TaggedStruct("ResetBody", {})

/** 200 `application/json` whose body stops in the middle, the response itself ending normally. */
export const TruncatedJson = Schema.TaggedStruct("TruncatedJson", {})

/**
 * 200 with valid JSON that breaks the contract: what carries the answer missing (`choices`, `data`,
 * `output`, `content`) and a token count as a string. Of a stream, that body in its first event.
 */
export const SchemaBreak = Schema.TaggedStruct("SchemaBreak", {})

/** A proxy's HTML error page, `text/html`, status 502 unless given. */
export const HtmlError = Schema.TaggedStruct("HtmlError", {
  status: Schema.optional(Schema.Int.pipe(between(400, 599)))
})

/** A recorded provider response, one for every row of the classification table, served verbatim. */
export const Fixture = Schema.TaggedStruct("Fixture", {
  name: literals(fixtureNames)
})

/**
 * A stream that breaks: send the first `afterChunks` events (never the one that ends the stream:
 * `[DONE]`, `response.completed`, `message_stop`), then reset the connection. A request that did
 * not ask for a stream gets `ResetBody`.
 */
export const StreamBreak = Schema.TaggedStruct("StreamBreak", {
  afterChunks: Schema.Int.pipe(nonNegative)
})

/**
 * A stream that fails as the provider reports it, the response itself ending normally: 200, the
 * first `afterChunks` events (never the one that ends the stream), then the API's error event —
 * Anthropic's `event: error`, the Responses API's `error` and `response.failed`, a chat stream's
 * `data: {"error": {...}}` — and no more. The error is the one `Status` sends for `status`
 * (default: the API's overload, 529 on Anthropic's endpoint, 503 on OpenAI's), `type`, `code` and
 * `message` replacing the API's own. A request that did not ask for a stream gets that `Status`.
 *
 * A fault of its own, not a kind of `StreamBreak`: the client reads a complete response carrying a
 * provider's typed error, where a break leaves it a reset connection and no word on what happened.
 */
export const StreamError = Schema.TaggedStruct("StreamError", {
  afterChunks: Schema.Int.pipe(nonNegative),
  status: Schema.optional(Schema.Int.pipe(between(400, 599))),
  type: Schema.optional(Schema.String),
  code: Schema.optional(Schema.String),
  message: Schema.optional(Schema.String)
})

/**
 * Any response, verbatim: `status` (default 200), `headers` as given (`content-length` is computed
 * unless `chunked`),
 * and a body of `body` text or, for bytes that are not UTF-8, `bodyBase64`, sent `repeat` times
 * (default 1) to make a body of any size. For what no other fault covers: a wrong content type, an
 * empty 200, a 200 whose body is an error object, invalid UTF-8, a body over a size limit.
 */
export const Raw = Schema.TaggedStruct("Raw", {
  status: Schema.optional(Schema.Int.pipe(between(200, 599))),
  headers: Schema.optional(StringRecord),
  body: Schema.optional(Schema.String),
  bodyBase64: Schema.optional(Schema.String),
  repeat: Schema.optional(Schema.Int.pipe(between(1, 100_000_000))),
  /** Send the body chunked, one write per repeat, with no `content-length`: its size shows only as it arrives. */
  chunked: Schema.optional(Schema.Boolean)
})

/** Read the whole request, then close the connection without a response: a FIN, not a reset. */
export const Close = Schema.TaggedStruct("Close", {})

/** One thing the server can do to a request. */
export const Fault = union([
  Ok,
  Status,
  StallHeaders,
  StallBody,
  ResetHeaders,
  ResetBody,
  TruncatedJson,
  SchemaBreak,
  HtmlError,
  Fixture,
  StreamBreak,
  StreamError,
  Raw,
  Close
])

/** One thing the server can do to a request. */
export type Fault = typeof Fault.Type

/**
 * A fault applied by time since the server started (or since the last `setPlan`): a request arriving
 * in `[fromMs, toMs)` gets `fault` with probability `share` (default 1).
 */
export const Window = Schema.Struct({
  fromMs: Millis,
  toMs: Millis,
  fault: Fault,
  share: Schema.optional(Schema.Number.pipe(between(0, 1)))
})

/** A fault applied by time. */
export type Window = typeof Window.Type

/**
 * A concurrency limit: requests beyond `concurrent` in flight get `status` (default 503) at once,
 * as a saturated self-hosted pool answers: an OpenAI-style body, or Anthropic's error body (its type
 * for the status) on `/v1/messages`.
 */
export const Capacity = Schema.Struct({
  concurrent: Schema.Int.pipe(nonNegative),
  status: Schema.optional(literals([503, 429])),
  retryAfter: Schema.optional(Schema.String)
})

/** A concurrency limit. */
export type Capacity = typeof Capacity.Type

/**
 * The whole plan. Each admitted request gets, in order: the next of `steps`; else the first window
 * that covers its arrival time and wins its draw; else `otherwise` (default `Ok`).
 */
export const Plan = Schema.Struct({
  steps: Schema.optional(Schema.Array(Fault)),
  windows: Schema.optional(Schema.Array(Window)),
  capacity: Schema.optional(Capacity),
  otherwise: Schema.optional(Fault),
  /** Service time of `Ok` responses, in milliseconds. Default 0. */
  latencyMs: Schema.optional(Millis),
  /** Seed of the PRNG that draws window shares, so a run repeats. Default 1. */
  seed: Schema.optional(Schema.Int)
})

/** The whole plan. */
export type Plan = typeof Plan.Type

// A key the plan does not know is an error: in a hand-written file, `"window"` for `"windows"`
// would otherwise be dropped, and the server would quietly serve no faults.
const strict = { onExcessProperty: "error", errors: "all" } as const

/** Decodes a plan from an unknown value, such as parsed JSON. Unknown keys are errors. */
export const decode: (u: unknown) => Effect.Effect<Plan, ParseError> = decoder(Plan, strict)

/** Decodes a plan from JSON text, as the CLI reads it from a file. Unknown keys are errors. */
export const decodeJson: (text: string) => Effect.Effect<Plan, ParseError> = jsonDecoder(Plan, strict)
