/**
 * A deployment target: where the model runs, and the policy that fits the capacity behind it.
 *
 * The same model is consumed two ways that want opposite retry behaviour. A managed, elastic API
 * (`managed`) has spare capacity behind a 5xx or a 429, so a modest budget and a short queue are a
 * fair bet. A fixed-capacity, self-hosted pool (`selfHosted`) is exactly the GPUs you pay for: a
 * 5xx means the pool is saturated, so its budget is near zero, its gate sheds instead of queueing,
 * and only failures that never reached the pool (a refused connection) are retried. Timeouts
 * belong to the model, so a target carries one per model.
 *
 * `config` reads a target from environment variables under a prefix and validates it when the
 * layer is built, so a misconfigured deployment fails before any socket opens.
 */
import * as BudgetRules from "@resilient-ai/policy/internal/budgetRules"
import * as EffectLine from "@resilient-ai/policy/internal/line"
import { Either } from "@resilient-ai/policy/internal/line"
import * as Policies from "@resilient-ai/policy/internal/policy"
import * as Checked from "@resilient-ai/policy/internal/settings"
import type * as Resilient from "@resilient-ai/policy/Resilient"
import type * as Settings from "@resilient-ai/policy/Settings"
import type * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { variablesOf } from "./internal/targetVariables.js"

/** Which kind of capacity is behind the target. */
export type Kind = "managed" | "self-hosted"

/** A deployment target, with every setting resolved. */
export interface Target {
  /** Names the target in metrics, logs and failures. */
  readonly name: string
  readonly kind: Kind
  /** The API's base URL, up to and including the version: `https://api.mistral.ai/v1`. */
  readonly baseUrl: string
  /** The model requests use unless they name another. */
  readonly model: string
  readonly apiKey: Redacted.Redacted | undefined
  /** The per-attempt timeout of the target's model. */
  readonly attemptTimeout: Duration.Duration
  /** Per-attempt timeouts of other models requests may name. */
  readonly attemptTimeoutByModel: Readonly<Record<string, Duration.Duration>>
  /** Attempts per call, the first included. */
  readonly maxAttempts: number
  readonly baseDelay: Duration.Duration
  readonly maxDelay: Duration.Duration
  /**
   * The cap of the random spread added to a provider's `Retry-After`, so clients told the same wait
   * do not return together; the spread is drawn from `[0, hint / 2)` below it.
   */
  readonly hintSpread: Duration.Duration
  /**
   * A provider's hint longer than this (or than the call's time left) ends the call with
   * `retry-after-too-long`, which `Failover` passes to the next target, instead of being slept through.
   */
  readonly maxRetryAfter: Duration.Duration
  /**
   * An attempt with less time than this before the deadline is not started. Unset, it is 100 ms,
   * or half the model's timeout when that is shorter.
   */
  readonly minAttemptTime: Duration.Duration | undefined
  /**
   * Whether chat calls may replay an ambiguous failure (the request may have run and been billed)
   * unless a call says otherwise. Embeddings always may. A self-hosted pool never replays them.
   */
  readonly replaySafe: boolean
  /**
   * Whether each attempt sends its span's trace context (`traceparent`, `b3`) to the provider. Off by
   * default: the provider is a third party, and the spans stay local either way.
   */
  readonly propagateTrace: boolean
  /** The retry budget: `ratio` of successes, a floor of `minPerSecond`, and how much of it useless retries keep. */
  readonly budget: { readonly ratio: number; readonly minPerSecond: number; readonly shareWhenRetriesFail: number }
  /** In-flight calls allowed at once. */
  readonly concurrency: number
  /**
   * The provider's limits for the key, per minute: calls are paced under them (`RateLimiter`).
   * Infinite unless set: the limits the provider states in its headers are learned either way.
   */
  readonly requestsPerMinute: number
  readonly tokensPerMinute: number
  /** The header every attempt of a call carries its request id in. */
  readonly idempotencyHeader: string
  readonly maxResponseBytes: number
  /** How long opening a connection may take; set on the HTTP client's dispatcher. */
  readonly connectTimeout: Duration.Duration
  /**
   * How often the target's health probe asks the provider (`HealthProbe`), which `ModelClient.layer`
   * starts when this is set. Unset, no probe runs.
   */
  readonly probeInterval?: Duration.Duration | undefined
  /** What the probe asks, under the base URL: `GET /models` unless set. */
  readonly probePath?: string | undefined
}

