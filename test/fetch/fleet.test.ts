/**
 * The promise door's fleet (`redisFleet` of `@resilient-ai/fetch/redis`) on a real Redis, doors
 * under the openai SDK against the real fault server: two fleets stand for two processes, so only
 * Redis can make them share a target's gate.
 */
import { assert, it } from "@effect/vitest"
import { type Fleet, resilientFetch, type Settings } from "@resilient-ai/fetch"
import { redisFleet } from "@resilient-ai/fetch/redis"
import { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import { canary } from "../canary.js"
import { chat, openAiOn } from "../client/openai.js"
import { thrown } from "../client/sdkSupport.js"
import { freshName } from "../client/support.js"
import { describeRedis, freshPrefix, redisUrl } from "../redis/support.js"

/** A fleet closed when the test's scope is. */
const fleetOn = (settings: Parameters<typeof redisFleet>[0]) =>
  Effect.acquireRelease(Effect.sync(() => redisFleet(settings)), (fleet) => Effect.promise(() => fleet.close()))

const doorOn = (fleet: Fleet, url: string, settings: Partial<Settings> = {}) =>
  resilientFetch({
    name: "shared",
    baseUrl: url,
    model: "gpt-4o-mini",
    apiKey: canary,
    baseDelay: 1,
    maxDelay: 5,
    fleet,
    ...settings
  } as Settings)

describeRedis("the promise door's fleet on Redis", () => {
  it.scopedLive("two processes' doors of one target hold one gate between them", () =>
    Effect.gen(function*() {
      const keyPrefix = freshPrefix()
      const server = yield* FaultServer.make({ otherwise: { _tag: "Ok", delayMs: 300 } })
      const settings = { url: redisUrl, keyPrefix, commandTimeout: "2 seconds", pollInterval: 20 }
      const one = doorOn(yield* fleetOn(settings), server.url, { concurrency: 1 })
      const other = doorOn(yield* fleetOn(settings), server.url, { concurrency: 1 })
      yield* Effect.promise(() => Promise.all([chat(openAiOn(server.url, one)), chat(openAiOn(server.url, other))]))
      const [first, second] = yield* server.arrivals
      // One permit on Redis between the two: the second call was sent once the first was answered.
      assert.isAtLeast(second!.at - first!.at, 300)
      assert.strictEqual(one.metrics().successes, 2)
    }))

  it.scopedLive("settings read from REDIS_* variables; a Redis that is away is no error, each call decides alone", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
      // A loopback port nothing listens on.
      const fleet = yield* fleetOn({
        env: "FLEET",
        variables: { FLEET_URL: "redis://127.0.0.1:9", FLEET_KEY_PREFIX: freshPrefix() }
      })
      const door = doorOn(fleet, server.url, { name: freshName("away") })
      yield* Effect.promise(() => chat(openAiOn(server.url, door)))
      assert.strictEqual((yield* server.arrivals).length, 2)
      yield* Effect.promise(() => door.close())
    }))

  it("bad settings throw a TypeError naming each, the URL never shown", () => {
    const written = thrown(() => redisFleet({ url: "http://user:hunter2@redis.internal:6379", commandTimeout: -1 }))
    assert.instanceOf(written, TypeError)
    assert.strictEqual(
      (written as TypeError).message,
      "redis: url must start with redis:// or rediss://; commandTimeout must not be negative, got -1"
    )
    const read = thrown(() => redisFleet({ env: "FLEET", variables: { FLEET_FLEET_SIZE: "0" } }))
    assert.instanceOf(read, TypeError)
    assert.strictEqual(
      (read as TypeError).message,
      "redis (FLEET_*): FLEET_URL is required; FLEET_FLEET_SIZE must be a whole number of at least 1, got 0"
    )
    assert.notInclude((written as TypeError).message, "hunter2")
    const leases = thrown(() => redisFleet({ url: redisUrl, leaseTime: "no time" }))
    assert.include((leases as TypeError).message, "redis coordination: leaseTime")
    const stranger = thrown(() =>
      resilientFetch({
        name: "x",
        baseUrl: "http://127.0.0.1:9/v1",
        model: "m",
        apiKey: canary,
        fleet: { close: async () => {}, [Symbol.asyncDispose]: async () => {} }
      })
    )
    assert.include((stranger as TypeError).message, "fleet must be made by redisFleet")
  })
})
