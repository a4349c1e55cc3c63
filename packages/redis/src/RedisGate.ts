/**
 * The concurrency gate of a fleet, on Redis: one limit on in-flight calls per target and API key,
 * whatever the number of processes, with the same health tracking and recovery ramp as
 * `ConcurrencyGate`, computed fleet-wide.
 *
 * A permit is a lease: a member of a sorted set scored by when it expires. A process that dies
 * holding permits loses nothing for the fleet; its leases expire (at the caller's deadline, or
 * after `leaseTime`) and are swept by the next decision. Health (consecutive capacity failures,
 * degraded, recovering since when) is a hash beside it, so when one process sees the provider
 * fail, the whole fleet drops to the ramp's floor, and when it recovers, the whole fleet ramps.
 * Every decision is one Lua script, timed by the caller's Effect `Clock` (hosts kept in step by NTP
 * agree to far better than a lease). A full gate in `"queue"` mode is waited on by
 * polling, bounded by the deadline; in `"shed"` mode it refuses at once. When Redis cannot answer
 * in time, an in-process gate with the same settings decides (see `RedisConnection`).
 */
import { ConcurrencyGate, type Coordination, Failure } from "@resilient-ai/policy"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import type { Redis } from "ioredis"
import { hostname } from "node:os"
import { keyFor } from "./internal/keys.js"
import { RedisConnection } from "./RedisConnection.js"

/**
 * KEYS[1]: the leases (sorted set, score = expiry), KEYS[2]: the health hash. ARGV: operation
 * ("acquire" | "release" | "observe" | "degrade" | "recover" | "snapshot"), lease id, lease time
 * to live (ms), limit, ramp floor (`ConcurrencyGate.rampFloor`), ramp factor, ramp step (ms),
 * failures to degrade, outcome ("success" | "overload" | "neutral"), health time to live (ms), now
 * (epoch ms).
 * Returns { granted (1/0), limit, in flight, health }.
 */
const script = `
local now = tonumber(ARGV[11])
local leases, healthKey = KEYS[1], KEYS[2]
local operation = ARGV[1]
local limit = tonumber(ARGV[4])
local floorLimit = tonumber(ARGV[5])
local factor = tonumber(ARGV[6])
local step = tonumber(ARGV[7])
local degradeAfter = tonumber(ARGV[8])
local healthTtl = tonumber(ARGV[10])
local health = redis.call('HMGET', healthKey, 'state', 'recoveredAt')
local state = health[1] or 'steady'
local recoveredAt = tonumber(health[2]) or 0

local function currentLimit()
  if state == 'degraded' then return floorLimit end
  if state == 'recovering' then
    local steps = math.floor((now - recoveredAt) / step)
    local current = floorLimit
    local taken = 0
    while taken < steps and current < limit do
      current = math.min(limit, math.ceil(current * factor))
      taken = taken + 1
    end
    if current >= limit then
      state = 'steady'
      redis.call('HSET', healthKey, 'state', 'steady')
    end
    return current
  end
  return limit
end

local function observe(outcome)
  if outcome == 'success' then
    redis.call('HSET', healthKey, 'overloads', 0)
    if state == 'degraded' then
      state = 'recovering'
      redis.call('HSET', healthKey, 'state', 'recovering', 'recoveredAt', now)
    end
  elseif outcome == 'overload' then
    local overloads = redis.call('HINCRBY', healthKey, 'overloads', 1)
    currentLimit()
    if overloads >= degradeAfter and state ~= 'degraded' then
      state = 'degraded'
      redis.call('HSET', healthKey, 'state', 'degraded', 'overloads', 0)
    end
  end
  redis.call('PEXPIRE', healthKey, healthTtl)
end

redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
if operation == 'acquire' then
  local current = currentLimit()
  local inFlight = redis.call('ZCARD', leases)
  if inFlight >= current then return { 0, current, inFlight, state } end
  local ttl = tonumber(ARGV[3])
  redis.call('ZADD', leases, now + ttl, ARGV[2])
  -- The set lives as long as its longest lease: a short lease must not cut a long one's life.
  local remaining = redis.call('PTTL', leases)
  if remaining < ttl * 2 then redis.call('PEXPIRE', leases, ttl * 2) end
  return { 1, current, inFlight + 1, state }
elseif operation == 'release' then
  redis.call('ZREM', leases, ARGV[2])
  observe(ARGV[9])
elseif operation == 'observe' then
  observe(ARGV[9])
elseif operation == 'degrade' then
  state = 'degraded'
  redis.call('HSET', healthKey, 'state', 'degraded', 'overloads', 0)
  redis.call('PEXPIRE', healthKey, healthTtl)
elseif operation == 'recover' then
  if state == 'degraded' then
    state = 'recovering'
    redis.call('HSET', healthKey, 'state', 'recovering', 'recoveredAt', now)
    redis.call('PEXPIRE', healthKey, healthTtl)
  end
end
local current = currentLimit()
return { 0, current, redis.call('ZCARD', leases), state }
`

