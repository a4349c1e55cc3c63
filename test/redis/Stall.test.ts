/**
 * A stalled Redis (SIGSTOP, then SIGCONT) under running fleet members, with the default 50 ms
 * command timeout: the commands the members stopped waiting for reach Redis when it wakes, and none
 * of them may take effect there — no permit nobody holds, no retry nobody sends — and no call may
 * wait for what a stall left behind.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { ModelClient } from "@resilient-ai/client"
import { Coordination, Failure } from "@resilient-ai/policy"
import { EffectLine } from "@resilient-ai/policy/internal"
import { RedisConnection, RedisCoordination } from "@resilient-ai/redis"
import { RedisBudget, RedisGate } from "@resilient-ai/redis/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Clock, Effect, Fiber, Layer, Redacted } from "effect"
import { eventually, hello, managedAt, quiet } from "../client/support.js"
import { type RedisServer, startRedisServer } from "./server.js"
import { freshPrefix, redisServerBinary } from "./support.js"

const privateRedis = Effect.acquireRelease(
  Effect.promise(() => startRedisServer(redisServerBinary)),
  (server) => Effect.promise(() => server.stop())
)

/**
 * A member's connection with the default settings (a 50 ms command timeout): what a stall catches.
 * An observer, which only reads what the members left on Redis, passes a patient `commandTimeout`,
 * so a loaded machine does not make it read its own in-process state instead.
 */
const memberConnection = (redis: RedisServer, keyPrefix: string, commandTimeout?: EffectLine.DurationInput) =>
  Effect.flatMap(
    Layer.build(
      RedisConnection.layer({ url: Redacted.make(redis.url), keyPrefix, commandTimeout }).pipe(Layer.provide(quiet))
    ),
    (context) => Effect.provide(RedisConnection.RedisConnection, context)
  )

/**
 * Waits until Redis has run every command `connection` sent before now: a connection's commands
 * run in order, so once a PING sent after them is answered, they have all run.
 */
const drained = (connection: RedisConnection.Service) => Effect.promise(() => connection.client.ping())

const overloaded = new Failure.Overloaded({ status: 503 })

const stall = (redis: RedisServer, millis: number) =>
  Effect.acquireUseRelease(
    Effect.sync(() => redis.pause()),
    () => Effect.sleep(millis),
    () => Effect.sync(() => redis.resume())
  )

