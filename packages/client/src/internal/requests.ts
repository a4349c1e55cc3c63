/**
 * What a `ModelClient` call sends and reserves: each request's JSON body, and the tokens it may use,
 * estimated, which each attempt reserves of the key's tokens per minute.
 */
import * as Limiters from "@resilient-ai/policy/internal/rateLimiter"
import type * as ChatCompletion from "../ChatCompletion.js"
import type * as Embeddings from "../Embeddings.js"

/**
 * The tokens a request may use, as a provider counts it when it arrives: its messages' estimate (a
 * few tokens each for the roles and separators) and its `max_tokens`. What each attempt reserves of
 * the key's tokens per minute; the provider's `usage` settles it.
 */
export const chatTokens = (request: ChatCompletion.ChatRequest): number => {
  let characters = 0
  for (const message of request.messages) {
    const content = (message as { readonly content?: unknown }).content
    characters += typeof content === "string" ? content.length : content == null ? 0 : JSON.stringify(content).length
  }
  return Math.ceil(characters / Limiters.charactersPerToken) + 4 * request.messages.length +
    (request.max_tokens ?? 0)
}

/** The JSON body of a request for `model`, streaming or not. */
export const chatBody = (
  request: ChatCompletion.ChatRequest,
  model: string,
  stream: boolean
): Record<string, unknown> => {
  const { extra, model: requested, ...fields } = request
  const defined: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined) defined[key] = value
  }
  return {
    ...defined,
    ...extra,
    model: requested ?? model,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {})
  }
}

/** The tokens a request's inputs hold, estimated: what each attempt reserves of the key's tokens per minute. */
export const embeddingsTokens = (request: Embeddings.EmbeddingsRequest): number =>
  typeof request.input === "string"
    ? Limiters.estimateTokens(request.input)
    : request.input.reduce((sum, input) => sum + Limiters.estimateTokens(input), 0)

/** The JSON body of a request for `model`. */
export const embeddingsBody = (request: Embeddings.EmbeddingsRequest, model: string): Record<string, unknown> => ({
  input: request.input,
  ...(request.dimensions === undefined ? {} : { dimensions: request.dimensions }),
  encoding_format: "float",
  ...request.extra,
  model: request.model ?? model
})
