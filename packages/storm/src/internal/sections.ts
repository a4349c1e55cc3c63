/**
 * The storm's scenarios run under every policy and turned into report sections (`StormReport.Section`):
 * one function a scenario, with the figures, goals, chart and notes its section shows. `StormReport.section`
 * runs them at full size; the tests run some at a size, or with contenders, of their own.
 */
import type { Health } from "@resilient-ai/policy"
import { Diagnoses, Either, Meters } from "@resilient-ai/policy/internal"
import * as Contention from "../Contention.js"
import * as Storm from "../Storm.js"
import * as StormPolicies from "../StormPolicies.js"
import type { Chart, Goal, Section, Table } from "../StormReport.js"
import * as Scenarios from "../StormScenarios.js"
import { mean, sum } from "./series.js"

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
  readonly timeline?: Table | undefined
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
  ...(findings.timeline === undefined ? {} : { timeline: findings.timeline }),
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
export const s1 = (seed: number, scale = 1): Section => {
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
export const s1b = (seed: number, scale = 1): Section => {
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

/** A stretch of simulated time with one diagnosis. */
interface Span {
  readonly from: number
  readonly to: number
  readonly diagnosis: Health.Diagnosis
}

/**
 * A run's diagnosis over time, from its probes: each probe's diagnosis holds from its answer to the
 * next one; `healthy` before the first. `pick` says which: the probe's and the calls', or the calls'
 * alone.
 */
const spans = (
  probes: ReadonlyArray<Storm.ProbeRecord>,
  untilMillis: number,
  pick: (probe: Storm.ProbeRecord) => Health.Diagnosis = (probe) => probe.diagnosis
): ReadonlyArray<Span> => {
  const found: Array<Span> = []
  let from = 0
  let current: Health.Diagnosis = "healthy"
  for (const probe of probes) {
    if (probe.at >= untilMillis) break
    const next = pick(probe)
    if (next === current) continue
    if (probe.at > from) found.push({ from, to: probe.at, diagnosis: current })
    from = probe.at
    current = next
  }
  found.push({ from, to: untilMillis, diagnosis: current })
  return found
}

/** Milliseconds of `[from, to)` diagnosed `diagnosis`. */
const timeIn = (timeline: ReadonlyArray<Span>, diagnosis: Health.Diagnosis, from: number, to: number) =>
  timeline.reduce(
    (total, span) =>
      span.diagnosis === diagnosis ? total + Math.max(0, Math.min(to, span.to) - Math.max(from, span.from)) : total,
    0
  )

/** Seconds, to a tenth, without a trailing `.0`. */
const secondsOf = (millis: number) => `${Math.round(millis / 100) / 10}`

const describeSpans = (timeline: ReadonlyArray<Span>) =>
  timeline.map((span) => `${span.diagnosis} ${secondsOf(span.from)}–${secondsOf(span.to)} s`).join(" · ")

/** The policies that probed: their diagnosis over time, and what the calls alone say. */
const diagnosisTimeline = (runs: ReadonlyArray<Storm.Run>, untilMillis: number): Table => ({
  columns: ["policy", "diagnosis over time (probe and calls)", "the calls alone (no probe)"],
  rows: runs.flatMap((run) =>
    run.probes === undefined ? [] : [[
      run.contender.name,
      describeSpans(spans(run.probes, untilMillis)),
      describeSpans(spans(run.probes, untilMillis, (probe) => probe.callsAlone))
    ]]
  )
})

/** The diagnosis over time as strips, one per policy that probed, and one for what its calls alone say. */
const diagnosisPanel = (runs: ReadonlyArray<Storm.Run>, untilMillis: number): Chart["panels"][number] => ({
  title: "diagnosis over time: ours with the probe, and what the calls alone say (no probe)",
  strip: true,
  points: runs.flatMap((run) =>
    run.probes === undefined ? [] : [
      ...spans(run.probes, untilMillis).map((span) => ({ ...span, policy: run.contender.name })),
      ...spans(run.probes, untilMillis, (probe) => probe.callsAlone).map((span) => ({
        ...span,
        policy: `${run.contender.name}, calls alone`
      }))
    ].map((span) => ({
      x: span.from / 1000,
      x2: span.to / 1000,
      y: 0,
      policy: span.policy,
      category: span.diagnosis
    }))
  )
})

/** `chart` with the diagnosis strips below it. */
const withDiagnosis = (chart: Chart, runs: ReadonlyArray<Storm.Run>, untilMillis: number): Chart => ({
  ...chart,
  panels: [...chart.panels, diagnosisPanel(runs, untilMillis)]
})

/** S2: goodput before, during and after a 60 s outage; recovery time; wasted work. */
export const s2 = (seed: number, scale = 1): Section => {
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
      attemptsPerCall: run.attempts / run.calls.length,
      ...(run.probes === undefined ? {} : outageDiagnosis(run, run.probes, from, to, scenario.horizonMillis))
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
  const probed = runs.filter((run) => run.probes !== undefined).map((run) => run.contender.name)
  const diagnosed = figures["ours-managed"]!
  const at = (seconds: number | null | undefined) =>
    seconds === null || seconds === undefined ? "never" : `${secondsOf(seconds * 1000)} s`
  const each = (describe: (name: string) => string) => probed.map((name) => `${name} ${describe(name)}`).join(", ")
  const interval = scenario.probe?.intervalMillis ?? 0
  return scenarioSection(scenario, runs, {
    setup: `Provider ${Scenarios.slots} slots × ${Scenarios.serviceMillis} ms, queue of 1000. ${demand} calls/s ` +
      `(80% of capacity). From ${from / 1000} s to ${to / 1000} s the provider serves nothing but keeps ` +
      `accepting requests into its queue, and serves them (for callers long gone) when it comes back. ` +
      `Deadline 10 s, attempt timeout 5 s. Recovery: seconds from restoration until goodput over the next 10 s ` +
      `is back to 95% of demand. Ours (both presets) probes the provider's health endpoint, a model listing ` +
      `served apart from inference that hangs during the outage, every ${interval / 1000} s with a ` +
      `${(scenario.probe?.timeoutMillis ?? 0) / 1000} s timeout.`,
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
      },
      {
        text: `diagnosis right: provider-degraded during ≥ 80% of the outage and healthy again within two probes ` +
          `(${(2 * interval) / 1000} s) of restoration; ours-managed healthy before it`,
        met: diagnosed.healthyBefore === 1 && probed.every((name) =>
          (figures[name]!.degradedShare ?? 0) >= 0.8 &&
          (figures[name]!.healthyAgainAt ?? Infinity) <= to / 1000 + (2 * interval) / 1000
        ),
        evidence: each((name) =>
          `provider-degraded ${percent(figures[name]!.degradedShare ?? 0)} of the outage, healthy again at ${
            at(figures[name]!.healthyAgainAt)
          }`
        )
      },
      {
        text: "never the wrong one: no probe in the outage says self-inflicted",
        met: probed.every((name) => figures[name]!.selfInflictedProbesInOutage === 0),
        evidence: each((name) => `${figures[name]!.selfInflictedProbesInOutage} probes`) +
          `; without the probe, the calls alone say self-inflicted during ${
            percent(diagnosed.callsAloneSelfInflictedShare ?? 0)
          } of it (ours-managed)`
      },
      {
        text: "the ramp starts when the probe says the provider is back, not on the first lucky call",
        met: diagnosed.rampStartSecond !== null && diagnosed.providerBackAt !== null &&
          diagnosed.rampStartSecond === Math.floor(diagnosed.providerBackAt ?? 0) &&
          (diagnosed.firstSuccessAfter ?? Infinity) < (diagnosed.rampStartSecond ?? 0),
        evidence: `ours-managed: first success after restoration at ${at(diagnosed.firstSuccessAfter)}, the ` +
          `probe's second answer in a row at ${at(diagnosed.providerBackAt)}, the gate recovering from second ${
            diagnosed.rampStartSecond ?? "never"
          }`
      }
    ],
    figures,
    timeline: diagnosisTimeline(runs, scenario.horizonMillis),
    chart: withDiagnosis(seriesChart(runs, seconds), runs, scenario.horizonMillis),
    notes: [
      "The outage fills the provider's queue with requests whose callers time out; when capacity returns it serves " +
      "them first, so every new request waits past its timeout and is retried, which keeps the queue full: a " +
      "metastable failure. A policy recovers only if it stops feeding the queue.",
      `Ours probes the health endpoint every ${interval / 1000} s: two failed probes in a row say ` +
      "provider-degraded, and while a probe fails the gate's recovery is held, so a call that gets through does " +
      "not start the ramp; two answered in a row say the provider is back and start it. Without the probe, the " +
      "calls alone look as they do when our own load is the cause (S7): ours-managed's say self-inflicted during " +
      `${percent(diagnosed.callsAloneSelfInflictedShare ?? 0)} of the outage. Waiting for the probe's verdict ` +
      `costs ours-managed a few seconds of recovery: the first call got through at ` +
      `${diagnosed.firstSuccessAfter ?? "–"} s, the probe said the provider was back at ` +
      `${secondsOf((diagnosed.providerBackAt ?? Number.NaN) * 1000)} s. ours-fixed-capacity's gate, set to ` +
      "the pool's slots, sheds some calls at 80% load and many while its ramp climbs after the outage: its own " +
      "load turned away, which the diagnosis reads as self-inflicted."
    ]
  })
}

