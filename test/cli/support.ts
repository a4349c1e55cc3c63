/**
 * Helpers shared by the CLI tests: targets pointed at a fault server, the command line run in this
 * process, and the built bin run as a child process.
 */
import { line, printingInto } from "#test-line"
import { Cli } from "@resilient-ai/cli"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { bundled, root } from "../built.js"
import { whenPrinted } from "../childOutput.js"

export { apiKey, eventually, HttpLive, managedAt, selfHostedAt } from "../client/support.js"

export { requireBuild, root } from "../built.js"

/**
 * The command the tests run: the bin's entry bundled with the sources it loads, for the line the
 * tests run on, one file for Node to read. The same code as the build; a run costs about 1
 * CPU-second instead of 2.5 (loading the build's few hundred modules one by one), which over the
 * bin's tests was a tenth of the suite. `builtBin` runs in the demo's test, so the bin as published
 * is run too.
 */
export const bin = bundled("packages/cli/src/main.ts", line)

/**
 * The bin, as a user runs it: it runs the build in `packages/cli/dist`, Effect 3's. The Effect 4
 * build (`dist-effect4`) runs only from the package packed for Effect 4 (its `effect` resolves from
 * here to Effect 3's), so on Effect 4 this is the bundle.
 */
export const builtBin = line === "effect3"
  ? fileURLToPath(new URL("../../packages/cli/bin/resilient-ai.js", import.meta.url))
  : bin

/** How a run of the bin ended. */
export interface Ran {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** The environment the bin runs with: this process's, without an API key unless given. */
const environment = (env: Readonly<Record<string, string>>): NodeJS.ProcessEnv => {
  const { RESILIENT_AI_API_KEY: _, ...rest } = process.env
  return { ...rest, ...env }
}

/** What a command printed so far. */
export interface Output {
  readonly stdout: string
  readonly stderr: string
}

/** A running bin: its output so far, a way to wait for what it prints, and for it to end. */
export interface Running {
  readonly output: () => Output
  readonly signal: (signal: NodeJS.Signals) => void
  /**
   * Waits until the output satisfies `check`, woken by the output itself rather than a timer, so a
   * slow machine only makes it wait longer; if the bin ends first, dies saying `what` never came.
   * The test's own timeout is the outer limit.
   */
  readonly printed: (check: (output: Output) => boolean, what: string) => Effect.Effect<void>
  readonly exited: Effect.Effect<Ran>
}

/** Starts `node bin …args` (`command`: another file to run); the child is killed if the scope closes first. */
export const start = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}, command = bin) =>
  Effect.acquireRelease(
    Effect.sync((): Running => {
      const child = spawn(process.execPath, [command, ...args], { cwd: root, env: environment(env) })
      let stdout = ""
      let stderr = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      let closed = false
      const ended = new Promise<Ran>((resolve) =>
        child.on("close", (code, signal) => {
          closed = true
          resolve({ code, signal, stdout, stderr })
        })
      )
      const printed = (check: (output: Output) => boolean, what: string) =>
        Effect.asVoid(whenPrinted(
          child,
          () => closed,
          () => check({ stdout, stderr }) || undefined,
          () => `the bin ended before ${what}:\n${stdout}${stderr}`
        ))
      return {
        output: () => ({ stdout, stderr }),
        signal: (signal) => child.kill(signal),
        printed,
        exited: Effect.promise(() => ended)
      }
    }),
    (running) => Effect.sync(() => running.signal("SIGKILL"))
  )

/** Runs `node bin …args` to the end. */
export const runBin = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}, command = bin) =>
  Effect.scoped(Effect.flatMap(start(args, env, command), (running) => running.exited))

/** How a command line run in this process ended: its exit code and what it printed. */
interface Exited extends Output {
  readonly code: number
}

/**
 * Runs `resilient-ai …args` in this process, exactly as the bin does but for Node's runtime (its
 * exit code is `Cli.exitCode`'s), with stdout and stderr (log lines included) captured.
 */
export const runCli = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const stdout: Array<string> = []
    const stderr: Array<string> = []
    const exit = yield* Effect.exit(printingInto(stdout, stderr)(Cli.run(["node", "resilient-ai", ...args])))
    return { code: Cli.exitCode(exit), stdout: stdout.join("\n"), stderr: stderr.join("\n") } satisfies Exited
  })
