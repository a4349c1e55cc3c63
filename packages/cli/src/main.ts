/**
 * The entry point of the `resilient-ai` bin: runs the command line with Node's runtime, which
 * interrupts the command on Ctrl-C or SIGTERM (closing servers and connections) and exits with the
 * code `Cli.exitCode` gives. Importing this module runs the command, so the package index does not.
 */
import { runMain } from "#cli-line"
import * as Cli from "./Cli.js"

// runMain interrupts on either signal without saying which; the exit code does (130 or 143).
let signal: NodeJS.Signals | undefined
for (const name of ["SIGINT", "SIGTERM"] as const) process.once(name, () => (signal ??= name))

runMain(Cli.run(process.argv), (exit, onExit) => onExit(Cli.exitCode(exit, signal)))
