/**
 * The toolkit's own capacity failures, per target: what the health diagnosis counts as trouble.
 * They are told by identity, by the gate's rule (`ConcurrencyGate.outcomeOf`), so a caller's own
 * error tagged `RateLimited` is no trouble of the provider's. Kept off the metric registry: the
 * failures series already shows every failed attempt by its tag, and a second series would only
 * repeat it for the toolkit's.
 */
import { globalValue } from "effect/GlobalValue"

// Process-wide as the metrics the diagnosis reads beside them are (Effect keeps those in one registry).
const counts = globalValue("@resilient-ai/policy/internal/capacityFailures", () => new Map<string, number>())

/** One more capacity failure of the toolkit's at `target`. */
export const add = (target: string): void => {
  counts.set(target, (counts.get(target) ?? 0) + 1)
}

/** The capacity failures of the toolkit's counted at `target` so far. */
export const of = (target: string): number => counts.get(target) ?? 0
