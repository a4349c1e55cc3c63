/**
 * The transport's machinery: one HTTP attempt against a model API, every outcome mapped onto the
 * policy's failures. The engine runs its attempts as functions of their context, which hand back
 * what the answer said (usage, limits, the provider's request id, the span's attributes) with the
 * value or the failure. A `ModelClient`'s calls are sent through it; the SDK adapters and the health
 * probe use its parts.
 */
import {
  causeOfClientError,
  decoder,
  failWhenIdle,
  HttpClient,
  HttpClientRequest,
  type HttpClientResponse,
  openFirst,
  type ResponseSchema,
  type SchemaIssue,
  tracerPropagation,
  withJsonBody
} from "#client-line"
import * as Failure from "@resilient-ai/policy/Failure"
import * as Attempts from "@resilient-ai/policy/internal/attempt"
import * as EffectLine from "@resilient-ai/policy/internal/line"
import * as Meters from "@resilient-ai/policy/internal/metrics"
import * as Limiters from "@resilient-ai/policy/internal/rateLimiter"
import * as Resilient from "@resilient-ai/policy/Resilient"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { concat } from "./bytes.js"
import * as GenAi from "./genAi.js"
import * as ProviderError from "./providerError.js"
import { scrubFailure } from "./secrets.js"
import type * as Wiring from "./wiring.js"

/** Where and how to send: the parts of a target the transport needs. */
export interface Endpoint {
  /** Names the target in metrics. */
  readonly target: string
  /** The API's base URL, up to and including the version: `https://api.mistral.ai/v1`. */
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted | undefined
  /** Sent with the logical call's request id on every attempt, so the provider can deduplicate. */
  readonly idempotencyHeader: string
  /** A response body larger than this is not read: `ResponseTooLarge`. */
  readonly maxResponseBytes: number
  /** The connect timeout of the dispatcher, to name it in a `ConnectTimeout`. */
  readonly connectTimeout: Duration.Duration
}

/** Node and undici error codes that mean the connection was never made: nothing was sent. */
const connectCodes = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_NONAME",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "EADDRNOTAVAIL"
])

/** Codes of a connection dropped under an exchange. */
const resetCodes = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET", "UND_ERR_CLOSED", "ECONNABORTED"])

interface TransportCause {
  readonly code: string | undefined
  readonly message: string
  /** Bytes this connection had written when it failed, when the client says (undici does). */
  readonly bytesWritten: number | undefined
}

/** The innermost error with a code, looking through `cause` chains and aggregate errors. */
const causeOf = (error: unknown): TransportCause => {
  const seen = new Set<unknown>()
  const queue: Array<unknown> = [error]
  let first: TransportCause | undefined
  while (queue.length > 0) {
    const current = queue.shift()
    if (typeof current !== "object" || current === null || seen.has(current)) continue
    seen.add(current)
    const candidate = current as {
      readonly code?: unknown
      readonly message?: unknown
      readonly cause?: unknown
      readonly errors?: unknown
      readonly socket?: { readonly bytesWritten?: unknown }
    }
    if (typeof candidate.code === "string") {
      const bytesWritten = candidate.socket?.bytesWritten
      return {
        code: candidate.code,
        message: typeof candidate.message === "string" ? candidate.message : candidate.code,
        bytesWritten: typeof bytesWritten === "number" ? bytesWritten : undefined
      }
    }
    first ??= {
      code: undefined,
      message: typeof candidate.message === "string" ? candidate.message : String(current),
      bytesWritten: undefined
    }
    queue.push(candidate.cause)
    if (Array.isArray(candidate.errors)) queue.push(...candidate.errors)
  }
  return first ?? { code: undefined, message: String(error), bytesWritten: undefined }
}

const detailOf = (cause: TransportCause): string =>
  cause.code === undefined ? cause.message : `${cause.code}: ${cause.message}`

/**
 * Maps a failure to get a response (no headers yet) onto the policy's failures. What cannot be
 * told apart is classified the cautious way: an unknown transport error may have reached the model.
 */
