/** The door bench: one chat call with Node's own `fetch` and `JSON.parse`, no SDK. */
import { apiKey, baseUrl, messages, model, report } from "./harness.js"

const response = await fetch(`${baseUrl}/chat/completions`, {
  method: "POST",
  headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
  body: JSON.stringify({ model, messages })
})
const completion = await response.json() as { choices: ReadonlyArray<{ message: { content: string | null } }> }
report(completion.choices[0]?.message.content)
