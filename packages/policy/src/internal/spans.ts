/**
 * The spans of a resilient call, made with Effect's own tracer (`@effect/opentelemetry` turns them
 * into OpenTelemetry spans when its layer is provided): one for the call, one per attempt under it.
 *
 * They are made by hand, as `Effect.useSpan` would make them (the parent in context, the tracer,
 * timing and annotations of the fiber), because the engine runs each attempt in a fiber it starts
 * itself and ends each span where it learns how the attempt ended. No span is made while tracing is
 * off, nor under Effect's built-in tracer, which exports nothing: a call pays for its spans only
 * when somebody can see them.
 */
import {
  failureOf,
  type FiberView,
  isInterruptedOnly,
  nowNanos as clockNanos,
  type SpanTracing,
  spanTracingOf,
  startSpan
} from "#effect-line"
import type * as Exit from "effect/Exit"
import * as Tracer from "effect/Tracer"

const noTime = BigInt(0)

/** How a span of the call is started: what the caller says of the call (`Resilient.CallSpan`). */
export interface SpanStart {
  readonly name: string
  readonly kind: Tracer.SpanKind
  readonly attributes: Readonly<Record<string, unknown>> | undefined
}

/** Where spans of a call are made: the fiber's tracer and clock, read once per call. */
export type Tracing = SpanTracing

/** The fiber's tracing, or `undefined` when its spans would be seen by nobody. */
export const tracingOf = spanTracingOf

/** The time a span starts or ends at, as Effect's own spans read it. */
export const nowNanos = (tracing: Tracing): bigint => tracing.timing ? clockNanos(tracing.clock) : noTime

/** Sets each defined attribute of `attributes` on `span`. */
const setAttributes = (span: Tracer.Span, attributes: Readonly<Record<string, unknown>> | undefined): void => {
  if (attributes === undefined) return
  for (const key in attributes) {
    const value = attributes[key]
    if (value !== undefined) span.attribute(key, value)
  }
}

/**
 * Starts the call's span under the span in the fiber's context, with the fiber's span annotations
 * and links (`Effect.annotateSpans`, `Effect.linkSpans`), as any span made in the fiber gets them.
 */
export const startCallSpan = (
  tracing: Tracing,
  fiber: FiberView,
  start: SpanStart
): Tracer.Span => {
  const span = startSpan(tracing, fiber, start.name, undefined, start.kind, nowNanos(tracing))
  setAttributes(span, start.attributes)
  return span
}

/** Starts an attempt's span under the call's. */
export const startAttemptSpan = (
  tracing: Tracing,
  fiber: FiberView,
  call: Tracer.Span
): Tracer.Span => {
  return startSpan(tracing, fiber, "resilient_ai.attempt", call, "internal", nowNanos(tracing))
}

/** How a failure reads in metrics, logs, a call's history and `error.type`: its tag, or `"Error"`. */
export const kindOf = (error: unknown): string => {
  const tag = typeof error === "object" && error !== null ? (error as { readonly _tag?: unknown })._tag : undefined
  return typeof tag === "string" ? tag : "Error"
}

/**
 * Ends the call's span with the call's exit: a failure nobody named yet (a stream's, after its first
 * element) gets its `error.type`.
 */
export const endCallSpan = (tracing: Tracing, span: Tracer.Span, exit: Exit.Exit<unknown, unknown>): void => {
  if (span.status._tag === "Ended") return
  if (exit._tag === "Failure" && !span.attributes.has("error.type")) {
    const failure = failureOf(exit.cause)
    if (failure._tag === "Some") span.attribute("error.type", kindOf(failure.value))
    else if (!isInterruptedOnly(exit.cause)) span.attribute("error.type", "Defect")
  }
  span.end(nowNanos(tracing), exit)
}
