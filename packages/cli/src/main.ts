/**
 * The entry point of the `resilient-ai` bin: runs the command line with Node's runtime, which
 * interrupts the command on Ctrl-C or SIGTERM (closing servers and connections) and exits with the
 * code `Cli.exitCode` gives. Importing this module runs the command, so the package index does not.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cli from "./Cli.js"

// runMain interrupts on either signal without saying which; the exit code does (130 or 143).
let signal: NodeJS.Signals | undefined
for (const name of ["SIGINT", "SIGTERM"] as const) process.once(name, () => (signal ??= name))

// The command prints its own failures (`Cli.run`), and sends log lines to stderr through its own
// logger, so neither runMain's error report nor its pretty logger (which writes to stdout) is wanted.
NodeRuntime.runMain(Cli.run(process.argv), {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => onExit(Cli.exitCode(exit, signal))
})
