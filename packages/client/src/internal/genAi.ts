/**
 * A model call's span after OpenTelemetry's GenAI conventions: named `{operation} {model}`, of kind
 * client, with the provider, the server and what the request asks for; and what an answer says of
 * itself (its id, the model that served it, the tokens it used), which the attempt that got it
 * passes on to the call's span.
 */
import type * as Attempts from "@resilient-ai/policy/internal/attempt"
import type * as Retries from "@resilient-ai/policy/internal/resilient"

/** `gen_ai.operation.name`: what a call does. */
export type Operation = "chat" | "embeddings" | "text_completion"

/** Hosts whose provider has a name of its own in the conventions (`gen_ai.provider.name`). */
const providers: ReadonlyArray<readonly [RegExp, string]> = [
  [/(^|\.)mistral\.ai$/, "mistral_ai"],
  [/\.openai\.azure\.com$/, "azure.ai.openai"],
  [/(^|\.)openai\.com$/, "openai"],
  [/(^|\.)anthropic\.com$/, "anthropic"],
  [/(^|\.)groq\.com$/, "groq"],
  [/(^|\.)deepseek\.com$/, "deepseek"],
  [/(^|\.)x\.ai$/, "x_ai"],
  [/(^|\.)perplexity\.ai$/, "perplexity"]
]

/** Where an endpoint's calls go, as their spans name it. */
export interface Server {
  /** `gen_ai.provider.name` */
  readonly provider: string
  /** `server.address`, `server.port` */
  readonly address: string
  readonly port: number
}

/**
 * The provider and server behind `baseUrl`. A host the conventions name no provider for (a
 * self-hosted pool, a proxy) speaks the wire format this client speaks: `fallback`, OpenAI's unless
 * the call says otherwise; `server.address` and the model tell the actual system apart.
 */
export const serverOf = (baseUrl: string, fallback = "openai"): Server => {
  const url = new URL(baseUrl)
  const host = url.hostname.replace(/^\[|\]$/g, "")
  const known = providers.find(([pattern]) => pattern.test(host))
  return {
    provider: known === undefined ? fallback : known[1],
    address: host,
    port: url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
  }
}

/** The span of a call of `operation` on `model`, before what its request asks for. */
export const spanOf = (server: Server, operation: Operation, model: string): Retries.CallSpan => ({
  name: `${operation} ${model}`,
  kind: "client",
  attributes: {
    "gen_ai.operation.name": operation,
    "gen_ai.provider.name": server.provider,
    "gen_ai.request.model": model,
    "server.address": server.address,
    "server.port": server.port
  }
})

/** What a chat request asks for, by the conventions' names. */
interface Asked {
  readonly max_tokens?: number | undefined
  readonly temperature?: number | undefined
  readonly top_p?: number | undefined
  readonly seed?: number | undefined
}

/**
 * `base` with what the request asks for (`gen_ai.request.max_tokens`, …); `base` itself when it asks
 * for none. The conventions' array attributes (stop sequences, finish reasons) are left out:
 * `@effect/opentelemetry` exports an array as its JSON text.
 */
export const withRequest = (base: Retries.CallSpan, request: Asked): Retries.CallSpan => {
  const { max_tokens, seed, temperature, top_p } = request
  if (max_tokens === undefined && temperature === undefined && top_p === undefined && seed === undefined) return base
  return {
    ...base,
    attributes: {
      ...base.attributes,
      "gen_ai.request.max_tokens": max_tokens,
      "gen_ai.request.temperature": temperature,
      "gen_ai.request.top_p": top_p,
      "gen_ai.request.seed": seed
    }
  }
}

/** Puts in the attempt's report what a decoded answer (a completion, a stream's first chunk, embeddings) says of itself. */
export const describeAnswer = (report: Attempts.Report, value: unknown): void => {
  const answer = value as { readonly id?: unknown; readonly model?: unknown }
  if (typeof answer.id === "string") report.attribute("gen_ai.response.id", answer.id)
  if (typeof answer.model === "string") report.attribute("gen_ai.response.model", answer.model)
}

/** Puts in the attempt's report the tokens the answer says it used (`gen_ai.usage.*`). */
export const describeUsage = (
  report: Attempts.Report,
  input: number | undefined,
  output: number | undefined
): void => {
  if (input !== undefined) report.attribute("gen_ai.usage.input_tokens", input)
  if (output !== undefined) report.attribute("gen_ai.usage.output_tokens", output)
}
