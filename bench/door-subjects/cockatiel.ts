/**
 * The door bench: what a user picks instead of resilient-ai, cockatiel's retry around its timeout
 * around the global `fetch`, handed to the `openai` SDK with its retries off.
 */
import { ExponentialBackoff, handleAll, retry, timeout, TimeoutStrategy, wrap } from "cockatiel"
import OpenAI from "openai"
import { apiKey, baseUrl, messages, model, report } from "./harness.js"

const policy = wrap(
  retry(handleAll, { maxAttempts: 3, backoff: new ExponentialBackoff() }),
  // Not aborted on return: the SDK reads the response's body after `fetch` has returned.
  timeout(30_000, { strategy: TimeoutStrategy.Aggressive, abortOnReturn: false })
)
const resilient = (input: string | URL | Request, init?: RequestInit) =>
  policy.execute(({ signal }) =>
    fetch(input, {
      ...init,
      signal: init?.signal === undefined || init.signal === null ? signal : AbortSignal.any([signal, init.signal])
    })
  )
const openai = new OpenAI({ baseURL: baseUrl, apiKey, maxRetries: 0, fetch: resilient })
const completion = await openai.chat.completions.create({ model, messages })
report(completion.choices[0]?.message.content, openai, policy)
