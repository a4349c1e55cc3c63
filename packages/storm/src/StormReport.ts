/**
 * Runs the storm's scenarios under every policy and turns the runs into figures: one section per
 * scenario, with its table (every policy a row), the goals the report must show with whether they
 * hold, the data of its chart, and every figure by policy. Plain data: `StormRender` draws it.
 */
import { Metrics } from "@resilient-ai/policy"
import * as Contention from "./Contention.js"
import { mean, sum } from "./internal/series.js"
import * as Storm from "./Storm.js"
import * as StormPolicies from "./StormPolicies.js"
import * as Scenarios from "./StormScenarios.js"

/** A table of figures: every policy (or algorithm) a row. */
export interface Table {
  readonly columns: ReadonlyArray<string>
  readonly rows: ReadonlyArray<ReadonlyArray<string>>
}

/** A goal the report must show, and whether this run shows it. */
export interface Goal {
  readonly text: string
  readonly met: boolean
  readonly evidence: string
}

/** A time series to chart: one line per policy. */
export interface Chart {
  /** What the x axis counts. */
  readonly x: string
  readonly panels: ReadonlyArray<{
    readonly title: string
    readonly points: ReadonlyArray<
      { readonly x: number; readonly y: number; readonly policy: string; readonly category?: string | undefined }
    >
  }>
  /** Charts with bars rather than lines (the contention experiment). */
  readonly bars?: boolean | undefined
}

/** One scenario's results. */
export interface Section {
  readonly id: string
  readonly title: string
  readonly setup: string
  readonly table: Table
  readonly goals: ReadonlyArray<Goal>
  readonly chart: Chart
  /** Figures by policy, for the README and tests. */
  readonly figures: Readonly<Record<string, Readonly<Record<string, number | null>>>>
  readonly notes: ReadonlyArray<string>
  readonly wallMillis: number
}

const percent = (value: number) => `${(100 * value).toFixed(1)}%`
const fixed = (value: number, digits = 2) => value.toFixed(digits)
const successes = (run: Storm.Run) => run.calls.filter((call) => call.ok).length

const runAll = (
  scenario: Storm.Scenario,
  seed: number,
  contenders: ReadonlyArray<StormPolicies.Contender> = scenario.contenders ?? StormPolicies.all
) => contenders.map((contender) => Storm.run(scenario, contender, seed))

const seriesChart = (runs: ReadonlyArray<Storm.Run>, until: number): Chart => ({
  x: "seconds",
  panels: [
    {
      title: "offered load: attempts reaching the provider per second",
      points: runs.flatMap((run) =>
        run.offered.slice(0, until).map((value, second) => ({ x: second, y: value, policy: run.contender.name }))
      )
    },
    {
      title: "goodput: successful calls per second",
      points: runs.flatMap((run) =>
        run.goodput.slice(0, until).map((value, second) => ({ x: second, y: value, policy: run.contender.name }))
      )
    }
  ]
})

/** What a scenario's section says beyond what its scenario and runs give. */
interface Findings {
  readonly setup: string
  readonly table: Table
  readonly goals: ReadonlyArray<Goal>
  /** Default: offered load and goodput per second over the whole run. */
  readonly chart?: Chart | undefined
  readonly figures: Section["figures"]
  readonly notes: ReadonlyArray<string>
}

/** A scenario's section: its id and title, the findings, and the time its runs took. */
const scenarioSection = (scenario: Storm.Scenario, runs: ReadonlyArray<Storm.Run>, findings: Findings): Section => ({
  id: scenario.id,
  title: scenario.title,
  setup: findings.setup,
  table: findings.table,
  goals: findings.goals,
  chart: findings.chart ?? seriesChart(runs, Math.ceil(scenario.horizonMillis / 1000)),
  figures: findings.figures,
  notes: findings.notes,
  wallMillis: runs.reduce((total, run) => total + run.wallMillis, 0)
})

