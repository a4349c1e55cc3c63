/**
 * A progress bar on stderr, drawn only when stderr is a terminal.
 *
 * Stdout carries the report (and with `--json`, nothing but it), so progress goes to stderr; when
 * stderr is piped or redirected nothing is drawn at all, so logs and tests stay clean. The bar is
 * redrawn at most ten times a second however fast calls end, and erased when its scope closes.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"

/** Tells the bar how far the work is. Cheap: it only stores the numbers. */
export type Update = (done: number, total: number) => void

const width = 30

const render = (label: string, done: number, total: number): string => {
  const filled = total === 0 ? width : Math.round((width * Math.min(done, total)) / total)
  return `\r\x1b[2K${label} [${"#".repeat(filled)}${"-".repeat(width - filled)}] ${done}/${total}`
}

/**
 * A progress bar for the scope's lifetime, labelled `label`, out of `total` until an update says
 * otherwise. On a stream that is not a TTY it is a no-op. Defaults to `process.stderr`.
 */
export const make = (
  label: string,
  total: number,
  stream: NodeJS.WriteStream = process.stderr
): Effect.Effect<Update, never, Scope.Scope> => {
  if (stream.isTTY !== true) return Effect.succeed(() => {})
  let done = 0
  let drawn = -1
  const draw = Effect.sync(() => {
    if (done === drawn) return
    drawn = done
    stream.write(render(label, done, total))
  })
  return Effect.gen(function*() {
    yield* Effect.addFinalizer(() => Effect.sync(() => stream.write("\r\x1b[2K")))
    yield* Effect.forkScoped(Effect.repeat(draw, Schedule.spaced(Duration.millis(100))))
    return (now: number, of: number) => {
      done = now
      total = of
    }
  })
}
