/**
 * The seam's Effect 4 side: the names `effect3.ts` offers, in Effect 4's terms (fiber-local values
 * are references in the fiber's context; a fiber reads them with `getRef`). See
 * docs/effect-lines.md.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Effectable from "effect/Effectable"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as LogLevels from "effect/LogLevel"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Pull from "effect/Pull"
import * as Random from "effect/Random"
import * as References from "effect/References"
import * as Results from "effect/Result"
import * as Schedule from "effect/Schedule"
import type * as Scheduler from "effect/Scheduler"
import * as Scope from "effect/Scope"
import * as Semaphores from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import type { SpanTracing, Step, StepDelay, Stepper } from "./shared.js"

/** What a duration setting accepts: a `Duration`, milliseconds, or Effect's form (`"2 seconds"`). */
export type DurationInput = Duration.Input

/** A value each fiber carries, inherited by the fibers it forks, with a default: a `Context.Reference` on Effect 4. */
export type Ref<A> = Context.Reference<A>

/**
 * A fiber-local value under `key`, `initial` until set. References are told apart by their key,
 * so copies of the package loaded twice share it.
 */
export const makeRef = <A>(key: string, initial: A): Ref<A> =>
  Context.Reference<A>(key, { defaultValue: () => initial })

/** The current fiber's value of `ref`. */
export const getRef = <A>(ref: Ref<A>): Effect.Effect<A> => Effect.service(ref)

/** Runs `self` with `ref` set to `value`. */
export const locally = <A, E, R, V>(self: Effect.Effect<A, E, R>, ref: Ref<V>, value: V): Effect.Effect<A, E, R> =>
  Effect.provideService(self, ref, value)

/** The running fiber, as the engine reads its values. */
export type FiberView = Fiber.Fiber<unknown, unknown>

/** What a fiber started for an attempt inherits from its caller besides its context: nothing more on Effect 4. */
export type CallerFlags = undefined