/** What S1 and S1b measure of each run: attempts per call and per success, and the failed calls recovered. */
const failureFigures = (runs: ReadonlyArray<Storm.Run>) => {
  const figures: Record<string, Record<string, number>> = {}
  const rows = runs.map((run) => {
    const calls = run.calls.length
    const ok = successes(run)
    // A call whose first attempt failed: it retried, or it ended without a success.
    const failedFirst = run.calls.filter((call) => call.attempts > 1 || !call.ok)
    const recovered = failedFirst.filter((call) => call.ok).length / Math.max(1, failedFirst.length)
    figures[run.contender.name] = {
      attemptsPerCall: run.attempts / calls,
      attemptsPerSuccess: run.attempts / Math.max(1, ok),
      successShare: ok / calls,
      recoveredShare: recovered
    }
    return [
      run.contender.name,
      `${calls}`,
      percent(ok / calls),
      fixed(run.attempts / calls, 3),
      fixed(run.attempts / Math.max(1, ok), 3),
      percent(recovered)
    ]
  })
  return {
    figures,
    table: {
      columns: ["policy", "calls", "successes", "attempts per call", "attempts per success", "failed calls recovered"],
      rows
    }
  }
}

const failureSetup = (scenario: Storm.Scenario, failing: string) =>
  `Provider ${Scenarios.slots} slots × ${Scenarios.serviceMillis} ms (${Scenarios.capacityPerSecond}/s). ` +
  `70 calls/s for ${scenario.workload.untilMillis / 1000} s; ${failing}. Deadline 10 s, attempt timeout 5 s.`

/** S1: attempts per logical call and per success under a correlated 10% failure. */
const s1 = (seed: number, scale = 1): Section => {
  const scenario = Scenarios.correlatedFailure(scale)
  const runs = runAll(scenario, seed)
  const { figures, table } = failureFigures(runs)
  const ours = figures["ours-managed"]!.attemptsPerCall!
  const fixedRatio = figures["ours-fixed-ratio"]!.attemptsPerCall!
  const grpc = figures["grpc-throttling"]!.attemptsPerCall!
  const naive = figures["naive"]!.attemptsPerCall!
  return scenarioSection(scenario, runs, {
    setup: failureSetup(
      scenario,
      "10% of calls (the same ones for every policy) fail on every attempt with a 500"
    ),
    table,
    goals: [
      {
        text: "ours learns that these retries do not pay and stops them (≤ 1.02 attempts per logical call)",
        met: ours <= 1.02,
        evidence: `ours-managed ${fixed(ours, 3)}, grpc-throttling ${fixed(grpc, 3)}, ours with a fixed 10% ${
          fixed(fixedRatio, 3)
        }`
      },
      {
        text: "the naive policy adds about 20–30%",
        met: naive >= 1.15 && naive <= 1.35,
        evidence: `naive ${fixed(naive, 3)}`
      }
    ],
    figures,
    notes: [
      "Only the failing calls' retries add load: a call that fails once fails every time, as a poisoned request or " +
      "a broken shard does. A budget that is a ratio of successes caps what they can add (ours-fixed-ratio: 10%); " +
      "one that learns that none of its retries succeed keeps only 5% of its allowance."
    ]
  })
}

/** S1b: the same load with independent failures: are the useful retries still made? */
const s1b = (seed: number, scale = 1): Section => {
  const scenario = Scenarios.independentFailure(scale)
  const runs = runAll(scenario, seed)
  const { figures, table } = failureFigures(runs)
  const ours = figures["ours-managed"]!.recoveredShare!
  const fixedRatio = figures["ours-fixed-ratio"]!.recoveredShare!
  const grpc = figures["grpc-throttling"]!.recoveredShare!
  return scenarioSection(scenario, runs, {
    setup: failureSetup(scenario, "each attempt fails on its own with a 500, 10% of them, so a retry mostly succeeds"),
    table,
    goals: [
      {
        text: "ours, whose budget learns that these retries pay, recovers the failed calls (≥ 95% of them)",
        met: ours >= 0.95,
        evidence: `ours-managed ${percent(ours)}, ours with a fixed 10% ${percent(fixedRatio)}, grpc-throttling ${
          percent(grpc)
        }`
      }
    ],
    figures,
    notes: [
      "Here the retries pay, so our budget keeps its whole allowance: 20% of successes, Finagle's share, which a " +
      "fixed 10% cannot match when a tenth of the first attempts fail. gRPC's throttle, which counts every failure " +
      "against the next, hardly retries at all."
    ]
  })
}