export const fromRequestError = (error: unknown, endpoint: Endpoint): Failure.Failure => {
  const cause = causeOf(error)
  const detail = detailOf(cause)
  if (cause.code !== undefined && connectCodes.has(cause.code)) {
    return new Failure.ConnectFailed({ detail, code: cause.code })
  }
  if (cause.code === "UND_ERR_CONNECT_TIMEOUT") return new Failure.ConnectTimeout({ timeout: endpoint.connectTimeout })
  if (cause.code === "UND_ERR_HEADERS_TIMEOUT") {
    return new Failure.ReadTimeout({ timeout: endpoint.connectTimeout, phase: "headers" })
  }
  if (cause.code === "UND_ERR_BODY_TIMEOUT") {
    return new Failure.ReadTimeout({ timeout: endpoint.connectTimeout, phase: "body" })
  }
  if (cause.code === "UND_ERR_ABORTED" || cause.code === "ABORT_ERR") {
    return new Failure.Cancelled({ reason: detail })
  }
  // A reset on a connection that had written nothing cannot have delivered the request.
  const afterSend = !(cause.code !== undefined && resetCodes.has(cause.code) && cause.bytesWritten === 0)
  return new Failure.ConnectionReset({ afterSend, detail })
}

/** A failure while reading a body that had started: the request was delivered, so it may have run. */
const fromBodyError = (error: unknown): Failure.Failure =>
  new Failure.ConnectionReset({ afterSend: true, detail: detailOf(causeOf(error)) })

/** The field-level detail of a schema mismatch. */
export const contractViolation = (issues: ReadonlyArray<SchemaIssue>): Failure.ContractViolation =>
  new Failure.ContractViolation({
    issues: issues.map((issue) => ({
      path: issue.path.map((key, index) =>
        typeof key === "number" ? `[${key}]` : index === 0 ? String(key) : `.${String(key)}`
      )
        .join(""),
      message: issue.message
    }))
  })

const textDecoder = /* @__PURE__ */ new TextDecoder()
// JSON must be UTF-8 (RFC 8259): a lenient decoder would turn bad bytes into U+FFFD, silently
// changing the model's output instead of failing as a body that is not JSON.
const strictDecoder = /* @__PURE__ */ new TextDecoder("utf-8", { fatal: true })

/** The text of a body that is valid UTF-8, else `undefined`. */
const utf8 = (bytes: Uint8Array): string | undefined => {
  try {
    return strictDecoder.decode(bytes)
  } catch {
    return undefined
  }
}

/**
 * Reads a whole body, refusing to read past `maxBytes`. A body that declares its length under the
 * limit is read in one piece (the transport stops at the declared length); a chunked or undeclared
 * one is streamed and counted as it comes, so an endless body stops at the limit.
 */
const readBody = (
  response: HttpClientResponse.HttpClientResponse,
  maxBytes: number
): Effect.Effect<Uint8Array, Failure.Failure> => {
  const length = response.headers["content-length"]
  const declared = length === undefined ? Number.NaN : Number(length)
  if (Number.isInteger(declared) && declared >= 0 && declared <= maxBytes) {
    return Effect.mapBoth(response.arrayBuffer, { onFailure: fromBodyError, onSuccess: (body) => new Uint8Array(body) })
  }
  if (Number.isFinite(declared) && declared > maxBytes) {
    // A body left unread holds its connection, mid-response, until garbage collection: start reading
    // and stop at the first chunk, which ends the stream and with it the request and its connection.
    return Effect.andThen(
      Effect.ignore(Stream.runDrain(Stream.take(response.stream, 1))),
      Effect.fail(new Failure.ResponseTooLarge({ status: response.status, limitBytes: maxBytes }))
    )
  }
  return Effect.suspend(() => {
    const parts: Array<Uint8Array> = []
    let size = 0
    return response.stream.pipe(
      Stream.mapError(fromBodyError),
      Stream.runForEach((part) => {
        size += part.byteLength
        if (size > maxBytes) {
          return Effect.fail(new Failure.ResponseTooLarge({ status: response.status, limitBytes: maxBytes }))
        }
        parts.push(part)
        return Effect.void
      }),
      Effect.map(() => concat(parts, size))
    )
  })
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return notJsonMarker
  }
}
const notJsonMarker: unique symbol = Symbol("notJson")

