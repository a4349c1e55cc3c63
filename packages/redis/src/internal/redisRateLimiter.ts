/**
 * The rate limiter of a fleet, on Redis: one pace of requests and tokens per minute per target and
 * API key, whatever the number of processes, so a fleet sharing a key stays under the provider's
 * limits for it as one process does under `RateLimiter`.
 *
 * The pace is `RateLimiter`'s GCRA: the two theoretical arrival times (requests, tokens) in one
 * Redis hash per target and API key, moved by one Lua script per decision with `Pacer.decide`'s
 * arithmetic. Time is the caller's Effect `Clock` (so `TestClock` drives it); hosts kept in step by
 * NTP agree to far better than a request's turn. Settling and giving back are commands that take
 * effect however late they arrive. The limits in force are each process's own (its settings,
 * lowered by the provider's headers it has read), passed with every decision: each process learns
 * them from its first answer, and a process that knows no limit paces nothing and never asks
 * Redis. When Redis cannot answer in time, this process paces alone within its share (see `make`).
 */
import { type Failure, RateLimiter, type Settings } from "@resilient-ai/policy"
import { type Coordinations, EffectLine, Either, FastPath, Limiters } from "@resilient-ai/policy/internal"
import * as Effect from "effect/Effect"
import type { Redis } from "ioredis"
import { RedisConnection } from "../RedisConnection.js"
import { keyFor } from "./keys.js"
import { isVoid, memberTtlMillis, never, register, type Void } from "./script.js"

/**
 * After the shared prologue (`internal/script.ts`): keys[1] the pace's hash, whose fields
 * `requests` and `tokens` are the theoretical arrival times (epoch ms on the callers' clocks;
 * absent: long past). args: operation ("decide" | "adjust" | "snapshot"), now (the caller's clock),
 * requests and tokens per minute in force (0: no limit), burst (ms), the lane's tolerance (ms),
 * lane, tokens (for "adjust": the tokens to add, negative to give back), deadline, requests to add
 * (for "adjust": -1 gives one back), then pairs of (instant, tokens): places the caller took alone
 * while Redis could not answer, taken into the pace first, each as a reservation at its instant.
 * Returns { decision ("reserved" | "wait" | "refused" | "done"), at, dimension, requests' wait,
 * tokens' wait, fleet size }, the numbers as strings so that Redis cuts no fraction off.
 *
 * "decide" is `Limiters.Pacer.decide` step for step, "adjust" its `adjustTokens` and
 * `giveBackRequest`, the waits its `snapshot`: they must agree, and the tests run both side by side.
 */
const script = `
local key = keys[1]
local operation = args[1]
local now = tonumber(args[2])
local requestsPerMinute = tonumber(args[3])
local tokensPerMinute = tonumber(args[4])
local burst = tonumber(args[5])
local requestCost = 0
if requestsPerMinute > 0 then requestCost = 60000 / requestsPerMinute end
local tokenCost = 0
if tokensPerMinute > 0 then tokenCost = 60000 / tokensPerMinute end
local state = redis.call('HMGET', key, 'requests', 'tokens')
local requestsAt = tonumber(state[1]) or -math.huge
local tokensAt = tonumber(state[2]) or -math.huge
local function exact(number) return string.format('%.17g', number) end
local function answer(decision, at, dimension)
  return { decision, exact(at), dimension, exact(math.max(0, requestsAt - burst - now)),
    exact(math.max(0, tokensAt - burst - now)), fleet }
end
-- The hash lives until its later arrival time is a burst past, and a minute more for the clocks of
-- other hosts: by then its absence paces exactly as it would. (A day at most: PEXPIRE takes no
-- number Lua would print with an exponent.)
local function store()
  local latest = -math.huge
  if requestsAt > -math.huge then
    redis.call('HSET', key, 'requests', exact(requestsAt))
    latest = requestsAt
  end
  if tokensAt > -math.huge then
    redis.call('HSET', key, 'tokens', exact(tokensAt))
    latest = math.max(latest, tokensAt)
  end
  if latest > -math.huge then
    redis.call('PEXPIRE', key, math.min(86400000, math.max(0, math.ceil(latest - now + burst)) + 60000))
  end
end

if #args > 10 then
  for i = 11, #args, 2 do
    local at = tonumber(args[i])
    if requestCost > 0 then requestsAt = math.max(requestsAt, at) + requestCost end
    if tokenCost > 0 then tokensAt = math.max(tokensAt, at) + tonumber(args[i + 1]) * tokenCost end
  end
  store()
end
if operation == 'adjust' then
  if requestCost > 0 then requestsAt = requestsAt + tonumber(args[10]) * requestCost end
  if tokenCost > 0 then tokensAt = tokensAt + tonumber(args[8]) * tokenCost end
  store()
end
if operation ~= 'decide' then return answer('done', now, 'requests') end

local tolerance = tonumber(args[6])
local tokens = tonumber(args[8])
local requestsFrom = -math.huge
if requestCost > 0 then requestsFrom = requestsAt + math.min(requestCost, tolerance) - tolerance end
local tokensFrom = -math.huge
if tokenCost > 0 and tokens > 0 then tokensFrom = tokensAt + math.min(tokens * tokenCost, tolerance) - tolerance end
local at = math.max(now, requestsFrom, tokensFrom)
if at > tonumber(args[9]) then
  local dimension = 'tokens'
  if requestsFrom >= tokensFrom then dimension = 'requests' end
  return answer('refused', at, dimension)
end
-- A batch call does not hold a place in the future: an interactive call may take it first.
if at > now and args[7] == 'batch' then return answer('wait', at, 'requests') end
if requestCost > 0 then requestsAt = math.max(requestsAt, at) + requestCost end
if tokenCost > 0 then tokensAt = math.max(tokensAt, at) + tokens * tokenCost end
store()
return answer('reserved', at, 'requests')
`

