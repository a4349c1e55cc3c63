/**
 * The `openai` SDK (v7, Node 22) with resilient-ai under it: the SDK's retries off, each model call
 * sent through the target's policy (budget, gate, full jitter, `Retry-After`, one idempotency key).
 * `sdks/test/openai.test.ts` runs `haiku` against the fault server.
 */
import { ResilientFetch, Target } from "@resilient-ai/client"
import { Effect, Redacted } from "effect"
import OpenAI from "openai"

/** One chat completion through the SDK, sent by the policy to the OpenAI-compatible API at `baseURL`. */
export const haiku = (baseURL: string) =>
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
