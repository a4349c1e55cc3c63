/**
 * One state per target and API key, against the real fault server: clients made from separate
 * `Target.managed` calls with one name and one key's text share one gate, budget and rate limiter,
 * whatever kind of client they are; two keys do not; and the key's text is nowhere in the state.
 */
import { TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { ModelClient, ResilientFetch, Target } from "@resilient-ai/client"
import { Coordination } from "@resilient-ai/policy"
import { EffectLine } from "@resilient-ai/policy/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Effect, Fiber, Redacted } from "effect"
import { createHash } from "node:crypto"
import { inspect } from "node:util"
import { canary } from "../canary.js"
import { recordingSleeps, untilSleeping } from "./sdkSupport.js"
import { failureOf, freshName, hello, HttpLive, stateOf } from "./support.js"

/** How long the provider takes to answer each request. */
const stallMillis = 400

/** A managed target named `name`, checked by a `Target.managed` call of its own, with `key` as its API key's text. */
const targetOf = (name: string, url: string, key: string, options: Partial<Target.Options> = {}) =>
  Target.managed({
    name,
    baseUrl: url,
    model: "test-model",
    apiKey: Redacted.make(key),
    maxAttempts: 3,
    baseDelay: "1 millis",
    maxDelay: "5 millis",
    hintSpread: "5 millis",
    attemptTimeout: "5 seconds",
    ...options
  })

/** The most requests the server had in flight at once, sampled every 2 ms while the scope lives. */
const peakInFlight = (server: FaultServer.Service) =>
  Effect.gen(function*() {
    let peak = 0
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(
      Effect.map(server.inFlight, (inFlight) => {
        peak = Math.max(peak, inFlight)
      }),
      Effect.sleep("2 millis")
    )))
    return () => peak
  })

/** The first arrivals' spacing: how long after the first request the second reached the server. */
const gapOf = (arrivals: ReadonlyArray<FaultServer.Arrival>) => arrivals[1]!.at - arrivals[0]!.at

/** A chat completion request sent with `fetch`, as an SDK sends it. */
const chatThrough = (fetch: ResilientFetch.Fetch, url: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "test-model", messages: hello.messages })
    })
    await response.arrayBuffer()
    return response.status
  })

/**
 * Every value reachable from `root` through properties (hidden and symbol-keyed too), map entries
 * and set members: what a dump of it could show. Closures are not reachable.
 */
const reachable = (root: unknown): Array<unknown> => {
  const seen = new Set<unknown>()
  const values: Array<unknown> = []
  const pending = [root]
  while (pending.length > 0) {
    const value = pending.pop()
    values.push(value)
    if ((typeof value !== "object" && typeof value !== "function") || value === null || seen.has(value)) continue
    seen.add(value)
    if (value instanceof Map) { for (const [key, member] of value) pending.push(key, member) }
    if (value instanceof Set) { for (const member of value) pending.push(member) }
    for (const key of Reflect.ownKeys(value)) {
      const descriptor = Object.getOwnPropertyDescriptor(value, key)
      if (descriptor !== undefined && "value" in descriptor) pending.push(descriptor.value)
      if (typeof key === "string") values.push(key)
    }
  }
  return values
}

/** JSON of `value`, maps and sets as arrays, each object once. */
const jsonOf = (value: unknown): string => {
  const seen = new WeakSet<object>()
  return JSON.stringify(value, (_, member: unknown) => {
    if (typeof member === "bigint") return String(member)
    if (typeof member !== "object" || member === null) return member
    if (seen.has(member)) return "[seen]"
    seen.add(member)
    if (member instanceof Map) return [...member.entries()]
    if (member instanceof Set) return [...member.values()]
    return member
  })
}

