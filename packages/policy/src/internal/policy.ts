/**
 * A policy's settings, checked by one Schema: `Resilient.policy` decodes a caller's options with it,
 * and a target's retry settings become a policy through it (`Target.policyFor`), so a setting
 * follows one rule whichever door it comes through. The field rules are shared with a target's own
 * settings.
 */
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Backoff from "../Backoff.js"
import type * as Classifiers from "../Classifier.js"
import * as ConcurrencyGate from "../ConcurrencyGate.js"
import type * as Failure from "../Failure.js"
import * as RateLimiter from "../RateLimiter.js"
import type { Policy, PolicyOptions } from "../Resilient.js"
import type * as RetryBudget from "../RetryBudget.js"
import * as Settings from "../Settings.js"
import { BudgetSettings } from "./budgetRules.js"

/** Whether `schedule` is a `Schedule`, so a settings object cannot pass anything else for one. */
const ScheduleSetting = Schema.declare(
  (input: unknown): input is Schedule =>
    typeof input === "object" && input !== null && "step" in input && "initial" in input,
  { message: () => "must be a Schedule" }
)

type Schedule = Policy["schedule"]

/**
 * A budget's options, checked by the budget's own rules (`budget.ratio`, …) and kept as written:
 * the target's budget is made from them on its first call.
 */
const BudgetOptions: Schema.Schema<RetryBudget.Options, unknown> = Schema.transformOrFail(
  Schema.Unknown,
  Schema.Any,
  {
    strict: true,
    decode: (input, options) => ParseResult.map(ParseResult.decodeUnknown(BudgetSettings)(input, options), () => input),
    encode: ParseResult.succeed
  }
)

/** The rules of each retry setting, without defaults: a target's settings reuse them. */
export const fields = {
  maxAttempts: Settings.integerAtLeast(1),
  baseDelay: Settings.duration,
  maxDelay: Settings.duration,
  hintSpread: Settings.duration,
  attemptTimeout: Settings.positiveDuration,
  minAttemptTime: Settings.duration,
  maxRetryAfter: Settings.duration,
  replaySafe: Settings.flag,
  budget: BudgetOptions
}

/** The rules of a policy's settings, its defaults included. */
const PolicySettings = Schema.Struct({
  target: Settings.nonEmpty,
  model: Settings.optional(Schema.String),
  maxAttempts: Settings.withDefault(fields.maxAttempts, 3),
  baseDelay: Settings.withDefault(fields.baseDelay, Duration.millis(500)),
  maxDelay: Settings.withDefault(fields.maxDelay, Duration.seconds(8)),
  hintSpread: Settings.withDefault(fields.hintSpread, Duration.seconds(1)),
  schedule: Settings.optional(ScheduleSetting),
  attemptTimeout: Settings.withDefault(fields.attemptTimeout, Duration.seconds(60)),
  minAttemptTime: Settings.withDefault(fields.minAttemptTime, Duration.millis(100)),
  maxRetryAfter: Settings.withDefault(fields.maxRetryAfter, Duration.seconds(60)),
  replaySafe: Settings.withDefault(fields.replaySafe, false),
  budget: Settings.withDefault(fields.budget, {}),
  gate: Settings.withDefault(Schema.Object, {}),
  rateLimit: Settings.withDefault(Schema.Object, {}),
  classify: Settings.optional(
    Schema.declare(
      (input: unknown): input is (failure: Failure.Failure) => Classifiers.Verdict => typeof input === "function",
      {
        message: () => "must be a function"
      }
    )
  )
}).pipe(Schema.filter((settings) => [
  Settings.notLongerThan(["baseDelay"], settings.baseDelay, ["maxDelay"], settings.maxDelay),
  Settings.shorterThan(["minAttemptTime"], settings.minAttemptTime, ["attemptTimeout"], settings.attemptTimeout),
  // The gate and limiter are made on the target's first call: their settings are checked now.
  ...Either.match(
    ConcurrencyGate.settings({ limit: Number.POSITIVE_INFINITY, ...settings.gate, target: settings.target }),
    {
      onLeft: (invalid) => invalid.problems.map((problem) => ({ path: ["gate"], message: problem })),
      onRight: () => []
    }
  ),
  ...Either.match(RateLimiter.settings({ ...settings.rateLimit, target: settings.target }), {
    onLeft: (invalid) => invalid.problems.map((problem) => ({ path: ["rateLimit"], message: problem })),
    onRight: () => []
  })
]))

const decodeSettings = Settings.decoder(PolicySettings, (input) => {
  const target = (input as { readonly target?: unknown } | undefined)?.target
  return typeof target === "string" && target !== "" ? `policy for ${target}` : "policy"
})

/** Checks `options` and fills in the defaults: the policy, or one `InvalidSettings` naming each bad setting. */
export const decode = (options: PolicyOptions): Either.Either<Policy, Settings.InvalidSettings> =>
  Either.map(decodeSettings(options), (settings) => ({
    target: settings.target,
    model: settings.model,
    maxAttempts: settings.maxAttempts,
    schedule: settings.schedule ?? Backoff.fullJitter({ base: settings.baseDelay, cap: settings.maxDelay }),
    readsHints: settings.schedule === undefined,
    hintSpread: settings.hintSpread,
    attemptTimeout: settings.attemptTimeout,
    minAttemptTime: settings.minAttemptTime,
    maxRetryAfter: settings.maxRetryAfter,
    replaySafe: settings.replaySafe,
    budget: settings.budget,
    gate: settings.gate as Omit<ConcurrencyGate.Options, "target">,
    rateLimit: settings.rateLimit as Omit<RateLimiter.Options, "target">,
    classify: settings.classify
  }))
