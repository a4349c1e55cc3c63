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
import { Classifier, ConfigDuration, Resilient } from "@resilient-ai/policy"
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

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
  readonly budget: { readonly ratio: number; readonly minPerSecond: number }
  /** In-flight calls allowed at once. */
  readonly concurrency: number
  /** The header every attempt of a call carries its request id in. */
  readonly idempotencyHeader: string
  readonly maxResponseBytes: number
  /** How long opening a connection may take; set on the HTTP client's dispatcher. */
  readonly connectTimeout: Duration.Duration
}

/** Settings of a target; what is left out takes the kind's default. */
export interface Options {
  readonly name: string
  readonly baseUrl: string
  readonly model: string
  readonly apiKey?: Redacted.Redacted | undefined
  readonly attemptTimeout?: Duration.DurationInput | undefined
  readonly attemptTimeoutByModel?: Readonly<Record<string, Duration.DurationInput>> | undefined
  readonly maxAttempts?: number | undefined
  readonly baseDelay?: Duration.DurationInput | undefined
  readonly maxDelay?: Duration.DurationInput | undefined
  readonly hintSpread?: Duration.DurationInput | undefined
  readonly maxRetryAfter?: Duration.DurationInput | undefined
  readonly minAttemptTime?: Duration.DurationInput | undefined
  readonly replaySafe?: boolean | undefined
  readonly propagateTrace?: boolean | undefined
  readonly budget?: { readonly ratio?: number | undefined; readonly minPerSecond?: number | undefined } | undefined
  readonly concurrency?: number | undefined
  readonly idempotencyHeader?: string | undefined
  readonly maxResponseBytes?: number | undefined
  readonly connectTimeout?: Duration.DurationInput | undefined
}

type Defaults = Omit<Target, "name" | "kind" | "baseUrl" | "model" | "apiKey" | "attemptTimeoutByModel">

/** The defaults both kinds share. */
const commonDefaults = {
  idempotencyHeader: "Idempotency-Key",
  maxResponseBytes: 8 * 1024 * 1024,
  maxRetryAfter: Duration.seconds(60),
  minAttemptTime: undefined,
  replaySafe: false,
  propagateTrace: false
}

/** Managed, elastic capacity: three attempts, a 10% budget with a floor of 5/s, a queue of 64. */
export const managedDefaults: Defaults = {
  ...commonDefaults,
  attemptTimeout: Duration.seconds(60),
  maxAttempts: 3,
  baseDelay: Duration.millis(500),
  maxDelay: Duration.seconds(8),
  hintSpread: Duration.seconds(1),
  budget: { ratio: 0.1, minPerSecond: 5 },
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
  budget: { ratio: 0.01, minPerSecond: 0.2 },
  concurrency: 8,
  connectTimeout: Duration.seconds(3)
}

const defaultsOf = (kind: Kind): Defaults => kind === "managed" ? managedDefaults : selfHostedDefaults

/** A setting of a target, as `problems` names it. */
export type Setting =
  | "name"
  | "baseUrl"
  | "model"
  | "apiKey"
  | "attemptTimeout"
  | "attemptTimeoutByModel"
  | "maxAttempts"
  | "baseDelay"
  | "maxDelay"
  | "hintSpread"
  | "maxRetryAfter"
  | "minAttemptTime"
  | "replaySafe"
  | "propagateTrace"
  | "budgetRatio"
  | "budgetMinPerSecond"
  | "concurrency"
  | "idempotencyHeader"
  | "maxResponseBytes"
  | "connectTimeout"

/** The environment variable of each setting, after the prefix and `_`. */
const variables: Readonly<Record<Exclude<Setting, "name">, string>> = {
  baseUrl: "BASE_URL",
  model: "MODEL",
  apiKey: "API_KEY",
  attemptTimeout: "ATTEMPT_TIMEOUT",
  attemptTimeoutByModel: "ATTEMPT_TIMEOUTS",
  maxAttempts: "MAX_ATTEMPTS",
  baseDelay: "BASE_DELAY",
  maxDelay: "MAX_DELAY",
  hintSpread: "HINT_SPREAD",
  maxRetryAfter: "MAX_RETRY_AFTER",
  minAttemptTime: "MIN_ATTEMPT_TIME",
  replaySafe: "REPLAY_SAFE",
  propagateTrace: "PROPAGATE_TRACE",
  budgetRatio: "BUDGET_RATIO",
  budgetMinPerSecond: "BUDGET_MIN_PER_SECOND",
  concurrency: "CONCURRENCY",
  idempotencyHeader: "IDEMPOTENCY_HEADER",
  maxResponseBytes: "MAX_RESPONSE_BYTES",
  connectTimeout: "CONNECT_TIMEOUT"
}