/** S2: goodput before, during and after a 60 s outage; recovery time; wasted work. */
const s2 = (seed: number, scale = 1): Section => {
  const scenario = Scenarios.outageThenRecovery(scale)
  const runs = runAll(scenario, seed)
  const { from, to } = Scenarios.outageMillis(scale)
  const demand = scenario.workload.ratePerSecond(0)
  const seconds = Math.ceil(scenario.horizonMillis / 1000)
  const figures: Record<string, Record<string, number | null>> = {}
  const rows = runs.map((run) => {
    const before = mean(run.goodput, 10, from / 1000) / demand
    const during = mean(run.goodput, from / 1000, to / 1000) / demand
    const after = mean(run.goodput, to / 1000, seconds) / demand
    const recovery = Storm.recoverySeconds(run.goodput, to / 1000, demand)
    figures[run.contender.name] = {
      goodputBefore: before,
      goodputDuring: during,
      goodputAfter: after,
      recoverySeconds: recovery ?? null,
      wasted: run.wasted,
      attemptsPerCall: run.attempts / run.calls.length
    }
    return [
      run.contender.name,
      percent(before),
      percent(during),
      percent(after),
      recovery === undefined ? "never" : `${recovery} s`,
      `${run.wasted} (${percent(run.wasted / Math.max(1, run.served))})`,
      fixed(run.attempts / run.calls.length, 2)
    ]
  })
  const ours = figures["ours-managed"]!.recoverySeconds
  const never = runs.filter((run) => figures[run.contender.name]!.recoverySeconds === null).map((run) =>
    run.contender.name
  )
  return scenarioSection(scenario, runs, {
    setup: `Provider ${Scenarios.slots} slots × ${Scenarios.serviceMillis} ms, queue of 1000. ${demand} calls/s ` +
      `(80% of capacity). From ${from / 1000} s to ${to / 1000} s the provider serves nothing but keeps ` +
      `accepting requests into its queue, and serves them (for callers long gone) when it comes back. ` +
      `Deadline 10 s, attempt timeout 5 s. Recovery: seconds from restoration until goodput over the next 10 s ` +
      `is back to 95% of demand.`,
    table: {
      columns: [
        "policy",
        "goodput before",
        "during",
        "after",
        "recovery",
        "wasted (served for nobody)",
        "attempts per call"
      ],
      rows
    },
    goals: [
      {
        text: "ours recovers within 30 s of restoration",
        met: ours !== null && ours !== undefined && ours <= 30,
        evidence: `ours-managed ${ours === null ? "never" : `${ours} s`}`
      },
      {
        text: "say which reference policies never recover",
        met: true,
        evidence: never.length === 0 ? "every policy recovered" : `never: ${never.join(", ")}`
      }
    ],
    figures,
    notes: [
      "The outage fills the provider's queue with requests whose callers time out; when capacity returns it serves " +
      "them first, so every new request waits past its timeout and is retried, which keeps the queue full: a " +
      "metastable failure. A policy recovers only if it stops feeding the queue."
    ]
  })
}

