import { TestClock } from "#test-line"
import { assert, it } from "@effect/vitest"
import { Failure, RetryBudget } from "@resilient-ai/policy"
import { FastPath, keyFingerprint } from "@resilient-ai/policy/internal"
import { RedisConnection, RedisCoordination } from "@resilient-ai/redis"
import { RedisBudget } from "@resilient-ai/redis/internal"
import { Effect, Redacted } from "effect"
import { createHash } from "node:crypto"
import { canary } from "../canary.js"
import { invalidSettings } from "../policy/support.js"
import { connection, describeRedis, freshPrefix, hashTagOf, onOwnConnection, redis } from "./support.js"

const failure = new Failure.ServerError({ status: 503 })

/** Asks `n` times; how many were granted. */
const grants = (budget: RetryBudget.Service, n: number) =>
  Effect.map(Effect.replicateEffect(budget.tryAcquire(failure), n), (answers) => answers.filter(Boolean).length)

const successes = (budget: RetryBudget.Service, n: number) => Effect.replicateEffect(budget.recordSuccess(1), n)

const tenSeconds = { target: "llm", window: "10 seconds", buckets: 10 } as const

describeRedis("RedisBudget", () => {
  it.effect("grants ratio × successes retries over the window, then refuses", () =>
    Effect.gen(function*() {
      const budget = yield* RedisBudget.make({ ...tenSeconds, ratio: 0.1, minPerSecond: 0 })
      yield* successes(budget, 100)
      assert.strictEqual(yield* grants(budget, 15), 10)
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 100, retries: 10, paid: 0, allowance: 10 })
    }).pipe(Effect.provide(connection(freshPrefix()))))

  it.effect("the fleet's allowance shrinks by what this process learned of its retries: none paid", () =>
    Effect.gen(function*() {
      const budget = yield* RedisBudget.make({ ...tenSeconds, ratio: 0.1, minPerSecond: 3, shareWhenRetriesFail: 0.05 })
      // Retries in flight are not judged: the whole floor of 30 for a burst of them.
      assert.strictEqual(yield* grants(budget, 40), 30)
      yield* TestClock.adjust("10 seconds")
      // Each granted retry failed in turn: granted while retries + 1 ≤ 30 × (0.05 + 0.95 × 2 / (failed + 2)).
      let granted = 0
      for (let i = 0; i < 30; i++) {
        if (!(yield* budget.tryAcquire(failure))) continue
        granted++
        yield* FastPath.budget(budget)!.recordFailure!(failure, 2)
      }
      assert.strictEqual(granted, 7)
      yield* budget.recordSuccess(2)
      assert.strictEqual((yield* budget.snapshot).paid, 1)
    }).pipe(Effect.provide(connection(freshPrefix()))))

  it.effect("grants the floor when there are no successes", () =>
    Effect.gen(function*() {
      const budget = yield* RedisBudget.make({ ...tenSeconds, ratio: 0.1, minPerSecond: 2 })
      assert.strictEqual(yield* grants(budget, 30), 20)
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 0, retries: 20, paid: 0, allowance: 20 })
    }).pipe(Effect.provide(connection(freshPrefix()))))

  it.effect("slides one bucket at a time with the TestClock", () =>
    Effect.gen(function*() {
      const budget = yield* RedisBudget.make({ ...tenSeconds, ratio: 0.1, minPerSecond: 0 })
      yield* successes(budget, 50)
      assert.strictEqual(yield* grants(budget, 10), 5)
      yield* TestClock.adjust("5 seconds")
      yield* successes(budget, 50)
      assert.strictEqual(yield* grants(budget, 10), 5, "100 successes in the window allow 10, 5 taken")
      yield* TestClock.adjust("4999 millis")
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 100, retries: 10, paid: 0, allowance: 10 })
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(
        yield* budget.snapshot,
        { successes: 50, retries: 5, paid: 0, allowance: 5 },
        "t = 0 has left"
      )
      assert.strictEqual(yield* grants(budget, 1), 0)
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(yield* budget.snapshot, { successes: 0, retries: 0, paid: 0, allowance: 0 })
    }).pipe(Effect.provide(connection(freshPrefix()))))

  it.effect("decides exactly as the in-memory budget, decision for decision", () =>
    Effect.gen(function*() {
      const options = { ...tenSeconds, ratio: 0.2, minPerSecond: 0.5 }
      const shared = yield* RedisBudget.make(options)
      const local = yield* RetryBudget.make(options)
      // A fixed pseudo-random walk: bursts of successes and retries, with the clock moving 0–3 s.
      let seed = 42
      const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31
      for (let step = 0; step < 600; step++) {
        const roll = next()
        if (roll < 0.45) {
          yield* Effect.zip(shared.recordSuccess(1), local.recordSuccess(1))
        } else if (roll < 0.9) {
          const [remote, memory] = yield* Effect.zip(shared.tryAcquire(failure), local.tryAcquire(failure))
          assert.strictEqual(remote, memory, `decision ${step}`)
        } else {
          yield* TestClock.adjust(Math.floor(next() * 3_000))
        }
      }
      assert.deepStrictEqual(yield* shared.snapshot, yield* local.snapshot)
    }).pipe(Effect.provide(connection(freshPrefix()))))

  it.effect("is one budget for every connection calling a target with one API key", () => {
    const prefix = freshPrefix()
    const apiKey = Redacted.make(canary)
    const options = { ...tenSeconds, ratio: 0, minPerSecond: 1, keyFingerprint: keyFingerprint(apiKey) }
    const open = (extra: Partial<RedisBudget.Options> = {}) =>
      onOwnConnection(prefix, RedisBudget.make({ ...options, ...extra }))
    return Effect.gen(function*() {
      const first = yield* open()
      const second = yield* open()
      assert.strictEqual(yield* grants(first, 6), 6)
      assert.strictEqual(yield* grants(second, 6), 4, "the second process shares the first's floor of 10")
      const otherKey = yield* open({ keyFingerprint: keyFingerprint(Redacted.make(`${canary}-another`)) })
      const otherTarget = yield* open({ target: "embeddings" })
      assert.strictEqual(yield* grants(otherKey, 12), 10)
      assert.strictEqual(yield* grants(otherTarget, 12), 10)
    }).pipe(Effect.scoped)
  })

  it.effect("stores a fingerprint of the API key, never the key, in keys that expire", () => {
    const prefix = freshPrefix()
    const secret = canary
    return Effect.gen(function*() {
      const budget = yield* RedisBudget.make({ ...tenSeconds, keyFingerprint: keyFingerprint(Redacted.make(secret)) })
      yield* successes(budget, 3)
      yield* grants(budget, 2)
      const keys = [...(yield* redis((client) => client.keys(`${prefix}:*`)))].sort()
      assert.strictEqual(keys.length, 2)
      const [key, members] = keys as [string, string]
      assert.match(key, new RegExp(`^${prefix}:\\{llm:[0-9a-f]{16}\\}:budget$`))
      assert.match(members, new RegExp(`^${prefix}:\\{llm:[0-9a-f]{16}\\}:members$`))
      assert.strictEqual(new Set(keys.map(hashTagOf)).size, 1, "one Redis Cluster slot for the target's keys")
      const stored = JSON.stringify(yield* redis((client) => client.hgetall(key)))
      const memberNames = JSON.stringify(yield* redis((client) => client.zrange(members, 0, -1)))
      assert.notInclude(key + stored + members + memberNames, secret)
      const ttl = yield* redis((client) => client.pttl(key))
      assert.isAbove(ttl, 0)
      assert.isAtMost(ttl, 20_000, "a window idle for two windows' time is gone")
      assert.isAbove(yield* redis((client) => client.pttl(members)), 0, "the members set expires too")
    }).pipe(Effect.provide(connection(prefix)))
  })

  it.effect("through RedisCoordination, a target's budget is under its key's SHA-256 fingerprint, as its keys always were", () => {
    const prefix = freshPrefix()
    return Effect.gen(function*() {
      const coordination = yield* RedisCoordination.make()
      const { budget } = yield* coordination.stateOf({
        target: "llm",
        apiKey: Redacted.make(canary),
        budget: tenSeconds
      })
      yield* grants(budget, 1)
      // What `node:crypto` named them after before the fingerprint was computed in plain JavaScript.
      const fingerprint = createHash("sha256").update(canary).digest("hex").slice(0, 16)
      assert.deepStrictEqual(
        [...(yield* redis((client) => client.keys(`${prefix}:*`)))].sort(),
        [`${prefix}:{llm:${fingerprint}}:budget`, `${prefix}:{llm:${fingerprint}}:members`]
      )
    }).pipe(Effect.provide(connection(prefix)))
  })

  it.effect("keeps at most a window of buckets, however long it runs", () => {
    const prefix = freshPrefix()
    return Effect.gen(function*() {
      const budget = yield* RedisBudget.make({ ...tenSeconds, ratio: 1, minPerSecond: 0 })
      for (let second = 0; second < 200; second++) {
        yield* budget.recordSuccess(1)
        yield* budget.tryAcquire(failure)
        yield* TestClock.adjust(second % 7 === 0 ? "2300 millis" : "1 second")
      }
      const [key] = (yield* redis((client) => client.keys(`${prefix}:*:budget`))) as [string]
      // Two fields (successes, retries) per bucket of the window, their totals, and the sweep mark.
      assert.isAtMost(yield* redis((client) => client.hlen(key)), 2 * 10 + 3)
    }).pipe(Effect.provide(connection(prefix)))
  })
})

// Settings are checked when the budget is made, before any connection is asked for: no Redis needed.
it("refuses a window too finely bucketed for one command", () => {
  // A connection used before the settings are checked ends the test with a defect.
  const untouchable = new Proxy({} as RedisConnection.Service, {
    get: () => {
      throw new Error("settings must be checked before the connection is used")
    }
  })
  const refused = (options: RedisBudget.Options) =>
    invalidSettings(RedisBudget.make(options).pipe(Effect.provideService(RedisConnection.RedisConnection, untouchable)))
  assert.strictEqual(
    refused({ target: "llm", buckets: 5_000 }),
    "redis retry budget: buckets must be at most 1000 (one Lua call sweeps them all), got 5000"
  )
  assert.strictEqual(
    refused({ target: "llm", ratio: -1 }),
    "retry budget: ratio must be between 0 and 1 (0.1 allows 10% retries), got -1"
  )
})
