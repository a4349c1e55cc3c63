/**
 * The seam's Effect 3 side: what the engine needs from Effect that Effect 3 and Effect 4 spell
 * differently, in Effect 3's terms. `effect4.ts` offers the same names in Effect 4's; the rest of
 * the code imports this as `#effect-line` and uses only what both lines share
 * (docs/effect-lines.md).
 */
import * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as ConfigErrors from "effect/ConfigError"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Effectable from "effect/Effectable"
import * as Eithers from "effect/Either"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import { globalValue } from "effect/GlobalValue"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevels from "effect/LogLevel"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricLabel from "effect/MetricLabel"
import type * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Runtime from "effect/Runtime"
import type * as RuntimeFlags from "effect/RuntimeFlags"
import * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"
import * as ScheduleInterval from "effect/ScheduleInterval"
import * as ScheduleIntervals from "effect/ScheduleIntervals"
import type * as Scheduler from "effect/Scheduler"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import type { SpanTracing, Step, StepDelay, Stepper } from "./shared.js"

/** What a duration setting accepts: a `Duration`, milliseconds, or Effect's form (`"2 seconds"`). */
export type DurationInput = Duration.DurationInput

/** A value each fiber carries, inherited by the fibers it forks, with a default: a `FiberRef` on Effect 3. */
export type Ref<A> = FiberRef.FiberRef<A>

/**
 * A fiber-local value under `key`, `initial` until set. One per key in the process, however many
 * copies of the package are loaded; a joining child never changes its parent's.
 */
export const makeRef = <A>(key: string, initial: A): Ref<A> =>
  globalValue(key, () => FiberRef.unsafeMake<A>(initial, { join: (parent) => parent }))

/** The current fiber's value of `ref`. */
export const getRef: <A>(ref: Ref<A>) => Effect.Effect<A> = FiberRef.get

/** Runs `self` with `ref` set to `value`. */
export const locally = <A, E, R, V>(self: Effect.Effect<A, E, R>, ref: Ref<V>, value: V): Effect.Effect<A, E, R> =>
  Effect.locally(self, ref, value)

/** The running fiber, as the engine reads its values. */
export type FiberView = Fiber.RuntimeFiber<unknown, unknown>

/** What a fiber started for an attempt inherits from its caller besides its values: its runtime flags on Effect 3. */
export type CallerFlags = RuntimeFlags.RuntimeFlags