type Answer = [granted: number, limit: number, inFlight: number, health: ConcurrencyGate.Health]

interface Scripted extends Redis {
  resilientAiGate(leases: string, health: string, ...args: Array<string | number>): Promise<Answer>
}

/** Settings of a fleet gate: those of `ConcurrencyGate`, the API key the fleet shares (only its fingerprint is used), and the leases. */
export interface Options extends Coordination.GateOptions {
  /**
   * The longest a lease lives when the caller has no deadline: a permit held by a process that
   * died comes back to the fleet after this. Default 2 minutes.
   */
  readonly leaseTime?: Duration.DurationInput | undefined
  /** How often a caller waiting for a permit in `"queue"` mode asks again (with jitter). Default 100 ms. */
  readonly pollInterval?: Duration.DurationInput | undefined
}

/** Removes and returns the lease that expires first. */
const takeSoonest = (held: Array<{ readonly lease: string; readonly expiresAt: number }>): string | undefined => {
  if (held.length === 0) return undefined
  let soonest = 0
  for (let index = 1; index < held.length; index++) {
    if (held[index]!.expiresAt < held[soonest]!.expiresAt) soonest = index
  }
  return held.splice(soonest, 1)[0]!.lease
}

// How long a target's health is kept after the last outcome anyone reported.
const healthTtl = 24 * 60 * 60 * 1000

let leases = 0
const processId = `${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`

/**
 * A gate on the fleet's Redis, falling back to an in-process one with the same settings.
 * Bad settings throw a `RangeError` naming them.
 */
