/**
 * The engine's parts that the sibling packages, the tests and the bench reach: not the documented
 * surface, and no compatibility promise. A namespace named after a public module in the plural
 * (`Failures`, `Gates`) is that module with what only the toolkit uses of it.
 *
 * @internal
 */
export * as EffectLine from "#effect-line"
/** Success or failure as a value, as the line this build is for spells it (`Either` on Effect 3, `Result` on Effect 4). */
export { Either } from "#effect-line"
export * as Attempts from "./attempt.js"
export * as Backoffs from "./backoff.js"
export * as BudgetRules from "./budgetRules.js"
export * as Classifiers from "./classifier.js"
export * as Coordinations from "./coordination.js"
export * as Deadlines from "./deadline.js"
export * as Decision from "./decision.js"
export * as Engine from "./engine.js"
export * as Failures from "./failures.js"
export * as FastPath from "./fastPath.js"
export * as Gates from "./gate.js"
export * as Diagnoses from "./health.js"
export { keyFingerprint } from "./keyFingerprint.js"
export * as Meters from "./metrics.js"
export * as Policies from "./policy.js"
export * as Limiters from "./rateLimiter.js"
export * as Retries from "./resilient.js"
export * as Budgets from "./retryBudget.js"
export * as RetryHint from "./retryHint.js"
export * as Checked from "./settings.js"
export * as Sha256 from "./sha256.js"
