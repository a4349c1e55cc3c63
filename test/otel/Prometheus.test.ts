import { either } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Prometheus, Telemetry } from "@resilient-ai/otel"
import { EffectLine, Either, Meters } from "@resilient-ai/policy/internal"
import { Effect, Exit, Layer, Metric, Scope } from "effect"
import * as Http from "node:http"
import { freePort } from "./support.js"

let targets = 0
/** A target name no other test uses: Effect's metrics are global to the process. */
const freshTarget = () => `prom-${++targets}`

const ResourceLive = Telemetry.layer({ serviceName: "otel-test", serviceVersion: "1.2.3" })

/** The exposition's lines about `target`, and its `# TYPE` lines. */
const linesOf = (text: string, target: string) => text.split("\n").filter((line) => line.includes(`target="${target}"`))

/** Records a small failure path on `target`: 3 attempts, a contract failure, a terminal stop, two sleeps. */
/** A metric of the application's, not ours: once counted, in the same registry as ours. */
const otherThanOurs = EffectLine.counter("other_than_ours_total", "an application's own metric")
EffectLine.update(otherThanOurs, 1, EffectLine.noMetricScope)

const record = (target: string) =>
  Effect.gen(function*() {
    const metrics = Meters.forTarget(target, "m")
    yield* Metric.update(metrics.attempts, 3)
    yield* Metric.update(metrics.failures("ContractViolation"), 1)
    yield* Metric.update(metrics.callsFailed("terminal"), 1)
    yield* Metric.update(metrics.retryDelay, 0.25)
    yield* Metric.update(metrics.retryDelay, 3)
  })

const text = (options?: Prometheus.Options) =>
  Effect.flatMap(Prometheus.make(options), (metrics) => metrics.text).pipe(Effect.provide(ResourceLive))

