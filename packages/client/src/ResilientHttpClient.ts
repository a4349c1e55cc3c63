/**
 * An `HttpClient` for Effect SDKs (`@effect/ai-openai`, `@effect/ai-anthropic`, any code on
 * `@effect/platform`'s `HttpClient`): each model call the client executes goes through its target's
 * policy — classification of the provider's answer, budget, gate, full jitter, the provider's
 * hint — and the SDK gets the provider's response.
 *
 * ```ts
 * import { OpenAiClient } from "@effect/ai-openai"
 * import { NodeHttpClient } from "@effect/platform-node"
 * import { ResilientHttpClient, Target } from "@resilient-ai/client"
 * import { Layer, type Redacted } from "effect"
 *
 * declare const apiKey: Redacted.Redacted
 * // Under an SDK's layer: the HttpClient it is given is the resilient one.
 * const OpenAiLive = OpenAiClient.layer({ apiKey }).pipe(
 *   Layer.provide(ResilientHttpClient.layer(Target.managedConfig("OPENAI"))),
 *   Layer.provide(NodeHttpClient.layerUndici)
 * )
 * ```
 *
 * Every attempt of a call carries the same idempotency key. A success is read whole within its
 * attempt, so a body cut short is retried; a streamed one is retried until its first chunk reaches
 * the SDK (a first chunk that is the provider's error event included), never after.
 * When the call stops on an error response, the SDK gets that response and judges its status as it
 * always does; when it stops without one, the error is the platform's `RequestError` (reason
 * `Transport`) whose `cause` is the `CallFailed`. Errors reaching the SDK stay the platform's types.
 */
import {
  causeOfClientError,
  HttpClient,
  HttpClientRequest,
  HttpClientResponse,
  type RequestFailure,
  requestFailure
} from "#client-line"
import type * as Failure from "@resilient-ai/policy/Failure"
import * as Attempts from "@resilient-ai/policy/internal/attempt"
import type * as Settings from "@resilient-ai/policy/Settings"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as SdkCall from "./internal/sdkCall.js"
import * as Transport from "./internal/transport.js"
import * as Target from "./Target.js"

/** Settings of the transformation. */
export interface Options {
  /** Which requests are model calls. Default: a POST to a model API's call path (`chat/completions`, …). */
  readonly isModelCall?: ((url: URL, method: string) => boolean) | undefined
}

/** The body of a platform request as bytes, when it is bytes (an SDK's JSON). */
const bodyBytes = (request: HttpClientRequest.HttpClientRequest): Uint8Array | undefined =>
  request.body._tag === "Uint8Array" ? request.body.body : undefined

/** Headers that carry a credential: an SDK may print the request with its error. */
const credentials = /^(authorization|proxy-authorization|x-api-key|api-key|x-goog-api-key|cookie)$/i

/**
 * The request the SDK's responses and errors carry, without its credentials: `@effect/ai` 0.37
 * formats a failed body's error, request headers and all, into its own error's text, where no
 * redaction applies.
 */
const withoutCredentials = (request: HttpClientRequest.HttpClientRequest): HttpClientRequest.HttpClientRequest =>
  Object.keys(request.headers).reduce(
    (scrubbed, name) => credentials.test(name) ? HttpClientRequest.setHeader(scrubbed, name, "<redacted>") : scrubbed,
    request
  )

/** Statuses a web `Response` refuses a body for. */
const nullBodyStatus = new Set([204, 205, 304])

const urlOf = (request: HttpClientRequest.HttpClientRequest): URL | undefined => {
  try {
    return new URL(request.url)
  } catch {
    return undefined
  }
}

/**
 * Makes `client` resilient for `target` (a checked target, or the effect that checks one): its
 * model calls go through the target's policy, its budget and gate from the `Coordination` in
 * context; other requests are executed as they were.
 */
