/**
 * A policy: its settings checked by one Schema, once per policy object, when it is first used (or
 * yielded). `Resilient.policy` makes one from a caller's options at once, without checking; a
 * target's retry settings become one through the same Schema (`Target.policyFor`), so a setting
 * follows one rule whichever door it comes through. The field rules are shared with a target's own
 * settings. A policy is an Effect (Effect's commit protocol): yielding it checks it.
 */
import { EffectValue, Either } from "#effect-line"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Schedule from "effect/Schedule"
import type * as Types from "effect/Types"
import * as Backoff from "../Backoff.js"
import type * as Classifiers from "../Classifier.js"
import type * as ConcurrencyGate from "../ConcurrencyGate.js"
import type * as Failure from "../Failure.js"
import type * as RateLimiter from "../RateLimiter.js"
import type { Policy, PolicyOptions } from "../Resilient.js"
import type * as RetryBudget from "../RetryBudget.js"
import type * as Settings from "../Settings.js"
import { BudgetSettings } from "./budgetRules.js"
import * as Gates from "./gate.js"
import * as Limiters from "./rateLimiter.js"
import * as Checked from "./settings.js"

/** A policy's own id: how a policy is told from any other Effect. */
export const TypeId: unique symbol = Symbol.for("@resilient-ai/policy/Policy")
export type TypeId = typeof TypeId

/** Where a checked policy keeps what only the engine reads. */
export const EngineId: unique symbol = Symbol.for("@resilient-ai/policy/Policy/engine")
export type EngineId = typeof EngineId

/** The variance of a policy's error: what using it may fail with before its first attempt. */
export interface Variance<out E> {
  readonly _E: Types.Covariant<E>
}

/** What the engine reads of a checked policy, in the units it computes with. */
export interface Engine {
  /** Proposes the delay before each retry; a hint read replaces it. */
  readonly backoff: Schedule.Schedule<unknown, Failure.Failure>
  /** Whether a failure's hint replaces the backoff's delay, or the backoff decides alone. */
  readonly readsHints: boolean
  readonly hintSpreadMillis: number
  readonly attemptTimeoutMillis: number
  readonly minAttemptMillis: number
  readonly maxRetryAfterMillis: number
}

/** A checked policy's settings, shared by every call to one target. */
export interface PolicySettings {
  /** Names the target in metrics, logs and failures. */
  readonly target: string
  /** Names the model in metrics and logs. */
  readonly model: string | undefined
  /** Attempts per call, the first included. */
  readonly maxAttempts: number
  /** The cap of the random spread added to a provider's hint, drawn from `[0, hint / 2)`. */
  readonly hintSpread: Duration.Duration
  /** The longest an attempt may run, before the deadline shortens it. */
  readonly attemptTimeout: Duration.Duration
  /**
   * An attempt with less time than this before the deadline is not started: it could only be cut
   * off. The bar rises to what the model's successful attempts on this target take lately (a moving average).
   */
  readonly minAttemptTime: Duration.Duration
  /**
   * A provider hint longer than this, or than the call's time left, ends the sequence
   * (`retry-after-too-long`) instead of being slept through.
   */
  readonly maxRetryAfter: Duration.Duration
  /** Whether ambiguous failures (the request may have run) may be replayed. */
  readonly replaySafe: boolean
  /** What the target's budget is made from, on its first call, by the `Coordination` in context. */
  readonly budget: RetryBudget.Options
  /** What the target's gate is made from, on its first call. */
  readonly gate: Omit<ConcurrencyGate.Options, "target">
  /** What the target's rate limiter is made from, on its first call. */
  readonly rateLimit: Omit<RateLimiter.Options, "target">
  /** Judges the toolkit's failures; `undefined`: the `Classifier` in context (`classifyDefault`). */
  readonly classify: ((failure: Failure.Failure) => Classifiers.Verdict) | undefined
}

/**
 * A policy, checked or not: an Effect that checks it (`yield* policy` gives the checked policy, or
 * fails with `InvalidSettings`). Using an unchecked one adds its `E` to the call's errors.
 */
