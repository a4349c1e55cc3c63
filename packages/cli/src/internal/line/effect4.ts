/**
 * The command's seam, Effect 4 side: the names `effect3.ts` offers, in Effect 4's terms — the
 * command-line library that moved into `effect` itself (`effect/cli`), `effect`'s own file system
 * and Node services, string log levels, a console whose methods write at once, and Schema's issues
 * (docs/effect-lines.md).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Either } from "@resilient-ai/policy/internal"
import type * as Arr from "effect/Array"
import * as CliError from "effect/cli/CliError"
import * as CliOutput from "effect/cli/CliOutput"
import * as CliCommand from "effect/cli/Command"
import * as CliFlag from "effect/cli/Flag"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import type * as HttpClient from "effect/http/HttpClient"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevels from "effect/LogLevel"
import * as Option from "effect/Option"
import type * as PlatformErrors from "effect/PlatformError"
import * as References from "effect/References"
import type { Teardown } from "effect/Runtime"
import * as SchemaAST from "effect/SchemaAST"
import * as SchemaIssue from "effect/SchemaIssue"
import { withoutEscapes } from "../colour.js"
import type { Command, Flag, Flags } from "../flags.js"
import type { LogLevelName, PlanIssue } from "./shared.js"

export * as FileSystem from "effect/FileSystem"
export * as Path from "effect/Path"

/** What a file operation fails with. */
export type PlatformError = PlatformErrors.PlatformError

/** Why the system refused a file operation (`NotFound`, `PermissionDenied`, …), if it did. */
export const systemReason = (error: PlatformError): string | undefined =>
  error.reason._tag === "BadArgument" ? undefined : error.reason._tag

/** A usage mistake the command-line library has already printed: one of `effect/cli`'s `CliError`s. */
export const isUsageError = (u: unknown): boolean => CliError.isCliError(u)

/** A flag's value, or why it is refused. */
type Reading = Either.Either<unknown, CliError.MissingOption | CliError.ValidationError>

/**
 * `flag` as `effect/cli` reads it: its text checked by the flag's own `read`. The refusal is a
 * value, and so is a required flag left out, so that every problem of a command line is told, as
 * `@effect/cli` does, where `effect/cli` would stop at the first. A switch is false when not given.
 */
const flagOf = (flag: Flag): CliFlag.Flag<Reading> => {
  if (flag._tag === "Switch") {
    return CliFlag.Boolean(flag.name).pipe(
      CliFlag.withDescription(flag.description),
      CliFlag.withDefault(false),
      CliFlag.map((given): Reading => Either.right(given))
    )
  }
  const read = (text: string): Reading =>
    Either.mapLeft(flag.read(text), (message) => new CliError.ValidationError({ message }))
  const text = CliFlag.String(flag.name).pipe(
    CliFlag.withMetavar(flag.metavar),
    CliFlag.withDescription(flag.description)
  )
  if (flag._tag === "Repeated") {
    return text.pipe(
      CliFlag.atLeast(0),
      CliFlag.map((texts): Reading => {
        const readings = texts.map(read)
        return readings.find(Either.isLeft) ?? Either.right(readings.map((reading) => Either.getOrThrow(reading)))
      })
    )
  }
  const absent = (): Reading =>
    flag._tag === "Required"
      ? Either.left(new CliError.MissingOption({ option: flag.name }))
      : Either.right(flag._tag === "Defaulted" ? flag.fallback : undefined)
  return text.pipe(CliFlag.optional, CliFlag.map(Option.match({ onNone: absent, onSome: read })))
}

/**
 * `command` on `effect/cli`, under the commands of `path`: run with its flags' values, or failed
 * with every refusal, which `effect/cli` then presents as it presents its own.
 */
const commandOf = (path: ReadonlyArray<string>) => (command: Command<Flags, unknown, Services>) =>
  CliCommand.make(
    command.name,
    Object.fromEntries(Object.entries(command.flags).map(([key, flag]) => [key, flagOf(flag)])),
    (readings) => {
      const refused = Object.values(readings).flatMap((reading) =>
        Either.isLeft(reading) ? [Either.leftOf(reading)] : []
      )
      if (refused.length > 0) {
        return Effect.fail(new CliError.ShowHelp({ commandPath: [...path, command.name], errors: refused }))
      }
      return command.run(
        Object.fromEntries(Object.entries(readings).map(([key, reading]) => [key, Either.getOrThrow(reading)]))
      )
    }
  ).pipe(CliCommand.withDescription(command.description))

const formatter = CliOutput.defaultFormatter({ colors: true })

/**
 * Where `effect/cli` writes help, the version and usage mistakes: help on stdout, in colour (taken
 * out by `withoutColour` where it is not wanted); the version alone, as `@effect/cli` prints it; a
 * usage mistake as its message alone on stderr, without the help `effect/cli` would print on
 * stdout beside it, which carries only what was asked for.
 */
const presenter: CliOutput.Presenter = {
  present: (event) => {
    switch (event._tag) {
      case "Help":
        return Console.log(formatter.formatHelpDoc(event.helpDoc))
      case "Version":
        return Console.log(event.version)
      case "InvalidInvocation":
        return Console.error(event.errors.map((error) => formatter.formatCliError(error)).join("\n\n"))
    }
  }
}

/**
 * The command line of `root` and its `subcommands`, on `effect/cli`: runs `argv` (as
 * `process.argv`: runtime and script first), printing help, `--version` and usage mistakes itself.
 * A command may need no more than the `Services` that `layer` provides.
 */