/** Runs `f` with the current fiber, without an effect in between. */
export const withFiber = <A, E, R>(
  f: (fiber: FiberView, flags: CallerFlags) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => Effect.withFiberRuntime((fiber, status) => f(fiber, status.runtimeFlags))

/** The fiber's value of `ref`. */
export const readRef = <A>(fiber: FiberView, ref: Ref<A>): A => fiber.getFiberRef(ref)

/** The fiber's services (its context). */
export const contextOf = (fiber: FiberView): Context.Context<never> => fiber.currentContext

/** The fiber's clock. */
export const clockOf = (fiber: FiberView): Clock.Clock => Context.get(fiber.currentDefaultServices, Clock.Clock)

/** The clock every fiber has unless a program provides another. */
export const liveClock: Clock.Clock = Context.get(DefaultServices.liveServices, Clock.Clock)

/** The clock's time in epoch milliseconds, read without an effect. */
export const nowMillis = (clock: Clock.Clock): number => clock.unsafeCurrentTimeMillis()

/** The clock's time in nanoseconds, read without an effect. */
export const nowNanos = (clock: Clock.Clock): bigint => clock.unsafeCurrentTimeNanos()

/** `self`, or `onTimeout`'s failure if it has not ended after `duration` (then it is interrupted). */
export const timeoutFail = <A, E, R, E2>(
  self: Effect.Effect<A, E, R>,
  options: { readonly duration: DurationInput; readonly onTimeout: () => E2 }
): Effect.Effect<A, E | E2, R> => Effect.timeoutFail(self, options)

/** A fiber-local value with a default, which a layer or `Effect.provideService` replaces. */
export type Reference<S> = Context.Reference<S, S>

/** A reference under `key` whose value is `defaultValue()` until one is provided. */
export const reference = <S>(key: string, defaultValue: () => S): Reference<S> =>
  Context.Reference<S>()(key, { defaultValue })

/** The current fiber's clock. */
export const currentClock: Effect.Effect<Clock.Clock> = Effect.clock

/** A deferred made outside an effect. */
export const makeDeferredUnsafe = <A, E>(): Deferred.Deferred<A, E> => Deferred.unsafeMake<A, E>(FiberId.none)

/** A semaphore. */
export type Semaphore = Effect.Semaphore

/** A semaphore of `permits`, made outside an effect. */
export const makeSemaphoreUnsafe = (permits: number): Semaphore => Effect.unsafeMakeSemaphore(permits)

/** Waits for `register` to call `resume`; what `register` returns runs if the wait is interrupted. */
export const callback = <A, E = never, R = never>(
  register: (resume: (effect: Effect.Effect<A, E, R>) => void) => void | Effect.Effect<void, never, R>
): Effect.Effect<A, E, R> => Effect.async<A, E, R>((resume) => register(resume))

/** Forks `self` as a child of the current fiber. */
export const fork: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<Fiber.RuntimeFiber<A, E>, never, R> =
  Effect.fork

/** Forks `self` in the global scope: it outlives the current fiber. */
export const forkDaemon: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<Fiber.RuntimeFiber<A, E>, never, R> =
  Effect.forkDaemon

/** The cause's first typed failure, if it has one. */
export const failureOf = <E>(cause: Cause.Cause<E>): Option.Option<E> => Cause.failureOption(cause)

/** Whether the cause has a defect. */
export const hasDefect = (cause: Cause.Cause<unknown>): boolean => Cause.isDie(cause)

/** Whether the cause has an interruption. */
export const hasInterruption = (cause: Cause.Cause<unknown>): boolean => Cause.isInterrupted(cause)

/** Whether the cause is interruptions only. */
export const isInterruptedOnly = (cause: Cause.Cause<unknown>): boolean => Cause.isInterruptedOnly(cause)

/** The cause without its typed failures: its defects and interruptions. */
export const withoutFailures = <E>(cause: Cause.Cause<E>): Cause.Cause<never> => Cause.stripFailures(cause)

/** A fiber started for one attempt. */
export type AttemptFiber<A, E> = Fiber.RuntimeFiber<A, E>

/** A fiber-local value and what it is set to. */
export type RefValue = readonly [Ref<any>, unknown]

/**
 * Starts `self` on the current thread in a fiber of its own, not the caller's child: with the
 * caller's fiber-local values, `refs` set over them, and `context` for its services. An effect that
 * does not suspend has ended when this returns.
 */
export const startFiber = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  parent: FiberView,
  flags: CallerFlags,
  context: Context.Context<R>,
  refs: ReadonlyArray<RefValue>
): AttemptFiber<A, E> => {
  const id = parent.id()
  const entries: Array<readonly [FiberRef.FiberRef<any>, readonly [readonly [FiberId.Single, unknown]]]> = []
  for (const [ref, value] of refs) entries.push([ref, [[id, value]]])
  const fiberRefs = entries.length === 0
    ? parent.getFiberRefs()
    : FiberRefs.updateManyAs(parent.getFiberRefs(), { entries: entries as [any, ...Array<any>] })
  return Runtime.runFork(Runtime.make({ context, fiberRefs, runtimeFlags: flags }), self)
}

/** The fiber's exit, if it has ended. */
export const pollFiber = <A, E>(fiber: AttemptFiber<A, E>): Exit.Exit<A, E> | undefined =>
  fiber.unsafePoll() ?? undefined

/** Interrupts `fiber` on behalf of `by`, without waiting for it to end. */
export const interruptAsFork = (fiber: AttemptFiber<unknown, unknown>, by: FiberView): void =>
  fiber.unsafeInterruptAsFork(by.id())

/** The exit of an effect that `fiber` interrupted. */
export const interruptedBy = (fiber: FiberView): Exit.Exit<never> => Exit.interrupt(fiber.id())

/** Where a metric update is counted besides the metric's own tags: the fiber's metric labels on Effect 3. */
export type MetricScope = ReadonlyArray<MetricLabel.MetricLabel>

/** No tags besides the metric's own. */
export const noMetricScope: MetricScope = []

