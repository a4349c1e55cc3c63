/**
 * Every way a call to a model API can fail, as typed values.
 *
 * One class per failure, so callers `catchTag` what they can act on. Each carries what the next
 * decision needs: the HTTP status, the provider's error code, the provider's retry hint, and for
 * transport failures whether the request may already have reached the model (and be billing).
 * `CallFailed` is the one aggregate a caller sees when a retry sequence stops.
 */
import type * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import { hasProperty } from "effect/Predicate"
import type * as Types from "effect/Types"
import { CallFailedTypeId, FailureTypeId as TypeId } from "./internal/typeIds.js"

/** The constructor `Data.TaggedError` returns, whose instances also carry `Id` (one of the type ids above). */
type Tagged<Tag extends string, Id> = new<A extends Record<string, any> = {}>(
  args: Types.VoidIfEmpty<{ readonly [P in keyof A as P extends "_tag" ? never : P]: A[P] }>
) => Cause.YieldableError & { readonly _tag: Tag } & Id & Readonly<A>

/** `Data.TaggedError`, whose instances carry `id` on their prototype: not a field, so in no equality or JSON. */
const tagged = (tag: string, id: symbol): Tagged<string, unknown> => {
  const Base = Data.TaggedError(tag)
  Object.defineProperty(Base.prototype, id, { value: id })
  return Base as Tagged<string, unknown>
}

const TaggedFailure = <Tag extends string>(tag: Tag) =>
  tagged(tag, TypeId) as Tagged<Tag, { readonly [TypeId]: TypeId }>

const describe = (status: number, providerCode: string | undefined, detail: string | undefined): string =>
  [`HTTP ${status}`, providerCode ? `code ${providerCode}` : undefined, detail]
    .filter((part) => part !== undefined && part !== "")
    .join(", ")

/** Fields every failure built from an HTTP response carries. */
interface ResponseFields {
  readonly status: number
  /** The provider's structured error code (`error.code` or `code`), when the body had one. */
  readonly providerCode?: string | undefined
  /** The provider's own message, for people; never parsed for decisions. */
  readonly detail?: string | undefined
  /**
   * The provider's explicit verdict (`x-should-retry`): when present it decides over the status,
   * though never makes an exhausted quota or an unavailable model retryable.
   */
  readonly shouldRetry?: boolean | undefined
}

/**
 * Fields of the failures that can be retried, which carry the provider's `Retry-After` /
 * `retry-after-ms` hint: a 408, a 409 or a 400 with `x-should-retry: true` is retried like a 429,
 * and waits as long as the provider asked, like a 429.
 */
interface HintedResponseFields extends ResponseFields {
  readonly retryAfter?: Duration.Duration | undefined
}

/** What each system error code of a failed connection means, in the words a person looks for. */
const connectProblems: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "no such host",
  EAI_NONAME: "no such host",
  EAI_AGAIN: "the host name could not be looked up now",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  EHOSTDOWN: "host down",
  EADDRNOTAVAIL: "address not available"
}

/** No connection could be opened (refused, DNS, unreachable): no byte reached the server. */
export class ConnectFailed extends TaggedFailure("ConnectFailed")<{
  readonly detail: string
  /** The system error code, such as `ECONNREFUSED` or `ENOTFOUND`, when the transport knows it. */
  readonly code?: string | undefined
}> {
  override get message() {
    const problem = this.code === undefined ? undefined : connectProblems[this.code]
    return `could not connect${problem === undefined ? "" : ` (${problem})`}, nothing was sent: ${this.detail}`
  }
}

/** The connection was not established in time: no byte reached the server. */
export class ConnectTimeout extends TaggedFailure("ConnectTimeout")<{
  readonly timeout: Duration.Duration
}> {
  override get message() {
    return `no connection within ${Duration.format(this.timeout)}, nothing was sent`
  }
}

/**
 * The request was sent but the answer did not come in time. The model may still be generating,
 * and billing, so a replay is a second request rather than a second chance. `phase` says where it
 * stalled; `attempt` means the attempt's own time ran out and the phase is unknown.
 */
export class ReadTimeout extends TaggedFailure("ReadTimeout")<{
  readonly timeout: Duration.Duration
  readonly phase: "headers" | "body" | "attempt"
}> {
  override get message() {
    return `no complete answer within ${Duration.format(this.timeout)} (stalled in ${this.phase}); ` +
      `the request may still be running and billed`
  }
}

