/**
 * The client's seam, Effect 4 side: the names `effect3.ts` offers, in Effect 4's terms — the HTTP
 * client that moved into `effect` itself, Schema's decoding and issues, pulls that end with `Done`.
 */
import type * as EffectLine from "@resilient-ai/policy/internal/line"
import * as Effect from "effect/Effect"
import * as HttpClient from "effect/http/HttpClient"
import * as HttpClientError from "effect/http/HttpClientError"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import * as Pull from "effect/Pull"
import * as Schema from "effect/Schema"
import * as SchemaIssues from "effect/SchemaIssue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { SchemaIssue } from "./shared.js"

export * as HttpClient from "effect/http/HttpClient"
export * as HttpClientError from "effect/http/HttpClientError"
export * as HttpClientRequest from "effect/http/HttpClientRequest"
export * as HttpClientResponse from "effect/http/HttpClientResponse"

/** What a client built on another fails with when the request could not be answered: an `HttpClientError`. */
export type RequestFailure = HttpClientError.HttpClientError

/** A transport failure of `request`, for a client that wraps another. */
export const requestFailure = (
  request: HttpClientRequest.HttpClientRequest,
  cause: unknown,
  description: string
): RequestFailure =>
  new HttpClientError.HttpClientError({ reason: new HttpClientError.TransportError({ request, cause, description }) })

/** What made the HTTP client fail: the error under its error's reason, when it has one (else `error` itself). */
export const causeOfClientError = (error: unknown): unknown =>
  HttpClientError.isHttpClientError(error) && "cause" in error.reason && error.reason.cause !== undefined
    ? error.reason.cause
    : error

/** `request` with `body` as its JSON body (a body that cannot be written as JSON throws). */
export const withJsonBody = (
  request: HttpClientRequest.HttpClientRequest,
  body: unknown
): HttpClientRequest.HttpClientRequest => HttpClientRequest.bodyJsonUnsafe(request, body)

/** Whether a request's client sends the current span's trace headers with it. */
export const tracerPropagation: EffectLine.Ref<boolean> = HttpClient.TracerPropagationEnabled

/** `client`, sending no trace headers. */
export const withoutTracerPropagation = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.transform(client, (effect) => Effect.provideService(effect, HttpClient.TracerPropagationEnabled, false))

/** A schema a response is decoded with, to values of `A`. */
export type ResponseSchema<A> = Schema.Decoder<A>

/** `schema`, named `identifier` in what its failures say. */
export const identified = <S extends Schema.Top>(schema: S, identifier: string): S =>
  schema.annotate({ identifier }) as S

const formatIssues = /* @__PURE__ */ SchemaIssues.makeFormatterStandardSchemaV1()

/** A decoder of unknown input with `schema`, failing with every issue it finds. */
export const decoder = <A>(schema: ResponseSchema<A>) => {
  const decode = Schema.decodeUnknownEffect(schema, { errors: "all" })
  return (input: unknown): Effect.Effect<A, ReadonlyArray<SchemaIssue>> =>
    Effect.mapError(decode(input), (error) =>
      formatIssues(error.issue).issues.map(({ message, path }) => ({
        path: (path ?? []).map((key) => typeof key === "object" ? key.key : key),
        message
      })))
}

/**
 * Reads `stream` up to its first element without starting a fiber for it: that element and the
 * rest (read from the same pull, in the caller's scope), or `undefined` if it ended first.
 */
export const openFirst = <A, E>(
  stream: Stream.Stream<A, E>
): Effect.Effect<{ readonly first: A; readonly rest: Stream.Stream<A, E> } | undefined, E, Scope.Scope> =>
  Effect.flatMap(Stream.toPull(stream), (pull) =>
    Pull.catchDone(
      Effect.map(pull, ([first, ...buffered]) => ({
        first,
        rest: Stream.concat(Stream.fromIterable(buffered), Stream.fromPull(Effect.succeed(pull)))
      })),
      () => Effect.succeed(undefined)
    ))

/** `stream`, failing with `onTimeout()` when no element arrives for `duration`. */
export const failWhenIdle = <A, E, E2>(
  stream: Stream.Stream<A, E>,
  duration: EffectLine.DurationInput,
  onTimeout: () => E2
): Stream.Stream<A, E | E2> => Stream.timeoutOrElse(stream, { duration, orElse: () => Stream.fail(onTimeout()) })

export type { SchemaIssue } from "./shared.js"
