/**
 * The kit every component's settings are checked with: durations, numbers, flags and text read
 * alike from an options object and from an environment variable, defaults filled in, every bad
 * setting named at once in one `InvalidSettings` (or, from `Config`, one `ConfigError`).
 *
 * Our own, not Effect's `Schema`: settings need a small part of it (a record of rules, defaults,
 * checks across settings, every problem with its path), and the two Effect lines spell that part
 * differently (docs/effect-lines.md). Written once here, the rules and their messages are the same
 * on both lines, and a program that only calls the toolkit loads no Schema for its settings.
 */
import { configFromVariables, durationFrom, Either } from "#effect-line"
import type * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { InvalidSettings } from "../Settings.js"

export * from "../Settings.js"

/** Where in the settings a problem is: a field, or a field of a nested record. */
export type Path = ReadonlyArray<PropertyKey>

/** A problem with one setting: where it is, and the rule it breaks. */
export interface Problem {
  readonly path: Path
  readonly message: string
}

/** What a rule gives for a value it refuses, having said why in `problems`. */
const refused: unique symbol = Symbol.for("@resilient-ai/policy/settings/refused")

/** A setting's rule: reads what a program or an operator wrote, or says what is wrong with it. */
export interface Rule<A> {
  readonly read: (input: unknown, path: Path, problems: Array<Problem>) => A | typeof refused
}

/** The value a rule reads. */
export type ValueOf<R> = R extends Rule<infer A> ? A : never

/** How a value is shown in a message: text quoted, so an empty or blank one is visible. */
const shown = (value: unknown): string => typeof value === "string" ? JSON.stringify(value) : String(value)

/**
 * A setting read from whatever was written: `check` gives the value, or the rule it breaks. The
 * value is never kept in the problem (it may be a secret); the message says what it shows of it.
 */
export const rule = <A>(check: (input: unknown) => Either.Either<A, string>): Rule<A> => ({
  read: (input, path, problems) => {
    const checked = check(input)
    if (Either.isRight(checked)) return Either.rightOf(checked)
    problems.push({ path, message: Either.leftOf(checked) })
    return refused
  }
})

/**
 * What a check across a value says: nothing (or `true`) when it holds, else the rule it breaks, at
 * the value itself (a message) or at settings inside it (problems with their paths).
 */
export type Verdict = true | undefined | string | Problem | ReadonlyArray<Problem | undefined>

/** `self`, and then `check` on what it read: the check runs only on a value `self` accepts. */
export const refine = <A>(self: Rule<A>, check: (value: A) => Verdict): Rule<A> => ({
  read: (input, path, problems) => {
    const value = self.read(input, path, problems)
    if (value === refused) return refused
    const verdict = check(value)
    if (verdict === true || verdict === undefined) return value
    const found = typeof verdict === "string"
      ? [{ path: [], message: verdict }]
      : "message" in verdict
      ? [verdict as Problem]
      : (verdict as ReadonlyArray<Problem | undefined>).filter((problem) => problem !== undefined)
    if (found.length === 0) return value
    for (const problem of found) problems.push({ path: [...path, ...problem.path], message: problem.message })
    return refused
  }
})

/** `self`, then `next` on what it read: a rule in two steps (text to a record, the record's values). */
export const andThen = <A, B>(self: Rule<A>, next: Rule<B>): Rule<B> => ({
  read: (input, path, problems) => {
    const value = self.read(input, path, problems)
    return value === refused ? refused : next.read(value, path, problems)
  }
})

/** `self`, its value made into another. */
export const map = <A, B>(self: Rule<A>, f: (value: A) => B): Rule<B> => ({
  read: (input, path, problems) => {
    const value = self.read(input, path, problems)
    return value === refused ? refused : f(value)
  }
})

/** What `self` accepts, kept as it was written: checked now, read by its owner later. */
export const asWritten = <A>(self: Rule<unknown>): Rule<A> => ({
  read: (input, path, problems) => self.read(input, path, problems) === refused ? refused : input as A
})

/**
 * Reads `text` as a duration, or says why it cannot: a bare number is milliseconds (`250`),
 * anything else Effect's form (`30 seconds`).
 */
const parseDuration = (text: string): Duration.Duration | "negative" | "unreadable" => {
  const trimmed = text.trim()
  if (trimmed.startsWith("-")) return "negative"
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Duration.millis(Number(trimmed))
  return durationFrom(trimmed) ?? "unreadable"
}

