/**
 * The metrics of the failure path, as the engine updates them and the health diagnosis reads them:
 * Effect `Metric`s tagged by target and model, built once per pair.
 */
import {
  type Counter,
  counter,
  exponentialBoundaries,
  type Gauge,
  gauge,
  type Histogram,
  histogram,
  tagged
} from "#effect-line"
import { processWide } from "./processWide.js"

/** Attempts started, first attempts included. */
const attempts = counter("resilient_ai_attempts_total", "attempts sent to the provider, first attempts included")

/** Logical calls that succeeded. */
const successes = counter("resilient_ai_successes_total", "logical calls that returned a validated success")

/** Logical calls that ended in `CallFailed`, tagged by `reason`. */
const callsFailed = counter(
  "resilient_ai_calls_failed_total",
  "logical calls that ended without a success, by stop reason"
)

/** For each successful call, the attempts it took. */
const attemptsPerSuccess = histogram(
  "resilient_ai_attempts_per_success",
  [1, 2, 3, 4, 5, 6, 8, 10],
  "attempts each successful call took"
)

/** Attempt failures, tagged by `kind` (the failure's tag). */
const failures = counter("resilient_ai_failures_total", "failed attempts, by failure kind")

/** Retries started (second and later attempts). */
const retries = counter("resilient_ai_retries_total", "retries started")

/** Retries that returned the call's success. */
const retriesSucceeded = counter("resilient_ai_retries_succeeded_total", "retries that returned the call's success")

/** Retries the budget refused. */
const budgetExhausted = counter("resilient_ai_budget_exhausted_total", "retries refused by the retry budget")

/** Attempts and sleeps not started because they could not finish before the deadline. */
const deadlineSkips = counter(
  "resilient_ai_deadline_skips_total",
  "attempts or sleeps skipped because they could not finish before the deadline"
)

/** From 1 ms to about two minutes, doubling: a sleep or a wait in seconds, as Prometheus names time. */
const secondsBoundaries = exponentialBoundaries({ start: 0.001, factor: 2, count: 18 })

/** Delays actually slept before retries, in seconds. */
const retryDelay = histogram(
  "resilient_ai_retry_delay_seconds",
  secondsBoundaries,
  "delays slept before retries, in seconds"
)

/** How long attempts waited for their turn in the key's pace (`RateLimiter`), when they waited, in seconds. */
const pacedWait = histogram(
  "resilient_ai_paced_wait_seconds",
  secondsBoundaries,
  "time attempts waited for their turn under the key's requests and tokens per minute, in seconds"
)

/** Calls refused at once by a full gate of a shedding target. */
const shed = counter("resilient_ai_shed_total", "calls shed by a full concurrency gate")

/** Resilient calls that ran inside another's attempt and so made a single attempt. */
const nestedSingleAttempts = counter(
  "resilient_ai_nested_single_attempts_total",
  "resilient calls nested in another's attempt, which made one attempt and left retrying to it"
)

/** Tokens the provider reported, tagged by `kind` (`prompt`, `completion`). */
const tokens = counter("resilient_ai_tokens_total", "tokens the provider reported as used, by kind")

/** The tags that name a target and a model. */
const tagsFor = (target: string, model: string | undefined): Readonly<Record<string, string>> => ({
  target,
  model: model ?? "default"
})

/** Every metric above, tagged for one target and model; built once per pair. */
export interface TargetMetrics {
  readonly tags: Readonly<Record<string, string>>
  readonly attempts: Counter
  readonly successes: Counter
  readonly attemptsPerSuccess: Histogram
  readonly retries: Counter
  readonly retriesSucceeded: Counter
  readonly budgetExhausted: Counter
  readonly deadlineSkips: Counter
  readonly retryDelay: Histogram
  readonly pacedWait: Histogram
  readonly shed: Counter
  readonly nestedSingleAttempts: Counter
  readonly failures: (kind: string) => Counter
  readonly callsFailed: (reason: string) => Counter
  readonly tokens: (kind: string) => Counter
}