/** Runs `f` with the current fiber, without an effect in between. */
export const withFiber = <A, E, R>(
  f: (fiber: FiberView, flags: CallerFlags) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => Effect.withFiber((fiber) => f(fiber, undefined))

/** The fiber's value of `ref`. */
export const readRef = <A>(fiber: FiberView, ref: Ref<A>): A => fiber.getRef(ref)

/** The fiber's services (its context). */
export const contextOf = (fiber: FiberView): Context.Context<never> => fiber.context

/** The fiber's clock. */
export const clockOf = (fiber: FiberView): Clock.Clock => fiber.getRef(Clock.Clock)

/** The clock every fiber has unless a program provides another. */
export const liveClock: Clock.Clock = Context.get(Context.empty(), Clock.Clock)

/** The clock's time in epoch milliseconds, read without an effect. */
export const nowMillis = (clock: Clock.Clock): number => clock.currentTimeMillisUnsafe()

/** The clock's time in nanoseconds, read without an effect. */
export const nowNanos = (clock: Clock.Clock): bigint => clock.currentTimeNanosUnsafe()

/** `self`, or `onTimeout`'s failure if it has not ended after `duration` (then it is interrupted). */
export const timeoutFail = <A, E, R, E2>(
  self: Effect.Effect<A, E, R>,
  options: { readonly duration: DurationInput; readonly onTimeout: () => E2 }
): Effect.Effect<A, E | E2, R> =>
  Effect.timeoutOrElse(self, { duration: options.duration, orElse: () => Effect.fail(options.onTimeout()) })

/** A fiber-local value with a default, which a layer or `Effect.provideService` replaces. */
export type Reference<S> = Context.Reference<S>

/** A reference under `key` whose value is `defaultValue()` until one is provided. */
export const reference = <S>(key: string, defaultValue: () => S): Reference<S> =>
  Context.Reference<S>(key, { defaultValue })

/** The current fiber's clock. */
export const currentClock: Effect.Effect<Clock.Clock> = Effect.service(Clock.Clock)

/** A deferred made outside an effect. */
export const makeDeferredUnsafe = <A, E>(): Deferred.Deferred<A, E> => Deferred.makeUnsafe<A, E>()

/** A semaphore. */
export type Semaphore = Semaphores.Semaphore

/** A semaphore of `permits`, made outside an effect. */
export const makeSemaphoreUnsafe = (permits: number): Semaphore => Semaphores.makeUnsafe(permits)

/** Waits for `register` to call `resume`; what `register` returns runs if the wait is interrupted. */
export const callback = <A, E = never, R = never>(
  register: (resume: (effect: Effect.Effect<A, E, R>) => void) => void | Effect.Effect<void, never, R>
): Effect.Effect<A, E, R> => Effect.callback<A, E, R>((resume) => register(resume))

/** Forks `self` as a child of the current fiber. */
export const fork = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Fiber.Fiber<A, E>, never, R> =>
  Effect.forkChild(self)

/** Forks `self` in the global scope: it outlives the current fiber. */
export const forkDaemon = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Fiber.Fiber<A, E>, never, R> =>
  Effect.forkDetach(self)

/** The cause's first typed failure, if it has one. */
export const failureOf = <E>(cause: Cause.Cause<E>): Option.Option<E> => Cause.findErrorOption(cause)

/** Whether the cause has a defect. */
export const hasDefect = (cause: Cause.Cause<unknown>): boolean => Cause.hasDies(cause)

/** Whether the cause has an interruption. */
export const hasInterruption = (cause: Cause.Cause<unknown>): boolean => Cause.hasInterrupts(cause)

/** Whether the cause is interruptions only. */
export const isInterruptedOnly = (cause: Cause.Cause<unknown>): boolean => Cause.hasInterruptsOnly(cause)

/** The cause without its typed failures: its defects and interruptions. */
export const withoutFailures = <E>(cause: Cause.Cause<E>): Cause.Cause<never> =>
  Cause.fromReasons(cause.reasons.filter((reason) => !Cause.isFailReason(reason))) as Cause.Cause<never>

/** A fiber started for one attempt. */
export type AttemptFiber<A, E> = Fiber.Fiber<A, E>

/** A fiber-local value and what it is set to. */
export type RefValue = readonly [Ref<any>, unknown]

/**
 * Starts `self` on the current thread in a fiber of its own, not the caller's child: with
 * `context` (which carries the caller's references on Effect 4) and `refs` set over it. An effect
 * that does not suspend has ended when this returns.
 */
export const startFiber = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  _parent: FiberView,
  _flags: CallerFlags,
  context: Context.Context<R>,
  refs: ReadonlyArray<RefValue>
): AttemptFiber<A, E> => {
  let withRefs: Context.Context<R> = context
  for (const [ref, value] of refs) withRefs = Context.add(withRefs, ref, value)
  return Effect.runForkWith(withRefs)(self)
}

/** The fiber's exit, if it has ended. */
export const pollFiber = <A, E>(fiber: AttemptFiber<A, E>): Exit.Exit<A, E> | undefined => fiber.pollUnsafe()

/** Interrupts `fiber` on behalf of `by`, without waiting for it to end. */
export const interruptAsFork = (fiber: AttemptFiber<unknown, unknown>, by: FiberView): void =>
  fiber.interruptUnsafe(by.id)

/** The exit of an effect that `fiber` interrupted. */
export const interruptedBy = (fiber: FiberView): Exit.Exit<never> => Exit.interrupt(fiber.id)

/** Where a metric update is counted besides the metric's own tags: the fiber's context on Effect 4 (its attributes and registry). */
export type MetricScope = Context.Context<never>

/** No tags besides the metric's own. */
export const noMetricScope: MetricScope = Context.empty()

/** The attributes `Metric.withAttributes` put in scope for `fiber`, and its registry. */
export const metricScopeOf = (fiber: FiberView): MetricScope => fiber.context

/** A counter of numbers. */
export type Counter = Metric.Counter<number>

/** A histogram of numbers. */
export type Histogram = Metric.Histogram<number>

/** A gauge of numbers. */
export type Gauge = Metric.Gauge<number>

/** What a histogram holds: its buckets, count, min, max and sum. */
export type HistogramState = Metric.HistogramState

/** A counter that only grows. */
export const counter = (name: string, description: string): Counter =>
  Metric.counter(name, { description, incremental: true })

/** A gauge. */
export const gauge = (name: string, description: string): Gauge => Metric.gauge(name, { description })

