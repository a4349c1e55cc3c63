import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import { cpuHog } from "../cpuHog.js"
import { type FleetRun, fleetRun } from "./fleet/run.js"
import { describeRedis, redisUrl } from "./support.js"

const callsEach = 40

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
    ({ reports }) => {
      for (const report of reports) {
        assert.strictEqual(report.succeeded, 0)
        assert.strictEqual((report.failed["budget"] ?? 0) + (report.failed["attempts"] ?? 0), callsEach)
      }
    }
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
    }), 60_000)

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
        const shared = yield* failingRun({ members: 3, coordination: "redis", fleetSize: 3 })
        // A member decides alone only when Redis did not answer in time, within its share of the
        // floor (a third) less what Redis granted it, and Redis counts those retries when it answers
        // again. What decisions made alone can add beyond the allowance is what the members Redis
        // served least had left of their shares: members with the same load split Redis's grants
        // about evenly, so we allow one share.
        const slack = floorPerWindow / 3
        assert.isAtMost(
          shared.retries,
          floorPerWindow + slack,
          `retries the fault server saw (fallbacks ${shared.reports.map((report) => report.fallbacks).join("/")})`
        )
        assert.isAtLeast(shared.retries, floorPerWindow, "and the allowance was spent")
      }).pipe(Effect.scoped),
    90_000
  )
})
