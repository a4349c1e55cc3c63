/**
 * The verdict on every failure: retry it, stop, or replay it only when the call is replay-safe.
 *
 * Classifying before retrying is what keeps a retry policy from retrying a 400, a spent quota or
 * a timed-out POST that is still billing. The default classifier encodes the seeds' table; a
 * target can provide its own through `layer` (it is a `Context.Reference`, so nothing needs to
 * provide it unless it wants to change it).
 */
import { type Reference, reference } from "#effect-line"
import * as Layer from "effect/Layer"
import type * as Failure from "./Failure.js"
import { neverReached, type Service } from "./internal/classifier.js"
import * as Failures from "./internal/failures.js"

/**
 * - `retryable`: nothing happened, or the provider asked to try again: retrying can change the outcome.
 * - `terminal`: the same request will fail the same way, or the failure is the caller's own decision.
 * - `ambiguous`: the request may have reached the model (a read timeout, a reset after sending);
 *   a replay is a second, billed request, so it is made only when the call is replay-safe.
 */
export type Verdict = "retryable" | "terminal" | "ambiguous"

const isQuotaCode = (code: string | undefined) => code !== undefined && Failures.quotaCodes.has(code)
const isModelCode = (code: string | undefined) => code !== undefined && Failures.modelUnavailableCodes.has(code)

/**
 * The table of a fixed-capacity pool: a failure that reached the pool means the pool is busy, so
 * only failures that never reached it are retried; everything else, ambiguous ones included, ends
 * the call.
 */
export const classifyFixedCapacity = (failure: Failure.Failure): Verdict =>
  neverReached(failure) ? "retryable" : "terminal"

/**
 * The seeds' classification table. An exhausted quota or an unavailable model is terminal whatever
 * else the response says; otherwise the provider's own verdict (`x-should-retry`), when it sent one,
 * decides over the status. An error that is not one of the toolkit's failures (`Failure.isFailure`) is
 * terminal, whatever its tag.
 */
export const classifyDefault = (failure: Failure.Failure): Verdict => {
  // The table is the toolkit's: an error of the caller's own, whatever its tag, is not in it.
  if (!Failures.isFailure(failure)) return "terminal"
  if ("providerCode" in failure && (isQuotaCode(failure.providerCode) || isModelCode(failure.providerCode))) {
    return "terminal"
  }
  if (
    "shouldRetry" in failure && failure.shouldRetry !== undefined && failure._tag !== "QuotaExhausted" &&
    failure._tag !== "ModelUnavailable"
  ) {
    return failure.shouldRetry ? "retryable" : "terminal"
  }
  if (neverReached(failure)) return "retryable"
  switch (failure._tag) {
    case "ConnectFailed":
    case "ConnectTimeout":
      return "retryable"
    case "ReadTimeout":
    // Reset after the request was sent: it may have run.
    case "ConnectionReset":
      return "ambiguous"
    case "RateLimited":
    case "ServerError":
    case "Overloaded":
      return "retryable"
    case "ClientError": {
      // 408: the server gave up waiting for our request, so it did nothing. 409: a request with
      // the same idempotency key is still running; asking again later returns its result.
      return failure.status === 408 || failure.status === 409 ? "retryable" : "terminal"
    }
    case "QuotaExhausted":
    case "AuthenticationFailed":
    case "ModelUnavailable":
    case "NotJson":
    case "ResponseTooLarge":
    case "ContractViolation":
    case "DeadlineExceeded":
    case "Shed":
    case "RateLimitedLocally":
    case "Cancelled":
      return "terminal"
  }
}

/** The classifier in use. Defaults to `classifyDefault`. */
export const Classifier: Reference<Service> = reference(
  "@resilient-ai/policy/Classifier",
  () => ({ classify: classifyDefault })
)

/** Replaces the classifier, for a target whose provider speaks differently. */
export const layer = (classify: (failure: Failure.Failure) => Verdict): Layer.Layer<never> =>
  Layer.succeed(Classifier, { classify })

/**
 * A classifier that decides some failures itself and leaves the rest to the default table:
 * return `undefined` to fall through.
 */
export const layerOverriding = (
  decide: (failure: Failure.Failure) => Verdict | undefined
): Layer.Layer<never> => layer((failure) => decide(failure) ?? classifyDefault(failure))
