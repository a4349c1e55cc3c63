/**
 * The door bench: `ModelClient` for a managed target with its defaults on the Node HTTP client
 * (`NodeHttpClient.layerUndici`), one chat call, in a scope that closes after it.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { ModelClient, Target } from "@resilient-ai/client"
import { Effect, Redacted } from "effect"
import { apiKey, baseUrl, messages, model, report } from "./harness.js"

await Effect.runPromise(Effect.scoped(
  Effect.gen(function*() {
    const client = yield* ModelClient.make(
      Target.managed({ name: "bench", baseUrl, model, apiKey: Redacted.make(apiKey) })
    )
    const completion = yield* client.chat({ messages })
    report(completion.choices[0]?.message.content, client)
  }).pipe(Effect.provide(NodeHttpClient.layerUndici))
))
