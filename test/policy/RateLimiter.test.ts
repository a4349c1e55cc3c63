/**
 * The rate limiter on the TestClock: when each demand goes (GCRA pacing of requests and tokens, a
 * burst of 1 s), what settling and giving back change, the deadline's refusal, the lanes, the limits
 * learned from headers, and the limiter in a resilient call.
 */
import { TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import {
  ConcurrencyGate,
  Coordination,
  Deadline,
  Failure,
  RateLimiter,
  Resilient,
  RetryBudget
} from "@resilient-ai/policy"
import { Attempts, Coordinations, EffectLine, Engine, FastPath, Limiters, Retries } from "@resilient-ai/policy/internal"
import { Clock, Duration, Effect, Fiber, Ref } from "effect"
import { invalidSettings, valid } from "./support.js"

const never = Number.POSITIVE_INFINITY

/** Lets forked fibers run up to their next suspension, without moving the clock. */
const settle = TestClock.adjust(0)

/** Forks `demand`s on `limiter`, each recording the TestClock's time when it was admitted, by name. */
const admitAll = (
  limiter: RateLimiter.Service,
  demands: ReadonlyArray<readonly [name: string, demand: RateLimiter.Demand]>
) =>
  Effect.gen(function*() {
    const admitted = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
    for (const [name, demand] of demands) {
      yield* EffectLine.fork(
        Effect.flatMap(limiter.admit(demand), () =>
          Effect.flatMap(
            Effect.clockWith((clock) => clock.currentTimeMillis),
            (at) => Ref.update(admitted, (all) => [...all, [name, at] as const])
          ))
      )
      yield* settle
    }
    return admitted
  })

const interactive = (tokens = 0, deadline = never): RateLimiter.Demand => ({ tokens, lane: "interactive", deadline })
const batch = (tokens = 0, deadline = never): RateLimiter.Demand => ({ tokens, lane: "batch", deadline })

describe("Limiters.settings", () => {
  it("fills in no limits, a burst of 1 s, half of it kept for interactive calls, and learning", () => {
    assert.deepStrictEqual(valid(Limiters.settings({ target: "llm" })), {
      target: "llm",
      requestsPerMinute: Number.POSITIVE_INFINITY,
      tokensPerMinute: Number.POSITIVE_INFINITY,
      burstMillis: 1_000,
      interactiveReserve: 0.5,
      learn: true
    })
  })

  it("names each bad setting", () => {
    assert.strictEqual(
      invalidSettings(RateLimiter.make({ target: "llm", requestsPerMinute: 0, interactiveReserve: 1 })),
      "rate limiter for llm: requestsPerMinute must be an integer >= 1, got 0; interactiveReserve must be in [0, 1), got 1"
    )
  })
})

describe("RateLimiter pacing", () => {
  it.effect("120 requests a minute: two at once (the 1 s burst), then one every 500 ms, never the minute's worth at once", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ target: "llm", requestsPerMinute: 120 })
      const admitted = yield* admitAll(limiter, ["a", "b", "c", "d", "e"].map((name) => [name, interactive()] as const))
      yield* TestClock.adjust(5_000)
      assert.deepStrictEqual(yield* Ref.get(admitted), [["a", 0], ["b", 0], ["c", 500], ["d", 1_000], ["e", 1_500]])
    }))

  it.effect("tokens: a request larger than the burst goes, and the next waits for its tokens; usage settles the difference", () =>
    Effect.gen(function*() {
      // 6,000 tokens a minute: 100 a second, 10 ms a token.
      const limiter = yield* RateLimiter.make({ target: "llm", tokensPerMinute: 6_000 })
      const big = yield* limiter.admit(interactive(300))
      assert.strictEqual((yield* limiter.snapshot).tokensWaitMillis, 2_000)
      // The provider says it used 90: 210 tokens (2.1 s) go back, and the next goes at once.
      yield* big.settle(90)
      assert.strictEqual((yield* limiter.snapshot).tokensWaitMillis, 0)
      const owing = yield* limiter.admit(interactive(10))
      // It used 210, not 10: the 200 it owes (2 s) make the one after it wait.
      yield* owing.settle(210)
      assert.strictEqual((yield* limiter.snapshot).tokensWaitMillis, 2_000)
    }))

  it.effect("a turn after the deadline is refused at once with RateLimitedLocally, and takes no place", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ target: "llm", requestsPerMinute: 60 })
      yield* limiter.admit(interactive())
      const refused = yield* Effect.flip(limiter.admit(interactive(0, 999)))
      assert.deepStrictEqual(
        { ...refused },
        {
          _tag: "RateLimitedLocally",
          target: "llm",
          dimension: "requests",
          availableAt: 1_000,
          retryAfter: Duration.millis(1_000)
        }
      )
      // Nothing was reserved by the refusal: the next demand gets the 1 s turn.
      const admitted = yield* admitAll(limiter, [["next", interactive()]])
      yield* TestClock.adjust(1_000)
      assert.deepStrictEqual(yield* Ref.get(admitted), [["next", 1_000]])
    }))

  it.effect("an interrupted wait gives its place back", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ target: "llm", requestsPerMinute: 60 })
      yield* limiter.admit(interactive())
      const waiting = yield* EffectLine.fork(limiter.admit(interactive()))
      yield* settle
      assert.strictEqual((yield* limiter.snapshot).requestsWaitMillis, 1_000)
      yield* Fiber.interrupt(waiting)
      assert.strictEqual((yield* limiter.snapshot).requestsWaitMillis, 0)
    }))

  it.effect("a batch call yields: it waits without holding a place, and an interactive call that comes meanwhile goes first", () =>
    Effect.gen(function*() {
      // 600 a minute (100 ms a request), a burst of 1 s, half of it kept for interactive calls: batch
      // goes only while its request fits in the bucket within 500 ms of now, five at once.
      const limiter = yield* RateLimiter.make({ target: "llm", requestsPerMinute: 600 })
      const admitted = yield* admitAll(
        limiter,
        ["b1", "b2", "b3", "b4", "b5", "b6"].map((name) => [name, batch()] as const)
      )
      yield* TestClock.adjust(50)
      const interactiveAdmitted = yield* admitAll(limiter, [["interactive", interactive()]])
      yield* TestClock.adjust(1_000)
      assert.deepStrictEqual(yield* Ref.get(interactiveAdmitted), [["interactive", 50]])
      // The sixth batch call was due at 100 ms; the interactive call took the place, so it went at 200 ms.
      assert.deepStrictEqual(yield* Ref.get(admitted), [["b1", 0], ["b2", 0], ["b3", 0], ["b4", 0], ["b5", 0], [
        "b6",
        200
      ]])
    }))

  it.effect("while batch calls saturate the key, an interactive call waits at most its own turn", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ target: "llm", requestsPerMinute: 600 })
      // A backlog of 100 batch calls: 10 s of the key's capacity.
      const batchAdmitted = yield* admitAll(
        limiter,
        Array.from({ length: 100 }, (_, index) => [`b${index}`, batch()] as const)
      )
      yield* TestClock.adjust(3_000)
      const waits: Array<number> = []
      for (let index = 0; index < 5; index++) {
        const start = yield* Clock.currentTimeMillis
        const admitted = yield* admitAll(limiter, [[`i${index}`, interactive()]])
        yield* TestClock.adjust(1_000)
        const [[, at]] = (yield* Ref.get(admitted)) as [readonly [string, number]]
        waits.push(at - start)
      }
      assert.deepStrictEqual(waits, [0, 0, 0, 0, 0])
      // The batch backlog still drains, at the key's rate less the interactive calls.
      yield* TestClock.adjust(10_000)
      assert.strictEqual((yield* Ref.get(batchAdmitted)).length, 100)
    }))
})

