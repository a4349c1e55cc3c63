/**
 * The `openai` SDK (v6, the last major that runs on Node 20) as the tests of a `fetch` under it
 * drive it (`ResilientFetch`, the promise door): a client on that `fetch`, a chat, a stream read.
 */
import OpenAI from "openai"
import { canary } from "../canary.js"

export const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [{ role: "user", content: "Say hello" }]

/** An OpenAI client at `baseURL` on `fetch`, its own retries off unless `maxRetries` says otherwise. */
export const openAiOn = (baseURL: string, fetch: OpenAI["fetch"], maxRetries = 0) =>
  new OpenAI({ apiKey: canary, baseURL, fetch, maxRetries })

/** One chat completion, as the SDK's caller asks for it. */
export const chat = (client: OpenAI, options?: OpenAI.RequestOptions) =>
  client.chat.completions.create({ model: "gpt-4o-mini", messages }, options)

/** A streamed chat, each chunk's text pushed onto `received` as it comes. */
export const streamInto = async (client: OpenAI, received: Array<string>): Promise<void> => {
  const stream = await client.chat.completions.create({ model: "gpt-4o-mini", messages, stream: true })
  for await (const chunk of stream) received.push(chunk.choices[0]?.delta.content ?? "")
}
