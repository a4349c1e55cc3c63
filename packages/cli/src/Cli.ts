/**
 * The `resilient-ai` command and its subcommands, on the line's command-line library (`@effect/cli`
 * on Effect 3, `effect/cli` on Effect 4): each is described once, as data (`internal/flags.ts`),
 * and the seam makes the line's command of it.
 *
 * - `load` drives an OpenAI-compatible endpoint through a managed or self-hosted target and
 *   reports what the failure path cost, as a table or one JSON object; with `--metrics-port` it
 *   serves the policy's metrics for Prometheus while it runs.
 * - `faults` serves the fault server with a plan read from a JSON file, until interrupted.
 * - `demo` runs a load against the fault server with a realistic bad few seconds, and explains it.
 * - `storm` runs the storm simulator's scenarios under every policy and writes the report.
 *
 * Stdout carries only the report; progress and log lines go to stderr, colour only to a terminal
 * (and never with `NO_COLOR`). Usage mistakes (a bad flag value, named with what it accepts; an
 * unreadable plan; a managed target without a key; `--wizard` without a terminal) exit with code 2.
 * A load in which no call succeeded prints its report, says why on stderr and exits with 1, as
 * does anything unexpected. Ctrl-C interrupts any command (closing servers and connections) and
 * exits with 130; `load` first prints what it did so far.
 *
 * From code: `run` runs a command line as the bin does, and `exitCode` is the code it exits with.
 */
import {
  commandLine,
  FileSystem,
  isUsageError,
  layer,
  type LogLevel,
  logLevelNamed,
  type PlanError,
  planIssues,
  type PlatformError,
  systemReason,
  variable,
  withDebugLines,
  withMinimumLogLevel,
  withoutColour
} from "#cli-line"
import { ModelClient, Target } from "@resilient-ai/client"
import type { ClientLine } from "@resilient-ai/client/internal"
import { Prometheus, Telemetry } from "@resilient-ai/otel"
import { EffectLine, Either } from "@resilient-ai/policy/internal"
import { StormReport } from "@resilient-ai/storm"
import { FaultPlan, FaultServer } from "@resilient-ai/testing"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { constants } from "node:os"
import * as Demo from "./Demo.js"
import { colours } from "./internal/colour.js"
import * as Flags from "./internal/flags.js"
import { logLevelNames } from "./internal/line/shared.js"
import * as Progress from "./internal/progress.js"
import { refusal } from "./internal/wording.js"
import * as Load from "./Load.js"
import * as Storm from "./Storm.js"
import * as Summary from "./Summary.js"

/** The command's version, as `--version` prints it. */
const version = "0.1.0"

/** The environment variable the API key is read from; a key is never taken from a flag, where `ps` would show it. */
const apiKeyVariable = "RESILIENT_AI_API_KEY"

/** Sets the demo's size (calls; default 400) without a flag, so tests can run a short demo. */
const demoRequestsVariable = "RESILIENT_AI_DEMO_REQUESTS"

/** A usage mistake the command reports in one sentence, exiting with code 2. */
class CliError extends Data.TaggedError("CliError")<{ readonly message: string }> {}

/** A load that ran but in which no call succeeded: its report is printed, and this says why (exit 1). */
class NoCallSucceeded extends Data.TaggedError("NoCallSucceeded")<{ readonly message: string }> {}

/** The most calls `--concurrency` asks for; only typos go beyond it, since the target's gate caps it far lower. */
const maxConcurrency = 1_000_000

/**
 * The longest `--deadline-ms`: a day. Longer is a typo, and past 2^31 ms (24.8 days) Node's timers
 * overflow and fire at once.
 */
const maxDeadlineMs = 86_400_000

/** The highest `--rate`: calls are paced on the real clock, and past this the spacing is below 10 µs. */
const maxRate = 100_000

/**
 * The most `--clients` of `storm`: S3 simulates each caller (about 130 kB and 5 ms of CPU each, so
 * about a minute and 1.3 GB at the bound). The contention experiment grows with their square:
 * 1,000 clients already take minutes.
 */
