/** Starts fleet members (`member.ts`) as separate OS processes, running the workspace's sources. */
import { Effect } from "effect"
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { scan } from "../../canary.js"
import type { Task } from "./member.js"

const memberScript = fileURLToPath(new URL("./member.ts", import.meta.url))
const root = fileURLToPath(new URL("../../../", import.meta.url))

/** A running member: the JSON lines it printed so far, a way to kill it, and its end. */
export interface Member {
  readonly pid: number
  readonly lines: () => ReadonlyArray<Record<string, unknown>>
  readonly kill: (signal: NodeJS.Signals) => void
  /** Ends its stdin: a member making calls until then finishes those under way and reports. */
  readonly endInput: () => void
  /** Resolves when it exits, with its exit code and stderr. */
  readonly exited: Effect.Effect<{ readonly code: number | null; readonly stderr: string }>
}

/** Starts a member for `task`; it is killed if the scope closes before it ends. */
export const startMember = (task: Task) =>
  Effect.acquireRelease(
    Effect.sync((): Member => {
      // tsx runs the TypeScript sources; the condition resolves workspace packages to `src`.
      const child: ChildProcessWithoutNullStreams = spawn(
        process.execPath,
        ["--conditions=@resilient-ai/source", "--import", "tsx", memberScript, JSON.stringify(task)],
        { cwd: root, env: process.env }
      )
      let stdout = ""
      let stderr = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      const ended = new Promise<{ code: number | null; stderr: string }>((resolve) =>
        child.on("close", (code) => {
          scan(`fleet member ${child.pid} stdout`, stdout)
          scan(`fleet member ${child.pid} stderr`, stderr)
          resolve({ code, stderr })
        })
      )
      return {
        pid: child.pid ?? -1,
        lines: () =>
          stdout.split("\n").filter((line) => line.startsWith("{")).map((line) =>
            JSON.parse(line) as Record<string, unknown>
          ),
        kill: (signal) => child.kill(signal),
        endInput: () => child.stdin.end(),
        exited: Effect.promise(() => ended)
      }
    }),
    (member) => Effect.sync(() => member.kill("SIGKILL"))
  )

/** Waits (on Node's timers: the member runs on the real clock) until `member` has printed a line of `tag`. */
export const lineOf = (member: Member, tag: string, limitMillis = 20_000) =>
  Effect.promise(async () => {
    const until = Date.now() + limitMillis
    for (;;) {
      const line = member.lines().find((printed) => printed["_tag"] === tag)
      if (line !== undefined) return line
      if (Date.now() > until) throw new Error(`member ${member.pid} never printed ${tag}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })
