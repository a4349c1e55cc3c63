/**
 * The door bench: the promise door, `resilientFetch` from `@resilient-ai/fetch`, under the `openai`
 * SDK with its retries off, closed after the call.
 */
import { resilientFetch } from "@resilient-ai/fetch"
import OpenAI from "openai"
import { apiKey, baseUrl, messages, model, report } from "./harness.js"

const rf = resilientFetch({ name: "bench", baseUrl, model: "m", apiKey: "k" })
const openai = new OpenAI({ baseURL: baseUrl, apiKey, maxRetries: 0, fetch: rf })
const completion = await openai.chat.completions.create({ model, messages })
report(completion.choices[0]?.message.content, openai, rf)
await rf.close()
