/**
 * The health diagnosis's arithmetic with time passed in, so the storm simulator and the probe fiber
 * (`HealthProbe` in `@resilient-ai/client`) decide alike; what a target's calls have come to; and
 * the publishing of a diagnosis as the `resilient_ai_diagnosis` gauge and one log line per change.
 */
import { counted, Either, noMetricScope, update } from "#effect-line"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Diagnosis, Options } from "../Health.js"
import type { TargetServices } from "./coordination.js"
import * as Metrics from "./metrics.js"
import * as Checked from "./settings.js"

export * from "../Health.js"

/** Every diagnosis, in the order a report lists them. */
export const diagnoses: ReadonlyArray<Diagnosis> = ["healthy", "provider-degraded", "self-inflicted"]

/** `Options` with every default filled in. */
export interface Settings {
  readonly downAfter: number
  readonly upAfter: number
  readonly troubleRatio: number
  readonly minTrouble: number
  readonly windowMillis: number
}

const DiagnosisSettings = Checked.struct({
  downAfter: Checked.withDefault(Checked.integerAtLeast(1), 2),
  upAfter: Checked.withDefault(Checked.integerAtLeast(1), 2),
  troubleRatio: Checked.withDefault(
    Checked.refine(Checked.number, (ratio) => (ratio > 0 && ratio <= 1) || `must be in (0, 1], got ${ratio}`),
    0.1
  ),
  minTrouble: Checked.withDefault(Checked.integerAtLeast(1), 5),
  window: Checked.withDefault(Checked.finitePositiveDuration, Duration.seconds(30))
})

const decodeSettings = Checked.decoder(DiagnosisSettings, () => "diagnosis")

/** Fills in the defaults and checks the values; bad ones are one `InvalidSettings` naming each. */
export const settings = (options: Options = {}): Either.Either<Settings, Checked.InvalidSettings> =>
  Either.map(decodeSettings(options), ({ window, ...rest }) => ({ ...rest, windowMillis: Duration.toMillis(window) }))

/**
 * What a target's calls have come to so far, as running totals (counters only grow): the attempts
 * sent, and the troubles among them or instead of them: attempts refused for capacity, calls shed,
 * calls that ran out of time, retries the budget refused.
 */
export interface CallTotals {
  readonly attempts: number
  readonly troubles: number
}

/** What a probe found. */
export interface ProbeResult {
  /** The provider answered (any answer but a 5xx, a 408 or a 429), within the probe's timeout. */
  readonly up: boolean
  readonly millis: number
}

/** What a step of the diagnosis changed. */
export interface Step {
  readonly diagnosis: Diagnosis
  /** The diagnosis before this step, when it changed. */
  readonly changedFrom: Diagnosis | undefined
  /** The provider was degraded and the probe says it is back: the time to start the recovery ramp. */
  readonly providerBack: boolean
}

/**
 * The diagnosis of one target without Effect. Each probe brings the call totals of the same moment;
 * the calls are read over the last `window` of them.
 */
export class Diagnoser {
  private current: Diagnosis = "healthy"
  private downsInARow = 0
  private upsInARow = 0
  private lastUp = true
  /** The totals at each probe within the window, oldest first, and the one just before it. */
  private readonly history: Array<{ readonly at: number; readonly totals: CallTotals }> = []

  constructor(readonly settings: Settings) {}

  get diagnosis(): Diagnosis {
    return this.current
  }

  /** Whether the last probe found the provider answering. */
  get probeUp(): boolean {
    return this.lastUp
  }

  /** The share of the calls in `window` that were in trouble, and how many troubles that was. */
  trouble(): { readonly ratio: number; readonly troubles: number } {
    const first = this.history[0]
    const last = this.history[this.history.length - 1]
    if (first === undefined || last === undefined) return { ratio: 0, troubles: 0 }
    const attempts = last.totals.attempts - first.totals.attempts
    const troubles = last.totals.troubles - first.totals.troubles
    // Sheds and budget refusals are troubles without an attempt: the ratio is over both.
    const calls = Math.max(attempts, troubles)
    return { ratio: calls === 0 ? 0 : troubles / calls, troubles }
  }