type Answer = [
  decision: "reserved" | "wait" | "refused" | "done",
  at: string,
  dimension: "requests" | "tokens",
  requestsWait: string,
  tokensWait: string,
  fleet: number
]

interface Scripted extends Redis {
  resilientAiLimiter(members: string, key: string, ...args: Array<string | number>): Promise<Answer | Void>
}

/** Settings of a fleet rate limiter: those of `RateLimiter`, and the fingerprint of the API key the fleet shares (as `Coordination` makes it). */
export interface Options extends Coordinations.ForKey<RateLimiter.Options> {}

// The places taken alone that the next command reports, at most: a process alone for long paced
// itself, and only its latest places can still hold the fleet's pace back.
const maxUnreported = 64

/** Redis numbers are finite: no limit is 0, no deadline the largest number. */
const finite = (limit: number, none: number) => Number.isFinite(limit) ? limit : none

/**
 * A rate limiter on the fleet's Redis. When Redis cannot decide in time, this process paces alone
 * with an in-process `RateLimiter` holding its share of the limits (divided by the fleet's size,
 * learned from Redis or the connection's `fleetSize`); a place taken there is settled there, and
 * is added to the fleet's pace (at its instant) by the next command Redis takes. A place Redis
 * granted to a decision the caller stopped waiting for is given back, and settling and giving back
 * are sent again when Redis is back. A target with no limit known paces nothing, at once, without
 * asking Redis: `admitNow` answers `Limiters.free`, and only then. Bad settings fail with
 * `InvalidSettings` naming them.
 */
export const make = (
  options: Options
): Effect.Effect<RateLimiter.Service, Settings.InvalidSettings, RedisConnection> =>
  Effect.flatMap(
    Effect.suspend(() => Either.toEffect(Limiters.settings(options))),
    (settings) => makeChecked(options, settings)
  )

