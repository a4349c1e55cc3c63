/**
 * What the fault server answers each endpoint with when no fault changes the answer, apart from
 * the sockets: the success and a success that breaks the contract, as JSON and as a stream, and
 * the events by which a stream reports an error. The faults cut, stall or replace these; which
 * body an endpoint sends is decided here alone, so every fault applies alike to every endpoint.
 */
import type { ModelRequest } from "./faultEngine.js"
import * as FaultServerBody from "./faultServerBody.js"
import * as MessagesBody from "./messagesBody.js"
import * as ResponsesBody from "./responsesBody.js"

/**
 * What one request is answered with when no fault changes it, by endpoint: the success and a
 * success that breaks the contract, each as JSON and as a stream (framed, the last event ending
 * it), and the events by which its stream reports an error after `sent` events. Functions, as a
 * fault uses one or two of them.
 */
export interface Answers {
  readonly body: () => unknown
  readonly events: () => ReadonlyArray<string>
  readonly brokenBody: () => unknown
  readonly brokenEvents: () => ReadonlyArray<string>
  readonly failedEvents: (error: FaultServerBody.ErrorObject, sent: number) => ReadonlyArray<string>
}

// Embeddings are never streamed.
const unstreamed = (): ReadonlyArray<string> => []

/** The answers to `request`, whose id is `requestId` (`req_…`): the ids of the bodies end as it does. */
export const answersOf = (request: ModelRequest, requestId: string): Answers => {
  const { model } = request
  if (request.endpoint === "models") {
    return {
      body: () => FaultServerBody.modelList(),
      events: unstreamed,
      brokenBody: () => ({ object: "list" }),
      brokenEvents: unstreamed,
      failedEvents: unstreamed
    }
  }
  if (request.endpoint === "embeddings") {
    return {
      body: () => FaultServerBody.embeddingList(request),
      events: unstreamed,
      brokenBody: () => FaultServerBody.brokenEmbeddingList(model),
      brokenEvents: unstreamed,
      failedEvents: unstreamed
    }
  }
  const suffix = requestId.slice("req_".length)
  const created = Math.floor(Date.now() / 1000)
  const tokens = FaultServerBody.usage(request.promptTokens, FaultServerBody.replyPieces.length)
  const { replyPieces, replyText } = FaultServerBody
  switch (request.endpoint) {
    case "chat": {
      const completion = { id: `chatcmpl-${suffix}`, created, model }
      return {
        body: () => FaultServerBody.chatCompletion(completion, replyText, tokens),
        events: () => [
          ...FaultServerBody.chatCompletionChunks(completion, replyPieces, request.includeUsage ? tokens : undefined)
            .map(FaultServerBody.sseEvent),
          FaultServerBody.sseDone
        ],
        brokenBody: () => FaultServerBody.brokenChatCompletion(completion, false),
        brokenEvents: () => [
          FaultServerBody.sseEvent(FaultServerBody.brokenChatCompletion(completion, true)),
          FaultServerBody.sseDone
        ],
        // A chat stream has no event names: the error is a chunk of its own, OpenAI's error object.
        failedEvents: (error) => [FaultServerBody.sseEvent(FaultServerBody.openAiError(error))]
      }
    }
    case "responses": {
      const ids = { id: `resp_${suffix}`, created, model, itemId: `msg_${suffix}` }
      return {
        body: () => ResponsesBody.completedResponse(ids, replyText, tokens),
        events: () => ResponsesBody.responseEvents(ids, replyPieces, tokens),
        brokenBody: () => ResponsesBody.brokenResponse(ids, tokens),
        brokenEvents: () => ResponsesBody.brokenResponseEvents(ids, tokens),
        failedEvents: (error, sent) => ResponsesBody.failedResponseEvents(ids, error, sent)
      }
    }
    case "messages": {
      const completion = { id: `msg_${suffix}`, created, model }
      return {
        body: () => MessagesBody.anthropicMessage(completion, replyText, tokens),
        events: () => MessagesBody.messageEvents(completion, replyPieces, tokens),
        brokenBody: () => MessagesBody.brokenMessage(completion, tokens),
        brokenEvents: () => MessagesBody.brokenMessageEvents(completion, tokens),
        failedEvents: (error) => [MessagesBody.messageErrorEvent(error)]
      }
    }
  }
}
