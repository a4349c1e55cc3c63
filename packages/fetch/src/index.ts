/**
 * resilient-ai for promise code: a standard `fetch` to hand to the `openai` SDK, the Vercel AI SDK,
 * LangChain or Mistral's client, that sends each model call through its target's policy (the
 * provider's answer classified, a retry budget, a concurrency gate, full jitter, the provider's
 * `Retry-After`, one idempotency key for every attempt). No Effect in the caller's code: one import,
 * one call.
 *
 * ```ts
 * import { resilientFetch } from "@resilient-ai/fetch"
 * import OpenAI from "openai"
 *
 * // MISTRAL_BASE_URL, MISTRAL_MODEL, MISTRAL_API_KEY, and any tuning variable `Target.config` lists.
 * const fetch = resilientFetch({ env: "MISTRAL" })
 * const mistral = new OpenAI({ baseURL: process.env.MISTRAL_BASE_URL, apiKey: process.env.MISTRAL_API_KEY, fetch, maxRetries: 0 })
 * ```
 *
 * It is `ResilientFetch` of `@resilient-ai/client` (the same adapter, the same engine, the same
 * metrics), made and run for you. Bad settings throw a `TypeError` when it is made, naming every
 * bad setting with the message `Target.managed` fails with: the one place this toolkit throws, because
 * a constructor that throws is what promise code expects, and a misconfigured deployment should stop
 * before its first call. A call that fails rejects as `fetch` does (see `ResilientFetch`), so the
 * SDK raises its own errors.
 */
import { sdkRetries } from "@resilient-ai/client/internal/sdkCall"
import * as TargetReading from "@resilient-ai/client/internal/target"
import * as ClientFetch from "@resilient-ai/client/ResilientFetch"
import type * as Targets from "@resilient-ai/client/Target"
import * as EffectLine from "@resilient-ai/policy/internal/line"
import { Either } from "@resilient-ai/policy/internal/line"
import * as Meters from "@resilient-ai/policy/internal/metrics"
import * as PolicyMetrics from "@resilient-ai/policy/Metrics"
import * as Effect from "effect/Effect"
import { contexts, processVariables, variableLookup } from "./internal/fleet.js"

/** A duration: milliseconds, or a text such as `"30 seconds"` or `"500 millis"`. */
export type Duration = number | string

/** The settings a target's durations are in. */
type DurationSetting = "attemptTimeout" | "baseDelay" | "maxDelay" | "hintSpread" | "maxRetryAfter" | "minAttemptTime"

/**
 * A target written out: where the model runs and how its calls are retried. What is left out takes
 * its kind's default (`Target.managedDefaults`, `Target.selfHostedDefaults`).
 */
export interface TargetSettings extends
  Omit<
    Targets.Options,
    DurationSetting | "apiKey" | "attemptTimeoutByModel" | "connectTimeout" | "probeInterval" | "probePath"
  >
{
  /** Managed (an elastic API: the default) or self-hosted (a fixed pool of GPUs: shed, don't pile on). */
  readonly kind?: Targets.Kind | undefined
  /** Required for a managed target. Never shown in a message or a log line. */
  readonly apiKey?: string | undefined
  /** Each attempt's timeout. */
  readonly attemptTimeout?: Duration | undefined
  /** Per-attempt timeouts of other models the requests may name. */
  readonly attemptTimeoutByModel?: Readonly<Record<string, Duration>> | undefined
  readonly baseDelay?: Duration | undefined
  readonly maxDelay?: Duration | undefined
  readonly hintSpread?: Duration | undefined
  readonly maxRetryAfter?: Duration | undefined
  readonly minAttemptTime?: Duration | undefined
}

/** A target read from environment variables: `{env}_BASE_URL`, `{env}_MODEL`, `{env}_API_KEY`, … */
export interface EnvironmentSettings {
  /** The variables' prefix: `"MISTRAL"` reads `MISTRAL_BASE_URL`, `MISTRAL_MODEL`, `MISTRAL_API_KEY`, … */
  readonly env: string
  /** Names the target in metrics, logs and errors. Default: the prefix in lower case. */
  readonly name?: string | undefined
  readonly kind?: Targets.Kind | undefined
  /**
   * Where the variables are: default `process.env`. A Cloudflare Worker passes its `env`. A variable
   * set to the empty text is unset.
   */
  readonly variables?: Readonly<Record<string, unknown>> | undefined
}

