/**
 * `ResilientHttpClient` under code that uses the line's `HttpClient` (`@effect/platform`'s on Effect 3,
 * `effect/http`'s on Effect 4) the way an Effect SDK does (`@effect/ai-openai` posts JSON and reads the
 * body), against the real fault server.
 */
import { either, withoutDefaultLogger } from "#test-line"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { ResilientHttpClient, Target } from "@resilient-ai/client"
import { ClientLine } from "@resilient-ai/client/internal"
import { Coordination, Failure } from "@resilient-ai/policy"
import { Either } from "@resilient-ai/policy/internal"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect, Layer, Redacted, Stream } from "effect"
import { createServer } from "node:net"
import { canary } from "../canary.js"
import { assertOneIdempotencyKey } from "./sdkSupport.js"
import { freshName, oversized, settled } from "./support.js"

const { HttpClient, HttpClientError, HttpClientRequest } = ClientLine

const targetAt = (url: string, options: Partial<Target.Options> = {}) =>
  Target.managed({
    name: freshName("effect-sdk"),
    baseUrl: url,
    model: "gpt-4o-mini",
    apiKey: Redacted.make(canary),
    baseDelay: "1 millis",
    maxDelay: "5 millis",
    ...options
  })

/** What an Effect SDK does: post the call's JSON, and read the answer's status and body. */
const chat = (url: string) =>
  Effect.flatMap(HttpClient.HttpClient, (client) =>
    HttpClientRequest.post(`${url}/chat/completions`).pipe(
      (request) =>
        ClientLine.withJsonBody(request, { model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] }),
      client.execute,
      Effect.flatMap((response) => Effect.map(response.text, (text) => ({ status: response.status, text })))
    ))

/** An SDK's streamed call: the chunks' text as they arrive, until the stream ends or fails. */
const streamedChat = (url: string, received: Array<string>) =>
  Effect.flatMap(HttpClient.HttpClient, (client) =>
    HttpClientRequest.post(`${url}/chat/completions`).pipe(
      (request) =>
        ClientLine.withJsonBody(request, {
          model: "gpt-4o-mini",
          stream: true,
          messages: [{ role: "user", content: "Hi" }]
        }),
      client.execute,
      Effect.flatMap((response) =>
        response.stream.pipe(
          Stream.decodeText(),
          Stream.runForEach((text) => Effect.sync(() => received.push(text)))
        )
      )
    ))

/** Anthropic's answer when it is overloaded after accepting a stream: a 200 whose first event is the error. */
const overloadedStream: FaultPlan.Fault = {
  _tag: "Raw",
  headers: { "content-type": "text/event-stream" },
  body: `event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n`
}

/** The resilient client for `target`, over the Node client. */
const resilient = (target: ReturnType<typeof targetAt>) =>
  ResilientHttpClient.layer(target).pipe(Layer.provide(NodeHttpClient.layerUndici))

const quiet = withoutDefaultLogger

/** The platform's error of a request that got no response (`RequestError` on Effect 3, an `HttpClientError` of no response on 4). */
const assertRequestFailure = (error: unknown): void => {
  assert.isTrue(HttpClientError.isHttpClientError(error), "the platform's error")
  assert.isUndefined((error as { readonly response?: unknown }).response, "an error of the request, not of a response")
}

