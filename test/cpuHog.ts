/**
 * Busy processes that keep the cores loaded, for the stress script and for tests that must hold on
 * a loaded machine (a CI machine shared with other jobs is one).
 */
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { availableParallelism, loadavg } from "node:os"

// Spins in slices so that the event loop still sees the parent's channel close.
const hogSource = `
process.on("disconnect", () => process.exit(0))
const spin = () => { const until = Date.now() + 50; while (Date.now() < until); setImmediate(spin) }
spin()
`

/**
 * Starts one busy process. It is tied to this process by an IPC channel and exits when the channel
 * closes, so it never outlives its parent, however the parent ends (SIGKILL included). It leads a
 * session of its own, as another user's work does: Linux shares the CPU between sessions first
 * (autogroup) and between a session's processes second, so hogs in the suite's own session would
 * mostly compete with each other.
 */
export const startHog = (): ChildProcess =>
  spawn(process.execPath, ["-e", hogSource], { stdio: ["ignore", "ignore", "inherit", "ipc"], detached: true })

/**
 * Enough busy processes to keep every core loaded: one per core the machine's recent load leaves
 * idle, at least one. In the suite, the other test files already load the cores, and a hog per core
 * on top would only take CPU from them (two hogs for 20 s were a seventh of the suite's CPU); alone,
 * a test gets one per core. `test:stress` adds its own on top of either.
 */
const idleCores = (): number => Math.max(1, availableParallelism() - Math.floor(loadavg()[0] ?? 0))

/** Busy processes (`idleCores()`, or `processes`) for as long as the scope is open. */
export const cpuHog = (processes = idleCores()) =>
  Effect.acquireRelease(
    Effect.sync(() => Array.from({ length: processes }, startHog)),
    (hogs) => Effect.sync(() => hogs.forEach((hog) => hog.kill("SIGKILL")))
  )
