/**
 * `Target` with what only the toolkit uses of it: the policy a target's calls run under, how its
 * gate behaves when full, and its classifier (for the client's wiring, the storm and the tests).
 */
import * as Classifier from "@resilient-ai/policy/Classifier"
import type * as Classifiers from "@resilient-ai/policy/internal/classifier"
import { Either } from "@resilient-ai/policy/internal/line"
import * as Policies from "@resilient-ai/policy/internal/policy"
import * as Checked from "@resilient-ai/policy/internal/settings"
import type * as Resilient from "@resilient-ai/policy/Resilient"
import type * as Settings from "@resilient-ai/policy/Settings"
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import type * as Target from "../Target.js"
import { decode } from "../Target.js"
import { variablesOf } from "./targetVariables.js"

export * from "../Target.js"

/**
 * The policy of requests for `model` (the target's own model unless named), decoded by the Schema
 * `Resilient.policy` decodes with: the target's settings were checked by the same field rules, so
 * only a rule that drifted apart could refuse them, and that is a defect.
 */
export const policyFor = (target: Target.Target, model: string = target.model): Resilient.Policy => {
  const attemptTimeout = target.attemptTimeoutByModel[model] ?? target.attemptTimeout
  const decoded = Policies.decode({
    target: target.name,
    model,
    maxAttempts: target.maxAttempts,
    baseDelay: target.baseDelay,
    maxDelay: target.maxDelay,
    hintSpread: target.hintSpread,
    maxRetryAfter: target.maxRetryAfter,
    replaySafe: target.replaySafe,
    attemptTimeout,
    // From the model's own timeout: a model allowed 90 ms must not need 100 ms left to start.
    minAttemptTime: target.minAttemptTime ??
      Duration.min(Duration.millis(100), Duration.divide(attemptTimeout, 2).pipe(Option.getOrThrow)),
    budget: target.budget,
    gate: { limit: target.concurrency, mode: gateMode(target) },
    rateLimit: { requestsPerMinute: target.requestsPerMinute, tokensPerMinute: target.tokensPerMinute },
    classify: classifierFor(target).classify
  })
  return Either.getOrThrowWith(
    decoded,
    (invalid) => new Error(`a checked target made a bad policy: ${invalid.message}`)
  )
}

/** How a full gate behaves: managed targets queue (bounded by the deadline), self-hosted ones shed. */
export const gateMode = (target: Target.Target): "queue" | "shed" => target.kind === "managed" ? "queue" : "shed"

/** A self-hosted pool's classifier: `Classifier.classifyFixedCapacity`. */
export const selfHostedClassifier: Classifiers.Service = { classify: Classifier.classifyFixedCapacity }

/** The classifier a target's calls use. */
const classifierFor = (target: Target.Target): Classifiers.Service =>
  target.kind === "managed" ? { classify: Classifier.classifyDefault } : selfHostedClassifier

/**
 * `Target.config`'s target without `Config`: read from the variables `lookup` finds by name (a
 * process's environment, a Worker's bindings), with the same rules; bad ones are one
 * `InvalidSettings` with `config`'s message.
 */
export const fromVariables = (
  kind: Target.Kind,
  prefix: string,
  lookup: (name: string) => string | undefined,
  name: string = prefix.toLowerCase()
): Either.Either<Target.Target, Settings.InvalidSettings> =>
  Checked.fromVariables(
    (input, label) => decode(kind, input as Target.Options, label),
    variablesOf(prefix, name),
    lookup
  )
