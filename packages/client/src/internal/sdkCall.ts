/**
 * What the adapters under other SDKs share (`ResilientFetch` for promise SDKs,
 * `ResilientHttpClient` for Effect ones): which requests are model calls, what a call's body says,
 * the failure an error response is, and the notice of an SDK that retries by itself.
 */
import * as Failure from "@resilient-ai/policy/Failure"
import * as Attempts from "@resilient-ai/policy/internal/attempt"
import * as Engine from "@resilient-ai/policy/internal/engine"
import * as EffectLine from "@resilient-ai/policy/internal/line"
import * as Limiters from "@resilient-ai/policy/internal/rateLimiter"
import * as Retries from "@resilient-ai/policy/internal/resilient"
import type * as Settings from "@resilient-ai/policy/Settings"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Target from "../Target.js"
import { concat } from "./bytes.js"
import * as GenAi from "./genAi.js"
import * as ProviderError from "./providerError.js"
import * as Transport from "./transport.js"
import * as HttpAttempt from "./transport.js"
import * as Wiring from "./wiring.js"

/** What an adapter holds for its target: its wiring, and what it notices of the SDK above it. */
export interface Adapter extends Wiring.Wiring {
  /** The span of a call to `url` for `model`, after OpenTelemetry's GenAI conventions, when the path says what it does. */
  readonly spanFor: (url: URL, model: string) => Retries.CallSpan | undefined
  /** Whether the target's warning of an SDK that retries by itself was logged. */
  readonly warned: { done: boolean }
  /** The idempotency keys the SDK sent lately: a key sent again is the SDK retrying. */
  readonly keysSeen: Map<string, number>
  /**
   * The bodies of calls that failed lately (a fingerprint each, with when it failed): the same body
   * again soon after is a layer above retrying, for SDKs that mark their retries neither way.
   */
  readonly failedBodies: Map<number, number>
}

/** How many keys and failed bodies an adapter remembers: enough for the calls in flight. */
const remembered = 4_096

/** Longer than any SDK's backoff before its last retry (LangChain's reaches a minute). */
const failedBodyRemembered = 120_000

/**
 * The adapter of `target` (a checked target, or the effect that checks one), its state from the
 * `Coordination` in context.
 */
export const adapterFor = <E, R>(
  target: Target.Target | Effect.Effect<Target.Target, E, R>
): Effect.Effect<Adapter, E | Settings.InvalidSettings, R> =>
  Effect.gen(function*() {
    const wiring = yield* Wiring.wire(Effect.isEffect(target) ? yield* target : target)
    const server = GenAi.serverOf(wiring.target.baseUrl)
    const spans = new Map<string, Retries.CallSpan | undefined>()
    return {
      ...wiring,
      spanFor: (url, model) => {
        const path = url.pathname.replace(/\/+$/, "")
        const key = `${path} ${model}`
        if (spans.has(key)) return spans.get(key)
        const span = spanOf(server, path, model)
        if (spans.size < remembered) spans.set(key, span)
        return span
      },
      warned: { done: false },
      keysSeen: new Map(),
      failedBodies: new Map()
    }
  })

const modelPaths = /\/(chat\/completions|completions|embeddings|responses|messages|fim\/completions)$/

/** What a call to each model API path does, by the conventions' names. */
const operations: ReadonlyArray<readonly [RegExp, GenAi.Operation]> = [
  [/\/chat\/completions$/, "chat"],
  [/\/embeddings$/, "embeddings"],
  [/\/completions$/, "text_completion"],
  // OpenAI's Responses API and Anthropic's Messages API answer a conversation, as chat does.
  [/\/(responses|messages)$/, "chat"]
]

/** The span of a call to `path`: Anthropic's wire format on its Messages API, whatever the host. */
const spanOf = (server: GenAi.Server, path: string, model: string): Retries.CallSpan | undefined => {
  const operation = operations.find(([pattern]) => pattern.test(path))?.[1]
  if (operation === undefined) return undefined
  const flavoured = path.endsWith("/messages") && server.provider === "openai"
    ? { ...server, provider: "anthropic" }
    : server
  return GenAi.spanOf(flavoured, operation, model)
}

/** A POST to a path ending in one of the model APIs' call paths. */
export const isModelCall = (url: URL, method: string): boolean =>
  method === "POST" && modelPaths.test(url.pathname.replace(/\/+$/, ""))

/** Embeddings change nothing when replayed; a generation is billed again. */
const replaySafe = (url: URL): true | undefined => url.pathname.endsWith("/embeddings") ? true : undefined

/**
 * What a call's JSON body says, when it is JSON: the model asked for, whether it streams, and the
 * tokens it may use (its text's estimate and its output limit, as `max_tokens`,
 * `max_completion_tokens` or the Responses API's `max_output_tokens`).
 */
