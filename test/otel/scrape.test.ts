/**
 * A real Prometheus scrapes our endpoint while a load meets a fault server's contract-breaking
 * bodies, evaluates docs/alerts.yml, and says through its HTTP API that our series are there and
 * that the contract alert fires for our target.
 */
import { assert, describe, it } from "@effect/vitest"
import { ModelClient } from "@resilient-ai/client"
import { Prometheus, Telemetry } from "@resilient-ai/otel"
import { FaultServer } from "@resilient-ai/testing"
import { Context, Effect, Layer } from "effect"
import { readFileSync } from "node:fs"
import { performance } from "node:perf_hooks"
import { hello, HttpLive, managedAt } from "../client/support.js"
import { binary, required, startPrometheus } from "./support.js"

const prometheus = binary("prometheus")

/**
 * docs/alerts.yml with every `for:` at zero. The file's own (5 and 10 minutes) are what production
 * wants; a test cannot wait them out, and what it checks (the expressions, over our real series) is
 * the same.
 */
const rulesWithoutFor = readFileSync(new URL("../../docs/alerts.yml", import.meta.url), "utf8").replace(
  /^(\s+)for: \d+[smh]$/gm,
  "$1for: 0s"
)

/** How long Prometheus may take to show what the test waits for: its start, two scrapes, a rule evaluation. */
const patienceMillis = 20_000

interface Sample {
  readonly metric: Readonly<Record<string, string>>
  readonly value: readonly [number, string]
}

interface Alert {
  readonly labels: Readonly<Record<string, string>>
  readonly state: string
}

const resultOf = (answer: unknown): ReadonlyArray<Sample> =>
  (answer as { data?: { result?: ReadonlyArray<Sample> } } | undefined)?.data?.result ?? []

const alertsOf = (answer: unknown): ReadonlyArray<Alert> =>
  (answer as { data?: { alerts?: ReadonlyArray<Alert> } } | undefined)?.data?.alerts ?? []

/** Polls `read` every 100 ms until `check` holds of its value, at most `patienceMillis`; gives the last value. */
const polled = <A>(read: Effect.Effect<A>, check: (value: A) => boolean) =>
  Effect.gen(function*() {
    const until = performance.now() + patienceMillis
    let value = yield* read
    while (!check(value) && performance.now() < until) {
      yield* Effect.sleep("100 millis")
      value = yield* read
    }
    return value
  })

const query = (promql: string) => `/api/v1/query?query=${encodeURIComponent(promql)}`

describe.skipIf(prometheus.skipped)("a real Prometheus, scraping our endpoint during a fault-server load", () => {
  it.live(
    "has our series, counters with one _total and histograms as buckets, and fires the contract alert",
    () =>
      Effect.gen(function*() {
        const path = required(prometheus)
        // A quarter of the answers break the schema: terminal ContractViolations, never retried.
        const faults = yield* FaultServer.make({
          latencyMs: 10,
          windows: [{ fromMs: 0, toMs: 3_600_000, share: 0.25, fault: { _tag: "SchemaBreak" } }]
        })
        const target = managedAt(faults.url)
        const client = yield* ModelClient.make(target)
        // The example's code path: Prometheus's endpoint on top of Telemetry's resource, open until the test ends.
        const TelemetryLive = Prometheus.layerServer({ port: 0, host: "127.0.0.1" }).pipe(
          Layer.provideMerge(Telemetry.layer({ serviceName: "scrape-test" }))
        )
        const server = Context.get(yield* Layer.build(TelemetryLive), Prometheus.PrometheusServer)
        // Four callers, one call after another, until the test ends; the pause keeps a caller whose
        // calls fail at once from spinning.
        const caller = Effect.forever(Effect.andThen(Effect.ignore(client.chat(hello)), Effect.sleep("1 millis")))
        yield* Effect.forkScoped(
          Effect.all(
            Array.from({ length: 4 }, () => caller),
            { concurrency: "unbounded", discard: true }
          )
        )
        const started = performance.now()
        const running = yield* startPrometheus(path, { scrape: `127.0.0.1:${server.port}`, rules: rulesWithoutFor })

        const ready = performance.now() - started
        const ours = `target="${target.name}"`
        const attempts = yield* polled(
          running.api(query(`resilient_ai_attempts_total{${ours}}`)),
          (answer) => resultOf(answer).length === 1
        )
        const scraped = performance.now() - started
        assert.strictEqual(resultOf(attempts).length, 1, running.log().slice(-1_000))
        assert.deepStrictEqual(resultOf(attempts)[0]!.metric, {
          __name__: "resilient_ai_attempts_total",
          instance: `127.0.0.1:${server.port}`,
          job: "resilient-ai",
          model: "test-model",
          target: target.name
        })
        assert.isAbove(Number(resultOf(attempts)[0]!.value[1]), 0)

        const contract = yield* running.api(query(`resilient_ai_failures_total{${ours},kind="ContractViolation"}`))
        assert.strictEqual(resultOf(contract).length, 1)
        const buckets = yield* running.api(query(`resilient_ai_attempts_per_success_bucket{${ours}}`))
        assert.sameMembers(
          resultOf(buckets).map((sample) => sample.metric["le"]),
          ["1", "2", "3", "4", "5", "6", "8", "10", "+Inf"]
        )
        const doubled = yield* running.api(query(`{__name__=~".+_total_total"}`))
        assert.deepStrictEqual(resultOf(doubled), [])

        const firing = (answer: unknown) =>
          alertsOf(answer).filter((alert) =>
            alert.labels["alertname"] === "ResilientAiContractFailures" && alert.labels["target"] === target.name &&
            alert.state === "firing"
          )
        const alerts = yield* polled(running.api("/api/v1/alerts"), (answer) => firing(answer).length > 0)
        assert.deepStrictEqual(firing(alerts).map((alert) => alert.labels), [{
          alertname: "ResilientAiContractFailures",
          category: "contract",
          kind: "ContractViolation",
          model: "test-model",
          severity: "critical",
          target: target.name
        }], running.log().slice(-1_000))
        // The capacity group stays apart: terminal failures are never retried, so the budget refuses nothing.
        assert.notInclude(
          alertsOf(alerts).filter((alert) => alert.labels["target"] === target.name).map((alert) =>
            alert.labels["alertname"]
          ),
          "ResilientAiRetryBudgetExhausted"
        )
        const ms = (millis: number) => `${Math.round(millis)} ms`
        process.stderr.write(
          `real Prometheus: ready ${ms(ready)}, our series ${ms(scraped)}, ` +
            `the alert firing ${ms(performance.now() - started)} after its start\n`
        )
      }).pipe(Effect.scoped, Effect.provide(HttpLive)),
    60_000
  )
})
