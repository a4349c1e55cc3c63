/**
 * How the command words numbers and refused values, shared by its flags, the load's own settings and
 * the report, so that the same rule reads the same wherever it is refused.
 */

/** A whole number as a person writes it: `10,000,000`. */
export const count = (value: number): string => value.toLocaleString("en-US")

/** What a whole-number setting accepts, for its message and its help. */
export const range = (min: number, max: number): string => `a whole number from ${count(min)} to ${count(max)}`

/** The sentence a refused value gets: `<name> must be <accepts>, got <shown>`. */
export const refusal = (name: string, accepts: string, shown: string): string =>
  `${name} must be ${accepts}, got ${shown}`
