import { either, replaceDefaultLogger, withoutDefaultLogger } from "#test-line"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { ModelClient } from "@resilient-ai/client"
import { Coordination } from "@resilient-ai/policy"
import { EffectLine, Either } from "@resilient-ai/policy/internal"
import { RedisConnection, RedisCoordination } from "@resilient-ai/redis"
import { RedisGate } from "@resilient-ai/redis/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Duration, Effect, Exit, Fiber, Layer, Logger, Redacted, Scope } from "effect"
import { afterEach, beforeEach } from "vitest"
import { eventually as eventuallyLive, hello, managedAt } from "../client/support.js"
import { command, type RedisServer, startRedisServer } from "./server.js"
import { freshPrefix, redisServerBinary } from "./support.js"

/** These tests stop and start Redis, so they need a `redis-server` of their own. */
const describeWithBinary = (name: string, body: () => void): void => {
  describe.skipIf(redisServerBinary === "")(name, body)
}

const fallbacksOf = (operation: "budget" | "gate") =>
  Effect.sync(() => EffectLine.counted(EffectLine.tagged(RedisConnection.fallbacks, { operation })))

/** Budget and gate decisions made in process so far. */
const fallbacks = Effect.zipWith(fallbacksOf("budget"), fallbacksOf("gate"), (budget, gate) => budget + gate)

const unhandled: Array<unknown> = []
const record = (reason: unknown) => void unhandled.push(reason)
beforeEach(() => {
  unhandled.length = 0
  process.on("unhandledRejection", record)
})
afterEach(() => {
  process.off("unhandledRejection", record)
})

/**
 * A managed target on a fault server that fails one request in five (so the budget is asked), its
 * budget and gate on `redis` (a connection that gives up on a command after 500 ms — a healthy
 * Redis answers well within that on a loaded machine too — and tries Redis again 200 ms after
 * finding it unreachable), the connection's log lines, and the connection itself.
 */
const fleetMember = (redis: RedisServer) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    // The connection logs on the fiber that asked, so this sees the calls' lines too; keep Redis's.
    // The calls are given the logger too: on Effect 4 what a layer provides to the connection's
    // building reaches no fiber that asks later.
    const logger = replaceDefaultLogger(Logger.make(({ message }) => {
      const line = (Array.isArray(message) ? message : [message]).map(String).join(" ")
      if (line.startsWith("Redis")) lines.push(line)
    }))
    const context = yield* Layer.build(
      RedisConnection.layer({
        url: Redacted.make(redis.url),
        keyPrefix: freshPrefix(),
        commandTimeout: "500 millis",
        retryAfter: "200 millis"
      }).pipe(Layer.provide(logger))
    )
    const connection = yield* Effect.provide(RedisConnection.RedisConnection, context)
    const coordination = yield* Effect.provide(RedisCoordination.make(), context)
    const server = yield* FaultServer.make({
      windows: [{ fromMs: 0, toMs: 1e12, fault: { _tag: "Status", status: 503 }, share: 0.2 }],
      seed: 7
    })
    const http = yield* Layer.build(NodeHttpClient.layerUndici)
    const client = yield* ModelClient.make(managedAt(server.url)).pipe(
      Effect.provideService(Coordination.Coordination, coordination),
      Effect.provide(http)
    )
    /** `n` calls, 4 at a time: how many answered (a call failing after its retries is still an answer). */
    const calls = (n: number) =>
      Effect.forEach(Array.from({ length: n }), () => either(client.chat(hello)), { concurrency: 4 }).pipe(
        Effect.map((results) => results.filter(Either.isRight).length),
        Effect.provide(logger)
      )
    const isUp = Effect.map(connection.health, (health) => health._tag === "up")
    const keys = Effect.promise(() => connection.client.keys(`${connection.keyPrefix}:*`).catch(() => []))
    return { calls, lines, isUp, keys, connection }
  })

