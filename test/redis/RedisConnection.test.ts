import { withEnvironment as withEnv } from "#test-line"
import { assert, it } from "@effect/vitest"
import { EffectLine } from "@resilient-ai/policy/internal"
import { RedisConnection, RedisCoordination } from "@resilient-ai/redis"
import { Duration, Effect, Exit, Layer, Option, Redacted } from "effect"
import { canary } from "../canary.js"
import { invalidSettings } from "../policy/support.js"

/** The message of the `ConfigError` reading `env` fails with. */
const configError = (env: Record<string, string>, prefix?: string) =>
  Effect.map(Effect.flip(RedisConnection.config(prefix).pipe(withEnv(env))), String)

it.effect("reads the connection's settings under REDIS_ by default", () =>
  Effect.gen(function*() {
    const options = yield* RedisConnection.config().pipe(withEnv({
      REDIS_URL: "redis://:s3cret-pass@127.0.0.1:6390/2",
      REDIS_KEY_PREFIX: "billing:llm",
      REDIS_COMMAND_TIMEOUT: "75",
      REDIS_RETRY_AFTER: "2 seconds"
    }))
    assert.strictEqual(Redacted.value(options.url), "redis://:s3cret-pass@127.0.0.1:6390/2")
    assert.notInclude(String(options.url), "s3cret-pass")
    assert.strictEqual(options.keyPrefix, "billing:llm")
    assert.deepStrictEqual(options.commandTimeout, Duration.millis(75))
    assert.deepStrictEqual(options.retryAfter, Duration.seconds(2))
  }))

it.effect("reads under another prefix, leaving what is not set to the defaults", () =>
  Effect.gen(function*() {
    const options = yield* RedisConnection.config("FLEET_REDIS").pipe(
      withEnv({ FLEET_REDIS_URL: "redis://cache:6379" })
    )
    assert.deepStrictEqual(
      [options.keyPrefix, options.commandTimeout, options.retryAfter, options.fleetSize],
      ["resilient-ai", Duration.millis(50), Duration.seconds(1), 1]
    )
  }))

it.effect("names the prefix it reads under in a bad setting's message", () =>
  Effect.gen(function*() {
    // Each bad setting, by variable and rule, is in test/config/BadConfig.test.ts.
    assert.include(yield* configError({ FLEET_URL: "ftp://x" }, "FLEET"), "redis (FLEET_*): FLEET_URL must start with")
  }))

it.effect("fails the layer with the ConfigError before opening any connection", () =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(
      Layer.build(RedisCoordination.layerConfig()).pipe(
        Effect.scoped,
        withEnv({ REDIS_URL: "redis://127.0.0.1:1", REDIS_COMMAND_TIMEOUT: "-5" })
      )
    )
    assert.isTrue(Exit.isFailure(exit))
    const failure = Exit.isFailure(exit) ? EffectLine.failureOf(exit.cause) : Option.none()
    assert.isTrue(Option.isSome(failure))
    assert.include(
      String(Option.getOrThrow(failure)),
      "REDIS_COMMAND_TIMEOUT must not be negative, got -5"
    )
  }))

it("refuses bad options given in code with one InvalidSettings naming them, and never throws", () => {
  assert.strictEqual(
    invalidSettings(
      RedisConnection.make({ url: Redacted.make("redis://127.0.0.1"), commandTimeout: "0 millis", fleetSize: 0 })
    ),
    "redis: commandTimeout must be a positive duration, got 0; fleetSize must be a whole number of at least 1, got 0"
  )
  assert.strictEqual(
    invalidSettings(Layer.build(RedisConnection.layer({ url: Redacted.make(`http://:${canary}@host`) }))),
    "redis: url must start with redis:// or rediss://"
  )
})

it.effect("reads a Redis Cluster's seed nodes, comma-separated, or one seed node with REDIS_CLUSTER", () =>
  Effect.gen(function*() {
    const seeds = yield* RedisConnection.config().pipe(withEnv({
      REDIS_URL: "redis://:s3cret-pass@10.0.0.1:7000, redis://:s3cret-pass@10.0.0.2:7000"
    }))
    assert.strictEqual(
      Redacted.value(seeds.url),
      "redis://:s3cret-pass@10.0.0.1:7000, redis://:s3cret-pass@10.0.0.2:7000"
    )
    assert.isUndefined(seeds.cluster)
    const one = yield* RedisConnection.config().pipe(
      withEnv({ REDIS_URL: "redis://10.0.0.1:7000", REDIS_CLUSTER: "yes" })
    )
    assert.isTrue(one.cluster)
  }))

it.effect("a cluster's settings that cannot be one are a ConfigError naming the rule", () =>
  Effect.gen(function*() {
    assert.include(
      yield* configError({ REDIS_URL: "redis://a:7000,redis://b:7000", REDIS_CLUSTER: "no" }),
      "REDIS_URL names 2 servers, which only a cluster has: set cluster, or name one server"
    )
    assert.include(
      yield* configError({ REDIS_URL: "redis://a:7000/2", REDIS_CLUSTER: "true" }),
      "REDIS_URL names a database, and a Redis Cluster has only database 0"
    )
    const badSeed = yield* configError({ REDIS_URL: `redis://a:7000,http://:${canary}@b:7000` })
    assert.include(badSeed, "REDIS_URL names 2 URLs, and one must start with redis:// or rediss://")
    assert.notInclude(badSeed, canary)
  }))

it("refuses a cluster's bad options given in code with InvalidSettings", () => {
  assert.strictEqual(
    invalidSettings(RedisConnection.make({ url: Redacted.make("redis://a:7000,redis://b:7000"), cluster: false })),
    "redis: url names 2 servers, which only a cluster has: set cluster, or name one server"
  )
})
