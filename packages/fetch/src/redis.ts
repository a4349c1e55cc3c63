/**
 * The promise door's fleet: every process that makes its doors with one `redisFleet` on one Redis
 * shares each target's retry budget, concurrency gate and pace (per target and API key), as
 * `RedisCoordination` does for an Effect program. When Redis is slow or away, each process decides
 * alone within its share until it is back: Redis is never a dependency of a call. Node, Bun and Deno
 * (Redis over TCP); not the edge runtimes, which have no sockets.
 *
 * ```ts
 * import { resilientFetch } from "@resilient-ai/fetch"
 * import { redisFleet } from "@resilient-ai/fetch/redis"
 *
 * // REDIS_URL, and any of REDIS_KEY_PREFIX, REDIS_COMMAND_TIMEOUT, REDIS_FLEET_SIZE, …
 * const fleet = redisFleet({ env: "REDIS" })
 * const fetch = resilientFetch({ env: "MISTRAL", fleet })
 * ```
 *
 * Bad settings throw a `TypeError` naming each, as `resilientFetch`'s do; Redis being unreachable
 * is not an error. Made once per process, shared by its doors, closed after them.
 */
import { Either } from "@resilient-ai/policy/internal/line"
import * as Checked from "@resilient-ai/policy/internal/settings"
import { Connections, RedisGate } from "@resilient-ai/redis/internal"
import * as RedisConnection from "@resilient-ai/redis/RedisConnection"
import * as RedisCoordination from "@resilient-ai/redis/RedisCoordination"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import type { Duration, Fleet } from "./index.js"
import { contexts, processVariables, variableLookup } from "./internal/fleet.js"

/** The Redis a fleet shares, written out. */
export interface RedisSettings {
  /**
   * `redis://[user:password@]host:port[/db]` or `rediss://…`; a Redis Cluster's seed nodes comma-
   * separated. Never shown in a message or a log line: it may hold a password.
   */
  readonly url: string
  /** Whether `url` names a Redis Cluster. Default: when it names several nodes. */
  readonly cluster?: boolean | undefined
  /** Prepended to every key, so several applications can share one Redis. Default `resilient-ai`. */
  readonly keyPrefix?: string | undefined
  /** How long a decision waits for Redis before it is made in process. Default 50 ms. */
  readonly commandTimeout?: Duration | undefined
  /** How long after Redis was found unreachable before it is tried again. Default 1 second. */
  readonly retryAfter?: Duration | undefined
  /** How many processes share a target at least (learned from Redis when larger). Default 1. */
  readonly fleetSize?: number | undefined
  /** The longest a gate's permit lives when a call has no deadline. Default 2 minutes. */
  readonly leaseTime?: Duration | undefined
  /** How often a call waiting for a permit asks again. Default 100 ms. */
  readonly pollInterval?: Duration | undefined
}

/** The Redis a fleet shares, read from environment variables: `{env}_URL`, `{env}_KEY_PREFIX`, … */
export interface RedisEnvironmentSettings {
  /** The variables' prefix: `"REDIS"` reads `REDIS_URL`, `REDIS_CLUSTER`, `REDIS_KEY_PREFIX`, … */
  readonly env: string
  /** Where the variables are: default `process.env`. A variable set to the empty text is unset. */
  readonly variables?: Readonly<Record<string, unknown>> | undefined
}

const invalid = (error: { readonly message: string }): never => {
  throw new TypeError(error.message, { cause: error })
}

/** The connection's settings and the gates' leases `settings` describe, or the `TypeError` naming what is wrong. */
const optionsOf = (settings: RedisSettings | RedisEnvironmentSettings) => {
  if (typeof settings !== "object" || settings === null) {
    throw new TypeError(`redisFleet takes a record of settings, got ${String(settings)}`)
  }
  if ("env" in settings && typeof settings.env === "string") {
    const variables = settings.variables ?? processVariables()
    if (variables === undefined) {
      throw new TypeError(
        `redis (${settings.env}_*): this runtime has no process.env; pass the variables as \`variables\``
      )
    }
    const read = Checked.fromVariables(
      (input, label) => Checked.decoder(Connections.ConnectionSettings, () => "redis", label)(input),
      { prefix: settings.env, variables: Connections.variables, subject: "redis" },
      variableLookup(variables)
    )
    return { connection: Either.isLeft(read) ? invalid(Either.leftOf(read)) : Either.rightOf(read), leases: {} }
  }
  const { leaseTime, pollInterval, ...connection } = settings as RedisSettings
  const leases = Checked.decoder(RedisGate.LeaseSettings, () => "redis coordination")({ leaseTime, pollInterval })
  if (Either.isLeft(leases)) invalid(Either.leftOf(leases))
  const checked = Checked.decoder(Connections.ConnectionSettings, () => "redis")(connection)
  if (Either.isLeft(checked)) invalid(Either.leftOf(checked))
  return { connection, leases: { leaseTime, pollInterval } }
}

/**
 * A fleet on the Redis `settings` name: its connection opens now, in the background, and closes with
 * `close`. Throws a `TypeError` naming every bad setting.
 */
export const redisFleet = (settings: RedisSettings | RedisEnvironmentSettings): Fleet => {
  const { connection, leases } = optionsOf(settings)
  const scope = Effect.runSync(Scope.make())
  const built = Effect.runPromise(
    Layer.buildWithScope(
      // Checked above; the layer checks them again, in the line's own types.
      RedisCoordination.layer(leases as RedisCoordination.Options).pipe(
        Layer.provide(RedisConnection.layer(connection as unknown as RedisConnection.Options))
      ),
      scope
    )
  )
  // A door's call waits for this and meets its failure; nothing else does.
  built.catch(() => undefined)
  let closing: Promise<void> | undefined
  const close = () => closing ??= Effect.runPromise(Scope.close(scope, Exit.void))
  const fleet: Fleet = { close, [Symbol.asyncDispose]: close }
  contexts.set(fleet, built)
  return fleet
}
