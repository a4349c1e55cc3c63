/**
 * The concurrency gate of a fleet, on Redis: one limit on in-flight calls per target and API key,
 * whatever the number of processes, with the same health tracking and recovery ramp as
 * `ConcurrencyGate`, computed fleet-wide.
 *
 * A permit is a lease: a member of a sorted set scored by when it expires. A process that dies
 * holding permits loses nothing for the fleet; its leases expire (at the caller's deadline, or
 * after `leaseTime`) and are swept by the next decision. Health (consecutive capacity failures,
 * degraded, recovering since when) is a hash beside it, so when one process sees the provider
 * fail, the whole fleet drops to the ramp's floor, and when it recovers, the whole fleet ramps. An
 * adaptive gate's learned limit is in the same hash: the fleet learns one limit from every
 * process's outcomes, with the in-memory gate's arithmetic.
 * Every decision is one Lua script, timed by the caller's Effect `Clock` (hosts kept in step by NTP
 * agree to far better than a lease). A full gate in `"queue"` mode is waited on by
 * polling, bounded by the deadline; in `"shed"` mode it refuses at once. When Redis cannot answer
 * in time, an in-process gate with the same settings decides (see `RedisConnection`).
 */
import { ConcurrencyGate, Failure, Settings } from "@resilient-ai/policy"
import { Checked, type Coordinations, EffectLine, Either, FastPath, Gates } from "@resilient-ai/policy/internal"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import type { Redis } from "ioredis"
import { RedisConnection } from "../RedisConnection.js"
import { keyFor } from "./keys.js"
import { answered, isVoid, memberTtlMillis, never, register, type Void } from "./script.js"

/**
 * After the shared prologue (`internal/script.ts`): keys[1] the leases (sorted set, score =
 * expiry), keys[2] the health hash. args: operation ("acquire" | "release" | "observe" | "degrade"
 * | "recover" | "snapshot"), lease id, lease time to live (ms), limit, ramp floor
 * (`Gates.rampFloor`), ramp factor, ramp step (ms), failures to degrade, outcome
 * ("success" | "overload" | "neutral"), health time to live (ms), now (epoch ms, the caller's clock),
 * adaptive (1/0), least learned limit, backoff ratio, backoff interval (ms), recovery held (1/0: this process's
health probe finds the provider down, so its successes do not start the ramp).
 * Returns { granted (1/0), limit, in flight, health, fleet size }.
 *
 * The limit, the ramp and `adapt` are `ConcurrencyGate`'s `Limiter` step for step (its
 * `fleetLimit`, `rampLimit`, `backoffLimit` and `adapt`), with the fleet's leases as the attempts in
 * flight: they must agree, and the tests run both side by side.
 */
const script = `
local leases, healthKey = keys[1], keys[2]
local now = tonumber(args[11])
local operation = args[1]
local limit = tonumber(args[4])
local floorLimit = tonumber(args[5])
local factor = tonumber(args[6])
local step = tonumber(args[7])
local degradeAfter = tonumber(args[8])
local healthTtl = tonumber(args[10])
local adaptive = args[12] == '1'
local minLimit = tonumber(args[13])
local backoffRatio = tonumber(args[14])
local backoffInterval = tonumber(args[15])
local recoveryHeld = args[16] == '1'
local health = redis.call('HMGET', healthKey, 'state', 'recoveredAt', 'overloads', 'learned', 'cutAt')
local state = health[1] or 'steady'
local recoveredAt = tonumber(health[2]) or 0
local learned = limit
if adaptive then learned = math.min(limit, tonumber(health[4]) or limit) end
local cutAt = tonumber(health[5])

local function currentLimit()
  if state == 'degraded' then return math.min(learned, floorLimit) end
  if state == 'recovering' then
    local steps = math.floor((now - recoveredAt) / step)
    local current = math.min(learned, floorLimit)
    local taken = 0
    while taken < steps and current < learned do
      current = math.min(learned, math.ceil(current * factor))
      taken = taken + 1
    end
    if current >= learned then
      state = 'steady'
      redis.call('HSET', healthKey, 'state', 'steady')
    end
    return current
  end
  return learned
end

-- inFlight: the leases when the attempt ended, its own included.
local function adapt(outcome, inFlight)
  local current = currentLimit()
  if not adaptive or state == 'degraded' or outcome == 'neutral' then return end
  local settled = cutAt == nil or now - cutAt >= backoffInterval
  if outcome == 'overload' then
    if inFlight * 2 < current or inFlight > current then return end
    if not settled and (tonumber(health[3]) or 0) == 0 then return end
    learned = math.max(minLimit, math.min(learned - 1, math.floor(learned * backoffRatio)))
    redis.call('HSET', healthKey, 'learned', learned, 'cutAt', now, 'fullSuccesses', 0)
  elseif settled and state == 'steady' and inFlight >= current and learned < limit then
    if redis.call('HINCRBY', healthKey, 'fullSuccesses', 1) >= current then
      learned = learned + 1
      redis.call('HSET', healthKey, 'learned', learned, 'fullSuccesses', 0)
    end
  end
end

local function observe(outcome, inFlight)
  adapt(outcome, inFlight)
  if outcome == 'success' then
    redis.call('HSET', healthKey, 'overloads', 0)
    if state == 'degraded' and not recoveryHeld then
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
  if inFlight >= current then return { 0, current, inFlight, state, fleet } end
  local leaseTtl = tonumber(args[3])
  redis.call('ZADD', leases, now + leaseTtl, args[2])
  -- The set lives as long as its longest lease: a short lease must not cut a long one's life.
  local remaining = redis.call('PTTL', leases)
  if remaining < leaseTtl * 2 then redis.call('PEXPIRE', leases, leaseTtl * 2) end
  return { 1, current, inFlight + 1, state, fleet }
elseif operation == 'release' then
  redis.call('ZREM', leases, args[2])
  observe(args[9], redis.call('ZCARD', leases) + 1)
elseif operation == 'observe' then
  observe(args[9], redis.call('ZCARD', leases))
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
return { 0, current, redis.call('ZCARD', leases), state, fleet }
`