/** S3: the peak of retries in any 10 ms slice after a synchronised 429 burst. */
export const s3 = (seed: number, clients = 200): Section => {
  const scenario = Scenarios.synchronisedBurst(clients)
  const runs = runAll(scenario, seed)
  const burstSlice = Math.floor(Scenarios.burstAtMillis / 10)
  const figures: Record<string, Record<string, number>> = {}
  const rows = runs.map((run) => {
    const after = run.slices.slice(burstSlice + 1)
    const peak = after.length === 0 ? 0 : Math.max(...after)
    figures[run.contender.name] = { peak, peakShare: peak / clients, successes: successes(run) }
    return [
      run.contender.name,
      `${run.attempts}`,
      `${successes(run)}`,
      `${peak}`,
      percent(peak / clients)
    ]
  })
  const ours = figures["ours-managed"]!.peakShare!
  const naive = figures["naive"]!.peakShare!
  const window = { from: burstSlice - 10, to: burstSlice + 450 }
  return scenarioSection(scenario, runs, {
    setup: `${clients} callers start at the same instant (t = ${Scenarios.burstAtMillis / 1000} s) and are refused ` +
      `with 429 and Retry-After: 2; the provider keeps refusing for those 2 s (telling later requests the time ` +
      `left), then serves normally. Peak: most attempts in any 10 ms slice after the burst's own slice.`,
    table: {
      columns: ["policy", "attempts", "successes", "peak attempts in 10 ms", "peak / burst"],
      rows
    },
    goals: [
      {
        text: "ours keeps the peak 10 ms slice below 5% of the burst",
        met: ours < 0.05,
        evidence: `ours-managed ${percent(ours)}`
      },
      {
        text: "no-jitter policies put the whole burst in one slice",
        met: naive >= 0.99,
        evidence: `naive ${percent(naive)}`
      }
    ],
    chart: {
      x: "milliseconds",
      panels: [{
        title: "attempts per 10 ms slice around the burst",
        points: runs.flatMap((run) =>
          Array.from({ length: window.to - window.from }, (_, index) => ({
            x: (window.from + index) * 10,
            y: run.slices[window.from + index] ?? 0,
            policy: run.contender.name
          }))
        )
      }]
    },
    figures,
    notes: [
      "Only ours reads Retry-After: the references' own schedules decide when to come back, so those that come back " +
      "within the 2 s are refused again. Ours waits the hint plus a random spread of up to 1 s."
    ]
  })
}

/**
 * Seconds in which callers were waiting for the provider: at least `capacity` calls were under way
 * through the whole second (waiting in a gate or a queue, or sleeping before a retry) without
 * ending in it. In those seconds goodput below capacity is capacity lost, not demand missing.
 */
const backlogged = (run: Storm.Run, capacity: (second: number) => number): ReadonlyArray<boolean> => {
  const through = Array.from({ length: run.goodput.length }, () => 0)
  for (const call of run.calls) {
    for (let second = Math.ceil(call.startedAt / 1000); second < Math.floor(call.endedAt / 1000); second++) {
      if (second < through.length) through[second]! += 1
    }
  }
  return through.map((calls, second) => calls >= capacity(second))
}