export const commandLine = (
  root: Command<Flags, unknown, Services>,
  subcommands: Arr.NonEmptyReadonlyArray<Command<Flags, unknown, Services>>,
  options: { readonly version: string }
): (argv: ReadonlyArray<string>) => Effect.Effect<void, unknown, Services> => {
  const run = CliCommand.runWith(
    commandOf([])(root).pipe(CliCommand.withSubcommands(subcommands.map(commandOf([root.name])))),
    { version: options.version }
  )
  return (argv) => Effect.provideService(run(argv.slice(2)), CliOutput.Presenter, presenter)
}

/** What the command needs on Node: file system, terminal, standard streams and the undici HTTP client. */
export type Services = NodeServices.NodeServices | HttpClient.HttpClient

/** The command's services on Node, with log lines written in logfmt to stderr (stdout carries the report). */
export const layer: Layer.Layer<Services> = Layer.mergeAll(
  NodeServices.layer,
  NodeHttpClient.layerUndici,
  Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)])
)

/** A minimum level of the log lines written. */
export type LogLevel = LogLevels.LogLevel

/** The level `--log-level` names. */
export const logLevelNamed = (name: LogLevelName): LogLevel => {
  switch (name) {
    case "all":
      return "All"
    case "trace":
      return "Trace"
    case "debug":
      return "Debug"
    case "info":
      return "Info"
    case "warning":
      return "Warn"
    case "error":
      return "Error"
    case "fatal":
      return "Fatal"
    case "none":
      return "None"
  }
}

/** Runs `self` writing log lines at `level` and above only. */
export const withMinimumLogLevel =
  (level: LogLevel) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.provideService(self, References.MinimumLogLevel, level)

/** Runs `self` writing debug lines too, and any lower level already written. */
export const withDebugLines = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(
    Effect.service(References.MinimumLogLevel),
    (level) => withMinimumLogLevel(LogLevels.isLessThan(level, "Debug") ? level : "Debug")(self)
  )

/**
 * Runs `self` with terminal escape sequences taken out of what it prints on stdout (`log`) where
 * `stdout` is false, and on stderr (`error`) where `stderr` is false: help is rendered in colour
 * wherever it goes.
 */
export const withoutColour =
  (stdout: boolean, stderr: boolean) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Console.consoleWith((console) => {
      const plain = (args: ReadonlyArray<unknown>) =>
        args.map((arg) => typeof arg === "string" ? withoutEscapes(arg) : arg)
      const uncoloured: Console.Console = Object.assign(Object.create(console), {
        log: stdout ? console.log : (...args: ReadonlyArray<unknown>) => console.log(...plain(args)),
        error: stderr ? console.error : (...args: ReadonlyArray<unknown>) => console.error(...plain(args))
      })
      return Effect.provideService(self, Console.Console, uncoloured)
    })

/** What a fault plan that does not decode fails with: the testing package's `ParseError`, holding Schema's issue. */
export interface PlanError {
  readonly issue: SchemaIssue.Issue
}

const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()

/** The tags of a union of tagged structs (such as `FaultPlan.Fault`), or `undefined` for any other union. */
const tagsOf = (union: SchemaAST.Union): ReadonlyArray<SchemaAST.LiteralValue> | undefined => {
  const tags = union.types.map((member) => {
    const tag = SchemaAST.isObjects(member)
      ? member.propertySignatures.find((property) => property.name === "_tag")?.type
      : undefined
    return tag !== undefined && SchemaAST.isLiteral(tag) ? tag.literal : undefined
  })
  return tags.every((tag) => tag !== undefined) ? tags : undefined
}

/**
 * The problems under `issue`, found at `path`. A value whose `_tag` is none of a tagged union's is
 * a problem at its `_tag`, with the tags it may have, as Effect 3 reports it: Effect 4 reports it
 * at the value, with every member's shape.
 */
const issuesAt = (issue: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey>): ReadonlyArray<PlanIssue> => {
  switch (issue._tag) {
    case "Pointer":
      return issuesAt(issue.issue, [...path, ...issue.path])
    case "Composite":
      return issue.issues.flatMap((inner) => issuesAt(inner, path))
    case "AnyOf": {
      if (issue.issues.length > 0) return issue.issues.flatMap((inner) => issuesAt(inner, path))
      const tags = tagsOf(issue.ast)
      if (tags !== undefined) {
        return [{
          path: [...path, "_tag"],
          message: `Expected ${tags.map((tag) => JSON.stringify(tag)).join(" | ")}`,
          wrongType: false
        }]
      }
    }
  }
  return formatIssue(issue).issues.map((found) => {
    const at = [...path, ...(found.path ?? []).map((key) => typeof key === "object" ? key.key : key)]
    return { path: at, message: found.message, wrongType: at.length === 0 && issue._tag === "InvalidType" }
  })
}

/** Every problem of a plan that does not decode, with where it is. */
export const planIssues = (error: PlanError): ReadonlyArray<PlanIssue> => issuesAt(error.issue, [])

/** An environment variable's text, `undefined` when it is not set (or set to "", which Effect 4 reads as unset). */
export const variable = (name: string): Effect.Effect<string | undefined, Config.ConfigError> =>
  Effect.map(Config.option(Config.String(name)), Option.getOrUndefined)

/**
 * Runs the command's effect as Node's main program: interrupted on SIGINT or SIGTERM, it ends with
 * the code `teardown` gives. The command prints its own failures, and its log lines go to stderr
 * through its own logger, so `runMain`'s error report is not wanted.
 */
export const runMain = (effect: Effect.Effect<void, unknown>, teardown: Teardown): void =>
  NodeRuntime.runMain(effect, { disableErrorReporting: true, teardown })
