/**
 * The fleet's parts on Redis that `RedisCoordination` makes, reached one by one by the tests and
 * the bench: not the documented surface, and no compatibility promise.
 *
 * @internal
 */
export * as Connections from "./connectionSettings.js"
export * as RedisBudget from "./redisBudget.js"
export * as RedisGate from "./redisGate.js"
export * as RedisRateLimiter from "./redisRateLimiter.js"
