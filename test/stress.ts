/**
 * Runs the suite (`tsc -b && vitest run`, what `pnpm test` runs) several times in a row while busy
 * processes keep every core loaded, as CI's shared machine does, and stops at the first failing
 * run, naming the tests that failed. A test that passes here does not depend on being scheduled
 * promptly.
 *
 *   pnpm test:stress                      5 runs
 *   pnpm test:stress -- --runs 2          or RESILIENT_AI_STRESS_RUNS=2
 *   pnpm test:stress -- --hogs 4          busy processes (default: one per core)
 *   pnpm test:stress -- --line effect4    the Effect 4 line's suite (Node 22 or later; default effect3)
 *   pnpm test:stress -- test/testing      anything else goes to `vitest run`
 *
 * It prints a line per run (PASS or FAIL, how long it took, the peak load average) and, for a
 * failing run, each failed test with the first line of its message; it exits 0 when every run
 * passed.
 *
 * The hogs are plain Node processes (`cpuHog.ts`), so this needs nothing but Node (no `stress-ng`,
 * which is not on a fresh machine and would load the cores no differently); none outlives this
 * process however it ends: failure, Ctrl-C, `kill`, even SIGKILL. The suite runs in a process group of its own, which gets the
 * signal too, with its workers and the Redis it started (only a SIGKILL leaves the run in progress
 * to finish by itself).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { startHog } from "./cpuHog.js"

const root = fileURLToPath(new URL("..", import.meta.url))

const usage = "usage: pnpm test:stress [-- [--runs N] [--hogs N] [--line effect3|effect4] [vitest arguments]]"

/** Which Effect line's suite runs (docs/effect-lines.md). */
type Line = "effect3" | "effect4"

const count = (name: string, text: string | undefined): number => {
  const n = Number(text)
  if (!Number.isInteger(n) || n < 1) {
    console.error(`${name} must be a whole number of at least 1, not ${JSON.stringify(text)}\n${usage}`)
    process.exit(2)
  }
  return n
}

const options = (argv: ReadonlyArray<string>) => {
  let runs = count("RESILIENT_AI_STRESS_RUNS", process.env["RESILIENT_AI_STRESS_RUNS"] ?? "5")
  let hogs = Os.availableParallelism()
  let line: Line = "effect3"
  const vitest: Array<string> = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const [name, inline] = arg.split("=", 2)
    if (name === "--runs") runs = count("--runs", inline ?? argv[++i])
    else if (name === "--hogs") hogs = count("--hogs", inline ?? argv[++i])
    else if (name === "--line") {
      const chosen = inline ?? argv[++i]
      if (chosen !== "effect3" && chosen !== "effect4") {
        console.error(`--line must be effect3 or effect4, not ${JSON.stringify(chosen)}\n${usage}`)
        process.exit(2)
      }
      line = chosen
    } else if (arg === "--help" || arg === "-h") {
      console.log(usage)
      process.exit(0)
    } // pnpm passes on the `--` that separates its own arguments from the script's.
    else if (arg !== "--") vitest.push(arg)
  }
  return { runs, hogs, line, vitest }
}

const hogs = new Set<ChildProcess>()

const startHogs = (n: number): void => {
  for (let i = 0; i < n; i++) {
    const hog = startHog()
    hogs.add(hog)
    hog.on("exit", () => hogs.delete(hog))
  }
}

const stopHogs = (): void => {
  for (const hog of hogs) hog.kill("SIGKILL")
}

/** The command running now, in a process group of its own with everything it started (its workers, its Redis). */
let current: ChildProcess | undefined
let interrupted: NodeJS.Signals | undefined

/** Sends `signal` to the running command's whole group, so that nothing it started is left behind. */
const signalCommand = (signal: NodeJS.Signals): void => {
  if (current?.pid !== undefined && current.exitCode === null) {
    try {
      process.kill(-current.pid, signal)
    } catch {
      // the group is gone already
    }
  }
}

/** Runs a command with the repository's binaries first on the PATH; resolves to its exit code. */
const run = (
  command: string,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {}
): Promise<number> =>
  new Promise((resolve) => {
    const bin = Path.join(root, "node_modules", ".bin")
    const child = spawn(command, args, {
      cwd: root,
      stdio: "inherit",
      detached: true,
      env: { ...process.env, ...env, PATH: `${bin}${Path.delimiter}${process.env["PATH"] ?? ""}` }
    })
    current = child
    child.on("exit", (code, signal) => {
      current = undefined
      resolve(code ?? (signal === null ? 1 : 128 + Os.constants.signals[signal]))
    })
  })

