/**
 * The fleet's rate limiter on a real Redis, on the TestClock: two connections (two processes of a
 * fleet) share one pace, demand for demand as one in-memory `Pacer`; the deadline's refusal takes no
 * place; settling and giving back move the hash; a key with no limit known never reaches Redis; a
 * command that reaches a stalled Redis late takes no place.
 */
import { pollFiber, recordingSleeps, sleeps, TestClock, withoutDefaultLogger as quiet, yieldNow } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { type Failure, RateLimiter } from "@resilient-ai/policy"
import { EffectLine, FastPath, Limiters } from "@resilient-ai/policy/internal"
import { RedisConnection, RedisCoordination } from "@resilient-ai/redis"
import { RedisRateLimiter } from "@resilient-ai/redis/internal"
import { Clock, Duration, Effect, Fiber, Layer, Option, Redacted } from "effect"
import { startRedisServer } from "./server.js"
import {
  describeRedis,
  eventually,
  freshPrefix,
  holdingConnection,
  onOwnConnection,
  redisClusterUrl,
  redisServerBinary,
  redisUrl
} from "./support.js"

const never = Number.POSITIVE_INFINITY
const interactive = (tokens = 0, deadline = never): RateLimiter.Demand => ({ tokens, lane: "interactive", deadline })
const batch = (tokens = 0): RateLimiter.Demand => ({ tokens, lane: "batch", deadline: never })

/** A target's rate limiter as `RedisCoordination` makes it, on a connection of its own: one process of the fleet. */
const member = (prefix: string, options: Omit<RateLimiter.Options, "target"> = {}) =>
  onOwnConnection(
    prefix,
    Effect.flatMap(
      RedisCoordination.make(),
      (coordination) => Effect.map(coordination.stateOf({ target: "llm", rateLimit: options }), (made) => made.limiter)
    )
  )

/** The pace's hash under `prefix`, as Redis holds it: its fields as numbers. */
const paceOf = (prefix: string) =>
  onOwnConnection(
    prefix,
    Effect.flatMap(RedisConnection.RedisConnection, ({ client }) =>
      Effect.promise(async () => {
        const [key] = await client.keys(`${prefix}:*:limiter`)
        const fields = key === undefined ? {} : await client.hgetall(key)
        return Object.fromEntries(Object.entries(fields).map(([field, value]) => [field, Number(value)]))
      }))
  )

const fallbacks = Effect.sync(() =>
  EffectLine.counted(EffectLine.tagged(RedisConnection.fallbacks, { operation: "limiter" }))
)

/** A demand asked of `limiter`, `at` milliseconds after the schedule starts (default 0). */
type Ask = readonly [name: string, limiter: RateLimiter.Service, demand: RateLimiter.Demand, at?: number]

/**
 * Asks each demand at its time, in order, moving the TestClock to each pending wake-up or ask in
 * turn and letting Redis's replies through in between: when each was admitted (milliseconds after
 * the start), by name, in order of time.
 */
const schedule = (asks: ReadonlyArray<Ask>) =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    const admitted: Array<readonly [string, number]> = []
    const fibers: Array<Fiber.Fiber<void, Failure.RateLimitedLocally>> = []
    // Every fiber not done is asleep on the TestClock: none waits for Redis any more.
    const quiescent = Effect.gen(function*() {
      const running = (yield* Effect.forEach(fibers, pollFiber)).filter(Option.isNone).length
      return (yield* sleeps).length === running
    })
    const pending = [...asks]
    for (let turn = 0; turn < 1_000; turn++) {
      const now = (yield* Clock.currentTimeMillis) - start
      while (pending.length > 0 && (pending[0]![3] ?? 0) <= now) {
        const [name, limiter, demand] = pending.shift()!
        fibers.push(
          yield* EffectLine.fork(
            Effect.flatMap(limiter.admit(demand), () =>
              Effect.map(Clock.currentTimeMillis, (at) => void admitted.push([name, at - start])))
          )
        )
        yield* eventually(quiescent, `${name} decided`)
      }
      const due = [
        ...(yield* sleeps),
        ...pending.slice(0, 1).map(([, , , at]) =>
          start + (at ?? 0)
        )
      ]
      if (due.length === 0) break
      yield* TestClock.setTime(Math.min(...due))
      yield* eventually(quiescent, `what was due at ${Math.min(...due) - start} decided`)
    }
    yield* Effect.forEach(fibers, Fiber.join)
    return admitted.sort(([a, at], [b, bt]) => at - bt || a.localeCompare(b))
  })

