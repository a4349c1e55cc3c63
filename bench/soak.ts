/**
 * The soak: 200,000 calls, 64 at a time, through a managed target against the fault server with 5%
 * mixed faults (503, 429 with `retry-after-ms`, a reset before the headers, a stall past the
 * attempt timeout, truncated JSON), half chat and half embeddings. It prints the heap after a
 * warm-up and then every 20,000 calls (after a full GC), the sockets open at the end (while the
 * client is alive and after its scope closed), and attempts per success. Heap and sockets must be
 * flat: what a long-lived process keeps per call is what grows without bound.
 *
 * Not part of the test run. `pnpm soak` (about two and a half minutes on 2 cores); `SOAK_CALLS`
 * changes the count.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { ModelClient, Target } from "@resilient-ai/client"
import { Metrics } from "@resilient-ai/policy"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect, Exit, Layer, Logger, Redacted, Scope } from "effect"

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with --expose-gc")

const calls = Number(process.env["SOAK_CALLS"] ?? 200_000)
const concurrency = 64
const warmUp = Math.min(10_000, Math.floor(calls / 10))
const sampleEvery = 20_000

const mebibytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`
const heap = () => {
  gc()
  gc()
  return process.memoryUsage().heapUsed
}
const openSockets = () => process.getActiveResourcesInfo().filter((kind) => kind === "TCPSocketWrap").length

/** Five faults of 1% each: each window takes its share of what the windows before it left. */
const faults: ReadonlyArray<FaultPlan.Fault> = [
  { _tag: "Status", status: 503, code: "overloaded" },
  { _tag: "Status", status: 429, retryAfterMs: "5" },
  { _tag: "ResetHeaders" },
  { _tag: "StallHeaders", ms: 400 },
  { _tag: "TruncatedJson" }
]
const plan: FaultPlan.Plan = {
  seed: 7,
  windows: faults.map((fault, index) => ({ fromMs: 0, toMs: 1e12, fault, share: 0.01 / (1 - 0.01 * index) }))
}

const program = Effect.gen(function*() {
  const server = yield* FaultServer.make(plan)
  const target = Target.managed({
    name: "soak",
    baseUrl: server.url,
    model: "soak-model",
    apiKey: Redacted.make("sk-soak-not-a-real-key"),
    baseDelay: "1 millis",
    maxDelay: "10 millis",
    hintSpread: "5 millis",
    attemptTimeout: "250 millis",
    concurrency
  })
  // The client and its HTTP connections live in a scope of their own, closed before the last count.
  const clientScope = yield* Scope.make()
  const context = yield* Layer.buildWithScope(
    ModelClient.layer(target).pipe(Layer.provide(NodeHttpClient.layerUndici)),
    clientScope
  )
  const client = yield* Effect.provide(ModelClient.ModelClient, context)

  let arrivals = 0
  let done = 0
  const call = (index: number): Effect.Effect<void> =>
    index % 2 === 0
      ? Effect.ignore(client.chat({ messages: [{ role: "user", content: `Question ${index}` }] }))
      : Effect.ignore(client.embeddings({ input: `text ${index}` }))
  const run = (count: number) =>
    Effect.forEach(Array.from({ length: count }, (_, i) => done + i), call, { concurrency, discard: true }).pipe(
      Effect.tap(() =>
        Effect.gen(function*() {
          done += count
          // The server keeps a record per arrival; counted and dropped so only the client's heap grows.
          arrivals += (yield* server.arrivals).length
          yield* server.clearArrivals
        })
      )
    )

  const started = performance.now()
  yield* run(warmUp)
  const baseline = heap()
  console.log(`soak: ${calls} calls, ${concurrency} at a time, 5% mixed faults; Node ${process.version}`)
  console.log(`heap after ${warmUp.toLocaleString("en")} calls (warm-up):`.padEnd(44) + mebibytes(baseline))
  while (done < calls) {
    // In slices, so the server's records are dropped and the heap sampled as the run goes.
    const slice = Math.min(sampleEvery - (done % sampleEvery), calls - done, 2_000)
    yield* run(slice)
    if (done % sampleEvery === 0 || done === calls) {
      console.log(`heap after ${done.toLocaleString("en")} calls:`.padEnd(44) + mebibytes(heap()))
    }
  }
  const seconds = (performance.now() - started) / 1000
  const final = heap()
  const summary = yield* Metrics.summary("soak", "soak-model")
  const alive = { sockets: openSockets(), server: yield* server.openConnections }
  yield* Scope.close(clientScope, Exit.void)
  // Give the closes a moment to reach the server.
  yield* Effect.sleep("200 millis")
  const closed = { sockets: openSockets(), server: yield* server.openConnections }

  console.log(
    `heap growth, warm-up → end:`.padEnd(44) +
      `${mebibytes(final - baseline)} (${((final - baseline) / (calls - warmUp)).toFixed(1)} bytes per call)`
  )
  console.log(`open sockets, client alive (pooled, ≤ ${concurrency}):`.padEnd(44) + `${alive.server} (server side)`)
  console.log(
    `open sockets after the client's scope closed:`.padEnd(44) +
      `${closed.server} (server side), ${closed.sockets - closed.server} client side`
  )
  console.log(
    `attempts per success:`.padEnd(44) +
      `${summary.attemptsPerSuccess.toFixed(4)} (${summary.attempts} attempts, ${summary.successes} successes, ${
        calls - summary.successes
      } failed, ${arrivals} requests the server saw)`
  )
  console.log(
    `retries:`.padEnd(44) +
      `${summary.retries} (${summary.retriesSucceeded} succeeded), budget refused ${summary.budgetExhausted}`
  )
  console.log(`failures by kind:`.padEnd(44) + JSON.stringify(summary.failuresByKind))
  console.log(`calls failed by reason:`.padEnd(44) + JSON.stringify(summary.callsFailedByReason))
  console.log(`wall time:`.padEnd(44) + `${seconds.toFixed(1)} s (${(calls / seconds).toFixed(0)} calls/s)`)
  const flat = final - baseline < 4 * 1024 * 1024 && closed.server === 0
  console.log(`goal: heap flat (< 4 MiB growth) and no socket left open — ${flat ? "met" : "NOT MET"}`)
  if (!flat) process.exitCode = 1
})

Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(Logger.remove(Logger.defaultLogger))))
