/**
 * The rules of a Redis connection's settings, shared by `RedisConnection` and the promise door's
 * fleet, which checks them when it is made.
 */
import { Either } from "@resilient-ai/policy/internal/line"
import * as Checked from "@resilient-ai/policy/internal/settings"
import * as Duration from "effect/Duration"
import * as Redacted from "effect/Redacted"

/** What is wrong with a Redis URL, if anything; the URL is never shown (it may hold a password). */
const urlProblem = (url: string): string | undefined => {
  try {
    const parsed = new URL(url)
    if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") return "must start with redis:// or rediss://"
    if (parsed.hostname === "") return "must name a host"
    if (!/^\/?\d*$/.test(parsed.pathname)) return "must name its database by number (redis://host:6379/2), if at all"
    return undefined
  } catch {
    return "must be a redis:// URL"
  }
}

/** The URLs a setting names, comma-separated. */
export const urlsOf = (url: Redacted.Redacted<string>): Array<string> =>
  Redacted.value(url).split(",").map((one) => one.trim()).filter((one) => one !== "")

const Url = Checked.rule((input) => {
  const url = Redacted.isRedacted(input) ? input : typeof input === "string" ? Redacted.make(input) : undefined
  if (url === undefined || typeof Redacted.value(url) !== "string") return Either.left("must be a redis:// URL")
  const urls = urlsOf(url as Redacted.Redacted<string>)
  if (urls.length === 0) return Either.left("must be a redis:// URL")
  const problems = urls.map(urlProblem).filter((problem) => problem !== undefined)
  if (problems.length > 0) {
    return Either.left(urls.length === 1 ? problems[0]! : `names ${urls.length} URLs, and one ${problems[0]!}`)
  }
  return Either.right(url as Redacted.Redacted<string>)
})

const PositiveDuration = Checked.refine(
  Checked.duration,
  (value) =>
    (Duration.toMillis(value) > 0 && Duration.isFinite(value)) ||
    `must be a positive duration, got ${Duration.format(value)}`
)

const FleetSize = Checked.rule((input) => {
  const value = typeof input === "number" ? input : typeof input === "string" && input.trim() !== ""
    ? Number(input)
    : Number.NaN
  return Number.isInteger(value) && value >= 1
    ? Either.right(value)
    : Either.left(`must be a whole number of at least 1, got ${Number.isNaN(value) ? "no number" : value}`)
})

const KeyPrefix = Checked.rule((input) =>
  typeof input === "string" && /^[A-Za-z0-9:_.-]+$/.test(input)
    ? Either.right(input)
    : Either.left(`must be letters, digits and : _ . -, got ${JSON.stringify(input)}`)
)

/** What is wrong with the settings' URL as a Redis Cluster's, if they name one. */
const clusterProblem = (
  settings: { readonly url: Redacted.Redacted<string>; readonly cluster?: boolean }
): Checked.Problem | undefined => {
  const urls = urlsOf(settings.url)
  if (urls.length > 1 && settings.cluster === false) {
    return {
      path: ["url"],
      message: `names ${urls.length} servers, which only a cluster has: set cluster, or name one server`
    }
  }
  if ((urls.length > 1 || settings.cluster === true) && urls.some((url) => !/^\/?0?$/.test(new URL(url).pathname))) {
    return { path: ["url"], message: "names a database, and a Redis Cluster has only database 0" }
  }
  return undefined
}

/** The rules of the connection's settings, defaults included. */
export const ConnectionSettings = Checked.refine(
  Checked.struct({
    url: Url,
    cluster: Checked.optional(Checked.flag),
    keyPrefix: Checked.withDefault(KeyPrefix, "resilient-ai"),
    commandTimeout: Checked.withDefault(PositiveDuration, Duration.millis(50)),
    retryAfter: Checked.withDefault(PositiveDuration, Duration.seconds(1)),
    fleetSize: Checked.withDefault(FleetSize, 1)
  }),
  (settings) => clusterProblem(settings)
)

/** The connection's settings, checked, defaults filled in. */
export type CheckedOptions = Checked.ValueOf<typeof ConnectionSettings>

/** Checks the connection's settings: `InvalidSettings` naming each bad one. */
export const decodeSettings = Checked.validate(ConnectionSettings, () => "redis")

/** The environment variable of each setting, after the prefix and `_`. */
export const variables: Checked.Variables = [
  [["url"], "URL"],
  [["cluster"], "CLUSTER"],
  [["keyPrefix"], "KEY_PREFIX"],
  [["commandTimeout"], "COMMAND_TIMEOUT"],
  [["retryAfter"], "RETRY_AFTER"],
  [["fleetSize"], "FLEET_SIZE"]
]
