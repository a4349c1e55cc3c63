/**
 * `@resilient-ai/cli`: the `resilient-ai` command. From code, `Cli.run` runs a command line as the
 * bin does, and `Cli.exitCode` is the code it exits with.
 */
export * as Cli from "./Cli.js"
