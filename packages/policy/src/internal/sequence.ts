/**
 * The engine of a resilient call: one `Sequence` object per call, whose methods are its steps (the
 * stop rules, the provider's hint, the schedule's delay against the deadline, the budget, the
 * sleep, the attempt), so a call that succeeds at once allocates little beyond its attempt's fiber.
 * `Resilient.retry` and `retryWith` run it; nothing else should.
 */
import {
  type CallerFlags,
  clockOf,
  contextOf,
  type DurationInput,
  Either,
  failureOf,
  type FiberView,
  hasDefect,
  hasInterruption,
  interruptedBy,
  type LogLevel,
  type MetricScope,
  metricScopeOf,
  minimumLogLevelOf,
  nowMillis,
  readRef,
  type RefValue,
  type Stepper,
  stepperOf,
  withFiber,
  withoutFailures
} from "#effect-line"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import type * as Schedule from "effect/Schedule"
import type * as Tracer from "effect/Tracer"
import { Classifier } from "../Classifier.js"
import type { CallOptions, Judgement, Policy } from "../Resilient.js"
import type * as RetryBudget from "../RetryBudget.js"
import * as Settings from "../Settings.js"
import { Answered, type AttemptContext, CurrentAttempt, type Phase, type Report, Reported } from "./attempt.js"
import { awaitThen, type Restore, startBounded, timedOut } from "./boundedRun.js"
import * as Classifiers from "./classifier.js"
import * as Coordination from "./coordination.js"
import type { TargetServices } from "./coordination.js"
import { CurrentDeadline } from "./deadline.js"
import * as Decision from "./decision.js"
import * as Failure from "./failures.js"
import * as FastPath from "./fastPath.js"
import * as ConcurrencyGate from "./gate.js"
import * as Instruments from "./instrumentation.js"
import type { Learned, TypicalLatency } from "./learned.js"
import type * as Metrics from "./metrics.js"
import * as Policies from "./policy.js"
import type { PolicyOf } from "./policy.js"
import * as RateLimiter from "./rateLimiter.js"
import type { LastFailure } from "./resilient.js"
import * as Spans from "./spans.js"
import { kindOf } from "./spans.js"

/**
 * The gates whose permits the enclosing attempts hold: one gate, or several when calls through
 * different gates nest. Internal, so an attempt's view stays what a caller's own effects need.
 */
type HeldGates = ConcurrencyGate.Service | ReadonlyArray<ConcurrencyGate.Service> | undefined

const holds = (held: HeldGates, gate: ConcurrencyGate.Service): boolean =>
  held === gate || (held !== undefined && !("acquire" in held) && held.includes(gate))

// The timeouts calls pass, as written ("20 seconds"), read once each: a call is too short-lived to
// parse its deadline every time. Bounded, in case a program writes a new one per call.
const timeoutsRead = new Map<string, number>()

const millisOf = (timeout: DurationInput): number => {
  if (typeof timeout !== "string") return Duration.toMillis(timeout)
  let millis = timeoutsRead.get(timeout)
  if (millis === undefined) {
    millis = Duration.toMillis(timeout)
    if (timeoutsRead.size < 256) timeoutsRead.set(timeout, millis)
  }
  return millis
}

