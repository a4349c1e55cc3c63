/**
 * The examples' side of the seam, Effect 3's: the few things the examples do that Effect 3 and
 * Effect 4 spell differently. `effect4.ts` offers the same names; `#examples-line`
 * (examples/package.json) picks this one unless the `@resilient-ai/effect4` condition is set
 * (docs/effect-lines.md). Copying an example into an Effect 3 program, write what each comment shows.
 */
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Metric from "effect/Metric"
import type { LogLine } from "./logLine.js"

export type { LogLine }

/** Effect 3: `Logger.withMinimumLogLevel(LogLevel.Error)` (or `LogLevel.Warning`, `LogLevel.Info`). */
export const withMinimumLogLevel =
  (level: "Error" | "Warning" | "Info") => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Logger.withMinimumLogLevel(self, LogLevel.fromLiteral(level))

/** Effect 3: `Logger.replace(Logger.defaultLogger, Logger.make(({ logLevel, message, annotations }) => …))`. */
export const printLogLines = (print: (line: LogLine) => void): Layer.Layer<never> =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ annotations, logLevel, message }) =>
      print({ level: logLevel.label, message, annotations: [...annotations] })
    )
  )

/** Effect 3: `Metric.value(counter.pipe(Metric.tagged("operation", "budget")))`, then its `count`. */
export const counterValue = (
  counter: Metric.Metric.Counter<number>,
  tags: Readonly<Record<string, string>>
): Effect.Effect<number> =>
  Effect.map(
    Metric.value(Object.entries(tags).reduce((tagged, [key, value]) => Metric.tagged(tagged, key, value), counter)),
    (state) => state.count
  )