type Answer = [granted: number, limit: number, inFlight: number, health: ConcurrencyGate.Health, fleet: number]

interface Scripted extends Redis {
  resilientAiGate(
    members: string,
    leases: string,
    health: string,
    ...args: Array<string | number>
  ): Promise<Answer | Void>
}

/** Settings of a fleet gate: those of `ConcurrencyGate`, the fingerprint of the API key the fleet shares (as `Coordination` makes it), and the leases. */
export interface Options extends Coordinations.ForKey<ConcurrencyGate.Options> {
  /**
   * The longest a lease lives when the caller has no deadline: a permit held by a process that
   * died comes back to the fleet after this. Default 2 minutes.
   */
  readonly leaseTime?: EffectLine.DurationInput | undefined
  /** How often a caller waiting for a permit in `"queue"` mode asks again (with jitter). Default 100 ms. */
  readonly pollInterval?: EffectLine.DurationInput | undefined
}

/** A permit this process holds: a lease on Redis, or one taken from the in-process gate while Redis could not decide. */
type Permit = { readonly _tag: "lease"; readonly lease: string; readonly expiresAt: number } | {
  readonly _tag: "in-process"
}

// How long a target's health is kept after the last outcome anyone reported.
const healthTtl = 24 * 60 * 60 * 1000

let leases = 0

/**
 * A gate on the fleet's Redis. When Redis cannot decide in time, this process decides with an
 * in-process gate of the same settings holding its share of the limit (the limit divided by the
 * fleet's size, learned from Redis or the connection's `fleetSize`, at least one permit).
 * A lease Redis grants to an acquire the caller stopped waiting for is given back at once, and a
 * release Redis could not take is sent again when it is back, so after a stall the leases on Redis
 * are the permits callers hold. Bad settings fail with `InvalidSettings` naming them.
 */
export const make = (
  options: Options
): Effect.Effect<ConcurrencyGate.Service, Settings.InvalidSettings, RedisConnection> =>
  Effect.flatMap(
    Effect.suspend(() =>
      Effect.all([Either.toEffect(Gates.settings(options)), Either.toEffect(decodeLeases(options))])
    ),
    ([settings, leases]) =>
      makeChecked(options, settings, Duration.toMillis(leases.leaseTime), Duration.toMillis(leases.pollInterval))
  )

/** The rules of the lease settings a fleet gate adds to a gate's, defaults included. */
export const LeaseSettings = Checked.struct({
  leaseTime: Checked.withDefault(Checked.positiveDuration, Duration.minutes(2)),
  pollInterval: Checked.withDefault(Checked.positiveDuration, Duration.millis(100))
})

const decodeLeases = Checked.decoder(LeaseSettings, (input) => {
  const target = (input as { readonly target?: unknown } | undefined)?.target
  return `redis gate for ${String(target)}`
})

