/**
 * The bodies of OpenAI's Responses API (`POST /v1/responses`) the fault server answers with: a
 * response whose one output is an assistant message, the named events of its stream, a response
 * that breaks the contract, and the events that report a failure part-way through a stream.
 *
 * A response carries every field the API echoes of a request that set nothing (`tools`,
 * `temperature`, `metadata`…), because the SDKs' schemas require them (`@effect/ai-openai`'s
 * `Response` does). Pure, as `faultServerBody` is.
 */
import { breakContract, type Completion, type ErrorObject, namedEvent, type Usage } from "./faultServerBody.js"

/** What tells one response from another (its id `resp_…`, when, the model), and the id of its output message. */
export interface ResponseIds extends Completion {
  readonly itemId: string
}

const responseUsage = (tokens: Usage) => ({
  input_tokens: tokens.prompt_tokens,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: tokens.completion_tokens,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: tokens.total_tokens
})

const outputText = (text: string) => ({ type: "output_text", text, annotations: [] })

const outputMessage = (ids: ResponseIds, status: "in_progress" | "completed", content: ReadonlyArray<unknown>) => ({
  id: ids.itemId,
  type: "message",
  status,
  role: "assistant",
  content
})

/** The error of a failed response: the Responses API's `code` is one of its own, `server_error` when none is given. */
interface Failure {
  readonly code: string
  readonly message: string
}

const response = (
  ids: ResponseIds,
  status: "in_progress" | "completed" | "failed",
  output: ReadonlyArray<unknown>,
  tokens: Usage | null,
  error: Failure | null
) => ({
  id: ids.id,
  object: "response",
  created_at: ids.created,
  status,
  background: false,
  error,
  incomplete_details: null,
  instructions: null,
  max_output_tokens: null,
  model: ids.model,
  output,
  parallel_tool_calls: true,
  previous_response_id: null,
  reasoning: { effort: null, summary: null },
  service_tier: "default",
  store: true,
  temperature: 1,
  text: { format: { type: "text" } },
  tool_choice: "auto",
  tools: [],
  top_p: 1,
  truncation: "disabled",
  usage: tokens === null ? null : responseUsage(tokens),
  user: null,
  metadata: {}
})

/** A completed response whose one output is the assistant's message of `text`. */
export const completedResponse = (ids: ResponseIds, text: string, tokens: Usage) =>
  response(ids, "completed", [outputMessage(ids, "completed", [outputText(text)])], tokens, null)

/** Events numbered from `first` (`sequence_number`, after `type`), each named after its type. */
const numbered = (
  events: ReadonlyArray<{ readonly type: string } & Readonly<Record<string, unknown>>>,
  first: number
): ReadonlyArray<string> =>
  events.map(({ type, ...rest }, i) => namedEvent({ type, sequence_number: first + i, ...rest }))

/**
 * A streamed response, as OpenAI sends it: `response.created` and `response.in_progress` (no output
 * yet), the message and its text part added, one `response.output_text.delta` per piece, the text,
 * part and message done, then `response.completed` with the whole response. No `[DONE]`.
 */
export const responseEvents = (ids: ResponseIds, pieces: ReadonlyArray<string>, tokens: Usage) => {
  const text = pieces.join("")
  const inProgress = response(ids, "in_progress", [], null, null)
  const part = { item_id: ids.itemId, output_index: 0, content_index: 0 }
  return numbered([
    { type: "response.created", response: inProgress },
    { type: "response.in_progress", response: inProgress },
    { type: "response.output_item.added", output_index: 0, item: outputMessage(ids, "in_progress", []) },
    { type: "response.content_part.added", ...part, part: outputText("") },
    ...pieces.map((delta) => ({ type: "response.output_text.delta", ...part, delta })),
    { type: "response.output_text.done", ...part, text },
    { type: "response.content_part.done", ...part, part: outputText(text) },
    { type: "response.output_item.done", output_index: 0, item: outputMessage(ids, "completed", [outputText(text)]) },
    { type: "response.completed", response: completedResponse(ids, text, tokens) }
  ], 0)
}

/**
 * How a stream reports `error` after `sent` events, as OpenAI sends it: an `error` event whose
 * error object is nested (the shape captured from the API; its documentation shows the fields at
 * the top level), then `response.failed`, the response in `status: "failed"` with the error's code.
 */
export const failedResponseEvents = (ids: ResponseIds, error: ErrorObject, sent: number): ReadonlyArray<string> =>
  numbered([
    { type: "error", error: { type: error.type, code: error.code, message: error.message, param: null } },
    {
      type: "response.failed",
      response: response(ids, "failed", [], null, { code: error.code ?? "server_error", message: error.message })
    }
  ], sent)

/** A completed response without `output`, its `input_tokens` a string. */
export const brokenResponse = (ids: ResponseIds, tokens: Usage) =>
  breakContract(completedResponse(ids, "", tokens), "output", "input_tokens")

/** A stream whose one event, `response.completed`, carries the broken response. */
export const brokenResponseEvents = (ids: ResponseIds, tokens: Usage): ReadonlyArray<string> =>
  numbered([{ type: "response.completed", response: brokenResponse(ids, tokens) }], 0)
