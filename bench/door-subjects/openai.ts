/** The door bench's reference: the `openai` SDK on the global `fetch`, its retries off. */
import OpenAI from "openai"
import { apiKey, baseUrl, messages, model, report } from "./harness.js"

const openai = new OpenAI({ baseURL: baseUrl, apiKey, maxRetries: 0 })
const completion = await openai.chat.completions.create({ model, messages })
report(completion.choices[0]?.message.content, openai)