/** A histogram with the given bucket boundaries. */
export const histogram = (name: string, boundaries: ReadonlyArray<number>, description: string): Histogram =>
  Metric.histogram(name, { boundaries: Metric.boundariesFromIterable(boundaries), description })

/** `metric` with `tags` as its attributes. */
export const tagged = <M extends Counter | Histogram | Gauge>(metric: M, tags: Readonly<Record<string, string>>): M =>
  Metric.withAttributes(metric as Metric.Metric<number, unknown>, tags) as M

/** Counts `value` in `metric`, under the scope's attributes too. */
export const update = (metric: Counter | Histogram | Gauge, value: number, scope: MetricScope): void =>
  (metric as Metric.Metric<number, unknown>).updateUnsafe(value, scope)

/** What `counter` has counted, under its own attributes. */
export const counted = (counter: Counter): number => counter.valueUnsafe(Context.empty()).count

/** What `histogram` holds, under its own attributes. */
export const histogramState = (histogram: Histogram): HistogramState => histogram.valueUnsafe(Context.empty())

/** Bucket boundaries from `start`, each `factor` times the one before, `count` in all (the last infinite). */
export const exponentialBoundaries = (options: {
  readonly start: number
  readonly factor: number
  readonly count: number
}): ReadonlyArray<number> => Metric.exponentialBoundaries(options)

/** A log line's level. */
export type LogLevel = LogLevels.LogLevel

/** The levels the engine logs at. */
export const logLevels: { readonly debug: LogLevel; readonly info: LogLevel; readonly warning: LogLevel } = {
  debug: "Debug",
  info: "Info",
  warning: "Warn"
}

/** The least level `fiber` writes. */
export const minimumLogLevelOf = (fiber: FiberView): LogLevel => fiber.getRef(References.MinimumLogLevel)

/** Whether a line at `level` is written where `minimum` is the least level written. */
export const writesAt = (level: LogLevel, minimum: LogLevel): boolean => !LogLevels.isLessThan(level, minimum)

/** Logs `message` at `level`. */
export const logAt = (level: LogLevel, message: string): Effect.Effect<void> =>
  Effect.logWithLevel(level as LogLevels.Severity)(message)

/** Effect's built-in tracer: its spans go nowhere, so none are made under it. */
const nativeTracer = Context.get(Context.empty(), Tracer.Tracer)

/** The fiber's tracing, or `undefined` when its spans would be seen by nobody. */
export const spanTracingOf = (fiber: FiberView, clock: Clock.Clock): SpanTracing | undefined => {
  if (!fiber.getRef(References.TracerEnabled)) return undefined
  const tracer = fiber.getRef(Tracer.Tracer)
  if (tracer === nativeTracer) return undefined
  return { tracer, clock, timing: fiber.getRef(References.TracerTimingEnabled) }
}

/** The span in context, skipping those that do not propagate, as `Effect.withSpan` finds its parent. */
const parentOf = (context: Context.Context<never>): Option.Option<Tracer.AnySpan> => {
  let span = Context.getOption(context, Tracer.ParentSpan)
  while (span._tag === "Some" && Context.get(span.value.annotations, Tracer.DisablePropagation)) {
    span = span.value._tag === "Span" ? span.value.parent : Option.none()
  }
  return span
}

/**
 * Starts a span at `startTime`, as `Effect.useSpan` would in `fiber`: under `parent`, or else the
 * span in the fiber's context with the fiber's span links; with the fiber's span annotations.
 */
export const startSpan = (
  tracing: SpanTracing,
  fiber: FiberView,
  name: string,
  parent: Tracer.AnySpan | undefined,
  kind: Tracer.SpanKind,
  startTime: bigint
): Tracer.Span => {
  const parentSpan = parent === undefined ? parentOf(fiber.context) : Option.some(parent)
  const links = parent === undefined ? fiber.getRef(References.TracerSpanLinks) : []
  const sampled = Option.isSome(parentSpan) && parentSpan.value.sampled === false
    ? false
    : !LogLevels.isGreaterThan(fiber.getRef(Tracer.MinimumTraceLevel), fiber.getRef(Tracer.CurrentTraceLevel))
  const span = tracing.tracer.span({
    name,
    parent: parentSpan,
    annotations: Context.empty(),
    links: links.length === 0 ? [] : links.slice(),
    startTime,
    kind,
    root: false,
    sampled
  })
  const annotations = fiber.getRef(References.TracerSpanAnnotations)
  for (const key in annotations) span.attribute(key, annotations[key])
  return span
}

