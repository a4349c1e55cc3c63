/**
 * `@resilient-ai/cli`: the `resilient-ai` command, and the pieces it is made of for use from code:
 * a load runner that reports the failure path, its rendering, the demo, and a terminal progress bar.
 */
export * as Cli from "./Cli.js"
export * as Demo from "./Demo.js"
export * as Flags from "./Flags.js"
export * as Load from "./Load.js"
export * as Progress from "./Progress.js"
export * as Storm from "./Storm.js"
export * as Summary from "./Summary.js"