/** The tags `Effect.tagMetrics` put in scope for `fiber`. */
export const metricScopeOf = (fiber: FiberView): MetricScope => fiber.getFiberRef(FiberRef.currentMetricLabels)

/** A counter of numbers. */
export type Counter = Metric.Metric.Counter<number>

/** A histogram of numbers. */
export type Histogram = Metric.Metric.Histogram<number>

/** A gauge of numbers. */
export type Gauge = Metric.Metric.Gauge<number>

/** What a histogram holds: its buckets, count, min, max and sum. */
export type HistogramState = MetricState.MetricState.Histogram

/** A counter that only grows. */
export const counter = (name: string, description: string): Counter =>
  Metric.counter(name, { description, incremental: true })

/** A gauge. */
export const gauge = (name: string, description: string): Gauge => Metric.gauge(name, { description })

/** A histogram with the given bucket boundaries (an infinite one is added). */
export const histogram = (name: string, boundaries: ReadonlyArray<number>, description: string): Histogram =>
  Metric.histogram(name, MetricBoundaries.fromIterable(boundaries), description)

/**
 * `metric` with `tags`, as `Metric.taggedWithLabels` makes it, but cheap to update. Effect finds a
 * metric's state by the identity of the label array it is updated with; `taggedWithLabels` joins
 * the labels into a new array on every update, so every update built and looked up a metric key.
 * Here an update without labels of its own passes the same array every time.
 */
export const tagged = <M extends Counter | Histogram | Gauge>(metric: M, tags: Readonly<Record<string, string>>): M => {
  const labels = Object.entries(tags).map(([key, value]) => MetricLabel.make(key, value))
  const withExtra = (extra: ReadonlyArray<MetricLabel.MetricLabel>) =>
    extra.length === 0 ? labels : Arr.union(labels, extra)
  const any = metric as Metric.Metric<any, number, any>
  return Metric.make(
    any.keyType,
    (input: number, extra) => any.unsafeUpdate(input, withExtra(extra)),
    (extra) => any.unsafeValue(withExtra(extra)),
    (input: number, extra) => any.unsafeModify(input, withExtra(extra))
  ) as M
}

/** Counts `value` in `metric`, under the scope's tags too. */
export const update = (metric: Counter | Histogram | Gauge, value: number, scope: MetricScope): void =>
  metric.unsafeUpdate(value, scope)

/** What `counter` has counted, under its own tags. */
export const counted = (counter: Counter): number => counter.unsafeValue([]).count

/** What `histogram` holds, under its own tags. */
export const histogramState = (histogram: Histogram): HistogramState => histogram.unsafeValue([])

/** Bucket boundaries from `start`, each `factor` times the one before, `count` in all (the last infinite). */
export const exponentialBoundaries = (options: {
  readonly start: number
  readonly factor: number
  readonly count: number
}): ReadonlyArray<number> => MetricBoundaries.exponential(options).values

/** A log line's level. */
export type LogLevel = LogLevels.LogLevel

/** The levels the engine logs at. */
export const logLevels: { readonly debug: LogLevel; readonly info: LogLevel; readonly warning: LogLevel } = {
  debug: LogLevels.Debug,
  info: LogLevels.Info,
  warning: LogLevels.Warning
}

/** The least level `fiber` writes. */
export const minimumLogLevelOf = (fiber: FiberView): LogLevel => fiber.getFiberRef(FiberRef.currentMinimumLogLevel)

/** Whether a line at `level` is written where `minimum` is the least level written. */
export const writesAt = (level: LogLevel, minimum: LogLevel): boolean => !LogLevels.lessThan(level, minimum)

/** Logs `message` at `level`. */
export const logAt = (level: LogLevel, message: string): Effect.Effect<void> => Effect.logWithLevel(level, message)

/** Effect's built-in tracer: its spans go nowhere, so none are made under it. */
const nativeTracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)

/** The fiber's tracing, or `undefined` when its spans would be seen by nobody. */
export const spanTracingOf = (fiber: FiberView, clock: Clock.Clock): SpanTracing | undefined => {
  if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return undefined
  const tracer = Context.get(fiber.currentDefaultServices, Tracer.Tracer)
  if (tracer === nativeTracer) return undefined
  return { tracer, clock, timing: fiber.getFiberRef(FiberRef.currentTracerTimingEnabled) }
}

