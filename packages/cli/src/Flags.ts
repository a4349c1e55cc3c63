/**
 * The command's options, built so that every bad value is refused with one sentence that names the
 * flag and says what it accepts: `--requests must be a whole number from 1 to 10,000,000, got 'abc'`.
 *
 * @effect/cli's own primitives refuse without naming the flag ("'abc' is not a integer", "Expected
 * one of the following cases: …"), and print that before the command can say more, so these
 * options read their value as text and check it themselves.
 */
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Effect from "effect/Effect"

/** Reads one value of `--name`, or refuses it with a message that says what the flag accepts. */
export type Check<A> = (text: string) => Effect.Effect<A, ValidationError.ValidationError>

/** A whole number as a person writes it: `10,000,000`. */
export const count = (value: number): string => value.toLocaleString("en-US")

/** The sentence most refused values get: `--name must be <accepts>, got '<text>'`. */
export const refusal = (name: string, accepts: string, text: string): string =>
  `--${name} must be ${accepts}, got '${text}'`

/** Refuses a value with `message`, which names the flag and says what it accepts. */
export const refuse = (message: string): Effect.Effect<never, ValidationError.ValidationError> =>
  Effect.fail(ValidationError.invalidValue(HelpDoc.p(message)))

/** A check from a parser that gives `undefined` for a value it refuses. */
export const check = <A>(name: string, accepts: string, parse: (text: string) => A | undefined): Check<A> => (text) => {
  const value = parse(text)
  return value === undefined ? refuse(refusal(name, accepts, text)) : Effect.succeed(value)
}

/** `--name <pseudoName>`, read as text and checked by `parse`. */
export const checked = <A>(
  name: string,
  pseudoName: string,
  accepts: string,
  parse: (text: string) => A | undefined
): Options.Options<A> =>
  Options.text(name).pipe(Options.withPseudoName(pseudoName), Options.mapEffect(check(name, accepts, parse)))

/** What a whole-number flag accepts, for its message and its help. */
export const range = (min: number, max: number): string => `a whole number from ${count(min)} to ${count(max)}`

/**
 * Reads decimal digits (and a leading minus) only: `1e3`, `0x10`, `1.0` and ` 12` are refused
 * rather than guessed at, and a value beyond `max` is refused before anything is sized by it.
 */
export const parseWhole = (min: number, max: number) => (text: string): number | undefined => {
  if (!/^-?\d+$/.test(text)) return undefined
  const value = Number(text)
  return value >= min && value <= max ? value : undefined
}

/** `--name integer`: a whole number from `min` to `max`. */
export const whole = (name: string, min: number, max: number): Options.Options<number> =>
  checked(name, "integer", range(min, max), parseWhole(min, max))

/** What a choice flag accepts. */
export const oneOf = (choices: ReadonlyArray<string>): string => `one of ${choices.join(", ")}`

/** Reads one of `choices`, exactly as written. */
export const parseChoice = <A extends string>(choices: ReadonlyArray<A>) => (text: string): A | undefined =>
  choices.find((choice) => choice === text)

/** `--name a | b`: one of `choices`. */
export const choice = <A extends string>(name: string, choices: ReadonlyArray<A>): Options.Options<A> =>
  checked(name, choices.join(" | "), oneOf(choices), parseChoice(choices))

/** `--name text` that must not be empty (or blank). */
export const nonEmpty = (name: string, pseudoName: string, what: string): Options.Options<string> =>
  checked(name, pseudoName, what, (text) => text.trim() === "" ? undefined : text)
