/**
 * A `fetch` for promise SDKs (the `openai` package, `@mistralai/mistralai`, the Vercel AI SDK,
 * LangChain): handed to the SDK in place of the global one, it sends each model call through its
 * target's policy — classification of the provider's answer, budget, gate, full jitter, the
 * provider's hint, one idempotency key for every attempt — and gives the SDK the provider's
 * `Response`. The SDK's own retries are switched off, so retrying happens at exactly one layer.
 *
 * ```ts
 * import { ResilientFetch, Target } from "@resilient-ai/client"
 * import OpenAI from "openai"
 *
 * declare const apiKey: string
 * declare const baseURL: string
 * const fetch = yield* ResilientFetch.make(Target.managedConfig("OPENAI"))
 * const openai = new OpenAI({ apiKey, baseURL, fetch, maxRetries: 0 })
 * ```
 *
 * The SDK's `AbortSignal` is honoured at every point, the backoff's sleep included. A success is
 * read whole within its attempt (a stream up to its first chunk), so a body cut short is retried
 * like any failure, and a stream is never replayed once its first chunk reached the SDK (a first
 * chunk that is the provider's error event reaches nobody: it is retried as its type says). When the
 * call stops on an error response, the SDK gets that response, and raises its own error for it;
 * when it stops without one (the connection failed, the gate shed it, the deadline passed), the
 * returned promise rejects with a `TypeError`, as `fetch` does, whose `cause` is the `CallFailed`.
 * Requests that are not model calls pass through untouched. A request the SDK retries itself
 * (`x-stainless-retry-count` above 0, an idempotency key it sent before, or the body of a call that
 * just failed) is a second retrying layer: it is logged once per target and counted
 * (`resilient_ai_sdk_retries_total`). A model call is a span (`chat gpt-4o-mini`, after
 * OpenTelemetry's GenAI conventions) with a span per attempt, made by the tracer of the runtime
 * `make` ran in.
 */
import * as Attempts from "@resilient-ai/policy/internal/attempt"
import * as EffectLine from "@resilient-ai/policy/internal/line"
import type * as Settings from "@resilient-ai/policy/Settings"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as SdkCall from "./internal/sdkCall.js"
import * as Transport from "./internal/transport.js"
import * as Target from "./Target.js"

/** The `fetch` signature SDKs take. */
export type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>

/** Settings of the adapter. */
export interface Options {
  /** Sends each attempt, and every request that is not a model call. Default: the global `fetch`. */
  readonly fetch?: Fetch | undefined
  /**
   * Which requests are model calls. Default: a POST to a path ending in `chat/completions`,
   * `completions`, `embeddings`, `responses`, `messages` or `fim/completions`.
   */
  readonly isModelCall?: ((url: URL, method: string) => boolean) | undefined
}

/**
 * A signal that aborts when `own` or the SDK's does. `AbortSignal.any` where the runtime has it;
 * by hand where it does not (Vercel's edge runtime).
 */
const eitherAborts = (own: AbortSignal, sdk: AbortSignal | null | undefined): AbortSignal => {
  if (sdk === undefined || sdk === null) return own
  if (typeof AbortSignal.any === "function") return AbortSignal.any([own, sdk])
  const both = new AbortController()
  const follow = (signal: AbortSignal) => () => both.abort(signal.reason)
  for (const signal of [own, sdk]) {
    if (signal.aborted) {
      both.abort(signal.reason)
      break
    }
    signal.addEventListener("abort", follow(signal), { once: true })
  }
  return both.signal
}

/** The body of a request, read once so every attempt can send it again. */
const replayable = async (
  body: BodyInit | null | undefined,
  request: Request | undefined
): Promise<string | Uint8Array<ArrayBuffer> | undefined> => {
  if (body === undefined || body === null) {
    return request?.body === null || request === undefined ? undefined : new Uint8Array(await request.arrayBuffer())
  }
  if (typeof body === "string") return body
  return new Uint8Array(await new Response(body).arrayBuffer())
}

