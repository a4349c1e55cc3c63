/**
 * The one combinator that makes an attempt resilient: classification, attempt ceiling, backoff,
 * retry budget, deadline, concurrency gate, metrics and a log line per attempt, composed.
 *
 * ```ts
 * const policy = Resilient.policy({ target: "mistral", maxAttempts: 3 })
 * const answer = sendChat(request).pipe(Resilient.retry(policy, { timeout: "20 seconds" }))
 * ```
 *
 * A policy is plain data; the budget and the gate are services (`RetryBudget`,
 * `ConcurrencyGate`) and the classifier a reference, so a deployment target is the layers
 * composed for it and a test swaps any part. A sequence ends in the attempt's success or in one
 * `CallFailed` that says why it stopped, what failed last and every attempt made.
 *
 * Interruption is cancellation: interrupting the caller during an attempt interrupts the attempt
 * and waits for it; during a sleep, no further attempt starts. An interrupt is never turned into
 * a failure or a retry. A resilient call made inside another's attempt makes a single attempt
 * and leaves retrying to the enclosing call, so retries happen at exactly one layer.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import { dual } from "effect/Function"
import { globalValue } from "effect/GlobalValue"
import * as Layer from "effect/Layer"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type * as Schedule from "effect/Schedule"
import * as Backoff from "./Backoff.js"
import { Classifier } from "./Classifier.js"
import type { Service as ClassifierService } from "./Classifier.js"
import * as ConcurrencyGate from "./ConcurrencyGate.js"
import { CurrentDeadline } from "./Deadline.js"
import * as Failure from "./Failure.js"
import { startBounded, timedOut } from "./internal/boundedRun.js"
import * as Metrics from "./Metrics.js"
import * as RetryBudget from "./RetryBudget.js"

/** The services a resilient call needs: the target's retry budget and concurrency gate. */
export type Services = RetryBudget.RetryBudget | ConcurrencyGate.ConcurrencyGate

/** What an attempt knows about itself; transports read it to set timeouts and idempotency keys. */
export interface AttemptInfo {
  /** The same for every attempt of one logical call: use it as the idempotency key. */
  readonly requestId: string
  /** 1 for the first attempt. */
  readonly attempt: number
  readonly target: string
  /** When this attempt's time runs out, in epoch milliseconds of Effect's `Clock`. */
  readonly deadline: number
  readonly replaySafe: boolean
  /**
   * Says how far the attempt got: `"headers"` once the request is on its way and the answer's
   * headers are awaited, `"body"` once they arrived. If the attempt's time runs out, the
   * `ReadTimeout` names the phase it stalled in.
   */
  readonly enter: (phase: "headers" | "body") => void
  /** Adds a key to this attempt's log line: token usage, the provider's own request id. */
  readonly annotate: (key: string, value: unknown) => void
}

/** The attempt the current fiber is running, inside a resilient call; `undefined` outside one. */
export const CurrentAttempt: FiberRef.FiberRef<AttemptInfo | undefined> = globalValue(
  "@resilient-ai/policy/Resilient/CurrentAttempt",
  () => FiberRef.unsafeMake<AttemptInfo | undefined>(undefined, { join: (parent) => parent })
)

/**
 * The gates whose permits the enclosing attempts hold: one gate, or several when calls through
 * different gates nest. Internal, so `AttemptInfo` stays what a transport needs.
 */
type HeldGates = ConcurrencyGate.Service | ReadonlyArray<ConcurrencyGate.Service> | undefined

const CurrentHeldGates: FiberRef.FiberRef<HeldGates> = globalValue(
  "@resilient-ai/policy/Resilient/CurrentHeldGates",
  () => FiberRef.unsafeMake<HeldGates>(undefined, { join: (parent) => parent })
)

const holds = (held: HeldGates, gate: ConcurrencyGate.Service): boolean =>
  held === gate || (held !== undefined && !("acquire" in held) && held.includes(gate))

