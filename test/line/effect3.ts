/**
 * The tests' side of the seam, Effect 3's: what the tests need from Effect that the two lines
 * spell differently and the packages do not (the packages' side is `EffectLine` in
 * `@resilient-ai/policy/internal`). `effect4.ts` offers the same names; each line's vitest config
 * resolves `#test-line` to its own (docs/effect-lines.md).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Agent } from "@effect/platform-node/Undici"
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as ConfigError from "effect/ConfigError"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberStatus from "effect/FiberStatus"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Inspectable from "effect/Inspectable"
import * as Layer from "effect/Layer"
import * as List from "effect/List"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Ref from "effect/Ref"
import * as Runtime from "effect/Runtime"
import * as Stream from "effect/Stream"
import * as Supervisor from "effect/Supervisor"
import * as TestClocks from "effect/TestClock"

import { prng as seededDoubles } from "@resilient-ai/testing/internal"
import { format } from "node:util"

export * as TestClock from "effect/TestClock"

/** Runs `self` with a random generator seeded with `seed`: the same draws every run, on this line. */
export const seeded = (seed: number) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withRandom(self, randomOf(seededDoubles(seed)))

/** Effect 3's `Random` service, drawing from `next` (doubles in [0, 1)). */
const randomOf = (next: () => number): Random.Random => ({
  [Random.RandomTypeId]: Random.RandomTypeId,
  next: Effect.sync(next),
  nextBoolean: Effect.sync(() => next() >= 0.5),
  nextInt: Effect.sync(() => Math.floor(next() * Number.MAX_SAFE_INTEGER)),
  nextRange: (min, max) => Effect.sync(() => min + (max - min) * next()),
  nextIntBetween: (min, max) => Effect.sync(() => min + Math.floor((max - min) * next())),
  shuffle: (elements) =>
    Effect.sync(() => {
      const shuffled = [...elements]
      for (let index = shuffled.length - 1; index > 0; index--) {
        const other = Math.floor(next() * (index + 1))
        ;[shuffled[index], shuffled[other]] = [shuffled[other]!, shuffled[index]!]
      }
      return Chunk.fromIterable(shuffled)
    })
})

/** The fiber's exit, if it has ended. */
export const pollFiber = <A, E>(fiber: Fiber.Fiber<A, E>): Effect.Effect<Option.Option<Exit.Exit<A, E>>> =>
  Fiber.poll(fiber)

/** Whether the fiber is waiting (suspended), not running or done. */
export const isSuspended = (fiber: Fiber.Fiber<unknown, unknown>): Effect.Effect<boolean> =>
  Effect.map(Fiber.status(fiber as Fiber.RuntimeFiber<unknown, unknown>), FiberStatus.isSuspended)

/** A function that runs an effect to a promise with the current fiber's services (its `TestClock`). */
export const promiseRunner: Effect.Effect<<A, E>(effect: Effect.Effect<A, E>) => Promise<A>> = Effect.map(
  Effect.runtime<never>(),
  (runtime) => <A, E>(effect: Effect.Effect<A, E>) => Runtime.runPromise(runtime)(effect)
)

/** A log line as a test reads it. */
export interface LogLine {
  readonly level: string
  readonly message: string
  readonly annotations: Record<string, unknown>
}

const textOf = (message: unknown): string =>
  List.isList(message) ? List.toArray(message).join(" ") : Array.isArray(message) ? message.join(" ") : String(message)

/** A logger that keeps every line, with its annotations; its layer adds it to the loggers in place. */
export const captureLogs: Effect.Effect<{
  readonly layer: Layer.Layer<never>
  readonly lines: Effect.Effect<ReadonlyArray<LogLine>>
}> = Effect.gen(function*() {
  const lines = yield* Ref.make<ReadonlyArray<LogLine>>([])
  const logger = Logger.make<unknown, void>(({ annotations, logLevel, message }) => {
    const line: LogLine = {
      level: logLevel.label,
      message: textOf(message),
      annotations: Object.fromEntries(HashMap.toEntries(annotations))
    }
    Ref.update(lines, (all) => [...all, line]).pipe(Effect.runSync)
  })
  return { layer: Logger.add(logger), lines: Ref.get(lines) }
})