/** What the stress reporter wrote: one line per failure; absent when vitest did not get to report. */
const failures = (file: string): ReadonlyArray<string> => {
  try {
    return JSON.parse(readFileSync(file, "utf8"))
  } catch {
    return []
  }
}

/**
 * The suite once: tsc, then vitest with the stress reporter beside its usual output; on Effect 4,
 * the line's build and its own vitest with its config.
 */
const suite = async (
  line: Line,
  vitestArgs: ReadonlyArray<string>,
  failuresFile: string
): Promise<ReadonlyArray<string>> => {
  const tscArgs = line === "effect4" ? ["-b", "lines/effect4"] : ["-b"]
  if ((await run("tsc", tscArgs)) !== 0) return [`tsc ${tscArgs.join(" ")} failed (see above)`]
  if (interrupted !== undefined) return []
  const reporter = Path.join(root, "test", "stress-reporter.ts")
  const [vitest, config] = line === "effect4"
    ? [Path.join(root, "lines", "effect4", "node_modules", ".bin", "vitest"), [
      "--config",
      "lines/effect4/vitest.config.ts"
    ]]
    : ["vitest", []]
  const code = await run(vitest, ["run", ...config, "--reporter=default", `--reporter=${reporter}`, ...vitestArgs], {
    RESILIENT_AI_STRESS_FAILURES: failuresFile
  })
  if (code === 0 || interrupted !== undefined) return []
  const failed = failures(failuresFile)
  return failed.length > 0 ? failed : [`vitest exited with ${code} (see above)`]
}

const main = async (): Promise<number> => {
  const { hogs, line, runs, vitest } = options(process.argv.slice(2))
  if (line === "effect4" && Number(process.versions.node.split(".")[0]) < 22) {
    console.error(`Node ${process.versions.node}: the Effect 4 line's suite needs Node 22 or later (vitest 5)`)
    return 2
  }
  const reports = mkdtempSync(Path.join(Os.tmpdir(), "resilient-ai-stress-"))
  const cores = Os.availableParallelism()
  startHogs(hogs)
  console.log(
    `stress: ${runs} run(s) of the ${line} line's tsc -b && vitest run, ${hogs} busy process(es) on ${cores} core(s)`
  )
  const summary: Array<string> = []
  try {
    for (let i = 1; i <= runs; i++) {
      const started = performance.now()
      // The 1-minute load average lags, so the run's peak says more than its value at the end.
      let peak = Os.loadavg()[0]!
      const sampler = setInterval(() => peak = Math.max(peak, Os.loadavg()[0]!), 2_000)
      const failed = await suite(line, vitest, Path.join(reports, `failures-${i}.json`)).finally(() =>
        clearInterval(sampler)
      )
      if (interrupted !== undefined) {
        console.log(`\nstress: interrupted (${interrupted}) during run ${i}/${runs}`)
        return 128 + Os.constants.signals[interrupted]
      }
      const seconds = ((performance.now() - started) / 1000).toFixed(1)
      const verdict = failed.length === 0 ? "PASS" : "FAIL"
      summary.push(`stress run ${i}/${runs}: ${verdict} in ${seconds} s, load average (1 min) peak ${peak.toFixed(1)}`)
      console.log(`\n${summary.join("\n")}`)
      if (failed.length > 0) {
        console.log(`failed:\n${failed.map((text) => `  ${text}`).join("\n")}`)
        return 1
      }
    }
    console.log(`stress: all ${runs} run(s) passed`)
    return 0
  } finally {
    stopHogs()
    rmSync(reports, { recursive: true, force: true })
  }
}

// The command runs in a group of its own, which Ctrl-C at the terminal does not reach: pass the signal
// on and let main finish (the hogs go in its `finally`). A second signal does not wait.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    if (interrupted !== undefined) {
      signalCommand("SIGKILL")
      stopHogs()
      process.exit(128 + Os.constants.signals[signal])
    }
    interrupted = signal
    signalCommand(signal)
  })
}
process.on("exit", stopHogs)

main().then((code) => process.exit(code), (error) => {
  console.error(error)
  process.exit(1)
})