export const make = (
  options: Options
): Effect.Effect<ConcurrencyGate.Service, never, RedisConnection> => {
  const settings = ConcurrencyGate.settings(options)
  const leaseMillis = Duration.toMillis(options.leaseTime ?? Duration.minutes(2))
  const pollMillis = Duration.toMillis(options.pollInterval ?? Duration.millis(100))
  if (!(leaseMillis > 0) || !(pollMillis > 0)) {
    throw new RangeError(`redis gate for ${settings.target}: leaseTime and pollInterval must be positive`)
  }
  // Redis numbers are finite: an unbounded gate is one whose limit no fleet reaches.
  const finiteLimit = Number.isFinite(settings.limit) ? settings.limit : Number.MAX_SAFE_INTEGER
  const rampFloor = ConcurrencyGate.rampFloor({ ...settings, limit: finiteLimit })
  return Effect.gen(function*() {
    const connection = yield* RedisConnection
    const fallback = yield* ConcurrencyGate.make(options)
    const clock = yield* Effect.clock
    const client = connection.client as Scripted
    if (typeof client.resilientAiGate !== "function") {
      client.defineCommand("resilientAiGate", { numberOfKeys: 2, lua: script })
    }
    const leaseKey = keyFor(connection.keyPrefix, "gate", settings.target, options.apiKey, "leases")
    const healthKey = keyFor(connection.keyPrefix, "gate", settings.target, options.apiKey, "health")
    const call = (
      operation: "acquire" | "release" | "observe" | "degrade" | "recover" | "snapshot",
      lease: string,
      ttl: number,
      outcome: ConcurrencyGate.Outcome
    ) =>
      client.resilientAiGate(
        leaseKey,
        healthKey,
        operation,
        lease,
        ttl,
        finiteLimit,
        rampFloor,
        settings.rampFactor,
        settings.rampStepMillis,
        settings.degradeAfter,
        outcome,
        healthTtl,
        clock.unsafeCurrentTimeMillis()
      )
    // Leases this process holds on Redis, and permits it took from the fallback gate meanwhile.
    const held: Array<{ readonly lease: string; readonly expiresAt: number }> = []
    let heldInProcess = 0
    // Callers of this process polling for a permit; bounded by `maxWaiting`.
    let waiting = 0

    type Attempt = { readonly _tag: "redis"; readonly answer: Answer } | { readonly _tag: "fallback" }
    // Asks Redis once. The caller keeps this uninterruptible (it is bounded by the command
    // timeout), so a permit Redis granted is always recorded and released by someone.
    const attempt = (deadline: number): Effect.Effect<Attempt> => {
      const lease = `${processId}:${++leases}`
      const now = clock.unsafeCurrentTimeMillis()
      // A lease outlives the caller's deadline by a little, and never the lease time.
      const ttl = Math.max(1_000, Math.min(leaseMillis, deadline - now + 1_000))
      return Effect.tap(
        connection.decide<Attempt>(
          "gate",
          () => call("acquire", lease, ttl, "neutral").then((answer) => ({ _tag: "redis", answer })),
          Effect.succeed({ _tag: "fallback" })
        ),
        (result) => {
          if (result._tag === "redis" && result.answer[0] === 1) held.push({ lease, expiresAt: now + ttl })
        }
      )
    }

    const shed = (limit: number, inFlight: number) => new Failure.Shed({ target: settings.target, limit, inFlight })

    const acquire = (deadline: number): Effect.Effect<void, Failure.Shed | Failure.DeadlineExceeded> =>
      Effect.uninterruptibleMask((restore) => {
        let isWaiting = false
        const loop: Effect.Effect<void, Failure.Shed | Failure.DeadlineExceeded> = Effect.flatMap(
          Effect.suspend(() => attempt(deadline)),
          (result) => {
            if (result._tag === "fallback") {
              return Effect.map(restore(fallback.acquire(deadline)), () => {
                heldInProcess++
              })
            }
            const [granted, limit, inFlight] = result.answer
            if (granted === 1) return Effect.void
            if (settings.mode === "shed") return Effect.fail(shed(limit, inFlight))
            const now = clock.unsafeCurrentTimeMillis()
            if (now >= deadline) return Effect.fail(new Failure.DeadlineExceeded({ deadline, phase: "queue" }))
            if (!isWaiting) {
              if (waiting >= settings.maxWaiting) return Effect.fail(shed(limit, inFlight))
              isWaiting = true
              waiting++
            }
            // Another process's release cannot wake this one: ask again shortly, with jitter so a
            // fleet of waiters does not ask in step.
            const pause = Effect.flatMap(
              Random.nextRange(0.5, 1.5),
              (jitter) => Effect.sleep(Duration.millis(Math.ceil(Math.min(pollMillis * jitter, deadline - now))))
            )
            return Effect.zipRight(restore(pause), loop)
          }
        )
        return Effect.ensuring(
          loop,
          Effect.sync(() => {
            if (isWaiting) waiting--
          })
        )
      })

    const observe = (outcome: ConcurrencyGate.Outcome) =>
      connection.decide("gate", () => call("observe", "", 0, outcome).then(() => undefined), fallback.observe(outcome))

    const service: ConcurrencyGate.Service = {
      acquire,
      release: (outcome) =>
        Effect.suspend(() => {
          // `release` does not say whose permit it returns, so the lease that ends soonest goes:
          // the callers still running then hold the longest leases, each at least as long as its own.
          const lease = takeSoonest(held)
          if (lease !== undefined) {
            // If Redis cannot be told, the lease expires on its own.
            return connection.decide(
              "gate",
              () => call("release", lease, 0, outcome).then(() => undefined),
              fallback.observe(outcome)
            )
          }
          if (heldInProcess > 0) {
            heldInProcess--
            return fallback.release(outcome)
          }
          return Effect.void
        }),
      observe,
      markDegraded: connection.decide(
        "gate",
        () => call("degrade", "", 0, "neutral").then(() => undefined),
        fallback.markDegraded
      ),
      markRecovered: connection.decide(
        "gate",
        () => call("recover", "", 0, "neutral").then(() => undefined),
        fallback.markRecovered
      ),
      snapshot: connection.decide(
        "gate",
        () =>
          call("snapshot", "", 0, "neutral").then(([, limit, inFlight, health]) => ({
            limit: limit >= Number.MAX_SAFE_INTEGER ? Number.POSITIVE_INFINITY : limit,
            inFlight,
            waiting,
            health
          })),
        fallback.snapshot
      )
    }
    return service
  })
}

/** Provides `ConcurrencyGate` on the fleet's Redis. */
export const layer = (options: Options): Layer.Layer<ConcurrencyGate.ConcurrencyGate, never, RedisConnection> =>
  Layer.effect(ConcurrencyGate.ConcurrencyGate, make(options))