/** Removes the default logger (the others, a capture among them, stay): nothing is printed. */
export const withoutDefaultLogger: Layer.Layer<never> = Logger.remove(Logger.defaultLogger)

/** Replaces the default logger with one that prints each line in logfmt into `printed`. */
export const printLogfmtInto = (printed: Array<string>): Layer.Layer<never> =>
  Logger.replace(Logger.defaultLogger, Logger.make((options) => printed.push(Logger.logfmtLogger.log(options))))

/** Runs `self` writing log lines at `level` and above only. */
export const withMinimumLogLevel =
  (level: "None" | "Debug" | "Info" | "Warning") => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Logger.withMinimumLogLevel(self, LogLevel.fromLiteral(level))

/** A defect with `message`. */
export const dieMessage = (message: string): Effect.Effect<never> => Effect.dieMessage(message)

/** Whether `exit` is an interruption only. */
export const isInterrupted = <A, E>(exit: Exit.Exit<A, E>): boolean =>
  Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)

/** The effect's outcome as a value: its success or its typed failure, in an `Either`. */
export const either = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Either.Either<A, E>, never, R> =>
  Effect.either(self)

/**
 * A logger that prints nothing and hands `scan` everything a log line could carry: the message,
 * the annotations, the spans and the cause, as the logfmt and JSON loggers would write them.
 */
export const logScanner = (scan: (where: string, text: string) => void): Logger.Logger<unknown, void> =>
  Logger.make((options) => {
    scan("log line (logfmt)", Logger.logfmtLogger.log(options))
    scan("log line (json)", Logger.jsonLogger.log(options))
    if (!Cause.isEmpty(options.cause)) scan("log cause", Cause.pretty(options.cause, { renderErrorCause: true }))
    for (const [key, value] of HashMap.toEntries(options.annotations)) {
      scan(`log annotation ${key}`, Inspectable.format(value))
    }
    scan("log spans", List.toArray(options.spans).map((span) => span.label).join(" "))
  })

/**
 * Gives `logger` to every fiber from now on, beside the default one: the initial value of the
 * loggers' FiberRef is the one place every fiber reads. For tests only.
 */
export const addToEveryFiber = (logger: Logger.Logger<unknown, void>): void => {
  const loggers = FiberRef.currentLoggers as unknown as { initial: HashSet.HashSet<unknown> }
  loggers.initial = HashSet.add(loggers.initial, logger)
}

/** The layer an effect makes. */
export const unwrapLayer = <A, E1, R1, E, R>(
  effect: Effect.Effect<Layer.Layer<A, E1, R1>, E, R>
): Layer.Layer<A, E | E1, R | R1> => Layer.unwrapEffect(effect)

/** The stream's elements and its typed failure as values, in `Either`s. */
export const eitherStream = <A, E, R>(self: Stream.Stream<A, E, R>): Stream.Stream<Either.Either<A, E>, never, R> =>
  Stream.either(self)

/** Runs `self` drawing `values` in turn, again and again, as its random numbers. */
export const drawing =
  (values: ReadonlyArray<number>) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withRandom(self, Random.fixed(values as [number, ...Array<number>]))

/** Lets the other fibers run before this one goes on. */
export const yieldNow: Effect.Effect<void> = Effect.yieldNow()

/** Every element of the stream, in order, as an array. */
export const collect = <A, E, R>(self: Stream.Stream<A, E, R>): Effect.Effect<ReadonlyArray<A>, E, R> =>
  Effect.map(Stream.runCollect(self), Chunk.toReadonlyArray)

/** A config provider that reads `entries` as the environment's variables (`MISTRAL_API_KEY` is `MISTRAL.API_KEY`). */
export const environment = (entries: Readonly<Record<string, string>>): ConfigProvider.ConfigProvider =>
  ConfigProvider.fromMap(new Map(Object.entries(entries)), { pathDelim: "_" })

