/**
 * The scenarios each SDK's test on `ResilientFetch` plays (sdks/test/*.test.ts): the SDK on a fetch
 * to the fault server, aborted in the backoff's sleep, reading a stream that breaks, or left
 * retrying. Each drives the SDK through a function its test gives and returns what the SDK's caller
 * got and what the server and the adapter saw, for the test to assert on.
 */
import { ResilientFetch, type Target } from "@resilient-ai/client"
import { EffectLine } from "@resilient-ai/policy/internal"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect, Fiber } from "effect"
import {
  captureLogs,
  recordingSleeps,
  rejection,
  sdkRetriesOf,
  targetAt,
  TestClock,
  untilSleeping
} from "../../test/client/sdkSupport.js"

/** A fault server playing `plan`, a target at it, and the `ResilientFetch` that sends to that target. */
export const atFaultServer = (plan: FaultPlan.Plan, options: Partial<Target.Options> = {}) =>
  Effect.gen(function*() {
    const server = yield* FaultServer.make(plan)
    const target = yield* targetAt(server.url, options)
    const fetch = yield* ResilientFetch.make(target)
    return { server, target, fetch }
  })

/** How many requests reached `server`. */
export const requestsTo = (server: FaultServer.Service): Effect.Effect<number> =>
  Effect.map(server.arrivals, (arrivals) => arrivals.length)

/**
 * A call aborted through `signal` while the policy sleeps before its second attempt (a 503 with
 * `Retry-After: 5`, on the TestClock, which never moves by itself: only the abort can end the
 * sleep): what the call rejected with, and the requests sent by a minute later.
 */
export const abortedInBackoff = (
  call: (fetch: ResilientFetch.Fetch, baseURL: string, signal: AbortSignal) => Promise<unknown>
) =>
  recordingSleeps(Effect.gen(function*() {
    const { fetch, server } = yield* atFaultServer({ otherwise: { _tag: "Status", status: 503, retryAfter: "5" } })
    const controller = new AbortController()
    const rejected = yield* EffectLine.fork(rejection(() => call(fetch, server.url, controller.signal)))
    yield* untilSleeping(5_000)
    controller.abort()
    const error = yield* Fiber.join(rejected)
    yield* TestClock.adjust("1 minute")
    return { error, requests: yield* requestsTo(server) }
  }))

/**
 * A stream answered 503 first, then broken after two chunks: the chunks that reached the SDK's caller
 * (`consume` pushes each onto `received`), what the stream failed with, and the requests sent.
 */
export const brokenStream = (
  consume: (fetch: ResilientFetch.Fetch, baseURL: string, received: Array<unknown>) => Promise<void>
) =>
  Effect.gen(function*() {
    const { fetch, server } = yield* atFaultServer({
      steps: [{ _tag: "Status", status: 503 }, { _tag: "StreamBreak", afterChunks: 2 }]
    })
    const received: Array<unknown> = []
    const error = yield* rejection(() => consume(fetch, server.url, received))
    return { received, error, requests: yield* requestsTo(server) }
  })

/**
 * A call whose every attempt fails as `fault` says, on a target that makes one attempt, with the
 * SDK (or a layer of it) left retrying: what the call rejected with, each request's
 * `x-stainless-retry-count`, the SDK's retries the adapter counted, and its warnings of them.
 */
export const leftRetrying = (
  fault: FaultPlan.Fault,
  call: (fetch: ResilientFetch.Fetch, baseURL: string) => Promise<unknown>
) =>
  Effect.gen(function*() {
    const logs = yield* captureLogs
    const { fetch, server, target } = yield* atFaultServer({ otherwise: fault }, { maxAttempts: 1 }).pipe(
      Effect.provide(logs.layer)
    )
    const error = yield* rejection(() => call(fetch, server.url))
    return {
      error,
      retryCounts: (yield* server.arrivals).map((arrival) => arrival.headers["x-stainless-retry-count"]),
      sdkRetries: yield* sdkRetriesOf(target),
      warnings: (yield* logs.lines).filter((line) => line.message.includes("retries this target's calls itself"))
        .length
    }
  })
