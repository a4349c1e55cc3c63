/** Helpers shared by the Redis tests: the shared server, connections under keys of their own. */
import { describe } from "@effect/vitest"
import { RedisConnection } from "@resilient-ai/redis"
import { Effect, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"

/** The shared Redis, or "" when there is none (the tests are then skipped, and the setup says so). */
export const redisUrl = inject("redisUrl")

/** The three-node Redis Cluster's URLs, comma-separated, or "" when there is none. */
export const redisClusterUrl = inject("redisClusterUrl")

/** The `redis-server` binary, or "" when the machine has none. */
export const redisServerBinary = inject("redisServerBinary")

/** `describe` when a Redis is reachable, skipped otherwise. */
export const describeRedis = (name: string, body: () => void): void => {
  describe.skipIf(redisUrl === "")(name, body)
}

/** A key prefix no other test uses, so tests sharing one server never see each other's keys. */
export const freshPrefix = (): string => `test-${randomUUID().slice(0, 8)}`

/** What a Redis Cluster hashes of `key`: the text between its first `{` and the `}` after it. */
export const hashTagOf = (key: string): string | undefined => /\{([^}]+)\}/.exec(key)?.[1]

/** A connection to the shared Redis under `keyPrefix`, with a command timeout generous enough for a loaded CI machine. */
export const connection = (keyPrefix: string): Layer.Layer<RedisConnection.RedisConnection> =>
  Layer.orDie(RedisConnection.layer({ url: Redacted.make(redisUrl), keyPrefix, commandTimeout: "5 seconds" }))

/** Runs `command` on the connection in context, for tests that inspect what Redis holds. */
export const redis = <A>(command: (client: RedisConnection.Service["client"]) => Promise<A>) =>
  Effect.flatMap(RedisConnection.RedisConnection, (connection) => Effect.promise(() => command(connection.client)))

/**
 * Lets I/O already under way (a Redis reply) reach the fibers waiting on it, without moving the
 * TestClock: one turn of Node's event loop per step, until `done` holds.
 */
export const eventually = <E, R>(done: Effect.Effect<boolean, E, R>, what: string, turns = 2_000) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < turns; turn++) {
      if (yield* done) return
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
    return yield* Effect.die(new Error(`never happened: ${what}`))
  })

/** Runs `effect` on a connection of its own, open for the rest of the scope, as a process of the fleet would. */
export const onOwnConnection = <A, E>(
  keyPrefix: string,
  effect: Effect.Effect<A, E, RedisConnection.RedisConnection>
) => Effect.flatMap(Layer.build(connection(keyPrefix)), (context) => Effect.provide(effect, context))

/**
 * A connection of its own whose Redis answers can be held back: while `hold()` is on, the next
 * command's answer waits until `letThrough()` (`asked` says whether one is waiting), so a test can
 * interrupt a caller while Redis is granting it something.
 */
export const holdingConnection = (keyPrefix: string) =>
  Effect.map(onOwnConnection(keyPrefix, RedisConnection.RedisConnection), (real) => {
    let held = false
    let waiting: (() => void) | undefined
    const connection: RedisConnection.Service = {
      ...real,
      decide: (operation, command, fallback, late) =>
        real.decide(
          operation,
          (voidAfter) =>
            held ? new Promise((resolve) => (waiting = () => resolve(command(voidAfter)))) : command(voidAfter),
          fallback,
          late
        )
    }
    return {
      connection,
      hold: () => void (held = true),
      asked: () => waiting !== undefined,
      letThrough: () => {
        held = false
        waiting?.()
      }
    }
  })