/** The option that holds each setting: its own name, but for the two fields of `budget`. */
const optionName = (setting: Setting): string =>
  setting === "budgetRatio" ? "budget ratio" : setting === "budgetMinPerSecond" ? "budget minPerSecond" : setting

/** Headers the transport sets itself: an idempotency header by one of these names would replace them. */
const reservedHeaders = ["accept", "authorization", "content-type", "content-length", "host", "transfer-encoding"]

/**
 * Why a target's settings cannot work, one message per setting, each naming it `label(setting)`
 * (the option's name by default; `config` names the environment variable). The API key is never shown.
 */
export const problems = (
  target: Target,
  label: (setting: Setting) => string = optionName
): ReadonlyArray<string> => {
  const found: Array<string> = []
  const positive = (name: string, value: Duration.Duration) => {
    if (!(Duration.toMillis(value) > 0)) found.push(`${name} must be positive, got ${Duration.format(value)}`)
  }
  const atLeastOne = (setting: Setting, value: number) => {
    if (!Number.isInteger(value) || value < 1) found.push(`${label(setting)} must be an integer >= 1, got ${value}`)
  }
  if (target.name.trim() === "") found.push(`${label("name")} must not be empty`)
  const badUrl = baseUrlProblem(target.baseUrl)
  if (badUrl !== undefined) found.push(`${label("baseUrl")} ${badUrl}`)
  if (target.model.trim() === "") found.push(`${label("model")} must not be empty`)
  if (target.apiKey === undefined) {
    if (target.kind === "managed") found.push(`${label("apiKey")} is required for a managed target`)
  } else if (Redacted.value(target.apiKey) === "") {
    found.push(`${label("apiKey")} must not be empty`)
  } else if (!/^[\x21-\x7e]+$/.test(Redacted.value(target.apiKey))) {
    // Shown in no message: a key with a stray newline is still a key.
    found.push(`${label("apiKey")} must not contain spaces, control or non-ASCII characters (its value is not shown)`)
  }
  positive(label("attemptTimeout"), target.attemptTimeout)
  for (const [model, timeout] of Object.entries(target.attemptTimeoutByModel)) {
    positive(`${label("attemptTimeoutByModel")} (${model})`, timeout)
  }
  // Checked here, not by the policy of the first call to a model: a bad pair fails the layer.
  const minAttemptTime = target.minAttemptTime
  if (minAttemptTime !== undefined) {
    const timeouts: Array<readonly [string, Duration.Duration]> = [
      [label("attemptTimeout"), target.attemptTimeout],
      ...Object.entries(target.attemptTimeoutByModel).map(([model, timeout]) =>
        [`${label("attemptTimeoutByModel")} (${model})`, timeout] as const
      )
    ]
    for (const [name, timeout] of timeouts) {
      if (Duration.toMillis(timeout) > 0 && !Duration.lessThan(minAttemptTime, timeout)) {
        found.push(
          `${label("minAttemptTime")} (${Duration.format(minAttemptTime)}) must be shorter than ${name} (${
            Duration.format(timeout)
          })`
        )
      }
    }
  }
  atLeastOne("maxAttempts", target.maxAttempts)
  // A zero base makes every retry immediate, whatever the cap says.
  positive(label("baseDelay"), target.baseDelay)
  if (Duration.greaterThan(target.baseDelay, target.maxDelay)) {
    found.push(
      `${label("baseDelay")} (${Duration.format(target.baseDelay)}) must not exceed ${label("maxDelay")} (${
        Duration.format(target.maxDelay)
      })`
    )
  }
  if (!(target.budget.ratio >= 0 && target.budget.ratio <= 1)) {
    found.push(`${label("budgetRatio")} must be between 0 and 1 (0.1 allows 10% retries), got ${target.budget.ratio}`)
  }
  if (!(target.budget.minPerSecond >= 0 && Number.isFinite(target.budget.minPerSecond))) {
    found.push(`${label("budgetMinPerSecond")} must be a finite number >= 0, got ${target.budget.minPerSecond}`)
  }
  atLeastOne("concurrency", target.concurrency)
  if (!/^[A-Za-z0-9-]+$/.test(target.idempotencyHeader)) {
    found.push(
      `${label("idempotencyHeader")} must be a header name (letters, digits and -), got ${
        JSON.stringify(target.idempotencyHeader)
      }`
    )
  } else if (reservedHeaders.includes(target.idempotencyHeader.toLowerCase())) {
    found.push(
      `${label("idempotencyHeader")} must not be a header the client sets itself (${reservedHeaders.join(", ")}), got ${
        JSON.stringify(target.idempotencyHeader)
      }`
    )
  }
  atLeastOne("maxResponseBytes", target.maxResponseBytes)
  positive(label("connectTimeout"), target.connectTimeout)
  return found
}

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
export const isHttpUrl = (value: string): boolean => {
  try {
    const url = new URL(value)
    return url.protocol === "http:" || url.protocol === "https:"
  } catch {
    return false
  }
}

