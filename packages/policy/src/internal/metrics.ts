/**
 * The metrics of the failure path, as the engine updates them and the health diagnosis reads them:
 * Effect `Metric`s tagged by target and model, built once per pair.
 */
import * as Arr from "effect/Array"
import { globalValue } from "effect/GlobalValue"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricLabel from "effect/MetricLabel"

const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })

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
const attemptsPerSuccess = Metric.histogram(
  "resilient_ai_attempts_per_success",
  MetricBoundaries.fromIterable([1, 2, 3, 4, 5, 6, 8, 10]),
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
const secondsBoundaries = MetricBoundaries.exponential({ start: 0.001, factor: 2, count: 18 })

/** Delays actually slept before retries, in seconds. */
const retryDelay = Metric.histogram(
  "resilient_ai_retry_delay_seconds",
  secondsBoundaries,
  "delays slept before retries, in seconds"
)

/** How long attempts waited for their turn in the key's pace (`RateLimiter`), when they waited, in seconds. */
const pacedWait = Metric.histogram(
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

/** The labels that name a target and a model. */
const labelsFor = (target: string, model: string | undefined): ReadonlyArray<MetricLabel.MetricLabel> => [
  MetricLabel.make("target", target),
  MetricLabel.make("model", model ?? "default")
]

/** Every metric above, tagged for one target and model; built once per pair. */
export interface TargetMetrics {
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
  readonly attempts: Metric.Metric.Counter<number>
  readonly successes: Metric.Metric.Counter<number>
  readonly attemptsPerSuccess: Metric.Metric.Histogram<number>
  readonly retries: Metric.Metric.Counter<number>
  readonly retriesSucceeded: Metric.Metric.Counter<number>
  readonly budgetExhausted: Metric.Metric.Counter<number>
  readonly deadlineSkips: Metric.Metric.Counter<number>
  readonly retryDelay: Metric.Metric.Histogram<number>
  readonly pacedWait: Metric.Metric.Histogram<number>
  readonly shed: Metric.Metric.Counter<number>
  readonly nestedSingleAttempts: Metric.Metric.Counter<number>
  readonly failures: (kind: string) => Metric.Metric.Counter<number>
  readonly callsFailed: (reason: string) => Metric.Metric.Counter<number>
  readonly tokens: (kind: string) => Metric.Metric.Counter<number>
}

const cache = globalValue("@resilient-ai/policy/Metrics/cache", () => new Map<string, TargetMetrics>())

/**
 * `metric` with `labels`, as `Metric.taggedWithLabels` makes it, but cheap to update. Effect finds
 * a metric's state by the identity of the label array it is updated with; `taggedWithLabels` joins
 * the labels into a new array on every update, so every update built and looked up a metric key.
 * Here an update without labels of its own passes the same array every time.
 */
const taggedOnce = <Type, In, Out>(
  metric: Metric.Metric<Type, In, Out>,
  labels: ReadonlyArray<MetricLabel.MetricLabel>
): Metric.Metric<Type, In, Out> => {
  const withExtra = (extra: ReadonlyArray<MetricLabel.MetricLabel>) =>
    extra.length === 0 ? labels : Arr.union(labels, extra)
  return Metric.make(
    metric.keyType,
    (input, extra) => metric.unsafeUpdate(input, withExtra(extra)),
    (extra) => metric.unsafeValue(withExtra(extra)),
    (input, extra) => metric.unsafeModify(input, withExtra(extra))
  )
}

/** The metrics of one target and model. */
export const forTarget = (target: string, model?: string | undefined): TargetMetrics => {
  const key = `${target}\u0000${model ?? "default"}`
  const cached = cache.get(key)
  if (cached !== undefined) return cached
  const labels = labelsFor(target, model)
  const tag = <Type, In, Out>(metric: Metric.Metric<Type, In, Out>) => taggedOnce(metric, labels)
  const byKind = <Type, In, Out>(metric: Metric.Metric<Type, In, Out>, label: string) => {
    const tagged = new Map<string, Metric.Metric<Type, In, Out>>()
    return (value: string) => {
      let found = tagged.get(value)
      if (found === undefined) {
        found = taggedOnce(metric, [...labels, MetricLabel.make(label, value)])
        tagged.set(value, found)
      }
      return found
    }
  }
  const made: TargetMetrics = {
    labels,
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
const diagnosis = Metric.gauge("resilient_ai_diagnosis", {
  description:
    "the target's diagnosis: 1 for the current state (healthy, provider-degraded, self-inflicted), 0 for the others"
})

/** Whether the target's health probe last found the provider answering. */
const probeUp = Metric.gauge("resilient_ai_probe_up", {
  description: "1 when the target's health probe last found the provider answering, else 0"
})

/** How long the health probes took, in seconds. */
const probeDuration = Metric.histogram(
  "resilient_ai_probe_duration_seconds",
  secondsBoundaries,
  "how long the target's health probes took, in seconds"
)

/** The health metrics of one target (a probe is per target, not per model). */
export interface HealthMetrics {
  readonly diagnosis: (state: string) => Metric.Metric.Gauge<number>
  readonly probeUp: Metric.Metric.Gauge<number>
  readonly probeDuration: Metric.Metric.Histogram<number>
}

const healthCache = globalValue("@resilient-ai/policy/Metrics/healthCache", () => new Map<string, HealthMetrics>())

/** The health metrics of `target`, tagged `target`. */
export const healthOf = (target: string): HealthMetrics => {
  const cached = healthCache.get(target)
  if (cached !== undefined) return cached
  const labels = [MetricLabel.make("target", target)]
  const byState = new Map<string, Metric.Metric.Gauge<number>>()
  const made: HealthMetrics = {
    diagnosis: (state) => {
      let found = byState.get(state)
      if (found === undefined) {
        found = taggedOnce(diagnosis, [...labels, MetricLabel.make("state", state)])
        byState.set(state, found)
      }
      return found
    },
    probeUp: taggedOnce(probeUp, labels),
    probeDuration: taggedOnce(probeDuration, labels)
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
