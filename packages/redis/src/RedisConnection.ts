/**
 * One connection to the Redis a fleet shares, and what happens when it cannot be reached.
 *
 * Redis is an optimisation of the fleet's behaviour, never a dependency of a call: every command
 * has a short timeout, a disconnected client fails at once instead of queueing, and when a command
 * fails the connection is marked down and callers decide in process (the in-memory budget and
 * gate) until a probe a little later finds Redis back. The fallback is counted in a metric and
 * logged once per transition, not once per call.
 */
import { ConfigDuration } from "@resilient-ai/policy"
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as MetricLabel from "effect/MetricLabel"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { Redis } from "ioredis"

/** Settings of the connection. */
export interface Options {
  /** `redis://[user:password@]host:port[/db]` or `rediss://…`; kept `Redacted`, it may hold a password. */
  readonly url: Redacted.Redacted
  /** Prepended to every key, so several applications can share one Redis. Default `resilient-ai`. */
  readonly keyPrefix?: string | undefined
  /** How long a command may take before the caller decides in process instead. Default 50 ms. */
  readonly commandTimeout?: Duration.DurationInput | undefined
  /** How long after a failure before Redis is tried again. Default 1 second. */
  readonly retryAfter?: Duration.DurationInput | undefined
}

/** Whether Redis answered lately, and when to try it again if not. */
export type Health = { readonly _tag: "up" } | {
  readonly _tag: "down"
  readonly since: number
  readonly retryAt: number
}

/** The shared connection. */
export interface Service {
  readonly client: Redis
  readonly keyPrefix: string
  /**
   * Runs `command` on Redis, or `fallback` when Redis is down or the command fails (the failure
   * marks it down). Never fails: a decision is always made somewhere.
   */
  readonly decide: <A>(
    operation: string,
    command: () => Promise<A>,
    fallback: Effect.Effect<A>
  ) => Effect.Effect<A>
  readonly health: Effect.Effect<Health>
}

/** The Redis connection of the fleet. */
export class RedisConnection extends Context.Tag("@resilient-ai/redis/RedisConnection")<RedisConnection, Service>() {}

/** Decisions made in process because Redis could not be used, tagged by `operation`. */
export const fallbacks = Metric.counter("resilient_ai_redis_fallbacks", {
  description: "budget and gate decisions made in process because Redis was unreachable or slow",
  incremental: true
})

/** Resolves `true` once `client` is ready, `false` if it is not within `millis`. */
const readyWithin = (client: Redis, millis: number): Promise<boolean> =>
  client.status === "ready" ? Promise.resolve(true) : new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer)
      client.off("ready", onReady)
      resolve(ready)
    }
    const onReady = () => done(true)
    const timer = setTimeout(() => done(false), millis)
    client.once("ready", onReady)
  })

/**
 * Why connection settings cannot work, one message per setting, each naming it `label(setting)`
 * (the option's name by default; `config` names the environment variable). The URL is never shown.
 */
export const problems = (
  options: Options,
  label: (setting: "url" | "keyPrefix" | "commandTimeout" | "retryAfter") => string = (setting) => setting
): ReadonlyArray<string> => {
  const found: Array<string> = []
  const url = Redacted.value(options.url)
  try {
    const parsed = new URL(url)
    if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
      found.push(`${label("url")} must start with redis:// or rediss://`)
    } else if (parsed.hostname === "") {
      found.push(`${label("url")} must name a host`)
    } else if (!/^\/?\d*$/.test(parsed.pathname)) {
      found.push(`${label("url")} must name its database by number (redis://host:6379/2), if at all`)
    }
  } catch {
    found.push(`${label("url")} must be a redis:// URL`)
  }
  const positive = (setting: "commandTimeout" | "retryAfter", input: Duration.DurationInput | undefined) => {
    if (input === undefined) return
    const decoded = Duration.decodeUnknown(input)
    const millis = Option.map(decoded, Duration.toMillis)
    if (Option.isNone(millis) || !(millis.value > 0) || !Number.isFinite(millis.value)) {
      const shown = Option.match(decoded, { onNone: () => String(input), onSome: Duration.format })
      found.push(`${label(setting)} must be a positive duration, got ${shown}`)
    }
  }
  positive("commandTimeout", options.commandTimeout)
  positive("retryAfter", options.retryAfter)
  if (options.keyPrefix !== undefined && !/^[A-Za-z0-9:_.-]+$/.test(options.keyPrefix)) {
    found.push(`${label("keyPrefix")} must be letters, digits and : _ . -, got ${JSON.stringify(options.keyPrefix)}`)
  }
  return found
}

/**
 * Opens the connection (closed with the scope), waiting for it a bounded time (four command timeouts,
 * at least 500 ms). Redis being unreachable now is not an error: the connection starts down and
 * keeps reconnecting in the background. Bad settings throw a
 * `RangeError` naming them.
 */
