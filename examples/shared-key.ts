/**
 * One API key shared by a batch job and interactive callers, paced under the key's limit instead of
 * finding it through 429s.
 *
 * The provider is a fault server on loopback that states its limit the way OpenAI and Mistral do,
 * `x-ratelimit-limit-requests: 600` (10 a second), on every answer: the target learns it from the
 * first answer, with no setting. A batch job of 40 calls starts at once; meanwhile an interactive
 * caller asks something every 400 ms. The batch job goes at the key's pace (a minute's worth never
 * goes at once); the interactive calls go first, waiting for no batch call.
 *
 * Run it with `npx -y pnpm@12.4.2 exec tsx --conditions=@resilient-ai/source examples/shared-key.ts`.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { type ChatCompletion, ModelClient, Target } from "@resilient-ai/client"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Console, Effect, Redacted } from "effect"
// What Effect 3 and Effect 4 spell differently: examples/line/effect3.ts and effect4.ts show each form.
import { withMinimumLogLevel } from "#examples-line"

/** An answer that states the key's limit, as a provider's headers do. */
const limited: FaultPlan.Fault = {
  _tag: "Raw",
  headers: { "content-type": "application/json", "x-ratelimit-limit-requests": "600" },
  body: JSON.stringify({
    id: "chatcmpl-example",
    object: "chat.completion",
    created: 0,
    model: "mistral-small-latest",
    choices: [{ index: 0, message: { role: "assistant", content: "Done." }, finish_reason: "stop" }],
    usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 }
  })
}

const request: ChatCompletion.ChatRequest = { messages: [{ role: "user", content: "Summarise this page." }] }

/** Milliseconds `effect` took, on the real clock, however it ended. */
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const started = performance.now()
    return Effect.map(Effect.exit(effect), () => Math.round(performance.now() - started))
  })

const program = Effect.gen(function*() {
  const server = yield* FaultServer.make({ otherwise: limited })
  const client = yield* ModelClient.make(Target.managed({
    name: "shared-key",
    baseUrl: server.url,
    model: "mistral-small-latest",
    apiKey: Redacted.make("example-key")
  }))
  // The first answer teaches the target the key's limit.
  yield* client.chat(request)
  const summarise = Effect.gen(function*() {
    // A batch job's calls wait behind interactive ones when the key's pace is full.
    const summary = yield* client.chat(request, { lane: "batch" })
    return summary
  })
  const [batchMillis, interactiveWaits] = yield* Effect.all([
    timed(Effect.forEach(Array.from({ length: 40 }), () => summarise, { concurrency: "unbounded" })),
    Effect.forEach(
      Array.from({ length: 6 }),
      (_, index) => Effect.andThen(Effect.sleep(`${400 * (index + 1)} millis`), timed(client.chat(request))),
      { concurrency: "unbounded" }
    )
  ], { concurrency: "unbounded" })
  const arrivals = (yield* server.arrivals).length
  yield* Console.log(`requests the provider saw: ${arrivals} (1 to learn the limit, 40 batch, 6 interactive)`)
  yield* Console.log(`the batch job took ${(batchMillis / 1000).toFixed(1)} s: the key's pace, 10 a second`)
  yield* Console.log(`interactive calls took (ms): ${interactiveWaits.join(", ")}`)
})

program.pipe(
  Effect.scoped,
  Effect.provide(NodeHttpClient.layerUndici),
  withMinimumLogLevel("Warning"),
  Effect.runPromise
)