describe("Prometheus exposition", () => {
  it.scoped("a counter once with _total, a histogram as _count, _sum and cumulative _bucket, tags as labels", () =>
    Effect.gen(function*() {
      const target = freshTarget()
      yield* record(target)
      const exposition = yield* text()
      const lines = linesOf(exposition, target)
      const labels = `target="${target}",model="m"`
      assert.includeMembers(lines, [
        `resilient_ai_attempts_total{${labels}} 3`,
        `resilient_ai_failures_total{${labels},kind="ContractViolation"} 1`,
        `resilient_ai_calls_failed_total{${labels},reason="terminal"} 1`,
        `resilient_ai_retry_delay_seconds_count{${labels}} 2`,
        `resilient_ai_retry_delay_seconds_sum{${labels}} 3.25`,
        `resilient_ai_retry_delay_seconds_bucket{${labels},le="0.128"} 0`,
        `resilient_ai_retry_delay_seconds_bucket{${labels},le="0.256"} 1`,
        `resilient_ai_retry_delay_seconds_bucket{${labels},le="2.048"} 1`,
        `resilient_ai_retry_delay_seconds_bucket{${labels},le="4.096"} 2`,
        `resilient_ai_retry_delay_seconds_bucket{${labels},le="+Inf"} 2`
      ])
      // 17 boundaries from 1 ms to 65.536 s, and +Inf.
      assert.strictEqual(lines.filter((line) => line.startsWith("resilient_ai_retry_delay_seconds_bucket")).length, 18)
      assert.includeMembers(exposition.split("\n"), [
        "# HELP resilient_ai_attempts_total attempts sent to the provider, first attempts included",
        "# TYPE resilient_ai_attempts_total counter",
        "# TYPE resilient_ai_failures_total counter",
        "# TYPE resilient_ai_retry_delay_seconds histogram"
      ])
      assert.notMatch(exposition, /_total_total/)
      // Each metric is one family: its HELP and TYPE once, however many label sets it has.
      assert.strictEqual(exposition.split("# TYPE resilient_ai_attempts_total ").length, 2)
    }))

  it.scoped("target_info carries the resource; no otel_scope_name label and no # UNIT line by default", () =>
    Effect.gen(function*() {
      yield* record(freshTarget())
      const exposition = yield* text()
      // Its labels in the order the line's @effect/opentelemetry writes them (Effect 4's adds the SDK's version).
      const targetInfo = exposition.split("\n").find((line) => line.startsWith("target_info{"))
      assert.isDefined(targetInfo, exposition)
      for (
        const label of [
          `service_name="otel-test"`,
          `telemetry_sdk_name="@effect/opentelemetry"`,
          `telemetry_sdk_language="nodejs"`,
          `service_version="1.2.3"`
        ]
      ) assert.include(targetInfo, label)
      assert.match(targetInfo!, /\} 1$/)
      assert.notInclude(exposition, "otel_scope_name")
      assert.notInclude(exposition, "# UNIT")
    }))

  it.scoped("options: no target_info, scope labels, resource attributes as labels, only some names", () =>
    Effect.gen(function*() {
      const target = freshTarget()
      yield* record(target)
      const bare = yield* text({ targetInfo: false, names: /^resilient_ai_/g })
      assert.notInclude(bare, "target_info")
      assert.notMatch(bare, /^other_than_ours_total/m)
      assert.include(bare, `resilient_ai_attempts_total{target="${target}",model="m"} 3`)
      // Every metric of the process is there unless filtered out: Effect's registry is the process's.
      assert.match(yield* text(), /^other_than_ours_total 1$/m)
      const labelled = yield* text({ scopeLabels: true, resourceLabels: /^service\.name$/ })
      assert.include(
        labelled,
        `resilient_ai_attempts_total{target="${target}",model="m",otel_scope_name="@effect/opentelemetry/Metrics",` +
          `service_name="otel-test"} 3`
      )
    }))

  it.scoped("counts from the process's start, whichever reader reads them: two readers show the same figure", () =>
    Effect.gen(function*() {
      const target = freshTarget()
      yield* record(target)
      const first = yield* Prometheus.make().pipe(Effect.provide(ResourceLive))
      yield* Metric.update(Meters.forTarget(target, "m").attempts, 1)
      const second = yield* Prometheus.make().pipe(Effect.provide(ResourceLive))
      const line = `resilient_ai_attempts_total{target="${target}",model="m"} 4`
      assert.include(yield* first.text, line)
      assert.include(yield* second.text, line)
    }))
})

interface Answer {
  readonly status: number
  readonly contentType: string | undefined
  readonly body: string
}

const request = (url: string, options: Http.RequestOptions = {}) =>
  EffectLine.callback<Answer, Error>((resume) => {
    const sent = Http.request(url, options, (response) => {
      let body = ""
      response.setEncoding("utf8").on("data", (chunk: string) => (body += chunk))
      // Answered once Node's agent has taken a kept-alive socket back, after this listener: Effect 4
      // resumes the waiting fiber within the listener itself, Effect 3 a moment later.
      response.on("end", () =>
        setImmediate(() =>
          resume(
            Effect.succeed({ status: response.statusCode ?? 0, contentType: response.headers["content-type"], body })
          )
        ))
    })
    sent.on("error", (error) => resume(Effect.fail(error)))
    sent.end()
  })

