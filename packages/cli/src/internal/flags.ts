/**
 * The command's flags and subcommands, described as data, so that they are written once for both
 * Effect lines: `@effect/cli` (Effect 3) and `effect/cli` (Effect 4) spell flags differently, and
 * the seam (`#cli-line`, `commandLine`) turns these descriptions into the line's own command.
 *
 * Every bad value is refused with one sentence that names the flag and says what it accepts:
 * `--requests must be a whole number from 1 to 10,000,000, got 'abc'`. The libraries' own
 * primitives refuse without naming the flag ("'abc' is not a integer", "Expected one of the
 * following cases: …"), each in its own words, so every flag that takes a value reads it as text
 * and checks it here. Each check is a `Read`, the value or the sentence that refuses it, whether
 * the rule is the flag's own, the target's (`--base-url`), or that of `--log-level`, which the
 * command reads before the library does.
 */
import { Either } from "@resilient-ai/policy/internal"
import type * as Effect from "effect/Effect"
import { range, refusal } from "./wording.js"

// The words flags are described with, here too, so the command builds its flags from one namespace.
export { count, range } from "./wording.js"

/** Reads one value of a flag: the value, or the one sentence that refuses it, naming the flag. */
export type Read<A> = (text: string) => Either.Either<A, string>

/** A read from a parser that gives `undefined` for a value it refuses: `--name must be <accepts>, got '<text>'`. */
export const accepting =
  <A>(name: string, accepts: string, parse: (text: string) => A | undefined): Read<A> => (text) => {
    const value = parse(text)
    return value === undefined ? Either.left(refusal(`--${name}`, accepts, `'${text}'`)) : Either.right(value)
  }

/** `--name`, given or not: `true` when given. */
export interface Switch {
  readonly _tag: "Switch"
  readonly name: string
  readonly description: string
}

/**
 * `--name <metavar>`, its text read by `read`: given once (`Required`), at most once (`Optional`,
 * `undefined` when not given; `Defaulted`, `fallback` when not given), or any number of times
 * (`Repeated`, every value in order).
 */
export interface Value<Tag extends "Required" | "Optional" | "Defaulted" | "Repeated", A> {
  readonly _tag: Tag
  readonly name: string
  /** What help shows after the flag's name: `--requests integer`. */
  readonly metavar: string
  readonly description: string
  readonly read: Read<A>
  readonly fallback?: A | undefined
}

/** A flag of a command. */
export type Flag =
  | Switch
  | Value<"Required", any>
  | Value<"Optional", any>
  | Value<"Defaulted", any>
  | Value<"Repeated", any>

/** What a command's handler gets for `flag`. */
type ValueOf<F extends Flag> = F extends Switch ? boolean
  : F extends Value<"Optional", infer A> ? A | undefined
  : F extends Value<"Repeated", infer A> ? ReadonlyArray<A>
  : F extends Value<"Required" | "Defaulted", infer A> ? A
  : never

/** A command's flags, by the name its handler reads each under. */
export type Flags = Readonly<Record<string, Flag>>

/** What a command's handler gets: the value of each of its flags. */
type Values<F extends Flags> = { readonly [K in keyof F]: ValueOf<F[K]> }

/** A (sub)command: its name, what help says of it, its flags, and what it does with their values. */
export interface Command<F extends Flags, E, R> {
  readonly name: string
  readonly description: string
  readonly flags: F
  /** A method, so that a command of any flags is also a `Command<Flags, E, R>`, as the seam takes them. */
  run(values: Values<F>): Effect.Effect<void, E, R>
}

/** A command, its handler's values typed by its flags. */
export const command = <const F extends Flags, E, R>(command: Command<F, E, R>): Command<F, E, R> => command

/** `--name`, given or not. */
export const switchFlag = (name: string, description: string): Switch => ({ _tag: "Switch", name, description })

/** `--name <metavar>`, given once, read as text by `read`. */
export const checked = <A>(
  name: string,
  metavar: string,
  read: Read<A>,
  description: string
): Value<"Required", A> => ({
  _tag: "Required",
  name,
  metavar,
  description,
  read
})

/** `flag`, which may be left out: `undefined` then. */
export const optional = <A>(flag: Value<"Required", A>): Value<"Optional", A> => ({ ...flag, _tag: "Optional" })

/** `flag`, which may be left out: `fallback` then. */
export const withDefault = <A>(flag: Value<"Required", A>, fallback: A): Value<"Defaulted", A> => ({
  ...flag,
  _tag: "Defaulted",
  fallback
})

/** `flag`, given any number of times: every value, in order (none when not given). */
export const repeated = <A>(flag: Value<"Required", A>): Value<"Repeated", A> => ({ ...flag, _tag: "Repeated" })

/**
 * Reads decimal digits (and a leading minus) only: `1e3`, `0x10`, `1.0` and ` 12` are refused
 * rather than guessed at, and a value beyond `max` is refused before anything is sized by it.
 */
const parseWhole = (min: number, max: number) => (text: string): number | undefined => {
  if (!/^-?\d+$/.test(text)) return undefined
  const value = Number(text)
  return value >= min && value <= max ? value : undefined
}

/** `--name integer`: a whole number from `min` to `max`. */
export const whole = (name: string, min: number, max: number, description: string): Value<"Required", number> =>
  checked(name, "integer", accepting(name, range(min, max), parseWhole(min, max)), description)

/** What a choice flag accepts. */
export const oneOf = (choices: ReadonlyArray<string>): string => `one of ${choices.join(", ")}`

/** Reads one of `choices`, exactly as written. */
export const parseChoice = <A extends string>(choices: ReadonlyArray<A>) => (text: string): A | undefined =>
  choices.find((choice) => choice === text)

/** `--name a | b`: one of `choices`. */
export const choice = <const A extends string>(
  name: string,
  choices: ReadonlyArray<A>,
  description: string
): Value<"Required", A> =>
  checked(name, choices.join(" | "), accepting(name, oneOf(choices), parseChoice(choices)), description)

/** `--name text` that must not be empty (or blank). */
export const nonEmpty = (name: string, metavar: string, what: string, description: string): Value<"Required", string> =>
  checked(name, metavar, accepting(name, what, (text) => text.trim() === "" ? undefined : text), description)