const makeChecked = (
  options: Options,
  settings: Limiters.Settings
): Effect.Effect<RateLimiter.Service, never, RedisConnection> =>
  Effect.gen(function*() {
    const connection = yield* RedisConnection
    const clock = yield* EffectLine.currentClock
    const now = () => EffectLine.nowMillis(clock)
    let fleet = connection.fleetSize
    const fallback = yield* Effect.orDie(Limiters.makeShared(options, () => 1 / fleet))
    // The limits in force (the settings', lowered by the provider's): a pacer's, whose pace is unused.
    const limits = new Limiters.Pacer(settings)
    const client = connection.client as Scripted
    register(client, "resilientAiLimiter", 1, script)
    const members = keyFor(connection.keyPrefix, "members", settings.target, options.keyFingerprint)
    const key = keyFor(connection.keyPrefix, "limiter", settings.target, options.keyFingerprint)
    const tolerance = (lane: RateLimiter.Lane) =>
      lane === "interactive" ? settings.burstMillis : settings.burstMillis * (1 - settings.interactiveReserve)

    // Places this process took alone that Redis has not counted: (instant, tokens) pairs, oldest first.
    let unreported: Array<number> = []
    const keep = (older: ReadonlyArray<number>, newer: ReadonlyArray<number>) => {
      unreported = [...older, ...newer].slice(-2 * maxUnreported)
    }

    const call = (
      voidAfter: number,
      operation: "decide" | "adjust" | "snapshot",
      demand: RateLimiter.Demand,
      requests = 0
    ) => {
      const { requestsPerMinute, tokensPerMinute } = limits.limits()
      const reporting = unreported
      unreported = []
      return client.resilientAiLimiter(
        members,
        key,
        voidAfter,
        connection.member,
        memberTtlMillis,
        operation,
        now(),
        finite(requestsPerMinute, 0),
        finite(tokensPerMinute, 0),
        settings.burstMillis,
        tolerance(demand.lane),
        demand.lane,
        demand.tokens,
        finite(demand.deadline, never),
        requests,
        ...reporting
      ).then(
        (answer) => {
          fleet = Math.max(connection.fleetSize, isVoid(answer) ? answer[1] : answer[5])
          if (!isVoid(answer)) return answer
          keep(reporting, unreported)
          return null
        },
        (error) => {
          keep(reporting, unreported)
          throw error
        }
      )
    }

    /** Moves the fleet's pace by `requests` and `tokens` (negative: given back), however late it arrives. */
    const adjust = (requests: number, tokens: number) =>
      connection.tell(() => call(never, "adjust", { tokens, lane: "interactive", deadline: 0 }, requests))
    const onRedis = (tokens: number): RateLimiter.Reservation => {
      // Given back once, however many of the waits that hold it an interruption ends.
      let givenBack = false
      return {
        tokens,
        settle: (used) => used === tokens ? Effect.void : adjust(0, used - tokens),
        giveBack: Effect.suspend(() => {
          if (givenBack) return Effect.void
          givenBack = true
          return adjust(-1, -tokens)
        })
      }
    }

    /** Redis's decision for `demand`, or `undefined` when this process must decide alone. */
    const ask = (demand: RateLimiter.Demand) =>
      connection.decide<Limiters.Decision | undefined>(
        "limiter",
        (voidAfter) =>
          call(voidAfter, "decide", demand).then((answer): Limiters.Decision | null => {
            if (answer === null) return null
            const at = Number(answer[1])
            return answer[0] === "refused" ? { _tag: "refused", at, dimension: answer[2] } : {
              _tag: answer[0] === "wait" ? "wait" : "reserved",
              at
            }
          }),
        Effect.succeed(undefined),
        // Reserved after the caller stopped waiting and decided alone: nobody holds the place.
        (decision) => {
          if (decision?._tag === "reserved") Effect.runFork(onRedis(demand.tokens).giveBack)
        }
      )

    // When a batch call that must wait was last told its turn: what its deadline's refusal names.
    let batchTurn = Number.NEGATIVE_INFINITY

    /**
     * Decides `demand` on Redis (or alone). Asking is bounded by the command timeout and not
     * interrupted, so a place Redis granted is always someone's to give back; only the wait for
     * its turn is. The place is handed over on an interruption point of the caller's, the wait's
     * last step: an interruption that came while Redis granted it, or as its turn did, gives it back.
     */
    const decideNow = (demand: RateLimiter.Demand) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(
          ask(demand),
          (decision): Effect.Effect<RateLimiter.Reservation | "wait", Failure.RateLimitedLocally> => {
            if (decision === undefined) {
              return Effect.tap(
                restore(fallback.admit(demand)),
                () => Effect.sync(() => keep(unreported, [now(), demand.tokens]))
              )
            }
            if (decision._tag !== "reserved") {
              if (decision._tag === "wait") batchTurn = decision.at
              return restore(Limiters.takeTurn(settings.target, decision, now(), () => onRedis(demand.tokens)))
            }
            const place = onRedis(demand.tokens)
            return Effect.onInterrupt(
              restore(EffectLine.thenInterruptible(Limiters.takeTurn(settings.target, decision, now(), () => place))),
              () => place.giveBack
            )
          }
        )
      )
    const admit = Limiters.admitting(settings.target, now, decideNow, () => Math.max(now(), batchTurn))

    const service: FastPath.With<RateLimiter.Service, FastPath.Limiter> = {
      admit: (demand) => Effect.suspend(() => limits.pacing ? admit(demand) : Effect.succeed(Limiters.free)),
      // Only the answer that needs no Redis: a key with no limit known.
      [FastPath.key]: { admitNow: () => limits.pacing ? undefined : Limiters.free },
      learn: (learned) => Effect.andThen(Effect.sync(() => limits.learn(learned)), fallback.learn(learned)),
      snapshot: Effect.suspend(() => {
        if (!limits.pacing) return fallback.snapshot
        return connection.decide(
          "limiter",
          (voidAfter) =>
            call(voidAfter, "snapshot", { tokens: 0, lane: "interactive", deadline: 0 }).then((answer) =>
              answer === null ? null : {
                ...limits.limits(),
                requestsWaitMillis: Number(answer[3]),
                tokensWaitMillis: Number(answer[4])
              }
            ),
          fallback.snapshot
        )
      })
    }
    return service
  })
