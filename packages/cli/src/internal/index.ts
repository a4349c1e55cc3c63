/**
 * The pieces the command is made of, which the tests reach: the load runner and its rendering, the
 * demo, and the storm subcommand. Not the documented surface, and no compatibility promise.
 *
 * @internal
 */
export * as Demo from "../Demo.js"
export * as Load from "../Load.js"
export * as Storm from "../Storm.js"
export * as Summary from "../Summary.js"