describe("RateLimiter learning", () => {
  it.effect("paces nothing until a limit is known; the provider's header sets it; a lower setting holds", () =>
    Effect.gen(function*() {
      const learning = yield* RateLimiter.make({ target: "llm" })
      assert.strictEqual(FastPath.limiter(learning)?.admitNow?.(1_000, "interactive"), Limiters.free)
      yield* learning.learn(Limiters.limitsOf((name) => ({ "x-ratelimit-limit-requests": "60" })[name]))
      const admitted = yield* admitAll(learning, ["a", "b", "c"].map((name) => [name, interactive()] as const))
      yield* TestClock.adjust(2_000)
      assert.deepStrictEqual(yield* Ref.get(admitted), [["a", 0], ["b", 1_000], ["c", 2_000]])

      const capped = yield* RateLimiter.make({ target: "llm", requestsPerMinute: 30 })
      yield* capped.learn({ requestsPerMinute: 60 })
      assert.strictEqual((yield* capped.snapshot).requestsPerMinute, 30)
    }))

  it("reads OpenAI's and Mistral's headers, and Anthropic's", () => {
    const headers = (entries: Record<string, string>) => (name: string) => entries[name]
    assert.deepStrictEqual(
      Limiters.limitsOf(headers({ "x-ratelimit-limit-requests": "500", "x-ratelimit-limit-tokens": "30000" })),
      { requestsPerMinute: 500, tokensPerMinute: 30_000 }
    )
    assert.deepStrictEqual(
      Limiters.limitsOf(
        headers({ "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-tokens-limit": "x" })
      ),
      { requestsPerMinute: 50, tokensPerMinute: undefined }
    )
  })
})

