/**
 * Whether the command's output may keep its colour, and how to take it out where it may not: the
 * command-line library renders help (on Effect 3, its errors too) in colour wherever it goes. The
 * seam's `withoutColour` takes it out of what the console prints.
 */

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