/** Maps an error response onto its failure, reading (at most `maxResponseBytes` of) its body. */
const errorResponse = (
  response: HttpClientResponse.HttpClientResponse,
  endpoint: Endpoint,
  model: string
): Effect.Effect<never, Failure.Failure> =>
  Effect.flatMap(
    Effect.orElseSucceed(readBody(response, endpoint.maxResponseBytes), () => undefined),
    (body) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        // An error body is evidence, not a contract: decoded leniently, a stray byte keeps its code.
        const text = body === undefined ? "" : textDecoder.decode(body)
        const parsed = parseJson(text)
        return Effect.fail(ProviderError.toFailure({
          status: response.status,
          headers: response.headers,
          body: parsed === notJsonMarker ? text : parsed,
          model
        }, now))
      })
  )

/** The token counts a response reports, when it reports them. */
type Usage = { readonly prompt_tokens: number; readonly completion_tokens?: number | undefined } | null | undefined

/** Records a response's token usage as metrics, and in the attempt's report: its log line, its span. */
const recordUsage = (endpoint: Endpoint, model: string, usage: Usage, report: Attempts.Report): void => {
  if (usage === undefined || usage === null) return
  report.usage = usage.prompt_tokens + (usage.completion_tokens ?? 0)
  const metrics = Meters.forTarget(endpoint.target, model)
  EffectLine.update(metrics.tokens("prompt"), usage.prompt_tokens, EffectLine.noMetricScope)
  report.annotate("promptTokens", usage.prompt_tokens)
  if (usage.completion_tokens !== undefined) {
    EffectLine.update(metrics.tokens("completion"), usage.completion_tokens, EffectLine.noMetricScope)
    report.annotate("completionTokens", usage.completion_tokens)
  }
  GenAi.describeUsage(report, usage.prompt_tokens, usage.completion_tokens)
}

/** Puts the limits the provider stated in an answer's headers in the attempt's report, when it stated any. */
export const reportLimits = (report: Attempts.Report, header: (name: string) => string | null | undefined) => {
  const limits = Limiters.limitsOf(header)
  if (limits.requestsPerMinute !== undefined || limits.tokensPerMinute !== undefined) report.limits = limits
}

/** Where an attempt finds the HTTP client it sends with. */
type Sender<R> = Effect.Effect<HttpClient.HttpClient, never, R>

/** The client in context; read when a call is made, so that a program that never makes one loads none. */
const senderInContext = (): Sender<HttpClient.HttpClient> => HttpClient.HttpClient

/**
 * `wiring` for attempts an Effect `HttpClient` sends: the client keeps their spans, but sends their
 * trace context to the provider only if the target says so. Set on each attempt's fiber as it is
 * made: wrapping the HTTP client instead would copy the fiber's refs twice on every request.
 */
export const withTracePolicy = <W extends Wiring.Wiring>(wiring: W): W =>
  wiring.target.propagateTrace
    ? wiring
    : { ...wiring, state: { ...wiring.state, attemptRefs: [[tracerPropagation, false] as const] } }

/**
 * `make`, called once per key and kept in `cache`: for what is made from a value that lives as long
 * as the client (the client, an endpoint, a schema) and is looked up on every call.
 */
const memo = <K, V>(
  cache: { get(key: K): V | undefined; set(key: K, value: V): unknown },
  make: (key: K) => V
) =>
(key: K): V => {
  let value = cache.get(key)
  if (value === undefined) {
    value = make(key)
    cache.set(key, value)
  }
  return value
}

/**
 * A client given as a value: a caller that holds one spares every call the providing of a
 * context, which costs an interruptible region and a restore per call.
 */
const senderGiven = /* @__PURE__ */ memo(
  new WeakMap<HttpClient.HttpClient, Sender<never>>(),
  (client): Sender<never> => Effect.succeed(client)
)

/** The request every call to a path of an endpoint starts from, before its body. */
type Prepared = (endpoint: Endpoint) => (path: string) => HttpClientRequest.HttpClientRequest

