import { yieldNow } from "#test-line"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Failure, Health, type RetryBudget } from "@resilient-ai/policy"
import { Attempts, Diagnoses, EffectLine, FastPath, Meters } from "@resilient-ai/policy/internal"
import {
  Contention,
  SimulatedProvider,
  Simulation,
  Storm,
  StormPolicies,
  StormRender,
  StormScenarios,
  StormSections
} from "@resilient-ai/storm/internal"
import { Clock, Duration, Effect, Exit, Fiber, Random } from "effect"
import * as OffThread from "./offThread.js"

describe("Simulation", () => {
  it("jumps from event to event: an hour of sleeping takes no real time", () => {
    const outcome = Simulation.run(
      Effect.gen(function*() {
        yield* Effect.sleep("1 hour")
        return yield* Clock.currentTimeMillis
      }),
      { seed: 1 }
    )
    assert.strictEqual(outcome.value, 3_600_000)
    assert.strictEqual(outcome.simulatedMillis, 3_600_000)
    // Real sleeping would take the hour; a busy machine can make even no work take a while.
    assert.isBelow(outcome.wallMillis, outcome.simulatedMillis / 1_000)
  })

  it("runs fibers in the order their timers fall, and repeats a run exactly for a seed", () => {
    const program = Effect.gen(function*() {
      const order: Array<string> = []
      const sleeper = (name: string, millis: number) =>
        Effect.andThen(Effect.sleep(millis), Effect.sync(() => void order.push(name)))
      yield* Effect.all([sleeper("c", 30), sleeper("a", 10), sleeper("b", 20)], { concurrency: "unbounded" })
      const draws = yield* Effect.all([Random.next, Random.next])
      return { order, draws }
    })
    const first = Simulation.run(program, { seed: 42 })
    const second = Simulation.run(program, { seed: 42 })
    const other = Simulation.run(program, { seed: 43 })
    assert.deepStrictEqual(first.value.order, ["a", "b", "c"])
    assert.deepStrictEqual(first.value.draws, second.value.draws)
    assert.notDeepEqual(first.value.draws, other.value.draws)
  })

  it("stops at the horizon, and reports a program that failed", () => {
    assert.throws(() => Simulation.run(Effect.never, { seed: 1, horizonMillis: 1_000 }), /stalled/)
    assert.throws(() => Simulation.run(Effect.fail("boom"), { seed: 1 }), /simulation failed/)
  })
})

describe("SimulatedProvider", () => {
  const withProvider = <A>(
    options: SimulatedProvider.Options,
    use: (provider: SimulatedProvider.Provider) => Effect.Effect<A>
  ) =>
    Simulation.run(
      Effect.flatMap(Simulation.CurrentClock, (clock) => use(new SimulatedProvider.Provider(clock, options))),
      {
        seed: 1
      }
    ).value

  it("serves as many requests at once as it has slots, queues the rest, refuses beyond the queue", () => {
    const result = withProvider({ slots: 2, serviceMillis: 100, queueLimit: 1 }, (provider) =>
      Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        return yield* Effect.all(
          Array.from({ length: 4 }, (_, call) =>
            Effect.gen(function*() {
              const exit = yield* Effect.exit(provider.request(call))
              return { ok: Exit.isSuccess(exit), at: (yield* Clock.currentTimeMillis) - started }
            })),
          { concurrency: "unbounded" }
        )
      }))
    assert.deepStrictEqual(result, [
      { ok: true, at: 100 },
      { ok: true, at: 100 },
      { ok: true, at: 200 },
      { ok: false, at: 0 }
    ])
  })

  it("serves a request whose caller gave up, and counts it as wasted", () => {
    const result = withProvider({ slots: 1, serviceMillis: 100, queueLimit: 10 }, (provider) =>
      Effect.gen(function*() {
        const fiber = yield* EffectLine.fork(provider.request(0))
        yield* Effect.sleep(50)
        yield* Fiber.interrupt(fiber)
        yield* Effect.sleep(100)
        return { served: provider.served, wasted: provider.wasted }
      }))
    assert.deepStrictEqual(result, { served: 1, wasted: 1 })
  })

  it("a hanging outage queues without serving; capacity comes back with the queue still there", () => {
    const result = withProvider(
      {
        slots: 1,
        serviceMillis: 100,
        queueLimit: 10,
        incidents: [{ _tag: "Outage", fromMillis: 0, toMillis: 1_000, mode: "hang" }]
      },
      (provider) =>
        Effect.gen(function*() {
          const exit = yield* Effect.exit(provider.request(0))
          return { ok: Exit.isSuccess(exit), at: yield* Clock.currentTimeMillis }
        })
    )
    assert.deepStrictEqual(result, { ok: true, at: 1_100 })
  })
})

