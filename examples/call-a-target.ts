/**
 * docs/calling-a-model.md's client example, kept here so the type-checker proves it still compiles: one
 * managed target read from `MISTRAL_*` environment variables, one resilient chat call.
 *
 * Run it against the real API with `MISTRAL_BASE_URL=https://api.mistral.ai/v1
 * MISTRAL_MODEL=mistral-small-latest MISTRAL_API_KEY=… npx -y pnpm@12.4.2 exec tsx
 * --conditions=@resilient-ai/source examples/call-a-target.ts`, or at a fault server started with
 * `resilient-ai faults`.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { ModelClient, Target } from "@resilient-ai/client"
import { Console, Effect, Layer } from "effect"

// MISTRAL_BASE_URL, MISTRAL_MODEL, MISTRAL_API_KEY (and optional tuning) are read and checked when
// the layer is built: a missing key or a zero timeout fails here, before any socket opens.
const MistralLive = ModelClient.layerConfig(Target.managedConfig("MISTRAL")).pipe(
  Layer.provide(NodeHttpClient.layerUndici)
)

const program = Effect.gen(function*() {
  const client = yield* ModelClient.ModelClient
  const completion = yield* client.chat(
    { messages: [{ role: "user", content: "Name three prime numbers." }] },
    { timeout: "20 seconds" } // one deadline for every attempt and every wait of this call
  )
  yield* Console.log(completion.choices[0].message.content, completion.usage)
}).pipe(
  // Typed, not thrown: why the call stopped, the last failure, every attempt.
  Effect.catchTag("CallFailed", (failed) => Console.error(`no answer (${failed.reason}): ${failed.last.message}`))
)

Effect.runPromise(program.pipe(Effect.provide(MistralLive))).catch((error) => console.error(String(error)))
