/**
 * The client's seam, Effect 3 side: what the transport and the SDK adapters use that Effect 4
 * spells differently — the HTTP client of `@effect/platform`, decoding a response with a Schema,
 * a stream split at its first chunk. `effect4.ts` offers the same names (docs/effect-lines.md).
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as EffectLine from "@resilient-ai/policy/internal/line"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { SchemaIssue } from "./shared.js"

export * as HttpClient from "@effect/platform/HttpClient"
export * as HttpClientError from "@effect/platform/HttpClientError"
export * as HttpClientRequest from "@effect/platform/HttpClientRequest"
export * as HttpClientResponse from "@effect/platform/HttpClientResponse"

/** What a client built on another fails with when the request could not be answered: `RequestError`. */
export type RequestFailure = HttpClientError.RequestError

/** A transport failure of `request`, for a client that wraps another. */
export const requestFailure = (
  request: HttpClientRequest.HttpClientRequest,
  cause: unknown,
  description: string
): RequestFailure => new HttpClientError.RequestError({ request, reason: "Transport", cause, description })

/** What made the HTTP client fail: the error under its error, when it has one (else `error` itself). */
export const causeOfClientError = (error: unknown): unknown =>
  HttpClientError.isHttpClientError(error) && error.cause !== undefined ? error.cause : error

/** `request` with `body` as its JSON body (a body that cannot be written as JSON throws). */
export const withJsonBody = (
  request: HttpClientRequest.HttpClientRequest,
  body: unknown
): HttpClientRequest.HttpClientRequest => HttpClientRequest.bodyUnsafeJson(request, body)

/** Whether a request's client sends the current span's trace headers with it. */
export const tracerPropagation: EffectLine.Ref<boolean> = HttpClient.currentTracerPropagation

/** `client`, sending no trace headers. */
export const withoutTracerPropagation = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.withTracerPropagation(client, false)

/** A schema a response is decoded with, to values of `A`. */
export type ResponseSchema<A> = Schema.Schema<A, any>

/** `schema`, named `identifier` in what its failures say. */
export const identified = <S extends Schema.Schema.Any>(schema: S, identifier: string): S =>
  schema.annotations({ identifier }) as S

/** A decoder of unknown input with `schema`, failing with every issue it finds. */
export const decoder = <A>(schema: ResponseSchema<A>) => {
  const decode = Schema.decodeUnknown(schema, { errors: "all" })
  return (input: unknown): Effect.Effect<A, ReadonlyArray<SchemaIssue>> =>
    Effect.mapError(
      decode(input),
      (error) => ParseResult.ArrayFormatter.formatErrorSync(error).map(({ message, path }) => ({ path, message }))
    )
}

/**
 * Reads `stream` up to its first element without starting a fiber for it: that element and the
 * rest (read from the same pull, in the caller's scope), or `undefined` if it ended first.
 */
export const openFirst = <A, E>(
  stream: Stream.Stream<A, E>
): Effect.Effect<{ readonly first: A; readonly rest: Stream.Stream<A, E> } | undefined, E, Scope.Scope> =>
  Effect.flatMap(Stream.toPull(stream), (pull) => {
    const firstChunk = (): Effect.Effect<{ readonly first: A; readonly rest: Stream.Stream<A, E> } | undefined, E> =>
      Effect.matchEffect(pull, {
        onFailure: Option.match({ onNone: () => Effect.succeed(undefined), onSome: Effect.fail }),
        onSuccess: (chunk) => {
          if (Chunk.isEmpty(chunk)) return firstChunk()
          const [first, ...buffered] = Chunk.toReadonlyArray(chunk)
          return Effect.succeed({
            first: first as A,
            rest: Stream.concat(Stream.fromIterable(buffered), Stream.repeatEffectChunkOption(pull))
          })
        }
      })
    return firstChunk()
  })

/** `stream`, failing with `onTimeout()` when no element arrives for `duration`. */
export const failWhenIdle = <A, E, E2>(
  stream: Stream.Stream<A, E>,
  duration: EffectLine.DurationInput,
  onTimeout: () => E2
): Stream.Stream<A, E | E2> => Stream.timeoutFail(stream, onTimeout, duration)
export type { SchemaIssue } from "./shared.js"