/** Runs `self` reading its config from `entries` as from the environment. */
export const withEnvironment =
  (entries: Readonly<Record<string, string>>) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withConfigProvider(self, environment(entries))

/** A layer under which config is read from `entries` as from the environment. */
export const environmentLayer = (entries: Readonly<Record<string, string>>): Layer.Layer<never> =>
  Layer.setConfigProvider(environment(entries))

/** Runs `self` with a clock whose pending sleeps `sleeps` can read: Effect 3's `TestClock` shows them already. */
export const recordingSleeps = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => self

/** When each sleep pending on the test clock wakes, in milliseconds of the clock's time. */
export const sleeps: Effect.Effect<ReadonlyArray<number>> = Effect.map(TestClocks.sleeps(), Chunk.toReadonlyArray)

/** Watches the fibers of the effects run under it (`tracked`): which of them are still running. */
export interface FiberTracker {
  /** The names of the watched fibers still running. */
  readonly live: Effect.Effect<ReadonlyArray<string>>
  /** Runs `self` watched: its fiber and every fiber it forks or starts, an attempt's among them. */
  readonly tracked: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** A tracker of fibers: a `Supervisor.track` on Effect 3 (an attempt's fiber inherits the caller's supervisor). */
export const makeFiberTracker: Effect.Effect<FiberTracker> = Effect.map(Supervisor.track, (supervisor) => ({
  live: Effect.map(supervisor.value, (fibers) => fibers.map((fiber) => FiberId.threadName(fiber.id()))),
  tracked: (self) => Effect.supervised(self, supervisor)
}))

/** The undici HTTP client on a dispatcher of its own whose connect times out after `millis`. */
export const undiciWithConnectTimeout = (millis: number): Layer.Layer<HttpClient.HttpClient> =>
  NodeHttpClient.layerUndiciWithoutDispatcher.pipe(
    Layer.provide(
      Layer.scoped(
        NodeHttpClient.Dispatcher,
        Effect.acquireRelease(
          Effect.sync(() => new Agent({ connect: { timeout: millis } })),
          (agent) => Effect.promise(() => agent.destroy())
        )
      )
    )
  )

/** The Effect line these tests run on: which bundle a test's process or thread runs (`bundled` in test/built.ts). */
export const line = "effect3" as const

/** Replaces the default logger with `logger` (the only one that writes, then). */
export const replaceDefaultLogger = (logger: Logger.Logger<unknown, void>): Layer.Layer<never> =>
  Logger.replace(Logger.defaultLogger, logger)

/** A logger that hands each line, in logfmt, to `write`. */
export const logfmtTo = (write: (line: string) => void): Logger.Logger<unknown, void> =>
  Logger.map(Logger.logfmtLogger, write)

/** The name the line's HTTP client gives the span of a request by `method`. */
export const httpClientSpanName = (method: string): string => `http.client ${method}`

/** The attribute the line's `@effect/opentelemetry` sets on a span that ended by interruption. */
export const interruptedSpanAttribute = "status.interrupted"

/** A layer that adds `logger` beside the loggers in place. */
export const addLogger = (logger: Logger.Logger<unknown, void>): Layer.Layer<never> => Logger.add(logger)

/** Whether `u` is a `ConfigError`. */
export const isConfigError = (u: unknown): boolean => ConfigError.isConfigError(u)

/** Whether an environment variable set to "" reads as unset: not on Effect 3, where it is an empty value. */
export const emptyVariableIsUnset = false

/** Runs `self` with what it prints on the console (`log`, `error`) added to `stdout` and `stderr`, as Node formats it. */
export const printingInto =
  (stdout: Array<string>, stderr: Array<string>) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(Effect.console, (console) =>
      Effect.withConsole(self, {
        ...console,
        log: (...line) => Effect.sync(() => void stdout.push(format(...line))),
        error: (...line) => Effect.sync(() => void stderr.push(format(...line))),
        unsafe: Object.assign(Object.create(console.unsafe), {
          log: (...line: Array<unknown>) => void stdout.push(format(...line)),
          error: (...line: Array<unknown>) => void stderr.push(format(...line))
        })
      }))