describe.skipIf(redisServerBinary === "")("a Redis stall under running fleet members", () => {
  it.live("counts no retry on Redis for a decision its caller already made in process", () =>
    Effect.gen(function*() {
      const redis = yield* privateRedis
      const keyPrefix = freshPrefix()
      const connection = yield* memberConnection(redis, keyPrefix)
      const budget = yield* RedisBudget.make({ target: "llm", minPerSecond: 10 }).pipe(
        Effect.provideService(RedisConnection.RedisConnection, connection)
      )
      for (let retry = 0; retry < 3; retry++) assert.isTrue(yield* budget.tryAcquire(overloaded))
      // What Redis holds before the stall: on a busy machine a decision may have been made in
      // process (its 50 ms ran out), and Redis counts it with the member's next decision that
      // reaches it.
      yield* drained(connection)
      const observer = yield* memberConnection(redis, keyPrefix, "2 seconds")
      const onRedis = RedisBudget.make({ target: "llm", minPerSecond: 10 }).pipe(
        Effect.flatMap((fresh) => fresh.snapshot),
        Effect.provideService(RedisConnection.RedisConnection, observer)
      )
      const beforeStall = yield* onRedis

      redis.pause()
      const decided = yield* Effect.forEach(Array.from({ length: 12 }), () => budget.tryAcquire(overloaded), {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(decided, Array(12).fill(true), "decided in process while Redis was stalled")
      redis.resume()

      yield* drained(connection)
      assert.strictEqual(
        (yield* onRedis).retries,
        beforeStall.retries,
        "none of the decisions the stall held back took effect on Redis"
      )
      // The retries granted in process were sent: the member's first decision on Redis again adds
      // them to the window (Redis is asked again `retryAfter` after it was found silent).
      yield* eventually(
        Effect.andThen(budget.snapshot, Effect.map(connection.health, (health) => health._tag === "up")),
        5_000,
        "the member decides on Redis again"
      )
      const counted = yield* onRedis
      assert.strictEqual(counted.retries, 3 + 12, "and the ones granted in process once Redis answers again")
    }).pipe(Effect.scoped))

  it.live(
    "decides alone within its share of the fleet: a third of the floor and of the gate among three",
    () =>
      Effect.gen(function*() {
        const redis = yield* privateRedis
        const keyPrefix = freshPrefix()
        // Three members decide on Redis: each learns that the fleet has three. Their commands wait
        // for Redis as long as a busy machine may need: a member whose answers came after the usual
        // 50 ms would decide in process, and never learn the fleet's size from Redis.
        const members = yield* Effect.forEach([1, 2, 3], () =>
          Effect.gen(function*() {
            const connection = yield* memberConnection(redis, keyPrefix, "2 seconds")
            const provide = Effect.provideService(RedisConnection.RedisConnection, connection)
            // A floor of 0.5 per second is 30 retries per 60-second window: 10 for each member alone.
            const budget = yield* provide(RedisBudget.make({ target: "llm", minPerSecond: 0.5 }))
            const gate = yield* provide(RedisGate.make({ target: "llm", limit: 9, mode: "shed" }))
            return { budget, gate }
          }))
        // Twice: the second round's answers count all three.
        for (const { budget, gate } of [...members, ...members]) {
          yield* budget.snapshot
          yield* gate.snapshot
        }
        const [{ budget, gate }] = members as [typeof members[0], ...typeof members]
        // Redis grants this member 4 of the fleet's 30.
        for (let retry = 0; retry < 4; retry++) assert.isTrue(yield* budget.tryAcquire(overloaded))

        redis.pause()
        const grants: Array<boolean> = []
        for (let decision = 0; decision < 10; decision++) grants.push(yield* budget.tryAcquire(overloaded))
        assert.deepStrictEqual(
          grants,
          [...Array(6).fill(true), ...Array(4).fill(false)],
          "10 in all, 4 of them on Redis"
        )
        const forever = Number.POSITIVE_INFINITY
        for (let permit = 0; permit < 3; permit++) yield* gate.acquire(forever)
        const refused = yield* Effect.flip(gate.acquire(forever))
        assert.deepStrictEqual({ ...refused } as object, { _tag: "Shed", target: "llm", limit: 3, inFlight: 3 })
        redis.resume()
      }).pipe(Effect.scoped)
  )

  it.live("leaves no lease on Redis that no caller holds, within a second of waking", () =>
    Effect.gen(function*() {
      const redis = yield* privateRedis
      const keyPrefix = freshPrefix()
      const connection = yield* memberConnection(redis, keyPrefix)
      const gate = yield* RedisGate.make({ target: "llm", limit: 16, mode: "queue" }).pipe(
        Effect.provideService(RedisConnection.RedisConnection, connection)
      )
      // Read by an observer of its own: the member's connection may still be coming back from the
      // stall (its offline queue is off, so a command sent meanwhile is refused, not a lease count).
      const observer = yield* memberConnection(redis, keyPrefix, "2 seconds")
      const leases = Effect.promise(() => observer.client.keys(`${keyPrefix}:*:gate:leases`)).pipe(
        Effect.flatMap(([key]) =>
          key === undefined ? Effect.succeed(0) : Effect.promise(() => observer.client.zcard(key))
        )
      )
      const deadline = (yield* Clock.currentTimeMillis) + 60_000
      // Two callers hold leases when Redis stalls, and give them back during the stall. On a busy
      // machine a first command may outlast the 50 ms timeout and be decided in process: such a
      // permit is given back by its own holder, which asks again, until the lease is on Redis.
      const holdALease = (leasesThen: number) =>
        Effect.gen(function*() {
          for (;;) {
            yield* gate.acquire(deadline)
            if ((yield* leases) === leasesThen) return yield* Effect.never
            yield* gate.release("success")
            yield* Effect.sleep("20 millis")
          }
        })
      const holders: Array<Fiber.Fiber<never, unknown>> = []
      for (const leasesThen of [1, 2]) {
        holders.push(yield* EffectLine.fork(holdALease(leasesThen)))
        yield* eventually(Effect.map(leases, (count) => count === leasesThen), 5_000, `${leasesThen} lease(s) on Redis`)
      }

      redis.pause()
      // Forked from this fiber, one after another: each runs at once, and on Effect 4 a fiber forked
      // by one of `forEach`'s concurrent workers would be interrupted when that worker ends.
      const permits = yield* Effect.forEach(
        Array.from({ length: 12 }),
        () =>
          EffectLine.fork(
            Effect.andThen(gate.acquire(deadline), Effect.sleep("200 millis")).pipe(
              Effect.andThen(gate.release("success"))
            )
          )
      )
      yield* Fiber.joinAll(permits)
      yield* Effect.forEach(holders, Fiber.interrupt)
      // A holder's fiber is gone; its lease is given back from here, as a stream's finalizer would.
      yield* gate.release("success")
      yield* gate.release("success")
      redis.resume()

      yield* eventually(Effect.map(leases, (count) => count === 0), 1_000, "no lease left a second after Redis woke")
      yield* drained(connection)
      assert.strictEqual(yield* leases, 0, "and none taken by a command that arrived late")
    }).pipe(Effect.scoped))

  it.live("lets no call wait for what a stall left behind", () =>
    Effect.gen(function*() {
      const redis = yield* privateRedis
      const keyPrefix = freshPrefix()
      const server = yield* FaultServer.make({ latencyMs: 200 })
      const target = managedAt(server.url, { concurrency: 8, attemptTimeout: "5 seconds" })
      const http = yield* Layer.build(Layer.merge(NodeHttpClient.layerUndici, quiet))
      const members = yield* Effect.forEach([1, 2, 3], () =>
        Effect.gen(function*() {
          const connection = yield* memberConnection(redis, keyPrefix)
          const coordination = yield* RedisCoordination.make().pipe(
            Effect.provideService(RedisConnection.RedisConnection, connection)
          )
          return yield* ModelClient.make(target).pipe(
            Effect.provideService(Coordination.Coordination, coordination),
            Effect.provide(http)
          )
        }))
      const calls: Array<{ readonly startedAt: number; readonly tookMs: number; readonly ok: boolean }> = []
      let running = true
      const caller = (client: ModelClient.Service) =>
        Effect.gen(function*() {
          while (running) {
            const startedAt = Date.now()
            const exit = yield* Effect.exit(client.chat(hello, { timeout: "20 seconds" }))
            calls.push({ startedAt, tookMs: Date.now() - startedAt, ok: exit._tag === "Success" })
            // Callers out of step with each other, as independent requests are.
            yield* Effect.sleep(Math.floor(Math.random() * 100))
          }
        })
      const callers = yield* EffectLine.fork(
        Effect.forEach(members.flatMap((client) => [client, client, client, client]), caller, {
          concurrency: "unbounded",
          discard: true
        })
      )
      yield* Effect.sleep("1 second")
      const stallMs = 5_000
      const stalledAt = Date.now()
      yield* stall(redis, stallMs)
      const wokeAt = Date.now()
      // Two calls a caller after Redis woke, however long a busy machine takes to make them: what
      // is asserted is how long each waited, never how many fit in a given time.
      const afterWaking = () => calls.filter((call) => call.startedAt >= wokeAt)
      yield* eventually(
        Effect.sync(() => afterWaking().length >= 24),
        60_000,
        "calls went on after Redis woke"
      )
      running = false
      yield* Fiber.join(callers)

      const longestOf = (some: typeof calls) => Math.max(...some.map((call) => call.tookMs))
      const longest = longestOf(calls)
      const longestAfter = longestOf(afterWaking())
      // What a call takes on this machine now, queueing for the gate included, before any stall.
      const longestBefore = longestOf(calls.filter((call) => call.startedAt + call.tookMs < stalledAt))
      const bound = Math.max(2_000, 3 * longestBefore)
      assert.isBelow(longestAfter, bound, `no call after waking waited (longest ${longestAfter} ms)`)
      assert.isBelow(longest, stallMs, `no call waited out the stall (longest ${longest} ms)`)
      assert.deepStrictEqual(calls.filter((call) => !call.ok), [], "every call succeeded")
      const observer = yield* memberConnection(redis, keyPrefix)
      // A connection of its own, made now: on a loaded machine it may still be connecting, and with
      // the offline queue off a command sent before it is up is refused (one stress run saw that).
      yield* eventually(
        Effect.promise(() => observer.client.ping().then(() => true, () => false)),
        30_000,
        "the observer's connection is up"
      )
      yield* eventually(
        Effect.promise(() => observer.client.keys(`${keyPrefix}:*:gate:leases`)).pipe(
          Effect.flatMap(([key]) =>
            key === undefined
              ? Effect.succeed(true)
              : Effect.promise(() => observer.client.zcard(key).then((n) => n === 0))
          )
        ),
        1_000,
        "the fleet is idle and no lease is left"
      )
    }).pipe(Effect.scoped))
})
