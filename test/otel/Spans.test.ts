/**
 * The spans of resilient calls, as `@effect/opentelemetry` exports them to an in-memory exporter:
 * a call is one span (named after OpenTelemetry's GenAI conventions when the client makes it), each
 * attempt a span under it with its retry attributes, the HTTP client's span under the attempt's.
 * Every span that starts ends, whether the call succeeds, stops or is interrupted.
 */
import { collect, drawing, httpClientSpanName, interruptedSpanAttribute, recordingSleeps, TestClock } from "#test-line"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { SpanKind, SpanStatusCode } from "@opentelemetry/api"
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  type Span,
  type SpanProcessor
} from "@opentelemetry/sdk-trace-base"
import { Failover, ModelClient, ResilientFetch, ResilientHttpClient } from "@resilient-ai/client"
import { ClientLine } from "@resilient-ai/client/internal"
import { Telemetry } from "@resilient-ai/otel"
import { Failure, Resilient } from "@resilient-ai/policy"
import { EffectLine, Policies } from "@resilient-ai/policy/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Effect, Fiber, Layer, Schedule, Stream } from "effect"
import { untilSleeping } from "../client/sdkSupport.js"
import { eventually, hello, HttpLive, managedAt, quiet, serverAndClient } from "../client/support.js"

/** Counts the spans started and not yet ended: none may be left once a call is over. */
class OpenSpans implements SpanProcessor {
  readonly open = new Set<string>()
  onStart(span: Span) {
    this.open.add(span.spanContext().spanId)
  }
  onEnd(span: ReadableSpan) {
    this.open.delete(span.spanContext().spanId)
  }
  forceFlush() {
    return Promise.resolve()
  }
  shutdown() {
    return Promise.resolve()
  }
}

const { HttpClient, HttpClientRequest } = ClientLine

/**
 * A tracer whose spans end in memory, and the layer that makes it Effect's: `Telemetry.layer`, on
 * `@effect/opentelemetry`'s tracer of the line the tests run on.
 */
const inMemory = () => {
  const exporter = new InMemorySpanExporter()
  const open = new OpenSpans()
  const layer = Telemetry.layer({
    serviceName: "resilient-ai-test",
    spanProcessor: [open, new SimpleSpanProcessor(exporter)]
  })
  return { exporter, layer, open }
}

const idOf = (span: ReadableSpan) => span.spanContext().spanId
const childrenOf = (spans: ReadonlyArray<ReadableSpan>, parent: ReadableSpan) =>
  spans.filter((span) => span.parentSpanContext?.spanId === idOf(parent))
const named = (spans: ReadonlyArray<ReadableSpan>, name: string) => spans.filter((span) => span.name === name)
const only = (spans: ReadonlyArray<ReadableSpan>, name: string) => {
  const found = named(spans, name)
  assert.strictEqual(found.length, 1, `one span named ${name}`)
  return found[0]!
}
/** The attempt spans under a call's span, in order. */
const attemptsOf = (spans: ReadonlyArray<ReadableSpan>, call: ReadableSpan) =>
  named(childrenOf(spans, call), "resilient_ai.attempt").sort((a, b) =>
    Number(a.attributes["resilient_ai.attempt"]) - Number(b.attributes["resilient_ai.attempt"])
  )
/** A span's start or end in milliseconds of the clock (the TestClock starts at 0). */
const millisOf = ([seconds, nanos]: readonly [number, number]) => seconds * 1000 + nanos / 1e6
const attributesOf = (span: ReadableSpan, prefix: string) =>
  Object.fromEntries(Object.entries(span.attributes).filter(([key]) => key.startsWith(prefix)))