const maxClients = 10_000

const verbose = Flags.switchFlag(
  "verbose",
  "Show the policy's log line for every attempt, on stderr (as --log-level debug)."
)

/**
 * Runs `effect` with the policy's attempt log lines shown when `--verbose`; otherwise the level is
 * `--log-level`'s, or errors only: the report counts the attempts, and a line per failed attempt
 * would bury it.
 */
const logging = (shown: boolean) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  shown ? withDebugLines(effect) : effect

/** Runs `use` with a progress bar on stderr (drawn only on a terminal), erased when it ends. */
const withProgress = <A, E, R>(
  label: string,
  total: number,
  use: (update: Progress.Update) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => Effect.scoped(Effect.flatMap(Progress.make(label, total), use))

/** The API key, if one is set: a blank value is none. */
const readApiKey: Effect.Effect<Redacted.Redacted | undefined, CliError> = variable(apiKeyVariable).pipe(
  Effect.map((key) => key === undefined || key.trim() === "" ? undefined : Redacted.make(key)),
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
  return (kind === "managed" ? Target.managed : Target.selfHosted)({ name: kind, baseUrl, model, apiKey }).pipe(
    Effect.mapError((invalid) => new CliError({ message: invalid.message }))
  )
}

/** `host:port` of a base URL, the port filled in from the scheme when the URL has none. */
const address = (baseUrl: string): string => {
  const url = new URL(baseUrl)
  return `${url.hostname}:${url.port === "" ? (url.protocol === "https:" ? "443" : "80") : url.port}`
}

/** Why no call of a load succeeded: where it was sent, and each kind of failure in its own words. */
const noCallSucceeded = (summary: Load.Summary, baseUrl: string): NoCallSucceeded =>
  new NoCallSucceeded({
    message: [
      `no call succeeded against ${address(baseUrl)}:`,
      ...Object.entries(summary.failuresByTag).map(([tag, calls]) =>
        `  ${tag} (${Flags.count(calls)} ${calls === 1 ? "call" : "calls"}): ${summary.failureExamples[tag]}`
      )
    ].join("\n")
  })

/**
 * Runs a load with a progress bar and prints its summary. Interrupted, it cancels the calls in
 * flight and prints the summary of what was done so far (it says it was interrupted) once the bar
 * is erased; a load in which no call succeeded ends with `NoCallSucceeded`.
 */
const runLoad = (
  client: ModelClient.Service,
  options: Load.Options,
  render: (summary: Load.Summary) => string
): Effect.Effect<void, NoCallSucceeded | CliError> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      let partial: Load.Summary | undefined
      const exit = yield* Effect.exit(restore(withProgress("load", options.requests, (onProgress) =>
        Load.run(client, {
          ...options,
          onProgress,
          onInterrupt: (summary) => Effect.sync(() => void (partial = summary))
        }))))
      const summary = Exit.isSuccess(exit) ? exit.value : partial
      if (summary !== undefined) yield* Console.log(render(summary))
      if (Exit.isFailure(exit)) return yield* Effect.failCause(exit.cause)
      if (exit.value.successes === 0) return yield* Effect.fail(noCallSucceeded(exit.value, client.target.baseUrl))
    })
  ).pipe(
    // The flags keep every setting within the load's rules; a refusal all the same is a usage mistake.
    Effect.catchTag("LoadSettingsError", (error) => Effect.fail(new CliError({ message: error.message })))
  )

/**
 * With `--metrics-port`, serves the toolkit's metrics for Prometheus (`resilient_ai_*` only: the
 * command's own Effect runtime metrics would be noise) until the scope closes, and says where on
 * stderr; a port it cannot listen on is a usage mistake.
 */
