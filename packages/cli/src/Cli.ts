/**
 * The `resilient-ai` command and its subcommands, on `@effect/cli`.
 *
 * - `load` drives an OpenAI-compatible endpoint through a managed or self-hosted target and
 *   reports what the failure path cost, as a table or one JSON object.
 * - `faults` serves the fault server with a plan read from a JSON file, until interrupted.
 * - `demo` runs a load against the fault server with a realistic bad few seconds, and explains it.
 *
 * Stdout carries only the report; progress and log lines go to stderr. Usage mistakes (a bad
 * flag, a base URL that is not http(s), a count below 1, an unreadable plan, a managed target
 * without a key) exit with code 2, anything unexpected with 1.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as FileSystem from "@effect/platform/FileSystem"
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as Runtime from "@effect/platform/Runtime"
import { ModelClient, Target } from "@resilient-ai/client"
import { FaultPlan, FaultServer, StormReport } from "@resilient-ai/testing"
import * as Cause from "effect/Cause"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Redacted from "effect/Redacted"
import * as Demo from "./Demo.js"
import * as Load from "./Load.js"
import * as Progress from "./Progress.js"
import * as Storm from "./Storm.js"
import * as Summary from "./Summary.js"

/** The command's version, as `--version` prints it. */
export const version = "0.1.0"

/** The environment variable the API key is read from; a key is never taken from a flag, where `ps` would show it. */
export const apiKeyVariable = "RESILIENT_AI_API_KEY"

/** Sets the demo's size (calls; default 400) without a flag, so tests can run a short demo. */
export const demoRequestsVariable = "RESILIENT_AI_DEMO_REQUESTS"

/** A usage mistake the command reports in one sentence, exiting with code 2. */
export class CliError extends Data.TaggedError("CliError")<{ readonly message: string }> {}

const atLeastOne = (name: string) =>
  Options.integer(name).pipe(
    Options.filterMap(
      (value) => value >= 1 ? Option.some(value) : Option.none(),
      `--${name} must be a whole number of at least 1`
    )
  )

const verbose = Options.boolean("verbose").pipe(
  Options.withDescription("Show the policy's log line for every attempt, on stderr.")
)

/**
 * Runs `effect` with the policy's attempt log lines hidden unless `--verbose`: the report
 * counts them, and a line per failed attempt would bury it.
 */
const logging = (shown: boolean) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Logger.withMinimumLogLevel(effect, shown ? LogLevel.Debug : LogLevel.Error)

/** Runs `use` with a progress bar on stderr (drawn only on a terminal), erased when it ends. */
const withProgress = <A, E, R>(
  label: string,
  total: number,
  use: (update: Progress.Update) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => Effect.scoped(Effect.flatMap(Progress.make(label, total), use))

const readApiKey: Effect.Effect<Redacted.Redacted | undefined, CliError> = Config.option(
  Config.redacted(apiKeyVariable)
).pipe(
  Effect.map(Option.filter((key) => Redacted.value(key).trim() !== "")),
  Effect.map(Option.getOrUndefined),
  Effect.mapError((error) => new CliError({ message: `${apiKeyVariable}: ${error.message}` }))
)

/** Builds the target `load` drives, named after its kind. */
const makeTarget = (
  kind: Target.Kind,
  baseUrl: string,
  model: string,
  apiKey: Redacted.Redacted | undefined
): Effect.Effect<Target.Target, CliError> => {
  if (kind === "managed" && apiKey === undefined) {
    return Effect.fail(
      new CliError({
        message: `a managed target needs an API key: set ${apiKeyVariable} (use --target self-hosted for an ` +
          `endpoint without one)`
      })
    )
  }
  return Effect.try({
    try: () => (kind === "managed" ? Target.managed : Target.selfHosted)({ name: kind, baseUrl, model, apiKey }),
    catch: (error) => new CliError({ message: error instanceof Error ? error.message : String(error) })
  })
}

const load = Command.make(
  "load",
  {
    baseUrl: Options.text("base-url").pipe(
      Options.withDescription("The API's base URL, up to and including the version: https://api.mistral.ai/v1."),
      Options.filterMap(
        (text) => Target.isHttpUrl(text) ? Option.some(text) : Option.none(),
        "--base-url must be an http(s) URL, such as https://api.mistral.ai/v1"
      )
    ),
    model: Options.text("model").pipe(Options.withDescription("The model every call asks for.")),
    requests: atLeastOne("requests").pipe(Options.withDescription("How many chat calls to make.")),
    concurrency: atLeastOne("concurrency").pipe(Options.withDescription("How many calls may be in flight at once.")),
    target: Options.choice("target", ["managed", "self-hosted"]).pipe(
      Options.withDescription(
        "The capacity behind the endpoint: managed (elastic API, modest retry budget, queues) or " +
          "self-hosted (fixed pool, almost no retries, sheds). The API key is read from " + apiKeyVariable + "."
      )
    ),
    deadlineMs: atLeastOne("deadline-ms").pipe(
      Options.withDescription("Each call's deadline, in milliseconds, from the moment it starts."),
      Options.optional
    ),
    rate: atLeastOne("rate").pipe(
      Options.withDescription("Calls started per second, as users arrive; without it a call starts when one ends."),
      Options.optional
    ),
    json: Options.boolean("json").pipe(Options.withDescription("Print the summary as one JSON object.")),
    verbose
  },
  (args) =>
    Effect.gen(function*() {
      const apiKey = yield* readApiKey
      const target = yield* makeTarget(args.target, args.baseUrl, args.model, apiKey)
      const client = yield* ModelClient.make(target)
      const summary = yield* withProgress("load", args.requests, (onProgress) =>
        Load.run(client, {
          requests: args.requests,
          concurrency: args.concurrency,
          deadline: Option.getOrUndefined(Option.map(args.deadlineMs, Duration.millis)),
          ratePerSecond: Option.getOrUndefined(args.rate),
          onProgress
        }))
      yield* Console.log(args.json ? Summary.json(summary) : Summary.table(summary))
    }).pipe(logging(args.verbose))
).pipe(
  Command.withDescription("Drive an OpenAI-compatible endpoint with N chat calls and report the failure path.")
)

/** The instructions `faults` prints once the server listens. */
export const faultsInstructions = (url: string, planPath: string): string =>
  [
    `fault server listening on ${url} (plan: ${planPath})`,
    ``,
    `Point an OpenAI client at it (any API key is accepted):`,
    `  OPENAI_BASE_URL=${url} OPENAI_API_KEY=any node app.js`,
    `  new OpenAI({ baseURL: "${url}", apiKey: "any" })`,
    `Or drive it:`,
    `  resilient-ai load --base-url ${url} --model test-model --requests 100 --concurrency 8 --target self-hosted`,
    ``,
    `Press Ctrl-C to stop.`
  ].join("\n")

const pathText = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (text, key) => typeof key === "number" ? `${text}[${key}]` : text === "" ? String(key) : `${text}.${String(key)}`,
    ""
  )