describe("ResilientHttpClient", () => {
  it.scopedLive("retries an overloaded call under the SDK, one idempotency key for every attempt", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 503 }, { _tag: "Status", status: 503 }, { _tag: "Ok" }]
      })
      const answer = yield* chat(server.url).pipe(Effect.provide(resilient(targetAt(server.url))))
      assert.strictEqual(answer.status, 200)
      assert.include(answer.text, FaultServer.replyText)
      const arrivals = yield* server.arrivals
      assert.strictEqual(arrivals.length, 3)
      assertOneIdempotencyKey(arrivals)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("an SDK that maps its base URL and key on top gets the same: one key, and no credential in what it reads", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 503 }, { _tag: "Status", status: 400 }]
      })
      // As @effect/ai-openai builds its client: its requests are whole only after its own mapRequest.
      const answer = yield* Effect.flatMap(
        HttpClient.HttpClient,
        (resilientClient) =>
          HttpClient.mapRequest(
            resilientClient,
            (request) => request.pipe(HttpClientRequest.prependUrl(server.url), HttpClientRequest.bearerToken(canary))
          ).execute(
            HttpClientRequest.post("/chat/completions").pipe(
              (request) =>
                ClientLine.withJsonBody(request, { model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] })
            )
          )
      ).pipe(Effect.provide(resilient(targetAt(server.url))))
      assert.strictEqual(answer.status, 400)
      // The SDK may print the request with its error: the key is not in it.
      assert.strictEqual(answer.request.headers["authorization"], "<redacted>")
      const arrivals = yield* server.arrivals
      assert.strictEqual(arrivals.length, 2)
      assert.strictEqual(arrivals[0]!.headers["authorization"], `Bearer ${canary}`)
      assertOneIdempotencyKey(arrivals)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("when the call stops on an error response, the SDK gets that response", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503, message: "busy" } })
      const answer = yield* chat(server.url).pipe(Effect.provide(resilient(targetAt(server.url, { maxAttempts: 2 }))))
      assert.strictEqual(answer.status, 503)
      assert.include(answer.text, "busy")
      assert.strictEqual((yield* server.arrivals).length, 2)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a call that gets no response fails with the platform's request error, the CallFailed its cause", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(() =>
        new Promise<number>((resolve) => {
          const probe = createServer().listen(0, "127.0.0.1", () => {
            const address = probe.address()
            probe.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
          })
        })
      )
      const url = `http://127.0.0.1:${port}/v1`
      const error = yield* Effect.flip(chat(url).pipe(Effect.provide(resilient(targetAt(url, { maxAttempts: 2 })))))
      assertRequestFailure(error)
      const cause = ClientLine.causeOfClientError(error)
      assert.instanceOf(cause, Failure.CallFailed)
      const failed = cause as Failure.CallFailed
      assert.strictEqual(failed.reason, "attempts")
      assert.strictEqual(failed.last._tag, "ConnectFailed")
      assert.strictEqual(failed.attempts.length, 2)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a stream is retried before its first chunk reaches the SDK, never after", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 503 }, overloadedStream, { _tag: "StreamBreak", afterChunks: 2 }]
      })
      const received: Array<string> = []
      const error = yield* Effect.flip(
        streamedChat(server.url, received).pipe(Effect.provide(resilient(targetAt(server.url))))
      )
      // The 503 and the overloaded first event reached nobody: retried. The break after two chunks
      // reached the SDK as the platform's error of its body.
      assert.strictEqual((yield* server.arrivals).length, 3)
      assert.include(received.join(""), "data: ")
      assert.notInclude(received.join(""), "overloaded_error")
      assert.isTrue(HttpClientError.isHttpClientError(error))
      assert.isDefined(
        (error as { readonly response?: unknown }).response,
        "an error of the response, not of the request"
      )
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("requests that are not model calls are executed as they were", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503 } })
      const status = yield* Effect.flatMap(HttpClient.HttpClient, (client) => client.get(`${server.url}/models`)).pipe(
        Effect.map((response) => response.status),
        Effect.provide(resilient(targetAt(server.url)))
      )
      // The model list answers 503 as the provider's state does: passed on as it came, not retried.
      assert.strictEqual(status, 503)
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("a success over maxResponseBytes is ResponseTooLarge: one request, read no further, its connection ended", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: oversized })
      // Only the answer's length, should it get through: a megabyte in a failure message stalls the reporter.
      const outcome = yield* either(
        chat(server.url).pipe(
          Effect.map((answer) => answer.text.length),
          Effect.provide(resilient(targetAt(server.url, { maxResponseBytes: 1024 })))
        )
      )
      assert(
        Either.isLeft(outcome),
        `the SDK read ${Either.match(outcome, { onLeft: () => 0, onRight: (n) => n })} bytes`
      )
      const error = Either.leftOf(outcome)
      assertRequestFailure(error)
      const failed = ClientLine.causeOfClientError(error) as Failure.CallFailed
      assert.instanceOf(failed, Failure.CallFailed)
      assert.strictEqual(failed.reason, "terminal")
      assert.deepStrictEqual(failed.last, new Failure.ResponseTooLarge({ status: 200, limitBytes: 1024 }))
      assert.strictEqual((yield* server.arrivals).length, 1)
      // Reading stopped at the limit: the rest of the megabyte is never taken off the socket.
      assert.strictEqual(yield* settled(server.openConnections, (open) => open === 0), 0)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))

  it.scopedLive("an answer with no body (204) reaches the SDK as it came", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Raw", status: 204 } })
      const answer = yield* chat(server.url).pipe(Effect.provide(resilient(targetAt(server.url))))
      assert.deepStrictEqual(answer, { status: 204, text: "" })
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(quiet)))
})