export const describe = (
  body: string | Uint8Array | undefined
): { readonly model: string | undefined; readonly streams: boolean; readonly tokens: number } => {
  const text = typeof body === "string" ? body : body === undefined ? "" : new TextDecoder().decode(body)
  try {
    const parsed = JSON.parse(text) as Record<string, unknown> | null
    const limit = parsed?.["max_tokens"] ?? parsed?.["max_completion_tokens"] ?? parsed?.["max_output_tokens"]
    return {
      model: typeof parsed?.["model"] === "string" ? parsed["model"] : undefined,
      streams: parsed?.["stream"] === true,
      tokens: Limiters.estimateTokens(text) + (typeof limit === "number" ? limit : 0)
    }
  } catch {
    return { model: undefined, streams: false, tokens: Limiters.estimateTokens(text) }
  }
}

/**
 * The answer's headers arrived: the attempt reads its body now, and its report names the provider's
 * id of it and the limits it stated.
 */
export const entered = (context: Attempts.AttemptContext, report: Attempts.Report, headers: Headers): void => {
  context.reached("body", report)
  const providerRequestId = ProviderError.requestIdOf(headers)
  if (providerRequestId !== undefined) report.annotate("providerRequestId", providerRequestId)
  HttpAttempt.reportLimits(report, (name) => headers.get(name))
}

/** A provider's answer read whole, so the SDK can be given it as it came. */
export interface Answer {
  readonly status: number
  readonly statusText: string
  readonly headers: Headers
  readonly bytes: Uint8Array<ArrayBuffer>
}

/** Where an attempt leaves the error answer it ended with, for the SDK if the call stops on it. */
export interface Answered {
  last: Answer | undefined
}

/** `bytes` as the body of `response`, kept. */
const kept = (
  response: { readonly status: number; readonly statusText?: string; readonly headers: Headers },
  bytes: Uint8Array<ArrayBuffer>
): Answer => ({ status: response.status, statusText: response.statusText ?? "", headers: response.headers, bytes })

/** Parsed JSON, or the text itself when it is not JSON: an error body is evidence either way. */
const jsonOrText = (text: string): unknown => {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

/**
 * The attempt ends on an error answer: kept in `answered` for the SDK, and failed with the policy's
 * failure for it.
 */
const stopOn = (answered: Answered, answer: Answer, model: string): Effect.Effect<never, Failure.Failure> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    answered.last = answer
    const body = jsonOrText(new TextDecoder().decode(answer.bytes))
    return Effect.fail(ProviderError.toFailure({ status: answer.status, headers: answer.headers, body, model }, now))
  })

/** The answer again, as a web `Response`, for the SDK to read. */
export const responseOf = (answer: Answer): Response =>
  new Response(answer.bytes.byteLength === 0 ? null : answer.bytes, {
    status: answer.status,
    statusText: answer.statusText,
    headers: answer.headers
  })

/** A body that had started and broke: the request was delivered, so it may have run. */
export const bodyFailed = (error: unknown): Failure.Failure =>
  new Failure.ConnectionReset({ afterSend: true, detail: error instanceof Error ? error.message : String(error) })

/** Reads at most `limit` bytes of `response`'s body; more is `ResponseTooLarge`, the rest unread. */
const readAtMost = (
  response: Response,
  limit: number
): Effect.Effect<Uint8Array<ArrayBuffer>, Failure.Failure> =>
  Effect.tryPromise({
    try: async (interrupted) => {
      const reader = response.body?.getReader()
      if (reader === undefined) return new Uint8Array(0)
      interrupted.addEventListener("abort", () => void reader.cancel().catch(() => undefined), { once: true })
      const chunks: Array<Uint8Array> = []
      let size = 0
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return concat(chunks, size)
        size += value.byteLength
        if (size > limit) {
          void reader.cancel().catch(() => undefined)
          throw new TooLarge()
        }
        chunks.push(value)
      }
    },
    catch: (error) =>
      error instanceof TooLarge
        ? new Failure.ResponseTooLarge({ status: response.status, limitBytes: limit })
        : bodyFailed(error)
  })

class TooLarge {}

/** Answers larger than this are not parsed for their usage: their reservation stands as made. */
const usageReadLimit = 1024 * 1024

/**
 * Reads what a whole JSON answer says of itself into the attempt's report: the tokens it used, if
 * it says (OpenAI's and Mistral's `usage`: `total_tokens`, or prompt + completion; Anthropic's and
 * the Responses API's: input + output), which settle its place in the key's pace; its id, model and
 * usage for its span.
 */