/**
 * The requests of the calls that accept `accept`, with URL, key and `Accept` set once per endpoint
 * and path: a call only adds its body, an attempt its idempotency key.
 */
const preparedAccepting = (accept: string): Prepared =>
  memo(new WeakMap(), (endpoint: Endpoint) =>
    memo(new Map(), (path: string) => {
      const unsigned = HttpClientRequest.post(path).pipe(
        HttpClientRequest.prependUrl(endpoint.baseUrl.replace(/\/+$/, "")),
        HttpClientRequest.accept(accept)
      )
      return endpoint.apiKey === undefined ? unsigned : HttpClientRequest.bearerToken(unsigned, endpoint.apiKey)
    }))

/** One decoder per schema: a schema is a module constant, a call is made for every request. */
const decoderOf: <A>(schema: ResponseSchema<A>) => (u: unknown) => Effect.Effect<A, ReadonlyArray<SchemaIssue>> =
  /* @__PURE__ */ memo(
    new WeakMap(),
    (schema: ResponseSchema<any>) => decoder(schema)
  )

/** One logical call, which every attempt of it sends again: where, what, and how a value is decoded. */
interface Call<A> {
  readonly endpoint: Endpoint
  readonly path: string
  readonly body: Record<string, unknown>
  readonly model: string
  readonly decode: (u: unknown) => Effect.Effect<A, ReadonlyArray<SchemaIssue>>
  readonly usageOf: (value: A) => Usage
}

const callOf = <A>(
  endpoint: Endpoint,
  path: string,
  body: Record<string, unknown>,
  schema: ResponseSchema<A>,
  usageOf: (value: A) => Usage
): Call<A> => ({ endpoint, path, body, model: String(body.model), decode: decoderOf(schema), usageOf })

/**
 * Decodes one parsed JSON value of a success with the call's schema and records its token usage
 * and, for the attempt's `first` value, its id and model, in `report`: `notJsonMarker` (text that
 * is not JSON, or bytes that are not UTF-8) is the `NotJson` of `notJson()`, JSON that breaks the
 * schema a `ContractViolation`.
 */
const decodeValue = <A>(
  call: Call<A>,
  parsed: unknown,
  notJson: () => Failure.NotJson,
  report: Attempts.Report,
  first: boolean
): Effect.Effect<A, Failure.Failure> => {
  if (parsed === notJsonMarker) return Effect.fail(notJson())
  return call.decode(parsed).pipe(
    Effect.mapError(contractViolation),
    Effect.map((value) => {
      if (first) GenAi.describeAnswer(report, value)
      recordUsage(call.endpoint, call.model, call.usageOf(value), report)
      return value
    })
  )
}

/** One attempt of a call: given its context inside a resilient call, none outside one. */
export type Attempt<B, R> = (
  context: Attempts.AttemptContext | undefined
) => Effect.Effect<Attempts.Answered<B>, Attempts.Reported<Failure.Failure>, R>

/**
 * Sends one attempt of `call` and reads its success with `read`; every other outcome is its failure
 * (no response, an error status with the provider's error decoded), with the API key scrubbed from
 * it. Either comes back with the attempt's report: the provider's request id, the limits it stated,
 * the usage its answer reported. The request is built on the first attempt and sent again by every
 * retry with its attempt's idempotency key, so a retry does not serialize the body again.
 */
