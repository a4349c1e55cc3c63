/**
 * `@resilient-ai/cli`: the `resilient-ai` command, and the pieces it is made of for use from code:
 * a load runner that reports the failure path, its rendering, and the demo.
 */
export * as Cli from "./Cli.js"
export * as Demo from "./Demo.js"
export * as Load from "./Load.js"
export * as Storm from "./Storm.js"
export * as Summary from "./Summary.js"
