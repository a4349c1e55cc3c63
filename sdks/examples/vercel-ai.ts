/**
 * The Vercel AI SDK with resilient-ai under it, on its OpenAI (the Responses API) and Mistral
 * providers: the SDK's retries off (`maxRetries: 0` on each call), each model call sent through the
 * target's policy (budget, gate, full jitter, `Retry-After`, one idempotency key).
 *
 * `sdks/test/vercel-ai.test.ts` runs both against the fault server.
 */
import { createMistral } from "@ai-sdk/mistral"
import { createOpenAI } from "@ai-sdk/openai"
import { ResilientFetch, Target } from "@resilient-ai/client"
import { generateText } from "ai"
import { Effect, Redacted } from "effect"

/** A haiku from OpenAI's Responses API at `baseURL` (`https://api.openai.com/v1`). */
export const haikuFromOpenAi = (baseURL: string) =>
  Effect.gen(function*() {
    const fetch = yield* ResilientFetch.make(Target.managed({
      name: "openai",
      baseUrl: baseURL,
      model: "gpt-4o-mini",
      apiKey: Redacted.make("sk-your-key")
    }))
    const openai = createOpenAI({ baseURL, apiKey: "sk-your-key", fetch })
    const { text } = yield* Effect.promise(() =>
      // maxRetries: 0 — retrying happens at exactly one layer, this one.
      generateText({ model: openai("gpt-4o-mini"), prompt: "A haiku.", maxRetries: 0 })
    )
    return text
  })

/** A haiku from Mistral at `baseURL` (`https://api.mistral.ai/v1`). */
export const haikuFromMistral = (baseURL: string) =>
  Effect.gen(function*() {
    const fetch = yield* ResilientFetch.make(Target.managed({
      name: "mistral",
      baseUrl: baseURL,
      model: "mistral-small-latest",
      apiKey: Redacted.make("your-key")
    }))
    const mistral = createMistral({ baseURL, apiKey: "your-key", fetch })
    const { text } = yield* Effect.promise(() =>
      // maxRetries: 0 — retrying happens at exactly one layer, this one.
      generateText({ model: mistral("mistral-small-latest"), prompt: "A haiku.", maxRetries: 0 })
    )
    return text
  })
