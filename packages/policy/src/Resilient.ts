/**
 * The one combinator that makes an attempt resilient: classification, attempt ceiling, backoff,
 * retry budget, deadline, concurrency gate, metrics and a log line per attempt, composed.
 *
 * ```ts
 * import { type Failure, Resilient } from "@resilient-ai/policy"
 * import type { Effect } from "effect"
 *
 * declare const sendChat: (request: string) => Effect.Effect<string, Failure.Failure>
 * declare const findUser: (id: string) => Effect.Effect<{ readonly name: string }, DbError>
 * interface DbError { readonly transient: boolean }
 * declare const request: string, id: string
 *
 * const mistral = Resilient.policy({ target: "mistral", maxAttempts: 3 })
 * const answer = yield* sendChat(request).pipe(Resilient.retry(mistral, { timeout: "20 seconds" }))
 * // Any Effect, with its own errors: `while` (or `classify`) judges them, and `CallFailed.last` keeps their type.
 * const user = yield* findUser(id).pipe(Resilient.retry({ target: "users-db", while: (e: DbError) => e.transient }))
 * ```
 *
 * A policy is a value, definable anywhere, whose settings are checked once, when it is first used
 * or yielded (an invalid one is a typed `InvalidSettings`, never a throw). A target's budget and gate come from the
 * `Coordination` in context (this process's memory unless one is provided), made on first use
 * from the policy's `budget` and `gate` settings and shared by every call to the target, with what
 * its calls learn (how long successes take); a test swaps a part with `Coordination.layerWith`. A
 * sequence ends in the attempt's success or in one `CallFailed` that says why it stopped, what
 * failed last and every attempt made.
 *
 * Interruption is cancellation: interrupting the caller during an attempt interrupts the attempt
 * and waits for it; during a sleep, no further attempt starts. An interrupt is never turned into
 * a failure or a retry. A resilient call made inside another's attempt makes a single attempt
 * and leaves retrying to the enclosing call, so retries happen at exactly one layer.
 *
 * A call is a span, each attempt a span under it with its retry attributes (`resilient_ai.attempt`,
 * `resilient_ai.verdict`, `error.type`, the delay slept before it), made with Effect's tracer while
 * someone can see them: not while tracing is off, nor under Effect's built-in tracer, which
 * exports nothing.
 */
import { type DurationInput, type Ref } from "#effect-line"
import * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type * as Classifiers from "./Classifier.js"
import type * as ConcurrencyGate from "./ConcurrencyGate.js"
import type * as Failure from "./Failure.js"
import * as Attempts from "./internal/attempt.js"
import * as Policies from "./internal/policy.js"
import type { PolicyError, PolicyOf, PolicySettings } from "./internal/policy.js"
import type { AttemptError, CallSpan, LastFailure, Refusal, Unwrapped } from "./internal/resilient.js"
import { type Judge, runSequence } from "./internal/sequence.js"
import { streamSequence } from "./internal/streaming.js"
import type * as RateLimiter from "./RateLimiter.js"
import type * as RetryBudget from "./RetryBudget.js"
import type * as Settings from "./Settings.js"

/** What an attempt knows about itself: read it (`CurrentAttempt`) to set an idempotency key or a timeout. */
export type AttemptInfo = Attempts.AttemptView

/** The attempt the current fiber is running, inside a resilient call; `undefined` outside one. Read-only. */
export const CurrentAttempt: Ref<AttemptInfo | undefined> = Attempts.CurrentAttempt

/**
 * A retry policy. `Policy<InvalidSettings>` is one not yet checked (`Resilient.policy`'s, defined
 * anywhere, module level included): a call that uses it may fail with `InvalidSettings`, on its first
 * call if its settings cannot work. `Policy` is a checked one, its settings readable.
 */
export type Policy<E = never> = PolicyOf<E> & ([E] extends [never] ? PolicySettings : unknown)

