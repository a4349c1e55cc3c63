/**
 * The examples' side of the seam, Effect 4's: the few things the examples do that Effect 3 and
 * Effect 4 spell differently. `effect3.ts` offers the same names; `#examples-line`
 * (examples/package.json) picks this one under the `@resilient-ai/effect4` condition
 * (docs/effect-lines.md). Copying an example into an Effect 4 program, write what each comment shows.
 */
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as References from "effect/References"
import type { LogLine } from "./logLine.js"

export type { LogLine }

/** Effect 4: `Effect.provideService(References.MinimumLogLevel, "Error")` (or `"Warn"`, `"Info"`). */
export const withMinimumLogLevel =
  (level: "Error" | "Warning" | "Info") => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.provideService(self, References.MinimumLogLevel, level === "Warning" ? "Warn" : level)

/** Effect 4: `Logger.layer([Logger.make(({ fiber, logLevel, message }) => …)])`, annotations from `fiber`. */
export const printLogLines = (print: (line: LogLine) => void): Layer.Layer<never> =>
  Logger.layer([
    Logger.make(({ fiber, logLevel, message }) =>
      print({
        level: logLevel.toUpperCase(),
        message,
        annotations: Object.entries(fiber.getRef(References.CurrentLogAnnotations))
      })
    )
  ])

/** Effect 4: `Metric.value(Metric.withAttributes(counter, { operation: "budget" }))`, then its `count`. */
export const counterValue = (
  counter: Metric.Counter<number>,
  tags: Readonly<Record<string, string>>
): Effect.Effect<number> => Effect.map(Metric.value(Metric.withAttributes(counter, tags)), (state) => state.count)