const cache = processWide("@resilient-ai/policy/Metrics/cache", () => new Map<string, TargetMetrics>())

/** The metrics of one target and model. */
export const forTarget = (target: string, model?: string | undefined): TargetMetrics => {
  const key = `${target}\u0000${model ?? "default"}`
  const cached = cache.get(key)
  if (cached !== undefined) return cached
  const tags = tagsFor(target, model)
  const tag = <M extends Counter | Histogram>(metric: M) => tagged(metric, tags)
  const byKind = (metric: Counter, label: string) => {
    const made = new Map<string, Counter>()
    return (value: string) => {
      let found = made.get(value)
      if (found === undefined) {
        found = tagged(metric, { ...tags, [label]: value })
        made.set(value, found)
      }
      return found
    }
  }
  const made: TargetMetrics = {
    tags,
    attempts: tag(attempts),
    successes: tag(successes),
    attemptsPerSuccess: tag(attemptsPerSuccess),
    retries: tag(retries),
    retriesSucceeded: tag(retriesSucceeded),
    budgetExhausted: tag(budgetExhausted),
    deadlineSkips: tag(deadlineSkips),
    retryDelay: tag(retryDelay),
    pacedWait: tag(pacedWait),
    shed: tag(shed),
    nestedSingleAttempts: tag(nestedSingleAttempts),
    failures: byKind(failures, "kind"),
    callsFailed: byKind(callsFailed, "reason"),
    tokens: byKind(tokens, "kind")
  }
  cache.set(key, made)
  return made
}

/** The metrics of every model `target` has been called with so far. */
export const allForTarget = (target: string): ReadonlyArray<TargetMetrics> => {
  const prefix = `${target}\u0000`
  const found: Array<TargetMetrics> = []
  for (const [key, metrics] of cache) if (key.startsWith(prefix)) found.push(metrics)
  return found
}

/** The target's diagnosis, one series per state: 1 for the current one, 0 for the others. */
const diagnosis = gauge(
  "resilient_ai_diagnosis",
  "the target's diagnosis: 1 for the current state (healthy, provider-degraded, self-inflicted), 0 for the others"
)

/** Whether the target's health probe last found the provider answering. */
const probeUp = gauge(
  "resilient_ai_probe_up",
  "1 when the target's health probe last found the provider answering, else 0"
)

/** How long the health probes took, in seconds. */
const probeDuration = histogram(
  "resilient_ai_probe_duration_seconds",
  secondsBoundaries,
  "how long the target's health probes took, in seconds"
)

/** The health metrics of one target (a probe is per target, not per model). */
export interface HealthMetrics {
  readonly diagnosis: (state: string) => Gauge
  readonly probeUp: Gauge
  readonly probeDuration: Histogram
}

const healthCache = processWide("@resilient-ai/policy/Metrics/healthCache", () => new Map<string, HealthMetrics>())

/** The health metrics of `target`, tagged `target`. */
export const healthOf = (target: string): HealthMetrics => {
  const cached = healthCache.get(target)
  if (cached !== undefined) return cached
  const tags = { target }
  const byState = new Map<string, Gauge>()
  const made: HealthMetrics = {
    diagnosis: (state) => {
      let found = byState.get(state)
      if (found === undefined) {
        found = tagged(diagnosis, { ...tags, state })
        byState.set(state, found)
      }
      return found
    },
    probeUp: tagged(probeUp, tags),
    probeDuration: tagged(probeDuration, tags)
  }
  healthCache.set(target, made)
  return made
}

/**
 * The `q` quantile (0..1) of `values` by nearest rank; `undefined` when there are none. Pass
 * `{ sorted: true }` for values already in ascending order, to skip the copy and sort.
 */
export const quantile = (
  values: ReadonlyArray<number>,
  q: number,
  options?: { readonly sorted?: boolean | undefined }
): number | undefined => {
  if (values.length === 0) return undefined
  const sorted = options?.sorted === true ? values : [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length))) - 1]
}
