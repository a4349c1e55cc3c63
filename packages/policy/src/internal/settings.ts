/**
 * The Schema kit every component's settings are checked with: durations, numbers, flags and text
 * read alike from an options object and from an environment variable, defaults filled in, every bad
 * setting named at once in one `InvalidSettings` (or, from `Config`, one `ConfigError`).
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"
import { InvalidSettings } from "../Settings.js"

export * from "../Settings.js"

/** Where in the settings a problem is: a field, or a field of a nested record. */
export type Path = ReadonlyArray<PropertyKey>

const failWith = (ast: AST.AST, actual: unknown, message: string) =>
  ParseResult.fail(new ParseResult.Type(ast, actual, message))

/** How a value is shown in a message: text quoted, so an empty or blank one is visible. */
const shown = (value: unknown): string => typeof value === "string" ? JSON.stringify(value) : String(value)

/**
 * Reads `text` as a duration, or says why it cannot: a bare number is milliseconds (`250`),
 * anything else Effect's form (`30 seconds`).
 */
const parseDuration = (text: string): Either.Either<Duration.Duration, "negative" | "unreadable"> => {
  const trimmed = text.trim()
  if (trimmed.startsWith("-")) return Either.left("negative")
  const decoded = /^\d+(\.\d+)?$/.test(trimmed)
    ? Option.some(Duration.millis(Number(trimmed)))
    : Duration.decodeUnknown(trimmed)
  return Either.fromOption(decoded, () => "unreadable" as const)
}

const durationRule = `must be a duration such as 30000 or "30 seconds"`

/**
 * A duration: a `Duration`, milliseconds as a number or as text, or Effect's form (`"2 seconds"`).
 * Zero is read; whether it is allowed is the setting's own rule (`positive`).
 */
export const duration: Schema.Schema<Duration.Duration, unknown> = Schema.transformOrFail(
  Schema.Unknown,
  Schema.DurationFromSelf,
  {
    strict: true,
    decode: (input, _, ast) => {
      if (typeof input === "string") {
        const parsed = parseDuration(input)
        if (Either.isRight(parsed)) return ParseResult.succeed(parsed.right)
        const trimmed = input.trim()
        return failWith(
          ast,
          input,
          parsed.left === "negative"
            ? `must not be negative, got ${trimmed}`
            : `${durationRule}, got ${trimmed === "" ? "nothing" : trimmed}`
        )
      }
      if (typeof input === "number" && input < 0) return failWith(ast, input, `must not be negative, got ${input}`)
      const decoded = Duration.decodeUnknown(input)
      if (Option.isNone(decoded)) return failWith(ast, input, `${durationRule}, got ${shown(input)}`)
      return Duration.toMillis(decoded.value) < 0
        ? failWith(ast, input, `must not be negative, got ${Duration.format(decoded.value)}`)
        : ParseResult.succeed(decoded.value)
    },
    encode: ParseResult.succeed
  }
)

/** A duration longer than zero. */
export const positiveDuration: Schema.Schema<Duration.Duration, unknown> = duration.pipe(
  Schema.filter((value) => Duration.toMillis(value) > 0 || `must be positive, got ${Duration.format(value)}`)
)

/** A duration longer than zero and finite: a period something repeats at. */
export const finitePositiveDuration: Schema.Schema<Duration.Duration, unknown> = positiveDuration.pipe(
  Schema.filter((value) => Duration.isFinite(value) || `must be finite, got ${Duration.format(value)}`)
)

/**
 * A setting read from whatever a program or an operator wrote: `check` gives the value, or the rule
 * it breaks. The value is never kept in the failure (it may be a secret); the message says what it
 * shows of it.
 */
export const rule = <A>(
  to: Schema.Schema<A>,
  check: (input: unknown) => Either.Either<A, string>
): Schema.Schema<A, unknown> =>
  Schema.transformOrFail(Schema.Unknown, to, {
    strict: true,
    decode: (input, _, ast) =>
      Either.match(check(input), {
        onLeft: (message) => failWith(ast, "(not shown)", message),
        onRight: ParseResult.succeed
      }),
    encode: ParseResult.succeed
  })

