/**
 * What the adapters under other SDKs share (`ResilientFetch` for promise SDKs,
 * `ResilientHttpClient` for Effect ones): which requests are model calls, what a call's body says,
 * the failure an error response is, and the notice of an SDK that retries by itself.
 */
import { Coordination, Failure, type Resilient, type Settings } from "@resilient-ai/policy"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as ProviderError from "../ProviderError.js"
import * as Target from "../Target.js"
import type * as Transport from "../Transport.js"

/** What an adapter holds for its target: its state, its transport settings, a policy per model. */
export interface Adapter {
  readonly target: Target.Target
  readonly services: Coordination.TargetServices
  readonly endpoint: Transport.Endpoint
  readonly policyFor: (model: string) => Resilient.Policy
  /** Whether the target's warning of an SDK that retries by itself was logged. */
  readonly warned: { done: boolean }
  /** The idempotency keys the SDK sent lately: a key sent again is the SDK retrying. */
  readonly keysSeen: Set<string>
}

/** How many of the SDK's idempotency keys an adapter remembers: enough for the calls in flight. */
const keysRemembered = 4_096

/**
 * The adapter of `target` (a checked target, or the effect that checks one), its state from the
 * `Coordination` in context.
 */
export const adapterFor = <E, R>(
  target: Target.Target | Effect.Effect<Target.Target, E, R>
): Effect.Effect<Adapter, E | Settings.InvalidSettings, R> =>
  Effect.gen(function*() {
    const checked = Effect.isEffect(target) ? yield* target : target
    const defaults = Target.policyFor(checked)
    const coordination = yield* Coordination.current
    const services = yield* Coordination.servicesOf(coordination, {
      target: checked.name,
      apiKey: checked.apiKey,
      budget: defaults.budget,
      gate: defaults.gate
    })
    const policies = new Map<string, Resilient.Policy>()
    return {
      target: checked,
      services,
      endpoint: {
        target: checked.name,
        baseUrl: checked.baseUrl,
        apiKey: checked.apiKey,
        idempotencyHeader: checked.idempotencyHeader,
        maxResponseBytes: checked.maxResponseBytes,
        connectTimeout: checked.connectTimeout
      },
      policyFor: (model) => {
        let policy = policies.get(model)
        if (policy === undefined) policies.set(model, policy = Target.policyFor(checked, model))
        return policy
      },
      warned: { done: false },
      keysSeen: new Set()
    }
  })

const modelPaths = /\/(chat\/completions|completions|embeddings|responses|messages|fim\/completions)$/

/** A POST to a path ending in one of the model APIs' call paths. */
export const isModelCall = (url: URL, method: string): boolean =>
  method === "POST" && modelPaths.test(url.pathname.replace(/\/+$/, ""))

/** Embeddings change nothing when replayed; a generation is billed again. */
export const replaySafe = (url: URL): true | undefined => url.pathname.endsWith("/embeddings") ? true : undefined

/** What a call's JSON body says, when it is JSON: the model asked for and whether it streams. */
export const describe = (
  body: string | Uint8Array | undefined
): { readonly model: string | undefined; readonly streams: boolean } => {
  try {
    const text = typeof body === "string" ? body : body === undefined ? "" : new TextDecoder().decode(body)
    const parsed = JSON.parse(text) as { readonly model?: unknown; readonly stream?: unknown } | null
    return {
      model: typeof parsed?.model === "string" ? parsed.model : undefined,
      streams: parsed?.stream === true
    }
  } catch {
    return { model: undefined, streams: false }
  }
}

/** The answer's headers arrived: the attempt reads its body now, and logs the provider's id of it. */
export const entered = (info: Resilient.AttemptInfo | undefined, headers: Headers): void => {
  if (info === undefined) return
  info.enter("body")
  const providerRequestId = ProviderError.requestIdOf(headers)
  if (providerRequestId !== undefined) info.annotate("providerRequestId", providerRequestId)
}

/** A provider's error response, kept whole so the SDK can be given it when the call stops on it. */
export interface ErrorAnswer {
  readonly status: number
  readonly statusText: string
  readonly headers: Headers
  readonly bytes: Uint8Array<ArrayBuffer>
}

/** The policy's failure for an error response; an error body that is not JSON is evidence all the same. */
export const failureOf = (answer: ErrorAnswer, model: string): Effect.Effect<Failure.Failure> =>
  Effect.map(Clock.currentTimeMillis, (now) => {
    const text = new TextDecoder().decode(answer.bytes)
    let body: unknown = text
    try {
      body = JSON.parse(text)
    } catch {
      // Kept as text.
    }
    return ProviderError.toFailure({ status: answer.status, headers: answer.headers, body, model }, now)
  })

/** The answer again, as a web `Response`, for the SDK to read. */
export const responseOf = (answer: ErrorAnswer): Response =>
  new Response(answer.bytes.byteLength === 0 ? null : answer.bytes, {
    status: answer.status,
    statusText: answer.statusText,
    headers: answer.headers
  })

/** A body that had started and broke: the request was delivered, so it may have run. */
export const bodyFailed = (error: unknown): Failure.Failure =>
  new Failure.ConnectionReset({ afterSend: true, detail: error instanceof Error ? error.message : String(error) })

/** Requests an SDK sent as its own retry, by target: a second retrying layer above this one. */
export const sdkRetries = Metric.counter("resilient_ai_sdk_retries", {
  description: "requests an SDK sent as its own retry, above the resilient layer",
  incremental: true
})

/**
 * Notices a request an SDK retries by itself: one it marks as a retry (`x-stainless-retry-count`
 * above 0), or one carrying an idempotency key it sent before. Counted, and warned of once per
 * target.
 */
export const noticeSdkRetry = (
  adapter: Adapter,
  retryCount: string | null | undefined,
  sdkKey: string | null | undefined
): Effect.Effect<void> => {
  const count = Number(retryCount ?? "0")
  const keys = adapter.keysSeen
  const keySentBefore = sdkKey !== null && sdkKey !== undefined && keys.has(sdkKey)
  if (sdkKey !== null && sdkKey !== undefined && !keySentBefore) {
    keys.add(sdkKey)
    // A Set iterates in insertion order: the first key is the oldest.
    if (keys.size > keysRemembered) keys.delete(keys.values().next().value!)
  }
  if (!(count > 0) && !keySentBefore) return Effect.void
  const target = adapter.target.name
  sdkRetries.pipe(Metric.tagged("target", target)).unsafeUpdate(1, [])
  if (adapter.warned.done) return Effect.void
  adapter.warned.done = true
  return Effect.logWarning(
    "the SDK retries this target's calls itself: switch its retries off (maxRetries: 0), so retrying happens at exactly one layer"
  ).pipe(Effect.annotateLogs({ target, sdkRetryCount: count, idempotencyKeySentBefore: keySentBefore }))
}
