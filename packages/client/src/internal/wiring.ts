/**
 * What every caller of a target holds, made one way for `ModelClient`, the SDK adapters and
 * `HealthProbe`: the target's state, its transport settings, and a policy per model. Nothing here
 * needs an HTTP client, so a `fetch` adapter loads none.
 */
import * as Coordination from "@resilient-ai/policy/Coordination"
import * as Coordinations from "@resilient-ai/policy/internal/coordination"
import type * as Resilient from "@resilient-ai/policy/Resilient"
import type * as Settings from "@resilient-ai/policy/Settings"
import * as Effect from "effect/Effect"
import * as Target from "./target.js"
import type * as Transport from "./transport.js"

/** A target, wired. */
export interface Wiring {
  readonly target: Target.Target
  /**
   * The target's state in the `Coordination` in context, shared by every caller of the target's
   * name and API key; with the refs every attempt runs with.
   */
  readonly state: Coordinations.TargetServices
  readonly endpoint: Transport.Endpoint
  /** The policy of calls to `model`, made on its first call. */
  readonly policyFor: (model: string) => Resilient.Policy
}

/**
 * The wiring of a checked target. Its state is the one the `Coordination` in context keeps under the
 * target's name and the fingerprint of its key's text, made on first use from the policy of the
 * target's model. Attempts sent by an Effect `HttpClient` take `Transport.withTracePolicy` too.
 */
export const wire = (target: Target.Target): Effect.Effect<Wiring, Settings.InvalidSettings> =>
  Effect.flatMap(Coordination.Coordination, (coordination) => {
    const defaults = Target.policyFor(target)
    return Effect.map(
      coordination.stateOf({
        target: target.name,
        apiKey: target.apiKey,
        budget: defaults.budget,
        gate: defaults.gate,
        rateLimit: defaults.rateLimit
      }),
      (made): Wiring => {
        const policies = new Map([[target.model, defaults]])
        return {
          target,
          state: made,
          endpoint: {
            target: target.name,
            baseUrl: target.baseUrl,
            apiKey: target.apiKey,
            idempotencyHeader: target.idempotencyHeader,
            maxResponseBytes: target.maxResponseBytes,
            connectTimeout: target.connectTimeout
          },
          policyFor: (model) => {
            let policy = policies.get(model)
            if (policy === undefined) policies.set(model, policy = Target.policyFor(target, model))
            return policy
          }
        }
      }
    )
  })
