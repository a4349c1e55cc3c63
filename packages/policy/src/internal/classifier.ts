/**
 * `Classifier` with what only the engine reads of it: the shape of a classifier, and whether a
 * failure never reached the provider.
 */
import type { Verdict } from "../Classifier.js"
import type * as Failure from "../Failure.js"
import * as Failures from "./failures.js"

export * from "../Classifier.js"

/** Decides the verdict of a failure: what `Classifier` holds. */
export interface Service {
  readonly classify: (failure: Failure.Failure) => Verdict
}

/**
 * Whether a failure happened before the request reached the provider (a refused or timed-out
 * connection, or one reset before the request was sent): nothing ran and nothing was billed.
 */
export const neverReached = (failure: Failure.Failure): boolean =>
  Failures.isFailure(failure) &&
  (failure._tag === "ConnectFailed" || failure._tag === "ConnectTimeout" ||
    (failure._tag === "ConnectionReset" && !failure.afterSend))