describe("SimulatedProvider, the health endpoint", () => {
  /** When each of `requests` probes ended, from the start, and whether it was answered. */
  const probing = (options: SimulatedProvider.Options, requests: number, load = 0) =>
    Simulation.run(
      Effect.gen(function*() {
        const provider = new SimulatedProvider.Provider(yield* Simulation.CurrentClock, options)
        // Inference requests that fill the slots and the queue.
        for (let call = 0; call < load; call++) yield* EffectLine.forkDaemon(Effect.exit(provider.request(call)))
        const probes = yield* Effect.all(
          Array.from({ length: requests }, () =>
            Effect.gen(function*() {
              const exit = yield* Effect.exit(provider.probe())
              return { up: Exit.isSuccess(exit), at: yield* Clock.currentTimeMillis }
            })),
          { concurrency: "unbounded" }
        )
        return { probes, arrivals: provider.series.arrivals[0] ?? 0, counted: provider.probes }
      }),
      { seed: 1, horizonMillis: 60_000 }
    ).value

  it("answers fast while the model is full: it is served apart from the slots and the queue, and not counted", () => {
    const result = probing({ slots: 1, serviceMillis: 1_000, queueLimit: 2 }, 3, 5)
    assert.deepStrictEqual(result.probes, Array.from({ length: 3 }, () => ({ up: true, at: 20 })))
    assert.strictEqual(result.arrivals, 5)
    assert.strictEqual(result.counted, 3)
  })

  it("is down during an outage: unanswered until capacity is back when it hangs, a 503 when it refuses", () => {
    const outage = (mode: "hang" | "refuse"): SimulatedProvider.Options => ({
      slots: 1,
      serviceMillis: 100,
      queueLimit: 10,
      probeMillis: 5,
      incidents: [{ _tag: "Outage", fromMillis: 0, toMillis: 3_000, mode }]
    })
    assert.deepStrictEqual(probing(outage("hang"), 1).probes, [{ up: true, at: 3_005 }])
    assert.deepStrictEqual(probing(outage("refuse"), 1).probes, [{ up: false, at: 0 }])
  })
})