/** The span in context, skipping those that do not propagate, as `Effect.withSpan` finds its parent. */
const parentOf = (context: Context.Context<never>): Option.Option<Tracer.AnySpan> => {
  let span = Context.getOption(context, Tracer.ParentSpan)
  while (span._tag === "Some" && Context.get(span.value.context, Tracer.DisablePropagation)) {
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
  const links = parent === undefined ? fiber.getFiberRef(FiberRef.currentTracerSpanLinks) : Chunk.empty()
  const span = tracing.tracer.span(
    name,
    parent === undefined ? parentOf(fiber.currentContext) : Option.some(parent),
    Context.empty(),
    Chunk.isEmpty(links) ? [] : Chunk.toReadonlyArray(links),
    startTime,
    kind,
    undefined
  )
  const annotations = fiber.getFiberRef(FiberRef.currentTracerSpanAnnotations)
  if (HashMap.size(annotations) > 0) HashMap.forEach(annotations, (value, key) => span.attribute(key, value))
  return span
}

/** A scope of its own under `outer`, closed (its finalizers run in order) when it is closed or `outer` is. */
export const forkScope = (outer: Scope.Scope): Effect.Effect<Scope.CloseableScope> =>
  Scope.fork(outer, ExecutionStrategy.sequential)

/** Runs `self` with `scope` as its scope. */
export const inScope =
  (scope: Scope.Scope) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Scope.Scope>> =>
    Scope.extend(self, scope)

/** The stream an effect makes, in a scope that closes when the stream ends. */
export const unwrapScopedStream = <A, E2, R2, E, R>(
  effect: Effect.Effect<Stream.Stream<A, E2, R2>, E, R>
): Stream.Stream<A, E | E2, R2 | Exclude<R, Scope.Scope>> => Stream.unwrapScoped(effect)

/**
 * A schedule that starts in `initial` and whose `step` gives its next state and delay: what each
 * line's `Schedule` module makes in its own terms. Its output is the delay.
 */
export const scheduleOf = <S, In>(
  initial: S,
  step: (now: number, input: In, state: S) => Effect.Effect<readonly [S, StepDelay]>
): Schedule.Schedule<Duration.Duration, In> =>
  Schedule.makeWithState(initial, (now, input: In, state: S) =>
    Effect.map(step(now, input, state), ([next, delay]) =>
      [
        next,
        Duration.millis(delay ?? 0),
        delay === undefined
          ? ScheduleDecision.done
          : ScheduleDecision.continueWith(ScheduleInterval.after(now + delay))
      ] as const))

/** Steps `schedule` by hand from its start. */
export const stepperOf = <Out, In>(schedule: Schedule.Schedule<Out, In>): Stepper<Out, In> => {
  let state: unknown = schedule.initial
  return {
    step: (now, input) =>
      Effect.map(schedule.step(now, input, state), ([next, output, decision]): Step<Out> => {
        state = next
        return {
          output,
          delay: ScheduleDecision.isDone(decision)
            ? undefined
            : Math.max(0, ScheduleIntervals.start(decision.intervals) - now)
        }
      })
  }
}

/**
 * Success or failure as a value: Effect 3's `Either` (`Right` holds the value, `Left` the failure).
 * The engine uses these helpers; on Effect 4 the same names work on `Result`.
 */
export const Either = {
  right: <A>(value: A): Eithers.Either<A, never> => Eithers.right(value),
  left: <E>(failure: E): Eithers.Either<never, E> => Eithers.left(failure),
  isLeft: <A, E>(either: Eithers.Either<A, E>): either is Eithers.Left<E, A> => Eithers.isLeft(either),
  isRight: <A, E>(either: Eithers.Either<A, E>): either is Eithers.Right<E, A> => Eithers.isRight(either),
  /** The failure of an `Either` known to hold one. */
  leftOf: <A, E>(either: Eithers.Left<E, A>): E => either.left,
  /** The value of an `Either` known to hold one. */
  rightOf: <A, E>(either: Eithers.Right<E, A>): A => either.right,
  map: <A, E, B>(either: Eithers.Either<A, E>, f: (value: A) => B): Eithers.Either<B, E> => Eithers.map(either, f),
  mapLeft: <A, E, E2>(either: Eithers.Either<A, E>, f: (failure: E) => E2): Eithers.Either<A, E2> =>
    Eithers.mapLeft(either, f),
  match: <A, E, B, C>(
    either: Eithers.Either<A, E>,
    cases: { readonly onLeft: (failure: E) => B; readonly onRight: (value: A) => C }
  ): B | C => Eithers.match(either, cases),
  /** The value, or a throw of what `onLeft` makes of the failure. */
  getOrThrow: <A, E>(either: Eithers.Either<A, E>): A => Eithers.getOrThrow(either),
  getOrThrowWith: <A, E>(either: Eithers.Either<A, E>, onLeft: (failure: E) => unknown): A =>
    Eithers.getOrThrowWith(either, onLeft),
  /** The `Either` as an effect that succeeds or fails with it. */
  toEffect: <A, E>(either: Eithers.Either<A, E>): Effect.Effect<A, E> => either
}

export declare namespace Either {
  /** Success (`A`) or failure (`E`): Effect 3's `Either`. */
  export type Either<A, E = never> = Eithers.Either<A, E>
}

/**
 * Reads the variables `names` under `prefix` (`{prefix}_{name}`), an unset one as `undefined`, and
 * decides from their values: a failure is the text of the `ConfigError` the config fails with.
 */
export const configFromVariables = <A>(
  prefix: string,
  names: ReadonlyArray<string>,
  decide: (values: ReadonlyArray<string | undefined>) => Eithers.Either<A, string>
): Config.Config<A> =>
  Config.mapOrFail(
    Config.all(names.map((name) => Config.map(Config.option(Config.string(name)), Option.getOrUndefined))).pipe(
      Config.nested(prefix)
    ),
    (values) => Eithers.mapLeft(decide(values), (message) => ConfigErrors.InvalidData([], message))
  )

/** A duration from anything Effect reads as one (a `Duration`, milliseconds, `"2 seconds"`), or `undefined`. */
export const durationFrom = (input: unknown): Duration.Duration | undefined =>
  Option.getOrUndefined(Duration.decodeUnknown(input))

/**
 * A value that is also an effect (yielding it runs `commit`), as Effect's own `Effectable.Class`
 * makes one on each line: Effect 3 calls `commit`.
 */
export abstract class EffectValue<A, E> extends Effectable.Class<A, E> {
  abstract override commit(): Effect.Effect<A, E>
}

/**
 * A service key as a class: `class Db extends Service<Db, Shape>()("app/Db") {}`, a
 * `Context.Tag` on Effect 3.
 */
export const Service = <Self, Shape>() => <const Id extends string>(id: Id): Context.TagClass<Self, Id, Shape> =>
  Context.Tag(id)<Self, Shape>()

/** The cause's first defect, if it has one. */
export const defectOf = (cause: Cause.Cause<unknown>): Option.Option<unknown> => Cause.dieOption(cause)

/**
 * `self`, then a point where a pending interruption lands. Effect 3 checks for one as a waiting
 * fiber resumes, so nothing is added.
 */
export const thenInterruptible = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => self

export type { SpanTracing, Step, StepDelay, Stepper } from "./shared.js"

/** Why a `Config` could not be read. */
export type ConfigError = ConfigErrors.ConfigError

/** A layer of the service `effect` makes, whose resources live as long as the layer: `Layer.scoped`. */
export const layerScoped: <I, S, E, R>(
  tag: Context.Tag<I, S>,
  effect: Effect.Effect<NoInfer<S>, E, R>
) => Layer.Layer<I, E, Exclude<R, Scope.Scope>> = Layer.scoped

/** A layer of no service that runs `effect` when built, its resources living as long as the layer. */
export const layerScopedDiscard = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Layer.Layer<never, E, Exclude<R, Scope.Scope>> => Layer.scopedDiscard(effect)

/** `self`, or the stream `f` makes of its failure. */
export const catchAllStream = <A, E, R, A2, E2, R2>(
  self: Stream.Stream<A, E, R>,
  f: (failure: E) => Stream.Stream<A2, E2, R2>
): Stream.Stream<A | A2, E2, R | R2> => Stream.catchAll(self, f)

/**
 * Runs effects from promise code with the services of the fiber that made the runner (an
 * abort of `signal` interrupts the effect).
 */
export const promiseExitRunner = <R = never>(): Effect.Effect<ReturnType<typeof Runtime.runPromiseExit<R>>, never, R> =>
  Effect.map(Effect.runtime<R>(), (runtime) => Runtime.runPromiseExit(runtime))

/**
 * A clock whose time is `source.millis()` and whose sleeps are `source.sleep`'s, as the line's
 * `Clock` service: a simulated clock (the storm's), which jumps from event to event.
 */
export const makeClock = (source: {
  readonly millis: () => number
  readonly sleep: (millis: number) => Effect.Effect<void>
}): Clock.Clock => {
  const nanos = () => BigInt(Math.round(source.millis() * 1_000_000))
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: source.millis,
    currentTimeMillis: Effect.sync(source.millis),
    unsafeCurrentTimeNanos: nanos,
    currentTimeNanos: Effect.sync(nanos),
    sleep: (duration) => source.sleep(Duration.toMillis(duration))
  }
}

