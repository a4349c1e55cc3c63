/**
 * The one layer that turns a single process into a fleet member: provided to the application's
 * clients, it makes every target's retry budget, concurrency gate and rate limiter live on Redis,
 * shared by every process calling that target with the same API key.
 *
 * The fleet spends one budget (one ratio-with-floor window), holds one limit on calls in flight (a
 * permit is a lease on Redis, so a process that dies holding permits gives them back when they
 * expire) and keeps one pace of requests and tokens per minute, with the same arithmetic as the
 * in-memory parts, each decision one Lua script. When Redis cannot answer in time, each process
 * decides alone within its share until it is back (see `RedisConnection`).
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
import { Checked, Coordinations, EffectLine } from "@resilient-ai/policy/internal"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as RedisBudget from "./internal/redisBudget.js"
import * as RedisGate from "./internal/redisGate.js"
import * as RedisRateLimiter from "./internal/redisRateLimiter.js"
import * as RedisConnection from "./RedisConnection.js"

/** Settings of the gates' leases, the same for every target. */
export interface Options {
  /**
   * The longest a gate's lease lives when the caller has no deadline: a permit held by a process
   * that died comes back to the fleet after this. Default 2 minutes.
   */
  readonly leaseTime?: EffectLine.DurationInput | undefined
  /** How often a caller waiting for a permit in `"queue"` mode asks again (with jitter). Default 100 ms. */
  readonly pollInterval?: EffectLine.DurationInput | undefined
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
): Layer.Layer<never, Settings.InvalidSettings, RedisConnection.RedisConnection> =>
  Layer.effect(Coordination.Coordination, make(options))

/** Provides `Coordination` on a connection read from `RedisConnection.config(prefix)` (default `REDIS_*`). */
export const layerConfig = (
  prefix?: string,
  options?: Options
): Layer.Layer<never, EffectLine.ConfigError | Settings.InvalidSettings> =>
  layer(options).pipe(Layer.provide(RedisConnection.layerConfig(prefix)))