/** Settings of a policy; everything but the target has a default. */
export interface PolicyOptions {
  readonly target: string
  readonly model?: string | undefined
  /** Default 3. */
  readonly maxAttempts?: number | undefined
  /** Full jitter's first-retry bound. Default 500 ms. */
  readonly baseDelay?: DurationInput | undefined
  /** Full jitter's cap. Default 8 seconds. */
  readonly maxDelay?: DurationInput | undefined
  /**
   * The cap of the random spread added to a provider's hint, which replaces the backoff's delay and
   * is drawn from `[0, hint / 2)`. Default 1 second.
   */
  readonly hintSpread?: DurationInput | undefined
  /** Default 60 seconds; set it per model, above the model's p99 under load. */
  readonly attemptTimeout?: DurationInput | undefined
  /** Default 100 ms; set it near the model's typical latency. */
  readonly minAttemptTime?: DurationInput | undefined
  /** Default 60 seconds. */
  readonly maxRetryAfter?: DurationInput | undefined
  /** Default false. */
  readonly replaySafe?: boolean | undefined
  /** The target's retry budget. Default: a ratio of 0.1 over 60 seconds, with a floor of 5 a second. */
  readonly budget?: RetryBudget.Options | undefined
  /** The target's concurrency gate. Default: no limit on calls in flight (the target's health is still tracked). */
  readonly gate?: Omit<ConcurrencyGate.Options, "target"> | undefined
  /**
   * The target's pace under the provider's per-key limits (requests and tokens per minute). Default:
   * none set; the limits the provider states in its headers are learned.
   */
  readonly rateLimit?: Omit<RateLimiter.Options, "target"> | undefined
  /** Judges the toolkit's failures, for a provider that speaks differently. Default: the `Classifier` in context. */
  readonly classify?: ((failure: Failure.Failure) => Classifiers.Verdict) | undefined
}

/**
 * A policy of `options`, at once: define it anywhere, module level included. Its settings are
 * checked once, when it is first used or yielded: bad values are one `InvalidSettings` naming each,
 * in the error channel of `yield* policy` or of its first call, never a throw.
 *
 * ```ts
 * import { type Failure, Resilient } from "@resilient-ai/policy"
 * import type { Effect } from "effect"
 *
 * declare const sendChat: (request: string) => Effect.Effect<string, Failure.Failure>
 * declare const request: string
 *
 * const mistral = Resilient.policy({ target: "mistral", maxAttempts: 4, attemptTimeout: "30 seconds" })
 * // At start-up, to fail before the first call: const checked = yield* mistral
 * const answer = yield* sendChat(request).pipe(Resilient.retry(mistral))
 * ```
 */
export const policy = (options: PolicyOptions): Policy<Settings.InvalidSettings> => Policies.make(options)

/** Settings of one call, over the policy's. */
export interface CallOptions {
  /** Overrides the policy's replay-safety for this call. */
  readonly replaySafe?: boolean | undefined
  /** The logical call's id, sent by transports as the idempotency key. Generated when absent. */
  readonly requestId?: string | undefined
  /** Sets the deadline this far from now, unless the current one is earlier. */
  readonly timeout?: DurationInput | undefined
  /**
   * Overrides the policy's attempt ceiling for this call (a whole number of at least 1; anything
   * else is a defect of the caller), as openai-node's per-request `maxRetries` does.
   */
  readonly maxAttempts?: number | undefined
  /**
   * The tokens each attempt may use (its prompt's estimate and its `max_tokens`): what it reserves
   * of the target's tokens per minute, settled with the usage its transport reports. Default 0.
   */
  readonly tokens?: number | undefined
  /**
   * Which lane the call waits in when the target's pace is full: `interactive` (the default) keeps
   * its turn; `batch` yields to interactive calls.
   */
  readonly lane?: RateLimiter.Lane | undefined
  /**
   * Names the call's span (default `resilient_ai.call {target}`), its kind (default `internal`; a
   * call to a remote service is `client`) and attributes set on it as it starts.
   */
  readonly span?: CallSpan | undefined
}

/**
 * What a `classify` says about an error: its verdict, and the wait the other side asked for, if it
 * named one (it wins over the backoff, as a provider's \`Retry-After\` does).
 */
export type Judgement =
  | Classifiers.Verdict
  | { readonly verdict: Classifiers.Verdict; readonly retryAfter?: DurationInput | undefined }