export interface PolicyOf<out E> extends Effect.Effect<Policy, E> {
  readonly [TypeId]: Variance<E>
}

/** What using `P` may fail with before its first attempt: `InvalidSettings` for a policy not yet checked. */
export type PolicyError<P> = P extends PolicyOf<infer E> ? E : never

/**
 * A budget's options, checked by the budget's own rules (`budget.ratio`, …) and kept as written:
 * the target's budget is made from them on its first call.
 */
const BudgetOptions = Checked.asWritten<RetryBudget.Options>(BudgetSettings)

/** The rules of each retry setting, without defaults: a target's settings reuse them. */
export const fields = {
  maxAttempts: Checked.integerAtLeast(1),
  baseDelay: Checked.duration,
  maxDelay: Checked.duration,
  hintSpread: Checked.duration,
  attemptTimeout: Checked.positiveDuration,
  minAttemptTime: Checked.duration,
  maxRetryAfter: Checked.duration,
  replaySafe: Checked.flag,
  budget: BudgetOptions
}

/** The rules of a policy's settings, its defaults included. */
const PolicySettings = Checked.refine(
  Checked.struct({
    target: Checked.nonEmpty,
    model: Checked.optional(Checked.text),
    maxAttempts: Checked.withDefault(fields.maxAttempts, 3),
    baseDelay: Checked.withDefault(fields.baseDelay, Duration.millis(500)),
    maxDelay: Checked.withDefault(fields.maxDelay, Duration.seconds(8)),
    hintSpread: Checked.withDefault(fields.hintSpread, Duration.seconds(1)),
    attemptTimeout: Checked.withDefault(fields.attemptTimeout, Duration.seconds(60)),
    minAttemptTime: Checked.withDefault(fields.minAttemptTime, Duration.millis(100)),
    maxRetryAfter: Checked.withDefault(fields.maxRetryAfter, Duration.seconds(60)),
    replaySafe: Checked.withDefault(fields.replaySafe, false),
    budget: Checked.withDefault(fields.budget, {}),
    gate: Checked.withDefault(Checked.object, {}),
    rateLimit: Checked.withDefault(Checked.object, {}),
    classify: Checked.optional(
      Checked.accepted(
        (input: unknown): input is (failure: Failure.Failure) => Classifiers.Verdict => typeof input === "function",
        "must be a function"
      )
    )
  }),
  (settings) => [
    Checked.notLongerThan(["baseDelay"], settings.baseDelay, ["maxDelay"], settings.maxDelay),
    Checked.shorterThan(["minAttemptTime"], settings.minAttemptTime, ["attemptTimeout"], settings.attemptTimeout),
    // The gate and limiter are made on the target's first call: their settings are checked now.
    ...Either.match(
      Gates.settings({ limit: Number.POSITIVE_INFINITY, ...settings.gate, target: settings.target }),
      {
        onLeft: (invalid) => invalid.problems.map((problem) => ({ path: ["gate"], message: problem })),
        onRight: () => []
      }
    ),
    ...Either.match(Limiters.settings({ ...settings.rateLimit, target: settings.target }), {
      onLeft: (invalid) => invalid.problems.map((problem) => ({ path: ["rateLimit"], message: problem })),
      onRight: () => []
    })
  ]
)

const decodeSettings = Checked.decoder(PolicySettings, (input) => {
  const target = (input as { readonly target?: unknown } | undefined)?.target
  return typeof target === "string" && target !== "" ? `policy for ${target}` : "policy"
})

/** A backoff given instead of the default full jitter: the storm's reference policies, some tests. */
interface GivenBackoff {
  readonly schedule: Schedule.Schedule<unknown, Failure.Failure>
  readonly readsHints: boolean
}

const variance: Variance<never> = { _E: (_: never) => _ }

