/**
 * The one layer that turns a single process into a fleet member: provided to the application's
 * clients, it makes every target's retry budget, concurrency gate and rate limiter live on Redis,
 * shared by every process calling that target with the same API key.
 *
 * ```ts
 * import { NodeHttpClient } from "@effect/platform-node"
 * import { ModelClient, Target } from "@resilient-ai/client"
 * import { RedisCoordination } from "@resilient-ai/redis"
 * import { Layer } from "effect"
 *
 * const MistralLive = ModelClient.layerConfig(Target.managedConfig("MISTRAL")).pipe(
 *   Layer.provide(NodeHttpClient.layerUndici),
 *   Layer.provide(RedisCoordination.layerConfig()) // REDIS_URL, REDIS_KEY_PREFIX, …
 * )
 * ```
 */
import { Coordination, Settings } from "@resilient-ai/policy"
import { Checked, Coordinations } from "@resilient-ai/policy/internal"
import type * as ConfigError from "effect/ConfigError"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as RedisBudget from "./RedisBudget.js"
import * as RedisConnection from "./RedisConnection.js"
import * as RedisGate from "./RedisGate.js"
import * as RedisRateLimiter from "./RedisRateLimiter.js"

/** Settings of the gates' leases, the same for every target. */
export interface Options {
  /** See `RedisGate.Options.leaseTime`. */
  readonly leaseTime?: Duration.DurationInput | undefined
  /** See `RedisGate.Options.pollInterval`. */
  readonly pollInterval?: Duration.DurationInput | undefined
}

const decodeOptions = Checked.validate(RedisGate.LeaseSettings, () => "redis coordination")

/**
 * A coordination whose budgets, gates and rate limiters are on the connection in context, each kept
 * under its target and the fingerprint of its API key. Its lease settings are checked now, when the
 * layer is built, not on a target's first call.
 */
export const make = (
  options: Options = {}
): Effect.Effect<Coordinations.Service, Settings.InvalidSettings, RedisConnection.RedisConnection> =>
  Effect.flatMap(
    Effect.zip(decodeOptions(options), Effect.context<RedisConnection.RedisConnection>()),
    ([leases, context]) =>
      Coordination.make({
        budget: (budget) => Effect.provide(RedisBudget.make(budget), context),
        gate: (gate) => Effect.provide(RedisGate.make({ ...leases, ...gate }), context),
        rateLimiter: (limiter) => Effect.provide(RedisRateLimiter.make(limiter), context)
      })
  )

/**
 * Provides `Coordination` on the `RedisConnection` in context.
 *
 * ```ts
 * import { ModelClient, Target } from "@resilient-ai/client"
 * import { RedisConnection, RedisCoordination } from "@resilient-ai/redis"
 * import { Layer, Redacted } from "effect"
 *
 * const Fleet = RedisCoordination.layer({ leaseTime: "1 minute" }).pipe(
 *   Layer.provide(RedisConnection.layer({ url: Redacted.make(process.env.REDIS_URL!) }))
 * )
 * const MistralLive = ModelClient.layerConfig(Target.managedConfig("MISTRAL")).pipe(Layer.provide(Fleet))
 * ```
 */
export const layer = (
  options?: Options
): Layer.Layer<Coordination.Coordination, Settings.InvalidSettings, RedisConnection.RedisConnection> =>
  Layer.effect(Coordination.Coordination, make(options))

/** Provides `Coordination` on a connection read from `RedisConnection.config(prefix)` (default `REDIS_*`). */
export const layerConfig = (
  prefix?: string,
  options?: Options
): Layer.Layer<Coordination.Coordination, ConfigError.ConfigError | Settings.InvalidSettings> =>
  layer(options).pipe(Layer.provide(RedisConnection.layerConfig(prefix)))
