/**
 * `Failure` with what only the toolkit reads of it: the type ids, the lists of tags and stop
 * reasons, the hint and status a failure carries, and the mapping of an HTTP error response onto its
 * failure.
 */
import * as Duration from "effect/Duration"
import { hasProperty } from "effect/Predicate"
import * as Failure from "../Failure.js"
import { CallFailedTypeId } from "./typeIds.js"

export * from "../Failure.js"
export { CallFailedTypeId, FailureTypeId as TypeId } from "./typeIds.js"

/** Where the deadline was when it ran out. */
export type DeadlinePhase = Failure.DeadlineExceeded["phase"]

/** One field of a body that decoded as JSON but broke the contract. */
export type ContractIssue = Failure.ContractViolation["issues"][number]

/** The fields of a failure built from an HTTP response that can be retried, with the provider's hint. */
export type HintedResponseFields = ConstructorParameters<typeof Failure.RateLimited>[0]

const everyFailureTag: Record<Failure.Failure["_tag"], null> = {
  ConnectFailed: null,
  ConnectTimeout: null,
  ReadTimeout: null,
  ConnectionReset: null,
  RateLimited: null,
  QuotaExhausted: null,
  ServerError: null,
  Overloaded: null,
  ClientError: null,
  AuthenticationFailed: null,
  ModelUnavailable: null,
  NotJson: null,
  ResponseTooLarge: null,
  ContractViolation: null,
  DeadlineExceeded: null,
  Shed: null,
  RateLimitedLocally: null,
  Cancelled: null
}

/** The tag of every failure, for reports that list them all. */
export const failureTags = Object.keys(everyFailureTag) as ReadonlyArray<Failure.Failure["_tag"]>

const everyStopReason: Record<Failure.StopReason, null> = {
  terminal: null,
  "not-replay-safe": null,
  attempts: null,
  budget: null,
  deadline: null,
  shed: null,
  "rate-limited-locally": null,
  "retry-after-too-long": null,
  deferred: null
}

/** Every stop reason, for reports that list them all. */
export const stopReasons = Object.keys(everyStopReason) as ReadonlyArray<Failure.StopReason>

/** Whether `error` is the toolkit's `CallFailed`, whatever the failure it ends with. */
export const isCallFailed = (error: unknown): error is Failure.CallFailed<unknown> =>
  hasProperty(error, CallFailedTypeId)

/** The provider's retry hint a failure carries, if it has one. */
export const retryAfterOf = (failure: unknown): Duration.Duration | undefined => {
  if (typeof failure === "object" && failure !== null && "retryAfter" in failure) {
    const hint = (failure as { readonly retryAfter?: unknown }).retryAfter
    return Duration.isDuration(hint) ? hint : undefined
  }
  return undefined
}

/** The HTTP status a failure carries, if it came from a response. */
export const statusOf = (failure: unknown): number | undefined => {
  if (typeof failure === "object" && failure !== null && "status" in failure) {
    const status = (failure as { readonly status?: unknown }).status
    return typeof status === "number" ? status : undefined
  }
  return undefined
}

/** Provider codes that mean the account, not the moment, is the problem. */
export const quotaCodes: ReadonlySet<string> = new Set([
  "insufficient_quota",
  "billing_hard_limit_reached",
  "billing_not_active",
  "quota_exceeded"
])

/** Provider codes that mean the model cannot be reached, whatever the status. */
export const modelUnavailableCodes: ReadonlySet<string> = new Set(["model_not_found", "model_not_available"])

/** What an HTTP error response said, in the words `fromResponse` needs. */
export interface ResponseSummary {
  readonly status: number
  readonly providerCode?: string | undefined
  readonly providerType?: string | undefined
  readonly detail?: string | undefined
  readonly retryAfter?: Duration.Duration | undefined
  readonly shouldRetry?: boolean | undefined
  readonly model?: string | undefined
}

/**
 * Maps an HTTP error response (status 400 or above) onto its failure. The provider's code decides
 * before the status: a 429 that says `insufficient_quota` is exhausted quota, a 503 that says
 * `model_not_found` is an unavailable model. Every failure that may be retried keeps the hint;
 * an exhausted quota and an unavailable model, which waiting does not fix, do not. A status below
 * 400 is not an error response and maps to `ClientError`, so a transport that forgot to follow a
 * redirect fails loudly.
 */
export const fromResponse = (response: ResponseSummary): Failure.Failure => {
  const { model, providerType, retryAfter, ...fields } = response
  const code = response.providerCode
  const kinds = [code, providerType]
  if (kinds.some((kind) => kind !== undefined && quotaCodes.has(kind))) {
    return new Failure.QuotaExhausted(fields)
  }
  if (kinds.some((kind) => kind !== undefined && modelUnavailableCodes.has(kind))) {
    return new Failure.ModelUnavailable({ ...fields, model })
  }
  const status = response.status
  const hinted = { ...fields, retryAfter }
  if (status === 401 || status === 403) return new Failure.AuthenticationFailed(hinted)
  if (status === 429) return new Failure.RateLimited(hinted)
  if (status === 503 || status === 529 || providerType === "overloaded_error") return new Failure.Overloaded(hinted)
  if (status >= 500) return new Failure.ServerError(hinted)
  return new Failure.ClientError(hinted)
}