const readAnswer = (bytes: Uint8Array, report: Attempts.Report): void => {
  if (bytes.byteLength > usageReadLimit) return
  let answer: { readonly usage?: Record<string, unknown> } | null
  try {
    answer = JSON.parse(new TextDecoder().decode(bytes)) as { readonly usage?: Record<string, unknown> } | null
  } catch {
    return
  }
  if (answer === null || typeof answer !== "object") return
  GenAi.describeAnswer(report, answer)
  const usage = answer.usage
  const count = (name: string) => typeof usage?.[name] === "number" ? usage[name] : undefined
  const input = count("prompt_tokens") ?? count("input_tokens")
  const output = count("completion_tokens") ?? count("output_tokens")
  const total = count("total_tokens") ?? ((input ?? 0) + (output ?? 0))
  if (usage === undefined || total === 0) return
  report.usage = total
  GenAi.describeUsage(report, input, output)
}

/**
 * What an attempt makes of the provider's answer, in both adapters: a success read whole (at most
 * `limit` bytes), its usage in the attempt's report so its place in the key's pace is settled, or
 * read up to its first chunk when it streams; an error answer kept for the SDK and failed with its
 * failure. An error body that cannot be read is still its status's failure.
 */
export const settle = (
  response: Response,
  call: {
    readonly streams: boolean
    readonly model: string
    readonly limit: number
    readonly report: Attempts.Report
  },
  answered: Answered
): Effect.Effect<Response, Failure.Failure> => {
  if (response.status < 400) {
    if (call.streams) return firstChunk(response, call.model, answered)
    return Effect.map(readAtMost(response, call.limit), (bytes) => {
      readAnswer(bytes, call.report)
      return responseOf(kept(response, bytes))
    })
  }
  return Effect.flatMap(
    Effect.orElseSucceed(readAtMost(response, call.limit), () => new Uint8Array(0)),
    (bytes) => stopOn(answered, kept(response, bytes), call.model)
  )
}

/** The provider's error, if the first chunk of a stream holds an error event instead of content. */
const errorEventIn = (
  chunk: Uint8Array,
  headers: Headers,
  model: string
): Effect.Effect<Failure.Failure | undefined> =>
  Effect.gen(function*() {
    // Every error event names itself (`event: error`, `"error"`, `"type": "error"`, `"object": "error"`):
    // a chunk without the word is content, and needs no parse.
    if (!new TextDecoder().decode(chunk).includes("error")) return undefined
    // Only whole events: one the chunk cuts short reaches the SDK as it comes.
    for (const { data, event } of Transport.eventsIn(chunk)) {
      const payload = jsonOrText(data)
      if (ProviderError.isErrorEvent(event, payload)) {
        const now = yield* Clock.currentTimeMillis
        return ProviderError.fromErrorEvent({ headers, body: payload, model }, now)
      }
    }
    return undefined
  })

/**
 * A streamed success, read up to its first chunk within the attempt: the SDK gets a body that
 * starts with that chunk and goes on with the rest of the same read. A first chunk holding the
 * provider's error event (Anthropic's `event: error` when overloaded, an OpenAI error object) has
 * reached nobody: the attempt stops on it (`stopOn`), retried or not as its type says.
 */
const firstChunk = (
  response: Response,
  model: string,
  answered: Answered
): Effect.Effect<Response, Failure.Failure> => {
  const reader = response.body?.getReader()
  if (reader === undefined) return Effect.succeed(response)
  return Effect.gen(function*() {
    const first = yield* Effect.tryPromise({
      try: (interrupted) => {
        interrupted.addEventListener("abort", () => void reader.cancel().catch(() => undefined), { once: true })
        return reader.read()
      },
      catch: bodyFailed
    })
    if (first.done) return new Response(null, response)
    const failure = yield* errorEventIn(first.value, response.headers, model)
    if (failure !== undefined) {
      void reader.cancel().catch(() => undefined)
      answered.last = kept(response, new Uint8Array(first.value))
      return yield* Effect.fail(failure)
    }
    let delivered = false
    const body = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        if (!delivered) {
          delivered = true
          controller.enqueue(first.value)
          return
        }
        const next = await reader.read()
        if (next.done) controller.close()
        else controller.enqueue(next.value)
      },
      cancel: (reason) => reader.cancel(reason)
    })
    return new Response(body, response)
  })
}

/** Requests an SDK sent as its own retry, by target: a second retrying layer above this one. */
export const sdkRetries = EffectLine.counter(
  "resilient_ai_sdk_retries_total",
  "requests an SDK sent as its own retry, above the resilient layer"
)

/**
 * A fingerprint of a call's body (32-bit FNV-1a over its bytes or UTF-16 units, and its length): a
 * collision costs at most a false warning, so a cryptographic hash would buy nothing.
 */