/** A scope of its own under `outer`, closed (its finalizers run in order) when it is closed or `outer` is. */
export const forkScope = (outer: Scope.Scope): Effect.Effect<Scope.Closeable> => Scope.fork(outer, "sequential")

/** Runs `self` with `scope` as its scope. */
export const inScope =
  (scope: Scope.Scope) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Scope.Scope>> =>
    Scope.provide(scope)(self)

/** The stream an effect makes, in a scope that closes when the stream ends. */
export const unwrapScopedStream = <A, E2, R2, E, R>(
  effect: Effect.Effect<Stream.Stream<A, E2, R2>, E, R>
): Stream.Stream<A, E | E2, R2 | Exclude<R, Scope.Scope>> => Stream.unwrap(effect)

/**
 * A schedule that starts in `initial` and whose `step` gives its next state and delay: what each
 * line's `Schedule` module makes in its own terms. Its output is the delay.
 */
export const scheduleOf = <S, In>(
  initial: S,
  step: (now: number, input: In, state: S) => Effect.Effect<readonly [S, StepDelay]>
): Schedule.Schedule<Duration.Duration, In> =>
  Schedule.fromStep(Effect.sync(() => {
    let state = initial
    return (now: number, input: In) =>
      Effect.flatMap(step(now, input, state), ([next, delay]) => {
        state = next
        if (delay === undefined) return Cause.done(Duration.zero)
        const duration = Duration.millis(delay)
        return Effect.succeed([duration, duration] as [Duration.Duration, Duration.Duration])
      })
  }))

/** Steps `schedule` by hand from its start. */
export const stepperOf = <Out, In>(schedule: Schedule.Schedule<Out, In>): Stepper<Out, In> => {
  let stepping: ((now: number, input: In) => Pull.Pull<[Out, Duration.Duration], never, Out>) | undefined
  const started = Effect.map(Schedule.toStep(schedule), (step) => (stepping = step))
  return {
    step: (now, input) =>
      Effect.flatMap(stepping === undefined ? started : Effect.succeed(stepping), (step) =>
        Pull.catchDone(
          Effect.map(step(now, input), ([output, delay]): Step<Out> => ({ output, delay: Duration.toMillis(delay) })),
          (output) => Effect.succeed<Step<Out>>({ output: output as Out, delay: undefined })
        ))
  }
}

/**
 * Success or failure as a value: Effect 4's `Result`, under the names the engine uses (`right`
 * holds the value, `left` the failure).
 */
export const Either = {
  right: <A>(value: A): Results.Result<A, never> => Results.succeed(value),
  left: <E>(failure: E): Results.Result<never, E> => Results.fail(failure),
  isLeft: <A, E>(either: Results.Result<A, E>): either is Results.Failure<A, E> => Results.isFailure(either),
  isRight: <A, E>(either: Results.Result<A, E>): either is Results.Success<A, E> => Results.isSuccess(either),
  /** The failure of a `Result` known to hold one. */
  leftOf: <A, E>(either: Results.Failure<A, E>): E => either.failure,
  /** The value of a `Result` known to hold one. */
  rightOf: <A, E>(either: Results.Success<A, E>): A => either.success,
  map: <A, E, B>(either: Results.Result<A, E>, f: (value: A) => B): Results.Result<B, E> => Results.map(either, f),
  mapLeft: <A, E, E2>(either: Results.Result<A, E>, f: (failure: E) => E2): Results.Result<A, E2> =>
    Results.mapError(either, f),
  match: <A, E, B, C>(
    either: Results.Result<A, E>,
    cases: { readonly onLeft: (failure: E) => B; readonly onRight: (value: A) => C }
  ): B | C => Results.match(either, { onFailure: cases.onLeft, onSuccess: cases.onRight }),
  /** The value, or a throw of what `onLeft` makes of the failure. */
  getOrThrow: <A, E>(either: Results.Result<A, E>): A => Results.getOrThrow(either),
  getOrThrowWith: <A, E>(either: Results.Result<A, E>, onLeft: (failure: E) => unknown): A =>
    Results.getOrThrowWith(either, onLeft),
  /** The `Result` as an effect that succeeds or fails with it. */
  toEffect: <A, E>(either: Results.Result<A, E>): Effect.Effect<A, E> =>
    Results.isSuccess(either) ? Effect.succeed(either.success) : Effect.fail(either.failure)
}