/** Runs `self` with `clock` as its clock. */
export const withClock = <A, E, R>(self: Effect.Effect<A, E, R>, clock: Clock.Clock): Effect.Effect<A, E, R> =>
  Effect.withClock(self, clock)

/**
 * Runs `self` drawing its random numbers from `next` (doubles in [0, 1)): a generator of the
 * caller's own, the same on both lines, where each line's seeded `Random` draws differently. Each
 * draw is made from `next` as Effect 3's `Random.make` makes it from its generator.
 */
export const withRandomFrom = <A, E, R>(self: Effect.Effect<A, E, R>, next: () => number): Effect.Effect<A, E, R> => {
  const below = (max: number) => Math.round(next() * Number.MAX_SAFE_INTEGER) % max
  const random: Random.Random = {
    [Random.RandomTypeId]: Random.RandomTypeId,
    next: Effect.sync(next),
    nextBoolean: Effect.sync(() => next() > 0.5),
    nextInt: Effect.sync(() => below(Number.MAX_SAFE_INTEGER)),
    nextRange: (min, max) => Effect.sync(() => (max - min) * next() + min),
    nextIntBetween: (min, max) => Effect.sync(() => below(max - min) + min),
    shuffle: (elements) =>
      Effect.sync(() => {
        const buffer = Array.from(elements)
        for (let n = buffer.length; n >= 2; n--) {
          const other = below(n)
          ;[buffer[n - 1], buffer[other]] = [buffer[other]!, buffer[n - 1]!]
        }
        return Chunk.fromIterable(buffer)
      })
  }
  return Effect.withRandom(self, random)
}