/**
 * Settings of a target; what is left out takes the kind's default. The retry settings are a
 * policy's (`Resilient.PolicyOptions`), with the kind's defaults; the rest say where and how to call.
 */
export interface Options extends
  Pick<
    Resilient.PolicyOptions,
    "maxAttempts" | "baseDelay" | "maxDelay" | "hintSpread" | "maxRetryAfter" | "minAttemptTime" | "replaySafe"
  >
{
  readonly name: string
  readonly baseUrl: string
  readonly model: string
  readonly apiKey?: Redacted.Redacted | undefined
  readonly attemptTimeout?: EffectLine.DurationInput | undefined
  readonly attemptTimeoutByModel?: Readonly<Record<string, EffectLine.DurationInput>> | undefined
  readonly propagateTrace?: boolean | undefined
  readonly budget?:
    | {
      readonly ratio?: number | undefined
      readonly minPerSecond?: number | undefined
      readonly shareWhenRetriesFail?: number | undefined
    }
    | undefined
  readonly concurrency?: number | undefined
  readonly requestsPerMinute?: number | undefined
  readonly tokensPerMinute?: number | undefined
  readonly idempotencyHeader?: string | undefined
  readonly maxResponseBytes?: number | undefined
  readonly connectTimeout?: EffectLine.DurationInput | undefined
  readonly probeInterval?: EffectLine.DurationInput | undefined
  readonly probePath?: string | undefined
}

type Defaults = Omit<
  Target,
  "name" | "kind" | "baseUrl" | "model" | "apiKey" | "attemptTimeoutByModel" | "probeInterval" | "probePath"
>

/** The defaults both kinds share. */
const commonDefaults = {
  requestsPerMinute: Number.POSITIVE_INFINITY,
  tokensPerMinute: Number.POSITIVE_INFINITY,
  idempotencyHeader: "Idempotency-Key",
  maxResponseBytes: 8 * 1024 * 1024,
  maxRetryAfter: Duration.seconds(60),
  minAttemptTime: undefined,
  replaySafe: false,
  propagateTrace: false
}

/**
 * Managed, elastic capacity: three attempts; a budget of 20% of successes with a floor of 5/s, which
 * keeps 5% of itself while its retries do not pay (a failure that repeats on every attempt); a
 * queue of 64.
 */
export const managedDefaults: Defaults = {
  ...commonDefaults,
  attemptTimeout: Duration.seconds(60),
  maxAttempts: 3,
  baseDelay: Duration.millis(500),
  maxDelay: Duration.seconds(8),
  hintSpread: Duration.seconds(1),
  budget: { ratio: 0.2, minPerSecond: 5, shareWhenRetriesFail: 0.05 },
  concurrency: 64,
  connectTimeout: Duration.seconds(10)
}

/**
 * Fixed capacity: two attempts for failures that never reached the pool, a budget of 1% with a
 * floor of one retry every 5 s, and a gate of 8 that sheds.
 */
export const selfHostedDefaults: Defaults = {
  ...commonDefaults,
  attemptTimeout: Duration.seconds(30),
  maxAttempts: 2,
  baseDelay: Duration.millis(200),
  maxDelay: Duration.seconds(2),
  hintSpread: Duration.millis(500),
  budget: { ratio: 0.01, minPerSecond: 0.2, shareWhenRetriesFail: 1 },
  concurrency: 8,
  connectTimeout: Duration.seconds(3)
}

const defaultsOf = (kind: Kind): Defaults => kind === "managed" ? managedDefaults : selfHostedDefaults

