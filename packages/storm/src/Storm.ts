/**
 * The storm simulator: a fleet of callers, open-loop, against a simulated provider, under each
 * retry policy in turn, on the same scenarios and the same seed.
 *
 * The seeds' argument is arithmetic about fleets, and a unit test cannot show it: retries add
 * load exactly when capacity is lowest, fixed exponential backoff makes synchronised spikes, a
 * recovering provider is knocked over by the backlog, and a policy can keep a system failed after
 * the trigger is gone. Each scenario makes one of those happen and measures it, for ours and for
 * the references, running the shipped policy code in simulated time (see `Simulation`). Where a
 * scenario says so, ours also probes the provider's health and records its diagnosis over time.
 */
import { ConcurrencyGate, Health, type RateLimiter } from "@resilient-ai/policy"
import { type Coordinations, Diagnoses, EffectLine, Either, Failures, FastPath } from "@resilient-ai/policy/internal"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
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
  /**
   * The services the calls come from, when they differ (S6): each arrival is one service's, drawn in
   * proportion to the services' rates at that instant, as superposed Poisson arrivals are.
   * `ratePerSecond` is then their sum, and each service's deadline replaces `deadlineMillis`.
   */
  readonly services?: ReadonlyArray<Service> | undefined
}

/** One of several services sharing a provider and an API key. */
export interface Service {
  readonly name: string
  readonly lane: RateLimiter.Lane
  readonly ratePerSecond: (atMillis: number) => number
  readonly deadlineMillis: number
  /** The tokens of its call number `call`. */
  readonly tokens: (call: number) => SimulatedProvider.Tokens
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
  /** Ours probes the provider's health endpoint and diagnoses the target (S2, S7); no probe without it. */
  readonly probe?: Probe | undefined
}

/**
 * A health probe as `HealthProbe` in `@resilient-ai/client` runs one: a request to the provider's
 * health endpoint at a fixed rate, outside the budget and the gate, whose results and the calls'
 * metrics feed a `Diagnoses.Diagnoser`; while it finds the provider down the gate's recovery is held,
 * and the recovery ramp starts when it says the provider is back.
 */
export interface Probe {
  readonly intervalMillis: number
  readonly timeoutMillis: number
  readonly diagnosis?: Health.Options | undefined
}

/** One probe, and what the diagnosis made of it. */
export interface ProbeRecord {
  /** When the probe's answer came, or its timeout: the moment the diagnosis changed, if it did. */
  readonly at: number
  readonly up: boolean
  readonly diagnosis: Health.Diagnosis
  /**
   * What the calls alone say, as a client without a probe would read them: the same diagnosis with
   * every probe taken as answered.
   */
  readonly callsAlone: Health.Diagnosis
  /** The provider was degraded and this probe says it is back: the recovery ramp starts here. */
  readonly providerBack: boolean
  /** The share of the calls in the diagnosis's window that were in trouble. */
  readonly troubleRatio: number
}

/** One call, as its caller saw it. */
export interface CallRecord {
  readonly startedAt: number
  readonly endedAt: number
  readonly ok: boolean
  /** Attempts the call made (0 when it never got to make one). */
  readonly attempts: number
  /** When its last attempt reached the provider: for a successful call, the one that succeeded. */
  readonly lastSentAt?: number | undefined
  /** Its service, when the workload has several. */
  readonly service?: string | undefined
  /** Tokens the provider reported it used (prompt and completion), when it succeeded with tokens. */
  readonly tokensUsed?: number | undefined
  /** Why it failed: the stop reason of a resilient call, else the failure's tag. */
  readonly failure?: string | undefined
}

