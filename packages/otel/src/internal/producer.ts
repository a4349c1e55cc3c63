/**
 * Effect's metrics as an OpenTelemetry `MetricProducer`, with the units OpenTelemetry expects.
 *
 * `@effect/opentelemetry`'s producer reads Effect's global metric registry on every collection and
 * gives every metric the unit `1` unless it carries a `unit` label. A unit of `1` on a count makes
 * OpenTelemetry's Prometheus translation (the Collector's) append `_ratio` to gauges, and a
 * histogram of seconds should say `s`. Here a name ending in `_seconds` gets `s`, the default `1`
 * becomes no unit, and any other unit stays.
 */
import { makeProducer } from "#otel-line"
import type * as Resource from "@effect/opentelemetry/Resource"
import type { CollectionResult, MetricData, MetricProducer } from "@opentelemetry/sdk-metrics"
import * as Effect from "effect/Effect"

/** The unit a metric named `name` is exported with, given the unit Effect's producer chose. */
const unitFor = (name: string, unit: string): string => name.endsWith("_seconds") ? "s" : unit === "1" ? "" : unit

const withUnit = (metric: MetricData): MetricData => {
  const unit = unitFor(metric.descriptor.name, metric.descriptor.unit)
  return unit === metric.descriptor.unit ? metric : { ...metric, descriptor: { ...metric.descriptor, unit } }
}

/** Effect's metrics, every collection a snapshot of the global registry, with the units above. */
export const make: Effect.Effect<MetricProducer, never, Resource.Resource> = Effect.map(
  makeProducer,
  (effectProducer): MetricProducer => ({
    collect: (options) =>
      effectProducer.collect(options).then((result): CollectionResult => ({
        ...result,
        resourceMetrics: {
          ...result.resourceMetrics,
          scopeMetrics: result.resourceMetrics.scopeMetrics.map((scope) => ({
            ...scope,
            metrics: scope.metrics.map(withUnit)
          }))
        }
      }))
  })
)