describe("spans of a resilient call", () => {
  it.scoped("a call retried after a 503 and a 429: one client span, three attempt spans with their retry attributes", () => {
    const { exporter, layer, open } = inMemory()
    return Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 503 }, { _tag: "Status", status: 429, retryAfter: "2" }, { _tag: "Ok" }]
      })
      const target = managedAt(server.url, {
        baseDelay: "1 second",
        maxDelay: "8 seconds",
        hintSpread: "200 millis",
        attemptTimeout: "30 seconds"
      })
      const client = yield* ModelClient.make(target)
      // Every random draw is 0.5: full jitter sleeps 500 ms of its 1 s, the hint 2 s + 100 ms of its 200 ms spread.
      const fiber = yield* EffectLine.fork(
        client.chat({ ...hello, max_tokens: 50, temperature: 0.2 }).pipe(
          Effect.withSpan("handler"),
          drawing([0.5])
        )
      )
      yield* untilSleeping(500)
      yield* TestClock.adjust(500)
      yield* untilSleeping(2_600)
      yield* TestClock.adjust(2_100)
      const completion = yield* Fiber.join(fiber)

      const spans = exporter.getFinishedSpans()
      assert.strictEqual(open.open.size, 0, "every span ended")
      assert.strictEqual(new Set(spans.map((span) => span.spanContext().traceId)).size, 1, "one trace")
      const handler = only(spans, "handler")
      const call = only(spans, "chat test-model")
      assert.strictEqual(call.parentSpanContext?.spanId, idOf(handler))
      assert.strictEqual(call.kind, SpanKind.CLIENT)
      assert.strictEqual(call.status.code, SpanStatusCode.OK)
      assert.deepStrictEqual(attributesOf(call, "gen_ai."), {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "test-model",
        "gen_ai.request.max_tokens": 50,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.response.id": completion.id,
        "gen_ai.response.model": "test-model",
        "gen_ai.usage.input_tokens": completion.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": completion.usage.completion_tokens
      })
      assert.deepStrictEqual(attributesOf(call, "resilient_ai."), {
        "resilient_ai.target": target.name,
        "resilient_ai.attempts": 3
      })
      assert.deepStrictEqual([call.attributes["server.address"], call.attributes["server.port"]], [
        "127.0.0.1",
        server.port
      ])
      assert.isUndefined(call.attributes["error.type"])
      assert.deepStrictEqual([millisOf(call.startTime), millisOf(call.endTime)], [0, 2_600])

      const attempts = attemptsOf(spans, call)
      assert.deepStrictEqual(attempts.map((span) => span.attributes), [
        {
          "resilient_ai.attempt": 1,
          "error.type": "Overloaded",
          "resilient_ai.verdict": "retryable",
          "http.response.status_code": 503
        },
        {
          "resilient_ai.attempt": 2,
          "resilient_ai.retry.delay_seconds": 0.5,
          "error.type": "RateLimited",
          "resilient_ai.verdict": "retryable",
          "http.response.status_code": 429,
          "resilient_ai.retry_after_seconds": 2
        },
        {
          "resilient_ai.attempt": 3,
          "resilient_ai.retry.delay_seconds": 2.1,
          "gen_ai.response.id": completion.id,
          "gen_ai.response.model": "test-model",
          "gen_ai.usage.input_tokens": completion.usage.prompt_tokens,
          "gen_ai.usage.output_tokens": completion.usage.completion_tokens
        }
      ])
      assert.deepStrictEqual(attempts.map((span) => span.kind), [
        SpanKind.INTERNAL,
        SpanKind.INTERNAL,
        SpanKind.INTERNAL
      ])
      assert.deepStrictEqual(attempts.map((span) => span.status.code), [
        SpanStatusCode.ERROR,
        SpanStatusCode.ERROR,
        SpanStatusCode.OK
      ])
      assert.deepStrictEqual(attempts.map((span) => millisOf(span.startTime)), [0, 500, 2_600])
      // The HTTP client's own span is the attempt's child.
      assert.deepStrictEqual(
        attempts.map((attempt) => childrenOf(spans, attempt).map((span) => [span.name, span.kind])),
        [[[httpClientSpanName("POST"), SpanKind.CLIENT]], [[httpClientSpanName("POST"), SpanKind.CLIENT]], [[
          httpClientSpanName("POST"),
          SpanKind.CLIENT
        ]]]
      )
      assert.deepStrictEqual(
        attempts.map((attempt) => childrenOf(spans, attempt)[0]!.attributes["http.response.status_code"]),
        [503, 429, 200]
      )
      assert.strictEqual(spans.length, 8)
      // The trace context stays in the process unless the target says to send it.
      assert.isTrue((yield* server.arrivals).every((arrival) => arrival.headers["traceparent"] === undefined))
    }).pipe(recordingSleeps, Effect.provide(HttpLive), Effect.provide(layer))
  })

  it.scoped("a call that stops: its reason and last failure on the call's span, an error status", () => {
    const { exporter, layer, open } = inMemory()
    return Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 503 }, { _tag: "Status", status: 400 }]
      })
      const client = yield* ModelClient.make(managedAt(server.url, { baseDelay: "1 second", maxDelay: "8 seconds" }))
      const fiber = yield* EffectLine.fork(
        Effect.flip(client.chat(hello)).pipe(drawing([0.5]))
      )
      yield* untilSleeping(500)
      yield* TestClock.adjust(500)
      const failed = yield* Fiber.join(fiber)
      assert.strictEqual(failed.reason, "terminal")

      const spans = exporter.getFinishedSpans()
      assert.strictEqual(open.open.size, 0, "every span ended")
      const call = only(spans, "chat test-model")
      assert.isUndefined(call.parentSpanContext, "a root span: nothing around the call")
      assert.strictEqual(call.status.code, SpanStatusCode.ERROR)
      assert.include(call.status.message, "request rejected")
      assert.deepStrictEqual(
        [
          call.attributes["resilient_ai.stop_reason"],
          call.attributes["error.type"],
          call.attributes["resilient_ai.attempts"]
        ],
        ["terminal", "ClientError", 2]
      )
      assert.deepStrictEqual(
        attemptsOf(spans, call).map((span) => [
          span.attributes["error.type"],
          span.attributes["resilient_ai.verdict"],
          span.attributes["http.response.status_code"],
          span.status.code
        ]),
        [["Overloaded", "retryable", 503, SpanStatusCode.ERROR], ["ClientError", "terminal", 400, SpanStatusCode.ERROR]]
      )
    }).pipe(recordingSleeps, Effect.provide(HttpLive), Effect.provide(layer))
  })

  describe("interruption ends every span", () => {
    it.scopedLive("during an attempt: the call's, the attempt's and the HTTP client's spans end, interrupted", () => {
      const { exporter, layer, open } = inMemory()
      return Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({ otherwise: { _tag: "StallHeaders", ms: 1e9 } })
        const fiber = yield* EffectLine.fork(client.chat(hello))
        yield* eventually(Effect.map(server.arrivals, (arrivals) => arrivals.length === 1))
        yield* Fiber.interrupt(fiber)
        assert.strictEqual(open.open.size, 0, "every span ended")
        const spans = exporter.getFinishedSpans()
        const call = only(spans, "chat test-model")
        const [attempt] = attemptsOf(spans, call)
        const http = only(spans, httpClientSpanName("POST"))
        assert.strictEqual(http.parentSpanContext?.spanId, idOf(attempt!))
        for (const span of [call, attempt!, http]) {
          assert.strictEqual(span.attributes[interruptedSpanAttribute], true, span.name)
          assert.notStrictEqual(span.status.code, SpanStatusCode.ERROR, span.name)
        }
        assert.strictEqual(call.attributes["resilient_ai.attempts"], 1)
        assert.isUndefined(call.attributes["error.type"])
      }).pipe(Effect.provide(HttpLive), Effect.provide(layer))
    })

    it.scoped("during the backoff's sleep: the call's span ends interrupted after its one failed attempt", () => {
      const { exporter, layer, open } = inMemory()
      return Effect.gen(function*() {
        const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503 } })
        const client = yield* ModelClient.make(managedAt(server.url, { baseDelay: "1 second", maxDelay: "8 seconds" }))
        const fiber = yield* EffectLine.fork(client.chat(hello).pipe(drawing([0.5])))
        yield* untilSleeping(500)
        yield* Fiber.interrupt(fiber)
        assert.strictEqual(open.open.size, 0, "every span ended")
        const spans = exporter.getFinishedSpans()
        const call = only(spans, "chat test-model")
        assert.strictEqual(call.attributes[interruptedSpanAttribute], true)
        assert.deepStrictEqual(
          attemptsOf(spans, call).map((span) => [span.attributes["resilient_ai.verdict"], span.status.code]),
          [["retryable", SpanStatusCode.ERROR]]
        )
      }).pipe(recordingSleeps, Effect.provide(HttpLive), Effect.provide(layer))
    })
  })

  it.scoped("a resilient call inside another's attempt: its span, with its one attempt, under the enclosing attempt", () => {
    const { exporter, layer, open } = inMemory()
    return Effect.gen(function*() {
      const outer = yield* Policies.withSchedule({ target: "outer", maxAttempts: 2 }, Schedule.spaced("1 second"), {
        readsHints: false
      })
      const inner = yield* Resilient.policy({ target: "inner", maxAttempts: 3 })
      let sent = 0
      const send = Effect.suspend(() =>
        ++sent === 1 ? Effect.fail(new Failure.ServerError({ status: 500 })) : Effect.succeed("answer")
      )
      const fiber = yield* EffectLine.fork(send.pipe(Resilient.retry(inner), Resilient.retry(outer)))
      yield* untilSleeping(1_000)
      yield* TestClock.adjust(1_000)
      assert.strictEqual(yield* Fiber.join(fiber), "answer")

      const spans = exporter.getFinishedSpans()
      assert.strictEqual(open.open.size, 0, "every span ended")
      const call = only(spans, "resilient_ai.call outer")
      assert.strictEqual(call.kind, SpanKind.INTERNAL)
      const attempts = attemptsOf(spans, call)
      assert.strictEqual(attempts.length, 2)
      const nested = attempts.map((attempt) => {
        const [innerCall, ...others] = childrenOf(spans, attempt)
        assert.strictEqual(others.length, 0)
        assert.strictEqual(innerCall!.name, "resilient_ai.call inner")
        assert.strictEqual(innerCall!.attributes["resilient_ai.nested"], true)
        return [
          innerCall!.attributes["resilient_ai.stop_reason"],
          attemptsOf(spans, innerCall!).map((span) => span.attributes["error.type"])
        ]
      })
      // The first inner call defers its failure to the outer call, which retries.
      assert.deepStrictEqual(nested, [["deferred", ["ServerError"]], [undefined, [undefined]]])
      assert.deepStrictEqual(
        attempts.map((span) => [span.attributes["error.type"], span.attributes["resilient_ai.verdict"]]),
        [["ServerError", "retryable"], [undefined, undefined]]
      )
    }).pipe(recordingSleeps, Effect.provide(layer))
  })

  it.scopedLive("failover: one call span per target, both under the caller's span", () => {
    const { exporter, layer, open } = inMemory()
    return Effect.gen(function*() {
      const primary = yield* serverAndClient(
        { otherwise: { _tag: "Status", status: 503 } },
        (url) => managedAt(url, { maxAttempts: 1 })
      )
      const secondary = yield* serverAndClient({})
      yield* Failover.between(primary.client, secondary.client).chat(hello).pipe(Effect.withSpan("handler"))

      const spans = exporter.getFinishedSpans()
      assert.strictEqual(open.open.size, 0, "every span ended")
      const handler = only(spans, "handler")
      const calls = childrenOf(spans, handler)
      assert.deepStrictEqual(
        calls.map((span) => [
          span.name,
          span.attributes["resilient_ai.target"],
          span.attributes["resilient_ai.stop_reason"],
          span.status.code,
          attemptsOf(spans, span).length
        ]),
        [
          ["chat test-model", primary.client.target.name, "attempts", SpanStatusCode.ERROR, 1],
          ["chat test-model", secondary.client.target.name, undefined, SpanStatusCode.OK, 1]
        ]
      )
    }).pipe(Effect.provide(HttpLive), Effect.provide(layer))
  })

  it.scopedLive("propagateTrace: the provider is sent the trace context of the attempt's HTTP span", () => {
    const { exporter, layer } = inMemory()
    return Effect.gen(function*() {
      const { client, server } = yield* serverAndClient({}, (url) => managedAt(url, { propagateTrace: true }))
      yield* client.chat(hello)
      const spans = exporter.getFinishedSpans()
      const http = only(spans, httpClientSpanName("POST"))
      const [attempt] = attemptsOf(spans, only(spans, "chat test-model"))
      assert.strictEqual(http.parentSpanContext?.spanId, idOf(attempt!))
      const [arrival] = yield* server.arrivals
      assert.strictEqual(arrival!.headers["traceparent"], `00-${http.spanContext().traceId}-${idOf(http)}-01`)
    }).pipe(Effect.provide(HttpLive), Effect.provide(layer))
  })

  it.scopedLive("a stream: the call's span covers it to its end, with the usage its last chunk reports", () => {
    const { exporter, layer, open } = inMemory()
    return Effect.gen(function*() {
      const { client } = yield* serverAndClient({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
      const chunks = yield* collect(client.chatStream(hello))
      const last = chunks[chunks.length - 1]!
      assert.strictEqual(open.open.size, 0, "every span ended")
      const spans = exporter.getFinishedSpans()
      const call = only(spans, "chat test-model")
      assert.strictEqual(call.kind, SpanKind.CLIENT)
      assert.strictEqual(call.status.code, SpanStatusCode.OK)
      const attempts = attemptsOf(spans, call)
      assert.deepStrictEqual(attempts.map((span) => span.attributes["error.type"]), ["Overloaded", undefined])
      assert.strictEqual(attempts[1]!.attributes["gen_ai.response.id"], last.id)
      assert.deepStrictEqual(
        [call.attributes["gen_ai.response.id"], call.attributes["resilient_ai.attempts"]],
        [last.id, 2]
      )
      // The usage arrives with the last chunk, after the attempt that opened the stream ended.
      assert.strictEqual(call.attributes["gen_ai.usage.output_tokens"], last.usage?.completion_tokens)
      assert.isUndefined(attempts[1]!.attributes["gen_ai.usage.output_tokens"])
      assert.isAtLeast(millisOf(call.endTime), millisOf(attempts[1]!.endTime))
    }).pipe(Effect.provide(HttpLive), Effect.provide(layer))
  })

  it.scopedLive("a stream that breaks after its first chunk: the call's span ends with that failure", () => {
    const { exporter, layer, open } = inMemory()
    return Effect.gen(function*() {
      const { client } = yield* serverAndClient({ otherwise: { _tag: "StreamBreak", afterChunks: 2 } })
      const failure = yield* Effect.flip(Stream.runDrain(client.chatStream(hello)))
      assert.strictEqual(failure._tag, "ConnectionReset")
      assert.strictEqual(open.open.size, 0, "every span ended")
      const spans = exporter.getFinishedSpans()
      const call = only(spans, "chat test-model")
      assert.strictEqual(call.status.code, SpanStatusCode.ERROR)
      assert.deepStrictEqual(
        [
          call.attributes["error.type"],
          call.attributes["resilient_ai.stop_reason"],
          call.attributes["resilient_ai.attempts"]
        ],
        ["ConnectionReset", undefined, 1]
      )
      assert.deepStrictEqual(attemptsOf(spans, call).map((span) => span.status.code), [SpanStatusCode.OK])
    }).pipe(Effect.provide(HttpLive), Effect.provide(layer))
  })

  describe("under the SDK adapters", () => {
    it.scopedLive("ResilientHttpClient: the SDK's call is a GenAI span; its HTTP spans under the attempts send no trace context", () => {
      const { exporter, layer, open } = inMemory()
      return Effect.gen(function*() {
        const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
        const text = yield* Effect.flatMap(
          HttpClient.HttpClient,
          (http) =>
            HttpClientRequest.post(`${server.url}/chat/completions`).pipe(
              (request) =>
                ClientLine.withJsonBody(request, { model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] }),
              http.execute,
              Effect.flatMap((response) => response.json)
            )
        ).pipe(
          Effect.provide(
            ResilientHttpClient.layer(managedAt(server.url)).pipe(Layer.provide(NodeHttpClient.layerUndici))
          )
        )
        const answer = text as { readonly id: string; readonly usage: { readonly prompt_tokens: number } }
        assert.strictEqual(open.open.size, 0, "every span ended")
        const spans = exporter.getFinishedSpans()
        const call = only(spans, "chat gpt-4o-mini")
        assert.strictEqual(call.kind, SpanKind.CLIENT)
        assert.deepStrictEqual(
          [call.attributes["gen_ai.response.id"], call.attributes["gen_ai.usage.input_tokens"]],
          [answer.id, answer.usage.prompt_tokens]
        )
        const attempts = attemptsOf(spans, call)
        assert.deepStrictEqual(
          attempts.map((attempt) => childrenOf(spans, attempt).map((span) => span.name)),
          [[httpClientSpanName("POST")], [httpClientSpanName("POST")]]
        )
        assert.isTrue((yield* server.arrivals).every((arrival) => arrival.headers["traceparent"] === undefined))
      }).pipe(Effect.provide(quiet), Effect.provide(layer))
    })

    it.scopedLive("ResilientFetch: the SDK's call is a GenAI span of the runtime it was made in", () => {
      const { exporter, layer, open } = inMemory()
      return Effect.gen(function*() {
        const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
        const fetch = yield* ResilientFetch.make(managedAt(server.url))
        const response = yield* Effect.promise(() =>
          fetch(`${server.url}/embeddings`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model: "mistral-embed", input: "Hi" })
          })
        )
        assert.strictEqual(response.status, 200)
        assert.strictEqual(open.open.size, 0, "every span ended")
        const spans = exporter.getFinishedSpans()
        const call = only(spans, "embeddings mistral-embed")
        assert.deepStrictEqual(
          [call.attributes["gen_ai.operation.name"], call.attributes["resilient_ai.attempts"]],
          ["embeddings", 2]
        )
        assert.deepStrictEqual(attemptsOf(spans, call).map((span) => span.attributes["error.type"]), [
          "Overloaded",
          undefined
        ])
      }).pipe(Effect.provide(quiet), Effect.provide(layer))
    })
  })

  describe("when nobody can see them, none are made", () => {
    it.scoped("with tracing off: no span at all", () => {
      const { exporter, layer } = inMemory()
      return Effect.gen(function*() {
        const policy = yield* Resilient.policy({ target: "quiet" })
        yield* Effect.succeed(1).pipe(
          Resilient.retry(policy),
          Effect.withSpan("handler"),
          Effect.withTracerEnabled(false)
        )
        assert.strictEqual(exporter.getFinishedSpans().length, 0)
      }).pipe(Effect.provide(layer))
    })

    it.effect("under Effect's built-in tracer, which exports nothing: an attempt runs in its caller's span", () =>
      Effect.gen(function*() {
        const policy = yield* Resilient.policy({ target: "native" })
        const seen = yield* Effect.map(Effect.currentSpan, (span) => span.name).pipe(
          Effect.orDie,
          Resilient.retry(policy),
          Effect.withSpan("handler")
        )
        assert.strictEqual(seen, "handler")
      }))
  })

  it.scoped("a plain Resilient.retry: named after its target, or as the call says; the fiber's span annotations kept", () => {
    const { exporter, layer } = inMemory()
    return Effect.gen(function*() {
      const policy = yield* Resilient.policy({ target: "users-db" })
      yield* Effect.succeed(1).pipe(Resilient.retry(policy), Effect.annotateSpans("tenant", "acme"))
      yield* Effect.succeed(1).pipe(
        Resilient.retry(policy, {
          span: { name: "SELECT users", kind: "client", attributes: { "db.system": "postgresql" } }
        })
      )
      const [plain, named] = exporter.getFinishedSpans().filter((span) => span.name !== "resilient_ai.attempt")
      assert.deepStrictEqual([plain!.name, plain!.kind, plain!.attributes["tenant"]], [
        "resilient_ai.call users-db",
        SpanKind.INTERNAL,
        "acme"
      ])
      assert.deepStrictEqual(
        [named!.name, named!.kind, named!.attributes["db.system"], named!.attributes["resilient_ai.target"]],
        ["SELECT users", SpanKind.CLIENT, "postgresql", "users-db"]
      )
    }).pipe(Effect.provide(layer))
  })
})
