/** Helpers shared by the CLI tests: targets pointed at a fault server, and the built bin run as a child process. */
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

export { apiKey, eventually, HttpLive, managedAt, selfHostedAt } from "../client/support.js"

/** The repository root. */
export const root = fileURLToPath(new URL("../../", import.meta.url))

/** The bin, as a user runs it. */
export const bin = fileURLToPath(new URL("../../packages/cli/bin/resilient-ai.js", import.meta.url))

/** The build the bin runs. */
export const builtMain = fileURLToPath(new URL("../../packages/cli/dist/main.js", import.meta.url))

/** Fails with a message that says what to do when the bin has not been built. */
export const requireBuild = () => {
  if (!existsSync(builtMain)) {
    throw new Error(
      `${builtMain} is missing: these tests run the built bin. Run \`pnpm test\` (it runs \`tsc -b\` first), ` +
        "or `npx tsc -b` before `vitest`."
    )
  }
}

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

/** A running bin: its output so far, and a way to wait for it to end. */
export interface Running {
  readonly output: () => { readonly stdout: string; readonly stderr: string }
  readonly signal: (signal: NodeJS.Signals) => void
  readonly exited: Effect.Effect<Ran>
}

/** Starts `node bin …args`; the child is killed if the scope closes first. */
export const start = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  Effect.acquireRelease(
    Effect.sync((): Running => {
      const child = spawn(process.execPath, [bin, ...args], { cwd: root, env: environment(env) })
      let stdout = ""
      let stderr = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      const ended = new Promise<Ran>((resolve) =>
        child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
      )
      return {
        output: () => ({ stdout, stderr }),
        signal: (signal) => child.kill(signal),
        exited: Effect.promise(() => ended)
      }
    }),
    (running) => Effect.sync(() => running.signal("SIGKILL"))
  )

/** Runs `node bin …args` to the end. */
export const runBin = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  Effect.scoped(Effect.flatMap(start(args, env), (running) => running.exited))
