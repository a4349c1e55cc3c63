/**
 * The rules of a retry budget's settings, written once: `RetryBudget` checks its options with them,
 * a policy checks its `budget` with them, and a target's settings reuse them.
 */
import * as Duration from "effect/Duration"
import * as Checked from "./settings.js"

/** The share of successful calls that retries may add: from 0 (none) to 1 (as many as succeed). */
export const ratio: Checked.Rule<number> = Checked.refine(
  Checked.number,
  (value) => (value >= 0 && value <= 1) || `must be between 0 and 1 (0.1 allows 10% retries), got ${value}`
)

/** Retries per second always allowed. */
export const minPerSecond = Checked.finiteAtLeastZero

/** The share of the allowance kept while no recent retry succeeds. */
export const shareWhenRetriesFail = Checked.shareOfOne

/** The rules of a budget's settings, defaults included. */
export const BudgetSettings = Checked.struct({
  ratio: Checked.withDefault(ratio, 0.1),
  window: Checked.withDefault(Checked.finitePositiveDuration, Duration.seconds(60)),
  minPerSecond: Checked.withDefault(minPerSecond, 5),
  buckets: Checked.withDefault(Checked.integerAtLeast(1), 60),
  shareWhenRetriesFail: Checked.withDefault(shareWhenRetriesFail, 1)
})
