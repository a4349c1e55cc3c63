/** The shapes the command's seam hands over the same on both lines. */

/** The levels `--log-level` accepts, by the names Effect 3 gives them (Effect 4 says `warn`). */
export const logLevelNames = ["all", "trace", "debug", "info", "warning", "error", "fatal", "none"] as const

/** A level `--log-level` accepts. */
export type LogLevelName = typeof logLevelNames[number]

/** One problem of a fault plan that does not decode: where (the keys down to it) and what, in the line's words. */
export interface PlanIssue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
  /** Whether the whole input is of the wrong type (not an object at all), where the schema's own words would be pages long. */
  readonly wrongType: boolean
}