/** One policy's run of a scenario. */
export interface Run {
  readonly contender: StormPolicies.Contender
  readonly calls: ReadonlyArray<CallRecord>
  /** Attempts the provider received. */
  readonly attempts: number
  /** Attempts it refused with a 429 for the key's limits. */
  readonly rateLimited: number
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
  /** Per second: the health of the policy's gate at the end of the second. */
  readonly health: ReadonlyArray<ConcurrencyGate.Health>
  /** Every probe in order, when ours probed (the scenario's `probe`). */
  readonly probes?: ReadonlyArray<ProbeRecord> | undefined
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
    let state: Coordinations.TargetServices | undefined
    const caller = yield* contender.make({
      attemptTimeoutMillis: scenario.attemptTimeoutMillis,
      providerSlots: scenario.provider.slots,
      rateLimit: scenario.provider.rateLimit,
      watchTarget: (watched) => {
        state = watched
        gate = watched.gate
      }
    })
    const limit: Array<number> = []
    const health: Array<ConcurrencyGate.Health> = []
    const calls: Array<CallRecord> = []
    // Only ours probes: the references' clients have no probe.
    const probe = contender.ours ? scenario.probe : undefined
    let probes: Array<ProbeRecord> | undefined
    if (probe !== undefined) {
      probes = []
      yield* EffectLine.forkDaemon(probing(probe, provider, gate, state, contender.name, probes))
    }
    let nextCall = 0
    const start = (service?: Service) =>
      Effect.suspend(() => {
        const id = nextCall++
        const startedAt = clock.currentMillis()
        const tokens = service?.tokens(id)
        let attempts = 0
        let lastSentAt: number | undefined
        const attempt = Effect.suspend(() => {
          attempts++
          lastSentAt = clock.currentMillis()
          return provider.request(id, tokens)
        })
        const call = tokens === undefined || service === undefined
          ? undefined
          : { tokens: tokens.prompt + tokens.maxTokens, lane: service.lane }
        const deadline = service?.deadlineMillis ?? scenario.workload.deadlineMillis
        return EffectLine.forkDaemon(
          Effect.exit(caller(attempt, deadline, call)).pipe(
            Effect.map((exit) => {
              const ok = Exit.isSuccess(exit)
              calls.push({
                startedAt,
                endedAt: clock.currentMillis(),
                ok,
                attempts,
                ...(service === undefined ? {} : {
                  lastSentAt,
                  service: service.name,
                  tokensUsed: ok && tokens !== undefined ? tokens.prompt + tokens.completion : undefined,
                  failure: ok ? undefined : failureOf(exit)
                })
              })
            })
          )
        )
      })
    const sample = (): void => {
      provider.sampleLoad()
      const snapshot = Effect.runSync(gate.snapshot)
      limit.push(snapshot.limit)
      health.push(snapshot.health)
      if (clock.currentMillis() < scenario.horizonMillis) clock.schedule(1000, sample)
    }
    clock.schedule(999, sample)
    const { burst, ratePerSecond, services, untilMillis } = scenario.workload
    if (burst !== undefined) {
      // Every call of a burst starts at the same instant: forking takes no simulated time.
      yield* EffectLine.forkDaemon(
        Effect.andThen(
          Effect.sleep(burst.atMillis),
          Effect.gen(function*() {
            for (let call = 0; call < burst.calls; call++) yield* start()
          })
        )
      )
    }
    /** The service of an arrival at `now`, drawn in proportion to the services' rates. */
    const serviceAt = (among: ReadonlyArray<Service>, now: number, rate: number) =>
      Effect.map(Random.next, (draw) => {
        let left = draw * rate
        for (const service of among) {
          left -= service.ratePerSecond(now)
          if (left < 0) return service
        }
        return among[among.length - 1]
      })
    // Open-loop arrivals: exponential gaps at the current rate, drawn from the seeded Random.
    while (clock.currentMillis() < untilMillis) {
      const now = clock.currentMillis()
      const rate = ratePerSecond(now)
      if (rate <= 0) {
        yield* Effect.sleep(Math.min(100, untilMillis - now))
        continue
      }
      const gap = -Math.log(1 - (yield* Random.next)) * (1000 / rate)
      if (now + gap >= untilMillis) break
      yield* Effect.sleep(gap)
      yield* start(services === undefined ? undefined : yield* serviceAt(services, now, rate))
    }
    yield* Effect.sleep(Math.max(0, scenario.horizonMillis - clock.currentMillis()))
    return { provider, calls, limit, health, probes }
  })
  const outcome = Simulation.run(program, { seed, horizonMillis: scenario.horizonMillis + 1 })
  const { calls, health, limit, probes, provider } = outcome.value
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
    rateLimited: provider.rateLimited,
    served: provider.served,
    wasted: provider.wasted,
    offered: pad(provider.series.arrivals),
    goodput,
    load: pad(provider.series.load),
    refused: pad(provider.series.refused),
    limit: Array.from({ length: seconds }, (_, index) => limit[index] ?? limit[limit.length - 1] ?? Infinity),
    health: Array.from({ length: seconds }, (_, index) => health[index] ?? health[health.length - 1] ?? "steady"),
    probes,
    slices: provider.slices,
    simulatedMillis: outcome.simulatedMillis,
    wallMillis: outcome.wallMillis
  }
}

