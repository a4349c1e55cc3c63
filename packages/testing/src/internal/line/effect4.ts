/**
 * The testing package's seam, Effect 4 side: the names `effect3.ts` offers, in Effect 4's terms —
 * `Effect.callback`, Schema's checks and its constructors that take arrays, and decoding whose
 * failure carries a `SchemaIssue` (docs/effect-lines.md).
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as SchemaAST from "effect/SchemaAST"
import * as SchemaIssue from "effect/SchemaIssue"

/** Waits for `register` to call `resume`; what `register` returns runs if the wait is interrupted. */
export const callback = <A, E = never, R = never>(
  register: (resume: (effect: Effect.Effect<A, E, R>) => void) => void | Effect.Effect<void, never, R>
): Effect.Effect<A, E, R> => Effect.callback<A, E, R>((resume) => register(resume))

/** A schema of exactly one of `values`. */
export const literals = <const L extends readonly [SchemaAST.LiteralValue, ...Array<SchemaAST.LiteralValue>]>(
  values: L
): Schema.Literals<L> => Schema.Literals(values)

/** A schema of what one of `members` accepts. */
export const union = <const Members extends ReadonlyArray<Schema.Constraint>>(
  members: Members
): Schema.Union<Members> => Schema.Union(members)

/** `self`, refusing a number below 0. */
export const nonNegative = <S extends Schema.Number>(self: S): S["Rebuild"] =>
  self.check(Schema.isGreaterThanOrEqualTo(0))

/** `self`, refusing a number below `minimum` or above `maximum`. */
export const between = (minimum: number, maximum: number) => <S extends Schema.Number>(self: S): S["Rebuild"] =>
  self.check(Schema.isBetween({ minimum, maximum }))

/** A schema of an object of strings under any keys, such as headers. */
export const StringRecord = Schema.Record(Schema.String, Schema.String)

const formatIssue = SchemaIssue.makeFormatterDefault()

/**
 * What a decoder fails with when its input does not fit the schema: what Effect 4's `SchemaError`
 * holds (the issue, and the message it formats), under the tag of Effect 3's `ParseError`, so a
 * caller tells a plan that does not decode by the same tag on both lines. The messages are each
 * line's own: Effect 4 words and arranges its issues differently.
 */
class ParseError extends Data.TaggedError("ParseError")<{ readonly issue: SchemaIssue.Issue }> {
  override get message(): string {
    return formatIssue(this.issue)
  }
}

export type { ParseError }

/** How a decoder treats keys its schema does not know, and whether it reports every problem or the first. */
export interface DecodeOptions {
  readonly onExcessProperty?: "ignore" | "error" | undefined
  readonly errors?: "first" | "all" | undefined
}

const parseError = (error: Schema.SchemaError): ParseError => new ParseError({ issue: error.issue })

/** A decoder of unknown input, such as parsed JSON, with `schema`. */
export const decoder = <A>(
  schema: Schema.Decoder<A>,
  options: DecodeOptions
): (input: unknown) => Effect.Effect<A, ParseError> => {
  const decode = Schema.decodeUnknownEffect(schema, options)
  return (input) => Effect.mapError(decode(input), parseError)
}

/** A decoder of JSON text with `schema`: text that is not JSON fails as the schema's problems do. */
export const jsonDecoder = <A>(
  schema: Schema.Decoder<A>,
  options: DecodeOptions
): (text: string) => Effect.Effect<A, ParseError> => decoder(Schema.fromJsonString(schema), options)
