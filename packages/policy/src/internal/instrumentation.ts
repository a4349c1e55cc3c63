/**
 * What a resilient call shows of itself: its metrics, its log lines (one per attempt) and its spans
 * (one for the call, one per attempt under it). The engine (`sequence.ts`) calls these functions
 * with what happened; they decide nothing. Each takes the call as it reads it (`Instrumented`), so a
 * call allocates nothing for being observed beyond what it shows.
 */
import {
  type Counter,
  type FiberView,
  type Histogram,
  logAt,
  type LogLevel,
  logLevels,
  type MetricScope,
  update,
  writesAt
} from "#effect-line"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Tracer from "effect/Tracer"
import type * as Failure from "../Failure.js"
import * as ConcurrencyGate from "./gate.js"
import type { Learned } from "./learned.js"
import type * as Metrics from "./metrics.js"
import * as Spans from "./spans.js"
import { kindOf } from "./spans.js"

/** What the instruments read of a call: where its metrics, log lines and spans go. */
export interface Instrumented {
  readonly policy: { readonly target: string; readonly model: string | undefined }
  /** A call inside another's attempt: its attempts and outcome are the enclosing call's to count. */
  readonly nested: boolean
  readonly metricScope: MetricScope
  readonly minimumLogLevel: LogLevel
  readonly metrics: Metrics.TargetMetrics
  /** What the target's calls learn, in its state: where a capacity failure is counted. */
  readonly learned: Learned
  /** Where the call's spans are made; `undefined` while nobody would see them. */
  readonly tracing: Spans.Tracing | undefined
  /** The call's span. */
  readonly span: Tracer.Span | undefined
  requestIdNow(): string
}

/** An attempt as its span sees it. */
export interface AttemptTrace {
  /** The attempt's span, while the call has one. */
  span: Tracer.Span | undefined
  /** When the attempt ended: its span ends at this time, once its verdict is known. */
  endedAt: bigint
  /** What the answer said of itself, keys and values in turn: the call's too if it succeeds. */
  described: Array<unknown> | undefined
}

/** Updates `metric` under the call's tags too (`Effect.tagMetrics` in scope). */
const count = (call: Instrumented, metric: Counter | Histogram, value = 1): void => {
  update(metric, value, call.metricScope)
}

/** Whether a log line at `level` would be written: one that would not is not even built. */
const logs = (call: Instrumented, level: LogLevel): boolean => writesAt(level, call.minimumLogLevel)

const definedOnly = (annotations: Record<string, unknown>): Record<string, unknown> => {
  const defined: Record<string, unknown> = {}
  for (const key in annotations) {
    if (annotations[key] !== undefined) defined[key] = annotations[key]
  }
  return defined
}

/** A log line of the call, with its request id, target and model. */
const log = (
  call: Instrumented,
  level: LogLevel,
  message: string,
  annotations: Record<string, unknown>
): Effect.Effect<void> =>
  logs(call, level)
    ? Effect.annotateLogs(
      logAt(level, message),
      definedOnly({
        requestId: call.requestIdNow(),
        target: call.policy.target,
        model: call.policy.model,
        ...annotations
      })
    )
    : Effect.void

/** The call's span names its target, and says when retrying is left to the enclosing call. */
export const callStarted = (call: Instrumented): void => {
  const span = call.span
  if (span === undefined) return
  span.attribute("resilient_ai.target", call.policy.target)
  // One attempt, retrying left to the enclosing call.
  if (call.nested) span.attribute("resilient_ai.nested", true)
}

/** A call inside another's attempt: one attempt, counted as such. */
export const nestedCall = (call: Instrumented): void => count(call, call.metrics.nestedSingleAttempts)

/** The attempt waited `millis` for its turn in the key's pace. */
export const pacedWait = (call: Instrumented, millis: number): void => {
  if (millis > 0) count(call, call.metrics.pacedWait, millis / 1000)
}

/**
 * Attempt `number` starts, in `fiber`'s context: its span (under the call's) is made, and its own
 * spans (the HTTP client's) will be its children. The context the attempt runs in.
 */
export const attemptStarting = <R>(
  call: Instrumented,
  attempt: AttemptTrace,
  fiber: FiberView,
  number: number,
  delayBefore: number,
  context: Context.Context<R>
): Context.Context<R> => {
  if (!call.nested) count(call, call.metrics.attempts)
  const { span: callSpan, tracing } = call
  if (tracing === undefined || callSpan === undefined) return context
  const span = attempt.span = Spans.startAttemptSpan(tracing, fiber, callSpan)
  span.attribute("resilient_ai.attempt", number)
  callSpan.attribute("resilient_ai.attempts", number)
  if (number > 1) span.attribute("resilient_ai.retry.delay_seconds", delayBefore / 1000)
  return Context.add(context, Tracer.ParentSpan, span)
}

/**
 * What the attempt reported of itself (its answer's id, model, usage) goes on its span, and on the
 * call's if its value becomes the call's.
 */
