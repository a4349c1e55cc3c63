/** The door bench's baseline: a Node process that reports at once, with no client and no call. */
import { report } from "./harness.js"

report(undefined)
