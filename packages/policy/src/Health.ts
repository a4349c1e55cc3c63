/**
 * Are they down, or are we hitting them too hard? A target's diagnosis, from a probe outside the
 * call path and from the calls' own metrics.
 *
 * Measured from inside the client, a retry storm and a provider's outage draw the same graphs:
 * attempts up, successes down. They call for opposite responses (wait it out or fail over, against
 * shed our own load), so a probe asks the provider something cheap at a low fixed rate, outside
 * the budget and the gate, and the two sources are read together:
 *
 * - `provider-degraded`: the probe fails too (`downAfter` probes in a row);
 * - `self-inflicted`: the probe is fine while our calls fail for capacity, are shed, run out of
 *   time or run out of budget (`troubleRatio` of them over `window`, at least `minTrouble`);
 * - `healthy`: neither.
 *
 * `HealthProbe` in `@resilient-ai/client` runs the probe beside a target's calls; the diagnosis is
 * the `resilient_ai_diagnosis` gauge, and a log line at each change.
 */
import { type DurationInput } from "#effect-line"

/** What a target's probe and calls say together. */
export type Diagnosis = "healthy" | "provider-degraded" | "self-inflicted"

/** Settings of a diagnosis. */
export interface Options {
  /** Probes failed in a row that make the provider degraded. Default 2. */
  readonly downAfter?: number | undefined
  /** Probes answered in a row that say a degraded provider is back. Default 2. */
  readonly upAfter?: number | undefined
  /** The share of calls in trouble (capacity failures, sheds, budget refusals) that is our doing. Default 0.1. */
  readonly troubleRatio?: number | undefined
  /** The least number of troubles in `window` before the calls count as in trouble. Default 5. */
  readonly minTrouble?: number | undefined
  /** How far back the calls are read. Default 30 seconds. */
  readonly window?: DurationInput | undefined
}
