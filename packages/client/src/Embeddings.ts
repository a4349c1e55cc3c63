/**
 * Embeddings on the wire: the request, and the schema every response is decoded with.
 *
 * Vectors are requested as floats (`encoding_format: "float"`), so a response is plain JSON
 * numbers and the schema can check every one of them.
 */
import { identified } from "#client-line"
import * as Schema from "effect/Schema"

/** An embeddings response. */
export const Embeddings = identified(
  Schema.Struct({
    object: Schema.Literal("list"),
    data: Schema.Array(Schema.Struct({
      object: Schema.Literal("embedding"),
      index: Schema.Number,
      embedding: Schema.Array(Schema.Number)
    })),
    model: Schema.String,
    usage: Schema.Struct({
      prompt_tokens: Schema.Number,
      total_tokens: Schema.Number
    })
  }),
  "Embeddings"
)
export type Embeddings = typeof Embeddings.Type

/** An embeddings request. `model` defaults to the target's model. */
export interface EmbeddingsRequest {
  readonly input: string | ReadonlyArray<string>
  readonly model?: string | undefined
  readonly dimensions?: number | undefined
  /** Sent as is, after the fields above. */
  readonly extra?: Readonly<Record<string, unknown>> | undefined
}
