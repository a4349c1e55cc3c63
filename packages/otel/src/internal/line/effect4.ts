/**
 * The otel package's seam, Effect 4 side: the names `effect3.ts` offers, in the terms of
 * `@effect/opentelemetry` 4.x (its modules are `OtelMetrics` and `OtelTracer`; a producer is made
 * for a temporality, and reads the registry of the context it was made in). See
 * docs/effect-lines.md.
 */
import * as OtelMetrics from "@effect/opentelemetry/OtelMetrics"
import type * as Resource from "@effect/opentelemetry/Resource"
import type { MetricProducer, MetricReader } from "@opentelemetry/sdk-metrics"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/**
 * The tracer provider Effect's tracer sends its spans through (`OtelTracerProvider`), and the layer
 * that makes Effect's tracer an OpenTelemetry one on it (the resource is the provider's alone on
 * Effect 4).
 */
export { layer as tracerLayer, OtelTracerProvider } from "@effect/opentelemetry/OtelTracer"

/**
 * Effect's metrics as an OpenTelemetry `MetricProducer`, cumulative as on Effect 3: each
 * collection reads the metric registry of the context it was made in, the process's unless a
 * program provides another.
 */
export const makeProducer: Effect.Effect<MetricProducer, never, Resource.Resource> = OtelMetrics.makeProducer()

/** Hands `producer` to the readers, shut down (a last export, 3 seconds at most) when the scope closes. */
export const registerProducer = (
  producer: MetricProducer,
  readers: () => MetricReader | readonly [MetricReader, ...Array<MetricReader>]
): Effect.Effect<unknown, never, Scope.Scope> => OtelMetrics.registerProducer(producer, readers)
