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
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import type * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import type * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"

/** Effect's built-in tracer: its spans go nowhere, so none are made under it. */
const nativeTracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)

const noTime = BigInt(0)

/** How a span of the call is started: what the caller says of the call (`Resilient.CallSpan`). */
export interface SpanStart {
  readonly name: string
  readonly kind: Tracer.SpanKind
  readonly attributes: Readonly<Record<string, unknown>> | undefined
}

/** Where spans of a call are made: the fiber's tracer and clock, read once per call. */
export interface Tracing {
  readonly tracer: Tracer.Tracer
  readonly clock: Clock.Clock
  readonly timing: boolean
}

/** The fiber's tracing, or `undefined` when its spans would be seen by nobody. */
export const tracingOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>, clock: Clock.Clock): Tracing | undefined => {
  if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return undefined
  const tracer = Context.get(fiber.currentDefaultServices, Tracer.Tracer)
  if (tracer === nativeTracer) return undefined
  return { tracer, clock, timing: fiber.getFiberRef(FiberRef.currentTracerTimingEnabled) }
}

/** The time a span starts or ends at, as Effect's own spans read it. */
export const nowNanos = (tracing: Tracing): bigint => tracing.timing ? tracing.clock.unsafeCurrentTimeNanos() : noTime

/** The span in context, skipping those that do not propagate, as `Effect.withSpan` finds its parent. */
const parentOf = (context: Context.Context<never>): Option.Option<Tracer.AnySpan> => {
  let span = Context.getOption(context, Tracer.ParentSpan)
  while (span._tag === "Some" && Context.get(span.value.context, Tracer.DisablePropagation)) {
    span = span.value._tag === "Span" ? span.value.parent : Option.none()
  }
  return span
}

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
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  start: SpanStart
): Tracer.Span => {
  const links = fiber.getFiberRef(FiberRef.currentTracerSpanLinks)
  const span = tracing.tracer.span(
    start.name,
    parentOf(fiber.currentContext),
    Context.empty(),
    Chunk.isEmpty(links) ? [] : Chunk.toReadonlyArray(links),
    nowNanos(tracing),
    start.kind,
    undefined
  )
  annotate(span, fiber)
  setAttributes(span, start.attributes)
  return span
}

/** The fiber's span annotations (`Effect.annotateSpans`), which every span made in it gets. */
const annotate = (span: Tracer.Span, fiber: Fiber.RuntimeFiber<unknown, unknown>): void => {
  const annotations = fiber.getFiberRef(FiberRef.currentTracerSpanAnnotations)
  if (HashMap.size(annotations) > 0) HashMap.forEach(annotations, (value, key) => span.attribute(key, value))
}

/** Starts an attempt's span under the call's. */
export const startAttemptSpan = (
  tracing: Tracing,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  call: Tracer.Span
): Tracer.Span => {
  const span = tracing.tracer.span(
    "resilient_ai.attempt",
    Option.some(call),
    Context.empty(),
    [],
    nowNanos(tracing),
    "internal"
  )
  annotate(span, fiber)
  return span
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
    const failure = Cause.failureOption(exit.cause)
    if (failure._tag === "Some") span.attribute("error.type", kindOf(failure.value))
    else if (!Cause.isInterruptedOnly(exit.cause)) span.attribute("error.type", "Defect")
  }
  span.end(nowNanos(tracing), exit)
}
