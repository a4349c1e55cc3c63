/**
 * The storm simulator: a fleet of callers, open-loop, against a simulated provider, under each
 * retry policy in turn, on the same scenarios and the same seed.
 *
 * The seeds' argument is arithmetic about fleets, and a unit test cannot show it: retries add
 * load exactly when capacity is lowest, fixed exponential backoff makes synchronised spikes, a
 * recovering provider is knocked over by the backlog, and a policy can keep a system failed after
 * the trigger is gone. Each scenario makes one of those happen and measures it, for ours and for
 * the references, running the shipped policy code in simulated time (see `Simulation`).
 */
import { ConcurrencyGate } from "@resilient-ai/policy"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Random from "effect/Random"
import { mean, sum } from "./internal/series.js"
import * as SimulatedProvider from "./SimulatedProvider.js"
import * as Simulation from "./Simulation.js"
import * as StormPolicies from "./StormPolicies.js"

/** How callers arrive. */
export interface Workload {
  /** Calls per second, as a function of simulated time (open loop: arrivals do not wait for answers). */
  readonly ratePerSecond: (atMillis: number) => number
  /** Arrivals stop here. */
  readonly untilMillis: number
  /** Calls that all start at the same instant, on top of the rate. */
  readonly burst?: { readonly atMillis: number; readonly calls: number } | undefined
  /** Each call's deadline, from its start. */
  readonly deadlineMillis: number
}

/** A scenario: a provider with its incidents, a workload, and how long to watch. */
export interface Scenario {
  readonly id: string
  readonly title: string
  readonly provider: SimulatedProvider.Options
  readonly workload: Workload
  readonly attemptTimeoutMillis: number
  readonly horizonMillis: number
  /** The policies compared; the standard set unless a scenario needs another. */
  readonly contenders?: ReadonlyArray<StormPolicies.Contender> | undefined
}

/** One call, as its caller saw it. */
export interface CallRecord {
  readonly startedAt: number
  readonly endedAt: number
  readonly ok: boolean
  /** Attempts the call made (0 when it never got to make one). */
  readonly attempts: number
}

/** One policy's run of a scenario. */
export interface Run {
  readonly contender: StormPolicies.Contender
  readonly calls: ReadonlyArray<CallRecord>
  /** Attempts the provider received. */
  readonly attempts: number
  readonly served: number
  /** Requests served whose caller had already gone. */
  readonly wasted: number
  /** Per second: attempts that arrived at the provider, successful calls, requests in the system. */
  readonly offered: ReadonlyArray<number>
  readonly goodput: ReadonlyArray<number>
  readonly load: ReadonlyArray<number>
  readonly refused: ReadonlyArray<number>
  /** Per second: the limit of the policy's gate at the end of the second; infinite without a gate that limits. */
  readonly limit: ReadonlyArray<number>
  /** Attempts per 10 ms slice. */
  readonly slices: ReadonlyArray<number>
  readonly simulatedMillis: number
  readonly wallMillis: number
}

/** Runs `scenario` under `contender`, in simulated time, with `seed`. */
export const run = (scenario: Scenario, contender: StormPolicies.Contender, seed: number): Run => {
  const program = Effect.gen(function*() {
    const clock = yield* Simulation.CurrentClock
    const provider = new SimulatedProvider.Provider(clock, scenario.provider)
    let gate: ConcurrencyGate.Service = ConcurrencyGate.unbounded
    const caller = yield* contender.make({
      attemptTimeoutMillis: scenario.attemptTimeoutMillis,
      providerSlots: scenario.provider.slots,
      watchGate: (watched) => {
        gate = watched
      }
    })
    const limit: Array<number> = []
    const calls: Array<CallRecord> = []
    let nextCall = 0
    const start = Effect.suspend(() => {
      const id = nextCall++
      const startedAt = clock.unsafeCurrentTimeMillis()
      let attempts = 0
      const attempt = Effect.suspend(() => {
        attempts++
        return provider.request(id)
      })
      return Effect.forkDaemon(
        Effect.exit(caller(attempt, scenario.workload.deadlineMillis)).pipe(
          Effect.map((exit) =>
            calls.push({ startedAt, endedAt: clock.unsafeCurrentTimeMillis(), ok: Exit.isSuccess(exit), attempts })
          )
        )
      )
    })
    const sample = (): void => {
      provider.sampleLoad()
      limit.push(Effect.runSync(gate.snapshot).limit)
      if (clock.unsafeCurrentTimeMillis() < scenario.horizonMillis) clock.schedule(1000, sample)
    }
    clock.schedule(999, sample)
    const { burst, ratePerSecond, untilMillis } = scenario.workload
    if (burst !== undefined) {
      // Every call of a burst starts at the same instant: forking takes no simulated time.
      yield* Effect.forkDaemon(
        Effect.zipRight(Effect.sleep(burst.atMillis), Effect.repeatN(start, burst.calls - 1))
      )
    }
    // Open-loop arrivals: exponential gaps at the current rate, drawn from the seeded Random.
    while (clock.unsafeCurrentTimeMillis() < untilMillis) {
      const now = clock.unsafeCurrentTimeMillis()
      const rate = ratePerSecond(now)
      if (rate <= 0) {
        yield* Effect.sleep(Math.min(100, untilMillis - now))
        continue
      }
      const gap = -Math.log(1 - (yield* Random.next)) * (1000 / rate)
      if (now + gap >= untilMillis) break
      yield* Effect.sleep(gap)
      yield* start
    }
    yield* Effect.sleep(Math.max(0, scenario.horizonMillis - clock.unsafeCurrentTimeMillis()))
    return { provider, calls, limit }
  })
  const outcome = Simulation.run(program, { seed, horizonMillis: scenario.horizonMillis + 1 })
  const { calls, limit, provider } = outcome.value
  const seconds = Math.ceil(scenario.horizonMillis / 1000)
  const goodput = Array.from({ length: seconds }, () => 0)
  for (const call of calls) {
    const second = Math.floor(call.endedAt / 1000)
    if (call.ok && second < seconds) goodput[second]! += 1
  }
  const pad = (values: ReadonlyArray<number>) => Array.from({ length: seconds }, (_, index) => values[index] ?? 0)
  return {
    contender,
    calls,
    attempts: sum(provider.series.arrivals),
    served: provider.served,
    wasted: provider.wasted,
    offered: pad(provider.series.arrivals),
    goodput,
    load: pad(provider.series.load),
    refused: pad(provider.series.refused),
    limit: Array.from({ length: seconds }, (_, index) => limit[index] ?? limit[limit.length - 1] ?? Infinity),
    slices: provider.slices,
    simulatedMillis: outcome.simulatedMillis,
    wallMillis: outcome.wallMillis
  }
}

/**
 * Seconds after `fromSecond` until goodput, averaged over the next `windowSeconds`, is back to
 * `share` of `demand`; `undefined` when it never is within the run.
 */
export const recoverySeconds = (
  goodput: ReadonlyArray<number>,
  fromSecond: number,
  demand: number,
  share = 0.95,
  windowSeconds = 10
): number | undefined => {
  for (let second = fromSecond; second + windowSeconds <= goodput.length; second++) {
    if (mean(goodput, second, second + windowSeconds) >= share * demand) return second - fromSecond
  }
  return undefined
}