/**
 * Processes that share each target's budget, gate and pace: `redisFleet` of
 * `@resilient-ai/fetch/redis` makes one. Made once per process, closed after its doors.
 */
export interface Fleet {
  readonly close: () => Promise<void>
  readonly [Symbol.asyncDispose]: () => Promise<void>
}

/** How the calls are sent. */
export interface SendingSettings {
  /** The fleet this process belongs to. Default: none, each target's state is this process's own. */
  readonly fleet?: Fleet | undefined
  /** Sends each attempt, and every request that is not a model call. Default: the global `fetch`. */
  readonly fetch?: ((input: string | URL | Request, init?: RequestInit) => Promise<Response>) | undefined
  /**
   * Which requests are model calls. Default: a POST to a path ending in `chat/completions`,
   * `completions`, `embeddings`, `responses`, `messages` or `fim/completions`.
   */
  readonly isModelCall?: ((url: URL, method: string) => boolean) | undefined
}

/** What `resilientFetch` takes: a target written out or read from the environment, and how to send. */
export type Settings = (TargetSettings | EnvironmentSettings) & SendingSettings

/**
 * The failure path of a target's calls in this process, every model together: `Metrics.Summary` of
 * `@resilient-ai/policy` (attempts per success, retries and those that succeeded, budget
 * exhaustions, deadline skips, shed calls, failures by kind), the delays slept as plain numbers,
 * and the SDK's own retries.
 */
export interface Metrics extends Omit<PolicyMetrics.Summary, "retryDelay" | "nestedSingleAttempts"> {
  /** The backoff delays slept: how many, and their sum in seconds. */
  readonly delays: { readonly count: number; readonly seconds: number }
  /** Requests the SDK above retried itself: not 0 means its own retries are on (set `maxRetries: 0`). */
  readonly sdkRetries: number
}

/** A `fetch` with its target's policy under it. */
export interface ResilientFetch {
  (input: string | URL | Request, init?: RequestInit): Promise<Response>
  /** The target's name. */
  readonly target: string
  /** The failure path so far (`model`: only the calls to that model). */
  readonly metrics: (model?: string) => Metrics
  /**
   * Refuses new calls, then waits for the calls in flight to end. Calls with a deadline of their own
   * pass an `AbortSignal` (`{ signal }`), as with any `fetch`.
   */
  readonly close: () => Promise<void>
  readonly [Symbol.asyncDispose]: () => Promise<void>
}

const isEnvironment = (settings: Settings): settings is EnvironmentSettings & SendingSettings =>
  typeof (settings as Partial<EnvironmentSettings>).env === "string"

/** The target `settings` describe, or the `TypeError` naming what is wrong with them. */
const targetOf = (settings: Settings): Targets.Target => {
  if (typeof settings !== "object" || settings === null) {
    throw new TypeError(`resilientFetch takes a record of settings, got ${String(settings)}`)
  }
  const { fetch: _fetch, fleet: _fleet, isModelCall: _isModelCall, kind = "managed", ...rest } = settings as
    & Settings
    & {
      readonly kind?: Targets.Kind
    }
  if (kind !== "managed" && kind !== "self-hosted") {
    throw new TypeError(`target: kind must be "managed" or "self-hosted", got ${JSON.stringify(kind)}`)
  }
  let decoded: Either.Either<Targets.Target, { readonly message: string }>
  if (isEnvironment(settings)) {
    const variables = settings.variables ?? processVariables()
    if (variables === undefined) {
      throw new TypeError(
        `target ${
          settings.name ?? settings.env.toLowerCase()
        } (${settings.env}_*): this runtime has no process.env; pass the variables (a Worker's env) as \`variables\``
      )
    }
    decoded = TargetReading.fromVariables(kind, settings.env, variableLookup(variables), settings.name)
  } else {
    decoded = TargetReading.decode(kind, rest as Targets.Options)
  }
  if (Either.isLeft(decoded)) {
    const invalid = Either.leftOf(decoded)
    throw new TypeError(invalid.message, { cause: invalid })
  }
  return Either.rightOf(decoded)
}