/**
 * What the diagnosis said of S2's outage (`[from, to)`): the share of it diagnosed provider-degraded,
 * the probes in it that said self-inflicted (a diagnosis from before it holds into it until the next
 * probe, which says nothing of the outage), when the probe said the provider was back and when the
 * gate's ramp started (its first second sampled recovering), the first success after restoration,
 * and what the calls alone said.
 */
const outageDiagnosis = (
  run: Storm.Run,
  probes: ReadonlyArray<Storm.ProbeRecord>,
  from: number,
  to: number,
  untilMillis: number
): Record<string, number | null> => {
  const timeline = spans(probes, untilMillis)
  const alone = spans(probes, untilMillis, (probe) => probe.callsAlone)
  const back = probes.find((probe) => probe.providerBack && probe.at >= from)
  const rampStart = run.health.findIndex((health, second) => second >= from / 1000 && health === "recovering")
  const firstSuccess = Math.min(
    ...run.calls.filter((call) => call.ok && call.endedAt >= to).map((call) => call.endedAt)
  )
  const healthyAgain = timeline.find((span) => span.to > to && span.diagnosis === "healthy")
  return {
    degradedShare: timeIn(timeline, "provider-degraded", from, to) / (to - from),
    selfInflictedProbesInOutage:
      probes.filter((probe) => probe.at >= from && probe.at < to && probe.diagnosis === "self-inflicted").length,
    healthyBefore: timeIn(timeline, "healthy", 0, from) / from,
    healthyAgainAt: healthyAgain === undefined ? null : Math.max(to, healthyAgain.from) / 1000,
    providerBackAt: back === undefined ? null : back.at / 1000,
    rampStartSecond: rampStart === -1 ? null : rampStart,
    firstSuccessAfter: Number.isFinite(firstSuccess) ? firstSuccess / 1000 : null,
    callsAloneSelfInflictedShare: timeIn(alone, "self-inflicted", from, to) / (to - from)
  }
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
export const s5 = (seed: number, scale = 1): Section => {
  const scenario = Scenarios.saturatedPool(scale)
  const runs = runAll(scenario, seed)
  const surgeEnds = Scenarios.surgeEndsMillis(scale) / 1000
  const figures: Record<string, Record<string, number | null>> = {}
  const rows = runs.map((run) => {
    const latencies = run.calls.filter((call) => call.ok).map((call) => call.endedAt - call.startedAt)
      .sort((a, b) => a - b)
    const p99 = Meters.quantile(latencies, 0.99, { sorted: true })
    const p50 = Meters.quantile(latencies, 0.5, { sorted: true })
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

/**
 * The tokens a second a workload's services offer, second by second: each one's rate times the mean
 * tokens of its calls (over its first thousand call numbers), as the provider will count them.
 */
const offeredTokens = (workload: Storm.Workload): ReadonlyArray<number> => {
  const services = workload.services ?? []
  const meanTokens = services.map((service) => {
    let total = 0
    for (let call = 0; call < 1000; call++) {
      const { completion, prompt } = service.tokens(call)
      total += prompt + completion
    }
    return total / 1000
  })
  return Array.from(
    { length: Math.ceil(workload.untilMillis / 1000) },
    (_, second) =>
      services.reduce((total, service, index) => total + service.ratePerSecond(second * 1000) * meanTokens[index]!, 0)
  )
}

/** Milliseconds a call waited before the attempt that succeeded was sent; a failed call waited for ever. */
const waitOf = (call: Storm.CallRecord) => (call.ok ? (call.lastSentAt ?? call.endedAt) - call.startedAt : Infinity)

const millis = (value: number | undefined) =>
  value === undefined ? "–" : Number.isFinite(value) ? `${Math.round(value)} ms` : "failed"

/** S6: ten services on one key, against its requests and tokens per minute. */
export const s6 = (
  seed: number,
  scale = 1,
  contenders?: ReadonlyArray<StormPolicies.Contender> | undefined
): Section => {
  const scenario = Scenarios.sharedKey(scale)
  const runs = runAll(scenario, seed, contenders)
  const limits = Scenarios.keyLimits
  const tokensPerSecond = limits.tokensPerMinute / 60
  // The period in which the services offer more tokens than the limit: the key is saturated.
  const offered = offeredTokens(scenario.workload)
  const over = offered.flatMap((tokens, second) => (tokens > tokensPerSecond ? [second] : []))
  const saturated = { from: Math.min(...over), to: Math.max(...over) + 1 }
  const seconds = Math.ceil(scenario.horizonMillis / 1000)
  const figures: Record<string, Record<string, number | null>> = {}
  const tokensUsed = new Map<string, ReadonlyArray<number>>()
  const rows = runs.map((run) => {
    const used = Array.from({ length: seconds }, () => 0)
    for (const call of run.calls) {
      const second = Math.floor(call.endedAt / 1000)
      if (call.tokensUsed !== undefined && second < seconds) used[second]! += call.tokensUsed
    }
    tokensUsed.set(run.contender.name, used)
    const goodput = mean(used, saturated.from, saturated.to) / tokensPerSecond
    const lane = (name: string) => run.calls.filter((call) => call.service?.startsWith(name))
    const interactive = lane("interactive")
    const batch = lane("batch")
    const waits = (calls: ReadonlyArray<Storm.CallRecord>) => calls.map(waitOf).sort((a, b) => a - b)
    const interactiveWaits = waits(interactive)
    const batchWaits = waits(batch)
    const failures = new Map<string, number>()
    for (const call of run.calls) {
      if (!call.ok) failures.set(call.failure ?? "?", (failures.get(call.failure ?? "?") ?? 0) + 1)
    }
    const rateLimitedShare = run.rateLimited / Math.max(1, run.attempts)
    const interactiveP50 = Meters.quantile(interactiveWaits, 0.5, { sorted: true })
    const interactiveP99 = Meters.quantile(interactiveWaits, 0.99, { sorted: true })
    const batchP50 = Meters.quantile(batchWaits, 0.5, { sorted: true })
    const batchP99 = Meters.quantile(batchWaits, 0.99, { sorted: true })
    const finite = (value: number | undefined) => value !== undefined && Number.isFinite(value) ? value : null
    figures[run.contender.name] = {
      rateLimitedShare,
      rateLimited: run.rateLimited,
      attempts: run.attempts,
      goodputShare: goodput,
      interactiveWaitP50: finite(interactiveP50),
      interactiveWaitP99: finite(interactiveP99),
      batchWaitP50: finite(batchP50),
      batchWaitP99: finite(batchP99),
      interactiveSuccessShare: interactive.filter((call) => call.ok).length / Math.max(1, interactive.length),
      batchSuccessShare: batch.filter((call) => call.ok).length / Math.max(1, batch.length),
      lowestGateLimit: Math.min(...run.limit.slice(saturated.from, saturated.to))
    }
    return [
      run.contender.name,
      `${run.rateLimited} (${fixed(100 * rateLimitedShare, 2)}%)`,
      percent(goodput),
      millis(interactiveP50),
      millis(interactiveP99),
      percent(figures[run.contender.name]!.interactiveSuccessShare!),
      millis(batchP50),
      millis(batchP99),
      percent(figures[run.contender.name]!.batchSuccessShare!),
      failures.size === 0
        ? "none"
        : [...failures].sort(([a], [b]) => a.localeCompare(b)).map(([reason, count]) => `${reason} ${count}`).join(
          ", "
        )
    ]
  })
  const paced = figures["ours-paced"]!
  const today = figures["ours-managed"]!
  const noLanes = figures["ours-paced-no-lanes"]
  const bottleneck = figures["bottleneck-rps"]
  const share = (value: number | null | undefined) =>
    value === null || value === undefined ? "–" : fixed(100 * value, 2) + "%"
  const wait = (value: number | null | undefined) => value === null || value === undefined ? "failed" : millis(value)
  const services = scenario.workload.services ?? []
  const interactiveCount = services.filter((service) => service.lane === "interactive").length
  return scenarioSection(scenario, runs, {
    setup: `One API key with ${limits.requestsPerMinute} requests and ${limits.tokensPerMinute} tokens a minute, ` +
      `enforced as a provider does: a bucket per limit, refilled continuously and holding one second's worth ` +
      `(${limits.requestsPerMinute / 60} requests, ${tokensPerSecond} tokens); a request is counted at its prompt ` +
      `and \`max_tokens\` when it arrives, refused with a 429 (\`retry-after\` in seconds, \`x-ratelimit-*\` ` +
      `headers) when a bucket cannot hold it, and given back the tokens it did not generate when served (300 ms + ` +
      `8 ms a completion token). ${services.length} services share it: ${interactiveCount} interactive ones, 2 calls/s ` +
      `each, 600 prompt + 400 max tokens (100–400 generated), deadline 10 s; ${services.length - interactiveCount} ` +
      `batch jobs, 1.5 calls/s each for 100 s, starting 15 s apart, 1500 + 1000 max tokens (200–1000 generated), ` +
      `deadline 120 s. From ${saturated.from} s to ${saturated.to} s they offer more tokens than the limit ` +
      `(at most ${percent(Math.max(...offered) / tokensPerSecond)} of it). ` +
      `Goodput: tokens of successful calls per second over that period, over the limit. Wait: from a call's start to ` +
      `the sending of the attempt that succeeded (a failed call waits for ever, so a p99 exists only when 99% succeed).`,
    table: {
      columns: [
        "policy",
        "429s (of requests sent)",
        "goodput / TPM",
        "interactive wait p50",
        "p99",
        "interactive successes",
        "batch wait p50",
        "p99",
        "batch successes",
        "failures by reason"
      ],
      rows
    },
    goals: [
      {
        text: "with pacing, 429s stay under 1% of requests",
        met: (paced.rateLimitedShare ?? 1) < 0.01,
        evidence: `ours-paced ${share(paced.rateLimitedShare)}; today's policy (ours-managed, no pacing) ${
          share(today.rateLimitedShare)
        }, bottleneck-rps ${share(bottleneck?.rateLimitedShare)}`
      },
      {
        text: "goodput is at least 95% of the key's tokens per minute while it is saturated",
        met: (paced.goodputShare ?? 0) >= 0.95,
        evidence: `ours-paced ${share(paced.goodputShare)}; today's policy ${share(today.goodputShare)}, ` +
          `bottleneck-rps ${share(bottleneck?.goodputShare)}`
      },
      {
        text: "interactive p99 wait under 1 s while batch saturates the key",
        met: (paced.interactiveWaitP99 ?? Infinity) < 1000,
        evidence:
          `ours-paced ${wait(paced.interactiveWaitP99)} (without lanes ${wait(noLanes?.interactiveWaitP99)}); ` +
          `today's policy ${wait(today.interactiveWaitP99)} (${percent(today.interactiveSuccessShare ?? 0)} of ` +
          `interactive calls succeed), bottleneck-rps ${wait(bottleneck?.interactiveWaitP99)}`
      }
    ],
    chart: {
      x: "seconds",
      panels: [
        {
          title: `tokens per second of successful calls (the key's limit: ${tokensPerSecond})`,
          points: runs.flatMap((run) =>
            tokensUsed.get(run.contender.name)!.map((value, second) => ({
              x: second,
              y: value,
              policy: run.contender.name
            }))
          )
        },
        {
          title: "429s per second",
          points: runs.flatMap((run) =>
            run.refused.map((value, second) => ({ x: second, y: value, policy: run.contender.name }))
          )
        }
      ]
    },
    figures,
    notes: [
      `Today's policy sends few 429s (${today.rateLimited}) because its adaptive gate reads each one as overload ` +
      `and cuts its limit on calls in flight (to ${today.lowestGateLimit} at the lowest), which then holds the key ` +
      `below its limit; but the gate's queue is first come first served, so interactive calls wait behind batch ` +
      `calls and ${percent(1 - (today.interactiveSuccessShare ?? 0))} of them miss their 10 s deadline. A limit on ` +
      "calls in flight stands for a rate only while service times hold still. The Bottleneck-style limiter spaces " +
      "requests to the requests per minute but knows nothing of tokens, which are what this key runs out of: its " +
      "figures are today's policy's, with the spacing's wait added.",
      "Paced, a batch call goes only while the key's bucket keeps half a second's worth free (the interactive " +
      "reserve), and otherwise waits without holding a place, so an interactive call finds room at once. Without " +
      "lanes every call takes its turn first come first served; at the peak the turns run further ahead than an " +
      "interactive call's deadline allows, and a call whose turn falls too late stops at once (rate-limited-locally). " +
      "ours-paced-learned sets no limits: it reads them from the first answer's headers, then paces as ours-paced."
    ]
  })
}

/** S7: a client stampede on a healthy provider; what the diagnosis says, with the probe and without. */
export const s7 = (
  seed: number,
  scale = 1,
  contenders?: ReadonlyArray<StormPolicies.Contender> | undefined
): Section => {
  const scenario = Scenarios.clientStampede(scale)
  const runs = runAll(scenario, seed, contenders)
  const { from, to } = Scenarios.clientStampedeMillis(scale)
  const until = scenario.horizonMillis
  const windowMillis = Either.match(Diagnoses.settings(scenario.probe?.diagnosis), {
    onLeft: () => Number.NaN,
    onRight: (settings) => settings.windowMillis
  })
  const figures: Record<string, Record<string, number | null>> = {}
  const rows = runs.map((run) => {
    const timeline = run.probes === undefined ? [] : spans(run.probes, until)
    const alone = run.probes === undefined ? [] : spans(run.probes, until, (probe) => probe.callsAlone)
    const first = timeline.find((span) => span.to > from && span.diagnosis === "self-inflicted")
    const healthyAgain = timeline.find((span) => span.to > to && span.diagnosis === "healthy")
    const stampeding = run.calls.filter((call) => call.startedAt >= from && call.startedAt < to)
    const figure = {
      successShare: successes(run) / run.calls.length,
      stampedeSuccessShare: stampeding.filter((call) => call.ok).length / Math.max(1, stampeding.length),
      selfInflictedShare: timeIn(timeline, "self-inflicted", from, to) / (to - from),
      firstSelfInflictedAfter: first === undefined ? null : (Math.max(first.from, from) - from) / 1000,
      healthyAgainAfter: healthyAgain === undefined ? null : (Math.max(healthyAgain.from, to) - to) / 1000,
      providerDegraded: timeIn(timeline, "provider-degraded", 0, until),
      callsAloneSelfInflictedShare: timeIn(alone, "self-inflicted", from, to) / (to - from)
    }
    figures[run.contender.name] = figure
    const after = (seconds: number | null) => seconds === null ? "never" : `${secondsOf(seconds * 1000)} s`
    return [
      run.contender.name,
      percent(figure.successShare),
      percent(figure.stampedeSuccessShare),
      percent(figure.selfInflictedShare),
      after(figure.firstSelfInflictedAfter),
      after(figure.healthyAgainAfter),
      `${secondsOf(figure.providerDegraded)} s`,
      percent(figure.callsAloneSelfInflictedShare)
    ]
  })
  const probed = runs.filter((run) => run.probes !== undefined).map((run) => run.contender.name)
  const each = (describe: (figure: Record<string, number | null>) => string) =>
    probed.map((name) => `${name} ${describe(figures[name]!)}`).join(", ")
  const provider = scenario.provider
  return scenarioSection(scenario, runs, {
    setup: `A healthy provider, small: ${provider.slots} slots × ${provider.serviceMillis} ms ` +
      `(${(provider.slots * 1000) / provider.serviceMillis}/s), a queue of ${provider.queueLimit}. Our clients ` +
      `send ${scenario.workload.ratePerSecond(0)} calls/s, then ${scenario.workload.ratePerSecond(from)} from ` +
      `${from / 1000} s to ${to / 1000} s (a stampede: three times what it serves), then ` +
      `${scenario.workload.ratePerSecond(to)} again. Deadline 10 s, attempt timeout 5 s. The provider is never ` +
      `down: its health endpoint answers throughout, and ours probes it every ` +
      `${(scenario.probe?.intervalMillis ?? 0) / 1000} s. Self-inflicted: the probe answers while at least 10% ` +
      `of the calls over the last ${windowMillis / 1000} s are in trouble (failed for ` +
      `capacity, shed, out of time, refused a retry by the budget).`,
    table: {
      columns: [
        "policy",
        "successes",
        "during the stampede",
        "self-inflicted (of the stampede)",
        "first said after its start",
        "healthy again after its end",
        "provider-degraded",
        "the calls alone: self-inflicted"
      ],
      rows
    },
    timeline: diagnosisTimeline(runs, until),
    goals: [
      {
        text: "diagnosis right: self-inflicted during ≥ 70% of the stampede",
        met: probed.length > 0 && probed.every((name) => (figures[name]!.selfInflictedShare ?? 0) >= 0.7),
        evidence: each((figure) =>
          `${percent(figure.selfInflictedShare ?? 0)} (from ${
            secondsOf((figure.firstSelfInflictedAfter ?? Number.NaN) * 1000)
          } s after its start)`
        )
      },
      {
        text: "never the wrong one: provider-degraded at no moment",
        met: probed.every((name) => figures[name]!.providerDegraded === 0),
        evidence: each((figure) => `${secondsOf(figure.providerDegraded ?? 0)} s`)
      }
    ],
    chart: withDiagnosis(seriesChart(runs, Math.ceil(until / 1000)), runs, until),
    figures,
    notes: [
      "The managed preset's gate queues: once the provider is full, calls wait in it and fail at their deadline, " +
      "which the diagnosis counts as trouble as it counts the fixed-capacity preset's sheds; so it says " +
      "self-inflicted only once calls start missing their deadlines, about 10 s into the stampede. After it, the " +
      `trouble leaves the ${windowMillis / 1000} s window and the diagnosis is healthy again. The calls alone say ` +
      "the same here, where " +
      "it is true, as they do of S2's outage, where it is not: only the probe tells the two apart."
    ]
  })
}

/** Brooker's contention experiment, beside the article's figures. */
export const contention = (seed: number, clients = 100, trials = 20): Section => {
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