/** The connection was reset. Before the request was sent, nothing happened; after, the model may be running. */
export class ConnectionReset extends TaggedFailure("ConnectionReset")<{
  readonly afterSend: boolean
  readonly detail?: string | undefined
}> {
  override get message() {
    return this.afterSend
      ? `connection reset after the request was sent; the request may have been processed`
      : `connection reset before the request was sent`
  }
}

/** 429 "slow down": the provider wants less traffic, usually for a short window. */
export class RateLimited extends TaggedFailure("RateLimited")<HintedResponseFields> {
  override get message() {
    const hint = this.retryAfter === undefined ? "" : `; retry after ${Duration.format(this.retryAfter)}`
    return `rate limited (${describe(this.status, this.providerCode, this.detail)})${hint}`
  }
}

/** The account's quota or billing limit is used up: a person must act, waiting will not help. */
export class QuotaExhausted extends TaggedFailure("QuotaExhausted")<ResponseFields> {
  override get message() {
    return `quota or billing limit exhausted (${describe(this.status, this.providerCode, this.detail)})`
  }
}

/** A 5xx from the provider that says nothing more specific. */
export class ServerError extends TaggedFailure("ServerError")<HintedResponseFields> {
  override get message() {
    return `server error (${describe(this.status, this.providerCode, this.detail)})`
  }
}

/** The provider is out of capacity (503, 529, `overloaded_error`): it asked for less load. */
export class Overloaded extends TaggedFailure("Overloaded")<HintedResponseFields> {
  override get message() {
    return `provider overloaded (${describe(this.status, this.providerCode, this.detail)})`
  }
}

/**
 * A 4xx that is about the request itself: fix the request, do not loop. A 408, a 409, and any 4xx
 * the provider marks `x-should-retry: true` are the exceptions, and wait for their hint when retried.
 */
export class ClientError extends TaggedFailure("ClientError")<HintedResponseFields> {
  override get message() {
    return `request rejected (${describe(this.status, this.providerCode, this.detail)})`
  }
}

/**
 * 401/403: the credential is missing, wrong or not allowed. It will not fix itself, unless the
 * provider says otherwise (`x-should-retry: true`), so it keeps the hint for that case.
 */
export class AuthenticationFailed extends TaggedFailure("AuthenticationFailed")<HintedResponseFields> {
  override get message() {
    return `authentication failed (${describe(this.status, this.providerCode, this.detail)}); check the API key`
  }
}

/** The model is unknown or not routable right now (`model_not_found`), whatever the status says. */
export class ModelUnavailable extends TaggedFailure("ModelUnavailable")<
  ResponseFields & { readonly model?: string | undefined }
> {
  override get message() {
    const model = this.model === undefined ? "the model" : `model ${this.model}`
    return `${model} is not available (${describe(this.status, this.providerCode, this.detail)})`
  }
}

/** A success status whose body is not JSON (a proxy's HTML page, a truncated body). Never repaired. */
export class NotJson extends TaggedFailure("NotJson")<{
  readonly status: number
  readonly contentType?: string | undefined
  /** The first bytes of the body, for a person to recognise what came back. */
  readonly excerpt: string
}> {
  override get message() {
    return `HTTP ${this.status} body is not JSON (${this.contentType ?? "no content type"}): ${this.excerpt}`
  }
}

/** One field of a body that decoded as JSON but broke the contract. */
interface ContractIssue {
  /** Where in the body, as `choices[0].message.content`. */
  readonly path: string
  readonly message: string
}

/** A response body larger than the target allows: read no further, never retried. */
export class ResponseTooLarge extends TaggedFailure("ResponseTooLarge")<{
  readonly status: number
  readonly limitBytes: number
}> {
  override get message() {
    return `HTTP ${this.status} body exceeds the ${this.limitBytes}-byte limit; it was not read further`
  }
}

/** A body that parsed but does not match the schema the caller relies on. Never repaired or retried. */
export class ContractViolation extends TaggedFailure("ContractViolation")<{
  readonly issues: ReadonlyArray<ContractIssue>
}> {
  override get message() {
    const shown = this.issues.slice(0, 5).map((issue) => `${issue.path || "(root)"}: ${issue.message}`)
    const more = this.issues.length > 5 ? ` and ${this.issues.length - 5} more` : ""
    return `response breaks the contract: ${shown.join("; ")}${more}`
  }
}

/** Where the deadline was when it ran out. */
type DeadlinePhase = "before-attempt" | "attempt" | "sleep" | "queue"