const metricsEndpoint = (port: number | undefined): Effect.Effect<void, CliError, Scope.Scope> =>
  port === undefined ? Effect.void : Prometheus.serve({ port, names: /^resilient_ai_/ }).pipe(
    Effect.provide(Telemetry.layer({ serviceName: "resilient-ai", serviceVersion: version })),
    Effect.mapError((error) => new CliError({ message: `--metrics-port ${port}: cannot listen (${error.reason})` })),
    Effect.flatMap((server) => Console.error(`metrics for Prometheus on ${server.url} while the load runs`))
  )

// Valid settings, to try one setting given on the command line against the target's own rules.
const template = { name: "template", baseUrl: "http://127.0.0.1/v1", model: "model" }

/**
 * `--flag` for a text setting of the target, refused by the target's own rules (`Target.decode`),
 * named after the flag: `--base-url must not hold credentials (…)`. A refused URL is shown masked.
 */
const targetSetting = (
  setting: "baseUrl" | "model",
  flag: string,
  metavar: string,
  description: string
): Flags.Value<"Required", string> => {
  const read: Flags.Read<string> = (text) => {
    const decoded = Target.decode(
      "self-hosted",
      { ...template, [setting]: text },
      (path) => path[0] === setting ? `--${flag}` : path.join(".")
    )
    return Either.map(Either.mapLeft(decoded, (invalid) => invalid.problems[0]!), () => text)
  }
  return Flags.checked(flag, metavar, read, description)
}

const load = Flags.command({
  name: "load",
  description: "Drive an OpenAI-compatible endpoint with N chat calls and report the failure path. Exits 1 when no " +
    "call succeeded (saying why), 130 on Ctrl-C (after printing the calls so far).",
  flags: {
    baseUrl: targetSetting(
      "baseUrl",
      "base-url",
      "url",
      "The API's base URL, up to and including the version: https://api.mistral.ai/v1."
    ),
    model: targetSetting("model", "model", "name", "The model every call asks for."),
    requests: Flags.whole(
      "requests",
      1,
      Load.maxRequests,
      `How many chat calls to make: ${Flags.range(1, Load.maxRequests)}.`
    ),
    concurrency: Flags.whole(
      "concurrency",
      1,
      maxConcurrency,
      `How many calls may be in flight at once, up to what the target's gate admits ` +
        `(${Target.managedDefaults.concurrency} managed, ${Target.selfHostedDefaults.concurrency} self-hosted): ` +
        "more is capped there, and the report says so."
    ),
    target: Flags.choice(
      "target",
      ["managed", "self-hosted"],
      "The capacity behind the endpoint: managed (elastic API, modest retry budget, queues) or " +
        "self-hosted (fixed pool, almost no retries, sheds). The API key is read from " + apiKeyVariable + "."
    ),
    deadlineMs: Flags.optional(Flags.whole(
      "deadline-ms",
      1,
      maxDeadlineMs,
      `Each call's deadline, in milliseconds (up to ${Flags.count(maxDeadlineMs)}, a day), from the moment it starts.`
    )),
    rate: Flags.optional(Flags.whole(
      "rate",
      1,
      maxRate,
      `Calls started per second (up to ${Flags.count(maxRate)}), as users arrive; without it a call starts ` +
        "when one ends."
    )),
    json: Flags.switchFlag("json", "Print the summary as one JSON object."),
    metricsPort: Flags.optional(Flags.whole(
      "metrics-port",
      0,
      65535,
      "Serve the policy's metrics for Prometheus on http://HOST:PORT/metrics, on every interface, while the load " +
        "runs (0 to 65535; 0 picks a free port). Where is said on stderr."
    )),
    verbose
  },
  run: (args) =>
    Effect.gen(function*() {
      const apiKey = yield* readApiKey
      const target = yield* makeTarget(args.target, args.baseUrl, args.model, apiKey)
      const client = yield* ModelClient.make(target)
      yield* metricsEndpoint(args.metricsPort)
      yield* runLoad(client, {
        requests: args.requests,
        concurrency: args.concurrency,
        deadline: args.deadlineMs === undefined ? undefined : Duration.millis(args.deadlineMs),
        ratePerSecond: args.rate
      }, args.json ? Summary.json : Summary.table)
    }).pipe(Effect.scoped, logging(args.verbose))
})

