/**
 * From one process to a fleet: the same client layer as `call-a-target.ts`, with one more layer
 * that moves every target's retry budget and concurrency gate onto Redis.
 *
 * Three members of a fleet (three client layers with a Redis connection each, as three processes
 * would have) call a provider that answers every request with 503. With budgets of their own, each
 * member spends its own floor of retries; sharing one on Redis, the three together spend one.
 *
 * Needs a Redis: `REDIS_URL` (default `redis://127.0.0.1:6379`). Run it with
 * `REDIS_URL=redis://127.0.0.1:6379 npx -y pnpm@12.4.2 exec tsx --conditions=@resilient-ai/source examples/fleet.ts`.
 * Without one, the members decide in process (as a fleet does while Redis is down): the example
 * says so, prints no fleet figure, and exits with status 1.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { ModelClient, Target } from "@resilient-ai/client"
import { Coordination } from "@resilient-ai/policy"
import { RedisConnection, RedisCoordination } from "@resilient-ai/redis"
import { FaultServer } from "@resilient-ai/testing"
import { Console, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
// What Effect 3 and Effect 4 spell differently: examples/line/effect3.ts and effect4.ts show each form.
import { counterValue, withMinimumLogLevel } from "#examples-line"

// The same client as before; its budget, gate and pace now live on the Redis at REDIS_URL, shared by
// every process that calls this target with this API key (REDIS_KEY_PREFIX, REDIS_COMMAND_TIMEOUT).
const MistralLive = ModelClient.layerConfig(Target.managedConfig("MISTRAL")).pipe(
  Layer.provide(NodeHttpClient.layerUndici),
  Layer.provide(RedisCoordination.layerConfig())
)

/**
 * The same member without the Redis layer: budget and gate in memory, its own as a process's would
 * be (members in one process would otherwise share the process's coordination, as clients do).
 */
const MistralAlone = ModelClient.layerConfig(Target.managedConfig("MISTRAL")).pipe(
  Layer.provide(NodeHttpClient.layerUndici),
  Layer.provide(Coordination.layerMemory)
)

const members = 3
const callsEach = 30
const redisUrl = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379"

/**
 * One member's calls; every one fails, so only how many requests they sent matters. The deadline
 * is far beyond what a call takes, so a busy machine cannot cut a retry and change the count.
 */
const calls = Effect.gen(function*() {
  const client = yield* ModelClient.ModelClient
  yield* Effect.forEach(
    Array.from({ length: callsEach }),
    () => Effect.ignore(client.chat({ messages: [{ role: "user", content: "hello" }] }, { timeout: "30 seconds" })),
    { concurrency: 5, discard: true }
  )
})

const main = Effect.gen(function*() {
  const provider = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503, code: "overloaded" } })
  // The members read their settings from the environment when their layers are built; set here
  // because the stand-in provider's URL is known only now (a deployment sets them in its own).
  Object.assign(process.env, {
    MISTRAL_BASE_URL: provider.url,
    MISTRAL_MODEL: "mistral-small-latest",
    MISTRAL_API_KEY: "not-a-real-key",
    MISTRAL_BASE_DELAY: "1 millis",
    MISTRAL_MAX_DELAY: "5 millis",
    // A floor of 0.2 retries per second is 12 per 60-second window, all of it spent: a budget that
    // learns no retry pays here would keep a twentieth, and the two figures would say less.
    MISTRAL_BUDGET_MIN_PER_SECOND: "0.2",
    MISTRAL_BUDGET_SHARE_WHEN_RETRIES_FAIL: "1",
    REDIS_URL: redisUrl,
    REDIS_COMMAND_TIMEOUT: process.env["REDIS_COMMAND_TIMEOUT"] ?? "50 millis",
    // How many processes share the target: a member that must decide alone before Redis has
    // told it the fleet's size spends this fleet's share of the floor, not a whole floor.
    REDIS_FLEET_SIZE: String(members),
    // A prefix of this run's own, so a second run does not find the first one's window.
    REDIS_KEY_PREFIX: `fleet-example-${randomUUID().slice(0, 8)}`
  })
  const fleet = (member: Layer.Layer<ModelClient.ModelClient, unknown>) =>
    Effect.gen(function*() {
      yield* provider.clearArrivals
      // Layer.fresh: each member builds its own client and connection, as a process would.
      yield* Effect.forEach(
        Array.from({ length: members }),
        () => calls.pipe(Effect.provide(Layer.fresh(member))),
        { concurrency: "unbounded", discard: true }
      )
      return (yield* provider.arrivals).length - members * callsEach
    })

  const alone = yield* fleet(MistralAlone)
  const fellBackBefore = yield* decidedInProcess
  const shared = yield* fleet(MistralLive)
  const fellBack = (yield* decidedInProcess) - fellBackBefore
  yield* Console.log(`${members} members, ${callsEach} calls each, every request answered 503:`)
  yield* Console.log(`retries sent with a budget per member: ${alone}`)
  if (fellBack === 0) {
    yield* Console.log(`retries sent with one budget on Redis: ${shared}`)
    return
  }
  // Decisions made in process are not the shared budget's: the figure would not measure it.
  const { host } = new URL(redisUrl)
  yield* Console.log(
    `Redis at ${host} did not answer in time for ${fellBack} budget and gate decisions: the members fell back ` +
      `to deciding in process (${shared} retries sent), so this run measured no shared budget. ` +
      `Start a Redis (redis-server) or set REDIS_URL.`
  )
  process.exitCode = 1
})

/** Budget and gate decisions made in process so far because Redis did not answer. */
const decidedInProcess = Effect.zipWith(
  counterValue(RedisConnection.fallbacks, { operation: "budget" }),
  counterValue(RedisConnection.fallbacks, { operation: "gate" }),
  (budget, gate) => budget + gate
)

// Every call here fails, and each says so in a WARN line; set the level to Info to see every attempt.
Effect.runPromise(main.pipe(Effect.scoped, withMinimumLogLevel("Error"))).catch((error) => {
  console.error(String(error))
  process.exitCode = 1
})
