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
 * semantics are those of the in-memory `RetryBudget.make`. When Redis cannot answer within its short
 * timeout, the process decides alone within its share of the fleet's floor (see `make` and
 * `RedisConnection`).
 */
import { RetryBudget, Settings } from "@resilient-ai/policy"
import { Budgets, type Coordinations, EffectLine, Either, FastPath } from "@resilient-ai/policy/internal"
import * as Effect from "effect/Effect"
import type { Redis } from "ioredis"
import { RedisConnection } from "../RedisConnection.js"
import { keyFor } from "./keys.js"
import { answered, isVoid, memberTtlMillis, never, register, type Void } from "./script.js"

/**
 * After the shared prologue (`internal/script.ts`): keys[1] the window's hash. args: operation
 * ("acquire" | "success" | "refund" | "snapshot"), bucket milliseconds, buckets, ratio, floor per
 * window, key time to live in milliseconds, now (epoch ms, the caller's clock), for "refund" the
 * bucket of the retry to give back, and the retries the caller granted alone since it last reached
 * Redis (counted in the current bucket).
 * Fields `s:<bucket>` and `r:<bucket>` count successes and granted retries per bucket, `S` and `R`
 * their totals over the window, `swept` the newest bucket at the last sweep.
 * Returns { granted (1/0), successes, retries, fleet size, current bucket } over the window.
 */
const script = `
local key = keys[1]
local operation = args[1]
local bucketMillis = tonumber(args[2])
local buckets = tonumber(args[3])
local ratio = tonumber(args[4])
local floor = tonumber(args[5])
local windowTtl = tonumber(args[6])
local now = tonumber(args[7])
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
  redis.call('PEXPIRE', key, windowTtl)
end
-- Retries the caller granted alone while Redis could not answer: the fleet spent them too.
local reported = tonumber(args[9]) or 0
if reported > 0 then
  redis.call('HINCRBY', key, 'r:' .. current, reported)
  redis.call('HINCRBY', key, 'R', reported)
  redis.call('PEXPIRE', key, windowTtl)
  retries = retries + reported
end
if operation == 'success' then
  redis.call('HINCRBY', key, 's:' .. current, 1)
  redis.call('HINCRBY', key, 'S', 1)
  redis.call('PEXPIRE', key, windowTtl)
  return { 1, successes + 1, retries, fleet, current }
end
if operation == 'refund' then
  local field = 'r:' .. args[8]
  if (tonumber(redis.call('HGET', key, field)) or 0) > 0 then
    redis.call('HINCRBY', key, field, -1)
    redis.call('HINCRBY', key, 'R', -1)
    retries = retries - 1
  end
  return { 0, successes, retries, fleet, current }
end
if operation == 'snapshot' or retries + 1 > math.max(floor, ratio * successes) then
  return { 0, successes, retries, fleet, current }
end
redis.call('HINCRBY', key, 'r:' .. current, 1)
redis.call('HINCRBY', key, 'R', 1)
redis.call('PEXPIRE', key, windowTtl)
return { 1, successes, retries + 1, fleet, current }
`

type Answer = [granted: number, successes: number, retries: number, fleet: number, bucket: number]

interface Scripted extends Redis {
  resilientAiBudget(members: string, key: string, ...args: Array<string | number>): Promise<Answer | Void>
}

// The most buckets a Redis window may have: a sweep deletes up to two fields per bucket in one
// command, and Lua's stack bounds how many.
const maxBuckets = 1_000

/** Settings of a fleet budget: a target, the fingerprint of the API key the fleet shares (as `Coordination` makes it), the window. */
export interface Options extends Coordinations.ForKey<RetryBudget.Options> {}

/**
 * A budget on the fleet's Redis. When Redis cannot decide in time, this process decides alone with
 * its share of the floor (the floor divided by the fleet's size, learned from Redis or the
 * connection's `fleetSize`, whichever is larger) and `ratio` of its own successes, counting the
 * retries Redis granted it in the window: N processes deciding alone together spend about one
 * floor, not N. What it granted alone is added to the fleet's window when Redis answers again.
 * Bad settings fail with `InvalidSettings` naming them.
 */