/** The instructions `faults` prints once the server listens. */
const faultsInstructions = (url: string, planPath: string): string =>
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
 * 599, actual 700`, in the words of the line's Schema; the same places on both lines). The
 * schema's own description of a whole plan is pages long, so a file that is not an object at all
 * is told the keys instead.
 */
const planProblems = (error: PlanError): string => {
  const keys = Object.keys(FaultPlan.Plan.fields).join(", ")
  const lines = planIssues(error).map((issue) => {
    if (issue.wrongType) return `  expected a JSON object with some of: ${keys}`
    const where = issue.path.length === 0 ? "" : `${pathText(issue.path)}: `
    return `  ${where}${issue.message}`
  })
  return [...new Set(lines)].join("\n")
}

/** Why a plan file could not be read, in a few words. */
const unreadable = (error: PlatformError): string => {
  const reason = systemReason(error)
  if (reason === "NotFound") return "no such file"
  if (reason === "PermissionDenied") return "permission denied"
  return error.message
}

/** Reads and decodes a fault plan file, failing with a message that names the flag, the file and the problem. */
const readPlan = (path: string): Effect.Effect<FaultPlan.Plan, CliError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(path).pipe(
      Effect.mapError((error) =>
        new CliError({ message: `--plan must be a readable fault plan (JSON); ${path}: ${unreadable(error)}` })
      )
    )
    return yield* FaultPlan.decodeJson(text).pipe(
      Effect.mapError((error) =>
        new CliError({ message: `--plan ${path} is not a fault plan:\n${planProblems(error)}` })
      )
    )
  })

const faults = Flags.command({
  name: "faults",
  description: "Serve the fault server with a plan from a JSON file until interrupted (Ctrl-C).",
  flags: {
    port: Flags.withDefault(
      Flags.whole(
        "port",
        0,
        65535,
        "The port to listen on on 127.0.0.1, 0 to 65535; 0 (the default) picks a free one."
      ),
      0
    ),
    plan: Flags.nonEmpty(
      "plan",
      "file",
      "a fault plan file (JSON)",
      "A fault plan as JSON: steps, windows, capacity, otherwise, latencyMs, seed."
    )
  },
  run: ({ plan, port }) =>
    Effect.gen(function*() {
      const decoded = yield* readPlan(plan)
      const server = yield* FaultServer.serve(decoded, port).pipe(
        Effect.mapError((error) => new CliError({ message: `--port ${port}: ${error.message}` }))
      )
      yield* Effect.addFinalizer(() => Console.error("fault server closed"))
      yield* Console.log(faultsInstructions(server.url, plan))
      return yield* Effect.never
    }).pipe(Effect.scoped)
})

/**
 * The demo's size, if the variable sets it: an integer as Effect 3's `Config.integer` reads one
 * (`1e3` and ` 5` too), else refused in the words the load's own rule is refused in. Unset or set
 * to "" (which Effect 4's environment reads as unset), the demo's own size.
 */
const demoRequests: Effect.Effect<number | undefined, CliError> = variable(demoRequestsVariable).pipe(
  Effect.mapError((error) => new CliError({ message: `${demoRequestsVariable}: ${error.message}` })),
  Effect.flatMap((text) => {
    if (text === undefined || text === "") return Effect.succeed(undefined)
    const value = Number(text)
    return Number.isInteger(value) ? Effect.succeed(value) : Effect.fail(
      new CliError({ message: refusal(demoRequestsVariable, Flags.range(1, Load.maxRequests), text) })
    )
  })
)

/** Settings of the demo the load refused: a usage error, naming the variable the call count comes from. */
const demoRefused = (error: Load.LoadSettingsError): CliError =>
  new CliError({
    message: error.problems.map((problem) =>
      refusal(
        problem.setting === "requests" ? demoRequestsVariable : problem.setting,
        problem.rule,
        String(problem.value)
      )
    ).join("; ")
  })

/** Runs the demo and prints its introduction, summary table and explanation. */
const demo: Effect.Effect<void, CliError, ClientLine.HttpClient.HttpClient> = Effect.gen(function*() {
  const options: Demo.Options = { requests: yield* demoRequests }
  const settings = Demo.settings(options)
  // Checked by the load's own rules before the introduction is printed, so a refused count runs nothing.
  const refused = Load.problems(settings)
  if (refused.length > 0) return yield* new Load.LoadSettingsError({ problems: refused })
  yield* Console.log([...Demo.introduction(options), ""].join("\n"))
  const result = yield* withProgress("demo", settings.requests, (onProgress) => Demo.run({ ...options, onProgress }))
  yield* Console.log(
    [Summary.table(result.summary), "", "What it means", ...Demo.explanation(result)].join("\n")
  )
}).pipe(Effect.catchTag("LoadSettingsError", (error) => Effect.fail(demoRefused(error))))

const demoCommand = Flags.command({
  name: "demo",
  description: "Run a load against a local fault server with a realistic bad few seconds, and explain the report. " +
    "No API key, no network.",
  flags: { verbose },
  run: (args) => demo.pipe(logging(args.verbose))
})

const scenarios = ["all", ...StormReport.scenarioIds] as const

const stormCommand = Flags.command({
  name: "storm",
  description: "Compare retry policies on a simulated provider: correlated failure, outage and recovery, a " +
    "synchronised 429 burst, a recovery stampede, a saturated pool, ten services on one key, a client stampede on " +
    "a healthy provider (with the health probe's diagnosis), and Brooker's contention experiment.",
  flags: {
    scenario: Flags.repeated(Flags.checked(
      "scenario",
      scenarios.join(" | "),
      Flags.accepting("scenario", Flags.oneOf(scenarios), Flags.parseChoice(scenarios)),
      "A scenario to run (repeat for several): S1, S1b, S2–S7, contention, or all (the default)."
    )),
    clients: Flags.optional(Flags.whole(
      "clients",
      1,
      maxClients,
      `Callers in S3's synchronised burst (200) and in the contention experiment (100), up to ` +
        `${Flags.count(maxClients)}; the contention experiment's time grows with their square.`
    )),
    seed: Flags.withDefault(
      Flags.whole("seed", Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, "The seed every run uses."),
      1
    ),
    out: Flags.withDefault(
      Flags.nonEmpty(
        "out",
        "directory",
        "a folder to write the report in",
        "The report folder: report.md, one SVG chart per scenario, figures.json."
      ),
      "storm-report"
    )
  },
  run: (args) => {
    const chosen = args.scenario.length === 0 || args.scenario.includes("all")
      ? StormReport.scenarioIds
      : StormReport.scenarioIds.filter((id) => args.scenario.includes(id))
    const { clients } = args
    const command = [
      "resilient-ai storm",
      ...(chosen.length === StormReport.scenarioIds.length ? [] : chosen.map((id) => `--scenario ${id}`)),
      ...(clients === undefined ? [] : [`--clients ${clients}`]),
      `--seed ${args.seed}`
    ].join(" ")
    return Effect.asVoid(Storm.run({ scenarios: chosen, clients, seed: args.seed, out: args.out, command }))
  }
})