const durationOf = (input: Duration.DurationInput | undefined, fallback: Duration.Duration): Duration.Duration =>
  input === undefined ? fallback : Option.getOrElse(Duration.decodeUnknown(input), () => Duration.zero)

const make = (kind: Kind, options: Options): Target => {
  const defaults = defaultsOf(kind)
  const target: Target = {
    name: options.name,
    kind,
    baseUrl: options.baseUrl,
    model: options.model,
    apiKey: options.apiKey,
    attemptTimeout: durationOf(options.attemptTimeout, defaults.attemptTimeout),
    attemptTimeoutByModel: Object.fromEntries(
      Object.entries(options.attemptTimeoutByModel ?? {}).map((
        [model, timeout]
      ) => [model, durationOf(timeout, Duration.zero)])
    ),
    maxAttempts: options.maxAttempts ?? defaults.maxAttempts,
    baseDelay: durationOf(options.baseDelay, defaults.baseDelay),
    maxDelay: durationOf(options.maxDelay, defaults.maxDelay),
    hintSpread: durationOf(options.hintSpread, defaults.hintSpread),
    maxRetryAfter: durationOf(options.maxRetryAfter, defaults.maxRetryAfter),
    minAttemptTime: options.minAttemptTime === undefined
      ? undefined
      : durationOf(options.minAttemptTime, Duration.zero),
    replaySafe: options.replaySafe ?? defaults.replaySafe,
    propagateTrace: options.propagateTrace ?? defaults.propagateTrace,
    budget: {
      ratio: options.budget?.ratio ?? defaults.budget.ratio,
      minPerSecond: options.budget?.minPerSecond ?? defaults.budget.minPerSecond
    },
    concurrency: options.concurrency ?? defaults.concurrency,
    idempotencyHeader: options.idempotencyHeader ?? defaults.idempotencyHeader,
    maxResponseBytes: options.maxResponseBytes ?? defaults.maxResponseBytes,
    connectTimeout: durationOf(options.connectTimeout, defaults.connectTimeout)
  }
  const found = problems(target)
  if (found.length > 0) throw new RangeError(`target ${options.name}: ${found.join("; ")}`)
  return target
}

/** A managed, elastic target. Bad settings throw a `RangeError` naming them. */
export const managed = (options: Options): Target => make("managed", options)

/** A fixed-capacity, self-hosted target. Bad settings throw a `RangeError` naming them. */
export const selfHosted = (options: Options): Target => make("self-hosted", options)