export const transform = <E = never, R = never>(
  target: Target.Target | Effect.Effect<Target.Target, E, R>,
  options: Options = {}
) =>
<CE, CR>(
  client: HttpClient.HttpClient.With<CE, CR>
): Effect.Effect<HttpClient.HttpClient.With<CE | RequestFailure, CR>, E | Settings.InvalidSettings, R> =>
  Effect.gen(function*() {
    const adapter = Transport.withTracePolicy(yield* SdkCall.adapterFor(target))
    const { endpoint, target: checked } = adapter
    const isModelCall = options.isModelCall ?? SdkCall.isModelCall
    const idempotencyHeader = checked.idempotencyHeader.toLowerCase()

    // A client of its own, not a transformation of `client`: the SDK maps its requests (its base
    // URL, its credentials) on top of this one, so only here is a request whole, and each attempt
    // executes it on `client` as it is, under one idempotency key for the whole call.
    return HttpClient.makeWith<never, never, CE | RequestFailure, CR>(
      (requested) =>
        Effect.flatMap(requested, (
          request
        ): Effect.Effect<HttpClientResponse.HttpClientResponse, CE | RequestFailure, CR> => {
          const url = urlOf(request)
          if (url === undefined || !isModelCall(url, request.method)) return client.execute(request)
          const sdkKey = request.headers[idempotencyHeader]
          const requestId = sdkKey ?? globalThis.crypto.randomUUID()
          const execute = client.execute(
            sdkKey === undefined ? HttpClientRequest.setHeader(request, checked.idempotencyHeader, requestId) : request
          )
          const forTheSdk = withoutCredentials(request)
          const described = SdkCall.describe(bodyBytes(request))
          const model = described.model ?? checked.model
          const answered: SdkCall.Answered = { last: undefined }
          const sent = Effect.mapError(
            execute,
            // The platform wraps the transport's own error: its code says what failed.
            (error): Failure.Failure => Transport.fromRequestError(causeOfClientError(error), endpoint)
          )
          const answerOf = (context: Attempts.AttemptContext, report: Attempts.Report) =>
            Effect.flatMap(sent, (response): Effect.Effect<HttpClientResponse.HttpClientResponse, Failure.Failure> => {
              answered.last = undefined
              const headers = new Headers(response.headers)
              SdkCall.entered(context, report, headers)
              // Through a web stream, so a body is read within the attempt (a stream up to its first
              // chunk) and the SDK reads the rest, from the same read.
              return Effect.flatMap(
                Stream.toReadableStreamEffect(Stream.mapError(response.stream, SdkCall.bodyFailed)),
                (body) =>
                  Effect.map(
                    SdkCall.settle(
                      new Response(nullBodyStatus.has(response.status) ? null : body, {
                        status: response.status,
                        headers
                      }),
                      { streams: described.streams, model, limit: checked.maxResponseBytes, report },
                      answered
                    ),
                    (web) => HttpClientResponse.fromWeb(forTheSdk, web)
                  )
              )
            })
          const attempt = (context: Attempts.AttemptContext) => {
            const report = new Attempts.Report()
            return Attempts.reporting(answerOf(context, report), report)
          }
          return SdkCall.resilientCall(adapter, {
            url,
            model,
            tokens: described.tokens,
            requestId,
            body: bodyBytes(request),
            retryCount: request.headers["x-stainless-retry-count"],
            sdkKey,
            attempt
          }).pipe(
            Effect.catchTag("CallFailed", (failed) =>
              answered.last !== undefined
                ? Effect.succeed(HttpClientResponse.fromWeb(forTheSdk, SdkCall.responseOf(answered.last)))
                : Effect.fail(
                  requestFailure(forTheSdk, failed, failed.message)
                ))
          )
        }),
      Effect.succeed
    )
  })

/**
 * Replaces the `HttpClient` in context with its resilient form for `target`: provide it under an
 * Effect SDK's layer, and the client in context (`NodeHttpClient.layerUndici`, …) under it.
 */
export const layer = <E = never, R = never>(
  target: Target.Target | Effect.Effect<Target.Target, E, R>,
  options?: Options
): Layer.Layer<HttpClient.HttpClient, E | Settings.InvalidSettings, R | HttpClient.HttpClient> =>
  Layer.effect(HttpClient.HttpClient, Effect.flatMap(HttpClient.HttpClient, transform(target, options)))
