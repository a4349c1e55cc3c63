/**
 * What a target's calls learn as they go: per model, how long its successes take lately and the
 * handles of its metrics; for the whole target, the toolkit's capacity failures its health diagnosis
 * reads. Part of the target's state (`Coordinations.TargetServices`), so every caller of a target,
 * whatever policy object it holds, learns into one place, and two coordinations share none of it.
 */
import * as Metrics from "./metrics.js"

/**
 * How long a model's successful attempts take lately: a moving average, so a slow model gets a
 * higher bar than a fast one without anyone configuring it.
 */
export class TypicalLatency {
  millis = 0
  private seen = false

  record(took: number): void {
    if (!Number.isFinite(took) || took < 0) return
    this.millis = this.seen ? this.millis + 0.1 * (took - this.millis) : took
    this.seen = true
  }
}

/** One model of a target, as its calls know it. */
export interface ModelState {
  readonly latency: TypicalLatency
  readonly metrics: Metrics.TargetMetrics
}

/** A target's models, each made on its first call, and what its calls told of its capacity. */
export class Learned {
  private readonly models = new Map<string | undefined, ModelState>()
  /**
   * The attempts that failed for the provider's capacity, told by identity (`Gates.outcomeOf`), so a
   * caller's own error tagged `RateLimited` is none. Not a metric: the failures series already
   * shows every failed attempt by its tag, and a second series would only repeat it.
   */
  capacityFailures = 0

  of(target: string, model: string | undefined): ModelState {
    let state = this.models.get(model)
    if (state === undefined) {
      state = { latency: new TypicalLatency(), metrics: Metrics.forTarget(target, model) }
      this.models.set(model, state)
    }
    return state
  }
}