/** Headers the transport sets itself: an idempotency header by one of these names would replace them. */
const reservedHeaders = ["accept", "authorization", "content-type", "content-length", "host", "transfer-encoding"]

/** A rule on text: `check` says what is wrong with it, if anything. */
const text = (check: (value: string) => string | undefined): Checked.Rule<string> =>
  Checked.rule((input) => {
    const problem = typeof input === "string" ? check(input) : "must be text"
    return problem === undefined ? Either.right(input as string) : Either.left(problem)
  })

/** What is wrong with a base URL, if anything; any credentials in it are not shown. */
const baseUrlProblem = (value: string): string | undefined => {
  // Credentials, or a key some providers take in the query, stay out of the message.
  const shown = JSON.stringify(value.replace(/^([^:/?#]*:\/\/)[^/?#]*@/, "$1***@").replace(/[?#].*$/s, "?***"))
  if (/\s/.test(value)) return `must not contain spaces, got ${shown}`
  if (!isHttpUrl(value)) return `must be an http(s) URL, got ${shown}`
  const url = new URL(value)
  if (url.username !== "" || url.password !== "") {
    return "must not hold credentials (the API key has a setting of its own)"
  }
  if (url.search !== "" || url.hash !== "") return "must not have a query or fragment"
  return undefined
}

/** Whether `value` is an absolute http or https URL. */
const isHttpUrl = (value: string): boolean => {
  try {
    const url = new URL(value)
    return url.protocol === "http:" || url.protocol === "https:"
  } catch {
    return false
  }
}

/** An API key, given redacted or (from the environment) as text; its value is never shown. */
const ApiKey: Checked.Rule<Redacted.Redacted> = Checked.rule(
  (input) => {
    const key = Redacted.isRedacted(input) ? input : typeof input === "string" ? Redacted.make(input) : undefined
    const value = key === undefined ? undefined : Redacted.value(key)
    return typeof value !== "string"
      ? Either.left("must be a Redacted string")
      : value === ""
      ? Either.left("must not be empty")
      // Shown in no message: a key with a stray newline is still a key.
      : /^[\x21-\x7e]+$/.test(value)
      ? Either.right(key as Redacted.Redacted<string>)
      : Either.left("must not contain spaces, control or non-ASCII characters (its value is not shown)")
  }
)

/**
 * Per-model timeouts: a record, or (from the environment) `model=duration` pairs separated by
 * commas. Each timeout follows the rules of `attemptTimeout`.
 */
const TimeoutsByModel = Checked.andThen(
  Checked.rule((input) => {
    if (typeof input !== "string") {
      return typeof input === "object" && input !== null && !Array.isArray(input)
        ? Either.right(input as Record<string, unknown>)
        : Either.left("must be a record of model => duration")
    }
    const result: Record<string, unknown> = {}
    for (const pair of input.split(",").map((part) => part.trim()).filter((part) => part !== "")) {
      const [model, timeout, ...extra] = pair.split("=").map((part) => part.trim())
      if (model === undefined || model === "" || timeout === undefined || extra.length > 0) {
        return Either.left(`must read model=duration,…, got ${JSON.stringify(pair)}`)
      }
      if (Object.hasOwn(result, model)) return Either.left(`must name each model once, got ${model} twice`)
      result[model] = timeout
    }
    return Either.right(result)
  }),
  Checked.recordOf(Checked.positiveDuration)
)

const settingsFor = (kind: Kind) => {
  const defaults = defaultsOf(kind)
  const withDefault = Checked.withDefault
  const checked = Checked.struct({
    name: Checked.nonEmpty,
    baseUrl: text(baseUrlProblem),
    model: Checked.nonEmpty,
    // Required of a managed API, which bills per key; a self-hosted pool may take none.
    apiKey: kind === "managed" ? ApiKey : Checked.optional(ApiKey),
    // The retry settings follow a policy's rules (`Resilient.policy`), with the kind's defaults.
    attemptTimeout: withDefault(Policies.fields.attemptTimeout, defaults.attemptTimeout),
    attemptTimeoutByModel: withDefault(TimeoutsByModel, {}),
    maxAttempts: withDefault(Policies.fields.maxAttempts, defaults.maxAttempts),
    // A zero base makes every retry immediate, whatever the cap says: a target's base is positive.
    baseDelay: withDefault(Checked.positiveDuration, defaults.baseDelay),
    maxDelay: withDefault(Policies.fields.maxDelay, defaults.maxDelay),
    hintSpread: withDefault(Policies.fields.hintSpread, defaults.hintSpread),
    maxRetryAfter: withDefault(Policies.fields.maxRetryAfter, defaults.maxRetryAfter),
    minAttemptTime: Checked.optional(Policies.fields.minAttemptTime),
    replaySafe: withDefault(Policies.fields.replaySafe, defaults.replaySafe),
    propagateTrace: withDefault(Checked.flag, defaults.propagateTrace),
    budget: withDefault(
      Checked.struct({
        ratio: withDefault(BudgetRules.ratio, defaults.budget.ratio),
        minPerSecond: withDefault(BudgetRules.minPerSecond, defaults.budget.minPerSecond),
        shareWhenRetriesFail: withDefault(BudgetRules.shareWhenRetriesFail, defaults.budget.shareWhenRetriesFail)
      }),
      defaults.budget
    ),
    concurrency: withDefault(Checked.integerAtLeast(1), defaults.concurrency),
    requestsPerMinute: withDefault(Checked.integerAtLeast(1, { orInfinite: true }), defaults.requestsPerMinute),
    tokensPerMinute: withDefault(Checked.integerAtLeast(1, { orInfinite: true }), defaults.tokensPerMinute),
    idempotencyHeader: withDefault(
      text((value) =>
        !/^[A-Za-z0-9-]+$/.test(value)
          ? `must be a header name (letters, digits and -), got ${JSON.stringify(value)}`
          : reservedHeaders.includes(value.toLowerCase())
          ? `must not be a header the client sets itself (${reservedHeaders.join(", ")}), got ${JSON.stringify(value)}`
          : undefined
      ),
      defaults.idempotencyHeader
    ),
    maxResponseBytes: withDefault(Checked.integerAtLeast(1), defaults.maxResponseBytes),
    connectTimeout: withDefault(Checked.positiveDuration, defaults.connectTimeout),
    probeInterval: Checked.optional(Checked.finitePositiveDuration),
    probePath: Checked.optional(
      text((value) =>
        /^\/[^\s?#]*$/.test(value)
          ? undefined
          // A query may hold a key: what follows `?` or `#` is not shown.
          : `must be a path starting with /, with no spaces, query or fragment, got ${
            JSON.stringify(value.replace(/[?#].*$/s, "?***"))
          }`
      )
    )
  })
  const related = Checked.refine(checked, (target) => {
    const minAttemptTime = target.minAttemptTime
    return [
      Checked.notLongerThan(["baseDelay"], target.baseDelay, ["maxDelay"], target.maxDelay),
      // Checked here, not by the policy of the first call to a model: a bad pair fails the layer.
      ...(minAttemptTime === undefined ? [] : [
        Checked.shorterThan(["minAttemptTime"], minAttemptTime, ["attemptTimeout"], target.attemptTimeout),
        ...Object.entries(target.attemptTimeoutByModel).map(([model, timeout]) =>
          Checked.shorterThan(["minAttemptTime"], minAttemptTime, ["attemptTimeoutByModel", model], timeout)
        )
      ])
    ]
  })
  return Checked.map(related, (settings): Target => ({
    ...settings,
    kind,
    apiKey: settings.apiKey,
    minAttemptTime: settings.minAttemptTime
  }))
}

/** The rules of each kind's settings, defaults included: what `managed`, `selfHosted` and `config` check. */
const settings: Readonly<Record<Kind, Checked.Rule<Target>>> = {
  managed: settingsFor("managed"),
  "self-hosted": settingsFor("self-hosted")
}

const subjectOf = (input: unknown): string => {
  const name = (input as { readonly name?: unknown } | undefined)?.name
  return typeof name === "string" && name.trim() !== "" ? `target ${name}` : "target"
}

/**
 * Checks a target's settings, naming each bad one with `label` (the option's name by default):
 * for a program that checks one setting given another way, as the CLI checks its flags.
 */
export const decode = (
  kind: Kind,
  options: Options,
  label?: (path: Checked.Path) => string
): Either.Either<Target, Settings.InvalidSettings> => Checked.decoder(settings[kind], subjectOf, label)(options)

const managedDecoder = Checked.validate(settings.managed, subjectOf)
const selfHostedDecoder = Checked.validate(settings["self-hosted"], subjectOf)

/**
 * A managed, elastic target; bad settings fail with one `InvalidSettings` naming each.
 *
 * ```ts
 * import { Target } from "@resilient-ai/client"
 * import { Redacted } from "effect"
 *
 * const target = yield* Target.managed({
 *   name: "mistral", baseUrl: "https://api.mistral.ai/v1", model: "mistral-small-latest",
 *   apiKey: Redacted.make(process.env.MISTRAL_API_KEY!)
 * })
 * ```
 */
export const managed = (options: Options): Effect.Effect<Target, Settings.InvalidSettings> => managedDecoder(options)

/** A fixed-capacity, self-hosted target; bad settings fail with one `InvalidSettings` naming each. */
export const selfHosted = (options: Options): Effect.Effect<Target, Settings.InvalidSettings> =>
  selfHostedDecoder(options)

/**
 * A target read from environment variables under `prefix` (with the default `ConfigProvider`):
 * `{prefix}_BASE_URL`, `_MODEL`, `_API_KEY` (required for a managed target), `_ATTEMPT_TIMEOUT`,
 * `_ATTEMPT_TIMEOUTS` (`model=duration,…`), `_MAX_ATTEMPTS`, `_BASE_DELAY`, `_MAX_DELAY`,
 * `_HINT_SPREAD`, `_MAX_RETRY_AFTER`, `_MIN_ATTEMPT_TIME`, `_REPLAY_SAFE`, `_PROPAGATE_TRACE`,
 * `_BUDGET_RATIO`, `_BUDGET_MIN_PER_SECOND`, `_BUDGET_SHARE_WHEN_RETRIES_FAIL`, `_CONCURRENCY`,
 * `_REQUESTS_PER_MINUTE`, `_TOKENS_PER_MINUTE`, `_IDEMPOTENCY_HEADER`,
 * `_MAX_RESPONSE_BYTES`, `_CONNECT_TIMEOUT`. The rules are those of the options object (`managed`, `selfHosted`);
 * anything invalid is one `ConfigError` naming every bad variable and the rule it breaks.
 */
export const config = (kind: Kind, prefix: string, name: string = prefix.toLowerCase()): Config.Config<Target> =>
  Checked.config(settings[kind], variablesOf(prefix, name))

/**
 * `config("managed", prefix)`: a managed target read from `{prefix}_*`, checked when the layer is built.
 *
 * ```ts
 * import { NodeHttpClient } from "@effect/platform-node"
 * import { ModelClient, Target } from "@resilient-ai/client"
 * import { Layer } from "effect"
 *
 * // MISTRAL_BASE_URL, MISTRAL_MODEL, MISTRAL_API_KEY, and any of the tuning variables `config` lists.
 * const MistralLive = ModelClient.layer(Target.managedConfig("MISTRAL")).pipe(Layer.provide(NodeHttpClient.layerUndici))
 * ```
 */
export const managedConfig = (prefix: string, name?: string): Config.Config<Target> => config("managed", prefix, name)

/** `config("self-hosted", prefix)`. */
export const selfHostedConfig = (prefix: string, name?: string): Config.Config<Target> =>
  config("self-hosted", prefix, name)
