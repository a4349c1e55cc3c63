/**
 * The fleet's scripts on a Redis Cluster node: one `redis-server --cluster-enabled yes` that owns
 * every slot, which refuses a script whose keys are in different slots (`CROSSSLOT`) as any cluster
 * does. Every key of one target and API key carries one hash tag, so the budget's and the gate's
 * scripts are answered by Redis, not decided in process.
 */
import { assert, describe, it } from "@effect/vitest"
import { Failure } from "@resilient-ai/policy"
import { RedisBudget, RedisConnection, RedisGate } from "@resilient-ai/redis"
import { Context, Effect, Layer, Metric, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { startRedisServer } from "./server.js"
import { freshPrefix, redisServerBinary } from "./support.js"

const overloaded = new Failure.Overloaded({ status: 503 })

/** A cluster-enabled server that owns all 16,384 slots: a cluster of one. */
const clusterOfOne = Effect.acquireRelease(
  Effect.promise(async () => {
    const dir = mkdtempSync(Path.join(Os.tmpdir(), "resilient-ai-cluster-"))
    const server = await startRedisServer(redisServerBinary, [
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      Path.join(dir, "nodes.conf")
    ])
    return { server, dir }
  }),
  ({ dir, server }) =>
    Effect.promise(async () => {
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    })
)

const fallbacksOf = (operation: string) =>
  Effect.map(
    Metric.value(RedisConnection.fallbacks.pipe(Metric.tagged("operation", operation))),
    (state) => state.count
  )

// A server of its own: skipped, as the other tests that start one, when the machine has no redis-server.
describe.skipIf(redisServerBinary === "")("the fleet's scripts on a Redis Cluster node", () => {
  it.scoped("the budget's and the gate's scripts run there: no CROSSSLOT, no fallback", () =>
    Effect.gen(function*() {
      const { server } = yield* clusterOfOne
      const connection = yield* Layer.build(
        Layer.orDie(
          RedisConnection.layer({
            url: Redacted.make(server.url),
            keyPrefix: freshPrefix(),
            commandTimeout: "2 seconds"
          })
        )
      )
      const { client } = Context.get(connection, RedisConnection.RedisConnection)
      yield* Effect.promise(() => client.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383"))
      // The node serves once it sees its cluster whole.
      yield* Effect.promise(async () => {
        for (let turn = 0; turn < 500; turn++) {
          if (String(await client.call("CLUSTER", "INFO")).includes("cluster_state:ok")) return
          await new Promise((resolve) => setTimeout(resolve, 10))
        }
        throw new Error("the cluster of one never reached cluster_state:ok")
      })
      const before = { budget: yield* fallbacksOf("budget"), gate: yield* fallbacksOf("gate") }
      const budget = yield* RedisBudget.make({ target: "llm", minPerSecond: 1 }).pipe(Effect.provide(connection))
      const gate = yield* RedisGate.make({ target: "llm", limit: 2, mode: "shed" }).pipe(Effect.provide(connection))
      yield* budget.recordSuccess(1)
      assert.isTrue(yield* budget.tryAcquire(overloaded))
      assert.deepInclude(yield* budget.snapshot, { successes: 1, retries: 1 })
      yield* gate.acquire(Number.POSITIVE_INFINITY)
      yield* gate.release("success")
      assert.deepInclude(yield* gate.snapshot, { inFlight: 0 })
      // Every decision was Redis's: none fell back to this process.
      assert.strictEqual(yield* fallbacksOf("budget"), before.budget)
      assert.strictEqual(yield* fallbacksOf("gate"), before.gate)
    }))
})