/** A number, given as one or as text. */
export const number: Schema.Schema<number, unknown> = rule(Schema.Number, (input) => {
  const value = typeof input === "number" ? input : typeof input === "string" && input.trim() !== ""
    ? Number(input)
    : Number.NaN
  return Number.isNaN(value) ? Either.left(`must be a number, got ${shown(input)}`) : Either.right(value)
})

/** A whole number of at least `min` (infinity only with `orInfinite`). */
export const integerAtLeast = (min: number, options?: { readonly orInfinite?: boolean }) =>
  number.pipe(
    Schema.filter((value) =>
      (value >= min && (Number.isInteger(value) || (options?.orInfinite === true && value === Infinity))) ||
      `must be an integer >= ${min}, got ${value}`
    )
  )

/** A finite number of at least zero. */
export const finiteAtLeastZero = number.pipe(
  Schema.filter((value) => (value >= 0 && Number.isFinite(value)) || `must be a finite number >= 0, got ${value}`)
)

/** A share: a number from 0 to 1. */
export const shareOfOne = number.pipe(
  Schema.filter((value) => (value >= 0 && value <= 1) || `must be a number from 0 to 1, got ${value}`)
)

const flagWords: Readonly<Record<string, boolean>> = {
  true: true,
  yes: true,
  on: true,
  "1": true,
  false: false,
  no: false,
  off: false,
  "0": false
}

/** True or false, given as a boolean or as text (`yes`/`no`, `on`/`off`, `1`/`0`), as `Config.boolean` reads it. */
export const flag: Schema.Schema<boolean, unknown> = rule(Schema.Boolean, (input) => {
  const value = typeof input === "boolean" ? input : typeof input === "string"
    ? flagWords[input.trim().toLowerCase()]
    : undefined
  return value === undefined ? Either.left(`must be true or false, got ${shown(input)}`) : Either.right(value)
})

/** Text with something in it. */
export const nonEmpty: Schema.Schema<string, unknown> = rule(
  Schema.String,
  (input) =>
    typeof input !== "string"
      ? Either.left(`must be text, got ${shown(input)}`)
      : input.trim() === ""
      ? Either.left("must not be empty")
      : Either.right(input)
)

/** A setting that may be left out (or given as `undefined`), taking `fallback` then. */
export const withDefault = <A, I>(schema: Schema.Schema<A, I>, fallback: A) =>
  Schema.optionalWith(schema, { exact: true, default: () => fallback })

/** A setting that may be left out (or given as `undefined`). */
export const optional = <A, I>(schema: Schema.Schema<A, I>) => Schema.optionalWith(schema, { exact: true })

/**
 * The settings without the keys whose value is `undefined`: an options object written
 * `{ maxAttempts: flags.attempts }` leaves the setting out, as `{}` does.
 */
const definedOnly = (input: unknown): unknown => {
  if (
    typeof input !== "object" || input === null || Array.isArray(input) ||
    Object.getPrototypeOf(input) !== Object.prototype
  ) {
    return input
  }
  const result: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(input)) {
    if (value !== undefined) result[key] = definedOnly(value)
  }
  return result
}

/** The default way a problem's setting is named: its option, `budget.ratio` for a nested one. */
const optionLabel = (path: Path): string => path.map(String).join(".")

// Marks another setting's name in a rule. A control character: values are shown through
// `JSON.stringify`, which escapes it, so no value can pass for a setting's name.
const mark = "\u0001"
const marked = new RegExp(`${mark}([^${mark}]*)${mark}`, "g")

/** Names another setting in a rule (`must not exceed ${other(["maxDelay"])}`), as the reader names it. */
const other = (path: Path): string => `${mark}${JSON.stringify(path.map(String))}${mark}`

/**
 * For a `Schema.filter` over a record of settings: the duration at `path` must stand to the
 * other's as `rule` says (`"must not exceed"`, `"must be shorter than"`); the problem, if not.
 */
const ordered = (rule: string, holds: (value: Duration.Duration, other: Duration.Duration) => boolean) =>
(
  path: Path,
  value: Duration.Duration,
  otherPath: Path,
  otherValue: Duration.Duration
): Schema.FilterIssue | undefined =>
  holds(value, otherValue) ? undefined : {
    path,
    message: `(${Duration.format(value)}) ${rule} ${other(otherPath)} (${Duration.format(otherValue)})`
  }

