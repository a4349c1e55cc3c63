/**
 * `@resilient-ai/policy`: classification, retry hints, full-jitter backoff, the retry budget,
 * deadlines, the concurrency gate, where budgets and gates live, metrics, and the combinator that composes them.
 */
export * as Backoff from "./Backoff.js"
export * as Classifier from "./Classifier.js"
export * as ConcurrencyGate from "./ConcurrencyGate.js"
export * as Coordination from "./Coordination.js"
export * as Deadline from "./Deadline.js"
export * as Failure from "./Failure.js"
export * as Health from "./Health.js"
export * as Metrics from "./Metrics.js"
export * as RateLimiter from "./RateLimiter.js"
export * as Resilient from "./Resilient.js"
export * as RetryBudget from "./RetryBudget.js"
export * as Settings from "./Settings.js"
