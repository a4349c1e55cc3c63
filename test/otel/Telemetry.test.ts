import { assert, describe, it } from "@effect/vitest"
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  PeriodicExportingMetricReader
} from "@opentelemetry/sdk-metrics"
import { InMemorySpanExporter, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base"
import { Telemetry } from "@resilient-ai/otel"
import { Meters } from "@resilient-ai/policy/internal"
import { Effect, Metric } from "effect"

let targets = 0
/** A target name no other test uses: Effect's metrics are global to the process. */
const freshTarget = () => `telemetry-${++targets}`

describe("Telemetry.layer", () => {
  it.live("hands Effect's metrics to the readers, which export them one last time when the layer closes", () =>
    Effect.gen(function*() {
      const target = freshTarget()
      const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
      // An interval far beyond the test: the only export is the one the layer's closing forces.
      const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })
      yield* Effect.gen(function*() {
        const metrics = Meters.forTarget(target, "m")
        yield* Metric.update(metrics.attempts, 2)
        yield* Metric.update(metrics.retryDelay, 0.5)
      }).pipe(Effect.provide(Telemetry.layer({ serviceName: "telemetry-test", metricReader: reader })))
      const exported = exporter.getMetrics()
      assert.strictEqual(exported.length, 1)
      assert.strictEqual(exported[0]!.resource.attributes["service.name"], "telemetry-test")
      const all = exported[0]!.scopeMetrics.flatMap((scope) => scope.metrics)
      const named = (name: string) => all.find((metric) => metric.descriptor.name === name)!
      const attempts = named("resilient_ai_attempts_total")
      assert.strictEqual(attempts.descriptor.unit, "")
      const point = attempts.dataPoints.find((point) => point.attributes["target"] === target)
      assert.deepStrictEqual([point?.attributes, point?.value], [{ target, model: "m" }, 2])
      const delay = named("resilient_ai_retry_delay_seconds")
      assert.strictEqual(delay.descriptor.unit, "s")
    }))

  it.live("sends every span to the processors given, with the service's resource", () =>
    Effect.gen(function*() {
      const spans = new InMemorySpanExporter()
      // Read before the layer closes: shutting the exporter down empties it.
      const finished = yield* Effect.void.pipe(
        Effect.withSpan("attempt"),
        Effect.withSpan("call", { attributes: { "gen_ai.request.model": "m" } }),
        Effect.map(() => spans.getFinishedSpans()),
        Effect.provide(
          Telemetry.layer({ serviceName: "telemetry-test", spanProcessor: new SimpleSpanProcessor(spans) })
        )
      )
      assert.deepStrictEqual(finished.map((span) => span.name), ["attempt", "call"])
      const [attempt, call] = finished
      assert.strictEqual(attempt!.parentSpanContext?.spanId, call!.spanContext().spanId)
      assert.strictEqual(call!.attributes["gen_ai.request.model"], "m")
      assert.strictEqual(call!.resource.attributes["service.name"], "telemetry-test")
    }))

  it.live("a span exporter gets the spans in batches, the last batch sent when the layer closes", () =>
    Effect.gen(function*() {
      const exported: Array<string> = []
      // A sink that keeps what it was sent past its shutdown, which InMemorySpanExporter does not.
      const sink: SpanExporter = {
        export: (spans, done) => {
          exported.push(...spans.map((span) => span.name))
          done({ code: 0 }) // ExportResultCode.SUCCESS
        },
        shutdown: () => Promise.resolve()
      }
      const before = yield* Effect.void.pipe(
        Effect.withSpan("call"),
        Effect.map(() => [...exported]),
        Effect.provide(Telemetry.layer({ serviceName: "telemetry-test", spanExporter: sink }))
      )
      // Batched: nothing sent while the layer was open (the batch waits 5 s), all of it on closing.
      assert.deepStrictEqual(before, [])
      assert.deepStrictEqual(exported, ["call"])
    }))
})