/** S4: load when capacity returns with a backlog waiting, with and without the ramp, with the limit learned or fixed. */
export const s4 = (
  seed: number,
  scale = 1,
  contenders?: ReadonlyArray<StormPolicies.Contender> | undefined
): Section => {
  const scenario = Scenarios.recoveryStampede(scale)
  const runs = runAll(scenario, seed, contenders)
  const restored = Scenarios.stampedeOutageMillis(scale).to / 1000
  const steps = Scenarios.stampedeCapacity(scale)
  const slotsAt = (second: number) =>
    steps.find((step) => second * 1000 >= step.from && second * 1000 < step.to)?.slots ?? Scenarios.slots
  const capacityAt = (second: number) => (slotsAt(second) * 1000) / Scenarios.serviceMillis
  const firstWindow = Math.round(10 * scale)
  // After full capacity is back: whether goodput holds while callers wait, and where the limit ends.
  const full = Math.max(...steps.map((step) => step.to)) / 1000
  const watched = { from: full, to: full + Math.round(60 * scale) }
  const smoothing = Math.max(1, Math.round(5 * scale))
  const holds = scenario.provider.slots + scenario.provider.queueLimit
  const figures: Record<string, Record<string, number | null>> = {}
  const rows = runs.map((run) => {
    let peak = 0
    for (let second = restored; second < restored + firstWindow; second++) {
      peak = Math.max(peak, (run.offered[second] ?? 0) / capacityAt(second))
    }
    const refusedFirst = sum(run.refused, restored, restored + firstWindow)
    const refusedAfter = sum(run.refused, restored)
    const recovery = Storm.recoverySeconds(run.goodput, restored, scenario.workload.ratePerSecond(0))
    // The lowest goodput over capacity, in `smoothing`-second windows whose every second was backlogged.
    const waiting = backlogged(run, capacityAt)
    let lowest: number | null = null
    for (let from = watched.from; from + smoothing <= watched.to; from++) {
      if (!waiting.slice(from, from + smoothing).every(Boolean)) continue
      const share = mean(run.goodput, from, from + smoothing) / capacityAt(from)
      lowest = Math.min(lowest ?? share, share)
    }
    const limit = run.limit[watched.to - 1] ?? Infinity
    figures[run.contender.name] = {
      peakLoad: peak,
      refusedFirstWindow: refusedFirst,
      refusedAfterRecovery: refusedAfter,
      recoverySeconds: recovery ?? null,
      lowestGoodputAfterFull: lowest,
      limitAfterFull: Number.isFinite(limit) ? limit : null
    }
    return [
      run.contender.name,
      `${fixed(peak)}×`,
      refusedFirst === 0 ? "no" : `yes (${refusedFirst} refused)`,
      `${refusedAfter}`,
      recovery === undefined ? "never" : `${recovery} s`,
      lowest === null ? "no backlog" : percent(lowest),
      Number.isFinite(limit) ? `${limit}` : "–",
      percent(successes(run) / run.calls.length)
    ]
  })
  const ours = figures["ours-managed"]!
  const noRamp = figures["ours-managed-no-ramp"]!
  const lowestOf = (name: string) => {
    const lowest = figures[name]?.lowestGoodputAfterFull
    return lowest === undefined ? "–" : lowest === null ? "no backlog" : percent(lowest)
  }
  const learned = ours.limitAfterFull ?? Infinity
  return scenarioSection(scenario, runs, {
    setup: `80 calls/s, deadline 30 s (callers wait). The provider refuses everything (503) from ` +
      `${Scenarios.stampedeOutageMillis(scale).from / 1000} s to ${restored} s, then comes back with half its slots, ` +
      `three quarters 10 s later, all of them 10 s after that; its queue holds ${scenario.provider.queueLimit}, so ` +
      `it holds ${holds} requests. Peak load: the most attempts ` +
      `in any second of the first ${firstWindow} s after restoration, over what the provider could serve in that ` +
      `second. Overloaded again: requests refused for a full queue in that window. Lowest goodput: in the ` +
      `${watched.to - watched.from} s after full capacity (${full} s), the lowest goodput over capacity in any ` +
      `${smoothing} s while callers waited (at least a second's capacity of calls under way through each second). ` +
      `Gate limit: the limit of the policy's gate at the end of those ${watched.to - watched.from} s.`,
    table: {
      columns: [
        "policy",
        "peak load at recovery",
        `overloaded again (first ${firstWindow} s)`,
        "refused after recovery (all)",
        "recovery",
        "lowest goodput after full capacity",
        "gate limit",
        "successes"
      ],
      rows
    },
    goals: [
      {
        text: "with the ramp, peak load at recovery stays at or below capacity",
        met: (ours.peakLoad ?? Infinity) <= 1,
        evidence: `ours-managed ${fixed(ours.peakLoad ?? 0)}× (without the ramp ${fixed(noRamp.peakLoad ?? 0)}×)`
      },
      {
        text: "no relapse after recovery: while callers wait, goodput stays at or above 90% of capacity",
        met: ours.lowestGoodputAfterFull === null || (ours.lowestGoodputAfterFull ?? 0) >= 0.9,
        evidence: `ours-managed ${lowestOf("ours-managed")} (with the limit fixed at the setting ${
          lowestOf("ours-managed-fixed-limit")
        })`
      },
      {
        text: `the adaptive limit ends within 20% of what the provider holds (${holds}: slots + queue)`,
        met: Math.abs(learned - holds) <= 0.2 * holds,
        evidence: `ours-managed ${Number.isFinite(learned) ? learned : "unbounded"}`
      }
    ],
    figures,
    notes: [
      "While the provider is down, ours marks it degraded and lets only 10% of its limit through, so callers wait in " +
      "its gate instead of retrying; on recovery the ramp lets the backlog in ×1.5 every 5 s. Without the ramp the " +
      "same backlog arrives at once. The references' backlog is their pending retries.",
      `The ramp's last step takes a gate that has never seen the provider full to its setting (64), above the ` +
      `${holds} the provider holds: the refusals cut the adaptive limit (×0.9) at once, and it grows back by one ` +
      "per round of a full gate. With the limit fixed, the same permits go to caller after caller, each refused, " +
      "until five in a row mark the provider degraded and the ramp starts again from 10%: the relapse."
    ]
  })
}