/** Runs `self` writing no log lines: their cost is saved too, not only their output. */
export const withoutLogs = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Logger.withMinimumLogLevel(self, LogLevels.None)

/**
 * A scheduler for a program whose caller runs its fibers by hand (the storm's simulated time):
 * every task a fiber makes goes to `schedule`, and the caller runs them; `flush` runs those waiting,
 * where Effect asks for it. A fiber gives the others a turn after `opsBeforeYield` operations.
 */
export const schedulerOf = (options: {
  readonly schedule: (task: () => void) => void
  readonly flush: () => void
  readonly opsBeforeYield: number
}): Scheduler.Scheduler => ({
  scheduleTask: (task) => options.schedule(task),
  shouldYield: (fiber) => fiber.currentOpCount > options.opsBeforeYield ? 0 : false
})

/** What `gauge` reads now, under its own tags. */
export const gaugeValue = (gauge: Gauge): number => gauge.unsafeValue([]).value

/** The fiber's number, unique among the process's fibers: what a fiber holds is kept under it. */
export const fiberIdOf = (fiber: FiberView): number => fiber.id().id

/**
 * `self`'s outcome dropped, a failure of any kind (a defect too) logged at debug level: for a
 * clean-up whose failure changes nothing for the caller. `Effect.ignoreLogged` on Effect 3.
 */
export const ignoreLogged = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<void, never, R> =>
  Effect.ignoreLogged(self)