export const make = (options: Options): Effect.Effect<Service, never, Scope.Scope> => {
  const found = problems(options)
  if (found.length > 0) throw new RangeError(`redis: ${found.join("; ")}`)
  const commandTimeoutMillis = Duration.toMillis(options.commandTimeout ?? Duration.millis(50))
  const retryAfterMillis = Duration.toMillis(options.retryAfter ?? Duration.seconds(1))
  const connectTimeoutMillis = Math.max(500, commandTimeoutMillis * 4)
  return Effect.gen(function*() {
    const clock = yield* Effect.clock
    const client = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Redis(Redacted.value(options.url), {
          commandTimeout: commandTimeoutMillis,
          connectTimeout: connectTimeoutMillis,
          // Fail at once while disconnected: a queued command would block the call it decides for.
          enableOfflineQueue: false,
          maxRetriesPerRequest: 0,
          retryStrategy: (times) => Math.min(times * 100, 1_000),
          lazyConnect: false
        })
      ),
      (client) => Effect.promise(() => client.quit().then(() => undefined, () => client.disconnect()))
    )
    // Connection errors are handled by falling back; unhandled, ioredis would print each one.
    client.on("error", () => {})
    const now = () => clock.unsafeCurrentTimeMillis()
    // The first decisions should be the fleet's: wait for the connection, a bounded time, on
    // Node's timers (not Effect's clock, which a TestClock would hold still).
    const ready = yield* Effect.promise(() => readyWithin(client, connectTimeoutMillis))
    let health: Health = ready ? { _tag: "up" } : { _tag: "down", since: now(), retryAt: now() }
    if (!ready) {
      yield* Effect.logWarning("Redis unreachable at start: deciding in process until it is back")
    }
    const markDown = (operation: string, error: unknown): Effect.Effect<void> => {
      if (health._tag === "down") {
        health = { _tag: "down", since: health.since, retryAt: now() + retryAfterMillis }
        return Effect.void
      }
      health = { _tag: "down", since: now(), retryAt: now() + retryAfterMillis }
      return Effect.logWarning("Redis unreachable: deciding in process until it is back").pipe(
        Effect.annotateLogs({ operation, cause: error instanceof Error ? error.message : String(error) })
      )
    }
    const markUp: Effect.Effect<void> = Effect.suspend(() => {
      if (health._tag === "up") return Effect.void
      const downFor = now() - health.since
      health = { _tag: "up" }
      return Effect.logInfo("Redis is back: deciding on Redis again").pipe(Effect.annotateLogs({ downForMs: downFor }))
    })
    const countFallback = (operation: string) => fallbacks.unsafeUpdate(1, [MetricLabel.make("operation", operation)])
    const decide: Service["decide"] = (operation, command, fallback) =>
      Effect.suspend(() => {
        if (health._tag === "down" && now() < health.retryAt) {
          countFallback(operation)
          return fallback
        }
        return Effect.matchEffect(
          Effect.tryPromise(() => command()),
          {
            onFailure: (error) => {
              countFallback(operation)
              return Effect.zipRight(markDown(operation, error.cause), fallback)
            },
            onSuccess: (value) => Effect.as(markUp, value)
          }
        )
      })
    return {
      client,
      keyPrefix: options.keyPrefix ?? "resilient-ai",
      decide,
      health: Effect.sync(() => health)
    }
  })
}

/** Provides `RedisConnection`. */
export const layer = (options: Options): Layer.Layer<RedisConnection> => Layer.scoped(RedisConnection, make(options))

/** The environment variable of each setting, after the prefix and `_`. */
const variables = { url: "URL", keyPrefix: "KEY_PREFIX", commandTimeout: "COMMAND_TIMEOUT", retryAfter: "RETRY_AFTER" }

/**
 * Settings read under `prefix` (default `REDIS`): `{prefix}_URL` (required), `_KEY_PREFIX`,
 * `_COMMAND_TIMEOUT` and `_RETRY_AFTER` (milliseconds, or a duration such as "50 millis"). Bad
 * values are a `ConfigError` naming the variable and the rule, when the layer is built.
 */
export const config = (prefix = "REDIS"): Config.Config<Options> => {
  const duration = (name: string) => ConfigDuration.duration(name, `${prefix}_${name}`)
  const settings = Config.all({
    // Read as a string and wrapped at once: a missing URL must be named, not shown as "<redacted>".
    url: Config.map(Config.string("URL"), Redacted.make),
    keyPrefix: Config.option(Config.string("KEY_PREFIX")),
    commandTimeout: Config.option(duration("COMMAND_TIMEOUT")),
    retryAfter: Config.option(duration("RETRY_AFTER"))
  }).pipe(Config.nested(prefix))
  return Config.mapOrFail(settings, (read) => {
    const options: Options = {
      url: read.url,
      keyPrefix: Option.getOrUndefined(read.keyPrefix),
      commandTimeout: Option.getOrUndefined(read.commandTimeout),
      retryAfter: Option.getOrUndefined(read.retryAfter)
    }
    const found = problems(options, (setting) => `${prefix}_${variables[setting]}`)
    return found.length === 0
      ? Either.right(options)
      : Either.left(ConfigError.InvalidData([], `redis (${prefix}_*): ${found.join("; ")}`))
  })
}

/** Provides `RedisConnection` from `config(prefix)`. */
export const layerConfig = (prefix?: string): Layer.Layer<RedisConnection, ConfigError.ConfigError> =>
  Layer.scoped(RedisConnection, Effect.flatMap(config(prefix), make))