export declare namespace Either {
  /** Success (`A`) or failure (`E`): Effect 4's `Result`. */
  export type Either<A, E = never> = Results.Result<A, E>
}

/**
 * Reads the variables `names` under `prefix` (`{prefix}_{name}`), an unset one as `undefined`, and
 * decides from their values: a failure is the text of the `ConfigError` the config fails with.
 */
export const configFromVariables = <A>(
  prefix: string,
  names: ReadonlyArray<string>,
  decide: (values: ReadonlyArray<string | undefined>) => Results.Result<A, string>
): Config.Config<A> =>
  Config.mapEffect(
    Config.all(names.map((name) => Config.map(Config.option(Config.String(name)), Option.getOrUndefined))).pipe(
      Config.nested(prefix)
    ),
    (values) =>
      Results.match(decide(values), {
        onSuccess: (value) => Effect.succeed(value),
        onFailure: (message) => Effect.fail(new Config.ConfigError(new ConfigProvider.SourceError({ message })))
      })
  )

/**
 * A duration from anything Effect reads as one (a `Duration`, milliseconds, `"2 seconds"`), or
 * `undefined`. The texts `"Infinity"` and `"-Infinity"`, which Effect 4 reads and Effect 3 does
 * not, are not durations here either: a setting's text means the same on both lines.
 */
export const durationFrom = (input: unknown): Duration.Duration | undefined => {
  if (input === "Infinity" || input === "-Infinity") return undefined
  try {
    return Duration.fromInputUnsafe(input as Duration.Input)
  } catch {
    return undefined
  }
}

/**
 * A value that is also an effect (yielding it runs `commit`), as Effect's own `Effectable.Class`
 * makes one on each line: Effect 4 asks for `asEffect`, which is `commit` here.
 */
export abstract class EffectValue<A, E> extends Effectable.Class<A, E> {
  abstract commit(): Effect.Effect<A, E>
  asEffect(): Effect.Effect<A, E> {
    return this.commit()
  }
}

/**
 * A service key as a class: `class Db extends Service<Db, Shape>()("app/Db") {}`, a
 * `Context.Service` on Effect 4.
 */
export const Service = <Self, Shape>() => <const Id extends string>(id: Id): Context.ServiceClass<Self, Id, Shape> =>
  Context.Service<Self, Shape>()(id)

/** The cause's first defect, if it has one. */
export const defectOf = (cause: Cause.Cause<unknown>): Option.Option<unknown> =>
  Cause.findDefect(cause).pipe(Results.getSuccess)

/**
 * `self`, then a point where a pending interruption lands. Effect 4 lets a fiber resumed from a
 * wait run on to its next yield before an interruption that came meanwhile takes effect: a waiter
 * granted a permit and interrupted in the same instant would start its attempt. The yield here, in
 * the waiter's own interruption handling, lets it give the permit back instead.
 */
export const thenInterruptible = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tap(self, () => Effect.yieldNow)

export type { SpanTracing, Step, StepDelay, Stepper } from "./shared.js"

/** Why a `Config` could not be read. */
export type ConfigError = Config.ConfigError

/** A layer of the service `effect` makes, whose resources live as long as the layer: `Layer.effect` on Effect 4. */
export const layerScoped = <I, S, E, R>(
  tag: Context.Key<I, S>,
  effect: Effect.Effect<NoInfer<S>, E, R>
): Layer.Layer<I, E, Exclude<R, Scope.Scope>> => Layer.effect(tag, effect)

/** A layer of no service that runs `effect` when built, its resources living as long as the layer. */
export const layerScopedDiscard = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Layer.Layer<never, E, Exclude<R, Scope.Scope>> => Layer.effectDiscard(effect)