const makeChecked = (
  options: Options,
  settings: Gates.Settings,
  leaseMillis: number,
  pollMillis: number
): Effect.Effect<ConcurrencyGate.Service, never, RedisConnection> => {
  // Redis numbers are finite: an unbounded gate is one whose limit no fleet reaches.
  const finiteLimit = Number.isFinite(settings.limit) ? settings.limit : Number.MAX_SAFE_INTEGER
  const rampFloor = Gates.rampFloor({ ...settings, limit: finiteLimit })
  return Effect.gen(function*() {
    const connection = yield* RedisConnection
    let fleet = connection.fleetSize
    const fallback = yield* Effect.orDie(Gates.makeShared(options, () => 1 / fleet))
    const clock = yield* EffectLine.currentClock
    const now = () => EffectLine.nowMillis(clock)
    const client = connection.client as Scripted
    let recoveryHeld = false
    register(client, "resilientAiGate", 2, script)
    const members = keyFor(connection.keyPrefix, "members", settings.target, options.keyFingerprint)
    const leaseKey = keyFor(connection.keyPrefix, "gate", settings.target, options.keyFingerprint, "leases")
    const healthKey = keyFor(connection.keyPrefix, "gate", settings.target, options.keyFingerprint, "health")
    const call = (
      voidAfter: number,
      operation: "acquire" | "release" | "observe" | "degrade" | "recover" | "snapshot",
      lease: string,
      ttl: number,
      outcome: ConcurrencyGate.Outcome
    ) =>
      client.resilientAiGate(
        members,
        leaseKey,
        healthKey,
        voidAfter,
        connection.member,
        memberTtlMillis,
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
        now(),
        settings.adaptive ? 1 : 0,
        settings.minLimit,
        settings.backoffRatio,
        settings.backoffIntervalMillis,
        recoveryHeld ? 1 : 0
      ).then((answer) => {
        fleet = Math.max(connection.fleetSize, isVoid(answer) ? answer[1] : answer[4])
        return isVoid(answer) ? null : answer
      })
    /** Tells Redis whatever it takes: a release is wanted however late it arrives. */
    const giveBack = (lease: string, outcome: ConcurrencyGate.Outcome) =>
      connection.tell(() => call(never, "release", lease, 0, outcome))

    // The permits each fiber holds: a fiber gives back one it took. Among several (its own, or
    // anyone's when the release comes from a fiber that took none, as a stream's finalizer may),
    // the one that matters least goes: from the in-process gate first, then the lease that ends
    // soonest, so the callers still running keep the longest leases.
    const heldBy = new Map<number, Array<Permit>>()
    const hold = (fiber: number, permit: Permit): Permit => {
      const permits = heldBy.get(fiber)
      if (permits === undefined) heldBy.set(fiber, [permit])
      else permits.push(permit)
      return permit
    }
    const leastNeeded = (a: Permit, b: Permit) =>
      a._tag === "in-process" || (b._tag === "lease" && a.expiresAt < b.expiresAt)
    const take = (fiber: number): Permit | undefined => {
      const own = heldBy.get(fiber)
      let chosen: { readonly holder: number; readonly index: number } | undefined
      for (const [holder, permits] of own === undefined ? heldBy : [[fiber, own] as const]) {
        for (let index = 0; index < permits.length; index++) {
          if (chosen === undefined || leastNeeded(permits[index]!, heldBy.get(chosen.holder)![chosen.index]!)) {
            chosen = { holder, index }
          }
        }
      }
      if (chosen === undefined) return undefined
      const permits = heldBy.get(chosen.holder)!
      const [permit] = permits.splice(chosen.index, 1)
      if (permits.length === 0) heldBy.delete(chosen.holder)
      return permit
    }
    /** Gives back `permit`, which `fiber` took and its caller never had: its outcome is neutral. */
    const giveUp = (fiber: number, permit: Permit): Effect.Effect<void> =>
      Effect.suspend(() => {
        const permits = heldBy.get(fiber)
        const index = permits === undefined ? -1 : permits.indexOf(permit)
        if (permits === undefined || index < 0) return Effect.void
        permits.splice(index, 1)
        if (permits.length === 0) heldBy.delete(fiber)
        return permit._tag === "lease" ? giveBack(permit.lease, "neutral") : fallback.release("neutral")
      })

    // Callers of this process polling for a permit; bounded by `maxWaiting`.
    let waiting = 0

    // Asks Redis once for a lease: the lease granted (held by `fiber` from now on), the answer that
    // refused it, or undefined when this process must decide alone. The caller keeps this
    // uninterruptible (it is bounded by the command timeout), so a permit Redis granted is always
    // recorded and released by someone.
    const ask = (fiber: number, deadline: number): Effect.Effect<Permit | Answer | undefined> => {
      const lease = `${connection.member}:${++leases}`
      const askedAt = now()
      // A lease outlives the caller's deadline by a little, and never the lease time.
      const ttl = Math.max(1_000, Math.min(leaseMillis, deadline - askedAt + 1_000))
      return Effect.flatMap(
        connection.decide<Answer | undefined>(
          "gate",
          (voidAfter) => call(voidAfter, "acquire", lease, ttl, "neutral"),
          Effect.succeed(undefined),
          // Granted after the caller stopped waiting: nobody holds it.
          (answer) => {
            if (answer !== undefined && answer[0] === 1) Effect.runFork(giveBack(lease, "neutral"))
          }
        ),
        (answer) => {
          if (answer === undefined) {
            // Decided in process: the script may still have run, its answer lost (a node that went
            // down after running it, a void retry of it answering instead): give its lease back
            // however late, a no-op when it took none, without the caller waiting for it.
            return Effect.sync((): undefined => void Effect.runFork(giveBack(lease, "neutral")))
          }
          return Effect.succeed(
            answer[0] === 1 ? hold(fiber, { _tag: "lease", lease, expiresAt: askedAt + ttl }) : answer
          )
        }
      )
    }

    const shed = (limit: number, inFlight: number) => new Failure.Shed({ target: settings.target, limit, inFlight })

    const acquire = (deadline: number): Effect.Effect<void, Failure.Shed | Failure.DeadlineExceeded> =>
      EffectLine.withFiber((current) =>
        Effect.uninterruptibleMask((restore) => {
          const fiber = EffectLine.fiberIdOf(current)
          let isWaiting = false
          const loop: Effect.Effect<Permit, Failure.Shed | Failure.DeadlineExceeded> = Effect.flatMap(
            Effect.suspend(() => ask(fiber, deadline)),
            (asked) => {
              if (asked === undefined) {
                return Effect.map(restore(fallback.acquire(deadline)), () => hold(fiber, { _tag: "in-process" }))
              }
              if (!Array.isArray(asked)) return Effect.succeed(asked)
              const [, limit, inFlight] = asked
              if (settings.mode === "shed") return Effect.fail(shed(limit, inFlight))
              const at = now()
              if (at >= deadline) return Effect.fail(new Failure.DeadlineExceeded({ deadline, phase: "queue" }))
              if (!isWaiting) {
                if (waiting >= settings.maxWaiting) return Effect.fail(shed(limit, inFlight))
                isWaiting = true
                waiting++
              }
              // Another process's release cannot wake this one: ask again shortly, with jitter so a
              // fleet of waiters does not ask in step.
              const pause = Effect.flatMap(
                Random.next,
                (draw) => Effect.sleep(Duration.millis(Math.ceil(Math.min(pollMillis * (0.5 + draw), deadline - at))))
              )
              return Effect.andThen(restore(pause), loop)
            }
          )
          // The permit is handed over on an interruption point of the caller's, the wait's last
          // step: an interruption that came while Redis or the in-process gate granted it gives it
          // back, rather than leave a permit (on Redis, a lease until it expires) that nobody holds.
          const handOver = (permit: Permit) =>
            Effect.onInterrupt(restore(EffectLine.thenInterruptible(Effect.void)), () => giveUp(fiber, permit))
          return Effect.ensuring(
            Effect.flatMap(loop, handOver),
            Effect.sync(() => {
              if (isWaiting) waiting--
            })
          )
        })
      )

    /** Asks Redis to do `operation`, or the in-process gate when it cannot. */
    const decide = (
      operation: "observe" | "degrade" | "recover",
      outcome: ConcurrencyGate.Outcome,
      alone: Effect.Effect<void>
    ) => connection.decide("gate", (voidAfter) => call(voidAfter, operation, "", 0, outcome).then(answered), alone)

    const service: FastPath.With<ConcurrencyGate.Service, FastPath.Gate> = {
      acquire,
      release: (outcome) =>
        EffectLine.withFiber((current) => {
          const permit = take(EffectLine.fiberIdOf(current))
          if (permit === undefined) return Effect.void
          return permit._tag === "lease" ? giveBack(permit.lease, outcome) : fallback.release(outcome)
        }),
      observe: (outcome) => decide("observe", outcome, fallback.observe(outcome)),
      markDegraded: decide("degrade", "neutral", fallback.markDegraded),
      markRecovered: decide("recover", "neutral", fallback.markRecovered),
      snapshot: connection.decide(
        "gate",
        (voidAfter) =>
          call(voidAfter, "snapshot", "", 0, "neutral").then((answer) =>
            answer === null ? null : {
              limit: answer[1] >= Number.MAX_SAFE_INTEGER ? Number.POSITIVE_INFINITY : answer[1],
              inFlight: answer[2],
              waiting,
              health: answer[3]
            }
          ),
        fallback.snapshot
      ),
      [FastPath.key]: {
        holdRecovery: (held) =>
          Effect.andThen(
            Effect.sync(() => {
              recoveryHeld = held
            }),
            FastPath.gate(fallback)?.holdRecovery?.(held) ?? Effect.void
          )
      }
    }
    return service
  })
}
