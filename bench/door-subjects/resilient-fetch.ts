/**
 * The door bench: `ResilientFetch` (a managed target with its defaults, the `Coordination` of this
 * process) under the `openai` SDK, its retries off, in a scope that closes after the call.
 */
import { ResilientFetch, Target } from "@resilient-ai/client"
import { Effect, Redacted } from "effect"
import OpenAI from "openai"
import { apiKey, baseUrl, messages, model, report } from "./harness.js"

await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const fetch = yield* ResilientFetch.make(
    Target.managed({ name: "bench", baseUrl, model, apiKey: Redacted.make(apiKey) })
  )
  const openai = new OpenAI({ baseURL: baseUrl, apiKey, maxRetries: 0, fetch })
  const completion = yield* Effect.promise(() => openai.chat.completions.create({ model, messages }))
  report(completion.choices[0]?.message.content, openai, fetch)
})))