describe("Prometheus endpoint", () => {
  it.scopedLive("port 0 picks a free port, read back; GET and HEAD /metrics, 404 elsewhere, 405 for POST", () =>
    Effect.gen(function*() {
      const target = freshTarget()
      yield* record(target)
      const server = yield* Prometheus.serve({ port: 0, host: "127.0.0.1" }).pipe(Effect.provide(ResourceLive))
      assert.strictEqual(server.host, "127.0.0.1")
      assert.isAbove(server.port, 0)
      assert.strictEqual(server.url, `http://127.0.0.1:${server.port}/metrics`)
      const got = yield* request(server.url)
      assert.strictEqual(got.status, 200)
      assert.strictEqual(got.contentType, "text/plain; version=0.0.4; charset=utf-8")
      assert.include(got.body, `resilient_ai_attempts_total{target="${target}",model="m"} 3\n`)
      const head = yield* request(server.url, { method: "HEAD" })
      assert.deepStrictEqual([head.status, head.body], [200, ""])
      assert.strictEqual((yield* request(`${server.url}?x=1`)).status, 200)
      assert.strictEqual((yield* request(`http://127.0.0.1:${server.port}/other`)).status, 404)
      assert.strictEqual((yield* request(server.url, { method: "POST" })).status, 405)
    }))

  it.scopedLive("layerServer provides the endpoint; path and every-interface binding as asked", () =>
    Effect.gen(function*() {
      const layer = Prometheus.layerServer({ port: 0, path: "/custom" }).pipe(Layer.provide(ResourceLive))
      const server = yield* Effect.gen(function*() {
        const server = yield* Prometheus.PrometheusServer
        assert.include(["::", "0.0.0.0"], server.host)
        assert.strictEqual(server.url, `http://127.0.0.1:${server.port}/custom`)
        assert.strictEqual((yield* request(server.url)).status, 200)
        return server
      }).pipe(Effect.provide(layer))
      // The layer's scope has closed with the effect it was provided to, and the server with it.
      assert.isTrue(Either.isLeft(yield* either(request(server.url))))
    }))

  it.live("closing the scope closes the server and a scraper's kept-alive connection: no socket is left", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const server = yield* Prometheus.serve({ port: 0, host: "127.0.0.1" }).pipe(
        Effect.provide(ResourceLive),
        EffectLine.inScope(scope)
      )
      const agent = new Http.Agent({ keepAlive: true })
      assert.strictEqual((yield* request(server.url, { agent })).status, 200)
      const sockets = Object.values(agent.freeSockets).flat()
      assert.strictEqual(sockets.length, 1)
      const socketClosed = EffectLine.callback<void>((resume) => {
        sockets[0]!.once("close", () => resume(Effect.void))
      })
      yield* Scope.close(scope, Exit.void)
      yield* socketClosed
      const refused = yield* either(request(server.url))
      assert.isTrue(Either.isLeft(refused))
      assert.match(
        String(Either.isLeft(refused) ? (Either.leftOf(refused) as NodeJS.ErrnoException).code : ""),
        /ECONNREFUSED/
      )
      agent.destroy()
    }))

  it.scopedLive("a port taken is a MetricsListenError naming the port and the reason", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(freePort)
      yield* Prometheus.serve({ port, host: "127.0.0.1" }).pipe(Effect.provide(ResourceLive))
      const error = yield* Effect.flip(Prometheus.serve({ port, host: "127.0.0.1" }).pipe(Effect.provide(ResourceLive)))
      assert.strictEqual(error._tag, "MetricsListenError")
      assert.deepStrictEqual([error.host, error.port, error.reason], ["127.0.0.1", port, "EADDRINUSE"])
      assert.strictEqual(
        error.message,
        `the metrics endpoint cannot listen on 127.0.0.1, port ${port}: EADDRINUSE`
      )
    }))

  it.scoped("text, for a server of one's own, from the PrometheusMetrics layer", () =>
    Effect.gen(function*() {
      const target = freshTarget()
      yield* record(target)
      const exposition = yield* Prometheus.text.pipe(
        Effect.provide(Prometheus.layer({ names: /^resilient_ai_attempts/ }).pipe(Layer.provide(ResourceLive)))
      )
      assert.include(exposition, `resilient_ai_attempts_total{target="${target}",model="m"} 3`)
      assert.notInclude(exposition, "resilient_ai_failures_total")
      assert.strictEqual(Prometheus.contentType, "text/plain; version=0.0.4; charset=utf-8")
    }))
})
