/**
 * Two targets in one application, and failover between them: the most common Mistral topology,
 * a self-hosted pool for the baseline and the managed API for bursts.
 *
 * Each target is a client made from environment variables under its own prefix (`POOL_*`,
 * `MISTRAL_*`). Here the two "providers" are fault servers on loopback, so the example runs with
 * no API key and no network; against the real ones, only the variables change.
 *
 * The pool has 4 slots and sheds the rest at once; a shed call fails over to the managed API,
 * which starts its own sequence with its own budget.
 *
 * Run it with `npx -y pnpm@12.4.2 exec tsx --conditions=@resilient-ai/source examples/two-targets-failover.ts`.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { Failover, ModelClient, Target } from "@resilient-ai/client"
import { FaultServer } from "@resilient-ai/testing"
import { Console, Effect } from "effect"
// What Effect 3 and Effect 4 spell differently: examples/line/effect3.ts and effect4.ts show each form.
import { counterValue, withMinimumLogLevel } from "#examples-line"

/** The application: 24 questions at once, answered by whichever target can. */
const program = (pool: ModelClient.Service, mistral: ModelClient.Service) =>
  Effect.gen(function*() {
    const client = Failover.between(pool, mistral)
    const answers = yield* Effect.forEach(
      Array.from({ length: 24 }, (_, index) => index),
      (index) =>
        client.chat({ messages: [{ role: "user", content: `Question ${index}` }] }, { timeout: "5 seconds" }).pipe(
          Effect.map((completion) => completion.model),
          Effect.catchTag("CallFailed", (failed) => Effect.succeed(`failed (${failed.reason})`))
        ),
      { concurrency: "unbounded" }
    )
    const byModel = answers.reduce<Record<string, number>>((counts, model) => {
      counts[model] = (counts[model] ?? 0) + 1
      return counts
    }, {})
    yield* Console.log(`answered by model: ${JSON.stringify(byModel)}`)
  })

const main = Effect.gen(function*() {
  // Stand-ins for the two providers: the pool takes 300 ms per answer, the API 50 ms.
  const poolServer = yield* FaultServer.make({ latencyMs: 300 })
  const apiServer = yield* FaultServer.make({ latencyMs: 50 })
  // Each target reads its settings from the environment under its prefix when it is made; set here
  // because the stand-ins' URLs are known only now (a deployment sets them in its own).
  Object.assign(process.env, {
    POOL_BASE_URL: poolServer.url,
    POOL_MODEL: "open-mistral-7b",
    POOL_CONCURRENCY: "4",
    MISTRAL_BASE_URL: apiServer.url,
    MISTRAL_MODEL: "mistral-small-latest",
    MISTRAL_API_KEY: "not-a-real-key",
    MISTRAL_ATTEMPT_TIMEOUT: "20 seconds"
  })
  // The self-hosted pool: fixed capacity, sheds when full.
  const pool = yield* ModelClient.makeConfig(Target.selfHostedConfig("POOL"))
  // The managed API: elastic, modest budget, queues briefly.
  const mistral = yield* ModelClient.makeConfig(Target.managedConfig("MISTRAL"))
  yield* program(pool, mistral)
  const served = { pool: (yield* poolServer.arrivals).length, api: (yield* apiServer.arrivals).length }
  yield* Console.log(`requests that reached each provider: ${JSON.stringify(served)}`)
  const failovers = yield* counterValue(Failover.failovers, { from: "pool", to: "mistral" })
  yield* Console.log(`failovers from the pool to the API: ${failovers} (calls the pool shed; none queued on it)`)
})

// Attempt and failover log lines are at INFO; set the level to Info to see each one.
Effect.runPromise(main.pipe(Effect.provide(NodeHttpClient.layerUndici), Effect.scoped, withMinimumLogLevel("Warning")))