const durationRule = `must be a duration such as 30000 or "30 seconds"`

/**
 * A duration: a `Duration`, milliseconds as a number or as text, or Effect's form (`"2 seconds"`).
 * Zero is read; whether it is allowed is the setting's own rule (`positive`).
 */
export const duration: Rule<Duration.Duration> = rule((input) => {
  if (typeof input === "string") {
    const parsed = parseDuration(input)
    if (typeof parsed !== "string") return Either.right(parsed)
    const trimmed = input.trim()
    return Either.left(
      parsed === "negative"
        ? `must not be negative, got ${trimmed}`
        : `${durationRule}, got ${trimmed === "" ? "nothing" : trimmed}`
    )
  }
  if (typeof input === "number" && input < 0) return Either.left(`must not be negative, got ${input}`)
  const decoded = durationFrom(input)
  if (decoded === undefined) return Either.left(`${durationRule}, got ${shown(input)}`)
  return Duration.toMillis(decoded) < 0
    ? Either.left(`must not be negative, got ${Duration.format(decoded)}`)
    : Either.right(decoded)
})

/** A duration longer than zero. */
export const positiveDuration: Rule<Duration.Duration> = refine(
  duration,
  (value) => Duration.toMillis(value) > 0 || `must be positive, got ${Duration.format(value)}`
)

/** A duration longer than zero and finite: a period something repeats at. */
export const finitePositiveDuration: Rule<Duration.Duration> = refine(
  positiveDuration,
  (value) => Duration.isFinite(value) || `must be finite, got ${Duration.format(value)}`
)

/** A number, given as one or as text. */
export const number: Rule<number> = rule((input) => {
  const value = typeof input === "number" ? input : typeof input === "string" && input.trim() !== ""
    ? Number(input)
    : Number.NaN
  return Number.isNaN(value) ? Either.left(`must be a number, got ${shown(input)}`) : Either.right(value)
})

/** A whole number of at least `min` (infinity only with `orInfinite`). */
export const integerAtLeast = (min: number, options?: { readonly orInfinite?: boolean }): Rule<number> =>
  refine(
    number,
    (value) =>
      (value >= min && (Number.isInteger(value) || (options?.orInfinite === true && value === Infinity))) ||
      `must be an integer >= ${min}, got ${value}`
  )

/** A finite number of at least zero. */
export const finiteAtLeastZero: Rule<number> = refine(
  number,
  (value) => (value >= 0 && Number.isFinite(value)) || `must be a finite number >= 0, got ${value}`
)

