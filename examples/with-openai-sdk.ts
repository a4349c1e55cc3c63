/**
 * The `openai` SDK with resilient-ai under it: the SDK's retries off, each model call sent through
 * the target's policy (budget, gate, full jitter, `Retry-After`, one idempotency key).
 *
 * Run it against a fault server that answers 503 to the first request:
 * `npx -y pnpm@12.4.2 exec tsx --conditions=@resilient-ai/source examples/with-openai-sdk.ts`.
 */
import { ResilientFetch, Target } from "@resilient-ai/client"
import { FaultServer } from "@resilient-ai/testing"
import { Effect, Redacted } from "effect"
import OpenAI from "openai"

const haiku = (baseURL: string) =>
  Effect.gen(function*() {
    const fetch = yield* ResilientFetch.make(Target.managed({
      name: "openai",
      baseUrl: baseURL,
      model: "gpt-4o-mini",
      apiKey: Redacted.make("sk-your-key")
    }))
    // maxRetries: 0 — retrying happens at exactly one layer, this one.
    const openai = new OpenAI({ apiKey: "sk-your-key", baseURL, fetch, maxRetries: 0 })
    const completion = yield* Effect.promise(() =>
      openai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "A haiku." }] })
    )
    return completion.choices[0]?.message.content
  })

const program = Effect.gen(function*() {
  const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
  const answer = yield* haiku(server.url)
  const arrivals = yield* server.arrivals
  console.log(`${answer} (${arrivals.length} requests: the 503 retried by the policy, not the SDK)`)
})

Effect.runPromise(Effect.scoped(program)).catch((error) => {
  console.error(String(error))
  process.exitCode = 1
})