export const make = (
  options: Options
): Effect.Effect<RetryBudget.Service, Settings.InvalidSettings, RedisConnection> =>
  Effect.flatMap(
    Effect.suspend(() => Either.toEffect(Budgets.settings(options))),
    (settings) =>
      settings.buckets > maxBuckets
        ? Effect.fail(
          new Settings.InvalidSettings({
            subject: "redis retry budget",
            problems: [`buckets must be at most ${maxBuckets} (one Lua call sweeps them all), got ${settings.buckets}`]
          })
        )
        : makeChecked(options, settings)
  )

const makeChecked = (
  options: Options,
  settings: Budgets.Settings
): Effect.Effect<RetryBudget.Service, never, RedisConnection> => {
  const bucketMillis = settings.windowMillis / settings.buckets
  // The floor: what a window without successes allows.
  const floor = Budgets.allowance(settings, 0)
  const windowTtl = Math.ceil(2 * settings.windowMillis)
  return Effect.gen(function*() {
    const connection = yield* RedisConnection
    const clock = yield* EffectLine.currentClock
    const now = () => EffectLine.nowMillis(clock)
    const client = connection.client as Scripted
    register(client, "resilientAiBudget", 1, script)
    const members = keyFor(connection.keyPrefix, "members", options.target, options.keyFingerprint)
    const key = keyFor(connection.keyPrefix, "budget", options.target, options.keyFingerprint)
    // What this process has done in the window, whoever decided: its fallback when Redis cannot.
    const local = new Budgets.Window(settings)
    let fleet = connection.fleetSize
    // Retries this process granted alone and Redis has not counted yet: the next command that
    // takes effect adds them to the fleet's window, so the fleet stops granting what was spent.
    let unreported = 0
    const run = (voidAfter: number, operation: "acquire" | "success" | "snapshot" | "refund", bucket = 0) => {
      const reporting = unreported
      unreported = 0
      const at = now()
      // Whether retries pay is learned from this process's own: the fleet's allowance shrinks by it.
      const payoff = local.payoff(at)
      return client.resilientAiBudget(
        members,
        key,
        voidAfter,
        connection.member,
        memberTtlMillis,
        operation,
        bucketMillis,
        settings.buckets,
        settings.ratio * payoff,
        floor * payoff,
        windowTtl,
        at,
        bucket,
        reporting
      ).then(
        (answer) => {
          if (isVoid(answer)) {
            fleet = Math.max(connection.fleetSize, answer[1])
            unreported += reporting
            return null
          }
          fleet = Math.max(connection.fleetSize, answer[3])
          return answer
        },
        (error) => {
          unreported += reporting
          throw error
        }
      )
    }
    const refund = (bucket: number) => connection.tell(() => run(never, "refund", bucket))
    const recordSuccess = (attempts: number) =>
      Effect.andThen(
        Effect.sync(() => local.recordSuccess(now(), attempts)),
        connection.decide("budget", (voidAfter) => run(voidAfter, "success").then(answered), Effect.void)
      )
    const tryAcquire = connection.decide<Answer | undefined>(
      "budget",
      (voidAfter) => run(voidAfter, "acquire"),
      Effect.succeed(undefined),
      // Granted after this process stopped waiting and decided alone: give it back.
      (answer) => {
        if (answer !== undefined && answer[0] === 1) Effect.runFork(refund(answer[4]))
      }
    ).pipe(Effect.map((answer) => {
      const at = now()
      if (answer === undefined) {
        const granted = local.tryAcquire(at, 1 / fleet)
        if (granted) unreported++
        return granted
      }
      if (answer[0] === 1) local.recordRetry(at)
      return answer[0] === 1
    }))
    const service: FastPath.With<RetryBudget.Service, FastPath.Budget> = {
      tryAcquire: () => tryAcquire,
      recordSuccess,
      [FastPath.key]: {
        // Whether retries pay is this process's to learn, from its own: no need to hear of each failure otherwise.
        recordFailure: settings.shareWhenRetriesFail < 1
          ? (_: unknown, attempt: number) => Effect.sync(() => local.recordFailure(now(), attempt))
          : undefined
      },
      snapshot: connection.decide(
        "budget",
        (voidAfter) =>
          run(voidAfter, "snapshot").then((answer) =>
            answer === null ? null : {
              successes: answer[1],
              retries: answer[2],
              paid: local.snapshot(now()).paid,
              allowance: Budgets.allowance(settings, answer[1], 1, local.payoff(now()))
            }
          ),
        Effect.sync(() => local.snapshot(now()))
      )
    }
    return service
  })
}
