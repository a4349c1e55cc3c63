/**
 * The fleet on a Redis Cluster. First one `redis-server --cluster-enabled yes` that owns every slot,
 * which refuses a script whose keys are in different slots (`CROSSSLOT`) as any cluster does: every
 * key of one target and API key carries one hash tag, so the budget's and the gate's scripts are
 * answered by Redis, not decided in process. Then a real three-node cluster (`.ci/run` starts it,
 * else the suite does), reached through its seed nodes: targets spread over its nodes, and a fleet
 * of processes goes on through a restart of the node that holds its keys.
 */
import { assert, describe, it } from "@effect/vitest"
import { Failure } from "@resilient-ai/policy"
import { EffectLine } from "@resilient-ai/policy/internal"
import { RedisConnection } from "@resilient-ai/redis"
import { RedisBudget, RedisGate } from "@resilient-ai/redis/internal"
import { Context, Effect, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fleetRun } from "./fleet/run.js"
import { command, ping, startRedisServer } from "./server.js"
import { freshPrefix, redisClusterUrl, redisServerBinary } from "./support.js"

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
  Effect.sync(() => EffectLine.counted(EffectLine.tagged(RedisConnection.fallbacks, { operation })))

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

/** The cluster's nodes, by port. */
const clusterPorts = redisClusterUrl === "" ? [] : redisClusterUrl.split(",").map((url) => Number(new URL(url).port))

/** The ports of the nodes that hold a key under `prefix`. */
const nodesHolding = (prefix: string) =>
  Effect.promise(async () => {
    const holding: Array<number> = []
    for (const port of clusterPorts) {
      if (!(await command(port, "KEYS", `${prefix}:*`)).startsWith("*0")) holding.push(port)
    }
    return holding
  })

/** Until every node answers and reports `cluster_state:ok`, on the real clock. */
const clusterWhole = Effect.promise(async () => {
  const until = Date.now() + 30_000
  for (;;) {
    const states = await Promise.all(clusterPorts.map(async (port) =>
      (await ping(`redis://127.0.0.1:${port}`, 200)) &&
      (await command(port, "CLUSTER", "INFO").catch(() => "")).includes("cluster_state:ok")
    ))
    if (states.every(Boolean)) return
    if (Date.now() > until) throw new Error("the cluster did not come back whole")
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
})

describe.skipIf(redisClusterUrl === "")("a fleet on a three-node Redis Cluster", () => {
  it.scoped("targets spread over the nodes, each decided by the node that owns its keys: no fallback", () =>
    Effect.gen(function*() {
      const keyPrefix = freshPrefix()
      const connection = yield* Layer.build(
        Layer.orDie(
          RedisConnection.layer({ url: Redacted.make(redisClusterUrl), keyPrefix, commandTimeout: "2 seconds" })
        )
      )
      const before = { budget: yield* fallbacksOf("budget"), gate: yield* fallbacksOf("gate") }
      for (let index = 0; index < 12; index++) {
        const target = `llm-${index}`
        const budget = yield* RedisBudget.make({ target, minPerSecond: 1 }).pipe(Effect.provide(connection))
        const gate = yield* RedisGate.make({ target, limit: 1, mode: "shed" }).pipe(Effect.provide(connection))
        yield* budget.recordSuccess(1)
        assert.isTrue(yield* budget.tryAcquire(overloaded))
        assert.deepInclude(yield* budget.snapshot, { successes: 1, retries: 1 })
        yield* gate.acquire(Number.POSITIVE_INFINITY)
        // The cluster holds the permit: a second one is refused.
        const refused = yield* Effect.flip(gate.acquire(Number.POSITIVE_INFINITY))
        assert.strictEqual(refused._tag, "Shed")
        yield* gate.release("success")
        assert.deepInclude(yield* gate.snapshot, { inFlight: 0 })
      }
      assert.strictEqual(yield* fallbacksOf("budget"), before.budget)
      assert.strictEqual(yield* fallbacksOf("gate"), before.gate)
      // Twelve targets' keys hash to slots of more than one node: the client routed each script.
      assert.isAtLeast((yield* nodesHolding(keyPrefix)).length, 2)
    }))

  it.live(
    "3 processes go on through a restart of the node that holds their keys: no call lost, no permit held by nobody, the budget kept",
    () =>
      Effect.gen(function*() {
        let restartedAfter = 0
        const run = yield* fleetRun({
          members: 3,
          coordination: "redis",
          redisUrl: redisClusterUrl,
          fleetSize: 3,
          calls: 0,
          // A third of first attempts fail: the budget (10% of successes, a floor of 30 a window) binds.
          plan: {
            latencyMs: 5,
            windows: [{
              fromMs: 0,
              toMs: 3_600_000,
              share: 0.3,
              fault: { _tag: "Status", status: 503, code: "overloaded" }
            }]
          },
          // The members call until the node that owns the fleet's slot has gone down, come back,
          // and served the fleet again for a while, as a fleet that outlives a node's restart does.
          during: (server, keyPrefix) =>
            Effect.gen(function*() {
              const arrivals = Effect.map(server.arrivals, (seen) => seen.length)
              // On a loaded machine the members may decide in process for a while (a reply later
              // than their 50 ms is not waited for): the node to restart is the one their keys are on
              // once Redis has decided for them.
              let owner: number | undefined
              while ((yield* arrivals) < 150 || owner === undefined) {
                yield* Effect.sleep("10 millis")
                owner = (yield* nodesHolding(keyPrefix))[0]
              }
              restartedAfter = yield* arrivals
              yield* Effect.promise(() => command(owner!, "SHUTDOWN", "NOSAVE"))
              yield* clusterWhole
              const whole = yield* arrivals
              while ((yield* arrivals) < whole + 150) yield* Effect.sleep("10 millis")
            })
        })
        const succeeded = run.reports.reduce((sum, report) => sum + report.succeeded, 0)
        const fallbacks = run.reports.map((report) => report.fallbacks).join("/")
        assert.isBelow(restartedAfter, run.arrivals, "calls went on after the restart")
        // What Redis allows the fleet, and one member's share of it on top: a member deciding alone
        // while the node is away spends at most its share, which Redis counts when it is back.
        const allowance = 0.1 * succeeded + 30
        assert.isAtMost(run.retries, allowance * (1 + 1 / 3), `retries (fallbacks ${fallbacks})`)
        // Every permit taken on the cluster was given back, those given back while the node was away included.
        const [owner] = yield* nodesHolding(run.keyPrefix)
        const leases = yield* Effect.promise(() => command(owner!, "KEYS", `${run.keyPrefix}:*:gate:leases`))
        const leaseKey = /\r\n\$\d+\r\n([^\r]+)\r\n/.exec(leases)?.[1]
        const held = leaseKey === undefined ? ":0" : yield* Effect.promise(() => command(owner!, "ZCARD", leaseKey))
        assert.strictEqual(held.trim(), ":0", `permits held on the cluster (fallbacks ${fallbacks})`)
      }),
    120_000
  )
})