describe("SimulatedProvider, an API key's limits", () => {
  // 10 requests and 1000 tokens a second, one second's worth in each bucket.
  const key = {
    slots: 100,
    serviceMillis: 100,
    queueLimit: 0,
    rateLimit: { requestsPerMinute: 600, tokensPerMinute: 60_000 }
  }
  const tokens = { prompt: 300, maxTokens: 500, completion: 100 }
  /** An attempt as the engine reads it: recording what the provider's answer reports, handing back the outcome. */
  const attempt = () => {
    const told: { usage: Array<number>; limits: Array<unknown> } = { usage: [], limits: [] }
    const record = (report: Attempts.Report) => {
      if (report.usage !== undefined) told.usage.push(report.usage)
      if (report.limits !== undefined) told.limits.push(report.limits)
    }
    return {
      told,
      send: <A, E>(request: Effect.Effect<A | Attempts.Answered<A>, E | Attempts.Reported<E>>) =>
        Effect.mapBoth(request, {
          onFailure: (failure) => {
            if (!(failure instanceof Attempts.Reported)) return failure
            record(failure.report)
            return failure.failure
          },
          onSuccess: (answer) => {
            if (!(answer instanceof Attempts.Answered)) return answer
            record(answer.report)
            return answer.value
          }
        })
    }
  }

  it("counts a request at prompt + max_tokens; beyond a second's worth, a 429 with retry-after; served, it settles with usage", () => {
    const { told, send } = attempt()
    const result = Simulation.run(
      Effect.gen(function*() {
        const provider = new SimulatedProvider.Provider(yield* Simulation.CurrentClock, key)
        const first = yield* EffectLine.fork(send(provider.request(0, tokens)))
        yield* yieldNow
        // 800 of the 1000 tokens are taken until the first is served: a second 800 does not fit.
        const refused = yield* Effect.flip(send(provider.request(1, tokens)))
        yield* Fiber.join(first)
        // Served at 100 ms: the 400 of its max_tokens not generated came back, and 100 ms refilled 100
        // more (700); 100 ms later, 800 fit again.
        yield* Effect.sleep(100)
        const second = yield* Effect.exit(send(provider.request(2, tokens)))
        return { refused, second: Exit.isSuccess(second), rateLimited: provider.rateLimited }
      }),
      { seed: 1 }
    ).value
    assert.strictEqual(result.refused._tag, "RateLimited")
    assert.strictEqual(Duration.toMillis((result.refused as Failure.RateLimited).retryAfter!), 1_000)
    assert.isTrue(result.second)
    assert.strictEqual(result.rateLimited, 1)
    assert.deepStrictEqual(told.usage, [400, 400])
    assert.deepInclude(told.limits, { requestsPerMinute: 600, tokensPerMinute: 60_000 })
  })

  it("a request without tokens is not counted: the other scenarios are unchanged", () => {
    const served = Simulation.run(
      Effect.gen(function*() {
        const provider = new SimulatedProvider.Provider(yield* Simulation.CurrentClock, key)
        yield* Effect.all(Array.from({ length: 30 }, (_, call) => provider.request(call)), { concurrency: "unbounded" })
        return provider.rateLimited
      }),
      { seed: 1 }
    ).value
    assert.strictEqual(served, 0)
  })
})

describe("StormPolicies.grpcThrottling (gRFC A6: maxTokens 10, tokenRatio 0.1)", () => {
  const tokens = (throttle: RetryBudget.Service) => Effect.map(throttle.snapshot, (snapshot) => snapshot.allowance)
  const overloaded = new Failure.Overloaded({ status: 503 })

  it.effect("only a failure the policy retries, or a pushback not to retry, spends a token", () =>
    Effect.gen(function*() {
      const throttle = yield* StormPolicies.grpcThrottling(10, 0.1)
      const fail = (failure: Failure.Failure) => FastPath.budget(throttle)!.recordFailure!(failure, 1)
      // Terminal: a malformed request, a spent quota, a body that breaks the contract.
      yield* fail(new Failure.ClientError({ status: 400 }))
      yield* fail(new Failure.QuotaExhausted({ status: 429, providerCode: "insufficient_quota" }))
      yield* fail(new Failure.ContractViolation({ issues: [] }))
      assert.strictEqual(yield* tokens(throttle), 10)
      yield* fail(overloaded)
      assert.strictEqual(yield* tokens(throttle), 9)
      // Ambiguous, which the replay-safe references retry.
      yield* fail(new Failure.ReadTimeout({ timeout: Duration.seconds(1), phase: "body" }))
      assert.strictEqual(yield* tokens(throttle), 8)
      // Terminal by its `x-should-retry: false`, and for that very reason a pushback that counts.
      yield* fail(new Failure.ServerError({ status: 500, shouldRetry: false }))
      assert.strictEqual(yield* tokens(throttle), 7)
    }))

  it.effect("a success earns exactly tokenRatio, up to maxTokens; retries stop at maxTokens / 2", () =>
    Effect.gen(function*() {
      const throttle = yield* StormPolicies.grpcThrottling(10, 0.1)
      for (let i = 0; i < 4; i++) yield* FastPath.budget(throttle)!.recordFailure!(overloaded, 1)
      assert.isTrue(yield* throttle.tryAcquire(overloaded), "6 tokens")
      yield* FastPath.budget(throttle)!.recordFailure!(overloaded, 1)
      assert.isFalse(yield* throttle.tryAcquire(overloaded), "5 tokens: at the threshold, no retry")
      yield* throttle.recordSuccess(1)
      assert.strictEqual(yield* tokens(throttle), 5.1)
      assert.isTrue(yield* throttle.tryAcquire(overloaded), "5.1 tokens")
      for (let i = 0; i < 9; i++) yield* throttle.recordSuccess(1)
      assert.strictEqual(yield* tokens(throttle), 6, "ten successes earn one token, not 5.999…")
      for (let i = 0; i < 100; i++) yield* throttle.recordSuccess(1)
      assert.strictEqual(yield* tokens(throttle), 10)
    }))

  it("through the reference policy: terminal failures leave it able to retry", () => {
    const grpc = StormPolicies.references.find((contender) => contender.name === "grpc-throttling")!
    const { value } = Simulation.run(
      Effect.gen(function*() {
        const call = yield* grpc.make({ attemptTimeoutMillis: 1_000, providerSlots: 1 })
        // Ten calls the server rejects as malformed: one attempt each, and no token spent.
        for (let i = 0; i < 10; i++) {
          yield* Effect.exit(call(Effect.fail(new Failure.ClientError({ status: 400 })), 60_000))
        }
        // Then a call that is overloaded once: the throttle still lets it retry.
        let attempts = 0
        const flaky = Effect.suspend(() => ++attempts === 1 ? Effect.fail(overloaded) : Effect.void)
        const exit = yield* Effect.exit(call(flaky, 60_000))
        return { attempts, ok: Exit.isSuccess(exit) }
      }),
      { seed: 1 }
    )
    assert.deepStrictEqual(value, { attempts: 2, ok: true })
  })
})