/** S5: retrying into a saturated fixed-capacity pool against shedding. */
const s5 = (seed: number, scale = 1): Section => {
  const scenario = Scenarios.saturatedPool(scale)
  const runs = runAll(scenario, seed)
  const surgeEnds = Scenarios.surgeEndsMillis(scale) / 1000
  const figures: Record<string, Record<string, number | null>> = {}
  const rows = runs.map((run) => {
    const latencies = run.calls.filter((call) => call.ok).map((call) => call.endedAt - call.startedAt)
      .sort((a, b) => a - b)
    const p99 = Metrics.quantile(latencies, 0.99, { sorted: true })
    const p50 = Metrics.quantile(latencies, 0.5, { sorted: true })
    let drained: number | undefined
    for (let second = surgeEnds; second < run.load.length; second++) {
      if ((run.load[second] ?? 0) <= Scenarios.slots) {
        drained = second - surgeEnds
        break
      }
    }
    const peakQueue = Math.max(0, ...run.load) - Scenarios.slots
    figures[run.contender.name] = {
      p50: p50 ?? null,
      p99: p99 ?? null,
      drainSeconds: drained ?? null,
      successShare: latencies.length / run.calls.length,
      wasted: run.wasted
    }
    return [
      run.contender.name,
      percent(latencies.length / run.calls.length),
      p50 === undefined ? "–" : `${Math.round(p50)} ms`,
      p99 === undefined ? "–" : `${Math.round(p99)} ms`,
      `${Math.max(0, peakQueue)}`,
      drained === undefined ? "never" : `${drained} s`,
      `${run.wasted}`
    ]
  })
  const ours = figures["ours-fixed-capacity"]!
  return scenarioSection(scenario, runs, {
    setup:
      `A self-hosted pool of ${Scenarios.slots} slots × ${Scenarios.serviceMillis} ms (${Scenarios.capacityPerSecond}/s) ` +
      `with a queue of 2000, offered 120 calls/s (120%) for ${surgeEnds} s, then 60/s. Deadline 10 s, attempt ` +
      `timeout 5 s. Queue drain: seconds after the surge until nothing waits for a slot.`,
    table: {
      columns: ["policy", "successes", "p50 latency", "p99 latency", "peak queue", "queue drain", "wasted"],
      rows
    },
    goals: [
      {
        text: "shedding keeps p99 of successful calls near the service time",
        met: (ours.p99 ?? Infinity) <= 2 * Scenarios.serviceMillis,
        evidence: `ours-fixed-capacity p99 ${Math.round(ours.p99 ?? 0)} ms (service time ${Scenarios.serviceMillis} ms)`
      }
    ],
    figures,
    notes: [
      "The fixed-capacity preset's gate is set to the pool's slots and sheds: a call it cannot place fails at once, " +
      "so the pool's queue never grows and a call that is served is served at the service time. Retrying into the " +
      "pool fills the queue with work whose callers time out and retry."
    ]
  })
}

