/**
 * Whether the command's output may keep its colour, and how to take it out where it may not:
 * @effect/cli renders help and its errors in colour wherever they go.
 */
import type * as Console from "effect/Console"

/** What `colours` needs of a stream: whether it is a terminal, and (on one) how many colours it has. */
export interface ColourStream {
  readonly isTTY?: boolean | undefined
  readonly hasColors?: ((env?: object) => boolean) | undefined
}

/**
 * Whether text written to `stream` may keep its colour: only on a terminal that has colours, and
 * not when `NO_COLOR` is set to anything but the empty string (https://no-color.org).
 */
export const colours = (stream: ColourStream, env: Readonly<Record<string, string | undefined>> = process.env) =>
  stream.isTTY === true && (env["NO_COLOR"] ?? "") === "" && (stream.hasColors?.(env) ?? true)

// Control Sequence Introducer sequences: colours and styles (SGR), and cursor moves.
const escapes = /\u001b\[[0-?]*[ -/]*[@-~]/g

/** `text` without terminal escape sequences. */
export const withoutEscapes = (text: string): string => text.replace(escapes, "")

/**
 * `console` with escape sequences taken out of what `log` (stdout) and `error` (stderr) print
 * where colour is not wanted.
 */
export const uncoloured = (console: Console.Console, stdout: boolean, stderr: boolean): Console.Console => {
  const plain = (args: ReadonlyArray<unknown>) => args.map((arg) => typeof arg === "string" ? withoutEscapes(arg) : arg)
  return {
    ...console,
    log: stdout ? console.log : (...args) => console.log(...plain(args)),
    error: stderr ? console.error : (...args) => console.error(...plain(args))
  }
}