// CPU-bound simulations (seconds each): the suite's other workers and the fleet test's processes
// share the two cores with them, so their time limit is generous; how long they take is not the test.
// A run is synchronous, and on a busy machine one takes half a minute: they run in a thread of their
// own (`offThread.ts`), named by their scenario's maker and arguments, and leave this worker free to
// answer vitest, which fails the whole run when the worker's call to it ("onTaskUpdate") has waited
// 60 s for its answer.
describe("storm scenarios, small", { timeout: 300_000 }, () => {
  afterAll(OffThread.stop)
  const runs = OffThread.runs
  const find = (runs: ReadonlyArray<Storm.Run>, name: string) => runs.find((run) => run.contender.name === name)!
  const naive = StormPolicies.references.find((contender) => contender.name === "naive")!
  const tenacity = StormPolicies.references.find((contender) => contender.name === "tenacity-style")!

  it("S1: ours with a fixed ratio adds at most that ratio; the naive policy about 20%", async () => {
    const [ours, reference] = await runs(["correlatedFailure", 0.5], [
      StormPolicies.oursManagedFixedRatio,
      naive
    ])
    const perCall = (run: Storm.Run) => run.attempts / run.calls.length
    assert.isAtMost(perCall(ours!), 1.1)
    assert.isAbove(perCall(reference!), 1.15)
  })

  it("S1 and S1b: our budget learns whether retries pay: it stops the useless ones and makes the useful ones", async () => {
    const [correlated] = await runs(["correlatedFailure", 0.5], [StormPolicies.oursManaged])
    const [independent, fixedRatio] = await runs(["independentFailure", 0.5], [
      StormPolicies.oursManaged,
      StormPolicies.oursManagedFixedRatio
    ])
    const perCall = (run: Storm.Run) => run.attempts / run.calls.length
    const recovered = (run: Storm.Run) => {
      const failedFirst = run.calls.filter((call) => call.attempts > 1 || !call.ok)
      return failedFirst.filter((call) => call.ok).length / failedFirst.length
    }
    assert.isAtMost(perCall(correlated!), 1.02)
    assert.isAtLeast(recovered(independent!), 0.95)
    // A fixed 10% cannot make them all when a tenth of first attempts fail.
    assert.isBelow(recovered(fixedRatio!), 0.9)
  })

  it("S2: ours recovers after the outage while the naive policy stays down", async () => {
    const scenario = ["outageThenRecovery", 0.25] as const
    const restored = StormScenarios.outageMillis(0.25).to / 1000
    const [ours, reference] = await runs(scenario, [StormPolicies.oursManaged, naive])
    assert.isAtMost(Storm.recoverySeconds(ours!.goodput, restored, 80) ?? Infinity, 30)
    assert.isUndefined(Storm.recoverySeconds(reference!.goodput, restored, 80))
    assert.isBelow(ours!.wasted, reference!.wasted / 10)
    assert.isDefined(ours!.probes)
    assert.isUndefined(reference!.probes, "only ours probes")
  })

  /** The probes at which the diagnosis changed, as [when, to what]. */
  const changes = (run: Storm.Run) => {
    let current: Health.Diagnosis = "healthy"
    const found: Array<[number, Health.Diagnosis]> = []
    for (const probe of run.probes ?? []) {
      if (probe.diagnosis !== current) found.push([probe.at, probe.diagnosis])
      current = probe.diagnosis
    }
    return found
  }

  it("S2 with the probe: provider-degraded from the second failed probe, healthy at the second answer, never self-inflicted; the ramp starts there, not at the first call that got through", async () => {
    const scenario = ["outageThenRecovery", 0.25] as const
    const { from, to } = StormScenarios.outageMillis(0.25)
    const { intervalMillis, timeoutMillis } = StormScenarios.probe
    const [ours, fixedCapacity, unprobed] = [
      ...(await runs(scenario, [StormPolicies.oursManaged, StormPolicies.oursFixedCapacity])),
      ...(await runs(scenario, [StormPolicies.oursManaged], { withoutProbe: true }))
    ]
    // The probe at the outage's start times out, and so does the next: degraded when that one gives up.
    const degradedAt = from + intervalMillis + timeoutMillis
    // The probe at restoration is answered (20 ms), and so is the next: the upAfter-th answer says it is back.
    const backAt = to + intervalMillis + 20
    assert.deepStrictEqual(changes(ours!), [[degradedAt, "provider-degraded"], [backAt, "healthy"]])
    assert.isTrue(ours!.probes!.every((probe) => probe.diagnosis !== "self-inflicted"))
    for (const run of [ours!, fixedCapacity!]) {
      const inOutage = run.probes!.filter((probe) => probe.at >= from && probe.at < to)
      assert.isTrue(inOutage.every((probe) => probe.diagnosis !== "self-inflicted"), run.contender.name)
    }
    // At this size the outage lasts 15 s, so the share is about half; at full size (60 s) it is 88%.
    assert.closeTo((to - degradedAt) / (to - from), 8 / 15, 1e-9)

    const probes = ours!.probes!
    const back = probes.findIndex((probe) => probe.providerBack)
    assert.strictEqual(probes[back]!.at, backAt)
    // upAfter (2) answered probes in a row, the one before them down.
    assert.deepStrictEqual(probes.slice(back - 2, back + 1).map((probe) => probe.up), [false, true, true])
    const backSecond = Math.floor(backAt / 1000)
    // The gate's health at the end of each second: degraded until the probe's verdict, recovering from it.
    const firstRecovering = (run: Storm.Run) =>
      run.health.findIndex((health, second) => second >= to / 1000 && health === "recovering")
    assert.strictEqual(ours!.health[backSecond - 1], "degraded")
    assert.strictEqual(firstRecovering(ours!), backSecond)
    // Without the probe, the first call that got through after restoration started the ramp.
    const firstSuccess = Math.min(
      ...unprobed!.calls.filter((call) => call.ok && call.endedAt >= to).map((call) => call.endedAt)
    )
    assert.strictEqual(firstRecovering(unprobed!), Math.floor(firstSuccess / 1000))
    assert.isBelow(firstRecovering(unprobed!), backSecond)
  })

  it("S7: a stampede on a healthy provider is self-inflicted for both presets, never provider-degraded, and healthy again after", async () => {
    const scenario = ["clientStampede", 0.5] as const
    const { from, to } = StormScenarios.clientStampedeMillis(0.5)
    for (const run of await runs(scenario, [StormPolicies.oursManaged, StormPolicies.oursFixedCapacity])) {
      const found = changes(run)
      assert.deepStrictEqual(found.map(([, diagnosis]) => diagnosis), ["self-inflicted", "healthy"], run.contender.name)
      const [[selfInflicted], [healthy]] = found as [[number, Health.Diagnosis], [number, Health.Diagnosis]]
      // The managed preset's calls fail only once they miss their deadline (10 s) in its gate; the next
      // probe says so (its answer takes 20 ms).
      const { intervalMillis } = StormScenarios.probe
      assert.isAbove(selfInflicted, from, run.contender.name)
      assert.isAtMost(selfInflicted, from + 10_000 + intervalMillis + 20, run.contender.name)
      // The trouble leaves the 30 s window after the stampede, after a deadline, at a probe.
      assert.isAbove(healthy, to, run.contender.name)
      assert.isAtMost(healthy, to + 30_000 + 10_000 + intervalMillis + 20, run.contender.name)
      // The probe answers throughout, so the calls alone say the same: the probe is what tells S2 apart.
      assert.isTrue(run.probes!.every((probe) => probe.up && probe.callsAlone === probe.diagnosis))
    }
  })

  it("S7 at full size: the report's diagnosis goals hold", async () => {
    const section = await OffThread.section("s7", 1)
    assert.deepStrictEqual(section.goals.map((goal) => goal.met), [true, true])
    assert.strictEqual(section.figures["ours-managed"]!.providerDegraded, 0)
    assert.isAtLeast(section.figures["ours-fixed-capacity"]!.selfInflictedShare!, 0.7)
    assert.strictEqual(section.timeline?.rows.length, 2)
  })

  // In this process, where the metrics are read: two runs of a few seconds, with a turn of the event loop between.
  it("the diagnosis reads the real metrics: a run's differences are its own, run after run in one process", async () => {
    const scenario = StormScenarios.clientStampede(0.5)
    const here = async () => {
      await new Promise((resolve) => setImmediate(resolve))
      return Storm.run(scenario, StormPolicies.oursManaged, 1)
    }
    const before = Diagnoses.callTotals("ours-managed", undefined)
    const first = await here()
    const after = Diagnoses.callTotals("ours-managed", undefined)
    const second = await here()
    // Every attempt the metrics counted reached the provider, and nothing else counted for the target.
    assert.strictEqual(after.attempts - before.attempts, first.attempts)
    assert.isAbove(before.attempts + after.attempts, 0)
    assert.deepStrictEqual(second.probes, first.probes)
  })

  it("S3: ours spreads a synchronised burst; no jitter puts it all in one 10 ms slice", async () => {
    const all = await runs(["synchronisedBurst", 200], [StormPolicies.oursManaged, naive, tenacity])
    const peak = (run: Storm.Run) => Math.max(...run.slices.slice(StormScenarios.burstAtMillis / 10 + 1))
    assert.isBelow(peak(find(all, "ours-managed")) / 200, 0.05)
    assert.strictEqual(peak(find(all, "naive")), 200)
    // Only ours waits out the 2 s Retry-After: every call succeeds on its second attempt.
    assert.strictEqual(find(all, "ours-managed").attempts, 400)
    assert.strictEqual(find(all, "ours-managed").calls.filter((call) => call.ok).length, 200)
  })

  it("S4: with the ramp, load at recovery stays within capacity; without it, the provider is overloaded again", async () => {
    const section = await OffThread.section("s4", 1, 0.5, [StormPolicies.oursManaged, StormPolicies.oursManagedNoRamp])
    const ours = section.figures["ours-managed"]!
    const noRamp = section.figures["ours-managed-no-ramp"]!
    assert.isAtMost(ours.peakLoad!, 1)
    assert.strictEqual(ours.refusedFirstWindow, 0)
    assert.isAbove(noRamp.peakLoad!, 1)
    assert.isAbove(noRamp.refusedFirstWindow!, 0)
  })

  // At full size: shortened, the ramp (5 s steps) is still climbing when the provider is whole again.
  it("S4: with the limit learned, no relapse after recovery and the limit ends near what the provider holds", async () => {
    const section = await OffThread.section("s4", 1, 1, [
      StormPolicies.oursManaged,
      StormPolicies.oursManagedFixedLimit,
      StormPolicies.oursManagedNoRamp
    ])
    const ours = section.figures["ours-managed"]!
    const fixedLimit = section.figures["ours-managed-fixed-limit"]!
    assert.isAtLeast(ours.lowestGoodputAfterFull!, 0.9)
    assert.isBelow(fixedLimit.lowestGoodputAfterFull!, 0.5)
    assert.isAtMost(Math.abs(ours.limitAfterFull! - 60), 12)
    assert.deepStrictEqual(section.goals.map((goal) => goal.met), [true, true, true])
  })

  it("S5: shedding keeps p99 near the service time; retrying into the pool does not", async () => {
    const [ours, reference] = await runs(["saturatedPool", 0.25], [StormPolicies.oursFixedCapacity, naive])
    const p99 = (run: Storm.Run) =>
      Meters.quantile(run.calls.filter((call) => call.ok).map((call) => call.endedAt - call.startedAt), 0.99)!
    assert.isAtMost(p99(ours!), 2 * StormScenarios.serviceMillis)
    assert.isAbove(p99(reference!), 10 * StormScenarios.serviceMillis)
  })

  it("S6: paced, no 429s and goodput at the key's limit; the lanes keep interactive calls from waiting behind batch", async () => {
    const section = await OffThread.section("s6", 1, 0.5, [
      StormPolicies.oursManaged,
      StormPolicies.oursPaced,
      StormPolicies.oursPacedNoLanes
    ])
    const today = section.figures["ours-managed"]!
    const paced = section.figures["ours-paced"]!
    const noLanes = section.figures["ours-paced-no-lanes"]!
    // Without pacing, the key's limit is found through 429s.
    assert.isAbove(today.rateLimited!, 0)
    assert.strictEqual(paced.rateLimited, 0)
    assert.isAtLeast(paced.goodputShare!, 0.95)
    assert.isAbove(paced.goodputShare!, today.goodputShare!)
    assert.isBelow(paced.interactiveWaitP99!, 1_000)
    assert.strictEqual(paced.interactiveSuccessShare, 1)
    // First come first served, interactive calls queue behind batch ones: some wait past their deadline.
    assert.isBelow(noLanes.interactiveSuccessShare!, 0.99)
    assert.deepStrictEqual(section.goals.map((goal) => goal.met), [true, true, true])
  })

  it("S6: the Bottleneck-style limiter spaces requests at the key's requests per minute, whatever their tokens", () => {
    const { value } = Simulation.run(
      Effect.gen(function*() {
        const call = yield* StormPolicies.bottleneckRps.make({
          attemptTimeoutMillis: 30_000,
          providerSlots: 1,
          rateLimit: { requestsPerMinute: 600 }
        })
        const sent: Array<number> = []
        const attempt = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => void sent.push(now)))
        yield* Effect.all(Array.from({ length: 5 }, () => call(attempt, 60_000, { tokens: 50_000, lane: "batch" })), {
          concurrency: "unbounded"
        })
        return sent
      }),
      { seed: 1 }
    )
    assert.deepStrictEqual(value, [0, 100, 200, 300, 400])
  })

  it("contention: full jitter takes fewer calls than exponential backoff and than none", () => {
    const calls = (algorithm: Contention.Algorithm) =>
      Contention.experiment(algorithm, { clients: 40, trials: 3, seed: 1 }).calls
    const full = calls("full-jitter")
    assert.isBelow(full, calls("exponential"))
    assert.isBelow(full, calls("none"))
  })
})

describe("StormRender", () => {
  it("renders tables and an SVG chart", async () => {
    const section = StormSections.s3(1, 50)
    assert.deepStrictEqual(section.table.columns, [
      "policy",
      "attempts",
      "successes",
      "peak attempts in 10 ms",
      "peak / burst"
    ])
    assert.strictEqual(section.table.rows.length, StormPolicies.all.length)
    assert.match(StormRender.textTable(section.table), /^policy +attempts/)
    assert.match(StormRender.markdownTable(section.table), /^\| policy \| attempts \|/)
    const svg = await StormRender.svg(section.chart, section.title)
    assert.match(svg, /^<svg /)
    assert.include(svg, "ours-managed")
  })
})