/**
 * How the errors of an Effect of your own are judged, as cockatiel's `handleWhen` or `Effect.retry`'s
 * `while` do: `classify` gives each its verdict (`retryable`, `terminal`, or `ambiguous`: it may
 * have taken effect, and is replayed only when the call is replay-safe), or `while` says whether it
 * is worth another attempt (`true` is retryable, `false` terminal). The sequence's own failures (an
 * attempt's timeout, the deadline) are judged by the policy.
 */
export type OwnErrors<E> =
  | { readonly classify: (error: E) => Judgement; readonly while?: undefined }
  | { readonly while: (error: E) => boolean; readonly classify?: undefined }

/**
 * A policy's settings and a call's, in one object: `Resilient.retry({ target, maxAttempts, timeout })`.
 * The policy they make is checked on the first call (an invalid setting is its `InvalidSettings`)
 * and shared by every call written with the same settings.
 */
export interface RetryOptions extends Omit<PolicyOptions, "classify">, Omit<CallOptions, "replaySafe"> {}

/** A call's arguments start with the effect it makes resilient: a policy is an Effect too, told apart by its id. */
const isDataFirst = (args: IArguments | ReadonlyArray<unknown>) =>
  Effect.isEffect(args[0]) && !Policies.isPolicy(args[0])

/** The judge a call's options name: `classify`, or `while` read as retryable or terminal. */
const judgeOf = (
  options: {
    readonly classify?: ((error: any) => Judgement) | undefined
    readonly while?: ((error: any) => boolean) | undefined
  } | undefined
): Judge | undefined => {
  if (options === undefined) return undefined
  const retryWhile = options.while
  if (retryWhile !== undefined) return (error) => retryWhile(error) ? "retryable" : "terminal"
  return options.classify
}

const policyKeys = new Set<string>([
  "target",
  "model",
  "maxAttempts",
  "baseDelay",
  "maxDelay",
  "hintSpread",
  "attemptTimeout",
  "minAttemptTime",
  "maxRetryAfter",
  "replaySafe",
  "budget",
  "gate",
  "rateLimit"
])

// The policies of inline options, by their settings: a call written inline in a function makes its
// options anew each time, and its policy is checked once, not per call. Bounded, in case a program
// writes new settings per call.
const inlinePolicies = new Map<string, Policy<Settings.InvalidSettings>>()

/** The policy part of inline options, and the call's own. */
const splitInline = (options: RetryOptions): readonly [Policy<Settings.InvalidSettings>, CallOptions] => {
  const policyOptions: Record<string, unknown> = {}
  const callOptions: Record<string, unknown> = {}
  for (const key in options) {
    const value = (options as unknown as Record<string, unknown>)[key]
    if (policyKeys.has(key)) policyOptions[key] = value
    else if (key !== "classify" && key !== "while") callOptions[key] = value
  }
  const key = JSON.stringify(policyOptions)
  let policy = inlinePolicies.get(key)
  if (policy === undefined) {
    policy = Policies.make(policyOptions as unknown as PolicyOptions)
    if (inlinePolicies.size < 256) inlinePolicies.set(key, policy)
  }
  return [policy, callOptions as CallOptions]
}

/**
 * Makes `self`, one attempt, into a resilient call under `policy`: it is retried while its
 * failures are retryable (ambiguous ones only when replay-safe), the attempt ceiling, the retry
 * budget and the deadline allow, with full jitter's delays or the provider's hint; every attempt
 * holds a permit of the target's concurrency gate. The budget and gate are the target's in the
 * `Coordination` in context. The error is one `CallFailed` with the reason, the last failure and
 * the history, and a policy not yet checked adds its `InvalidSettings`.
 *
 * With `classify` (or `while`), `self` may fail with any error: it judges it, and `CallFailed.last`
 * keeps its type. The policy's settings may also be written inline, with the call's.
 *
 * ```ts
 * import { type Failure, Resilient } from "@resilient-ai/policy"
 * import type { Effect } from "effect"
 *
 * declare const sendChat: (request: string) => Effect.Effect<string, Failure.Failure>
 * declare const findUser: (id: string) => Effect.Effect<{ readonly name: string }, DbError>
 * interface DbError { readonly code: "deadlock" | "unique_violation" }
 * declare const request: string, mistral: Resilient.Policy, usersDb: Resilient.Policy
 *
 * const answer = yield* sendChat(request).pipe(Resilient.retry(mistral, { timeout: "20 seconds" }))
 * const user = yield* findUser("42").pipe(
 *   Resilient.retry({ target: "users-db", maxAttempts: 4, while: (error: DbError) => error.code === "deadlock" })
 * )
 * ```
 */