describe("one state per target and API key", () => {
  it.scopedLive("two clients from two Target.managed calls with one name and key share one gate: one request in flight", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ latencyMs: stallMillis })
      const name = freshName("shared")
      const first = yield* ModelClient.make(targetOf(name, server.url, canary, { concurrency: 1 }))
      const second = yield* ModelClient.make(targetOf(name, server.url, canary, { concurrency: 1 }))
      assert.notStrictEqual(first.target, second.target)
      assert.notStrictEqual(first.target.apiKey, second.target.apiKey)
      const peak = yield* peakInFlight(server)
      yield* Effect.all([first.chat(hello), second.chat(hello)], { concurrency: 2 })
      const arrivals = yield* server.arrivals
      assert.strictEqual(arrivals.length, 2)
      assert.strictEqual(peak(), 1, "the server never had two requests in flight")
      assert.isAtLeast(gapOf(arrivals), stallMillis * 0.9, "the second was sent after the first was answered")
      // One state, whichever client's target is asked.
      const state = yield* stateOf(first.target)
      assert.isDefined(state)
      assert.strictEqual(yield* stateOf(second.target), state)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("with two keys, the clients of one target share nothing: two requests in flight", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ latencyMs: stallMillis })
      const name = freshName("two-keys")
      const first = yield* ModelClient.make(targetOf(name, server.url, canary, { concurrency: 1 }))
      const second = yield* ModelClient.make(targetOf(name, server.url, `${canary}-second`, { concurrency: 1 }))
      const peak = yield* peakInFlight(server)
      yield* Effect.all([first.chat(hello), second.chat(hello)], { concurrency: 2 })
      const arrivals = yield* server.arrivals
      assert.strictEqual(arrivals.length, 2)
      assert.strictEqual(peak(), 2, "each key's gate let its own request through")
      assert.isBelow(gapOf(arrivals), stallMillis, "the second did not wait for the first")
      assert.notStrictEqual(yield* stateOf(first.target), yield* stateOf(second.target))
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("a budget exhausted through one client is exhausted for the other", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503 } })
      const name = freshName("one-budget")
      // No ratio, a floor of 3 retries a minute, kept whether they pay or not.
      const budget = { ratio: 0, minPerSecond: 0.05, shareWhenRetriesFail: 1 }
      const first = yield* ModelClient.make(targetOf(name, server.url, canary, { budget }))
      const second = yield* ModelClient.make(targetOf(name, server.url, canary, { budget }))
      const spent = failureOf(yield* Effect.exit(first.chat(hello)))
      assert.deepStrictEqual([spent.reason, spent.attempts.length], ["attempts", 3])
      const exhausted = failureOf(yield* Effect.exit(first.chat(hello)))
      assert.deepStrictEqual([exhausted.reason, exhausted.attempts.length], ["budget", 2])
      // The other client's first failure finds the budget spent: no retry.
      const refused = failureOf(yield* Effect.exit(second.chat(hello)))
      assert.deepStrictEqual([refused.reason, refused.attempts.length], ["budget", 1])
      assert.strictEqual((yield* server.arrivals).length, 6)
    }).pipe(Effect.provide(HttpLive)))

  it.scoped("two clients of one target and key are paced as one: 60 a minute between them", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({})
      const name = freshName("one-pace")
      const first = yield* ModelClient.make(targetOf(name, server.url, canary, { requestsPerMinute: 60 }))
      const second = yield* ModelClient.make(targetOf(name, server.url, canary, { requestsPerMinute: 60 }))
      // The pace's burst is one request: the first goes at once, the other client's waits its second.
      yield* first.chat(hello)
      const next = yield* EffectLine.fork(second.chat(hello))
      yield* untilSleeping(1_000)
      assert.strictEqual((yield* server.arrivals).length, 1, "the other client's call waits for its turn")
      yield* TestClock.adjust(1_000)
      yield* Fiber.join(next)
      assert.strictEqual((yield* server.arrivals).length, 2)
    }).pipe(recordingSleeps, Effect.provide(HttpLive), Effect.provide(Coordination.layerMemory)))

  it.scopedLive("a ModelClient and a ResilientFetch of one target share its gate", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ latencyMs: stallMillis })
      const name = freshName("client-and-fetch")
      const client = yield* ModelClient.make(targetOf(name, server.url, canary, { concurrency: 1 }))
      const fetch = yield* ResilientFetch.make(targetOf(name, server.url, canary, { concurrency: 1 }))
      const peak = yield* peakInFlight(server)
      const [, status] = yield* Effect.all([client.chat(hello), chatThrough(fetch, server.url)], { concurrency: 2 })
      assert.strictEqual(status, 200)
      const arrivals = yield* server.arrivals
      assert.strictEqual(arrivals.length, 2)
      assert.strictEqual(peak(), 1, "the server never had two requests in flight")
      assert.isAtLeast(gapOf(arrivals), stallMillis * 0.9)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("the key's text is nowhere in the coordination's state, which is kept under its fingerprint", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({})
      const name = freshName("no-key-text")
      const client = yield* ModelClient.make(targetOf(name, server.url, canary, { requestsPerMinute: 600 }))
      const fetch = yield* ResilientFetch.make(targetOf(name, server.url, canary))
      yield* client.chat(hello)
      yield* Effect.exit(client.embeddings({ input: "hello" }))
      assert.strictEqual(yield* chatThrough(fetch, server.url), 200)
      const coordination = yield* Coordination.Coordination
      const byKey = coordination.targets.get(name)
      assert.deepStrictEqual([...(byKey?.keys() ?? [])], [
        createHash("sha256").update(canary).digest("hex").slice(0, 16)
      ])
      assert.notInclude(inspect(coordination, { depth: Infinity, showHidden: true }), canary)
      assert.notInclude(jsonOf(coordination), canary)
      for (const value of reachable(coordination)) {
        assert.isFalse(Redacted.isRedacted(value), "no Redacted is kept")
        if (typeof value === "string") assert.notInclude(value, canary)
      }
      // The walk reached the state: the target's name is in it.
      assert.isTrue(reachable(coordination).includes(name))
    }).pipe(Effect.provide(HttpLive), Effect.provide(Coordination.layerMemory)))
})