/** The duration at `path` must not exceed the other's. */
export const notLongerThan = ordered("must not exceed", Duration.lessThanOrEqualTo)

/** The duration at `path` must be shorter than the other's. */
export const shorterThan = ordered("must be shorter than", Duration.lessThan)

/** What is wrong, one line per problem, each starting with the name `label` gives its setting. */
const problemsOf = (error: ParseResult.ParseError, label: (path: Path) => string): ReadonlyArray<string> =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map(({ _tag, message, path }) => {
    const rule = _tag === "Missing"
      ? "is required"
      : message.replace(marked, (_, setting: string) => label(JSON.parse(setting) as Path))
    return `${label(path)} ${rule}`
  })

/** Decodes every setting at once, so one failure names every bad one. */
const decodeAll = <A, I>(schema: Schema.Schema<A, I>) => Schema.decodeUnknownEither(schema, { errors: "all" })

/**
 * A decoder of `schema` that fails with `InvalidSettings` about `subject`, naming each bad setting
 * with `label` (the option's name by default).
 */
export const decoder = <A, I>(
  schema: Schema.Schema<A, I>,
  subject: (input: unknown) => string,
  label: (path: Path) => string = optionLabel
) => {
  const decode = decodeAll(schema)
  return (input: unknown): Either.Either<A, InvalidSettings> =>
    Either.mapLeft(
      decode(definedOnly(input)),
      (error) => new InvalidSettings({ subject: subject(input), problems: problemsOf(error, label) })
    )
}

/** `decoder` as an Effect: for constructors that fail in the error channel. */
export const validate = <A, I>(
  schema: Schema.Schema<A, I>,
  subject: (input: unknown) => string,
  label?: (path: Path) => string
): (input: unknown) => Effect.Effect<A, InvalidSettings> => {
  const decode = decoder(schema, subject, label)
  return (input) => Effect.suspend(() => decode(input))
}

/** The environment variable of a setting, by its path: `[["budget", "ratio"], "BUDGET_RATIO"]`. */
export type Variables = ReadonlyArray<readonly [Path, string]>

/**
 * Reads the settings `schema` decodes from the variables `variables` names under `prefix`
 * (`{prefix}_{variable}`), with the same rules and defaults as the options object: a variable left
 * unset is an option left out. Anything invalid is one `ConfigError` about `subject` naming every
 * bad variable; `fixed` are settings no variable holds (a target's name).
 */
export const config = <A, I>(
  schema: Schema.Schema<A, I>,
  options: {
    readonly prefix: string
    readonly variables: Variables
    readonly subject: string
    readonly fixed?: Readonly<Record<string, unknown>> | undefined
  }
): Config.Config<A> => {
  const { prefix, variables } = options
  const decode = decodeAll(schema)
  const variableOf = (path: Path): string | undefined => {
    const key = path.map(String).join(".")
    return variables.find(([at]) => at.map(String).join(".") === key)?.[1]
  }
  // A problem below a variable's setting (one model of `ATTEMPT_TIMEOUTS`) names the variable, then the rest.
  const label = (path: Path): string => {
    for (let length = path.length; length > 0; length--) {
      const variable = variableOf(path.slice(0, length))
      if (variable !== undefined) {
        const rest = path.slice(length).map(String).join(".")
        return rest === "" ? `${prefix}_${variable}` : `${prefix}_${variable} (${rest})`
      }
    }
    return optionLabel(path)
  }
  const read = Config.all(
    variables.map(([path, variable]) =>
      Config.map(Config.option(Config.string(variable)), (value) => [path, Option.getOrUndefined(value)] as const)
    )
  ).pipe(Config.nested(prefix))
  return Config.mapOrFail(read, (values) => {
    const input: Record<string, unknown> = { ...options.fixed }
    for (const [path, value] of values) {
      if (value === undefined) continue
      let record = input
      for (const key of path.slice(0, -1)) record = (record[key as string] ??= {}) as Record<string, unknown>
      record[path[path.length - 1] as string] = value
    }
    return Either.mapLeft(
      decode(input),
      (error) => ConfigError.InvalidData([], `${options.subject} (${prefix}_*): ${problemsOf(error, label).join("; ")}`)
    )
  })
}
