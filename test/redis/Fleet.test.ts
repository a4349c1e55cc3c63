/**
 * Fleets of OS processes on one Redis, each file's tests one after another: the budget shared by
 * every member, and the key's rate limits (both with a CPU hog on every core, which two test files
 * running side by side would double).
 */
import { assert, it } from "@effect/vitest"
import type { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import { cpuHog } from "../cpuHog.js"
import type { CallsReport } from "./fleet/member.js"
import { type FleetRun, fleetRun } from "./fleet/run.js"
import { startRedisServer } from "./server.js"
import { describeRedis, redisServerBinary, redisUrl } from "./support.js"

const callsEach = 40

/**
 * Each test starts three or more Node processes and waits for what they do, which on a busy machine
 * takes as long as it takes: what the tests bound is what the fleet sends, never how long it took.
 * Only a hung run waits this long.
 */
const patient = 300_000

/**
 * The members' budget (`fleet/member.ts`): 10% of successes, a floor of 0.5 retries per second
 * over the default 60-second window, so 30 retries per window when nothing succeeds. The run takes
 * a few seconds, well inside one window.
 */
const floorPerWindow = 0.5 * 60

/** `members` processes calling through a fault server that answers every request with 503. */
const failingRun = (options: Omit<FleetRun, "redisUrl" | "plan" | "calls">) =>
  Effect.tap(
    fleetRun({
      ...options,
      redisUrl,
      calls: callsEach,
      plan: { otherwise: { _tag: "Status", status: 503, code: "overloaded" } }
    }),
    ({ reports }) =>
      Effect.sync(() => {
        for (const report of reports) {
          assert.strictEqual(report.succeeded, 0)
          // Every call fails, stopped by the budget or the attempt ceiling; on a machine starved long
          // enough that an attempt outlives its 5 s timeout (CI's, running three suites at once, was),
          // its ReadTimeout is ambiguous and ends the call unreplayed. Nothing else may stop one.
          const { attempts = 0, budget = 0, "not-replay-safe": timedOut = 0, ...other } = report.failed
          assert.deepStrictEqual(other, {}, "calls stopped for another reason")
          assert.strictEqual(budget + attempts + timedOut, callsEach)
        }
      })
  )

describeRedis("a fleet of processes on one Redis", () => {
  it.live("4 processes share one retry budget while every request fails", () =>
    Effect.gen(function*() {
      // A command timeout no healthy Redis misses: every decision is one atomic script on Redis.
      const shared = yield* failingRun({ members: 4, coordination: "redis", commandTimeout: "1 second" })
      assert.deepStrictEqual(shared.reports.map((report) => report.fallbacks), [0, 0, 0, 0])
      assert.strictEqual(shared.retries, floorPerWindow, "retries the fault server saw, all processes")

      const separate = yield* failingRun({ members: 4, coordination: "memory" })
      assert.strictEqual(separate.retries, 4 * floorPerWindow, "each process spends a floor of its own")
    }), patient)

  it.live(
    "3 processes on a machine whose cores are all busy spend one budget, not one each",
    () =>
      Effect.gen(function*() {
        yield* cpuHog()
        // The default 50 ms command timeout: event-loop lag here must not pass for Redis failing.
        // The members are told the fleet's size, as an operator sets `_FLEET_SIZE` to the replica
        // count: on a busy machine they start seconds apart, and one that must decide alone before
        // Redis has counted the others would otherwise take the share of a smaller fleet (a run
        // without it saw 45 retries, fallbacks 48/0/0: 15 beyond the floor, a fleet of two's share).
        const fleet = 3
        const shared = yield* failingRun({ members: fleet, coordination: "redis", fleetSize: fleet })
        // A member decides alone only when Redis did not answer in time, within its share of the
        // floor (a third) less what Redis granted it, and Redis counts those retries when it answers
        // again. So a member that decided alone spent at most the larger of its share and Redis's
        // grants to it: beyond the allowance, a share for each member that decided alone, all but
        // one at most (Redis granted the allowance to someone). Members with the same load split
        // Redis's grants about evenly, but with Redis starved of CPU alongside, one member may take
        // most grants while the others decide alone (measured: fallbacks 0/25/42, 43 retries).
        const decidedAlone = shared.reports.filter((report) => report.fallbacks > 0).length
        const slack = (floorPerWindow / fleet) * Math.min(decidedAlone, fleet - 1)
        assert.isAtMost(
          shared.retries,
          floorPerWindow + slack,
          `retries the fault server saw (fallbacks ${shared.reports.map((report) => report.fallbacks).join("/")})`
        )
        assert.isAtLeast(shared.retries, floorPerWindow, "and the allowance was spent")
      }).pipe(Effect.scoped),
    patient
  )
})

/*
 * The rate limits: the goal for the fleet's rate limiter, on real Redis with real processes (so real time):
 * three members calling one target with one key stay within its requests and tokens per minute, as
 * the fault server sees them arrive; also while a CPU hog loads every core, and while Redis is
 * stopped for 5 s, when each member paces alone to its third.
 */
/** 10 requests and 50 tokens a second: a few seconds are many turns of the pace. */
const limits = { requestsPerMinute: 600, tokensPerMinute: 3_000, maxTokens: 1 }
const members = 3
/** The calls each member has under way at once (`fleetRun`'s concurrency). */
const callersEach = 4
/** What the fault server reports each call used: `hello N` is 2 prompt tokens, its reply 4. */
const usedPerCall = 6
/** What each call reserves: its prompt's estimate (2, and 4 for the message) and its `max_tokens`. */
const reservedPerCall = 2 + 4 + limits.maxTokens
/** `RateLimiter`'s default burst: a second's worth of each limit may go at once. */
const burstMillis = 1_000
/**
 * The pace decides when a call may be sent; the server sees it later by the member's own delay (the
 * gate's round trip, the HTTP client, an event loop starved of CPU), which varies: what was admitted
 * over a window and this much more may arrive within the window. Under the stress script's hogs
 * (load average 20 on two cores) two calls too many arrived in a second without it.
 */
const jitterMillis = 500

/** Arrivals at the fault server: when (ms since it started), and which member sent it. */
interface Arrival {
  readonly at: number
  readonly member: string
}

const arrivalsOf = (received: ReadonlyArray<FaultServer.Arrival>): ReadonlyArray<Arrival> =>
  received.map(({ at, body }) => ({
    at,
    member: String((body as { readonly messages: ReadonlyArray<{ readonly content: string }> }).messages[0]!.content)
  }))

/** The most arrivals in any window of `millis` that starts at an arrival and lies within `from` and `to`. */
const busiest = (times: ReadonlyArray<number>, millis: number, from = -Infinity, to = Infinity) => {
  const sorted = times.filter((at) => at >= from && at < to).sort((a, b) => a - b)
  let most = { count: 0, from: 0 }
  for (let first = 0, last = 0; first < sorted.length; first++) {
    if (sorted[first]! + millis > to) break
    while (last < sorted.length && sorted[last]! < sorted[first]! + millis) last++
    if (last - first > most.count) most = { count: last - first, from: sorted[first]! }
  }
  return most
}

/**
 * Checks that in every window of `millis` within `from` and `to`, the arrivals stay within `share`
 * of the limits × the window (and the jitter), `bursts` bursts of them, and one request (and its
 * tokens) for each of the `pacers` that paced them: GCRA's bound. A call under way when the window
 * opens gives back what it reserved beyond its usage when it is settled: room for as much more, for
 * each of the members' callers. Returns what went over, with the numbers.
 */
const overLimit = (
  what: string,
  times: ReadonlyArray<number>,
  options: {
    readonly millis: number
    readonly bursts: number
    readonly pacers: number
    /** The members whose callers' settling counts. Default all. */
    readonly members?: number
    readonly share?: number
    readonly from?: number
    readonly to?: number
  }
): ReadonlyArray<string> => {
  const { bursts, millis, pacers, share = 1 } = options
  const settling = (options.members ?? members) * callersEach * (reservedPerCall - usedPerCall)
  const { count, from } = busiest(times, millis, options.from, options.to)
  const perMilli = (perMinute: number) => share * perMinute / 60_000
  const span = millis + jitterMillis + bursts * burstMillis
  const requests = perMilli(limits.requestsPerMinute) * span + pacers
  const tokens = perMilli(limits.tokensPerMinute) * span + pacers * reservedPerCall + settling
  const problems: Array<string> = []
  if (count > requests) problems.push(`${what}: ${count} requests in ${millis} ms from ${from} ms, over ${requests}`)
  if (count * usedPerCall > tokens) {
    problems.push(`${what}: ${count * usedPerCall} tokens in ${millis} ms from ${from} ms, over ${tokens}`)
  }
  return problems
}

const windows = [1_000, 3_000]

/** One pace's bound: a burst, and a request for its pacer. */
const onePace = { bursts: 1, pacers: 1 }
/**
 * A switch to deciding alone: Redis counts a place a member took alone only when it next answers,
 * so a window may hold a burst more, and a request for each member's own pacer.
 */
const switchingAlone = { bursts: 2, pacers: members }

/**
 * Three members calling for `millis` once each has made a call (then finishing those under way),
 * with `meanwhile` run alongside: every arrival, and the members' reports.
 */
const pacedRun = (
  url: string,
  millis: number,
  meanwhile: (server: FaultServer.Service) => Effect.Effect<void> = () => Effect.void
) =>
  fleetRun({
    members,
    coordination: "redis",
    redisUrl: url,
    plan: {},
    calls: 0,
    fleetSize: members,
    rateLimit: limits,
    during: (server) =>
      Effect.gen(function*() {
        // Each member's first call: they start seconds apart on a busy machine. A member that fails
        // before its first call ends the run (`fleetRun`).
        while (new Set(arrivalsOf(yield* server.arrivals).map(({ member }) => member)).size < members) {
          yield* Effect.sleep("50 millis")
        }
        yield* Effect.all([Effect.sleep(millis), meanwhile(server)], { concurrency: "unbounded" })
      })
  }).pipe(Effect.map((run) => ({ ...run, arrivals: arrivalsOf(run.received) })))

/** The calls a second the key's tokens per minute allow, at what each call uses. */
const limitPerSecond = limits.tokensPerMinute / 60 / usedPerCall

/**
 * The calls a second the members could have made had the pace never held them back, measured in
 * the same run: each member's callers, each call's time less what it waited for the pace. On a
 * quiet machine that is hundreds; on one whose cores are starved, a few (the stress script saw 12
 * calls in 4 s with load 17.8 on a machine slower than ours).
 */
const unpacedPerSecond = (reports: ReadonlyArray<CallsReport>) =>
  reports.reduce(
    (sum, report) =>
      sum + (report.made === 0
        ? 0
        : callersEach / (Math.max(1, report.callMillis - report.pacedMillis) / report.made / 1_000)),
    0
  )

/**
 * The pace, not the callers, held the fleet back: it sent at least half of what the limit and the
 * members' own speed in this run (`unpacedPerSecond`) allowed, whichever is lower. A pace slower
 * than the limit shows here on any machine; a machine too busy to reach the limit does not.
 */
const usedTheLimit = (perSecond: number, reports: ReadonlyArray<CallsReport>, what: string) => {
  const reachable = Math.min(limitPerSecond, unpacedPerSecond(reports))
  assert.isAbove(
    perSecond,
    0.5 * reachable,
    `${what}: ${perSecond.toFixed(1)}/s, of ${reachable.toFixed(1)}/s reachable`
  )
}

/**
 * The fleet kept to the limits in every window, and used most of what it could of them. A member
 * whose Redis command outlasted its timeout (Redis starved of CPU as much as the members are)
 * decided that call alone, within its share: the windows then have a switch's bound, as with Redis
 * stopped (measured under the full suite with two hogs besides the test's own: 0/8/5 decisions
 * alone, one window over the one-pace bound).
 */
const keptToLimits = (arrivals: ReadonlyArray<Arrival>, reports: ReadonlyArray<CallsReport>) => {
  const fallbacks = reports.map((report) => report.limiterFallbacks)
  const times = arrivals.map(({ at }) => at)
  const bound = fallbacks.some((count) => count > 0) ? switchingAlone : onePace
  const problems = windows.flatMap((millis) => overLimit("fleet", times, { millis, ...bound }))
  assert.deepStrictEqual(problems, [], `${problems.join("; ")} (decided in process: ${fallbacks.join("/")})`)
  const first = Math.min(...times)
  const span = Math.max(...times) - first
  usedTheLimit((times.length - 1) / (span / 1_000), reports, `${times.length} calls in ${span} ms`)
}

describeRedis("a fleet of processes on one key's rate limits", () => {
  it.live("3 processes stay within the key's requests and tokens per minute", () =>
    Effect.gen(function*() {
      const run = yield* pacedRun(redisUrl, 4_000)
      keptToLimits(run.arrivals, run.reports)
    }), patient)

  it.live("and on a machine whose cores are all busy", () =>
    Effect.gen(function*() {
      yield* cpuHog()
      const run = yield* pacedRun(redisUrl, 4_000)
      keptToLimits(run.arrivals, run.reports)
    }).pipe(Effect.scoped), patient)

  it.live.skipIf(redisServerBinary === "")(
    "and with Redis stopped for 5 s: each paces alone to its third, the fleet within the limits",
    () =>
      Effect.gen(function*() {
        const redis = yield* Effect.acquireRelease(
          Effect.promise(() => startRedisServer(redisServerBinary)),
          (server) => Effect.promise(() => server.stop())
        )
        let stoppedAt = 0
        let startedAt = 0
        const run = yield* pacedRun(redis.url, 12_000, (server) =>
          Effect.gen(function*() {
            yield* Effect.sleep("2 seconds")
            yield* Effect.promise(() => redis.stop())
            stoppedAt = yield* server.elapsed
            yield* Effect.sleep("5 seconds")
            yield* Effect.promise(() => redis.start())
            startedAt = yield* server.elapsed
          }))
        const fallbacks = run.reports.map((report) => report.limiterFallbacks)
        const times = run.arrivals.map(({ at }) => at)
        // Each member's pace alone starts with its share of a burst: a window across the switch may
        // hold one burst more (measured: 25 requests in a second, where 21 are the bound without).
        // Places taken on Redis arrive until a burst (and the jitter) after it stopped; members find
        // Redis back within 2 s of its start (ioredis reconnects within 1 s, and Redis is asked again
        // 1 s after it was found down), and the places they took alone (as long ahead) are added to
        // its pace.
        const outage = { from: stoppedAt + burstMillis + jitterMillis, to: startedAt }
        const settledAt = startedAt + 2_000 + burstMillis + jitterMillis
        const problems = windows.flatMap((millis) => [
          ...overLimit("fleet before", times, { millis, ...onePace, to: stoppedAt }),
          ...overLimit("fleet across", times, { millis, ...switchingAlone }),
          ...overLimit("fleet during", times, { millis, bursts: 1, pacers: members, ...outage }),
          ...overLimit("fleet after", times, { millis, ...onePace, from: settledAt }),
          ...[...new Set(run.arrivals.map(({ member }) => member))].flatMap((member) =>
            overLimit(
              `${member} during`,
              run.arrivals.filter((arrival) => arrival.member === member).map(({ at }) => at),
              { millis, bursts: 1, pacers: 1, share: 1 / members, members: 1, ...outage }
            )
          )
        ])
        assert.deepStrictEqual(
          problems,
          [],
          `Redis stopped at ${stoppedAt} ms, started at ${startedAt} ms; decided in process: ${fallbacks.join("/")}`
        )
        assert.isTrue(fallbacks.every((count) => count > 0), `each paced alone: ${fallbacks.join("/")}`)
        const during = times.filter((at) => at >= outage.from && at < outage.to).length
        usedTheLimit(during / ((startedAt - outage.from) / 1_000), run.reports, "during the outage")
      }).pipe(Effect.scoped),
    patient
  )
})
