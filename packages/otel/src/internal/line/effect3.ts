/**
 * The otel package's seam, Effect 3 side: what it needs of `@effect/opentelemetry` that the
 * Effect 3 line's package (0.x: `Metrics`, `Tracer`) and the Effect 4 line's (4.x: `OtelMetrics`,
 * `OtelTracer`) name or shape differently, in 0.x's terms. `effect4.ts` offers the same names; the
 * package imports this as `#otel-line` (docs/effect-lines.md).
 */
import * as Metrics from "@effect/opentelemetry/Metrics"
import type * as Resource from "@effect/opentelemetry/Resource"
import type { MetricProducer, MetricReader } from "@opentelemetry/sdk-metrics"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/**
 * The tracer provider Effect's tracer sends its spans through (`OtelTracerProvider`), and the layer
 * that makes Effect's tracer an OpenTelemetry one on it (it reads the `Resource` too on Effect 3).
 */
export { layer as tracerLayer, OtelTracerProvider } from "@effect/opentelemetry/Tracer"

/** Effect's metrics as an OpenTelemetry `MetricProducer`: each collection reads the process's registry. */
export const makeProducer: Effect.Effect<MetricProducer, never, Resource.Resource> = Metrics.makeProducer

/** Hands `producer` to the readers, shut down (a last export, 3 seconds at most) when the scope closes. */
export const registerProducer = (
  producer: MetricProducer,
  readers: () => MetricReader | readonly [MetricReader, ...Array<MetricReader>]
): Effect.Effect<unknown, never, Scope.Scope> => Metrics.registerProducer(producer, readers)