/** `resilient-ai` with its subcommands. */
const cli = commandLine(
  Flags.command({
    name: "resilient-ai",
    description: "Reliable calls to AI model APIs: drive an endpoint, serve faults, see the demo.",
    flags: {},
    run: () =>
      Console.log("resilient-ai: try `resilient-ai demo`, or `resilient-ai --help` for load, faults and storm.")
  }),
  [load, faults, demoCommand, stormCommand],
  { version }
)

/** Prints why the command failed: the command-line library has already printed its own usage errors. */
const report = (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
  if (EffectLine.isInterruptedOnly(cause)) return Effect.void
  const failure = EffectLine.failureOf(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (isUsageError(error)) return Effect.void
    if (error instanceof CliError || error instanceof NoCallSucceeded) {
      return Console.error(`resilient-ai: ${error.message}`)
    }
  }
  return Console.error(Cause.pretty(cause))
}

const logLevels = Flags.oneOf(logLevelNames)

const readLogLevel = Flags.accepting("log-level", logLevels, (text) => {
  const name = Flags.parseChoice(logLevelNames)(text)
  return name === undefined ? undefined : logLevelNamed(name)
})

/** A command line with `--log-level` taken out, and the level it set, if any. */
interface Leveled {
  readonly level: LogLevel | undefined
  readonly args: ReadonlyArray<string>
}

