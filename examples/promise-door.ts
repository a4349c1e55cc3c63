/**
 * The promise door: the `openai` SDK with resilient-ai under it, in code that never mentions Effect.
 * The door reads its target from `OPENAI_BASE_URL`, `OPENAI_MODEL` and `OPENAI_API_KEY` (the
 * variables the SDK reads too) and any tuning variable (`OPENAI_MAX_ATTEMPTS`, …).
 * `test/fetch/resilientFetch.test.ts` runs it against the fault server.
 */
import { resilientFetch } from "@resilient-ai/fetch"
import OpenAI from "openai"

/** The SDK on the door, made once for the process. */
export const openAiClient = () => {
  const fetch = resilientFetch({ env: "OPENAI" })
  // maxRetries: 0 — retrying happens at exactly one layer, this one.
  const openai = new OpenAI({ fetch, maxRetries: 0 })
  return { openai, fetch }
}

/** A chat completion, then what the failure path looked like. */
export const haiku = async () => {
  const { fetch, openai } = openAiClient()
  const completion = await openai.chat.completions.create({
    model: "gpt-4o-mini",
    messages: [{ role: "user", content: "A haiku." }]
  })
  const { attempts, retries, budgetExhausted } = fetch.metrics()
  await fetch.close()
  return { text: completion.choices[0]?.message.content, attempts, retries, budgetExhausted }
}
