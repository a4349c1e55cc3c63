/**
 * The engine's parts that the sibling packages, the tests and the bench reach: not the documented
 * surface, and no compatibility promise.
 *
 * @internal
 */
export * as Decision from "./decision.js"
