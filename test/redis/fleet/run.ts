/** A fleet run: members as OS processes calling one target through a fault server, on one Redis. */
import { assert } from "@effect/vitest"
import type { EffectLine } from "@resilient-ai/policy/internal"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import { freshPrefix } from "../support.js"
import type { CallsReport } from "./member.js"
import { lineOf, startMember } from "./process.js"

/** How a fleet run goes. */
export interface FleetRun {
  readonly members: number
  readonly coordination: "redis" | "memory"
  /** The Redis the members share: one server's URL, or a cluster's nodes, comma-separated. */
  readonly redisUrl: string
  /** What the fault server answers. */
  readonly plan: FaultPlan.Plan
  /** Calls each member makes; with `during`, each goes on making calls until `during` ends. */
  readonly calls: number
  readonly commandTimeout?: EffectLine.DurationInput | undefined
  /** What the members assume the fleet's size is until Redis tells them (`_FLEET_SIZE`). */
  readonly fleetSize?: number | undefined
  /** The target's limits per minute, and each call's `max_tokens`; each member says `hello <its index>`. */
  readonly rateLimit?:
    | { readonly requestsPerMinute: number; readonly tokensPerMinute: number; readonly maxTokens: number }
    | undefined
  /**
   * Runs alongside the members, given the fault server and the members' key prefix; the members
   * make calls until it ends, then finish those under way.
   */
  readonly during?: ((server: FaultServer.Service, keyPrefix: string) => Effect.Effect<void>) | undefined
}

/**
 * Runs the members to their end: each exits cleanly and accounts for every call it made. The
 * requests the fault server saw beyond one per call are the fleet's retries.
 */
export const fleetRun = (options: FleetRun) =>
  Effect.gen(function*() {
    const server = yield* FaultServer.make(options.plan)
    const keyPrefix = freshPrefix()
    const started = yield* Effect.forEach(
      Array.from({ length: options.members }, (_, index) => index),
      (index) =>
        startMember({
          _tag: "calls",
          faultUrl: server.url,
          redisUrl: options.redisUrl,
          keyPrefix,
          coordination: options.coordination,
          commandTimeout: options.commandTimeout,
          fleetSize: options.fleetSize,
          calls: options.during === undefined ? options.calls : "until stdin ends",
          concurrency: 4,
          ...(options.rateLimit === undefined ? {} : {
            rateLimit: {
              requestsPerMinute: options.rateLimit.requestsPerMinute,
              tokensPerMinute: options.rateLimit.tokensPerMinute
            },
            maxTokens: options.rateLimit.maxTokens,
            content: `hello ${index}`
          })
        }),
      { concurrency: "unbounded" }
    )
    // All at once: a member that fails ends the run then, not when the others are done.
    const finished = Effect.forEach(started, (member) =>
      Effect.gen(function*() {
        const exit = yield* member.exited
        assert.strictEqual(exit.code, 0, exit.stderr)
        return (yield* lineOf(member, "done")) as unknown as CallsReport
      }), { concurrency: "unbounded" })
    const during = options.during === undefined
      ? Effect.void
      : Effect.ensuring(
        options.during(server, keyPrefix),
        Effect.sync(() => started.forEach((member) => member.endInput()))
      )
    const [reports] = yield* Effect.all([finished, during], { concurrency: "unbounded" })
    for (const report of reports) {
      const failed = Object.values(report.failed).reduce((sum, count) => sum + count, 0)
      assert.strictEqual(report.succeeded + failed, report.made, `member ${report.pid}: every call ended once`)
      if (options.during === undefined) assert.strictEqual(report.made, options.calls)
    }
    const received = yield* server.arrivals
    const arrivals = received.length
    const calls = reports.reduce((sum, report) => sum + report.made, 0)
    return { keyPrefix, arrivals, received, calls, retries: arrivals - calls, reports }
  }).pipe(Effect.scoped)