const randomId = (): string => {
  const crypto = (globalThis as { readonly crypto?: { readonly randomUUID?: () => string } }).crypto
  return crypto?.randomUUID?.() ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`
}

const noTime = BigInt(0)

/** A call's span made by its caller (a stream's, which outlives the sequence), and where its attempts' are made. */
export interface GivenSpan {
  readonly tracing: Spans.Tracing
  readonly span: Tracer.Span
}

/** The name, kind and attributes a call's span starts with. */
export const spanStartOf = (policy: Policy, options: CallOptions | undefined): Spans.SpanStart => {
  const span = options?.span
  return {
    name: span?.name ?? `resilient_ai.call ${policy.target}`,
    kind: span?.kind ?? "internal",
    attributes: span?.attributes
  }
}

/**
 * A call's request id, made on first use (a first-try success that nobody logs or reads never
 * needs one) and shared by the call and its attempts.
 */
class RequestId {
  constructor(private value: string | undefined) {}

  get(): string {
    return this.value ??= randomId()
  }
}

/**
 * One attempt: the context its transport is given (`AttemptContext`), the view the caller's own
 * effects read (`CurrentAttempt`), and how far it said it got.
 *
 * It holds what it shows, not its sequence: its fiber's refs hold it, and a finished fiber still
 * in the young generation when it is collected would keep the whole call alive with it (with the
 * sequence held, first-try successes spent 40% more time in young-generation collections).
 */
class Attempt implements AttemptContext, Instruments.AttemptTrace {
  phase: Phase | undefined = undefined
  /** What the attempt had learned when it last said how far it got: what counts if its time runs out. */
  said: Report | undefined = undefined
  span: Tracer.Span | undefined = undefined
  endedAt = noTime
  described: Array<unknown> | undefined = undefined
  readonly target: string
  readonly replaySafe: boolean
  /** The gates this attempt's call and the calls around it hold: a call inside it must not wait for them. */
  readonly heldGates: HeldGates
  private readonly requestIds: RequestId

  constructor(
    sequence: Sequence<any, any, any>,
    readonly attempt: number,
    readonly deadline: number,
    readonly reservation: RateLimiter.Reservation
  ) {
    this.target = sequence.policy.target
    this.replaySafe = sequence.replaySafe
    this.heldGates = sequence.heldGates
    this.requestIds = sequence.requestIds
  }

  get requestId(): string {
    return this.requestIds.get()
  }

  reached(phase: Phase, said?: Report): void {
    this.phase = phase
    if (said !== undefined) this.said = said
  }
}

/** A judge of the errors an attempt ends with: the policy's classifier, or a call's `classify`. */
export type Judge = (error: unknown) => Judgement

/** A judgement read: the verdict, the hint in milliseconds, and what the backoff steps on. */
interface JudgementRead {
  readonly verdict: Classifiers.Verdict
  readonly hintMillis: number | undefined
  /**
   * The failure, or, for a wait `classify` named, the caller's error with the wait as `retryAfter`:
   * the schedule reads a hint where a provider's failure carries one.
   */
  readonly scheduleInput: unknown
}

/** A judgement's verdict and hint; without a wait of its own, the hint is the one the failure carries. */
const readJudgement = (judgement: Judgement, failure: unknown): JudgementRead => {
  if (typeof judgement === "string" || judgement.retryAfter === undefined) {
    const verdict = typeof judgement === "string" ? judgement : judgement.verdict
    const hint = Failure.retryAfterOf(failure)
    return { verdict, hintMillis: hint === undefined ? undefined : Duration.toMillis(hint), scheduleInput: failure }
  }
  const retryAfter = Duration.millis(millisOf(judgement.retryAfter))
  return {
    verdict: judgement.verdict,
    hintMillis: Duration.toMillis(retryAfter),
    scheduleInput: { _tag: kindOf(failure), error: failure, retryAfter }
  }
}

const budgetRefused: Decision.Stop = { _tag: "Stop", reason: "budget", deadlineSkip: false }

/** What an attempt's failure says about the target's capacity: only the toolkit's failures say anything. */
const outcomeOfError = (error: unknown): ConcurrencyGate.Outcome =>
  Failure.isFailure(error) ? ConcurrencyGate.outcomeOf(error) : "neutral"

/**
 * One resilient call: its attempts, waits and decisions. One object per call, its steps methods,
 * so a call that succeeds at once allocates little beyond its attempt's fiber. A failed attempt
 * goes through `fail` (metrics, the budget's record), then `decide`: the stop rules, the provider's
 * hint, the schedule's delay and the deadline, the budget, the sleep, the next attempt.
 */
class Sequence<A, E, R> implements Decision.Rules, Instruments.Instrumented {
  // Attempts run with the caller's flags, not with those of the region that guards the permit.
  readonly callerFlags: CallerFlags
  /**
   * The fiber running the call: the whole sequence runs on it (nothing in it forks the caller), so
   * an attempt reads its refs from it as it starts, without an effect to ask for it.
   */
  readonly fiber: FiberView
  readonly budget: RetryBudget.Service
  readonly gate: ConcurrencyGate.Service
  readonly limiter: RateLimiter.Service
  /** What the budget, gate and limiter offer the engine besides their documented methods, if anything. */
  readonly budgetFast: FastPath.Budget | undefined
  readonly gateFast: FastPath.Gate | undefined
  readonly limiterFast: FastPath.Limiter | undefined
  /** What each attempt reserves of the key's tokens per minute, and which lane it waits in. */
  readonly tokens: number
  readonly lane: RateLimiter.Lane
  /** Judges the attempt's own errors. */
  readonly judge: Judge
  /** Judges the toolkit's failures, the sequence's own (a timeout, the deadline) included. */
  readonly classifyFailure: (failure: Failure.Failure) => Classifiers.Verdict
  readonly attemptRefs: TargetServices["attemptRefs"]
  readonly clock: Clock.Clock
  readonly metricScope: MetricScope
  readonly minimumLogLevel: LogLevel
  readonly learned: Learned
  readonly latency: TypicalLatency
  readonly metrics: Metrics.TargetMetrics
  readonly deadline: number
  readonly nested: boolean
  readonly gated: boolean
  /** What this call's attempts hold, for the calls nested in them to see. */
  readonly heldGates: HeldGates
  readonly maxAttempts: number
  readonly replaySafe: boolean
  readonly attemptTimeoutMillis: number
  /**
   * An attempt with less time left than the target's successes usually take could only be cut off,
   * after the provider started (and billed) it; the policy's floor covers a cold start.
   */
  readonly minAttemptMillis: number
  readonly maxRetryAfterMillis: number
  readonly hintSpreadMillis: number
  readonly readsHints: boolean
  /** Proposes the delay before each retry; a hint read replaces it. */
  readonly backoff: Schedule.Schedule<unknown, Failure.Failure>
  backoffStepper: Stepper<unknown, Failure.Failure> | undefined = undefined
  readonly requestIds: RequestId
  history: Array<Failure.AttemptRecord> | undefined = undefined
  lastFailure: LastFailure<E> | undefined = undefined
  /** Where the call's spans are made; `undefined` while nobody would see them. */
  readonly tracing: Spans.Tracing | undefined
  /** The call's span: ended by `runSequence` unless its caller made it. */
  readonly span: Tracer.Span | undefined

  /** The attempt as a plain effect, or as a function of its context. */
  readonly self: Effect.Effect<A, E, R> | undefined
  readonly attemptOf: AttemptOf<A, E, R> | undefined

  constructor(
    attempt: Effect.Effect<A, E, R> | AttemptOf<A, E, R>,
    readonly policy: Policy,
    options: CallOptions | undefined,
    services: TargetServices,
    judge: Judge | undefined,
    fiber: FiberView,
    callerFlags: CallerFlags,
    given: GivenSpan | undefined
  ) {
    if (Effect.isEffect(attempt)) {
      this.self = attempt
      this.attemptOf = undefined
    } else {
      this.self = undefined
      this.attemptOf = attempt
    }
    this.callerFlags = callerFlags
    this.fiber = fiber
    this.budget = services.budget
    this.gate = services.gate
    this.limiter = services.limiter
    this.budgetFast = FastPath.budget(services.budget)
    this.gateFast = FastPath.gate(services.gate)
    this.limiterFast = FastPath.limiter(services.limiter)
    this.tokens = options?.tokens ?? 0
    this.lane = options?.lane ?? "interactive"
    this.classifyFailure = policy.classify ?? Context.get(contextOf(fiber), Classifier)
      .classify
    this.judge = judge ?? (this.classifyFailure as Judge)
    this.attemptRefs = services.attemptRefs
    this.clock = clockOf(fiber)
    this.metricScope = metricScopeOf(fiber)
    this.minimumLogLevel = minimumLogLevelOf(fiber)
    const outer = readRef(fiber, CurrentAttempt)
    this.learned = services.learned
    const model = services.learned.of(policy.target, policy.model)
    this.latency = model.latency
    this.metrics = model.metrics

    const inheritedDeadline = readRef(fiber, CurrentDeadline)
    this.deadline = options?.timeout === undefined
      ? inheritedDeadline
      : Math.min(inheritedDeadline, nowMillis(this.clock) + millisOf(options.timeout))
    this.nested = outer !== undefined
    // An enclosing call already holds a permit of this gate: waiting for a second one could wait on
    // that very permit. The gate itself decides, not the target's name: two targets may share a
    // gate, and two policies may name one target over different gates.
    const outerGates = outer instanceof Attempt ? outer.heldGates : undefined
    this.gated = !holds(outerGates, this.gate)
    this.heldGates = !this.gated
      ? outerGates
      : outerGates === undefined
      ? this.gate
      : "acquire" in outerGates
      ? [outerGates, this.gate]
      : [...outerGates, this.gate]
    this.maxAttempts = this.nested ? 1 : options?.maxAttempts ?? policy.maxAttempts
    this.replaySafe = options?.replaySafe ?? policy.replaySafe
    this.requestIds = new RequestId(options?.requestId ?? outer?.requestId)
    const engine = Policies.engineOf(policy)
    this.attemptTimeoutMillis = engine.attemptTimeoutMillis
    this.minAttemptMillis = Math.max(engine.minAttemptMillis, this.latency.millis)
    this.maxRetryAfterMillis = engine.maxRetryAfterMillis
    this.hintSpreadMillis = engine.hintSpreadMillis
    this.readsHints = engine.readsHints
    this.backoff = engine.backoff
    if (given !== undefined) {
      this.tracing = given.tracing
      this.span = given.span
    } else {
      this.tracing = Spans.tracingOf(fiber, this.clock)
      this.span = this.tracing === undefined
        ? undefined
        : Spans.startCallSpan(this.tracing, fiber, spanStartOf(policy, options))
    }
    Instruments.callStarted(this)
  }

  start(): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> {
    if (this.nested) {
      Instruments.nestedCall(this)
      return this.attemptFrom(1, 0)
    }
    const recordCall = this.budgetFast?.recordCall
    return recordCall === undefined ? this.attemptFrom(1, 0) : Effect.andThen(recordCall, this.attemptFrom(1, 0))
  }

  requestIdNow(): string {
    return this.requestIds.get()
  }

  /**
   * Whether an attempt would still get its time after sleeping `delay` from `now`: the test
   * `attemptFrom` makes when the sleep ends. With a zero `minAttemptMillis`, a sleep ending exactly
   * at the deadline would otherwise be granted, spent and then wasted.
   */
  leavesRoom(now: number, delay: number): boolean {
    return Decision.leavesRoom(this, now, delay)
  }

  stop(reason: Failure.StopReason, last: LastFailure<E>): Effect.Effect<never, Failure.CallFailed<LastFailure<E>>> {
    Instruments.stopped(this, reason, last)
    return Effect.fail(
      new Failure.CallFailed({ reason, last, attempts: this.history ?? [], target: this.policy.target })
    )
  }

  skipForDeadline(phase: Failure.DeadlinePhase) {
    Instruments.deadlineSkipped(this)
    return this.stop("deadline", this.lastFailure ?? new Failure.DeadlineExceeded({ deadline: this.deadline, phase }))
  }

  succeed(attempt: Attempt, value: A, took: number, report: Report | undefined): Effect.Effect<A> {
    this.latency.record(took)
    const logged = Instruments.succeeded(this, attempt, attempt.attempt, took, report?.annotations)
    const done = logged === undefined ? Effect.succeed(value) : Effect.as(logged, value)
    if (this.nested) return done
    const budget = this.budget
    const recordSuccessNow = this.budgetFast?.recordSuccessNow
    if (recordSuccessNow === undefined) return Effect.andThen(budget.recordSuccess(attempt.attempt), done)
    recordSuccessNow(attempt.attempt)
    return done
  }

  /** Counts a failed attempt and lets the budget see it, then decides what comes next. */
  fail(
    attempt: Attempt,
    failed: AttemptFailure,
    took: number,
    delayBefore: number
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> {
    const failure = failed.failure
    this.lastFailure = failure as LastFailure<E>
    Instruments.failed(this, failure)
    const recordFailure = this.budgetFast?.recordFailure
    if (!this.nested && recordFailure !== undefined) {
      return Effect.andThen(
        recordFailure(failure, attempt.attempt),
        Effect.suspend(() => this.decide(attempt, failed, took, delayBefore))
      )
    }
    return this.decide(attempt, failed, took, delayBefore)
  }

  /** The failure's verdict and hint: a nested call that already retried has only stopping left. */
  judgementOf({ failure, own, settled }: AttemptFailure): JudgementRead {
    if (settled) return { verdict: "terminal", hintMillis: undefined, scheduleInput: failure }
    return readJudgement(own ? this.classifyFailure(failure as Failure.Failure) : this.judge(failure), failure)
  }

  decide(
    attempt: Attempt,
    failed: AttemptFailure,
    took: number,
    delayBefore: number
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> {
    const { failure } = failed
    const last = failure as LastFailure<E>
    const number = attempt.attempt
    const status = Failure.statusOf(failure)
    const kind = kindOf(failure)
    ;(this.history ??= []).push({
      attempt: number,
      outcome: kind,
      status,
      latency: Duration.millis(took),
      delayBefore: Duration.millis(delayBefore)
    })
    const { hintMillis, scheduleInput, verdict } = this.judgementOf(failed)
    Instruments.judged(attempt, kind, status, verdict, hintMillis, Exit.fail(failure))
    const logged = {
      attempt: number,
      durationMs: took,
      failure: kind,
      status,
      verdict,
      retryAfterMs: hintMillis,
      ...failed.report?.annotations
    }
    const judged: Decision.Judged = {
      attempt: number,
      verdict,
      hintMillis,
      deadlineExceeded: Failure.isFailure(failure) && failure._tag === "DeadlineExceeded",
      shed: Failure.isFailure(failure) && failure._tag === "Shed"
    }
    const stopHere = (stop: Decision.Stop) => {
      if (stop.deadlineSkip) Instruments.deadlineSkipped(this)
      return Effect.andThen(Instruments.stopLogged(this, stop.reason, logged), this.stop(stop.reason, last))
    }
    const decided = (decision: Decision.Decision) => {
      if (decision._tag === "Stop") return stopHere(decision)
      // The budget is asked for retries only, never for a sequence that stops anyway.
      return Effect.flatMap(this.budget.tryAcquire(failure), (granted) => {
        if (!granted) {
          Instruments.budgetRefused(this)
          return stopHere(budgetRefused)
        }
        return this.sleepThenRetry(number + 1, decision.delay, logged)
      })
    }

    const clock = this.clock
    const stopped = Decision.beforeBackoff(this, judged, nowMillis(clock))
    if (stopped !== undefined) return stopHere(stopped)
    return Effect.flatMap(
      (this.backoffStepper ??= stepperOf(this.backoff)).step(nowMillis(clock), scheduleInput as Failure.Failure),
      (step) => {
        const now = nowMillis(clock)
        const proposed = step.delay ?? "done"
        if (proposed === "done" || !Decision.drawsSpread(this, judged)) {
          return decided(Decision.afterBackoff(this, judged, now, proposed, undefined))
        }
        return Effect.flatMap(
          Random.next,
          (fraction) => decided(Decision.afterBackoff(this, judged, now, proposed, fraction))
        )
      }
    )
  }

  /** Sleeps the granted delay, then starts attempt `next`. */
  sleepThenRetry(
    next: number,
    delay: number,
    logged: Record<string, unknown>
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> {
    return Instruments.retrying(this, logged, delay).pipe(
      Effect.andThen(Effect.sleep(Duration.millis(delay))),
      Effect.andThen(Effect.suspend(() => {
        Instruments.slept(this, delay)
        return this.attemptFrom(next, delay)
      }))
    )
  }

  /** Gives the permit back with what the attempt said about capacity, then goes on with `next`. */
  releasing<X, Y, Z>(outcome: ConcurrencyGate.Outcome, next: Effect.Effect<X, Y, Z>): Effect.Effect<X, Y, Z> {
    if (!this.gated) return next
    const gate = this.gate
    const releaseNow = this.gateFast?.releaseNow
    if (releaseNow === undefined) return Effect.andThen(gate.release(outcome), next)
    releaseNow(outcome)
    return next
  }

  /**
   * The attempt ended with `exit`: its value or failure is unwrapped from what it reported
   * (`Answered`, `Reported`), its place in the key's pace settled, its permit given back, then the
   * call succeeds or decides what comes next.
   */
  settle(
    restore: Restore,
    attempt: Attempt,
    exit: Exit.Exit<unknown, unknown>,
    took: number,
    delayBefore: number
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> {
    Instruments.attemptEnded(this, attempt)
    if (Exit.isSuccess(exit)) {
      const answer = exit.value
      const report = answer instanceof Answered ? answer.report : undefined
      const value = (report === undefined ? answer : (answer as Answered<unknown>).value) as A
      Instruments.attemptTold(attempt, report)
      Instruments.endAttemptSpan(attempt, exit)
      return this.paced(
        attempt.reservation,
        report,
        undefined,
        this.releasing("success", this.succeed(attempt, value, took, report))
      )
    }
    const failure = failureOf(exit.cause)
    // Defects and interruptions are not failures of the call: they propagate untouched.
    if (hasDefect(exit.cause) || hasInterruption(exit.cause) || Option.isNone(failure)) {
      Instruments.endAttemptSpan(attempt, exit)
      const reported = Option.isSome(failure) && failure.value instanceof Reported ? failure.value.report : undefined
      return this.paced(
        attempt.reservation,
        reported,
        undefined,
        this.releasing("neutral", Effect.failCause(withoutFailures(exit.cause)))
      )
    }
    const unwrapped = unwrap(failure.value)
    Instruments.attemptTold(attempt, unwrapped.report)
    return this.paced(
      attempt.reservation,
      unwrapped.report,
      unwrapped.failure,
      this.releasing(outcomeOfError(unwrapped.failure), restore(this.fail(attempt, unwrapped, took, delayBefore)))
    )
  }

  /**
   * Settles the attempt's place in the key's pace, and teaches the limiter the provider's limits,
   * then goes on with `next`: an attempt whose failure says it never reached the provider gives its
   * place back; one the provider reported usage for is settled with it; any other keeps what it
   * reserved, as the provider counted it when it arrived.
   */
  paced<X, Y, Z>(
    reservation: RateLimiter.Reservation,
    report: Report | undefined,
    failure: unknown,
    next: Effect.Effect<X, Y, Z>
  ): Effect.Effect<X, Y, Z> {
    const limits = report?.limits
    if (reservation === RateLimiter.free && limits === undefined) return next
    const used = report?.usage
    const settled = reservation === RateLimiter.free
      ? next
      : Failure.isFailure(failure) && Classifiers.neverReached(failure)
      ? Effect.andThen(reservation.giveBack, next)
      : used === undefined
      ? next
      : Effect.andThen(reservation.settle(used), next)
    return limits === undefined ? settled : Effect.andThen(this.limiter.learn(limits), settled)
  }

  /**
   * Runs one attempt in a bounded fiber of its own, holding the permit already taken. Only
   * waiting for a suspended attempt can be interrupted; the permit goes back however it ends.
   */
  runAttempt(
    restore: Restore,
    number: number,
    delayBefore: number,
    reservation: RateLimiter.Reservation
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> {
    const current = this.fiber
    const clock = this.clock
    // Timed from now, after any wait for the permit: a wait in the queue may have used the time.
    const started = nowMillis(clock)
    if (!this.leavesRoom(started, 0)) {
      return Effect.andThen(reservation.giveBack, this.releasing("neutral", this.skipForDeadline("queue")))
    }
    const deadline = this.deadline
    const remaining = deadline - started
    const boundByDeadline = remaining <= this.attemptTimeoutMillis
    const timeoutMillis = boundByDeadline ? remaining : this.attemptTimeoutMillis
    const attempt = new Attempt(this, number, started + timeoutMillis, reservation)
    const context = Instruments.attemptStarting(
      this,
      attempt,
      current,
      number,
      delayBefore,
      contextOf(current) as Context.Context<R>
    )
    const refs: Array<RefValue> = [[CurrentAttempt, attempt]]
    // Each FiberRef set costs the attempt's fiber a little to start: the deadline is set only
    // when the call's own timeout moved it.
    if (deadline !== readRef(current, CurrentDeadline)) refs.push([CurrentDeadline, deadline])
    const attemptRefs = this.attemptRefs
    if (attemptRefs !== undefined) {
      for (const entry of attemptRefs) refs.push(entry)
    }
    const effect = this.attemptOf === undefined ? this.self! : this.attemptOf(attempt)
    const run = startBounded(effect, current, this.callerFlags, context, refs, timeoutMillis, clock)
    if (run._tag === "Finished") {
      return this.settle(restore, attempt, run.exit, nowMillis(clock) - started, delayBefore)
    }
    // Interrupted while awaiting it: the attempt is stopped, then its permit given back.
    return awaitThen(
      run,
      restore,
      () => {
        Instruments.attemptEnded(this, attempt)
        Instruments.endAttemptSpan(attempt, interruptedBy(current))
        return this.releasing("neutral", Effect.void)
      },
      (result) => {
        const took = nowMillis(clock) - started
        if (result !== timedOut) return this.settle(restore, attempt, result, took, delayBefore)
        Instruments.attemptEnded(this, attempt)
        const failure = boundByDeadline
          ? new Failure.DeadlineExceeded({ deadline, phase: "attempt" })
          : new Failure.ReadTimeout({ timeout: Duration.millis(timeoutMillis), phase: attempt.phase ?? "attempt" })
        // What it said before its time ran out still counts: the limits it heard, its request id.
        const said = attempt.said
        Instruments.attemptTold(attempt, said)
        // The gate reads this failure as it reads any other: a `ReadTimeout` is a capacity
        // signal, a deadline that cut the attempt short is not.
        return this.paced(
          attempt.reservation,
          said,
          failure,
          this.releasing(
            ConcurrencyGate.outcomeOf(failure),
            restore(this.fail(attempt, { failure, settled: false, own: true, report: said }, took, delayBefore))
          )
        )
      }
    )
  }

  refused(refusal: Failure.Shed | Failure.DeadlineExceeded) {
    this.lastFailure = refusal
    if (refusal._tag === "DeadlineExceeded") return this.skipForDeadline("queue")
    Instruments.shed(this)
    return this.stop("shed", refusal)
  }

  /** The key's pace had no room for the call before its deadline. */
  pacedOut(refusal: Failure.RateLimitedLocally) {
    this.lastFailure = refusal as LastFailure<E>
    return this.stop("rate-limited-locally", refusal as LastFailure<E>)
  }

  attemptFrom(number: number, delayBefore: number): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> {
    if (!this.leavesRoom(nowMillis(this.clock), 0)) return this.skipForDeadline("before-attempt")
    // Only waiting (for the key's pace, for a permit, for a suspended attempt) can be interrupted:
    // between taking a place, starting the attempt's fiber and awaiting it, nothing can be lost. A
    // place and a permit free at once are taken without an effect.
    return Effect.uninterruptibleMask((restore) => {
      const placed = this.limiterFast?.admitNow?.(this.tokens, this.lane)
      if (placed !== undefined) return this.gatedAttempt(restore, number, delayBefore, placed)
      // Its turn must leave the attempt its time before the deadline.
      const demand = { tokens: this.tokens, lane: this.lane, deadline: this.deadline - this.minAttemptMillis }
      const asked = nowMillis(this.clock)
      return Effect.matchEffect(restore(this.limiter.admit(demand)), {
        onFailure: (refusal) => this.pacedOut(refusal),
        onSuccess: (reservation) => {
          Instruments.pacedWait(this, nowMillis(this.clock) - asked)
          return this.gatedAttempt(restore, number, delayBefore, reservation)
        }
      })
    })
  }

  /** Takes a permit of the gate for an attempt that has its place in the key's pace, then runs it. */
  gatedAttempt(
    restore: Restore,
    number: number,
    delayBefore: number,
    reservation: RateLimiter.Reservation
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> {
    if (!this.gated || this.gateFast?.tryAcquireNow?.() === true) {
      return this.runAttempt(restore, number, delayBefore, reservation)
    }
    const waited = restore(this.gate.acquire(this.deadline))
    return Effect.matchEffect(
      reservation === RateLimiter.free ? waited : Effect.onInterrupt(waited, () => reservation.giveBack),
      {
        onFailure: (refusal) => Effect.andThen(reservation.giveBack, this.refused(refusal)),
        onSuccess: () => this.runAttempt(restore, number, delayBefore, reservation)
      }
    )
  }
}

/** The `Coordination` in the fiber's context, or its default: read on every call, without an `Option`. */
const coordinationOf = (fiber: FiberView): Coordination.Service =>
  Context.get(contextOf(fiber), Coordination.Coordination)

const badMaxAttempts = (policy: Policy, maxAttempts: number) =>
  Effect.die(
    new Settings.InvalidSettings({
      subject: `call to ${policy.target}`,
      problems: [`maxAttempts must be an integer >= 1, got ${maxAttempts}`]
    })
  )

/**
 * Runs a sequence, which ends the call's span it made (it is made while someone can see it) as the
 * call ends, however it ends. A span the caller gives (`givenSpan`) is the caller's to end.
 */
const started = <A, E, R>(sequence: Sequence<A, E, R>, given: GivenSpan | undefined) => {
  const { span, tracing } = sequence
  if (given !== undefined || span === undefined || tracing === undefined) return sequence.start()
  return Effect.onExit(
    sequence.start(),
    (exit) => Effect.sync(() => Spans.endCallSpan(tracing, span, exit))
  )
}

/** An attempt given its context: its value and failure may come with its report. */
export type AttemptOf<A, E, R> = (context: AttemptContext) => Effect.Effect<A | Answered<A>, E | Reported<E>, R>

/**
 * Runs a call under `policy`: a policy not yet checked is checked first (once per policy object),
 * and one whose settings cannot work fails the call with its `InvalidSettings`.
 */
export const runSequence = <A, E, R, PE>(
  self: Effect.Effect<A, E, R> | AttemptOf<A, E, R>,
  policy: PolicyOf<PE>,
  options: CallOptions | undefined,
  given: TargetServices | undefined,
  judge: Judge | undefined,
  givenSpan?: GivenSpan | undefined
): Effect.Effect<A, Failure.CallFailed<LastFailure<E>> | PE, R> => {
  if (!Policies.isChecked(policy)) {
    const checked = Policies.check(policy)
    if (Either.isLeft(checked)) return Effect.fail(Either.leftOf(checked) as PE)
  }
  return runChecked(self, policy as unknown as Policy, options, given, judge, givenSpan)
}

const runChecked = <A, E, R>(
  self: Effect.Effect<A, E, R> | AttemptOf<A, E, R>,
  policy: Policy,
  options: CallOptions | undefined,
  given: TargetServices | undefined,
  judge: Judge | undefined,
  givenSpan: GivenSpan | undefined
): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> => {
  const maxAttempts = options?.maxAttempts
  if (maxAttempts !== undefined && !(Number.isInteger(maxAttempts) && maxAttempts >= 1)) {
    return badMaxAttempts(policy, maxAttempts)
  }
  return withFiber((fiber, flags) => {
    // A policy's calls are made without an API key: their state is under no key's fingerprint.
    const services = given ?? coordinationOf(fiber).targets.get(policy.target)?.get(undefined)
    if (services !== undefined) {
      return started(
        new Sequence(self, policy, options, services, judge, fiber, flags, givenSpan),
        givenSpan
      )
    }
    // The target's first call: its budget and gate are made, from settings `policy` already checked.
    return Effect.flatMap(
      Effect.orDie(coordinationOf(fiber).stateOf(policy)),
      (made) => runChecked(self, policy, options, made, judge, givenSpan)
    )
  })
}

/**
 * An attempt's failure; whether it was already retried (by a nested call) so only stopping is left;
 * whether the sequence made it (a timeout), so the policy judges it rather than a call's `classify`;
 * and what the attempt reported with it.
 */
interface AttemptFailure {
  readonly failure: unknown
  readonly settled: boolean
  readonly own: boolean
  readonly report: Report | undefined
}

/**
 * A failure reported with what its attempt said is unwrapped to the failure; a nested call's
 * aggregate to its last failure: unless it deferred, it already retried.
 */
const unwrap = (error: unknown): AttemptFailure => {
  const report = error instanceof Reported ? error.report : undefined
  const failure = report === undefined ? error : (error as Reported<unknown>).failure
  // By its type id, as every failure of ours: an aggregate made by another copy of the package is one too.
  return Failure.isCallFailed(failure)
    ? { failure: failure.last, settled: failure.reason !== "deferred", own: Failure.isFailure(failure.last), report }
    : { failure, settled: false, own: false, report }
}
