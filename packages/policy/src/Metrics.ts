/**
 * The failure path, measured: Effect `Metric`s tagged by target and model.
 *
 * A success rate stays green while retries hide a degrading provider; attempts per successful
 * call is the number that makes amplification visible. Next to it: budget exhaustions (the alert
 * that matters), attempts skipped for the deadline, the delays actually slept (if they are not
 * spread, jitter is not working), and how many retries turned into successes (if few do, the
 * budget should be smaller).
 */
import { counted, type HistogramState, histogramState } from "#effect-line"
import * as Effect from "effect/Effect"
import * as Failures from "./internal/failures.js"
import { forTarget } from "./internal/metrics.js"

/** The failure path of one target, read back for a report. */
export interface Summary {
  readonly attempts: number
  readonly successes: number
  /** `attempts / successes`; `NaN` before the first success. */
  readonly attemptsPerSuccess: number
  readonly retries: number
  readonly retriesSucceeded: number
  readonly budgetExhausted: number
  readonly deadlineSkips: number
  readonly shed: number
  readonly nestedSingleAttempts: number
  readonly retryDelay: HistogramState
  readonly failuresByKind: Readonly<Record<string, number>>
  readonly callsFailedByReason: Readonly<Record<string, number>>
}

const nonZero = <K extends string>(keys: ReadonlyArray<K>, read: (key: K) => number): Record<string, number> => {
  const result: Record<string, number> = {}
  for (const key of keys) {
    const count = read(key)
    if (count > 0) result[key] = count
  }
  return result
}

/** Reads the metrics of one target and model. */
export const summary = (target: string, model?: string | undefined): Effect.Effect<Summary> =>
  Effect.sync(() => {
    const metrics = forTarget(target, model)
    const count = counted
    const attemptCount = count(metrics.attempts)
    const successCount = count(metrics.successes)
    return {
      attempts: attemptCount,
      successes: successCount,
      attemptsPerSuccess: successCount === 0 ? Number.NaN : attemptCount / successCount,
      retries: count(metrics.retries),
      retriesSucceeded: count(metrics.retriesSucceeded),
      budgetExhausted: count(metrics.budgetExhausted),
      deadlineSkips: count(metrics.deadlineSkips),
      shed: count(metrics.shed),
      nestedSingleAttempts: count(metrics.nestedSingleAttempts),
      retryDelay: histogramState(metrics.retryDelay),
      failuresByKind: nonZero(Failures.failureTags, (kind) => count(metrics.failures(kind))),
      callsFailedByReason: nonZero(Failures.stopReasons, (reason) => count(metrics.callsFailed(reason)))
    }
  })
