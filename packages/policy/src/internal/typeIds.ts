/**
 * The type ids the toolkit's failures carry, as Effect's own errors carry theirs: a module of their
 * own, imported by `Failure` before its classes are defined and by whatever reads them.
 */

/** What every failure of the toolkit carries: `Failure.isFailure` reads it. */
export const FailureTypeId: unique symbol = Symbol.for("@resilient-ai/policy/Failure")

/** The type of `FailureTypeId`. */
export type FailureTypeId = typeof FailureTypeId

/** What `CallFailed`, the aggregate of a sequence, carries instead of `FailureTypeId`. */
export const CallFailedTypeId: unique symbol = Symbol.for("@resilient-ai/policy/CallFailed")

/** The type of `CallFailedTypeId`. */
export type CallFailedTypeId = typeof CallFailedTypeId
