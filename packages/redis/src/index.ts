/**
 * The fleet's retry budget and concurrency gate on Redis. Provide `RedisCoordination.layerConfig()`
 * to an application's clients and every process calling a target with one API key shares one
 * budget and one limit; when Redis is unreachable, each process decides alone until it is back.
 */
export * as RedisBudget from "./RedisBudget.js"
export * as RedisConnection from "./RedisConnection.js"
export * as RedisCoordination from "./RedisCoordination.js"
export * as RedisGate from "./RedisGate.js"
