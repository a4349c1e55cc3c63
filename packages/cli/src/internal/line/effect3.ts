/**
 * The command's seam, Effect 3 side: what the `resilient-ai` command uses that Effect 4 spells
 * differently — its command-line library (`@effect/cli`, folded into `effect/cli` on Effect 4),
 * the Node services and files of `@effect/platform`, log levels and the logger, the console, the
 * issues of a fault plan that does not decode, and Node's `runMain`. `effect4.ts` offers the same
 * names in Effect 4's terms; the package imports this as `#cli-line` (docs/effect-lines.md).
 */
import * as CliCommand from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import type * as PlatformErrors from "@effect/platform/Error"
import type * as HttpClient from "@effect/platform/HttpClient"
import type { Teardown } from "@effect/platform/Runtime"
import { Either } from "@resilient-ai/policy/internal"
import * as Arr from "effect/Array"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevels from "effect/LogLevel"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import { withoutEscapes } from "../colour.js"
import type { Command, Flag, Flags } from "../flags.js"
import type { LogLevelName, PlanIssue } from "./shared.js"

export * as FileSystem from "@effect/platform/FileSystem"
export * as Path from "@effect/platform/Path"

/** What a file operation fails with. */
export type PlatformError = PlatformErrors.PlatformError

/** Why the system refused a file operation (`NotFound`, `PermissionDenied`, …), if it did. */
export const systemReason = (error: PlatformError): string | undefined =>
  error._tag === "SystemError" ? error.reason : undefined

/** A usage mistake the command-line library has already printed: `@effect/cli`'s `ValidationError`. */
export const isUsageError = (u: unknown): boolean => ValidationError.isValidationError(u)

/** `flag` as `@effect/cli` reads it: its text checked by the flag's own `read`, a refusal printed as said. */
const optionOf = (flag: Flag): Options.Options<unknown> => {
  if (flag._tag === "Switch") return Options.boolean(flag.name).pipe(Options.withDescription(flag.description))
  const check = (text: string): Effect.Effect<unknown, ValidationError.ValidationError> =>
    Effect.mapError(Either.toEffect(flag.read(text)), (message) => ValidationError.invalidValue(HelpDoc.p(message)))
  const text = Options.text(flag.name).pipe(Options.withPseudoName(flag.metavar))
  switch (flag._tag) {
    case "Repeated":
      return text.pipe(
        Options.withDescription(flag.description),
        Options.repeated,
        Options.mapEffect((texts) => Effect.forEach(texts, check))
      )
    case "Required":
      return text.pipe(Options.mapEffect(check), Options.withDescription(flag.description))
    case "Optional":
      return text.pipe(
        Options.mapEffect(check),
        Options.withDescription(flag.description),
        Options.optional,
        Options.map(Option.getOrUndefined)
      )
    case "Defaulted":
      return text.pipe(
        Options.mapEffect(check),
        Options.withDescription(flag.description),
        Options.withDefault(flag.fallback)
      )
  }
}

const commandOf = (command: Command<Flags, unknown, Services>) =>
  CliCommand.make(
    command.name,
    Object.fromEntries(Object.entries(command.flags).map(([key, flag]) => [key, optionOf(flag)])),
    (values) => command.run(values)
  ).pipe(CliCommand.withDescription(command.description))

/**
 * The command line of `root` and its `subcommands`, on `@effect/cli`: runs `argv` (as
 * `process.argv`: runtime and script first), printing help, `--version` and usage mistakes itself.
 * A command may need no more than the `Services` that `layer` provides.
 */
export const commandLine = (
  root: Command<Flags, unknown, Services>,
  subcommands: Arr.NonEmptyReadonlyArray<Command<Flags, unknown, Services>>,
  options: { readonly version: string }
): (argv: ReadonlyArray<string>) => Effect.Effect<void, unknown, Services> =>
  CliCommand.run(commandOf(root).pipe(CliCommand.withSubcommands(Arr.map(subcommands, commandOf))), {
    name: root.name,
    version: options.version
  })

/** What the command needs on Node: file system, terminal and the undici HTTP client. */
export type Services = NodeContext.NodeContext | HttpClient.HttpClient

/** The command's services on Node, with log lines written in logfmt to stderr (stdout carries the report). */
export const layer: Layer.Layer<Services> = Layer.mergeAll(
  NodeContext.layer,
  NodeHttpClient.layerUndici,
  Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))
)

/** A minimum level of the log lines written. */
export type LogLevel = LogLevels.LogLevel

/** The level `--log-level` names. */
export const logLevelNamed = (name: LogLevelName): LogLevel => {
  switch (name) {
    case "all":
      return LogLevels.All
    case "trace":
      return LogLevels.Trace
    case "debug":
      return LogLevels.Debug
    case "info":
      return LogLevels.Info
    case "warning":
      return LogLevels.Warning
    case "error":
      return LogLevels.Error
    case "fatal":
      return LogLevels.Fatal
    case "none":
      return LogLevels.None
  }
}

/** Runs `self` writing log lines at `level` and above only. */
export const withMinimumLogLevel =
  (level: LogLevel) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Logger.withMinimumLogLevel(self, level)

/** Runs `self` writing debug lines too, and any lower level already written. */
export const withDebugLines = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(
    FiberRef.get(FiberRef.currentMinimumLogLevel),
    (level) => Logger.withMinimumLogLevel(self, LogLevels.lessThan(level, LogLevels.Debug) ? level : LogLevels.Debug)
  )

/**
 * Runs `self` with terminal escape sequences taken out of what it prints on stdout (`log`) where
 * `stdout` is false, and on stderr (`error`) where `stderr` is false: `@effect/cli` renders help and
 * its errors in colour wherever they go.
 */
export const withoutColour =
  (stdout: boolean, stderr: boolean) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Console.consoleWith((console) => {
      const plain = (args: ReadonlyArray<unknown>) =>
        args.map((arg) => typeof arg === "string" ? withoutEscapes(arg) : arg)
      return Effect.withConsole(self, {
        ...console,
        log: stdout ? console.log : (...args) => console.log(...plain(args)),
        error: stderr ? console.error : (...args) => console.error(...plain(args))
      })
    })

/** What a fault plan that does not decode fails with: Schema's `ParseError`. */
export type PlanError = ParseResult.ParseError

/**
 * Every problem of a plan that does not decode, with where it is. "Expected undefined" (the other
 * side of every optional field) is left out.
 */
export const planIssues = (error: PlanError): ReadonlyArray<PlanIssue> =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .filter((issue) => !issue.message.startsWith("Expected undefined,"))
    .map((issue) => ({
      path: issue.path,
      message: issue.message,
      wrongType: issue.path.length === 0 && issue._tag === "Type"
    }))

/** An environment variable's text, `undefined` when it is not set. */
export const variable = (name: string): Effect.Effect<string | undefined, ConfigError.ConfigError> =>
  Effect.map(Config.option(Config.string(name)), Option.getOrUndefined)

/**
 * Runs the command's effect as Node's main program: interrupted on SIGINT or SIGTERM, it ends with
 * the code `teardown` gives. The command prints its own failures, and its log lines go to stderr
 * through its own logger, so neither `runMain`'s error report nor its pretty logger (which writes
 * to stdout) is wanted.
 */
export const runMain = (effect: Effect.Effect<void, unknown>, teardown: Teardown): void =>
  NodeRuntime.runMain(effect, { disableErrorReporting: true, disablePrettyLogger: true, teardown })
