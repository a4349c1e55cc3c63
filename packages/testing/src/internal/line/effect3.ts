/**
 * The testing package's seam, Effect 3 side: what the fault server and its plans use that Effect 4
 * spells differently — a wait on a callback, and the few Schema combinators and decoders
 * `FaultPlan` is written with. `effect4.ts` offers the same names in Effect 4's terms; the package
 * imports this as `#testing-line` (docs/effect-lines.md). It depends on no other package of ours,
 * so it has a seam of its own rather than reaching for policy's.
 */
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as SchemaAST from "effect/SchemaAST"

/** Waits for `register` to call `resume`; what `register` returns runs if the wait is interrupted. */
export const callback = <A, E = never, R = never>(
  register: (resume: (effect: Effect.Effect<A, E, R>) => void) => void | Effect.Effect<void, never, R>
): Effect.Effect<A, E, R> => Effect.async<A, E, R>((resume) => register(resume))

/** A schema of exactly one of `values`. */
export const literals = <const L extends readonly [SchemaAST.LiteralValue, ...Array<SchemaAST.LiteralValue>]>(
  values: L
): Schema.Literal<[...L]> => Schema.Literal(...values)

/** A schema of what one of `members` accepts. */
export const union = <const Members extends SchemaAST.Members<Schema.Schema.All>>(
  members: Members
): Schema.Union<[...Members]> => Schema.Union(...members)

/** A schema `S` of numbers. */
type Numbers<S extends Schema.Schema.Any> = Schema.Schema<number, Schema.Schema.Encoded<S>, Schema.Schema.Context<S>>

/** `self`, refusing a number below 0. */
export const nonNegative = <S extends Schema.Schema.Any>(self: S & Numbers<S>): Schema.filter<S> =>
  Schema.nonNegative<S>()(self)

/** `self`, refusing a number below `minimum` or above `maximum`. */
export const between =
  (minimum: number, maximum: number) => <S extends Schema.Schema.Any>(self: S & Numbers<S>): Schema.filter<S> =>
    Schema.between<S>(minimum, maximum)(self)

/** A schema of an object of strings under any keys, such as headers. */
export const StringRecord = Schema.Record({ key: Schema.String, value: Schema.String })

/** What a decoder fails with when its input does not fit the schema: `ParseResult.ParseError`. */
export type ParseError = ParseResult.ParseError

/** How a decoder treats keys its schema does not know, and whether it reports every problem or the first. */
export interface DecodeOptions {
  readonly onExcessProperty?: "ignore" | "error" | undefined
  readonly errors?: "first" | "all" | undefined
}

/** A decoder of unknown input, such as parsed JSON, with `schema`. */
export const decoder = <A, I>(
  schema: Schema.Schema<A, I>,
  options: DecodeOptions
): (input: unknown) => Effect.Effect<A, ParseError> => Schema.decodeUnknown(schema, options)

/** A decoder of JSON text with `schema`: text that is not JSON fails as the schema's problems do. */
export const jsonDecoder = <A, I>(
  schema: Schema.Schema<A, I>,
  options: DecodeOptions
): (text: string) => Effect.Effect<A, ParseError> => Schema.decodeUnknown(Schema.parseJson(schema), options)