/** The caller's deadline passed, or the next step could not finish before it. */
export class DeadlineExceeded extends TaggedFailure("DeadlineExceeded")<{
  /** The deadline, in epoch milliseconds of Effect's `Clock`. */
  readonly deadline: number
  readonly phase: DeadlinePhase
}> {
  override get message() {
    // A Date holds ±8.64e15 ms; past that, `toISOString` throws, and a message must not.
    const at = Math.abs(this.deadline) <= 8.64e15 ? new Date(this.deadline).toISOString() : String(this.deadline)
    return `deadline ${at} reached (${this.phase})`
  }
}

/** The target's concurrency gate is full and the target sheds instead of queueing: a fast, honest refusal. */
export class Shed extends TaggedFailure("Shed")<{
  readonly target: string
  readonly limit: number
  readonly inFlight: number
}> {
  override get message() {
    return `${this.target} is at its concurrency limit (${this.inFlight}/${this.limit}); request shed, not queued`
  }
}

/**
 * The key's pace, kept by this process or fleet, has no room for the call before its deadline: the
 * provider was not asked. `availableAt` (epoch ms) says when capacity returns.
 */
export class RateLimitedLocally extends TaggedFailure("RateLimitedLocally")<{
  readonly target: string
  /** The limit that has no room: requests per minute, or tokens per minute. */
  readonly dimension: "requests" | "tokens"
  readonly availableAt: number
  readonly retryAfter: Duration.Duration
}> {
  override get message() {
    return `${this.target} is paced to its ${this.dimension}-per-minute limit: room again in ${
      Duration.format(this.retryAfter)
    }, after the call's deadline; not sent`
  }
}

/**
 * The work was aborted by something other than this fiber's interruption, such as an SDK honouring
 * an `AbortSignal` it was handed. Never retried: someone decided the work is no longer wanted.
 */
export class Cancelled extends TaggedFailure("Cancelled")<{
  readonly reason: string
}> {
  override get message() {
    return `cancelled: ${this.reason}`
  }
}

/** Every failure of a single attempt. */
export type Failure =
  | ConnectFailed
  | ConnectTimeout
  | ReadTimeout
  | ConnectionReset
  | RateLimited
  | QuotaExhausted
  | ServerError
  | Overloaded
  | ClientError
  | AuthenticationFailed
  | ModelUnavailable
  | NotJson
  | ResponseTooLarge
  | ContractViolation
  | DeadlineExceeded
  | Shed
  | RateLimitedLocally
  | Cancelled

/** Whether `error` is one of the toolkit's failures, rather than an error of the caller's own. */
export const isFailure = (error: unknown): error is Failure => hasProperty(error, TypeId)

/** Why a retry sequence stopped. */
export type StopReason =
  /** the failure's verdict was terminal */
  | "terminal"
  /** the failure was ambiguous and the call was not marked replay-safe */
  | "not-replay-safe"
  /** the attempt ceiling (or the schedule) allowed no more attempts */
  | "attempts"
  /** the retry budget refused the retry */
  | "budget"
  /** the deadline passed, or the backoff's sleep or the next attempt could not finish before it */
  | "deadline"
  /** the concurrency gate was full and the target sheds */
  | "shed"
  /** the key's pace had no room for the call before its deadline (`RateLimitedLocally`) */
  | "rate-limited-locally"
  /**
   * the provider asked to wait longer than the policy will sleep, or than the call's time left
   * allows: this target cannot serve the call in time, another may
   */
  | "retry-after-too-long"
  /** a nested call made its single attempt and left retrying to the enclosing call */
  | "deferred"

/** One attempt of a sequence, as the aggregate failure reports it. */
export interface AttemptRecord {
  /** 1 for the first attempt. */
  readonly attempt: number
  /** The failure's tag, or `"Success"`. */
  readonly outcome: string
  readonly status?: number | undefined
  readonly latency: Duration.Duration
  /** What was slept between the previous attempt and this one. */
  readonly delayBefore: Duration.Duration
}

/**
 * A retry sequence that ended without a success: why it stopped, the last failure, and every
 * attempt made, so an operator can tell a timeout storm from a short burst of 500s.
 */
export class CallFailed<E = Failure> extends (tagged("CallFailed", CallFailedTypeId) as Tagged<
  "CallFailed",
  { readonly [CallFailedTypeId]: CallFailedTypeId }
>)<{
  readonly reason: StopReason
  readonly last: E
  readonly attempts: ReadonlyArray<AttemptRecord>
  readonly target: string
}> {
  override get message() {
    const last = this.last as { readonly message?: unknown; readonly _tag?: unknown }
    const lastText = typeof last.message === "string" ? last.message : String(last._tag)
    return `${this.target}: stopped (${this.reason}) after ${this.attempts.length} attempt(s); last: ${lastText}`
  }
}
