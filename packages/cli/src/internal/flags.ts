/**
 * The command's options, built so that every bad value is refused with one sentence that names the
 * flag and says what it accepts: `--requests must be a whole number from 1 to 10,000,000, got 'abc'`.
 *
 * @effect/cli's own primitives refuse without naming the flag ("'abc' is not a integer", "Expected
 * one of the following cases: …"), and print that before the command can say more, so these
 * options read their value as text and check it themselves. Each check is a `Read`, the value or
 * the sentence that refuses it, whether the rule is the flag's own, the target's (`--base-url`), or
 * that of `--log-level`, which the command reads before @effect/cli does.
 */
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { range, refusal } from "./wording.js"

// The words flags are described with, here too, so the command builds its options from one namespace.
export { count, range } from "./wording.js"

/** Reads one value of a flag: the value, or the one sentence that refuses it, naming the flag. */
export type Read<A> = (text: string) => Either.Either<A, string>

/** A read from a parser that gives `undefined` for a value it refuses: `--name must be <accepts>, got '<text>'`. */
export const accepting =
  <A>(name: string, accepts: string, parse: (text: string) => A | undefined): Read<A> => (text) => {
    const value = parse(text)
    return value === undefined ? Either.left(refusal(`--${name}`, accepts, `'${text}'`)) : Either.right(value)
  }

/** `read` as @effect/cli checks a value: a refusal becomes its usage error, which it prints. */
const validated = <A>(read: Read<A>) => (text: string): Effect.Effect<A, ValidationError.ValidationError> =>
  Effect.mapError(read(text), (message) => ValidationError.invalidValue(HelpDoc.p(message)))

/** Checks one value of `--name` as `accepting` reads it, for an option built some other way (a repeated one). */
export const check = <A>(name: string, accepts: string, parse: (text: string) => A | undefined) =>
  validated(accepting(name, accepts, parse))

/** `--name <pseudoName>`, read as text by `read`. */
export const checked = <A>(name: string, pseudoName: string, read: Read<A>): Options.Options<A> =>
  Options.text(name).pipe(Options.withPseudoName(pseudoName), Options.mapEffect(validated(read)))

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
export const whole = (name: string, min: number, max: number): Options.Options<number> =>
  checked(name, "integer", accepting(name, range(min, max), parseWhole(min, max)))

/** What a choice flag accepts. */
export const oneOf = (choices: ReadonlyArray<string>): string => `one of ${choices.join(", ")}`

/** Reads one of `choices`, exactly as written. */
export const parseChoice = <A extends string>(choices: ReadonlyArray<A>) => (text: string): A | undefined =>
  choices.find((choice) => choice === text)

/** `--name a | b`: one of `choices`. */
export const choice = <A extends string>(name: string, choices: ReadonlyArray<A>): Options.Options<A> =>
  checked(name, choices.join(" | "), accepting(name, oneOf(choices), parseChoice(choices)))

/** `--name text` that must not be empty (or blank). */
export const nonEmpty = (name: string, pseudoName: string, what: string): Options.Options<string> =>
  checked(name, pseudoName, accepting(name, what, (text) => text.trim() === "" ? undefined : text))
