/**
 * The client's parts that the sibling packages, the tests and the bench reach: not the documented
 * surface, and no compatibility promise. A namespace named after a public module in the plural
 * (`Targets`) is that module with what only the toolkit uses of it.
 *
 * @internal
 */
export * as ClientLine from "#client-line"
export { isUp } from "./probe.js"
export * as ProviderError from "./providerError.js"
export * as Requests from "./requests.js"
export { sdkRetries } from "./sdkCall.js"
export * as Targets from "./target.js"
export * as Transport from "./transport.js"
