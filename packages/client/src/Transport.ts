/**
 * One HTTP attempt against a model API, with every outcome mapped onto the policy's failures.
 *
 * The transport never retries: it makes exactly one request and says precisely how it ended, so
 * the policy above it can decide. That precision is the point. A refused connection sent nothing
 * (retry freely); a reset after the request was written may have started a billed generation
 * (replay only when safe); a 429 that says `insufficient_quota` will not pass by waiting. Under a
 * `ModelClient`, an attempt tells the policy which phase it reached, so a timeout is reported as
 * stalling in the headers or in the body, and hands back with its answer the token usage and the
 * limits the provider stated.
 *
 * It runs on `@effect/platform`'s `HttpClient`, which the application provides (on Node,
 * `NodeHttpClient.layerUndici` from `@effect/platform-node`).
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import type { Failure } from "@resilient-ai/policy"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import * as Internal from "./internal/transport.js"

/** Where and how to send: the parts of a target the transport needs. */
export interface Endpoint extends Internal.Endpoint {}

/**
 * Maps a failure to get a response (no headers yet) onto the policy's failures. What cannot be
 * told apart is classified the cautious way: an unknown transport error may have reached the model.
 */
export const fromRequestError: (error: unknown, endpoint: Endpoint) => Failure.Failure = Internal.fromRequestError

/** The field-level detail of a schema mismatch. */
export const contractViolation: (error: ParseResult.ParseError) => Failure.ContractViolation =
  Internal.contractViolation

/** The token counts a response reports, when it reports them. */
type Usage = { readonly prompt_tokens: number; readonly completion_tokens?: number | undefined } | null | undefined

/**
 * One JSON request, with the `HttpClient` in context: a success is the body decoded with `schema`;
 * a body that is not JSON or breaks the schema is a terminal failure carrying the detail, never
 * repaired.
 */
export const postJson: <A, I>(
  endpoint: Endpoint,
  path: string,
  body: Record<string, unknown>,
  schema: Schema.Schema<A, I>,
  usageOf: (value: A) => Usage
) => Effect.Effect<A, Failure.Failure, HttpClient.HttpClient> = Internal.postJson

/** `postJson` with the HTTP client given rather than read from the context. */
export const postJsonWith: <A, I>(
  client: HttpClient.HttpClient,
  endpoint: Endpoint,
  path: string,
  body: Record<string, unknown>,
  schema: Schema.Schema<A, I>,
  usageOf: (value: A) => Usage
) => Effect.Effect<A, Failure.Failure> = Internal.postJsonWith

/** One server-sent event: its type (`message` unless an `event:` line names another) and its data. */
export interface ServerSentEvent extends Internal.ServerSentEvent {}

/** Splits a byte stream of server-sent events into events; an event without data is not one. */
export const serverSentEvents: <E, R>(
  bytes: Stream.Stream<Uint8Array, E, R>,
  status?: number
) => Stream.Stream<ServerSentEvent, E | Failure.NotJson, R> = Internal.serverSentEvents

/** A stream that has delivered its first chunk: the chunk, and the rest to read. */
export interface Opened<A> extends Internal.Opened<A> {}

/**
 * One streaming request, read up to its first chunk: that is where retrying must stop, since a
 * replay after a chunk reached the caller would duplicate content. The rest of the stream lives
 * in the caller's `Scope`; a failure in it ends the stream with the failure, `ReadTimeout` when no
 * chunk arrives for `idleTimeout`. An error event in place of a chunk is the failure of the error
 * response it stands for (`ProviderError.fromErrorEvent`): first, it is retried or not as that is.
 */
export const postStream: <A, I>(
  endpoint: Endpoint,
  path: string,
  body: Record<string, unknown>,
  schema: Schema.Schema<A, I>,
  usageOf: (value: A) => Usage,
  idleTimeout: Duration.Duration
) => Effect.Effect<Opened<A>, Failure.Failure, HttpClient.HttpClient | Scope.Scope> = Internal.postStream