const send = <A, B, R, RR>(
  sender: Sender<R>,
  call: Call<A>,
  prepared: Prepared,
  read: (
    call: Call<A>,
    response: HttpClientResponse.HttpClientResponse,
    report: Attempts.Report
  ) => Effect.Effect<B, Failure.Failure, RR>
): Attempt<B, R | RR> => {
  const { endpoint } = call
  let built: HttpClientRequest.HttpClientRequest | undefined
  return (context) =>
    Effect.flatMap(sender, (client) => {
      const report = new Attempts.Report()
      context?.reached("headers", report)
      built ??= withJsonBody(prepared(endpoint)(call.path), call.body)
      const request = context === undefined
        ? built
        : HttpClientRequest.setHeader(built, endpoint.idempotencyHeader, context.requestId)
      return client.execute(request).pipe(
        Effect.mapError((error) => fromRequestError(causeOfClientError(error), endpoint)),
        Effect.flatMap((response) => {
          context?.reached("body", report)
          // The platform's headers are a record of lower-case names: looked up, not searched.
          const providerRequestId = response.headers["x-request-id"] ?? response.headers["request-id"]
          if (providerRequestId !== undefined) report.annotate("providerRequestId", providerRequestId)
          reportLimits(report, (name) => response.headers[name])
          return response.status >= 400
            ? errorResponse(response, endpoint, call.model)
            : read(call, response, report)
        }),
        Effect.mapBoth({
          onFailure: (failure) => new Attempts.Reported(scrubFailure(failure, endpoint.apiKey), report),
          onSuccess: (value) => new Attempts.Answered(value, report)
        })
      )
    })
}

/**
 * An attempt sent outside the engine: the answer alone, its report dropped. Inside a resilient call
 * it still carries the call's request id as its idempotency key.
 */
const plainly = <B, R>(attempt: Attempt<B, R>): Effect.Effect<B, Failure.Failure, R> =>
  Effect.flatMap(EffectLine.getRef(Resilient.CurrentAttempt), (view) =>
    Effect.mapBoth(
      attempt(view === undefined ? undefined : { ...view, reached: () => {} }),
      { onFailure: (reported) => reported.failure, onSuccess: (answered) => answered.value }
    ))

const jsonRequests = /* @__PURE__ */ preparedAccepting("application/json")

/** A success that is one JSON value: the whole body (at most `maxResponseBytes`), decoded. */
const readJson = <A>(
  call: Call<A>,
  response: HttpClientResponse.HttpClientResponse,
  report: Attempts.Report
): Effect.Effect<A, Failure.Failure> =>
  Effect.flatMap(readBody(response, call.endpoint.maxResponseBytes), (bytes) => {
    const text = utf8(bytes)
    const notJson = () =>
      new Failure.NotJson({
        status: response.status,
        contentType: response.headers["content-type"],
        excerpt: ProviderError.excerpt(text ?? textDecoder.decode(bytes))
      })
    return decodeValue(call, text === undefined ? notJsonMarker : parseJson(text), notJson, report, true)
  })

/**
 * One JSON request: a success is the body decoded with `schema`; a body that is not JSON or breaks
 * the schema is a terminal failure carrying the detail, never repaired.
 */
export const postJson = <A>(
  endpoint: Endpoint,
  path: string,
  body: Record<string, unknown>,
  schema: ResponseSchema<A>,
  usageOf: (value: A) => Usage
): Effect.Effect<A, Failure.Failure, HttpClient.HttpClient> =>
  plainly(send(senderInContext(), callOf(endpoint, path, body, schema, usageOf), jsonRequests, readJson))

/** `postJson` with the HTTP client given rather than read from the context. */
export const postJsonWith = <A>(
  client: HttpClient.HttpClient,
  endpoint: Endpoint,
  path: string,
  body: Record<string, unknown>,
  schema: ResponseSchema<A>,
  usageOf: (value: A) => Usage
): Effect.Effect<A, Failure.Failure> => plainly(jsonAttempt(client, endpoint, path, body, schema, usageOf))

/** An attempt of a JSON request, for the engine: given its context, it hands back its report with its value or failure. */
export const jsonAttempt = <A>(
  client: HttpClient.HttpClient,
  endpoint: Endpoint,
  path: string,
  body: Record<string, unknown>,
  schema: ResponseSchema<A>,
  usageOf: (value: A) => Usage
): Attempt<A, never> => send(senderGiven(client), callOf(endpoint, path, body, schema, usageOf), jsonRequests, readJson)

/**
 * The text of a UTF-8 byte stream, whatever the chunk boundaries. Bytes that are not UTF-8 fail the
 * stream with `NotJson`, as they fail a JSON body: repaired into U+FFFD they would reach the caller
 * as the model's words.
 */