export const attemptTold = (
  attempt: AttemptTrace,
  report: { readonly attributes: Array<unknown> | undefined } | undefined
): void => {
  const span = attempt.span
  const attributes = report?.attributes
  if (span === undefined || attributes === undefined) return
  for (let index = 0; index < attributes.length; index += 2) {
    span.attribute(attributes[index] as string, attributes[index + 1])
  }
  attempt.described = attributes
}

/**
 * What a stream's later chunk reported (its usage, at the end) describes the call, whose span is
 * still open while the stream is read.
 */
export const laterChunkTold = (span: Tracer.Span | undefined, attributes: Array<unknown> | undefined): void => {
  if (span === undefined || attributes === undefined || span.status._tag === "Ended") return
  for (let index = 0; index < attributes.length; index += 2) {
    span.attribute(attributes[index] as string, attributes[index + 1])
  }
}

/** The attempt ended: its span ends at this time, once the sequence has judged it. */
export const attemptEnded = (call: Instrumented, attempt: AttemptTrace): void => {
  const tracing = call.tracing
  if (attempt.span !== undefined && tracing !== undefined) attempt.endedAt = Spans.nowNanos(tracing)
}

/** Ends the attempt's span with `exit`, at the time the attempt ended. */
export const endAttemptSpan = (attempt: AttemptTrace, exit: Exit.Exit<unknown, unknown>): void => {
  const span = attempt.span
  if (span !== undefined && span.status._tag !== "Ended") span.end(attempt.endedAt, exit)
}

/**
 * Attempt `number` succeeded: what its answer said of itself describes the call, and the call's
 * success is counted (unless the enclosing call counts it). The debug log line, if one is written.
 */
export const succeeded = (
  call: Instrumented,
  attempt: AttemptTrace,
  number: number,
  took: number,
  annotations: Record<string, unknown> | undefined
): Effect.Effect<void> | undefined => {
  const described = attempt.described
  if (described !== undefined && call.span !== undefined) {
    for (let index = 0; index < described.length; index += 2) {
      call.span.attribute(described[index] as string, described[index + 1])
    }
  }
  if (!call.nested) {
    const metrics = call.metrics
    count(call, metrics.successes)
    count(call, metrics.attemptsPerSuccess, number)
    if (number > 1) count(call, metrics.retriesSucceeded)
  }
  if (!logs(call, logLevels.debug)) return undefined
  return log(call, logLevels.debug, "attempt succeeded", { attempt: number, durationMs: took, ...annotations })
}

/**
 * An attempt failed with `failure`: counted by its kind, and, when it is the toolkit's and says the
 * target is out of capacity, as the health diagnosis's trouble.
 */
export const failed = (call: Instrumented, failure: unknown): void => {
  if (call.nested) return
  count(call, call.metrics.failures(kindOf(failure)))
  if (ConcurrencyGate.outcomeOf(failure) === "overload") call.learned.capacityFailures++
}

/** The failed attempt's span says how it was judged, and ends. */
export const judged = (
  attempt: AttemptTrace,
  kind: string,
  status: number | undefined,
  verdict: string,
  hintMillis: number | undefined,
  fail: Exit.Exit<never, unknown>
): void => {
  const span = attempt.span
  if (span === undefined) return
  span.attribute("error.type", kind)
  span.attribute("resilient_ai.verdict", verdict)
  if (status !== undefined) span.attribute("http.response.status_code", status)
  if (hintMillis !== undefined) span.attribute("resilient_ai.retry_after_seconds", hintMillis / 1000)
  endAttemptSpan(attempt, fail)
}

/** The attempt's log line as it stops the call for `reason`. */
export const stopLogged = (
  call: Instrumented,
  reason: Failure.StopReason,
  logged: Record<string, unknown>
): Effect.Effect<void> =>
  reason === "deferred"
    ? log(call, logLevels.info, "attempt failed; retrying is left to the enclosing resilient call", {
      ...logged,
      stop: reason
    })
    : log(call, logLevels.warning, "attempt failed, stopping", { ...logged, stop: reason })

/** The call stopped for `reason`, after `last`. */
export const stopped = (call: Instrumented, reason: Failure.StopReason, last: unknown): void => {
  if (!call.nested) count(call, call.metrics.callsFailed(reason))
  const span = call.span
  if (span !== undefined) {
    span.attribute("resilient_ai.stop_reason", reason)
    span.attribute("error.type", kindOf(last))
  }
}

/** An attempt or a sleep was not started: it could not have finished before the deadline. */
export const deadlineSkipped = (call: Instrumented): void => count(call, call.metrics.deadlineSkips)

/** The budget refused a retry. */
export const budgetRefused = (call: Instrumented): void => count(call, call.metrics.budgetExhausted)

/** A full gate shed the call. */
export const shed = (call: Instrumented): void => count(call, call.metrics.shed)

/** A retry is granted: counted, and the attempt's log line says when it comes. */
export const retrying = (call: Instrumented, logged: Record<string, unknown>, delay: number): Effect.Effect<void> => {
  count(call, call.metrics.retries)
  return log(call, logLevels.info, "attempt failed, retrying", { ...logged, retryInMs: Math.round(delay) })
}

/** The sleep before a retry ended: what was slept. */
export const slept = (call: Instrumented, delay: number): void => count(call, call.metrics.retryDelay, delay / 1000)
