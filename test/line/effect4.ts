/**
 * The tests' side of the seam, Effect 4's: the names `effect3.ts` offers, in Effect 4's terms
 * (docs/effect-lines.md).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Console from "effect/Console"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import type * as HttpClient from "effect/http/HttpClient"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as References from "effect/References"
import type * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

import { prng as seededDoubles } from "@resilient-ai/testing/internal"
import { format } from "node:util"

export * as TestClock from "effect/testing/TestClock"

/** Runs `self` with a random generator seeded with `seed`: the same draws every run, on this line. */
export const seeded = (seed: number) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(self, Random.Random, randomOf(seededDoubles(seed)))

/** Effect 4's `Random` service, drawing from `next` (doubles in [0, 1)). */
const randomOf = (next: () => number): Random.Random => ({
  nextDoubleUnsafe: next,
  nextIntUnsafe: () => Math.floor(next() * Number.MAX_SAFE_INTEGER)
})

/** The fiber's exit, if it has ended. */
export const pollFiber = <A, E>(fiber: Fiber.Fiber<A, E>): Effect.Effect<Option.Option<Exit.Exit<A, E>>> =>
  Effect.sync(() => Option.fromUndefinedOr(fiber.pollUnsafe()))

/**
 * Whether the fiber is waiting rather than running: on Effect 4 a fiber shows no status, so this
 * yields to it first and answers for a fiber that has not ended.
 */
export const isSuspended = (fiber: Fiber.Fiber<unknown, unknown>): Effect.Effect<boolean> =>
  Effect.andThen(Effect.yieldNow, Effect.sync(() => fiber.pollUnsafe() === undefined))

/** A function that runs an effect to a promise with the current fiber's services (its `TestClock`). */
export const promiseRunner: Effect.Effect<<A, E>(effect: Effect.Effect<A, E>) => Promise<A>> = Effect.map(
  Effect.context<never>(),
  (context) => <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromiseWith(context)(effect)
)

/** A log line as a test reads it. */
export interface LogLine {
  readonly level: string
  readonly message: string
  readonly annotations: Record<string, unknown>
}

const textOf = (message: unknown): string => Array.isArray(message) ? message.join(" ") : String(message)

/** Effect 3's names for the levels, which the tests read. */
const levelNames: Record<string, string> = {
  Warn: "WARN",
  Info: "INFO",
  Debug: "DEBUG",
  Error: "ERROR",
  Fatal: "FATAL",
  Trace: "TRACE"
}

/** A logger that keeps every line, with its annotations; its layer adds it to the loggers in place. */
export const captureLogs: Effect.Effect<{
  readonly layer: Layer.Layer<never>
  readonly lines: Effect.Effect<ReadonlyArray<LogLine>>
}> = Effect.sync(() => {
  const lines: Array<LogLine> = []
  const logger = Logger.make<unknown, void>(({ fiber, logLevel, message }) => {
    lines.push({
      level: levelNames[logLevel] ?? logLevel.toUpperCase(),
      message: textOf(message),
      annotations: { ...fiber.getRef(References.CurrentLogAnnotations) }
    })
  })
  return { layer: Logger.layer([logger], { mergeWithExisting: true }), lines: Effect.sync(() => [...lines]) }
})

/** Removes the default logger (the others, a capture among them, stay): nothing is printed. */
// Fresh: Effect 4 builds a layer once per memo map, and a second provide of it would hand back the
// loggers the first one saw.
export const withoutDefaultLogger: Layer.Layer<never> = Layer.fresh(Layer.effectContext(
  Effect.map(
    Effect.service(Logger.CurrentLoggers),
    (loggers) =>
      Context.make(Logger.CurrentLoggers, new Set([...loggers].filter((logger) => logger !== Logger.defaultLogger)))
  )
))

/** Replaces the default logger with one that prints each line in logfmt into `printed`. */
export const printLogfmtInto = (printed: Array<string>): Layer.Layer<never> =>
  Logger.layer([Logger.map(Logger.formatLogFmt, (line) => void printed.push(line))])

/** Runs `self` writing log lines at `level` and above only. */
export const withMinimumLogLevel =
  (level: "None" | "Debug" | "Info" | "Warning") => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.provideService(self, References.MinimumLogLevel, level === "Warning" ? "Warn" : level)

/** A defect with `message`. */
export const dieMessage = (message: string): Effect.Effect<never> => Effect.die(new Error(message))

/** Whether `exit` is an interruption only. */
export const isInterrupted = <A, E>(exit: Exit.Exit<A, E>): boolean =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)