/** A retry policy: plain data, shared by every call to one target. */
export interface Policy {
  /** Names the target in metrics, logs and failures. */
  readonly target: string
  /** Names the model in metrics and logs. */
  readonly model: string | undefined
  /** Attempts per call, the first included. */
  readonly maxAttempts: number
  /** Chooses the delay before each retry from the failure; its output is ignored. */
  readonly schedule: Schedule.Schedule<unknown, Failure.Failure>
  /** The longest an attempt may run, before the deadline shortens it. */
  readonly attemptTimeout: Duration.Duration
  /**
   * An attempt with less time than this before the deadline is not started: it could only be cut
   * off. The bar rises to what the policy's successful attempts take lately (a moving average).
   */
  readonly minAttemptTime: Duration.Duration
  /**
   * A provider hint longer than this, or than the call's time left, ends the sequence
   * (`retry-after-too-long`) instead of being slept through.
   */
  readonly maxRetryAfter: Duration.Duration
  /** Whether ambiguous failures (the request may have run) may be replayed. */
  readonly replaySafe: boolean
}

/** Settings of a policy; everything but the target has a default. */
export interface PolicyOptions {
  readonly target: string
  readonly model?: string | undefined
  /** Default 3. */
  readonly maxAttempts?: number | undefined
  /** Full jitter's first-retry bound. Default 500 ms. Ignored when `schedule` is given. */
  readonly baseDelay?: Duration.DurationInput | undefined
  /** Full jitter's cap. Default 8 seconds. Ignored when `schedule` is given. */
  readonly maxDelay?: Duration.DurationInput | undefined
  /**
   * The cap of the random spread added to a provider's hint, which is drawn from `[0, hint / 2)`.
   * Default 1 second. Ignored when `schedule` is given.
   */
  readonly hintSpread?: Duration.DurationInput | undefined
  /** Replaces the default full jitter with the provider's hint winning. */
  readonly schedule?: Schedule.Schedule<unknown, Failure.Failure> | undefined
  /** Default 60 seconds; set it per model, above the model's p99 under load. */
  readonly attemptTimeout?: Duration.DurationInput | undefined
  /** Default 100 ms; set it near the model's typical latency. */
  readonly minAttemptTime?: Duration.DurationInput | undefined
  /** Default 60 seconds. */
  readonly maxRetryAfter?: Duration.DurationInput | undefined
  /** Default false. */
  readonly replaySafe?: boolean | undefined
}

/**
 * Builds a policy, filling in defaults. Bad values throw a `RangeError` that names them, when the
 * program is assembled rather than on the first failure.
 */
export const policy = (options: PolicyOptions): Policy => {
  const check = (ok: boolean, what: string, value: unknown) => {
    if (!ok) throw new RangeError(`policy for ${options.target}: ${what}, got ${String(value)}`)
  }
  const duration = (name: string, input: Duration.DurationInput | undefined, fallback: Duration.Duration) => {
    const value = input === undefined ? fallback : Duration.decodeUnknown(input).pipe(Option.getOrUndefined)
    check(value !== undefined, `${name} must be a duration`, input)
    return value!
  }
  check(
    typeof options.target === "string" && options.target.length > 0,
    "target must be a non-empty string",
    options.target
  )
  const maxAttempts = options.maxAttempts ?? 3
  check(Number.isInteger(maxAttempts) && maxAttempts >= 1, "maxAttempts must be an integer >= 1", maxAttempts)
  const baseDelay = duration("baseDelay", options.baseDelay, Duration.millis(500))
  const maxDelay = duration("maxDelay", options.maxDelay, Duration.seconds(8))
  const hintSpread = duration("hintSpread", options.hintSpread, Duration.seconds(1))
  const attemptTimeout = duration("attemptTimeout", options.attemptTimeout, Duration.seconds(60))
  const minAttemptTime = duration("minAttemptTime", options.minAttemptTime, Duration.millis(100))
  const maxRetryAfter = duration("maxRetryAfter", options.maxRetryAfter, Duration.seconds(60))
  check(Duration.toMillis(attemptTimeout) > 0, "attemptTimeout must be positive", Duration.format(attemptTimeout))
  check(
    Duration.lessThanOrEqualTo(baseDelay, maxDelay),
    "baseDelay must not exceed maxDelay",
    Duration.format(baseDelay)
  )
  check(
    Duration.lessThan(minAttemptTime, attemptTimeout),
    "minAttemptTime must be shorter than attemptTimeout",
    Duration.format(minAttemptTime)
  )
  return {
    target: options.target,
    model: options.model,
    maxAttempts,
    schedule: options.schedule ??
      Backoff.fullJitterWithRetryAfter({ base: baseDelay, cap: maxDelay, spread: hintSpread }),
    attemptTimeout,
    minAttemptTime,
    maxRetryAfter,
    replaySafe: options.replaySafe ?? false
  }
}