/**
 * A `fetch` that sends each model call to `target` (a checked target, or the effect that checks
 * one) through its policy, its budget and gate taken from the `Coordination` in context.
 */
export const make = <E = never, R = never>(
  target: Target.Target | Effect.Effect<Target.Target, E, R>,
  options: Options = {}
): Effect.Effect<Fetch, E | Settings.InvalidSettings, R> =>
  Effect.gen(function*() {
    const adapter = yield* SdkCall.adapterFor(target)
    const { endpoint, target: checked } = adapter
    const run = yield* EffectLine.promiseExitRunner()
    const send = options.fetch ?? globalThis.fetch
    const isModelCall = options.isModelCall ?? SdkCall.isModelCall
    const idempotencyHeader = checked.idempotencyHeader

    /** `answered.last`: the error response the last attempt ended with, if it ended with one. */
    const call = (
      url: URL,
      init: RequestInit,
      headers: Headers,
      body: string | Uint8Array<ArrayBuffer> | undefined,
      answered: SdkCall.Answered
    ) => {
      const described = SdkCall.describe(body)
      const model = described.model ?? checked.model
      const attempt = (context: Attempts.AttemptContext) =>
        Effect.suspend(() => {
          answered.last = undefined
          const report = new Attempts.Report()
          const attemptHeaders = new Headers(headers)
          attemptHeaders.set(idempotencyHeader, context.requestId)
          const answer = Effect.suspend(() => {
            const abort = new AbortController()
            let sending: Promise<Response>
            try {
              sending = send(url, {
                ...init,
                headers: attemptHeaders,
                body: body ?? null,
                signal: eitherAborts(abort.signal, init.signal)
              })
            } catch (error) {
              // Thrown before any request existed: the `fetch` given or the runtime is at fault (an
              // API it lacks), not the provider. A defect: never retried, never the provider's count.
              return Effect.die(error)
            }
            return Effect.tryPromise({
              try: () => sending,
              catch: (error) => Transport.fromRequestError(error, endpoint)
            }).pipe(Effect.onInterrupt(() => Effect.sync(() => abort.abort())))
          }).pipe(
            Effect.flatMap((response) => {
              SdkCall.entered(context, report, response.headers)
              return SdkCall.settle(
                response,
                { streams: described.streams, model, limit: checked.maxResponseBytes, report },
                answered
              )
            })
          )
          return Attempts.reporting(answer, report)
        })
      const sdkKey = headers.get(idempotencyHeader)
      return SdkCall.resilientCall(adapter, {
        url,
        model,
        tokens: described.tokens,
        requestId: sdkKey ?? undefined,
        body,
        retryCount: headers.get("x-stainless-retry-count"),
        sdkKey,
        attempt
      })
    }

    return async (input, init) => {
      const request = input instanceof Request ? input : undefined
      const url = new URL(request?.url ?? String(input))
      const method = (init?.method ?? request?.method ?? "GET").toUpperCase()
      if (!isModelCall(url, method)) return send(input, init)
      const signal = init?.signal ?? request?.signal ?? undefined
      const headers = new Headers(request?.headers)
      new Headers(init?.headers).forEach((value, name) => headers.set(name, value))
      const body = await replayable(init?.body, request)
      const answered: SdkCall.Answered = { last: undefined }
      const exit = await run(
        call(url, { ...init, method }, headers, body, answered),
        signal === null || signal === undefined ? undefined : { signal }
      )
      if (Exit.isSuccess(exit)) return exit.value
      if (signal?.aborted === true) throw signal.reason ?? new DOMException("This operation was aborted", "AbortError")
      // The call stopped on the provider's error: the SDK gets it, and raises its own error for it.
      if (answered.last !== undefined) return SdkCall.responseOf(answered.last)
      throw new TypeError("fetch failed", { cause: Cause.squash(exit.cause) })
    }
  })