const utf8Text = <E, R>(bytes: Stream.Stream<Uint8Array, E, R>, status: number) =>
  Stream.suspend(() => {
    const decoder = new TextDecoder("utf-8", { fatal: true })
    const decode = (chunk?: Uint8Array) =>
      Effect.try({
        try: () => chunk === undefined ? decoder.decode() : decoder.decode(chunk, { stream: true }),
        catch: () =>
          new Failure.NotJson({
            status,
            contentType: "text/event-stream",
            excerpt: ProviderError.excerpt(chunk === undefined ? "" : textDecoder.decode(chunk))
          })
      })
    return bytes.pipe(
      Stream.mapEffect((chunk) => decode(chunk)),
      Stream.concat(Stream.fromEffect(decode())),
      Stream.filter((text) => text !== "")
    )
  })

/** One server-sent event: its type (`message` unless an `event:` line names another) and its data. */
export interface ServerSentEvent {
  readonly event: string
  readonly data: string
}

/** The value of a field line, without the one space that may follow the colon. */
const fieldValue = (line: string, name: string): string =>
  line.slice(line.startsWith(`${name}: `) ? name.length + 2 : name.length + 1)

/**
 * Reads server-sent events a line at a time: each line gives the event a blank line completes, if
 * any. An event without data is not one.
 */
const eventReader = () => {
  // The event being read: its lines come one at a time, and a blank line ends it.
  let pendingEvent: string | undefined
  let pendingData: Array<string> = []
  return (line: string): ServerSentEvent | undefined => {
    if (line === "") {
      const complete = pendingData.length === 0
        ? undefined
        : { event: pendingEvent ?? "message", data: pendingData.join("\n") }
      pendingEvent = undefined
      pendingData = []
      return complete
    }
    if (line.startsWith("data:")) pendingData.push(fieldValue(line, "data"))
    else if (line.startsWith("event:")) pendingEvent = fieldValue(line, "event")
    return undefined
  }
}

/** Splits a byte stream of server-sent events into events. */
export const serverSentEvents = <E, R>(
  bytes: Stream.Stream<Uint8Array, E, R>,
  status = 200
): Stream.Stream<ServerSentEvent, E | Failure.NotJson, R> =>
  Stream.suspend(() =>
    utf8Text(bytes, status).pipe(
      Stream.splitLines,
      Stream.map(eventReader()),
      Stream.filter((event): event is ServerSentEvent => event !== undefined)
    )
  )

/**
 * The whole events in a chunk of server-sent events (an event it cuts short is left out; a chunk
 * that is not UTF-8 holds none): what an SDK adapter reads of a stream's first chunk, with no
 * stream to run.
 */
export const eventsIn = (chunk: Uint8Array): ReadonlyArray<ServerSentEvent> => {
  const text = utf8(chunk)
  if (text === undefined) return []
  const read = eventReader()
  const events: Array<ServerSentEvent> = []
  for (const line of text.split(/\r\n|\r|\n/)) {
    const event = read(line)
    if (event !== undefined) events.push(event)
  }
  return events
}

/** A stream that has delivered its first chunk: the chunk, and the rest to read. */
export interface Opened<A> {
  readonly first: A
  readonly rest: Stream.Stream<A, Failure.Failure>
}

/**
 * `Opened`, as an attempt hands it to the engine: a later chunk that says something (the usage, at
 * the end) comes with its report.
 */
export interface OpenedReporting<A> {
  readonly first: A
  readonly rest: Stream.Stream<A | Attempts.Answered<A>, Failure.Failure>
}

const eventStreamRequests = /* @__PURE__ */ preparedAccepting("text/event-stream")

/**
 * A success that is a stream of server-sent events, each a value, read up to its first chunk. The
 * rest is pulled from the same read, in the caller's `Scope`.
 */