/** The effect's outcome as a value: its success or its typed failure, in a `Result`. */
export const either = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Result.Result<A, E>, never, R> =>
  Effect.result(self)

/**
 * A logger that prints nothing and hands `scan` everything a log line could carry: the message,
 * the annotations, the spans and the cause, as the logfmt and JSON loggers would write them.
 */
export const logScanner = (scan: (where: string, text: string) => void): Logger.Logger<unknown, void> =>
  Logger.make((options) => {
    scan("log line (logfmt)", Logger.formatLogFmt.log(options))
    scan("log line (json)", Logger.formatJson.log(options))
    if (options.cause.reasons.length > 0) scan("log cause", Cause.pretty(options.cause))
    for (const [key, value] of Object.entries(options.fiber.getRef(References.CurrentLogAnnotations))) {
      scan(`log annotation ${key}`, typeof value === "string" ? value : JSON.stringify(value) ?? String(value))
    }
    scan("log spans", options.fiber.getRef(References.CurrentLogSpans).map(([label]) => label).join(" "))
  })

/**
 * Gives `logger` to every fiber from now on, beside the default one: the loggers' reference
 * default, which Effect keeps once made, is the one place every fiber reads. For tests only.
 */
export const addToEveryFiber = (logger: Logger.Logger<unknown, void>): void => {
  const current = Context.get(Context.empty(), Logger.CurrentLoggers)
  ;(Logger.CurrentLoggers as unknown as Record<string, unknown>)["~effect/Context/defaultValue"] = new Set([
    ...current,
    logger
  ])
}

/** The layer an effect makes. */
export const unwrapLayer = <A, E1, R1, E, R>(
  effect: Effect.Effect<Layer.Layer<A, E1, R1>, E, R>
): Layer.Layer<A, E | E1, R1 | Exclude<R, Scope.Scope>> => Layer.unwrap(effect)

/** The stream's elements and its typed failure as values, in `Result`s. */
export const eitherStream = <A, E, R>(self: Stream.Stream<A, E, R>): Stream.Stream<Result.Result<A, E>, never, R> =>
  Stream.result(self)

/** Runs `self` drawing `values` in turn, again and again, as its random numbers. */
export const drawing =
  (values: ReadonlyArray<number>) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
    let index = 0
    const next = () => values[index++ % values.length]!
    return Effect.provideService(self, Random.Random, randomOf(next))
  }

/** Lets the other fibers run before this one goes on. */
export const yieldNow: Effect.Effect<void> = Effect.yieldNow

/** Every element of the stream, in order, as an array. */
export const collect = <A, E, R>(self: Stream.Stream<A, E, R>): Effect.Effect<ReadonlyArray<A>, E, R> =>
  Stream.runCollect(self)

/** A config provider that reads `entries` as the environment's variables (`MISTRAL_API_KEY` is `MISTRAL.API_KEY`). */
export const environment = (entries: Readonly<Record<string, string>>): ConfigProvider.ConfigProvider =>
  ConfigProvider.fromEnvRecord({ ...entries })

/** Runs `self` reading its config from `entries` as from the environment. */
export const withEnvironment =
  (entries: Readonly<Record<string, string>>) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.provideService(self, ConfigProvider.ConfigProvider, environment(entries))

/** A layer under which config is read from `entries` as from the environment. */
export const environmentLayer = (entries: Readonly<Record<string, string>>): Layer.Layer<never> =>
  ConfigProvider.layer(environment(entries))

/** The wake times of the sleeps pending on each recording clock. */
const pendingWakes = new WeakMap<Clock.Clock, Array<number>>()

/**
 * Runs `self` with a clock whose pending sleeps `sleeps` can read: Effect 4's `TestClock` keeps
 * them to itself, so this clock wraps it, notes each sleep's wake time, and passes the rest on.
 */
export const recordingSleeps = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.service(Clock.Clock), (inner) => {
    const wakes: Array<number> = []
    const recording: Clock.Clock = {
      ...inner,
      sleep: (duration) =>
        Effect.suspend(() => {
          const wake = inner.currentTimeMillisUnsafe() + Duration.toMillis(duration)
          wakes.push(wake)
          return Effect.ensuring(inner.sleep(duration), Effect.sync(() => wakes.splice(wakes.indexOf(wake), 1)))
        })
    }
    pendingWakes.set(recording, wakes)
    return Effect.provideService(self, Clock.Clock, recording)
  })