/** `self`, or the stream `f` makes of its failure. */
export const catchAllStream = <A, E, R, A2, E2, R2>(
  self: Stream.Stream<A, E, R>,
  f: (failure: E) => Stream.Stream<A2, E2, R2>
): Stream.Stream<A | A2, E2, R | R2> => Stream.catch(self, f)

/**
 * Runs effects from promise code with the services of the fiber that made the runner (an
 * abort of `signal` interrupts the effect).
 */
export const promiseExitRunner = <R = never>(): Effect.Effect<
  ReturnType<typeof Effect.runPromiseExitWith<R>>,
  never,
  R
> => Effect.map(Effect.context<R>(), (context) => Effect.runPromiseExitWith(context))

/**
 * A clock whose time is `source.millis()` and whose sleeps are `source.sleep`'s, as the line's
 * `Clock` service: a simulated clock (the storm's), which jumps from event to event. Its monotonic
 * time is its time.
 */
export const makeClock = (source: {
  readonly millis: () => number
  readonly sleep: (millis: number) => Effect.Effect<void>
}): Clock.Clock => {
  const nanos = () => BigInt(Math.round(source.millis() * 1_000_000))
  return {
    currentTimeMillisUnsafe: source.millis,
    currentTimeMillis: Effect.sync(source.millis),
    currentTimeNanosUnsafe: nanos,
    currentTimeNanos: Effect.sync(nanos),
    monotonicTimeNanosUnsafe: nanos,
    monotonicTimeNanos: Effect.sync(nanos),
    sleep: (duration) => source.sleep(Duration.toMillis(duration))
  }
}

/** Runs `self` with `clock` as its clock. */
export const withClock = <A, E, R>(self: Effect.Effect<A, E, R>, clock: Clock.Clock): Effect.Effect<A, E, R> =>
  Effect.provideService(self, Clock.Clock, clock)

/**
 * Runs `self` drawing its random numbers from `next` (doubles in [0, 1)): a generator of the
 * caller's own, the same on both lines, where each line's seeded `Random` draws differently. An
 * integer is drawn from `next` as Effect 3's `Random.make` draws one from its generator.
 */
export const withRandomFrom = <A, E, R>(self: Effect.Effect<A, E, R>, next: () => number): Effect.Effect<A, E, R> =>
  Effect.provideService(self, Random.Random, {
    nextDoubleUnsafe: next,
    nextIntUnsafe: () => Math.round(next() * Number.MAX_SAFE_INTEGER) % Number.MAX_SAFE_INTEGER
  })

/** Runs `self` writing no log lines: their cost is saved too, not only their output. */
export const withoutLogs = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(self, References.MinimumLogLevel, "None")

/**
 * A scheduler for a program whose caller runs its fibers by hand (the storm's simulated time):
 * every task a fiber makes goes to `schedule`, and the caller runs them; `flush` runs those waiting,
 * where Effect asks for it. A fiber gives the others a turn after `opsBeforeYield` operations. Every
 * fiber shares the one dispatcher, so tasks run in the order they came, whatever their priority, as
 * on Effect 3.
 */
export const schedulerOf = (options: {
  readonly schedule: (task: () => void) => void
  readonly flush: () => void
  readonly opsBeforeYield: number
}): Scheduler.Scheduler => {
  const dispatcher: Scheduler.SchedulerDispatcher = {
    scheduleTask: (task) => options.schedule(task),
    flush: options.flush
  }
  return {
    executionMode: "sync",
    shouldYield: (fiber) => fiber.currentOpCount > options.opsBeforeYield,
    makeDispatcher: () => dispatcher
  }
}

/** What `gauge` reads now, under its own attributes. */
export const gaugeValue = (gauge: Gauge): number => gauge.valueUnsafe(Context.empty()).value

/** The fiber's number, unique among the process's fibers: what a fiber holds is kept under it. */
export const fiberIdOf = (fiber: FiberView): number => fiber.id

/**
 * `self`'s outcome dropped, a failure of any kind (a defect too) logged at debug level: for a
 * clean-up whose failure changes nothing for the caller. `Effect.ignoreCause` on Effect 4.
 */
export const ignoreLogged = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<void, never, R> =>
  Effect.ignoreCause(self, { log: "Debug" })