const sumOf = (records: ReadonlyArray<Readonly<Record<string, number>>>): Record<string, number> => {
  const sum: Record<string, number> = {}
  for (const record of records) {
    for (const [key, value] of Object.entries(record)) sum[key] = (sum[key] ?? 0) + value
  }
  return sum
}

/** The target's metrics in this process: of `model`, or of every model its calls named. */
const metricsOf = (target: string, model: string | undefined): Metrics => {
  const models = model === undefined ? Meters.allForTarget(target).map((metrics) => metrics.tags["model"]) : [model]
  const summaries = models.map((name) => Effect.runSync(PolicyMetrics.summary(target, name)))
  const total = (read: (summary: PolicyMetrics.Summary) => number) =>
    summaries.reduce((sum, summary) => sum + read(summary), 0)
  const attempts = total((summary) => summary.attempts)
  const successes = total((summary) => summary.successes)
  return {
    attempts,
    successes,
    attemptsPerSuccess: successes === 0 ? Number.NaN : attempts / successes,
    retries: total((summary) => summary.retries),
    retriesSucceeded: total((summary) => summary.retriesSucceeded),
    budgetExhausted: total((summary) => summary.budgetExhausted),
    deadlineSkips: total((summary) => summary.deadlineSkips),
    shed: total((summary) => summary.shed),
    delays: {
      count: total((summary) => summary.retryDelay.count),
      seconds: total((summary) => summary.retryDelay.sum)
    },
    failuresByKind: sumOf(summaries.map((summary) => summary.failuresByKind)),
    callsFailedByReason: sumOf(summaries.map((summary) => summary.callsFailedByReason)),
    sdkRetries: EffectLine.counted(EffectLine.tagged(sdkRetries, { target }))
  }
}

/**
 * A `fetch` that sends each model call through the policy of the target `settings` describe;
 * requests that are not model calls pass through. Throws a `TypeError` naming every bad setting.
 *
 * ```ts
 * import { resilientFetch } from "@resilient-ai/fetch"
 *
 * const fetch = resilientFetch({
 *   name: "mistral",
 *   baseUrl: "https://api.mistral.ai/v1",
 *   model: "mistral-small-latest",
 *   apiKey: process.env.MISTRAL_API_KEY,
 *   attemptTimeout: "30 seconds"
 * })
 * ```
 *
 * Made twice for one target and API key in one process, the two share its budget, gate and pace.
 */
export const resilientFetch = (settings: Settings): ResilientFetch => {
  const target = targetOf(settings)
  const made = ClientFetch.make(target, { fetch: settings.fetch, isModelCall: settings.isModelCall })
  const fleet = settings.fleet === undefined ? undefined : contexts.get(settings.fleet)
  if (settings.fleet !== undefined && fleet === undefined) {
    throw new TypeError(`target ${target.name}: fleet must be made by redisFleet of @resilient-ai/fetch/redis`)
  }
  // On a fleet, the fetch is made once its connection is open (or found away: then each call
  // decides in process); alone, at once.
  const made$ = fleet === undefined
    ? Effect.runSync(made)
    : fleet.then((context) => Effect.runPromise(Effect.provide(made, context)))
  const send = (input: string | URL | Request, init?: RequestInit): Promise<Response> =>
    typeof made$ === "function" ? made$(input, init) : made$.then((fetch) => fetch(input, init))
  let closed = false
  const inFlight = new Set<Promise<Response>>()
  const call = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (closed) {
      return Promise.reject(
        new TypeError("fetch failed", { cause: new Error(`the resilient fetch of target ${target.name} is closed`) })
      )
    }
    const response = send(input, init)
    inFlight.add(response)
    const settled = () => inFlight.delete(response)
    response.then(settled, settled)
    return response
  }
  const close = async (): Promise<void> => {
    closed = true
    await Promise.allSettled([...inFlight])
  }
  return Object.assign(call, {
    target: target.name,
    metrics: (model?: string) => metricsOf(target.name, model),
    close,
    [Symbol.asyncDispose]: close
  })
}
