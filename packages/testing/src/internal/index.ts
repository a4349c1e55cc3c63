/**
 * What the tests, the bench and the sibling packages reach beyond the fault server and its plans:
 * the recorded responses and the bodies the server generates. Not the documented surface, and no
 * compatibility promise.
 *
 * @internal
 */
export * as Fixtures from "../Fixtures.js"
export * as FaultServerBody from "./faultServerBody.js"
export { prng } from "./prng.js"
