/**
 * Durations read from configuration the way operators write them: a bare number is milliseconds
 * (`250`), anything else is Effect's form (`30 seconds`). Shared by every package that reads
 * settings from `Config`, so a variable means the same thing wherever it is read.
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as Option from "effect/Option"

/**
 * Reads `text` as a duration, or says why it cannot: `"negative"` for a value with a minus sign,
 * `"unreadable"` for anything else that is not one. For settings that hold durations among other
 * things (`model=duration` pairs); a whole variable reads with `duration`.
 */
export const parse = (text: string): Either.Either<Duration.Duration, "negative" | "unreadable"> => {
  const trimmed = text.trim()
  if (trimmed.startsWith("-")) return Either.left("negative")
  const decoded = /^\d+(\.\d+)?$/.test(trimmed)
    ? Option.some(Duration.millis(Number(trimmed)))
    : Duration.decodeUnknown(trimmed)
  return Either.fromOption(decoded, () => "unreadable" as const)
}

/**
 * Reads the duration at `name`. A negative or unreadable value is a `ConfigError` that says what it
 * got, naming it `label` (the variable's full name, when the caller knows it better than `name`).
 * Zero is read; whether it is allowed is the caller's rule.
 */
export const duration = (name: string, label = name): Config.Config<Duration.Duration> =>
  Config.mapOrFail(Config.string(name), (text) =>
    Either.mapLeft(parse(text), (problem) => {
      const trimmed = text.trim()
      return ConfigError.InvalidData(
        [],
        problem === "negative"
          ? `${label} must not be negative, got ${trimmed}`
          : `${label} must be a duration such as 30000 or "30 seconds", got ${trimmed === "" ? "nothing" : trimmed}`
      )
    }))
