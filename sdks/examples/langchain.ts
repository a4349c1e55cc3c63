/**
 * LangChain's `ChatOpenAI` (`@langchain/openai` 1.x) with resilient-ai under it: both of LangChain's
 * retrying layers off, each model call sent through the target's policy (budget, gate, full jitter,
 * `Retry-After`, one idempotency key). `sdks/test/langchain.test.ts` runs `haiku` against the fault
 * server.
 */
import { ChatOpenAI } from "@langchain/openai"
import { ResilientFetch, Target } from "@resilient-ai/client"
import { Effect, Redacted } from "effect"

/** One chat completion through LangChain, sent by the policy to the OpenAI-compatible API at `baseURL`. */
export const haiku = (baseURL: string) =>
  Effect.gen(function*() {
    const fetch = yield* ResilientFetch.make(Target.managed({
      name: "openai",
      baseUrl: baseURL,
      model: "gpt-4o-mini",
      apiKey: Redacted.make("sk-your-key")
    }))
    const model = new ChatOpenAI({
      model: "gpt-4o-mini",
      apiKey: "sk-your-key",
      // maxRetries: 0 — retrying happens at exactly one layer, this one. (The openai client inside
      // ChatOpenAI does not retry unless `configuration` sets its maxRetries: leave that out.)
      maxRetries: 0,
      configuration: { baseURL, fetch }
    })
    const message = yield* Effect.promise(() => model.invoke("A haiku."))
    return message.text
  })
