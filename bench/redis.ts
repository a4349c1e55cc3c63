/**
 * What sharing the budget through Redis costs: decisions per second from one process, and the
 * latency each decision adds (p50, p99) on loopback, next to the in-memory budget.
 *
 * Uses `RESILIENT_AI_REDIS_URL` when set, else starts a `redis-server` of its own; with neither,
 * it says so and measures nothing. Run with `pnpm bench`.
 */
import { ConcurrencyGate, Failure, RetryBudget } from "@resilient-ai/policy"
import { RedisConnection } from "@resilient-ai/redis"
import { RedisBudget, RedisGate } from "@resilient-ai/redis/internal"
import { Effect, Layer, Redacted } from "effect"
import { ping, redisServerBinary, startRedisServer } from "../test/redis/server.js"

const sequential = Number(process.env.BENCH_REDIS_DECISIONS ?? 20_000)
const pipelined = Number(process.env.BENCH_REDIS_PIPELINED ?? 100_000)
const inFlight = 64

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

/** Microseconds each of `count` decisions took, one after another. */
const timeEach = (count: number, decision: Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    const micros: Array<number> = []
    for (let i = 0; i < count; i++) {
      const started = performance.now()
      yield* decision
      micros.push((performance.now() - started) * 1000)
    }
    return micros.sort((a, b) => a - b)
  })

const report = (label: string, sorted: ReadonlyArray<number>) => {
  const total = sorted.reduce((sum, value) => sum + value, 0)
  console.log(
    `${label.padEnd(42)} p50 ${percentile(sorted, 50).toFixed(1).padStart(6)} µs   p99 ${
      percentile(sorted, 99).toFixed(1).padStart(6)
    } µs   ${(sorted.length / (total / 1e6)).toFixed(0).padStart(7)} /s one at a time`
  )
}

let url = process.env["RESILIENT_AI_REDIS_URL"] ?? ""
let stop = async () => {}
if (url === "") {
  const binary = redisServerBinary()
  if (binary !== undefined) {
    const server = await startRedisServer(binary)
    url = server.url
    stop = server.stop
  }
}
if (url === "" || !(await ping(url))) {
  console.log("redis bench SKIPPED: no Redis (set RESILIENT_AI_REDIS_URL or put redis-server on the PATH)")
} else {
  const failure = new Failure.ServerError({ status: 503 })
  const connection = RedisConnection.layer({
    url: Redacted.make(url),
    keyPrefix: `bench-${process.pid}`,
    commandTimeout: "1 second"
  })
  await Effect.runPromise(
    Effect.gen(function*() {
      const options = { target: "bench-llm", ratio: 0.1, minPerSecond: 5 }
      const shared = yield* RedisBudget.make(options)
      const local = yield* RetryBudget.make(options)
      // Warm up the script cache (EVALSHA), the JIT and the connection.
      yield* timeEach(2_000, shared.tryAcquire(failure))

      report("budget on Redis: tryAcquire", yield* timeEach(sequential, shared.tryAcquire(failure)))
      report("budget on Redis: recordSuccess", yield* timeEach(sequential, shared.recordSuccess(1)))
      report("budget in memory: tryAcquire", yield* timeEach(sequential, local.tryAcquire(failure)))

      const gate = yield* RedisGate.make({ target: "bench-llm", limit: 1_000 })
      const memoryGate = yield* ConcurrencyGate.make({ target: "bench-llm", limit: 1_000 })
      const permit = (g: ConcurrencyGate.Service) =>
        Effect.zipRight(g.acquire(Number.POSITIVE_INFINITY), g.release("success"))
      report("gate on Redis: acquire + release", yield* timeEach(sequential / 2, permit(gate)))
      report("gate in memory: acquire + release", yield* timeEach(sequential, permit(memoryGate)))

      // Many callers at once share the connection; ioredis pipelines their commands.
      const started = performance.now()
      yield* Effect.forEach(Array.from({ length: pipelined }), () => shared.tryAcquire(failure), {
        concurrency: inFlight,
        discard: true
      })
      const seconds = (performance.now() - started) / 1000
      console.log(
        `budget on Redis, ${inFlight} callers at once:            ${
          (pipelined / seconds).toFixed(0)
        } decisions/s (${pipelined} decisions)`
      )
    }).pipe(Effect.provide(Layer.fresh(connection)))
  )
}
await stop()