/** Brooker's contention experiment, beside the article's figures. */
const contention = (seed: number, clients = 100, trials = 20): Section => {
  const started = performance.now()
  const figures: Record<string, Record<string, number>> = {}
  const rows = Contention.algorithms.map((algorithm) => {
    const ours = Contention.experiment(algorithm, { clients, trials, seed })
    const published = Contention.published[algorithm]
    figures[algorithm] = { calls: ours.calls, seconds: ours.completionMillis / 1000 }
    return [
      algorithm,
      `${Math.round(ours.calls)}`,
      clients === 100 ? `${published.calls}` : "–",
      `${fixed(ours.completionMillis / 1000, 1)} s`,
      clients === 100 ? `${fixed(published.seconds, 1)} s` : "–"
    ]
  })
  const full = figures["full-jitter"]!
  const none = figures["none"]!
  const exponential = figures["exponential"]!
  return {
    id: "contention",
    title: "Brooker's contention experiment",
    setup: `${clients} clients update one row with optimistic concurrency; network delay |N(10 ms, 2 ms)| per ` +
      `message; backoff base 5 ms, cap 2 s; the mean of ${trials} runs. Full jitter is the shipped ` +
      "`Backoff.fullJitter` schedule. Published: the article's simulator, 100 clients.",
    table: { columns: ["algorithm", "calls", "published", "completion time", "published"], rows },
    goals: [
      {
        text: "full jitter ranks ahead of no jitter (fewer calls than exponential and none)",
        met: (full.calls ?? 0) < (exponential.calls ?? 0) && (full.calls ?? 0) < (none.calls ?? 0),
        evidence:
          `full jitter ${Math.round(full.calls ?? 0)} calls, exponential ${Math.round(exponential.calls ?? 0)}, ` +
          `none ${Math.round(none.calls ?? 0)}`
      }
    ],
    chart: {
      x: "algorithm",
      bars: true,
      panels: [
        {
          title: "calls to complete (ours, published)",
          points: Contention.algorithms.flatMap((algorithm, index) => [
            { x: index, y: figures[algorithm]!.calls!, policy: "ours", category: algorithm },
            ...(clients === 100
              ? [{ x: index, y: Contention.published[algorithm].calls, policy: "published", category: algorithm }]
              : [])
          ])
        }
      ]
    },
    figures,
    notes: [
      "Differences from the published figures are sampling: the article averages 100 runs of a continuous-time " +
      "model; this averages fewer, and the shipped schedule draws whole milliseconds."
    ],
    wallMillis: performance.now() - started
  }
}

/** The scenarios a storm can run. */
export type ScenarioId = "S1" | "S1b" | "S2" | "S3" | "S4" | "S5" | "contention"

/** Every scenario, in the order a storm runs them. */
export const scenarioIds: ReadonlyArray<ScenarioId> = ["S1", "S1b", "S2", "S3", "S4", "S5", "contention"]

/** Runs one scenario at full size. */
export const section = (
  id: ScenarioId,
  options: { readonly seed: number; readonly clients?: number | undefined; readonly scale?: number | undefined }
): Section => {
  const scale = options.scale ?? 1
  switch (id) {
    case "S1":
      return s1(options.seed, scale)
    case "S1b":
      return s1b(options.seed, scale)
    case "S2":
      return s2(options.seed, scale)
    case "S3":
      return s3(options.seed, options.clients ?? 200)
    case "S4":
      return s4(options.seed, scale)
    case "S5":
      return s5(options.seed, scale)
    case "contention":
      return contention(options.seed, options.clients ?? 100, scale < 1 ? 3 : 20)
  }
}
