import { assert, it } from "@effect/vitest"
import { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import type { CallsReport } from "./fleet/member.js"
import { lineOf, startMember } from "./fleet/process.js"
import { describeRedis, freshPrefix, redisUrl } from "./support.js"

const members = 4
const callsEach = 40

/**
 * The members' budget (`fleet/member.ts`): 10% of successes, a floor of 0.5 retries per second
 * over the default 60-second window, so 30 retries per window when nothing succeeds. The run takes
 * a few seconds, well inside one window.
 */
const floorPerWindow = 0.5 * 60

describeRedis("a fleet of processes on one Redis", () => {
  it.live(`${members} processes share one retry budget while every request fails`, () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503, code: "overloaded" } })
      const run = (coordination: "redis" | "memory") =>
        Effect.gen(function*() {
          yield* server.clearArrivals
          const keyPrefix = freshPrefix()
          const started = yield* Effect.forEach(
            Array.from({ length: members }),
            () =>
              startMember({
                _tag: "calls",
                faultUrl: server.url,
                redisUrl,
                keyPrefix,
                coordination,
                calls: callsEach,
                concurrency: 4
              }),
            { concurrency: "unbounded" }
          )
          const reports = yield* Effect.forEach(started, (member) =>
            Effect.gen(function*() {
              const exit = yield* member.exited
              assert.strictEqual(exit.code, 0, exit.stderr)
              return (yield* lineOf(member, "done")) as unknown as CallsReport
            }))
          return { attempts: (yield* server.arrivals).length, reports }
        }).pipe(Effect.scoped)

      const logicalCalls = members * callsEach
      const shared = yield* run("redis")
      // Exact: every decision is one atomic script on Redis. Decisions made in process during a
      // Redis fallback could add up to a floor each; there were none.
      assert.deepStrictEqual(shared.reports.map((report) => report.fallbacks), [0, 0, 0, 0])
      assert.strictEqual(shared.attempts - logicalCalls, floorPerWindow, "retries the fault server saw, all processes")
      for (const report of shared.reports) {
        assert.strictEqual(report.succeeded, 0)
        assert.strictEqual((report.failed["budget"] ?? 0) + (report.failed["attempts"] ?? 0), callsEach)
      }

      const separate = yield* run("memory")
      assert.strictEqual(
        separate.attempts - logicalCalls,
        members * floorPerWindow,
        "each process spends a floor of its own"
      )
    }).pipe(Effect.scoped), 60_000)
})
