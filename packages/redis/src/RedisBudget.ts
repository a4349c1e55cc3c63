/**
 * The retry budget of a fleet, on Redis: one ratio-with-floor window shared by every process that
 * calls a target with the same API key.
 *
 * Per-process budgets do not add up to a fleet budget: ten processes each allowed 10% on top of
 * their successes, with a floor each, let ten floors of retries hit a provider that is down. Here
 * the window lives in one Redis hash per target and API key (the key is fingerprinted, never
 * stored), in buckets that expire, and each decision is one Lua script: it reads the window, decides
 * and counts, atomically. Time is the caller's Effect `Clock` (so `TestClock` drives it, as it
 * drives the in-memory budget); hosts kept in step by NTP agree to far better than a bucket. The
 * semantics are those of `RetryBudget.layerMemory`. When Redis cannot answer within its short
 * timeout, the decision is made by an in-process budget with the same settings (see
 * `RedisConnection`).
 */
import { type Coordination, RetryBudget } from "@resilient-ai/policy"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Redis } from "ioredis"
import { keyFor } from "./internal/keys.js"
import { RedisConnection } from "./RedisConnection.js"

/**
 * KEYS[1]: the window's hash. ARGV: operation ("acquire" | "success" | "snapshot"), bucket
 * milliseconds, buckets, ratio, floor per window, key time to live in milliseconds, now (epoch ms).
 * Fields `s:<bucket>` and `r:<bucket>` count successes and granted retries per bucket, `S` and `R`
 * their totals over the window, `swept` the newest bucket at the last sweep.
 * Returns { granted (1/0), successes, retries } over the window.
 */
const script = `
local key = KEYS[1]
local operation = ARGV[1]
local bucketMillis = tonumber(ARGV[2])
local buckets = tonumber(ARGV[3])
local ratio = tonumber(ARGV[4])
local floor = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local now = tonumber(ARGV[7])
local current = math.floor(now / bucketMillis)
local state = redis.call('HMGET', key, 'swept', 'S', 'R')
local successes = tonumber(state[2]) or 0
local retries = tonumber(state[3]) or 0
-- Once per bucket, the buckets that left the window are dropped and taken off the totals,
-- however long the gap since the last decision: every other decision is a few field reads.
if current > (tonumber(state[1]) or -1e300) then
  local oldest = current - buckets + 1
  local fields = redis.call('HGETALL', key)
  local stale = {}
  for i = 1, #fields, 2 do
    local kind, bucket = string.sub(fields[i], 1, 1), tonumber(string.sub(fields[i], 3))
    if bucket and bucket < oldest then
      stale[#stale + 1] = fields[i]
      if kind == 's' then successes = successes - tonumber(fields[i + 1]) else retries = retries - tonumber(fields[i + 1]) end
    end
  end
  if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
  redis.call('HSET', key, 'swept', current, 'S', successes, 'R', retries)
  redis.call('PEXPIRE', key, ttl)
end
if operation == 'success' then
  redis.call('HINCRBY', key, 's:' .. current, 1)
  redis.call('HINCRBY', key, 'S', 1)
  redis.call('PEXPIRE', key, ttl)
  return { 1, successes + 1, retries }
end
if operation == 'snapshot' or retries + 1 > math.max(floor, ratio * successes) then
  return { 0, successes, retries }
end
redis.call('HINCRBY', key, 'r:' .. current, 1)
redis.call('HINCRBY', key, 'R', 1)
redis.call('PEXPIRE', key, ttl)
return { 1, successes, retries + 1 }
`

interface Scripted extends Redis {
  resilientAiBudget(key: string, ...args: Array<string | number>): Promise<[number, number, number]>
}

// The most buckets a Redis window may have: a sweep deletes up to two fields per bucket in one
// command, and Lua's stack bounds how many.
const maxBuckets = 1_000

/** Settings of a fleet budget: a target, the API key the fleet shares (only its fingerprint is used), the window. */
export interface Options extends Coordination.BudgetOptions {}

/**
 * A budget on the fleet's Redis, falling back to an in-process one with the same settings.
 * Bad settings throw a `RangeError` naming them.
 */
export const make = (options: Options): Effect.Effect<RetryBudget.Service, never, RedisConnection> => {
  const settings = RetryBudget.settings(options)
  if (settings.buckets > maxBuckets) {
    throw new RangeError(`redis retry budget buckets must be at most ${maxBuckets}, got ${settings.buckets}`)
  }
  const bucketMillis = settings.windowMillis / settings.buckets
  // The floor: what a window without successes allows.
  const floor = RetryBudget.allowance(settings, 0)
  const ttl = Math.ceil(2 * settings.windowMillis)
  return Effect.gen(function*() {
    const connection = yield* RedisConnection
    const fallback = yield* RetryBudget.make(options)
    const clock = yield* Effect.clock
    const client = connection.client as Scripted
    if (typeof client.resilientAiBudget !== "function") {
      client.defineCommand("resilientAiBudget", { numberOfKeys: 1, lua: script })
    }
    const key = keyFor(connection.keyPrefix, "budget", options.target, options.apiKey)
    const run = (operation: "acquire" | "success" | "snapshot") =>
      client.resilientAiBudget(
        key,
        operation,
        bucketMillis,
        settings.buckets,
        settings.ratio,
        floor,
        ttl,
        clock.unsafeCurrentTimeMillis()
      )
    const recordSuccess = connection.decide(
      "budget",
      () => run("success").then(() => undefined),
      fallback.recordSuccess(1)
    )
    return {
      tryAcquire: (failure) =>
        connection.decide(
          "budget",
          () => run("acquire").then(([granted]) => granted === 1),
          fallback.tryAcquire(failure)
        ),
      recordSuccess: () => recordSuccess,
      snapshot: connection.decide(
        "budget",
        () =>
          run("snapshot").then(([, successes, retries]) => ({
            successes,
            retries,
            allowance: RetryBudget.allowance(settings, successes)
          })),
        fallback.snapshot
      )
    }
  })
}

/** Provides `RetryBudget` on the fleet's Redis. */
export const layer = (options: Options): Layer.Layer<RetryBudget.RetryBudget, never, RedisConnection> =>
  Layer.effect(RetryBudget.RetryBudget, make(options))
