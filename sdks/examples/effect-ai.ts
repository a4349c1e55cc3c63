/**
 * `@effect/ai` with resilient-ai under it: the `HttpClient` that `@effect/ai-openai`'s and
 * `@effect/ai-anthropic`'s clients are given is the resilient one, so each model call goes through
 * the target's policy (budget, gate, full jitter, `Retry-After`, one idempotency key). These SDKs do
 * not retry by themselves: add no `HttpClient.retry` in their `transformClient`.
 *
 * `sdks/test/effect-ai.test.ts` runs both against the fault server.
 */
import { LanguageModel } from "@effect/ai"
import { AnthropicClient, AnthropicLanguageModel } from "@effect/ai-anthropic"
import { OpenAiClient, OpenAiLanguageModel } from "@effect/ai-openai"
import { NodeHttpClient } from "@effect/platform-node"
import { ResilientHttpClient, Target } from "@resilient-ai/client"
import { Effect, Layer, Redacted } from "effect"

/** OpenAI's client at `apiUrl` (`https://api.openai.com/v1`), on the resilient HttpClient. */
export const OpenAiLive = (apiUrl: string) =>
  OpenAiClient.layer({ apiKey: Redacted.make("sk-your-key"), apiUrl }).pipe(
    Layer.provide(ResilientHttpClient.layer(Target.managed({
      name: "openai",
      baseUrl: apiUrl,
      model: "gpt-4o-mini",
      apiKey: Redacted.make("sk-your-key")
    }))),
    Layer.provide(NodeHttpClient.layerUndici)
  )

/** Anthropic's client at `apiUrl` (`https://api.anthropic.com`), on the resilient HttpClient. */
export const AnthropicLive = (apiUrl: string) =>
  AnthropicClient.layer({ apiKey: Redacted.make("sk-ant-your-key"), apiUrl }).pipe(
    Layer.provide(ResilientHttpClient.layer(Target.managed({
      name: "anthropic",
      baseUrl: `${apiUrl}/v1`,
      model: "claude-sonnet-4-5",
      apiKey: Redacted.make("sk-ant-your-key")
    }))),
    Layer.provide(NodeHttpClient.layerUndici)
  )

/** A haiku from whichever model is provided. */
export const haiku = Effect.map(LanguageModel.generateText({ prompt: "A haiku." }), (response) => response.text)

/** A haiku from OpenAI's gpt-4o-mini at `apiUrl`. */
export const haikuFromOpenAi = (apiUrl: string) =>
  haiku.pipe(Effect.provide(OpenAiLanguageModel.model("gpt-4o-mini")), Effect.provide(OpenAiLive(apiUrl)))

/** A haiku from Anthropic's Claude at `apiUrl`. */
export const haikuFromAnthropic = (apiUrl: string) =>
  haiku.pipe(
    Effect.provide(AnthropicLanguageModel.model("claude-sonnet-4-5", { max_tokens: 1024 })),
    Effect.provide(AnthropicLive(apiUrl))
  )
