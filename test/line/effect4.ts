/**
 * The tests' side of the seam, Effect 4's: the names `effect3.ts` offers, in Effect 4's terms
 * (docs/effect-lines.md).
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as References from "effect/References"
import type * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

import { prng as seededDoubles } from "@resilient-ai/testing/internal"

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

/** Removes the default logger: nothing is printed. */
export const withoutDefaultLogger: Layer.Layer<never> = Logger.layer([])

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
