/**
 * The failure path seen from outside the process: Effect's metrics on `/metrics` for Prometheus,
 * and spans to an OpenTelemetry exporter, wired once at the program's edge.
 *
 * A fault server on loopback stands in for the provider (no API key, no network): one answer in
 * ten is a 503 `overloaded`, one in twenty of the rest a body that breaks the schema. After 200
 * calls the example reads its own endpoint as Prometheus would and prints the target's series
 * (the histograms' buckets left out), then the spans it recorded.
 *
 * `METRICS_PORT` picks the port (default 9464, the port registered for OpenTelemetry's Prometheus
 * exporter; 0 for a free one). Point your own Prometheus at a longer run with
 * `resilient-ai load … --metrics-port 9464`, and load `docs/alerts.yml` into it.
 *
 * Run it with `npx -y pnpm@12.4.2 exec tsx --conditions=@resilient-ai/source examples/prometheus.ts`.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { ModelClient, Target } from "@resilient-ai/client"
import { Prometheus, Telemetry } from "@resilient-ai/otel"
import { FaultServer } from "@resilient-ai/testing"
import { Console, Effect, Exit, Layer, Redacted } from "effect"
// What Effect 3 and Effect 4 spell differently: examples/line/effect3.ts and effect4.ts show each form.
import { withMinimumLogLevel } from "#examples-line"

const metricsPort = Number(process.env["METRICS_PORT"] ?? "9464")

// Kept in memory to print them here; in production, `spanExporter: new OTLPTraceExporter()` (batched).
const spans = new InMemorySpanExporter()

// Once, at the program's edge: Effect's metrics served on /metrics, and every span to the exporter.
const TelemetryLive = Prometheus.layerServer({ port: metricsPort }).pipe(
  Layer.provideMerge(Telemetry.layer({ serviceName: "checkout", spanProcessor: new SimpleSpanProcessor(spans) }))
)

/** The provider's bad minute: 503s with a short retry hint, and some bodies that break the schema. */
const plan = {
  latencyMs: 20,
  windows: [
    {
      fromMs: 0,
      toMs: 3_600_000,
      share: 0.1,
      fault: { _tag: "Status", status: 503, code: "overloaded", retryAfterMs: "50" }
    },
    { fromMs: 0, toMs: 3_600_000, share: 0.05, fault: { _tag: "SchemaBreak" } }
  ]
} as const

/** The exposition's lines about target `api`: each metric's `# TYPE` line and its samples, buckets left out. */
const aboutTheTarget = (exposition: string): Array<string> => {
  const shown: Array<string> = []
  let type = ""
  for (const line of exposition.split("\n")) {
    if (line.startsWith("# TYPE ")) {
      type = line
    } else if (line.includes(`target="api"`) && !line.includes("_bucket{")) {
      if (type !== "") shown.push(type)
      type = ""
      shown.push(line)
    }
  }
  return shown
}

const program = Effect.gen(function*() {
  const endpoint = yield* Prometheus.PrometheusServer
  yield* Console.log(`metrics for Prometheus on ${endpoint.url}`)
  const provider = yield* FaultServer.make(plan)
  const api = yield* ModelClient.make(Target.managed({
    name: "api",
    baseUrl: provider.url,
    model: "mistral-small-latest",
    apiKey: Redacted.make("not-a-real-key"),
    baseDelay: "50 millis",
    hintSpread: "50 millis"
  }))
  const outcomes = yield* Effect.forEach(
    Array.from({ length: 200 }, (_, index) => index),
    (index) =>
      Effect.exit(api.chat({ messages: [{ role: "user", content: `Question ${index}` }] }, { timeout: "5 seconds" })),
    { concurrency: 8 }
  ).pipe(Effect.withSpan("load"))
  const answered = outcomes.filter(Exit.isSuccess).length
  yield* Console.log(`200 calls: ${answered} answered, ${200 - answered} failed`)

  const exposition = yield* Effect.promise(() => fetch(endpoint.url).then((response) => response.text()))
  yield* Console.log(`what a scrape of ${endpoint.url} reads about target "api" (buckets left out):`)
  yield* Console.log(aboutTheTarget(exposition).join("\n"))

  const names = spans.getFinishedSpans().map((span) => span.name)
  const byName = names.reduce<Record<string, number>>(
    (counts, name) => ({ ...counts, [name]: (counts[name] ?? 0) + 1 }),
    {}
  )
  yield* Console.log(`spans recorded: ${JSON.stringify(byName)}`)
})

// Attempt log lines are at INFO and WARN (the contract failures); set the level to Info to see each one.
Effect.runPromise(
  program.pipe(
    Effect.provide(Layer.merge(TelemetryLive, NodeHttpClient.layerUndici)),
    Effect.scoped,
    withMinimumLogLevel("Error")
  )
)