  /** Records a probe, and the call totals of the same moment; says what the diagnosis is now. */
  observe(nowMillis: number, probe: ProbeResult, totals: CallTotals): Step {
    this.lastUp = probe.up
    if (probe.up) {
      this.upsInARow++
      this.downsInARow = 0
    } else {
      this.downsInARow++
      this.upsInARow = 0
    }
    this.remember(nowMillis, totals)
    const before = this.current
    let providerBack = false
    if (this.downsInARow >= this.settings.downAfter) {
      this.current = "provider-degraded"
    } else if (before === "provider-degraded") {
      if (this.upsInARow >= this.settings.upAfter) {
        providerBack = true
        // The outage's failures say nothing about our load: the calls are read afresh from here.
        this.history.splice(0, this.history.length - 1)
        this.current = "healthy"
      }
    } else {
      // Self-inflicted only while the probe answers: a failed probe not yet confirmed is no verdict on
      // our load (at an outage's start, the calls already fail as they would under a stampede).
      const { ratio, troubles } = this.trouble()
      this.current = probe.up && ratio >= this.settings.troubleRatio && troubles >= this.settings.minTrouble
        ? "self-inflicted"
        : "healthy"
    }
    return { diagnosis: this.current, changedFrom: this.current === before ? undefined : before, providerBack }
  }

  private remember(nowMillis: number, totals: CallTotals): void {
    this.history.push({ at: nowMillis, totals })
    // Keep one entry at or before the window's start, so the window is whole.
    while (this.history.length > 2 && this.history[1]!.at <= nowMillis - this.settings.windowMillis) {
      this.history.shift()
    }
  }
}

/**
 * The call totals of `target` so far, over every model: from its metrics, and the toolkit's capacity
 * failures counted in its `state` (none before the state is made).
 */
export const callTotals = (target: string, state: Pick<TargetServices, "learned"> | undefined): CallTotals => {
  let attempts = 0
  let troubles = 0
  for (const metrics of Metrics.allForTarget(target)) {
    const count = counted
    attempts += count(metrics.attempts)
    // A gate that queues instead of shedding fails the calls it cannot place at their deadline: the
    // managed preset's shed. (A call that failed for capacity and then ran out of time counts twice,
    // which only brings the verdict forward.)
    troubles += count(metrics.shed) + count(metrics.budgetExhausted) + count(metrics.callsFailed("deadline"))
  }
  // The attempts the provider could not take: the toolkit's failures only, known by identity, so a
  // caller's own error tagged like one of ours is none.
  return { attempts, troubles: troubles + (state?.learned.capacityFailures ?? 0) }
}

/**
 * Publishes a step: the `resilient_ai_diagnosis{target, state}` gauge (1 for the diagnosis, 0 for
 * the others, so a query can select on `state`), `resilient_ai_probe_up`, the probe's duration, and
 * one log line when the diagnosis changed, a warning when it is not `healthy`.
 */
export const report = (
  target: string,
  step: Step,
  probe: ProbeResult,
  trouble: { readonly ratio: number; readonly troubles: number }
): Effect.Effect<void> =>
  Effect.suspend(() => {
    const metrics = Metrics.healthOf(target)
    for (const state of diagnoses) update(metrics.diagnosis(state), state === step.diagnosis ? 1 : 0, noMetricScope)
    update(metrics.probeUp, probe.up ? 1 : 0, noMetricScope)
    update(metrics.probeDuration, probe.millis / 1000, noMetricScope)
    if (step.changedFrom === undefined) return Effect.void
    const fields = {
      target,
      diagnosis: step.diagnosis,
      was: step.changedFrom,
      probeUp: probe.up,
      troubleRatio: Math.round(trouble.ratio * 1000) / 1000,
      troubles: trouble.troubles
    }
    const message = step.diagnosis === "provider-degraded"
      ? "diagnosis: the provider is degraded (its probe fails too): wait or fail over"
      : step.diagnosis === "self-inflicted"
      ? "diagnosis: self-inflicted (the probe is fine while calls fail for capacity): shed our own load"
      : "diagnosis: healthy"
    const log = step.diagnosis === "healthy" ? Effect.logInfo(message) : Effect.logWarning(message)
    return Effect.annotateLogs(log, fields)
  })