/** The policy of requests for `model` (the target's own model unless named). */
export const policyFor = (target: Target, model: string = target.model): Resilient.Policy => {
  const attemptTimeout = target.attemptTimeoutByModel[model] ?? target.attemptTimeout
  return Resilient.policy({
    target: target.name,
    model,
    maxAttempts: target.maxAttempts,
    baseDelay: target.baseDelay,
    maxDelay: target.maxDelay,
    hintSpread: target.hintSpread,
    maxRetryAfter: target.maxRetryAfter,
    replaySafe: target.replaySafe,
    attemptTimeout,
    // From the model's own timeout: a model allowed 90 ms must not need 100 ms left to start.
    minAttemptTime: target.minAttemptTime ??
      Duration.min(Duration.millis(100), Duration.divide(attemptTimeout, 2).pipe(Option.getOrThrow))
  })
}

/** How a full gate behaves: managed targets queue (bounded by the deadline), self-hosted ones shed. */
export const gateMode = (target: Target): "queue" | "shed" => target.kind === "managed" ? "queue" : "shed"

/**
 * A self-hosted pool's classifier: a failure that reached the pool means the pool is busy, so
 * only failures that never reached it are retried; everything else, ambiguous ones included, ends
 * the call.
 */
export const selfHostedClassifier: Classifier.Service = {
  classify: (failure) => {
    switch (failure._tag) {
      case "ConnectFailed":
      case "ConnectTimeout":
        return "retryable"
      case "ConnectionReset":
        return failure.afterSend ? "terminal" : "retryable"
      default:
        return "terminal"
    }
  }
}

/** The classifier a target's calls use. */
export const classifierFor = (target: Target): Classifier.Service =>
  target.kind === "managed" ? { classify: Classifier.classifyDefault } : selfHostedClassifier

/** Reads `model=duration` pairs, separated by commas, naming the variable `label` in failures. */
const timeoutsByModel = (name: string, label: string): Config.Config<Record<string, Duration.Duration>> =>
  Config.mapOrFail(Config.string(name), (text) => {
    const result = new Map<string, Duration.Duration>()
    for (const pair of text.split(",").map((part) => part.trim()).filter((part) => part !== "")) {
      const [model, timeout, ...extra] = pair.split("=").map((part) => part.trim())
      const decoded = timeout === undefined ? Either.left("unreadable" as const) : ConfigDuration.parse(timeout)
      if (Either.isLeft(decoded) && decoded.left === "negative") {
        return Either.left(ConfigError.InvalidData([], `${label} must not be negative, got ${JSON.stringify(pair)}`))
      }
      if (model === undefined || model === "" || extra.length > 0 || Either.isLeft(decoded)) {
        return Either.left(
          ConfigError.InvalidData([], `${label} must read model=duration,…, got ${JSON.stringify(pair)}`)
        )
      }
      if (result.has(model)) {
        return Either.left(ConfigError.InvalidData([], `${label} must name each model once, got ${model} twice`))
      }
      result.set(model, decoded.right)
    }
    return Either.right(Object.fromEntries(result))
  })

/** The words `flag` reads, as Effect's `Config.boolean` reads them. */
const flagWords: Readonly<Record<string, boolean>> = {
  true: true,
  yes: true,
  on: true,
  "1": true,
  false: false,
  no: false,
  off: false,
  "0": false
}

/** Reads true or false (`yes`/`no`, `on`/`off`, `1`/`0`), naming the variable `label` when the text is neither. */
const flag = (name: string, label: string): Config.Config<boolean> =>
  Config.mapOrFail(Config.string(name), (text) => {
    const value = flagWords[text.trim().toLowerCase()]
    return value === undefined
      ? Either.left(ConfigError.InvalidData([], `${label} must be true or false, got ${JSON.stringify(text)}`))
      : Either.right(value)
  })

/** Reads a number, naming the variable `label` when the text is not one; its range is `problems`' to check. */
const number = (name: string, label: string): Config.Config<number> =>
  Config.mapOrFail(Config.string(name), (text) => {
    const value = text.trim() === "" ? Number.NaN : Number(text)
    return Number.isNaN(value)
      ? Either.left(ConfigError.InvalidData([], `${label} must be a number, got ${JSON.stringify(text)}`))
      : Either.right(value)
  })