/** When each sleep pending on the test clock wakes, in milliseconds of the clock's time (under `recordingSleeps`). */
export const sleeps: Effect.Effect<ReadonlyArray<number>> = Effect.map(
  Effect.service(Clock.Clock),
  (clock) => [...(pendingWakes.get(clock) ?? [])]
)

/** Watches the fibers of the effects run under it (`tracked`): which of them are still running. */
export interface FiberTracker {
  /** The names of the watched fibers still running. */
  readonly live: Effect.Effect<ReadonlyArray<string>>
  /** Runs `self` watched: its fiber and every fiber it forks or starts, an attempt's among them. */
  readonly tracked: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** The set of running fibers a fiber's context puts it in, when it is watched. */
const WatchedBy = Context.Reference<Set<Fiber.Fiber<unknown, unknown>> | undefined>(
  "@resilient-ai/test/WatchedBy",
  { defaultValue: () => undefined }
)

const watching = new WeakSet<Fiber.Fiber<unknown, unknown>>()
let hooked = false

/**
 * Effect 4 has no supervisors: a fiber is seen as it first runs (its `evaluate`, which every fiber's
 * start goes through, forked or started on its own), and joins the set its context names. Every
 * fiber inherits its context (an attempt's fiber is started with its caller's), so every fiber of a
 * watched effect is seen. For tests only: it patches the runtime's fiber class once.
 */
const hookFiberStarts = (): void => {
  if (hooked) return
  hooked = true
  const prototype = Object.getPrototypeOf(Effect.runFork(Effect.void)) as {
    evaluate: (this: Fiber.Fiber<unknown, unknown>, effect: unknown) => void
  }
  const evaluate = prototype.evaluate
  prototype.evaluate = function(effect) {
    const set = watching.has(this) ? undefined : this.getRef(WatchedBy)
    if (set !== undefined && this.pollUnsafe() === undefined) {
      watching.add(this)
      set.add(this)
      this.addObserver(() => set.delete(this))
    }
    return evaluate.call(this, effect)
  }
}

/** A tracker of fibers (see `hookFiberStarts`). */
export const makeFiberTracker: Effect.Effect<FiberTracker> = Effect.sync(() => {
  hookFiberStarts()
  const running = new Set<Fiber.Fiber<unknown, unknown>>()
  return {
    live: Effect.sync(() => [...running].map((fiber) => `#${fiber.id}`)),
    tracked: (self) => Effect.provideService(self, WatchedBy, running)
  }
})

/** The undici HTTP client on a dispatcher of its own whose connect times out after `millis`. */
export const undiciWithConnectTimeout = (millis: number): Layer.Layer<HttpClient.HttpClient> =>
  NodeHttpClient.layerUndiciOptions({ connect: { timeout: millis } })

/** The Effect line these tests run on: which bundle a test's process or thread runs (`bundled` in test/built.ts). */
export const line = "effect4" as const

/** Replaces the default logger with `logger` (the only one that writes, then). */
export const replaceDefaultLogger = (logger: Logger.Logger<unknown, void>): Layer.Layer<never> => Logger.layer([logger])

/** A logger that hands each line, in logfmt, to `write`. */
export const logfmtTo = (write: (line: string) => void): Logger.Logger<unknown, void> =>
  Logger.map(Logger.formatLogFmt, write)

/** The name the line's HTTP client gives the span of a request by `method`: the method alone on Effect 4. */
export const httpClientSpanName = (method: string): string => method

/** The attribute the line's `@effect/opentelemetry` sets on a span that ended by interruption. */
export const interruptedSpanAttribute = "effect.fiber.interrupted"

/** A layer that adds `logger` beside the loggers in place. */
export const addLogger = (logger: Logger.Logger<unknown, void>): Layer.Layer<never> =>
  Logger.layer([logger], { mergeWithExisting: true })

/** Whether `u` is a `ConfigError`. */
export const isConfigError = (u: unknown): boolean => u instanceof Config.ConfigError

/** Whether an environment variable set to "" reads as unset: on Effect 4, whose environment provider reads it so. */
export const emptyVariableIsUnset = true

/** Runs `self` with what it prints on the console (`log`, `error`) added to `stdout` and `stderr`, as Node formats it. */
export const printingInto =
  (stdout: Array<string>, stderr: Array<string>) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Console.consoleWith((console) =>
      Effect.provideService(
        self,
        Console.Console,
        Object.assign(Object.create(console), {
          log: (...line: Array<unknown>) => void stdout.push(format(...line)),
          error: (...line: Array<unknown>) => void stderr.push(format(...line))
        })
      )
    )