const readEventStream = (idleAfter: Duration.Duration) =>
<A>(
  call: Call<A>,
  response: HttpClientResponse.HttpClientResponse,
  report: Attempts.Report
): Effect.Effect<OpenedReporting<A>, Failure.Failure, Scope.Scope> => {
  const { endpoint } = call
  let seen = 0
  let decoded = 0
  const chunks: Stream.Stream<A | Attempts.Answered<A>, Failure.Failure> = serverSentEvents(
    response.stream.pipe(Stream.mapError(fromBodyError)),
    response.status
  ).pipe(
    Stream.takeWhile(({ data }) => data.trim() !== "[DONE]"),
    Stream.mapEffect(({ data, event }): Effect.Effect<A | Attempts.Answered<A>, Failure.Failure> => {
      seen += data.length
      if (seen > endpoint.maxResponseBytes) {
        return Effect.fail(
          new Failure.ResponseTooLarge({ status: response.status, limitBytes: endpoint.maxResponseBytes })
        )
      }
      const parsed = parseJson(data)
      const payload = parsed === notJsonMarker ? data : parsed
      // The provider failed after accepting the request: the same error as in a status response,
      // so before the first chunk the policy retries or stops on it as it would on that response.
      if (ProviderError.isErrorEvent(event, payload)) {
        return Effect.flatMap(
          Clock.currentTimeMillis,
          (now) =>
            Effect.fail(
              ProviderError.fromErrorEvent({ headers: response.headers, body: payload, model: call.model }, now)
            )
        )
      }
      const notJson = () =>
        new Failure.NotJson({
          status: response.status,
          contentType: "text/event-stream",
          excerpt: ProviderError.excerpt(data)
        })
      if (decoded++ === 0) return decodeValue(call, parsed, notJson, report, true)
      // A later chunk reports for itself (its usage, at the end of the stream), when it says anything.
      const said = new Attempts.Report()
      return Effect.map(
        decodeValue(call, parsed, notJson, said, false),
        (value) =>
          said.usage === undefined && said.attributes === undefined ? value : new Attempts.Answered(value, said)
      )
    }),
    (events) => failWhenIdle(events, idleAfter, () => new Failure.ReadTimeout({ timeout: idleAfter, phase: "body" }))
  )
  // Split by hand rather than with `Stream.peel`, which runs the stream on a fiber of its own and
  // hands every chunk across to the reader: about twice the CPU per stream, and a read ahead.
  return Effect.flatMap(openFirst(chunks), (opened) =>
    opened === undefined
      ? Effect.fail(
        new Failure.ContractViolation({ issues: [{ path: "", message: "the stream ended before its first chunk" }] })
      )
      : Effect.succeed({
        // The first chunk reports in the attempt's report: it is never wrapped.
        first: opened.first as A,
        rest: Stream.mapError(opened.rest, (failure) => scrubFailure(failure, endpoint.apiKey))
      }))
}

/**
 * One streaming request, read up to its first chunk: that is where retrying must stop, since a
 * replay after a chunk reached the caller would duplicate content. The rest of the stream lives
 * in the caller's `Scope`; a failure in it ends the stream with the failure, `ReadTimeout` when no
 * chunk arrives for `idleTimeout`. An error event in place of a chunk is the failure of the error
 * response it stands for (`ProviderError.fromErrorEvent`): first, it is retried or not as that is.
 */
export const postStream = <A>(
  endpoint: Endpoint,
  path: string,
  body: Record<string, unknown>,
  schema: ResponseSchema<A>,
  usageOf: (value: A) => Usage,
  idleTimeout: Duration.Duration
): Effect.Effect<Opened<A>, Failure.Failure, HttpClient.HttpClient | Scope.Scope> =>
  Effect.map(
    plainly(streamAttempt(endpoint, path, body, schema, usageOf, idleTimeout)),
    ({ first, rest }) => ({ first, rest: Stream.map(rest, Attempts.valueOf) })
  )

/**
 * An attempt of a streaming request, for the engine: its report comes back with the first chunk,
 * and a later chunk that says something (the usage, at the end) with its own.
 */
export const streamAttempt = <A>(
  endpoint: Endpoint,
  path: string,
  body: Record<string, unknown>,
  schema: ResponseSchema<A>,
  usageOf: (value: A) => Usage,
  idleTimeout: Duration.Duration
): Attempt<OpenedReporting<A>, HttpClient.HttpClient | Scope.Scope> =>
  send(
    senderInContext(),
    callOf(endpoint, path, body, schema, usageOf),
    eventStreamRequests,
    readEventStream(idleTimeout)
  )
