/**
 * Settings checked once, the same way wherever they come from. Each component's settings are one
 * Schema: it decodes what a program writes in an options object (a number, a `Duration`,
 * `"30 seconds"`) and what an operator writes in an environment variable (`"30000"`), fills in the
 * defaults, and says what is wrong with every bad setting at once. Constructors and layers fail
 * with `InvalidSettings` naming each option; `config` readers fail with a `ConfigError` naming each
 * variable. Nothing throws while a program is assembled.
 *
 * ```ts
 * import { Resilient } from "@resilient-ai/policy"
 *
 * const policy = yield* Resilient.policy({ target: "mistral", maxAttempts: 0 })
 * // InvalidSettings: policy for mistral: maxAttempts must be an integer >= 1, got 0
 * ```
 */
import * as Data from "effect/Data"

/** Settings that cannot work: what they were for, and one line per bad setting naming it. */
export class InvalidSettings extends Data.TaggedError("InvalidSettings")<{
  /** What the settings were for: `policy for mistral`, `retry budget`. */
  readonly subject: string
  readonly problems: ReadonlyArray<string>
}> {
  override get message(): string {
    return `${this.subject}: ${this.problems.join("; ")}`
  }
}