/** A policy value: its options until it is checked, its settings after. */
class PolicyValue extends EffectValue<Policy, Settings.InvalidSettings> {
  readonly [TypeId]: Variance<never> = variance
  private options: PolicyOptions | undefined;
  /** Set once the settings are checked. */
  [EngineId]: Engine | undefined = undefined
  private invalid: Settings.InvalidSettings | undefined = undefined

  constructor(options: PolicyOptions, private readonly given: GivenBackoff | undefined) {
    super()
    this.options = options
  }

  /** Checks the options, once: the settings are the policy's own fields from then on. */
  check(): Either.Either<Policy, Settings.InvalidSettings> {
    if (this[EngineId] !== undefined) return Either.right(this as unknown as Policy)
    if (this.invalid !== undefined) return Either.left(this.invalid)
    const decoded = decodeSettings(this.options)
    if (Either.isLeft(decoded)) {
      this.invalid = Either.leftOf(decoded)
      return Either.left(this.invalid)
    }
    const settings = Either.rightOf(decoded)
    const given = this.given
    Object.assign(this, {
      target: settings.target,
      model: settings.model,
      maxAttempts: settings.maxAttempts,
      hintSpread: settings.hintSpread,
      attemptTimeout: settings.attemptTimeout,
      minAttemptTime: settings.minAttemptTime,
      maxRetryAfter: settings.maxRetryAfter,
      replaySafe: settings.replaySafe,
      budget: settings.budget,
      gate: settings.gate,
      rateLimit: settings.rateLimit,
      classify: settings.classify
    })
    this[EngineId] = {
      backoff: given?.schedule ?? Backoff.fullJitter({ base: settings.baseDelay, cap: settings.maxDelay }),
      readsHints: given?.readsHints ?? true,
      hintSpreadMillis: Duration.toMillis(settings.hintSpread),
      attemptTimeoutMillis: Duration.toMillis(settings.attemptTimeout),
      minAttemptMillis: Duration.toMillis(settings.minAttemptTime),
      maxRetryAfterMillis: Duration.toMillis(settings.maxRetryAfter)
    }
    this.options = undefined
    return Either.right(this as unknown as Policy)
  }

  commit(): Effect.Effect<Policy, Settings.InvalidSettings> {
    return Effect.suspend(() => Either.toEffect(this.check()))
  }
}

/** A policy of `options`, checked when it is first used or yielded. */
export const make = (options: PolicyOptions): Policy<Settings.InvalidSettings> =>
  new PolicyValue(options, undefined) as unknown as Policy<Settings.InvalidSettings>

/**
 * A policy whose backoff is `schedule` instead of full jitter, and whose hints replace its delay only
 * when `readsHints`: for the storm's reference policies, which follow their own specifications.
 */
export const withSchedule = (
  options: PolicyOptions,
  schedule: Schedule.Schedule<unknown, Failure.Failure>,
  settings: { readonly readsHints: boolean }
): Policy<Settings.InvalidSettings> =>
  new PolicyValue(options, { schedule, readsHints: settings.readsHints }) as unknown as Policy<
    Settings.InvalidSettings
  >

/** Checks `options` now: the checked policy, or one `InvalidSettings` naming each bad setting. */
export const decode = (options: PolicyOptions): Either.Either<Policy, Settings.InvalidSettings> =>
  new PolicyValue(options, undefined).check()

/** Whether `u` is a policy (checked or not). */
export const isPolicy = (u: unknown): u is Policy<unknown> => typeof u === "object" && u !== null && TypeId in u

/** The policy checked (once per policy object), or why it cannot work. */
export const check = <E>(policy: Policy<E> | PolicyOf<E>): Either.Either<Policy, Settings.InvalidSettings> =>
  (policy as unknown as PolicyValue).check()

/** Whether `policy` was checked already: its settings are readable. */
export const isChecked = <E>(policy: Policy<E> | PolicyOf<E>): boolean =>
  (policy as unknown as PolicyValue)[EngineId] !== undefined

/** What the engine reads of a checked policy. */
export const engineOf = (policy: Policy): Engine => (policy as unknown as PolicyValue)[EngineId]!