describeRedis("RedisRateLimiter", () => {
  it.scoped("two processes share one pace: demands alternating between them go when one limiter's would", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const limits = { requestsPerMinute: 60, tokensPerMinute: 6_000 }
      const a = yield* member(prefix, limits)
      const b = yield* member(prefix, limits)
      const tokens = [0, 300, 50, 0, 100, 0, 20]
      const admitted = yield* schedule(
        tokens.map((tokens, index) => [`${index}`, index % 2 === 0 ? a : b, interactive(tokens)] as const)
      )
      const alone = yield* RateLimiter.make({ target: "llm", ...limits })
      const expected = yield* schedule(tokens.map((tokens, index) => [`${index}`, alone, interactive(tokens)] as const))
      assert.deepStrictEqual(admitted, expected)
      // One request a second; the 300 tokens (3 s of them) hold the 50 back to 3.5 s.
      assert.deepStrictEqual(admitted.map(([, at]) => at), [0, 1_000, 3_500, 4_500, 5_500, 6_500, 7_500])
      assert.deepStrictEqual(yield* a.snapshot, yield* b.snapshot, "one pace, whichever process reads it")
    }).pipe(recordingSleeps))

  it.scoped("a turn after the deadline is refused at once, and takes no place", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const a = yield* member(prefix, { requestsPerMinute: 60 })
      const b = yield* member(prefix, { requestsPerMinute: 60 })
      yield* a.admit(interactive())
      const before = yield* paceOf(prefix)
      const refused = yield* Effect.flip(a.admit(interactive(0, 999)))
      assert.deepStrictEqual({ ...refused }, {
        _tag: "RateLimitedLocally",
        target: "llm",
        dimension: "requests",
        availableAt: 1_000,
        retryAfter: Duration.millis(1_000)
      })
      assert.deepStrictEqual(yield* paceOf(prefix), before)
      assert.deepStrictEqual(yield* schedule([["next", b, interactive()]]), [["next", 1_000]])
    }).pipe(recordingSleeps))

  it.scoped("a batch call waits without holding a place: another process's interactive call goes first", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const a = yield* member(prefix, { requestsPerMinute: 60 })
      const b = yield* member(prefix, { requestsPerMinute: 60 })
      // Batch goes only while its request fits in the bucket within 500 ms of now: batch 2 is due at
      // 1 s and holds no place, so the interactive call asked at 100 ms takes that turn; batch 3
      // waits in line behind batch 2.
      const asks = (a: RateLimiter.Service, b: RateLimiter.Service): ReadonlyArray<Ask> => [
        ["batch 1", a, batch()],
        ["batch 2", a, batch()],
        ["interactive", b, interactive(), 100],
        ["batch 3", a, batch(), 100]
      ]
      const admitted = yield* schedule(asks(a, b))
      const alone = yield* RateLimiter.make({ target: "llm", requestsPerMinute: 60 })
      assert.deepStrictEqual(admitted, yield* schedule(asks(alone, alone)))
      assert.deepStrictEqual(admitted, [["batch 1", 0], ["interactive", 1_000], ["batch 2", 2_000], ["batch 3", 3_000]])
    }).pipe(recordingSleeps))

  it.scoped("settling and giving back move the fleet's pace, in the hash", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      // 6,000 tokens a minute: 10 ms a token; 120 requests a minute: 500 ms a request.
      const a = yield* member(prefix, { requestsPerMinute: 120, tokensPerMinute: 6_000 })
      const b = yield* member(prefix, { requestsPerMinute: 120, tokensPerMinute: 6_000 })
      const big = yield* a.admit(interactive(300))
      assert.deepStrictEqual(yield* paceOf(prefix), { requests: 500, tokens: 3_000 })
      assert.strictEqual((yield* b.snapshot).tokensWaitMillis, 2_000)
      // The provider used 90: 210 tokens (2.1 s) go back, for every process.
      yield* big.settle(90)
      assert.deepStrictEqual(yield* paceOf(prefix), { requests: 500, tokens: 900 })
      assert.strictEqual((yield* b.snapshot).tokensWaitMillis, 0)
      // An attempt that never reached the provider gives its request and its tokens back.
      const unsent = yield* b.admit(interactive(10))
      assert.deepStrictEqual(yield* paceOf(prefix), { requests: 1_000, tokens: 1_000 })
      yield* unsent.giveBack
      assert.deepStrictEqual(yield* paceOf(prefix), { requests: 500, tokens: 900 })
      // It used 210, not 10: the 200 it owes (2 s) make the next wait.
      const owing = yield* b.admit(interactive(10))
      yield* owing.settle(210)
      assert.deepStrictEqual(yield* paceOf(prefix), { requests: 1_000, tokens: 3_000 })
      assert.deepStrictEqual(yield* a.snapshot, {
        requestsPerMinute: 120,
        tokensPerMinute: 6_000,
        requestsWaitMillis: 0,
        tokensWaitMillis: 2_000
      })
    }))

  it.scoped("an interrupted wait gives its place back to the fleet", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const a = yield* member(prefix, { requestsPerMinute: 60 })
      const b = yield* member(prefix, { requestsPerMinute: 60 })
      yield* a.admit(interactive())
      const waiting = yield* EffectLine.fork(b.admit(interactive()))
      yield* eventually(Effect.map(sleeps, (pending) => pending.length === 1), "the call waits its turn")
      assert.strictEqual((yield* a.snapshot).requestsWaitMillis, 1_000)
      yield* Fiber.interrupt(waiting)
      assert.strictEqual((yield* a.snapshot).requestsWaitMillis, 0)
    }).pipe(recordingSleeps))

  it.scoped("gives back the place Redis reserves for a caller as it is interrupted", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const a = yield* member(prefix, { requestsPerMinute: 60 })
      // The other process's connection holds Redis's answers back after `hold()`, until the test lets one through.
      const redis = yield* holdingConnection(prefix)
      const b = yield* RedisRateLimiter.make({ target: "llm", requestsPerMinute: 60 }).pipe(
        Effect.provideService(RedisConnection.RedisConnection, redis.connection)
      )
      yield* a.admit(interactive())
      redis.hold()
      const waiting = yield* EffectLine.fork(b.admit(interactive()))
      yield* eventually(Effect.sync(redis.asked), "the call asks Redis")
      const interrupting = yield* EffectLine.fork(Fiber.interrupt(waiting))
      yield* yieldNow
      redis.letThrough()
      yield* Fiber.join(interrupting)
      assert.strictEqual((yield* a.snapshot).requestsWaitMillis, 0)
    }))

  it.scoped("lowers the limits it is told by the provider's headers, each process its own", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const a = yield* member(prefix)
      const b = yield* member(prefix, { requestsPerMinute: 60 })
      yield* a.learn({ requestsPerMinute: 30 })
      // a's requests cost 2 s each (30 a minute, learned), b's 1 s (its setting).
      assert.deepStrictEqual(
        yield* schedule([["a", a, interactive()], ["a again", a, interactive()], ["b", b, interactive()]]),
        [["a", 0], ["a again", 2_000], ["b", 4_000]]
      )
      assert.strictEqual((yield* a.snapshot).requestsPerMinute, 30)
    }).pipe(recordingSleeps))

  it.scoped("a key with no limit known never reaches Redis: admitted at once, free", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const context = yield* Layer.build(
        Layer.orDie(
          RedisConnection.layer({ url: Redacted.make(redisUrl), keyPrefix: prefix, commandTimeout: "1 second" })
        )
      )
      const connection = yield* Effect.provide(RedisConnection.RedisConnection, context)
      let asked = 0
      const counting: RedisConnection.Service = {
        ...connection,
        decide: (...args) => Effect.andThen(Effect.sync(() => asked++), connection.decide(...args)),
        tell: (command) => Effect.andThen(Effect.sync(() => asked++), connection.tell(command))
      }
      const limiter = yield* RedisRateLimiter.make({ target: "llm", tokensPerMinute: Number.POSITIVE_INFINITY }).pipe(
        Effect.provideService(RedisConnection.RedisConnection, counting)
      )
      const before = yield* fallbacks
      assert.strictEqual(FastPath.limiter(limiter)?.admitNow?.(1_000, "interactive"), Limiters.free)
      for (let demand = 0; demand < 1_000; demand++) {
        const reservation = yield* limiter.admit(interactive(1_000))
        assert.strictEqual(reservation, Limiters.free)
        yield* reservation.settle(2_000)
      }
      assert.strictEqual((yield* limiter.snapshot).requestsWaitMillis, 0)
      assert.strictEqual(asked, 0, "no command was sent")
      assert.strictEqual(yield* fallbacks, before, "nor decided in process")
      assert.deepStrictEqual(yield* Effect.promise(() => connection.client.keys(`${prefix}:*`)), [])
      // Once the provider states a limit, the pace is the fleet's.
      yield* limiter.learn({ requestsPerMinute: 600 })
      assert.strictEqual(FastPath.limiter(limiter)?.admitNow?.(1_000, "interactive"), undefined)
      assert.notStrictEqual(yield* limiter.admit(interactive()), Limiters.free)
      assert.strictEqual(asked, 1)
    }))

  describe.skipIf(redisClusterUrl === "")("on a Redis Cluster", () => {
    it.scoped("decides there: the pace and the members share one hash tag", () =>
      Effect.gen(function*() {
        const context = yield* Layer.build(
          Layer.orDie(RedisConnection.layer({
            url: Redacted.make(redisClusterUrl),
            keyPrefix: freshPrefix(),
            commandTimeout: "2 seconds"
          }))
        )
        const before = yield* fallbacks
        const limiter = yield* RedisRateLimiter.make({ target: "llm", tokensPerMinute: 6_000 }).pipe(
          Effect.provide(context)
        )
        // 300 tokens at 10 ms each: the pace is reserved 2 s past the burst.
        yield* limiter.admit(interactive(300))
        assert.strictEqual((yield* limiter.snapshot).tokensWaitMillis, 2_000)
        assert.strictEqual(yield* fallbacks, before, "no decision fell back to the process")
      }))
  })
})

