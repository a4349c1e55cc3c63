/**
 * The client takes its target's budget and gate through the same seam as `Resilient.retry`: the
 * `Coordination` in context, swapped in one line, against a real fault server.
 */
import { assert, describe, it } from "@effect/vitest"
import { ModelClient } from "@resilient-ai/client"
import { Coordination, RetryBudget } from "@resilient-ai/policy"
import { FaultServer } from "@resilient-ai/testing"
import { Effect, Exit } from "effect"
import { failureOf, hello, HttpLive, managedAt } from "./support.js"

describe("ModelClient and the Coordination seam", () => {
  it.scopedLive("a budget swapped in by Coordination.layerWith is the one the client's calls ask", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
      const recording = yield* RetryBudget.recording(RetryBudget.disabled)
      const client = yield* ModelClient.make(managedAt(server.url)).pipe(
        Effect.provide(Coordination.layerWith({ budget: recording }))
      )
      const failure = failureOf(yield* Effect.exit(client.chat(hello, { timeout: "5 seconds" })))
      assert.strictEqual(failure.reason, "budget")
      assert.strictEqual((yield* server.arrivals).length, 1)
      const decisions = yield* recording.decisions
      assert.deepStrictEqual(decisions.map((decision) => [decision._tag, "granted" in decision && decision.granted]), [
        ["Retry", false]
      ])
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("two clients of one target and key share its budget; a call's maxAttempts is its own", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 500 } })
      // A floor of 0.05 a second over the default 60 s window: 3 retries, for the target, not per client
      // (all of it, though none pays: this counts the sharing, not the learning).
      const target = managedAt(server.url, {
        budget: { ratio: 0.1, minPerSecond: 0.05, shareWhenRetriesFail: 1 },
        maxAttempts: 10
      })
      const [first, second] = yield* Effect.all([ModelClient.make(target), ModelClient.make(target)]).pipe(
        Effect.provide(Coordination.layerMemory)
      )
      const exits = yield* Effect.all([
        first.chat(hello, { timeout: "5 seconds" }),
        second.chat(hello, { timeout: "5 seconds" }),
        second.chat(hello, { timeout: "5 seconds", maxAttempts: 1 })
      ].map(Effect.exit))
      assert.deepStrictEqual(exits.map((exit) => Exit.isFailure(exit) && failureOf(exit).reason), [
        "budget",
        "budget",
        "attempts"
      ])
      // Two first attempts, three retries between them, one single-attempt call.
      assert.strictEqual((yield* server.arrivals).length, 2 + 3 + 1)
    }).pipe(Effect.provide(HttpLive)))
})