/**
 * The probe's fiber: a probe every `intervalMillis` from the start, each given `timeoutMillis`; the
 * diagnosis reads the target's call totals from its metrics and its `state` (`Diagnoses.callTotals`),
 * which only this run updates while it runs (a simulation runs synchronously), so their differences
 * are this run's.
 */
const probing = (
  probe: Probe,
  provider: SimulatedProvider.Provider,
  gate: ConcurrencyGate.Service,
  state: Coordinations.TargetServices | undefined,
  target: string,
  records: Array<ProbeRecord>
): Effect.Effect<void> =>
  Effect.gen(function*() {
    // A scenario's settings are the simulator's own: one the diagnosis refuses is a defect.
    const settings = yield* Effect.orDie(Either.toEffect(Diagnoses.settings(probe.diagnosis)))
    const diagnoser = new Diagnoses.Diagnoser(settings)
    const callsAlone = new Diagnoses.Diagnoser(settings)
    const once = Effect.gen(function*() {
      const sent = yield* Clock.currentTimeMillis
      const up = yield* provider.probe().pipe(
        Effect.timeout(probe.timeoutMillis),
        Effect.match({ onFailure: () => false, onSuccess: () => true })
      )
      const at = yield* Clock.currentTimeMillis
      const totals = Diagnoses.callTotals(target, state)
      const step = diagnoser.observe(at, { up, millis: at - sent }, totals)
      const alone = callsAlone.observe(at, { up: true, millis: at - sent }, totals)
      const holdRecovery = FastPath.gate(gate)?.holdRecovery
      if (holdRecovery !== undefined) {
        yield* holdRecovery(!diagnoser.probeUp || step.diagnosis === "provider-degraded")
      }
      if (step.providerBack) yield* gate.markRecovered
      records.push({
        at,
        up,
        diagnosis: step.diagnosis,
        callsAlone: alone.diagnosis,
        providerBack: step.providerBack,
        troubleRatio: diagnoser.trouble().ratio
      })
    })
    // At a fixed rate from the start: the probe at `n · intervalMillis`, however long the last one took.
    for (let next = 0;; next += probe.intervalMillis) {
      yield* Effect.sleep(Math.max(0, next - (yield* Clock.currentTimeMillis)))
      yield* once
    }
  })

/** Why a call failed: the stop reason of a resilient call, else the failure's tag, else the failure itself. */
const failureOf = (exit: Exit.Exit<unknown, unknown>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = EffectLine.failureOf(exit.cause)
  if (Option.isNone(failure)) return EffectLine.isInterruptedOnly(exit.cause) ? "interrupted" : "defect"
  const error = failure.value
  if (Failures.isCallFailed(error)) return error.reason
  const tag = typeof error === "object" && error !== null ? (error as { readonly _tag?: unknown })._tag : undefined
  return typeof tag === "string" ? tag : String(error)
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