describe.skipIf(redisServerBinary === "")("RedisRateLimiter with Redis stalled", () => {
  it.live(
    "a decision that reaches Redis after its caller decided in process takes no place",
    () =>
      Effect.gen(function*() {
        const redis = yield* Effect.acquireRelease(
          Effect.promise(() => startRedisServer(redisServerBinary)),
          (server) => Effect.promise(() => server.stop())
        )
        const keyPrefix = freshPrefix()
        // The default 50 ms command timeout: what a stall catches.
        const context = yield* Layer.build(
          RedisConnection.layer({ url: Redacted.make(redis.url), keyPrefix })
        )
        const connection = yield* Effect.provide(RedisConnection.RedisConnection, context)
        const limiter = yield* RedisRateLimiter.make({ target: "llm", requestsPerMinute: 600 }).pipe(
          Effect.provide(context)
        )
        const pace = Effect.promise(async (): Promise<Record<string, string>> => {
          const [key] = await connection.client.keys(`${keyPrefix}:*:limiter`)
          return key === undefined ? {} : connection.client.hgetall(key)
        })
        yield* limiter.admit(interactive())
        // A busy machine's cold start can outlast the 50 ms timeout: that place was then taken in
        // process, and reaches Redis when it is asked again (`retryAfter`, 1 s, later).
        while ((yield* connection.health)._tag === "down") {
          yield* Effect.sleep("50 millis")
          yield* limiter.snapshot
        }
        const before = yield* pace
        assert.containsAllKeys(before, ["requests"])

        redis.pause()
        const fellBefore = yield* fallbacks
        // Within the burst of this process's share: each goes at once, decided in process.
        const now = yield* Clock.currentTimeMillis
        for (let demand = 0; demand < 3; demand++) yield* limiter.admit(interactive(0, now + 60_000))
        assert.strictEqual((yield* fallbacks) - fellBefore, 3)
        redis.resume()

        // A command sent after the stall's commands is answered after they ran.
        yield* Effect.promise(() => connection.client.ping())
        assert.deepStrictEqual(yield* pace, before, "the commands that arrived late changed nothing")
        // Redis is asked again `retryAfter` (1 s) after it was found silent: the first command then
        // adds the three places taken alone, each 100 ms of the pace.
        for (let turn = 0; turn < 100 && (yield* connection.health)._tag === "down"; turn++) {
          yield* Effect.sleep("50 millis")
          yield* limiter.snapshot
        }
        assert.isAtLeast(Number((yield* pace)["requests"]), Number(before["requests"]) + 300)
      }).pipe(Effect.scoped, Effect.provide(quiet))
  )
})
