/**
 * The fleet's retry budget, concurrency gate and rate limiter on Redis. Provide
 * `RedisCoordination.layerConfig()` to an application's clients and every process calling a target
 * with one API key shares one budget, one limit and one pace; when Redis is unreachable, each
 * process decides alone until it is back.
 */
export * as RedisConnection from "./RedisConnection.js"
export * as RedisCoordination from "./RedisCoordination.js"