export const retry: {
  <E, P extends PolicyOf<unknown>>(policy: P, options: CallOptions & OwnErrors<E>): <A, E2 extends E, R>(
    self: Effect.Effect<A, E2, R>
  ) => Effect.Effect<A, Failure.CallFailed<Unwrapped<E2> | Refusal> | PolicyError<P>, R>
  <P extends PolicyOf<unknown>>(policy: P, options?: CallOptions): <A, E extends AttemptError, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, Failure.CallFailed<LastFailure<E>> | PolicyError<P>, R>
  <E>(options: RetryOptions & OwnErrors<E>): <A, E2 extends E, R>(
    self: Effect.Effect<A, E2, R>
  ) => Effect.Effect<A, Failure.CallFailed<Unwrapped<E2> | Refusal> | Settings.InvalidSettings, R>
  (options: RetryOptions): <A, E extends AttemptError, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, Failure.CallFailed<LastFailure<E>> | Settings.InvalidSettings, R>
  <A, E, R, P extends PolicyOf<unknown>>(
    self: Effect.Effect<A, E, R>,
    policy: P,
    options: CallOptions & OwnErrors<NoInfer<E>>
  ): Effect.Effect<A, Failure.CallFailed<Unwrapped<E> | Refusal> | PolicyError<P>, R>
  <A, E extends AttemptError, R, P extends PolicyOf<unknown>>(
    self: Effect.Effect<A, E, R>,
    policy: P,
    options?: CallOptions
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>> | PolicyError<P>, R>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    options: RetryOptions & OwnErrors<NoInfer<E>>
  ): Effect.Effect<A, Failure.CallFailed<Unwrapped<E> | Refusal> | Settings.InvalidSettings, R>
  <A, E extends AttemptError, R>(
    self: Effect.Effect<A, E, R>,
    options: RetryOptions
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>> | Settings.InvalidSettings, R>
} = dual(
  isDataFirst,
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    policyOrOptions: PolicyOf<unknown> | RetryOptions,
    options?: CallOptions & { readonly classify?: Judge; readonly while?: (error: unknown) => boolean }
  ) => {
    if (Policies.isPolicy(policyOrOptions)) {
      return runSequence(self, policyOrOptions, options, undefined, judgeOf(options))
    }
    const [policy, callOptions] = splitInline(policyOrOptions)
    return runSequence(
      self,
      policy,
      callOptions,
      undefined,
      judgeOf(policyOrOptions as RetryOptions & OwnErrors<unknown>)
    )
  }
)

/** What one attempt of a streamed call opens: the stream's first element, and the rest of it. */
export interface Opened<A, E, R> {
  readonly first: A
  readonly rest: Stream.Stream<A, E, R>
}

/**
 * Makes a streamed call resilient. `open` is one attempt: it sends the request and reads until the
 * stream's first element. Attempts are retried like any call until one delivers it (a `CallFailed`
 * before it); after it, a failure ends the stream with that failure and nothing is replayed. The
 * stream holds one permit of the target's gate from before its first attempt until it ends (its
 * attempts report what they say about capacity without taking permits of their own), and the
 * deadline bounds the whole stream, not only its first element.
 */
export const retryStream = <A, E extends AttemptError, R, E2, R2, P extends PolicyOf<unknown>>(
  open: Effect.Effect<Opened<A, E2, R2>, E, R>,
  policy: P,
  options?: CallOptions
): Stream.Stream<
  A,
  Failure.CallFailed<LastFailure<E>> | E2 | Failure.DeadlineExceeded | PolicyError<P>,
  Exclude<R, Scope.Scope> | R2
> => streamSequence(open, policy as PolicyOf<PolicyError<P>>, options, undefined)