describeWithBinary("Redis failing under a running fleet member", () => {
  it.live(
    "goes on deciding in process while Redis is down, and returns to it when it is back",
    () =>
      Effect.gen(function*() {
        const redis = yield* Effect.acquireRelease(
          Effect.promise(() => startRedisServer(redisServerBinary)),
          (server) => Effect.promise(() => server.stop())
        )
        const member = yield* fleetMember(redis)
        const fellBefore = yield* fallbacks

        assert.isAtLeast(yield* member.calls(40), 35)
        assert.isTrue(yield* member.isUp)
        assert.strictEqual(yield* fallbacks, fellBefore)

        yield* Effect.promise(() => redis.stop())
        assert.isAtLeast(yield* member.calls(40), 35, "calls go on without Redis")
        assert.isFalse(yield* member.isUp)
        const fellBack = (yield* fallbacks) - fellBefore
        assert.isAtLeast(fellBack, 80, "each call's gate and budget decisions were made in process")
        assert.deepStrictEqual(member.lines, ["Redis unreachable: deciding in process until it is back"])

        yield* Effect.promise(() => redis.start())
        // ioredis reconnects on its own; the next decision after `retryAfter` finds Redis back.
        yield* eventuallyLive(Effect.andThen(member.calls(1), member.isUp), 10_000)
        const before = yield* fallbacks
        assert.isAtLeast(yield* member.calls(40), 35)
        assert.strictEqual(yield* fallbacks, before, "no fallback once back")
        assert.isAbove((yield* member.keys).length, 0, "the budget and gate live on Redis again")
        assert.deepStrictEqual(member.lines, [
          "Redis unreachable: deciding in process until it is back",
          "Redis is back: deciding on Redis again"
        ])
        assert.deepStrictEqual(unhandled, [])
      }).pipe(Effect.scoped)
  )

  it.live("falls back when Redis stalls, and returns when it answers again", () =>
    Effect.gen(function*() {
      const redis = yield* Effect.acquireRelease(
        Effect.promise(() => startRedisServer(redisServerBinary)),
        (server) => Effect.promise(() => server.stop())
      )
      const member = yield* fleetMember(redis)
      assert.isAtLeast(yield* member.calls(20), 15)

      redis.pause()
      const fellBefore = yield* fallbacks
      assert.isAtLeast(yield* member.calls(40), 35, "calls go on while Redis is stalled")
      assert.isFalse(yield* member.isUp)
      assert.isAtLeast((yield* fallbacks) - fellBefore, 80)

      redis.resume()
      yield* eventuallyLive(Effect.andThen(member.calls(1), member.isUp), 10_000)
      assert.deepStrictEqual(member.lines, [
        "Redis unreachable: deciding in process until it is back",
        "Redis is back: deciding on Redis again"
      ])
      assert.deepStrictEqual(unhandled, [])
    }).pipe(Effect.scoped))

  it.live("starts in process when Redis is not there yet, and moves to it when it comes", () =>
    Effect.gen(function*() {
      const redis = yield* Effect.acquireRelease(
        Effect.promise(() => startRedisServer(redisServerBinary)),
        (server) => Effect.promise(() => server.stop())
      )
      yield* Effect.promise(() => redis.stop())
      const member = yield* fleetMember(redis)
      assert.isFalse(yield* member.isUp)
      assert.isAtLeast(yield* member.calls(20), 15)
      yield* Effect.promise(() => redis.start())
      yield* eventuallyLive(Effect.andThen(member.calls(1), member.isUp), 10_000)
      assert.deepStrictEqual(member.lines, [
        "Redis unreachable at start: deciding in process until it is back",
        "Redis is back: deciding on Redis again"
      ])
      assert.deepStrictEqual(unhandled, [])
    }).pipe(Effect.scoped))

  /**
   * A process gives a permit back while its Redis is away, and stops before Redis is back; Redis
   * comes back from its append-only file, the lease still there, as a cluster's node that restarts
   * does. Closing must give it back, or the fleet loses the permit until the lease expires.
   */
  describe("closing", () => {
    const persistent = Effect.acquireRelease(
      Effect.promise(() => startRedisServer(redisServerBinary, ["--appendonly", "yes", "--appendfsync", "always"])),
      (server) => Effect.promise(() => server.stop())
    )
    /**
     * A connection in a scope of its own, which the test closes (the test's scope closes it too,
     * should the test fail first: a connection left open would go on reconnecting in the worker),
     * and a gate on it.
     */
    const gateToClose = (redis: RedisServer, commandTimeout: EffectLine.DurationInput) =>
      Effect.gen(function*() {
        const scope = yield* EffectLine.forkScope(yield* Effect.scope)
        const keyPrefix = freshPrefix()
        const context = yield* Layer.buildWithScope(
          RedisConnection.layer({
            url: Redacted.make(redis.url),
            keyPrefix,
            commandTimeout,
            // Long enough that no timer sends the release again before the close.
            retryAfter: "10 minutes"
          }).pipe(Layer.provide(withoutDefaultLogger)),
          scope
        )
        const gate = yield* Effect.provide(RedisGate.make({ target: "llm", limit: 4, mode: "shed" }), context)
        const leases = Effect.promise(() =>
          command(redis.port, "ZCARD", `${keyPrefix}:{llm:no-key}:gate:leases`).catch((error) => String(error))
        )
        const close = Effect.timed(Scope.close(scope, Exit.void))
        return { gate, leases, close }
      })

    it.live("gives back a permit it gave back while Redis was away, once Redis is back", () =>
      Effect.gen(function*() {
        const redis = yield* persistent
        // Four command timeouts of 2 s: time for a loaded machine to start Redis and reconnect.
        const { close, gate, leases } = yield* gateToClose(redis, "2 seconds")
        yield* gate.acquire(Number.POSITIVE_INFINITY)
        yield* gate.acquire(Number.POSITIVE_INFINITY)
        assert.strictEqual((yield* leases).trim(), ":2")

        yield* Effect.promise(() => redis.stop())
        yield* gate.release("success")
        const closing = yield* EffectLine.fork(close)
        yield* Effect.promise(() => redis.start())
        yield* Fiber.join(closing)
        // The permit still held stays until its lease ends (it proves Redis kept what it had); the
        // one given back is gone.
        assert.strictEqual((yield* leases).trim(), ":1", "the permit given back is given back on Redis")
        assert.deepStrictEqual(unhandled, [])
      }).pipe(Effect.scoped))

    it.live("does not wait for a Redis that stays away longer than four command timeouts", () =>
      Effect.gen(function*() {
        const redis = yield* persistent
        const { close, gate } = yield* gateToClose(redis, "200 millis")
        yield* gate.acquire(Number.POSITIVE_INFINITY)
        yield* Effect.promise(() => redis.stop())
        yield* gate.release("success")
        const [took] = yield* close
        // Four command timeouts for what Redis did not take, one for QUIT; the rest is slack for a
        // loaded machine's timers, far below the lease's two minutes that waiting for Redis would take.
        assert.isBelow(Duration.toMillis(took), 5 * 200 + 5_000)
        assert.deepStrictEqual(unhandled, [])
      }).pipe(Effect.scoped))
  })
})
