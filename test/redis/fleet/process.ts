/** Starts fleet members (`member.ts`) as separate OS processes, running a bundle of the sources (`bundleSetup.ts`). */
import { line } from "#test-line"
import { Effect } from "effect"
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { bundled, root } from "../../built.js"
import { scan } from "../../canary.js"
import { whenPrinted } from "../../childOutput.js"
import type { Task } from "./member.js"

/** A running member: the JSON lines it printed so far, a way to kill it, and its end. */
export interface Member {
  readonly pid: number
  readonly lines: () => ReadonlyArray<Record<string, unknown>>
  readonly kill: (signal: NodeJS.Signals) => void
  /** Ends its stdin: a member making calls until then finishes those under way and reports. */
  readonly endInput: () => void
  /** Resolves when it exits, with its exit code and stderr. */
  readonly exited: Effect.Effect<{ readonly code: number | null; readonly stderr: string }>
  /**
   * Resolves when it has printed a line of `tag`, woken by its output rather than a timer, so a slow
   * machine only makes it wait longer; dies if the member ends first. The test's timeout is the limit.
   */
  readonly printed: (tag: string) => Effect.Effect<Record<string, unknown>>
}

/** Starts a member for `task`; it is killed if the scope closes before it ends. */
export const startMember = (task: Task) =>
  Effect.acquireRelease(
    Effect.sync((): Member => {
      const child: ChildProcessWithoutNullStreams = spawn(
        process.execPath,
        // The member bundled for this line: on Effect 4, from the packages' Effect 4 side.
        [bundled(new URL("./member.ts", import.meta.url), line), JSON.stringify(task)],
        { cwd: root, env: process.env }
      )
      let stdout = ""
      let stderr = ""
      let closed = false
      const lines = () =>
        stdout.split("\n").filter((line) => line.startsWith("{")).map((line) =>
          JSON.parse(line) as Record<string, unknown>
        )
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      const ended = new Promise<{ code: number | null; stderr: string }>((resolve) =>
        child.on("close", (code) => {
          closed = true
          scan(`fleet member ${child.pid} stdout`, stdout)
          scan(`fleet member ${child.pid} stderr`, stderr)
          resolve({ code, stderr })
        })
      )
      const printed = (tag: string) =>
        whenPrinted(
          child,
          () => closed,
          () => lines().find((line) => line["_tag"] === tag),
          () => `member ${child.pid} ended without printing ${tag}:\n${stderr}`
        )
      return {
        pid: child.pid ?? -1,
        lines,
        kill: (signal) => child.kill(signal),
        endInput: () => child.stdin.end(),
        exited: Effect.promise(() => ended),
        printed
      }
    }),
    (member) => Effect.sync(() => member.kill("SIGKILL"))
  )

/** Waits until `member` has printed a line of `tag` (see `Member.printed`). */
export const lineOf = (member: Member, tag: string) => member.printed(tag)