/**
 * One line per problem, with where it is (`steps[0].status: Expected a number between 400 and
 * 599, actual 700`). The schema's own description of a whole plan is pages long, so a file that
 * is not an object at all is told the keys instead, and "Expected undefined" (the other side of
 * every optional field) is left out.
 */
export const planProblems = (error: ParseResult.ParseError): string => {
  const keys = Object.keys(FaultPlan.Plan.fields).join(", ")
  const lines = ParseResult.ArrayFormatter.formatErrorSync(error)
    .filter((issue) => !issue.message.startsWith("Expected undefined,"))
    .map((issue) => {
      if (issue.path.length === 0 && issue._tag === "Type") return `  expected a JSON object with some of: ${keys}`
      const where = issue.path.length === 0 ? "" : `${pathText(issue.path)}: `
      return `  ${where}${issue.message}`
    })
  return [...new Set(lines)].join("\n")
}

/** Reads and decodes a fault plan file, failing with a message that names the file and the problem. */
export const readPlan = (path: string): Effect.Effect<FaultPlan.Plan, CliError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(path).pipe(
      Effect.mapError((error) => new CliError({ message: `cannot read the plan ${path}: ${error.message}` }))
    )
    return yield* FaultPlan.decodeJson(text).pipe(
      Effect.mapError((error) => new CliError({ message: `${path} is not a fault plan:\n${planProblems(error)}` }))
    )
  })

const faults = Command.make(
  "faults",
  {
    port: Options.integer("port").pipe(
      Options.withDescription("The port to listen on on 127.0.0.1; 0 (the default) picks a free one."),
      Options.filterMap(
        (port) => port >= 0 && port <= 65535 ? Option.some(port) : Option.none(),
        "--port must be between 0 and 65535"
      ),
      Options.withDefault(0)
    ),
    plan: Options.file("plan", { exists: "yes" }).pipe(
      Options.withDescription("A fault plan as JSON: steps, windows, capacity, otherwise, latencyMs, seed.")
    )
  },
  ({ plan, port }) =>
    Effect.gen(function*() {
      const decoded = yield* readPlan(plan)
      const server = yield* FaultServer.serve(decoded, port).pipe(
        Effect.mapError((error) => new CliError({ message: `--port ${port}: ${error.message}` }))
      )
      yield* Effect.addFinalizer(() => Console.error("fault server closed"))
      yield* Console.log(faultsInstructions(server.url, plan))
      return yield* Effect.never
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Serve the fault server with a plan from a JSON file until interrupted (Ctrl-C)."))

const demoRequests: Effect.Effect<number | undefined, CliError> = Config.option(Config.integer(demoRequestsVariable))
  .pipe(
    Effect.mapError((error) => new CliError({ message: `${demoRequestsVariable}: ${error.message}` })),
    Effect.flatMap(Option.match({
      onNone: () => Effect.succeed(undefined),
      onSome: (requests) =>
        requests >= 1
          ? Effect.succeed(requests)
          : Effect.fail(new CliError({ message: `${demoRequestsVariable} must be at least 1, got ${requests}` }))
    }))
  )

/** Runs the demo and prints its introduction, summary table and explanation. */
export const demo: Effect.Effect<void, CliError, HttpClient.HttpClient> = Effect.gen(function*() {
  const options: Demo.Options = { requests: yield* demoRequests }
  yield* Console.log([...Demo.introduction(options), ""].join("\n"))
  const result = yield* withProgress(
    "demo",
    Demo.settings(options).requests,
    (onProgress) => Demo.run({ ...options, onProgress })
  )
  yield* Console.log(
    [Summary.table(result.summary), "", "What it means", ...Demo.explanation(result)].join("\n")
  )
})

const demoCommand = Command.make("demo", { verbose }, (args) => demo.pipe(logging(args.verbose))).pipe(
  Command.withDescription(
    "Run a load against a local fault server with a realistic bad few seconds, and explain the report. " +
      "No API key, no network."
  )
)

const stormCommand = Command.make(
  "storm",
  {
    scenario: Options.choice("scenario", ["all", ...StormReport.scenarioIds]).pipe(
      Options.repeated,
      Options.withDescription("A scenario to run (repeat for several): S1–S5, contention, or all (the default).")
    ),
    clients: atLeastOne("clients").pipe(
      Options.withDescription("Callers in S3's synchronised burst (200) and in the contention experiment (100)."),
      Options.optional
    ),
    seed: Options.integer("seed").pipe(Options.withDescription("The seed every run uses."), Options.withDefault(1)),
    out: Options.text("out").pipe(
      Options.withDescription("The report folder: report.md, one SVG chart per scenario, figures.json."),
      Options.withDefault("storm-report")
    )
  },
  (args) => {
    const scenarios = args.scenario.length === 0 || args.scenario.includes("all")
      ? StormReport.scenarioIds
      : StormReport.scenarioIds.filter((id) => args.scenario.includes(id))
    const clients = Option.getOrUndefined(args.clients)
    const command = [
      "resilient-ai storm",
      ...(scenarios.length === StormReport.scenarioIds.length ? [] : scenarios.map((id) => `--scenario ${id}`)),
      ...(clients === undefined ? [] : [`--clients ${clients}`]),
      `--seed ${args.seed}`
    ].join(" ")
    return Effect.asVoid(Storm.run({ scenarios, clients, seed: args.seed, out: args.out, command }))
  }
).pipe(
  Command.withDescription(
    "Compare retry policies on a simulated provider: correlated failure, outage and recovery, a synchronised 429 " +
      "burst, a recovery stampede, a saturated pool, and Brooker's contention experiment."
  )
)

/** `resilient-ai` with its subcommands. */
export const command = Command.make("resilient-ai", {}, () =>
  Console.log(
    "resilient-ai: try `resilient-ai demo`, or `resilient-ai --help` for load, faults and storm."
  )).pipe(
    Command.withDescription("Reliable calls to AI model APIs: drive an endpoint, serve faults, see the demo."),
    Command.withSubcommands([load, faults, demoCommand, stormCommand])
  )

const cli = Command.run(command, { name: "resilient-ai", version })

/** What the command needs on Node: file system, terminal, the undici HTTP client, and log lines on stderr. */
export const layer: Layer.Layer<NodeContext.NodeContext | HttpClient.HttpClient> = Layer.mergeAll(
  NodeContext.layer,
  NodeHttpClient.layerUndici,
  // Stdout carries the report (with --json, only one object), so log lines go to stderr.
  Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))
)

/** Prints why the command failed: @effect/cli has already printed its own usage errors. */
const report = (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.void
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    if (ValidationError.isValidationError(failure.value)) return Effect.void
    if (failure.value instanceof CliError) return Console.error(`resilient-ai: ${failure.value.message}`)
  }
  return Console.error(Cause.pretty(cause))
}

/** Runs the command line `argv` (as `process.argv`: runtime and script first) with the Node services. */
export const run = (argv: ReadonlyArray<string>): Effect.Effect<void, unknown> =>
  cli(argv).pipe(Effect.tapErrorCause(report), Effect.provide(layer))

/** The exit code of a run: 0 for success or Ctrl-C, 2 for a usage mistake, 1 for anything else. */
export const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return 0
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) {
    if (ValidationError.isValidationError(failure.value) || failure.value instanceof CliError) return 2
  }
  return 1
}

/** `NodeRuntime.runMain`'s teardown with `exitCode`. */
export const teardown: Runtime.Teardown = (exit, onExit) => onExit(exitCode(exit))
