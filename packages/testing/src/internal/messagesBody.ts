/**
 * The bodies of Anthropic's Messages API (`POST /v1/messages`) the fault server answers with: a
 * message whose one content block is the reply's text, the named events of its stream, a message
 * that breaks the contract, and the error event that reports a failure part-way through a stream.
 * Pure, as `faultServerBody` is.
 */
import {
  anthropicError,
  breakContract,
  type Completion,
  type ErrorObject,
  namedEvent,
  type Usage
} from "./faultServerBody.js"

const message = (
  completion: Completion,
  content: ReadonlyArray<unknown>,
  stopReason: string | null,
  usage: { readonly input_tokens: number; readonly output_tokens: number }
) => ({
  id: completion.id,
  type: "message",
  role: "assistant",
  model: completion.model,
  content,
  stop_reason: stopReason,
  stop_sequence: null,
  usage
})

/** A message whose one text block is `text`, ended by `end_turn`. */
export const anthropicMessage = (completion: Completion, text: string, tokens: Usage) =>
  message(completion, [{ type: "text", text }], "end_turn", {
    input_tokens: tokens.prompt_tokens,
    output_tokens: tokens.completion_tokens
  })

/**
 * A streamed message, as Anthropic sends it: `message_start` (no content, one output token so far),
 * the text block started, a `ping`, one `content_block_delta` per piece, the block stopped,
 * `message_delta` with the stop reason and the output tokens, `message_stop`.
 */
export const messageEvents = (completion: Completion, pieces: ReadonlyArray<string>, tokens: Usage) =>
  [
    {
      type: "message_start",
      message: message(completion, [], null, { input_tokens: tokens.prompt_tokens, output_tokens: 1 })
    },
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    { type: "ping" },
    ...pieces.map((text) => ({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })),
    { type: "content_block_stop", index: 0 },
    {
      type: "message_delta",
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: tokens.completion_tokens }
    },
    { type: "message_stop" }
  ].map(namedEvent)

/** How a stream reports `error` part-way through: an `error` event carrying the error body's object. */
export const messageErrorEvent = (error: ErrorObject): string => namedEvent(anthropicError(error))

/** A message without `content`, its `input_tokens` a string. */
export const brokenMessage = (completion: Completion, tokens: Usage) =>
  breakContract(anthropicMessage(completion, "", tokens), "content", "input_tokens")

/** A stream whose `message_start` carries the broken message, then `message_stop`. */
export const brokenMessageEvents = (completion: Completion, tokens: Usage): ReadonlyArray<string> =>
  [{ type: "message_start", message: brokenMessage(completion, tokens) }, { type: "message_stop" }].map(namedEvent)