/** Settings of one call. */
export interface CallOptions {
  /** Overrides the policy's replay-safety for this call. */
  readonly replaySafe?: boolean | undefined
  /** The logical call's id, sent by transports as the idempotency key. Generated when absent. */
  readonly requestId?: string | undefined
  /** Sets the deadline this far from now, unless the current one is earlier. */
  readonly timeout?: Duration.DurationInput | undefined
}

/** What an attempt may fail with: a failure, or a nested resilient call's aggregate. */
export type AttemptError = Failure.Failure | Failure.CallFailed<Failure.Failure>

/** A nested call's aggregate stands for its last failure. */
export type Unwrapped<E> = E extends Failure.CallFailed<infer F> ? F : E

/** What a sequence over attempts failing with `E` can end with. */
export type LastFailure<E> = Unwrapped<E> | Failure.DeadlineExceeded | Failure.Shed | Failure.ReadTimeout

const randomId = (): string => {
  const crypto = (globalThis as { readonly crypto?: { readonly randomUUID?: () => string } }).crypto
  return crypto?.randomUUID?.() ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`
}

/**
 * How long a policy's successful attempts take lately: a moving average, so a slow model gets a
 * higher bar than a fast one without anyone configuring it.
 */
class TypicalLatency {
  millis = 0
  private seen = false

  record(took: number): void {
    if (!Number.isFinite(took) || took < 0) return
    this.millis = this.seen ? this.millis + 0.1 * (took - this.millis) : took
    this.seen = true
  }
}

/** What every sequence of one policy shares, looked up once per call. */
interface PolicyState {
  readonly metrics: Metrics.TargetMetrics
  readonly latency: TypicalLatency
}

const policyStates = globalValue(
  "@resilient-ai/policy/Resilient/policyStates",
  () => new WeakMap<Policy, PolicyState>()
)

const stateOf = (policy: Policy): PolicyState => {
  let state = policyStates.get(policy)
  if (state === undefined) {
    state = { metrics: Metrics.forTarget(policy.target, policy.model), latency: new TypicalLatency() }
    policyStates.set(policy, state)
  }
  return state
}

/** A FiberRef's value for an attempt's fiber, as `FiberRefs.updateManyAs` takes it. */
type RefEntry = readonly [FiberRef.FiberRef<any>, readonly [readonly [FiberId.Single, unknown]]]

/** What the attempt told the sequence about itself while it ran. */
interface AttemptNotes {
  phase: "headers" | "body" | undefined
  readonly annotations: Record<string, unknown>
}

/** The services of one target, given to `retryWith` instead of being read from the context. */
export interface TargetServices {
  readonly budget: RetryBudget.Service
  readonly gate: ConcurrencyGate.Service
  /** The target's own classifier; the one in context (by default `Classifier.classifyDefault`) otherwise. */
  readonly classifier?: ClassifierService | undefined
  /**
   * FiberRef values every attempt of the target runs with, such as `HttpClient.currentTracerPropagation`:
   * given to each attempt's fiber as it is made, where an `Effect.locally` around every call would
   * copy the fiber's refs twice per call.
   */
  readonly attemptRefs?: ReadonlyArray<readonly [FiberRef.FiberRef<any>, unknown]> | undefined
}

const runSequence = <A, E extends AttemptError, R>(
  self: Effect.Effect<A, E, R>,
  policy: Policy,
  options: CallOptions | undefined,
  targetServices: TargetServices | undefined
): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> =>
  Effect.withFiberRuntime((fiber, status) => {
    type Last = LastFailure<E>
    // Attempts run with the caller's flags, not with those of the region that guards the permit.
    const callerFlags = status.runtimeFlags
    const services = fiber.currentContext as Context.Context<Services>
    const budget = targetServices?.budget ?? Context.get(services, RetryBudget.RetryBudget)
    const gate = targetServices?.gate ?? Context.get(services, ConcurrencyGate.ConcurrencyGate)
    const { classify } = targetServices?.classifier ?? Context.get(services, Classifier)
    const attemptRefs = targetServices?.attemptRefs
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    const metricLabels = fiber.getFiberRef(FiberRef.currentMetricLabels)
    const minimumLogLevel = fiber.getFiberRef(FiberRef.currentMinimumLogLevel)
    const outer = fiber.getFiberRef(CurrentAttempt)
    const { latency, metrics } = stateOf(policy)

    const startedAt = clock.unsafeCurrentTimeMillis()
    const inheritedDeadline = fiber.getFiberRef(CurrentDeadline)
    const deadline = options?.timeout === undefined
      ? inheritedDeadline
      : Math.min(inheritedDeadline, startedAt + Duration.toMillis(options.timeout))
    const nested = outer !== undefined
    // An enclosing call already holds a permit of this gate: waiting for a second one could wait on
    // that very permit. The gate itself decides, not the target's name: two targets may share a
    // gate, and two policies may name one target over different gates.
    const outerGates = nested ? fiber.getFiberRef(CurrentHeldGates) : undefined
    const gated = !holds(outerGates, gate)
    // What this call's attempts hold, for the calls nested in them to see.
    const heldGates: HeldGates = !gated
      ? outerGates
      : outerGates === undefined
      ? gate
      : "acquire" in outerGates
      ? [outerGates, gate]
      : [...outerGates, gate]
    const maxAttempts = nested ? 1 : policy.maxAttempts
    const replaySafe = options?.replaySafe ?? policy.replaySafe
    // Generated on first use: a first-try success that nobody logs or reads never needs one.
    let requestId = options?.requestId ?? outer?.requestId
    const requestIdNow = () => (requestId ??= randomId())
    const attemptTimeoutMillis = Duration.toMillis(policy.attemptTimeout)
    // An attempt with less time left than the target's successes usually take could only be cut
    // off, after the provider started (and billed) it; the policy's floor covers a cold start.
    const minAttemptMillis = Math.max(Duration.toMillis(policy.minAttemptTime), latency.millis)
    const maxRetryAfterMillis = Duration.toMillis(policy.maxRetryAfter)
    const history: Array<Failure.AttemptRecord> = []
    /**
     * Whether an attempt would still get its time after sleeping `delay` from `now`: the test
     * `attemptFrom` makes when the sleep ends. With a zero `minAttemptMillis`, a sleep ending exactly
     * at the deadline would otherwise be granted, spent and then wasted.
     */
    const leavesRoom = (now: number, delay: number) => {
      const left = deadline - (now + delay)
      return left > 0 && left >= minAttemptMillis
    }
    let scheduleState: unknown = policy.schedule.initial
    let lastFailure: Last | undefined

    const count = (metric: { unsafeUpdate: (input: number, tags: typeof metricLabels) => void }, value = 1) =>
      metric.unsafeUpdate(value, metricLabels)

    const log = (
      level: LogLevel.LogLevel,
      message: string,
      annotations: Record<string, unknown>
    ): Effect.Effect<void> =>
      LogLevel.lessThan(level, minimumLogLevel)
        ? Effect.void
        : Effect.annotateLogs(
          Effect.logWithLevel(level, message),
          definedOnly({
            requestId: requestIdNow(),
            target: policy.target,
            model: policy.model,
            ...annotations
          })
        )

    const stop = (reason: Failure.StopReason, last: Last): Effect.Effect<never, Failure.CallFailed<Last>> => {
      if (!nested) count(metrics.callsFailed(reason))
      return Effect.fail(new Failure.CallFailed({ reason, last, attempts: history, target: policy.target }))
    }

    const skipForDeadline = (phase: Failure.DeadlinePhase) => {
      count(metrics.deadlineSkips)
      return stop("deadline", lastFailure ?? new Failure.DeadlineExceeded({ deadline, phase }))
    }

    const succeed = (attempt: number, value: A, took: number, notes: AttemptNotes): Effect.Effect<A> => {
      latency.record(took)
      const done = LogLevel.lessThan(LogLevel.Debug, minimumLogLevel)
        ? Effect.succeed(value)
        : Effect.as(
          log(LogLevel.Debug, "attempt succeeded", { attempt, durationMs: took, ...notes.annotations }),
          value
        )
      if (nested) return done
      count(metrics.successes)
      count(metrics.attemptsPerSuccess, attempt)
      if (attempt > 1) count(metrics.retriesSucceeded)
      return Effect.zipRight(budget.recordSuccess(attempt), done)
    }

    const fail = (
      attempt: number,
      { failure, settled }: AttemptFailure,
      latency: number,
      delayBefore: number,
      notes: AttemptNotes
    ): Effect.Effect<A, Failure.CallFailed<Last>, R> => {
      const last = failure as Last
      lastFailure = last
      if (!nested) count(metrics.failures(failure._tag))
      if (!nested && budget.recordFailure !== undefined) {
        return Effect.zipRight(
          budget.recordFailure(failure),
          Effect.suspend(() => decide(attempt, failure, settled, last, latency, delayBefore, notes))
        )
      }
      return decide(attempt, failure, settled, last, latency, delayBefore, notes)
    }

    const decide = (
      attempt: number,
      failure: Failure.Failure,
      settled: boolean,
      last: Last,
      latency: number,
      delayBefore: number,
      notes: AttemptNotes
    ): Effect.Effect<A, Failure.CallFailed<Last>, R> => {
      history.push({
        attempt,
        outcome: failure._tag,
        status: Failure.statusOf(failure),
        latency: Duration.millis(latency),
        delayBefore: Duration.millis(delayBefore)
      })
      const verdict = settled ? "terminal" : classify(failure)
      const hint = Failure.retryAfterOf(failure)
      const hintMillis = hint === undefined ? undefined : Duration.toMillis(hint)
      const logged = {
        attempt,
        durationMs: latency,
        failure: failure._tag,
        status: Failure.statusOf(failure),
        verdict,
        retryAfterMs: hintMillis,
        ...notes.annotations
      }
      const stopHere = (reason: Failure.StopReason) =>
        Effect.zipRight(
          log(LogLevel.Warning, "attempt failed, stopping", { ...logged, stop: reason }),
          stop(reason, last)
        )

      if (nested) {
        return Effect.zipRight(
          log(LogLevel.Info, "attempt failed; retrying is left to the enclosing resilient call", {
            ...logged,
            stop: "deferred"
          }),
          stop("deferred", last)
        )
      }
      if (failure._tag === "DeadlineExceeded") return stopHere("deadline")
      if (verdict === "terminal") return stopHere(failure._tag === "Shed" ? "shed" : "terminal")
      if (verdict === "ambiguous" && !replaySafe) return stopHere("not-replay-safe")
      if (attempt >= maxAttempts) return stopHere("attempts")
      const skipHere = () => {
        count(metrics.deadlineSkips)
        return stopHere("deadline")
      }
      if (hintMillis !== undefined) {
        if (hintMillis > maxRetryAfterMillis) return stopHere("retry-after-too-long")
        // A wait the call cannot afford says this target cannot serve it in time, while the time
        // left may well be enough for another target: that is a failover, not a deadline.
        const now = clock.unsafeCurrentTimeMillis()
        if (!leavesRoom(now, hintMillis)) return leavesRoom(now, 0) ? stopHere("retry-after-too-long") : skipHere()
      }

      return Effect.flatMap(policy.schedule.step(clock.unsafeCurrentTimeMillis(), failure, scheduleState), (step) => {
        const now = clock.unsafeCurrentTimeMillis()
        scheduleState = step[0]
        let delay = Backoff.delayOf(step[2], now)
        if (delay === undefined) return stopHere("attempts")
        if (!leavesRoom(now, delay)) {
          // The provider's wait fits, what the schedule added to it does not: the addition gives
          // way, down to the last moment that still leaves an attempt its time.
          if (hintMillis === undefined || !leavesRoom(now, hintMillis)) return skipHere()
          delay = Math.max(hintMillis, Math.ceil(deadline - now - minAttemptMillis) - 1)
        }
        const sleep = delay
        return Effect.flatMap(budget.tryAcquire(failure), (granted) => {
          if (!granted) {
            count(metrics.budgetExhausted)
            return stopHere("budget")
          }
          count(metrics.retries)
          return log(LogLevel.Info, "attempt failed, retrying", { ...logged, retryInMs: Math.round(sleep) })
            .pipe(
              Effect.zipRight(Effect.sleep(Duration.millis(sleep))),
              Effect.zipRight(Effect.suspend(() => {
                count(metrics.retryDelay, sleep)
                return attemptFrom(attempt + 1, sleep)
              }))
            )
        })
      })
    }

    type Restore = <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>

    /** Gives the permit back with what the attempt said about capacity, then goes on with `next`. */
    const releasing = <X, Y>(outcome: ConcurrencyGate.Outcome, next: Effect.Effect<X, Y, R>) =>
      gated ? Effect.zipRight(gate.release(outcome), next) : next

    const settle = (
      restore: Restore,
      attempt: number,
      exit: Exit.Exit<A, E>,
      latency: number,
      delayBefore: number,
      notes: AttemptNotes
    ): Effect.Effect<A, Failure.CallFailed<Last>, R> => {
      if (Exit.isSuccess(exit)) return releasing("success", succeed(attempt, exit.value, latency, notes))
      const failure = Cause.failureOption(exit.cause)
      // Defects and interruptions are not failures of the call: they propagate untouched.
      if (Cause.isDie(exit.cause) || Cause.isInterrupted(exit.cause) || Option.isNone(failure)) {
        return releasing("neutral", Effect.failCause(Cause.stripFailures(exit.cause)))
      }
      const unwrapped = unwrap(failure.value)
      const outcome = ConcurrencyGate.outcomeOf(unwrapped.failure)
      return releasing(outcome, restore(fail(attempt, unwrapped, latency, delayBefore, notes)))
    }

    /**
     * Runs one attempt in a bounded fiber of its own, holding the permit already taken. Only
     * waiting for a suspended attempt can be interrupted; the permit goes back however it ends.
     */
    const runAttempt = (
      restore: Restore,
      attempt: number,
      delayBefore: number
    ): Effect.Effect<A, Failure.CallFailed<Last>, R> =>
      Effect.withFiberRuntime((current) => {
        // Timed from now, after any wait for the permit: a wait in the queue may have used the time.
        const started = clock.unsafeCurrentTimeMillis()
        const remaining = deadline - started
        if (remaining <= 0 || remaining < minAttemptMillis) {
          return releasing("neutral", skipForDeadline("queue"))
        }
        const boundByDeadline = remaining <= attemptTimeoutMillis
        const timeoutMillis = boundByDeadline ? remaining : attemptTimeoutMillis
        const notes: AttemptNotes = { phase: undefined, annotations: {} }
        const info: AttemptInfo = {
          get requestId() {
            return requestIdNow()
          },
          attempt,
          target: policy.target,
          deadline: started + timeoutMillis,
          replaySafe,
          enter: (phase) => {
            notes.phase = phase
          },
          annotate: (key, value) => {
            notes.annotations[key] = value
          }
        }
        const id = current.id()
        const entries: [RefEntry, ...Array<RefEntry>] = [
          [CurrentAttempt, [[id, info]]],
          [CurrentDeadline, [[id, deadline]]],
          [CurrentHeldGates, [[id, heldGates]]],
          // The attempt's failure is this sequence's to handle, not an unhandled error to report.
          [FiberRef.unhandledErrorLogLevel, [[id, Option.none()]]]
        ]
        if (attemptRefs !== undefined) {
          for (const [ref, value] of attemptRefs) entries.push([ref, [[id, value]]])
        }
        const fiberRefs = FiberRefs.updateManyAs(current.getFiberRefs(), { entries })
        if (!nested) count(metrics.attempts)
        const run = startBounded(self, current, callerFlags, fiberRefs, timeoutMillis, clock)
        if (run._tag === "Finished") {
          return settle(restore, attempt, run.exit, clock.unsafeCurrentTimeMillis() - started, delayBefore, notes)
        }
        return restore(run.result).pipe(
          // Interrupted before or while awaiting it: stop the attempt, then give its permit back.
          Effect.onInterrupt(() => releasing("neutral", Fiber.interrupt(run.fiber))),
          Effect.flatMap((result) => {
            const latency = clock.unsafeCurrentTimeMillis() - started
            if (result !== timedOut) return settle(restore, attempt, result, latency, delayBefore, notes)
            const failure = boundByDeadline
              ? new Failure.DeadlineExceeded({ deadline, phase: "attempt" })
              : new Failure.ReadTimeout({ timeout: Duration.millis(timeoutMillis), phase: notes.phase ?? "attempt" })
            // The gate reads this failure as it reads any other: a `ReadTimeout` is a capacity
            // signal, a deadline that cut the attempt short is not.
            return releasing(
              ConcurrencyGate.outcomeOf(failure),
              restore(fail(attempt, { failure, settled: false }, latency, delayBefore, notes))
            )
          })
        )
      })

    const refused = (refusal: Failure.Shed | Failure.DeadlineExceeded) => {
      lastFailure = refusal
      if (refusal._tag === "DeadlineExceeded") return skipForDeadline("queue")
      count(metrics.shed)
      return stop("shed", refusal)
    }

    const attemptFrom = (attempt: number, delayBefore: number): Effect.Effect<A, Failure.CallFailed<Last>, R> => {
      const remaining = deadline - clock.unsafeCurrentTimeMillis()
      if (remaining <= 0 || remaining < minAttemptMillis) return skipForDeadline("before-attempt")
      // Only waiting (for a permit, for a suspended attempt) can be interrupted: between taking the
      // permit, starting the attempt's fiber and awaiting it, nothing can be lost.
      return Effect.uninterruptibleMask((restore) =>
        gated
          ? Effect.matchEffect(restore(gate.acquire(deadline)), {
            onFailure: refused,
            onSuccess: () => runAttempt(restore, attempt, delayBefore)
          })
          : runAttempt(restore, attempt, delayBefore)
      )
    }

    if (nested) {
      count(metrics.nestedSingleAttempts)
      return attemptFrom(1, 0)
    }
    return budget.recordCall === undefined ? attemptFrom(1, 0) : Effect.zipRight(budget.recordCall, attemptFrom(1, 0))
  })

const definedOnly = (annotations: Record<string, unknown>): Record<string, unknown> => {
  const defined: Record<string, unknown> = {}
  for (const key in annotations) {
    if (annotations[key] !== undefined) defined[key] = annotations[key]
  }
  return defined
}

/** An attempt's failure, and whether it was already retried (by a nested call) so only stopping is left. */
interface AttemptFailure {
  readonly failure: Failure.Failure
  readonly settled: boolean
}

/** A nested call's aggregate is unwrapped to its last failure; unless it deferred, it already retried. */
const unwrap = (error: AttemptError): AttemptFailure =>
  error._tag === "CallFailed"
    ? { failure: error.last, settled: error.reason !== "deferred" }
    : { failure: error, settled: false }

/**
 * Makes `self`, one attempt, into a resilient call under `policy`: it is retried while its
 * failures are retryable (ambiguous ones only when replay-safe), the attempt ceiling, the retry
 * budget and the deadline allow, with the schedule's delays; every attempt holds a permit of the
 * target's concurrency gate. The error is one `CallFailed` with the reason, the last failure and
 * the history.
 */
export const retry: {
  (policy: Policy, options?: CallOptions): <A, E extends AttemptError, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R | Services>
  <A, E extends AttemptError, R>(
    self: Effect.Effect<A, E, R>,
    policy: Policy,
    options?: CallOptions
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R | Services>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E extends AttemptError, R>(self: Effect.Effect<A, E, R>, policy: Policy, options?: CallOptions) =>
    runSequence(self, policy, options, undefined)
)

/**
 * `retry` with the target's budget and gate given as values rather than read from the context:
 * for a client that holds the services of several targets at once.
 */
export const retryWith: {
  (policy: Policy, services: TargetServices, options?: CallOptions): <A, E extends AttemptError, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R>
  <A, E extends AttemptError, R>(
    self: Effect.Effect<A, E, R>,
    policy: Policy,
    services: TargetServices,
    options?: CallOptions
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E extends AttemptError, R>(
    self: Effect.Effect<A, E, R>,
    policy: Policy,
    services: TargetServices,
    options?: CallOptions
  ) => runSequence(self, policy, options, services)
)

/** Settings of the in-memory services of one target. */
export interface ServicesOptions {
  readonly target: string
  readonly budget?: RetryBudget.Options | undefined
  /** Without a gate setting, in-flight calls are not limited (health is still tracked). */
  readonly gate?: Omit<ConcurrencyGate.Options, "target"> | undefined
}

/** The budget and gate of one target, in memory: what a single process needs to run `retry`. */
export const layerMemory = (
  options: ServicesOptions
): Layer.Layer<Services> =>
  Layer.merge(
    RetryBudget.layerMemory(options.budget),
    ConcurrencyGate.layer({ limit: Number.POSITIVE_INFINITY, ...options.gate, target: options.target })
  )
