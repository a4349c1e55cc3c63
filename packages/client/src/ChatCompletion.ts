/**
 * Chat completions on the wire: the request a caller builds, and the schemas every response and
 * every streamed chunk is decoded with before a caller sees it.
 *
 * The shapes are those of the OpenAI chat completions API, which Mistral and the OpenAI-compatible
 * servers (vLLM, TGI, llama.cpp) share. Fields a provider adds are ignored rather than rejected, so
 * a new field never breaks a running service; a field the caller relies on that is missing or of
 * the wrong type is a `ContractViolation`.
 */
import { identified } from "#client-line"
import * as Schema from "effect/Schema"

/** Why the model stopped: the common values, and any other string a provider adds (Mistral's `model_length`). */
const FinishReason = identified(Schema.String, "FinishReason")

/** A function call the model asks for. `arguments` is JSON text, exactly as the model wrote it. */
export const ToolCall = identified(
  Schema.Struct({
    id: Schema.String,
    type: Schema.optional(Schema.Literal("function")),
    function: Schema.Struct({
      name: Schema.String,
      arguments: Schema.String
    })
  }),
  "ToolCall"
)
export type ToolCall = typeof ToolCall.Type

/** Tokens the provider counted, and billed. */
const Usage = identified(
  Schema.Struct({
    prompt_tokens: Schema.Number,
    completion_tokens: Schema.Number,
    total_tokens: Schema.Number
  }),
  "Usage"
)

/** The assistant's answer in a completion. */
const AssistantMessage = identified(
  Schema.Struct({
    role: Schema.Literal("assistant"),
    content: Schema.NullOr(Schema.String),
    tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ToolCall)))
  }),
  "AssistantMessage"
)

/** The fields a completion and each of its streamed chunks start with. */
const envelope = <Name extends string>(object: Name) => ({
  id: Schema.String,
  object: Schema.Literal(object),
  created: Schema.Number,
  model: Schema.String
})

/** A whole chat completion. */
export const ChatCompletion = identified(
  Schema.Struct({
    ...envelope("chat.completion"),
    choices: Schema.NonEmptyArray(Schema.Struct({
      index: Schema.Number,
      message: AssistantMessage,
      finish_reason: Schema.NullOr(FinishReason)
    })),
    usage: Usage
  }),
  "ChatCompletion"
)
export type ChatCompletion = typeof ChatCompletion.Type

/** A tool call as it arrives in pieces in a stream: everything but the index may be absent. */
const ToolCallDelta = identified(
  Schema.Struct({
    index: Schema.Number,
    id: Schema.optional(Schema.String),
    type: Schema.optional(Schema.Literal("function")),
    function: Schema.optional(Schema.Struct({
      name: Schema.optional(Schema.String),
      arguments: Schema.optional(Schema.String)
    }))
  }),
  "ToolCallDelta"
)

/** One server-sent event of a streamed completion. */
export const ChatCompletionChunk = identified(
  Schema.Struct({
    ...envelope("chat.completion.chunk"),
    choices: Schema.Array(Schema.Struct({
      index: Schema.Number,
      delta: Schema.Struct({
        role: Schema.optional(Schema.String),
        content: Schema.optional(Schema.NullOr(Schema.String)),
        tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ToolCallDelta)))
      }),
      finish_reason: Schema.optional(Schema.NullOr(FinishReason))
    })),
    usage: Schema.optional(Schema.NullOr(Usage))
  }),
  "ChatCompletionChunk"
)
export type ChatCompletionChunk = typeof ChatCompletionChunk.Type

/** A message the caller sends. */
export type Message =
  | { readonly role: "system"; readonly content: string }
  | { readonly role: "user"; readonly content: string | ReadonlyArray<unknown> }
  | {
    readonly role: "assistant"
    readonly content: string | null
    readonly tool_calls?: ReadonlyArray<ToolCall> | undefined
  }
  | {
    readonly role: "tool"
    readonly content: string
    readonly tool_call_id: string
    readonly name?: string | undefined
  }

/** A chat request. `model` defaults to the target's model; any other field the API takes goes in `extra`. */
export interface ChatRequest {
  readonly messages: ReadonlyArray<Message>
  readonly model?: string | undefined
  readonly temperature?: number | undefined
  readonly top_p?: number | undefined
  readonly max_tokens?: number | undefined
  readonly stop?: string | ReadonlyArray<string> | undefined
  readonly tools?: ReadonlyArray<unknown> | undefined
  readonly tool_choice?: unknown
  readonly response_format?: unknown
  readonly seed?: number | undefined
  /** Sent as is, after the fields above: for parameters this type does not name. */
  readonly extra?: Readonly<Record<string, unknown>> | undefined
}