/**
 * A target read from environment variables under `prefix` (with the default `ConfigProvider`):
 * `{prefix}_BASE_URL`, `_MODEL`, `_API_KEY` (required for a managed target), `_ATTEMPT_TIMEOUT`,
 * `_ATTEMPT_TIMEOUTS` (`model=duration,…`), `_MAX_ATTEMPTS`, `_BASE_DELAY`, `_MAX_DELAY`,
 * `_HINT_SPREAD`, `_MAX_RETRY_AFTER`, `_MIN_ATTEMPT_TIME`, `_REPLAY_SAFE`, `_PROPAGATE_TRACE`,
 * `_BUDGET_RATIO`, `_BUDGET_MIN_PER_SECOND`, `_CONCURRENCY`, `_IDEMPOTENCY_HEADER`,
 * `_MAX_RESPONSE_BYTES`, `_CONNECT_TIMEOUT`. Anything invalid is a `ConfigError` naming the
 * variable and the rule it breaks.
 */
export const config = (kind: Kind, prefix: string, name: string = prefix.toLowerCase()): Config.Config<Target> => {
  const defaults = defaultsOf(kind)
  const label = (setting: Setting) => setting === "name" ? "name" : `${prefix}_${variables[setting]}`
  const duration = (setting: Exclude<Setting, "name">, fallback: Duration.Duration) =>
    Config.withDefault(ConfigDuration.duration(variables[setting], label(setting)), fallback)
  const numeric = (setting: Exclude<Setting, "name">, fallback: number) =>
    Config.withDefault(number(variables[setting], label(setting)), fallback)
  const boolean = (setting: Exclude<Setting, "name">, fallback: boolean) =>
    Config.withDefault(flag(variables[setting], label(setting)), fallback)
  // Read as a string and wrapped at once: `Config.redacted` would also redact the message saying
  // the variable is missing, which is no secret and is what the operator needs to see.
  const key = Config.map(Config.string(variables.apiKey), Redacted.make)
  const apiKey = kind === "managed" ? key : Config.map(Config.option(key), Option.getOrUndefined)
  const settings = Config.all({
    baseUrl: Config.string(variables.baseUrl),
    model: Config.string(variables.model),
    apiKey,
    attemptTimeout: duration("attemptTimeout", defaults.attemptTimeout),
    attemptTimeoutByModel: Config.withDefault(
      timeoutsByModel(variables.attemptTimeoutByModel, label("attemptTimeoutByModel")),
      {}
    ),
    maxAttempts: numeric("maxAttempts", defaults.maxAttempts),
    baseDelay: duration("baseDelay", defaults.baseDelay),
    maxDelay: duration("maxDelay", defaults.maxDelay),
    hintSpread: duration("hintSpread", defaults.hintSpread),
    maxRetryAfter: duration("maxRetryAfter", defaults.maxRetryAfter),
    minAttemptTime: Config.map(
      Config.option(ConfigDuration.duration(variables.minAttemptTime, label("minAttemptTime"))),
      Option.getOrUndefined
    ),
    replaySafe: boolean("replaySafe", defaults.replaySafe),
    propagateTrace: boolean("propagateTrace", defaults.propagateTrace),
    ratio: numeric("budgetRatio", defaults.budget.ratio),
    minPerSecond: numeric("budgetMinPerSecond", defaults.budget.minPerSecond),
    concurrency: numeric("concurrency", defaults.concurrency),
    idempotencyHeader: Config.withDefault(Config.string(variables.idempotencyHeader), defaults.idempotencyHeader),
    maxResponseBytes: numeric("maxResponseBytes", defaults.maxResponseBytes),
    connectTimeout: duration("connectTimeout", defaults.connectTimeout)
  }).pipe(Config.nested(prefix))
  return Config.mapOrFail(settings, ({ minPerSecond, ratio, ...rest }) => {
    const target: Target = { ...rest, name, kind, budget: { ratio, minPerSecond } }
    const found = problems(target, label)
    return found.length === 0
      ? Either.right(target)
      : Either.left(ConfigError.InvalidData([], `target ${name} (${prefix}_*): ${found.join("; ")}`))
  })
}

/** `config("managed", prefix)`. */
export const managedConfig = (prefix: string, name?: string): Config.Config<Target> => config("managed", prefix, name)

/** `config("self-hosted", prefix)`. */
export const selfHostedConfig = (prefix: string, name?: string): Config.Config<Target> =>
  config("self-hosted", prefix, name)