describe("RateLimiter in a resilient call", () => {
  const paced = (rateLimit: Omit<RateLimiter.Options, "target">) =>
    Resilient.policy({ target: "paced", maxAttempts: 3, baseDelay: "10 millis", maxDelay: "10 millis", rateLimit })

  it.effect("each attempt takes its place: three calls at 60 a minute start at 0, 1 and 2 s", () =>
    Effect.gen(function*() {
      const policy = yield* paced({ requestsPerMinute: 60 })
      const started = yield* Ref.make<ReadonlyArray<number>>([])
      const call = Effect.flatMap(
        Effect.clockWith((clock) => clock.currentTimeMillis),
        (at) => Ref.update(started, (all) => [...all, at])
      ).pipe(Resilient.retry(policy))
      const fibers = yield* Effect.forEach([1, 2, 3], () => EffectLine.fork(call))
      yield* settle
      yield* TestClock.adjust(2_000)
      yield* Effect.forEach(fibers, Fiber.join)
      assert.deepStrictEqual(yield* Ref.get(started), [0, 1_000, 2_000])
    }).pipe(Effect.provide(Coordination.layerMemory)))

  it.effect("a call whose turn comes after its deadline stops with rate-limited-locally, and nothing is sent", () =>
    Effect.gen(function*() {
      const policy = yield* paced({ requestsPerMinute: 60 })
      const sent = yield* Ref.make(0)
      const call = Resilient.retry(Ref.update(sent, (n) => n + 1), policy)
      yield* call
      const failed = yield* Effect.flip(call.pipe(Deadline.within("500 millis")))
      assert.strictEqual(failed.reason, "rate-limited-locally")
      assert.strictEqual(failed.last._tag, "RateLimitedLocally")
      assert.strictEqual((failed.last as unknown as Failure.RateLimitedLocally).availableAt, 1_000)
      assert.strictEqual(yield* Ref.get(sent), 1)
    }).pipe(Effect.provide(Coordination.layerMemory)))

  it.effect("the transport's usage settles the reservation, and the limits it reports are learned", () =>
    Effect.gen(function*() {
      const policy = yield* paced({})
      // The transport hands the usage and the limits it heard back with its answer.
      const answer = (context: Attempts.AttemptContext) =>
        Effect.sync(() => {
          const report = new Attempts.Report()
          context.reached("headers", report)
          report.usage = 100
          report.limits = { requestsPerMinute: 60 }
          return new Attempts.Answered(undefined, report)
        })
      const limiter = yield* RateLimiter.make({ target: "paced", tokensPerMinute: 6_000 })
      const services = Coordinations.targetServices({
        budget: RetryBudget.unlimited,
        gate: ConcurrencyGate.unbounded,
        limiter
      })
      // Reserves 1,000 tokens (10 s at 100 a second); the provider used 100, so 900 (9 s) go back.
      yield* Engine.run(answer, policy, services, { tokens: 1_000 })
      assert.deepStrictEqual(yield* limiter.snapshot, {
        requestsPerMinute: 60,
        tokensPerMinute: 6_000,
        requestsWaitMillis: 0,
        tokensWaitMillis: 0
      })
      // A second later the bucket has room again. An attempt that never reached the provider gives
      // its place back.
      yield* TestClock.adjust(1_000)
      const refused = Effect.fail(new Failure.ConnectFailed({ detail: "refused", code: "ECONNREFUSED" }))
      yield* Effect.flip(Retries.retryWith(refused, policy, services, { tokens: 1_000, maxAttempts: 1 }))
      assert.strictEqual((yield* limiter.snapshot).tokensWaitMillis, 0)
      // Without the usage, the reservation stands as made: 10 s, 9 past the burst.
      yield* Retries.retryWith(Effect.void, policy, services, { tokens: 1_000 })
      assert.strictEqual((yield* limiter.snapshot).tokensWaitMillis, 9_000)
    }).pipe(Effect.provide(Coordination.layerMemory)))
})
