/**
 * The engine's parts that the sibling packages, the tests and the bench reach: not the documented
 * surface, and no compatibility promise.
 *
 * @internal
 */
export * as Attempts from "./attempt.js"
export * as BudgetRules from "./budgetRules.js"
export * as Decision from "./decision.js"
export * as Engine from "./engine.js"
export * as FastPath from "./fastPath.js"
export { keyFingerprint } from "./keyFingerprint.js"
export * as Policies from "./policy.js"
export * as Sha256 from "./sha256.js"