const fingerprint = (body: string | Uint8Array | undefined): number => {
  if (body === undefined) return 0
  let hash = 0x811c9dc5 ^ body.length
  if (typeof body === "string") {
    for (let index = 0; index < body.length; index++) hash = Math.imul(hash ^ body.charCodeAt(index), 0x01000193)
  } else {
    for (let index = 0; index < body.length; index++) hash = Math.imul(hash ^ body[index]!, 0x01000193)
  }
  return hash >>> 0
}

/** Remembers `key` as seen `at`, forgetting the oldest past the bound (a Map iterates in insertion order). */
const remember = <K>(seen: Map<K, number>, key: K, at: number): void => {
  seen.delete(key)
  seen.set(key, at)
  if (seen.size > remembered) seen.delete(seen.keys().next().value!)
}

/** A call that failed: its body sent again soon is a layer above retrying it. */
const noticeFailure = (adapter: Adapter, body: number): Effect.Effect<void> =>
  Effect.map(Clock.currentTimeMillis, (now) => remember(adapter.failedBodies, body, now))

/** What marks a request as an SDK's own retry. */
interface Arrival {
  /** `x-stainless-retry-count`, as the Stainless-made SDKs (openai, anthropic) send it. */
  readonly retryCount: string | null | undefined
  /** The idempotency key the SDK set, if it set one. */
  readonly sdkKey: string | null | undefined
  /** The body's `fingerprint`. */
  readonly body: number
}

/**
 * Notices a request a layer above retries by itself: one the SDK marks as a retry
 * (`x-stainless-retry-count` above 0), one carrying an idempotency key it sent before, or the body
 * of a call that failed in the last two minutes, sent again. Counted, and warned of once per target.
 */
const noticeSdkRetry = (adapter: Adapter, arrival: Arrival): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const { body, retryCount, sdkKey } = arrival
    const count = Number(retryCount ?? "0")
    const keySentBefore = sdkKey !== null && sdkKey !== undefined && adapter.keysSeen.has(sdkKey)
    if (sdkKey !== null && sdkKey !== undefined && !keySentBefore) remember(adapter.keysSeen, sdkKey, now)
    const failedAt = adapter.failedBodies.get(body)
    const bodyFailedBefore = failedAt !== undefined && now - failedAt <= failedBodyRemembered
    if (failedAt !== undefined) adapter.failedBodies.delete(body)
    if (!(count > 0) && !keySentBefore && !bodyFailedBefore) return Effect.void
    const target = adapter.target.name
    EffectLine.update(EffectLine.tagged(sdkRetries, { target }), 1, EffectLine.noMetricScope)
    if (adapter.warned.done) return Effect.void
    adapter.warned.done = true
    return Effect.logWarning(
      "the SDK (or code above it) retries this target's calls itself: switch its retries off (maxRetries: 0; Mistral's client: retryConfig { strategy: \"none\" }; an Effect SDK: no HttpClient.retry above the resilient client), so retrying happens at exactly one layer"
    ).pipe(Effect.annotateLogs({
      target,
      sdkRetryCount: count,
      idempotencyKeySentBefore: keySentBefore,
      failedBodySentAgain: bodyFailedBefore
    }))
  })

/** One model call an SDK sent: what it says of itself, and how each attempt of it is made. */
export interface Call<A, R> {
  readonly url: URL
  readonly model: string
  /** What each attempt reserves of the key's tokens per minute (`describe`). */
  readonly tokens: number
  /** The request id every attempt carries (the SDK's key, or one chosen for the call). */
  readonly requestId: string | undefined
  /** The request's body, as the SDK sent it. */
  readonly body: string | Uint8Array | undefined
  /** `x-stainless-retry-count` and the SDK's own idempotency key, if it sent them. */
  readonly retryCount: string | null | undefined
  readonly sdkKey: string | null | undefined
  /** One attempt, given its context, its report handed back with its outcome. */
  readonly attempt: Attempts.Attempt<A, Failure.Failure, R>
}

/**
 * A call through the target's policy, as both adapters make it: first noticed if a layer above sent
 * it again, then its attempts under the policy of its model; a failed call is remembered, so its
 * body sent again is noticed.
 */
export const resilientCall = <A, R>(
  adapter: Adapter,
  call: Call<A, R>
): Effect.Effect<A, Failure.CallFailed<Failure.Failure>, R> => {
  const body = fingerprint(call.body)
  return Effect.andThen(
    noticeSdkRetry(adapter, { retryCount: call.retryCount, sdkKey: call.sdkKey, body }),
    Engine.run(call.attempt, adapter.policyFor(call.model), adapter.state, {
      requestId: call.requestId,
      replaySafe: replaySafe(call.url),
      tokens: call.tokens,
      span: adapter.spanFor(call.url, call.model)
    }).pipe(Effect.tapError(() => noticeFailure(adapter, body)))
  )
}