/**
 * Takes `--log-level LEVEL` (or `--log-level=LEVEL`) out of `args`, wherever it stands before a
 * `--`. @effect/cli lists it on every help page but reads it only before the subcommand, and
 * refuses it after; read here, it works in both places, on both lines, and a bad level is named
 * like any flag.
 */
const logLevelOf = (args: ReadonlyArray<string>): Effect.Effect<Leveled, CliError> => {
  let level: LogLevel | undefined
  const rest: Array<string> = []
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    if (arg === "--") {
      rest.push(...args.slice(index))
      break
    }
    const value = arg === "--log-level"
      ? args[++index]
      : arg.startsWith("--log-level=")
      ? arg.slice("--log-level=".length)
      : null
    if (value === null) {
      rest.push(arg)
      continue
    }
    const read = value === undefined ? Either.left(`--log-level needs a value, ${logLevels}`) : readLogLevel(value)
    if (Either.isLeft(read)) return Effect.fail(new CliError({ message: Either.leftOf(read) }))
    level = Either.rightOf(read)
  }
  return Effect.succeed({ level, args: rest })
}

/** `--wizard` asks its questions on stdin: without a terminal there, it would wait for ever. */
const wizardNeedsTerminal = (args: ReadonlyArray<string>): Effect.Effect<void, CliError> =>
  args.includes("--wizard") && process.stdin.isTTY !== true
    ? Effect.fail(
      new CliError({
        message: "--wizard asks its questions on a terminal, and stdin is not one: give the flags on the command " +
          "line instead (resilient-ai <command> --help lists them)"
      })
    )
    : Effect.void

/** Runs the command line `argv` (as `process.argv`: runtime and script first) with the Node services. */
export const run = (argv: ReadonlyArray<string>): Effect.Effect<void, unknown> =>
  Effect.gen(function*() {
    const { args, level } = yield* logLevelOf(argv.slice(2))
    yield* wizardNeedsTerminal(args)
    yield* cli([...argv.slice(0, 2), ...args]).pipe(withMinimumLogLevel(level ?? logLevelNamed("error")))
  }).pipe(
    Effect.onError(report),
    withoutColour(colours(process.stdout), colours(process.stderr)),
    Effect.provide(layer)
  )

/**
 * The exit code of a run: 0 for success, 2 for a usage mistake, 1 for anything else (no call
 * succeeded, or a failure nobody expected), and 128 + the signal's number for a run the signal
 * interrupted (130 for Ctrl-C, 143 for SIGTERM), as shells report a program a signal ended.
 */
export const exitCode = (exit: Exit.Exit<unknown, unknown>, signal: NodeJS.Signals = "SIGINT"): number => {
  if (Exit.isSuccess(exit)) return 0
  if (EffectLine.isInterruptedOnly(exit.cause)) return 128 + (constants.signals[signal] ?? constants.signals.SIGINT)
  const failure = EffectLine.failureOf(exit.cause)
  if (Option.isSome(failure)) {
    if (isUsageError(failure.value) || failure.value instanceof CliError) return 2
  }
  return 1
}
