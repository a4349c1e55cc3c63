import { assert, describe, it } from "@effect/vitest"
import { Failover } from "@resilient-ai/client"
import { EffectLine } from "@resilient-ai/policy/internal"
import { Effect } from "effect"
import { hello, HttpLive, managedAt, serverAndClient } from "./support.js"

describe("Failover.between against two fault servers", () => {
  it.scopedLive("a Retry-After longer than the time left passes the call on at once: the second target serves it", () =>
    Effect.gen(function*() {
      const primary = yield* serverAndClient({ otherwise: { _tag: "Status", status: 429, retryAfter: "30" } })
      const secondary = yield* serverAndClient({})
      const completion = yield* Failover.between(primary.client, secondary.client).chat(hello, {
        timeout: "20 seconds"
      })
      assert.strictEqual(completion.object, "chat.completion")
      // No sleep towards the deadline: one request each, and the call never waited for the 30 s.
      assert.strictEqual((yield* primary.server.arrivals).length, 1)
      assert.strictEqual((yield* secondary.server.arrivals).length, 1)
      const failovers = EffectLine.tagged(Failover.failovers, {
        from: primary.client.target.name,
        to: secondary.client.target.name
      })
      assert.strictEqual(EffectLine.counted(failovers), 1)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("a target's own maxRetryAfter passes on a hint it will not wait for, with no deadline at all", () =>
    Effect.gen(function*() {
      const primary = yield* serverAndClient(
        { otherwise: { _tag: "Status", status: 503, retryAfterMs: "2000" } },
        (url) => managedAt(url, { maxRetryAfter: "1 second" })
      )
      const secondary = yield* serverAndClient({})
      const completion = yield* Failover.between(primary.client, secondary.client).chat(hello)
      assert.strictEqual(completion.object, "chat.completion")
      assert.strictEqual((yield* primary.server.arrivals).length, 1)
      assert.strictEqual((yield* secondary.server.arrivals).length, 1)
    }).pipe(Effect.provide(HttpLive)))
})
