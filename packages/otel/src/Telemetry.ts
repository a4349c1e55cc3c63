/**
 * One layer, provided once at the edge of a program, that shows its resilient calls to
 * OpenTelemetry: the service's resource, Effect's metrics handed to the metric readers given (an
 * OTLP exporter's `PeriodicExportingMetricReader`, say), and Effect's tracer replaced by one that
 * sends every span (`Effect.withSpan`, and the toolkit's own) to the span processors given.
 *
 * It is built on `@effect/opentelemetry` (its `Resource`, `Metrics` and `Tracer` modules, named
 * `OtelMetrics` and `OtelTracer` on Effect 4), and provides its `Resource`, so
 * `Prometheus.layerServer` and any other layer of that package can sit on top of it.
 *
 * Effect's metrics live in one registry per process, not per layer: every reader, of every layer
 * built from this one, sees every metric of the process (the toolkit's and the program's own), with
 * values counted from the process's start, not from the layer's. Two layers export the same figures
 * twice; closing one does not reset them. Spans go to the tracer of the layer nearest the code that
 * makes them.
 */
import { OtelTracerProvider, registerProducer, tracerLayer } from "#otel-line"
import * as Resource from "@effect/opentelemetry/Resource"
import type * as OtelApi from "@opentelemetry/api"
import type { MetricReader } from "@opentelemetry/sdk-metrics"
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type SpanExporter,
  type SpanProcessor
} from "@opentelemetry/sdk-trace-base"
import { EffectLine } from "@resilient-ai/policy/internal"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Producer from "./internal/producer.js"

/** Settings of the layer: who the service is, and where its metrics and spans go. */
export interface Options {
  /** `service.name`, the name the telemetry backends file everything under. */
  readonly serviceName: string
  /** `service.version`. */
  readonly serviceVersion?: string | undefined
  /** More resource attributes (`deployment.environment.name`, …). */
  readonly attributes?: OtelApi.Attributes | undefined
  /**
   * Readers Effect's metrics are handed to, shut down (a last export) when the layer closes. A
   * Prometheus endpoint is `Prometheus.layerServer`, on top of this layer.
   */
  readonly metricReader?: MetricReader | ReadonlyArray<MetricReader> | undefined
  /** Processors every span goes to (a `SimpleSpanProcessor` over an `InMemorySpanExporter` in tests). */
  readonly spanProcessor?: SpanProcessor | ReadonlyArray<SpanProcessor> | undefined
  /** An exporter the spans go to in batches (a `BatchSpanProcessor`), next to `spanProcessor`'s. */
  readonly spanExporter?: SpanExporter | undefined
  /**
   * How long closing the layer waits for the last spans to be exported. Default 3 seconds, as
   * `@effect/opentelemetry` waits for the metric readers' shutdown.
   */
  readonly shutdownTimeout?: EffectLine.DurationInput | undefined
}

const defaultShutdownTimeout = Duration.seconds(3)

const asArray = <A>(value: A | ReadonlyArray<A> | undefined): ReadonlyArray<A> =>
  value === undefined ? [] : Array.isArray(value) ? value : [value as A]

const isNonEmpty = <A>(values: ReadonlyArray<A>): values is readonly [A, ...Array<A>] => values.length > 0

/** The span processors `options` names: its own, then a batch processor over its exporter. */
const spanProcessorsOf = (options: Options): Array<SpanProcessor> => [
  ...asArray(options.spanProcessor),
  ...(options.spanExporter === undefined ? [] : [new BatchSpanProcessor(options.spanExporter)])
]

/** A tracer provider over `processors`, flushed and shut down when the scope closes. */
const tracerProvider = (processors: Array<SpanProcessor>, shutdownTimeout: EffectLine.DurationInput) =>
  EffectLine.layerScoped(
    OtelTracerProvider,
    Effect.gen(function*() {
      const resource = yield* Resource.Resource
      return yield* Effect.acquireRelease(
        Effect.sync(() => new BasicTracerProvider({ resource, spanProcessors: processors })),
        (provider) =>
          Effect.promise(() => provider.forceFlush().then(() => provider.shutdown())).pipe(
            EffectLine.ignoreLogged,
            Effect.interruptible,
            Effect.timeoutOption(shutdownTimeout)
          )
      )
    })
  )

/**
 * Provides `@effect/opentelemetry`'s `Resource` for `serviceName`, hands Effect's metrics to the
 * metric readers and, when span processors or an exporter are given, makes Effect's tracer an
 * OpenTelemetry one that sends them every span. Metric names are Effect's as they are (the
 * toolkit's follow Prometheus's conventions: `resilient_ai_attempts_total`); a name ending in
 * `_seconds` has the unit `s`.
 */
export const layer = (options: Options): Layer.Layer<Resource.Resource> => {
  const shutdownTimeout = options.shutdownTimeout ?? defaultShutdownTimeout
  const readers = asArray(options.metricReader)
  const processors = spanProcessorsOf(options)
  const metrics = isNonEmpty(readers)
    ? EffectLine.layerScopedDiscard(
      Effect.flatMap(Producer.make, (producer) => registerProducer(producer, () => readers))
    )
    : Layer.empty
  const tracer = processors.length === 0
    ? Layer.empty
    : Layer.provide(tracerLayer, tracerProvider(processors, shutdownTimeout))
  return Layer.mergeAll(metrics, tracer).pipe(
    Layer.provideMerge(
      Resource.layer({
        serviceName: options.serviceName,
        ...(options.serviceVersion === undefined ? {} : { serviceVersion: options.serviceVersion }),
        ...(options.attributes === undefined ? {} : { attributes: options.attributes })
      })
    )
  )
}