/** A share: a number from 0 to 1. */
export const shareOfOne: Rule<number> = refine(
  number,
  (value) => (value >= 0 && value <= 1) || `must be a number from 0 to 1, got ${value}`
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
export const flag: Rule<boolean> = rule((input) => {
  const value = typeof input === "boolean" ? input : typeof input === "string"
    ? flagWords[input.trim().toLowerCase()]
    : undefined
  return value === undefined ? Either.left(`must be true or false, got ${shown(input)}`) : Either.right(value)
})

/** Text with something in it. */
export const nonEmpty: Rule<string> = rule((input) =>
  typeof input !== "string"
    ? Either.left(`must be text, got ${shown(input)}`)
    : input.trim() === ""
    ? Either.left("must not be empty")
    : Either.right(input)
)

/** Text, any. */
export const text: Rule<string> = rule((input) =>
  typeof input === "string" ? Either.right(input) : Either.left(`must be text, got ${shown(input)}`)
)

/** One of `values`. */
export const oneOf = <const Values extends ReadonlyArray<string>>(...values: Values): Rule<Values[number]> =>
  rule((input) =>
    values.includes(input as string)
      ? Either.right(input as Values[number])
      : Either.left(`must be one of ${values.map((value) => JSON.stringify(value)).join(", ")}, got ${shown(input)}`)
  )

/** An object (a record of settings read by another part, later). */
export const object: Rule<object> = rule((input) =>
  typeof input === "object" && input !== null
    ? Either.right(input)
    : Either.left(`must be an object, got ${shown(input)}`)
)

/** A value `is` accepts, kept as it is; `message` says what it must be. */
export const accepted = <A>(is: (input: unknown) => input is A, message: string): Rule<A> =>
  rule((input) => is(input) ? Either.right(input) : Either.left(message))

/** A record of settings of one kind, under names of the writer's choosing (each checked at its name). */
export const recordOf = <A>(value: Rule<A>): Rule<Readonly<Record<string, A>>> => ({
  read: (input, path, problems) => {
    if (typeof input !== "object" || input === null || Array.isArray(input)) {
      problems.push({ path, message: `must be a record, got ${shown(input)}` })
      return refused
    }
    const result: Record<string, A> = {}
    let bad = false
    for (const [key, item] of Object.entries(input)) {
      const read = value.read(item, [...path, key], problems)
      if (read === refused) bad = true
      else result[key] = read
    }
    return bad ? refused : result
  }
})

/** A setting that may be left out (or given as `undefined`), taking `fallback` then. */
export interface WithDefault<A> {
  readonly _tag: "WithDefault"
  readonly rule: Rule<A>
  readonly fallback: A
}

/** A setting that may be left out (or given as `undefined`). */
export interface Optional<A> {
  readonly _tag: "Optional"
  readonly rule: Rule<A>
}

/** A setting that may be left out (or given as `undefined`), taking `fallback` then. */
export const withDefault = <A>(rule: Rule<A>, fallback: A): WithDefault<A> => ({ _tag: "WithDefault", rule, fallback })

/** A setting that may be left out (or given as `undefined`). */
export const optional = <A>(rule: Rule<A>): Optional<A> => ({ _tag: "Optional", rule })

/** The settings of a record, each by its rule. */
export type Fields = Readonly<Record<string, Rule<any> | WithDefault<any> | Optional<any>>>

type FieldValue<F> = F extends Rule<infer A> ? A : F extends WithDefault<infer A> ? A : F extends Optional<infer A> ? A
: never

/** What a record of settings reads as: each setting's value, the optional ones only when given. */
export type Struct<F extends Fields> =
  & { readonly [K in keyof F as F[K] extends Optional<any> ? never : K]: FieldValue<F[K]> }
  & { readonly [K in keyof F as F[K] extends Optional<any> ? K : never]?: FieldValue<F[K]> }

/**
 * A record of settings: each is read by its rule at its name (a missing one is "required", unless
 * it has a default or is optional); names not listed are left out. Every problem is told, in the
 * order the settings are listed.
 */
export const struct = <F extends Fields>(fields: F): Rule<{ readonly [K in keyof Struct<F>]: Struct<F>[K] }> => {
  const entries = Object.entries(fields)
  return {
    read: (input, path, problems) => {
      if (typeof input !== "object" || input === null || Array.isArray(input)) {
        problems.push({ path, message: `must be a record of settings, got ${shown(input)}` })
        return refused
      }
      const given = input as Record<string, unknown>
      const result: Record<string, unknown> = {}
      let bad = false
      for (const [key, field] of entries) {
        const value = given[key]
        if (value === undefined) {
          if ("_tag" in field && field._tag === "WithDefault") result[key] = field.fallback
          else if (!("_tag" in field && field._tag === "Optional")) {
            problems.push({ path: [...path, key], message: required })
            bad = true
          }
          continue
        }
        const read = ("_tag" in field ? field.rule : field).read(value, [...path, key], problems)
        if (read === refused) bad = true
        else result[key] = read
      }
      return bad ? refused : result as never
    }
  }
}

/** The rule a missing setting breaks. */
const required = "is required"

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
 * For a check over a record of settings: the duration at `path` must stand to the other's as
 * `rule` says (`"must not exceed"`, `"must be shorter than"`); the problem, if not.
 */
const ordered = (rule: string, holds: (value: number, other: number) => boolean) =>
(
  path: Path,
  value: Duration.Duration,
  otherPath: Path,
  otherValue: Duration.Duration
): Problem | undefined =>
  holds(Duration.toMillis(value), Duration.toMillis(otherValue)) ? undefined : {
    path,
    message: `(${Duration.format(value)}) ${rule} ${other(otherPath)} (${Duration.format(otherValue)})`
  }

/** The duration at `path` must not exceed the other's. */
export const notLongerThan = ordered("must not exceed", (value, other) => value <= other)

/** The duration at `path` must be shorter than the other's. */
export const shorterThan = ordered("must be shorter than", (value, other) => value < other)

/** Reads `input` by `rule`: its value, or every problem, each a line starting with the name `label` gives its setting. */
const readAll = <A>(
  rule: Rule<A>,
  input: unknown,
  label: (path: Path) => string
): Either.Either<A, ReadonlyArray<string>> => {
  const problems: Array<Problem> = []
  const value = rule.read(definedOnly(input), [], problems)
  if (value !== refused && problems.length === 0) return Either.right(value)
  return Either.left(
    problems.map(({ message, path }) =>
      `${label(path)} ${message.replace(marked, (_, setting: string) => label(JSON.parse(setting) as Path))}`
    )
  )
}

/**
 * A decoder of `rule` that fails with `InvalidSettings` about `subject`, naming each bad setting
 * with `label` (the option's name by default).
 */
export const decoder = <A>(
  rule: Rule<A>,
  subject: (input: unknown) => string,
  label: (path: Path) => string = optionLabel
) =>
(input: unknown): Either.Either<A, InvalidSettings> =>
  Either.mapLeft(readAll(rule, input, label), (problems) => new InvalidSettings({ subject: subject(input), problems }))

/** `decoder` as an Effect: for constructors that fail in the error channel. */
export const validate = <A>(
  rule: Rule<A>,
  subject: (input: unknown) => string,
  label?: (path: Path) => string
): (input: unknown) => Effect.Effect<A, InvalidSettings> => {
  const decode = decoder(rule, subject, label)
  return (input) => Effect.suspend(() => Either.toEffect(decode(input)))
}

/** The environment variable of a setting, by its path: `[["budget", "ratio"], "BUDGET_RATIO"]`. */
export type Variables = ReadonlyArray<readonly [Path, string]>

/** Where a record of settings is read from environment variables, and what a problem calls it. */
export interface FromVariables {
  readonly prefix: string
  readonly variables: Variables
  /** What the settings are for: `target mistral`. */
  readonly subject: string
  /** Settings no variable holds (a target's name). */
  readonly fixed?: Readonly<Record<string, unknown>> | undefined
}

/**
 * The record of settings the variables `options.variables` names hold under its prefix
 * (`{prefix}_{variable}`), given their `values` in that order (a variable left unset is an option
 * left out), and how a problem names its setting: by its variable.
 */
const fromValues = (
  options: FromVariables,
  values: ReadonlyArray<string | undefined>
): { readonly input: Record<string, unknown>; readonly label: (path: Path) => string } => {
  const { prefix, variables } = options
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
  const input: Record<string, unknown> = { ...options.fixed }
  variables.forEach(([path, _], index) => {
    const value = values[index]
    if (value === undefined) return
    let record = input
    for (const key of path.slice(0, -1)) record = (record[key as string] ??= {}) as Record<string, unknown>
    record[path[path.length - 1] as string] = value
  })
  return { input, label }
}

/** The subject of settings read from variables: `target mistral (MISTRAL_*)`. */
const variablesSubject = (options: FromVariables): string => `${options.subject} (${options.prefix}_*)`

/**
 * Reads the settings `rule` checks from environment variables (see `FromVariables`), with the
 * default `ConfigProvider` and the same rules and defaults as the options object. Anything invalid
 * is one `ConfigError` naming every bad variable.
 */
export const config = <A>(rule: Rule<A>, options: FromVariables): Config.Config<A> =>
  configFromVariables(options.prefix, options.variables.map(([, variable]) => variable), (values) => {
    const { input, label } = fromValues(options, values)
    return Either.mapLeft(
      readAll(rule, input, label),
      (problems) => `${variablesSubject(options)}: ${problems.join("; ")}`
    )
  })

/**
 * What `config` reads, without Effect's `Config`: the variables found by their whole name with
 * `lookup` (a process's environment, a Worker's bindings), checked by `decode` (a decoder made
 * with `decoder`, naming each setting with the label it is given). Anything invalid is one
 * `InvalidSettings` with `config`'s message.
 */
export const fromVariables = <A>(
  decode: (input: unknown, label: (path: Path) => string) => Either.Either<A, InvalidSettings>,
  options: FromVariables,
  lookup: (name: string) => string | undefined
): Either.Either<A, InvalidSettings> => {
  const { input, label } = fromValues(
    options,
    options.variables.map(([, variable]) => lookup(`${options.prefix}_${variable}`))
  )
  return Either.mapLeft(
    decode(input, label),
    (invalid) => new InvalidSettings({ subject: variablesSubject(options), problems: invalid.problems })
  )
}
