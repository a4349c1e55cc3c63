/**
 * The fault matrix: one row per way a model API (or what stands in front of it) misbehaves, each run
 * against the real loopback fault server through the real undici client. A row says what the call
 * must come to (the stop reason and the last failure, or the decoded value), how many attempts the
 * server saw and the call recorded, and that no connection outlives the call.
 *
 * "No connection left open" is judged per row. A connection whose response was read to its end is
 * idle and may stay in undici's pool for the next call (`pooled`): at most one stays, the server has
 * nothing in flight, and closing the client's HTTP layer closes it. A connection that failed, stalled
 * or was left mid-response can never be reused, so it must be gone once the call returns (`closed`).
 */
import { collect, drawing } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { ModelClient, type Target } from "@resilient-ai/client"
import { Failure } from "@resilient-ai/policy"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Cause, Duration, Effect, Exit, Layer, Scope } from "effect"
import { Buffer } from "node:buffer"
import { failureOf, hello, HttpLive, managedAt, oversized, settled } from "./support.js"

/** What the call came to, with what the server saw of it. */
interface Observed {
  readonly exit: Exit.Exit<unknown, ModelClient.CallFailed | Failure.Failure>
  readonly arrivals: ReadonlyArray<FaultServer.Arrival>
  readonly elapsedMillis: number
}

interface Row {
  readonly name: string
  readonly plan: FaultPlan.Plan
  readonly target?: Partial<Target.Options>
  /** Where the client sends instead of the fault server (a name that does not resolve, a freed port). */
  readonly baseUrl?: Effect.Effect<string, never, Scope.Scope>
  readonly call?: "chat" | "embeddings" | "chatStream"
  readonly options?: ModelClient.CallOptions
  /** Requests the fault server received. */
  readonly arrivals: number
  /** What may stay open once the call returns; see the module comment. */
  readonly afterCall: "closed" | "pooled"
  /** The server saw the client close every connection before the response was complete. Default: false. */
  readonly aborted?: boolean
  readonly expect:
    | { readonly succeeds: (value: unknown, observed: Observed) => void }
    | {
      readonly reason: Failure.StopReason
      /** Fields the last failure must have, `_tag` included; other fields are not compared. */
      readonly last: Readonly<Record<string, unknown>>
      /** Attempts recorded on the `CallFailed`: the arrivals unless the server could not see them. */
      readonly attempts?: number
      readonly check?: (failed: ModelClient.CallFailed, observed: Observed) => void
    }
}

/** A well-formed chat completion, as text, so rows can serve it under other headers or with bad bytes. */
const completionText = (content: string): string =>
  JSON.stringify({
    id: "chatcmpl-raw",
    object: "chat.completion",
    created: 1_700_000_000,
    model: "test-model",
    choices: [{
      index: 0,
      message: { role: "assistant", content, refusal: null },
      logprobs: null,
      finish_reason: "stop"
    }],
    usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }
  })

/** A completion whose content holds 0xC3 0x28: a two-byte sequence cut short, which no UTF-8 decoder accepts. */
const invalidUtf8Completion = (() => {
  const [before, after] = completionText("caf@").split("@") as [string, string]
  return Buffer.concat([Buffer.from(before), Buffer.from([0xc3, 0x28]), Buffer.from(after)]).toString("base64")
})()

/** A 200 stream whose one event is OpenAI's error object, as a `data:` line. */
const sseError = (error: { readonly type: string; readonly code: string }): FaultPlan.Fault => ({
  _tag: "Raw",
  headers: { "content-type": "text/event-stream" },
  body: `data: ${JSON.stringify({ error: { message: "from the stream", param: null, ...error } })}\n\n`
})

const delaysBefore = (failed: ModelClient.CallFailed) =>
  failed.attempts.map((attempt) => Duration.toMillis(attempt.delayBefore))

const gapsBetween = (arrivals: ReadonlyArray<FaultServer.Arrival>) =>
  arrivals.slice(1).map((arrival, i) => arrival.at - arrivals[i]!.at)

const backoffMillis = 100
const hintedDeadlineMillis = 3_000

/**
 * The Retry-After rows: a backoff long enough (100 ms, drawn at its top by the fixed `Random` below)
 * to tell apart from a hint of zero plus its spread (at most 4 ms), and a deadline short enough that
 * sleeping through a huge hint would fail the row rather than hang it.
 */
const hinted = (retryAfter: string): Pick<Row, "plan" | "target" | "options"> => ({
  plan: { otherwise: { _tag: "Status", status: 429, retryAfter } },
  target: { baseDelay: `${backoffMillis} millis`, maxDelay: `${backoffMillis} millis`, hintSpread: "5 millis" },
  options: { timeout: `${hintedDeadlineMillis} millis` }
})

/** A Retry-After that reads as a hint of zero: each retry comes at once plus the spread, not after the backoff. */
const hintOfZero = (spelled: string, retryAfter: string): Row => ({
  name: `Retry-After ${spelled}: a hint of zero, retried at once plus the spread (3 attempts)`,
  ...hinted(retryAfter),
  arrivals: 3,
  afterCall: "pooled",
  expect: {
    reason: "attempts",
    last: { _tag: "RateLimited", status: 429, retryAfter: Duration.zero },
    check: (failed) => assert.deepStrictEqual(delaysBefore(failed).map((delay) => delay <= 4), [true, true, true])
  }
})

const rows: ReadonlyArray<Row> = [
  {
    name: "control: a well-formed 200 is the decoded completion",
    plan: {},
    arrivals: 1,
    afterCall: "pooled",
    expect: {
      succeeds: (value) =>
        assert.strictEqual(
          (value as { choices: [{ message: { content: string } }] }).choices[0].message.content,
          FaultServer.replyText
        )
    }
  },
  {
    name: "reset before headers: ConnectionReset after send, chat not replayed (1 attempt)",
    plan: { otherwise: { _tag: "ResetHeaders" } },
    arrivals: 1,
    afterCall: "closed",
    expect: { reason: "not-replay-safe", last: { _tag: "ConnectionReset", afterSend: true } }
  },
  {
    name: "reset mid-body: ConnectionReset after send, chat not replayed (1 attempt)",
    plan: { otherwise: { _tag: "ResetBody" } },
    arrivals: 1,
    afterCall: "closed",
    expect: { reason: "not-replay-safe", last: { _tag: "ConnectionReset", afterSend: true } }
  },
  {
    name: "stall before headers: the attempt timeout is ReadTimeout(headers), not replayed (1 attempt)",
    plan: { otherwise: { _tag: "StallHeaders", ms: FaultServer.never } },
    target: { attemptTimeout: "150 millis" },
    arrivals: 1,
    afterCall: "closed",
    aborted: true,
    expect: {
      reason: "not-replay-safe",
      last: { _tag: "ReadTimeout", phase: "headers", timeout: Duration.millis(150) }
    }
  },
  {
    name: "stall mid-body: the attempt timeout is ReadTimeout(body), not replayed (1 attempt)",
    plan: { otherwise: { _tag: "StallBody", ms: FaultServer.never } },
    // Long enough for the headers to arrive on a busy machine, so the timeout falls in the body.
    target: { attemptTimeout: "500 millis" },
    arrivals: 1,
    afterCall: "closed",
    aborted: true,
    expect: { reason: "not-replay-safe", last: { _tag: "ReadTimeout", phase: "body", timeout: Duration.millis(500) } }
  },
  {
    name: "truncated JSON: NotJson, terminal (1 attempt)",
    plan: { otherwise: { _tag: "TruncatedJson" } },
    arrivals: 1,
    afterCall: "pooled",
    expect: {
      reason: "terminal",
      last: { _tag: "NotJson", status: 200, contentType: "application/json" },
      check: (failed) => assert.match((failed.last as Failure.NotJson).excerpt, /^\{"id":"chatcmpl-/)
    }
  },
  {
    name: "invalid UTF-8 in a JSON body: NotJson, terminal, never decoded into replacement characters (1 attempt)",
    plan: {
      otherwise: { _tag: "Raw", headers: { "content-type": "application/json" }, bodyBase64: invalidUtf8Completion }
    },
    arrivals: 1,
    afterCall: "pooled",
    expect: {
      reason: "terminal",
      last: { _tag: "NotJson", status: 200, contentType: "application/json" },
      check: (failed) => assert.include((failed.last as Failure.NotJson).excerpt, "caf\uFFFD(")
    }
  },
  {
    name: "a body over maxResponseBytes: ResponseTooLarge, terminal, and its connection is ended unread (1 attempt)",
    // The declared length is over the limit, so the body is never read: its connection cannot go back
    // to the pool, and unless the client ends it, it stays open until garbage collection.
    plan: { otherwise: { _tag: "Raw", headers: { "content-type": "application/json" }, body: "x", repeat: 64 * 1024 } },
    target: { maxResponseBytes: 1024 },
    arrivals: 1,
    afterCall: "closed",
    expect: { reason: "terminal", last: { _tag: "ResponseTooLarge", status: 200, limitBytes: 1024 } }
  },
  {
    name: "a chunked body that grows past maxResponseBytes: ResponseTooLarge once the limit is crossed (1 attempt)",
    // No declared length: the limit is enforced as the bytes arrive, and reading stops there.
    // 1 MiB in 1 KiB writes; had the client read it all, its connection would go back to the pool.
    plan: { otherwise: oversized },
    target: { maxResponseBytes: 1024 },
    arrivals: 1,
    afterCall: "closed",
    expect: { reason: "terminal", last: { _tag: "ResponseTooLarge", status: 200, limitBytes: 1024 } }
  },
  {
    name: "200 text/plain carrying a valid completion is accepted: the schema, not the content type, is the contract",
    plan: { otherwise: { _tag: "Raw", headers: { "content-type": "text/plain" }, body: completionText("plain") } },
    arrivals: 1,
    afterCall: "pooled",
    expect: {
      succeeds: (value) =>
        assert.strictEqual(
          (value as { choices: [{ message: { content: string } }] }).choices[0].message.content,
          "plain"
        )
    }
  },
  {
    name: "200 text/html page: NotJson naming the content type, terminal (1 attempt)",
    plan: {
      otherwise: {
        _tag: "Raw",
        headers: { "content-type": "text/html; charset=utf-8" },
        body: "<!DOCTYPE html><html><body>Sign in to continue</body></html>"
      }
    },
    arrivals: 1,
    afterCall: "pooled",
    expect: {
      reason: "terminal",
      last: { _tag: "NotJson", status: 200, contentType: "text/html; charset=utf-8" },
      check: (failed) => assert.match((failed.last as Failure.NotJson).excerpt, /^<!DOCTYPE html>/)
    }
  },
  {
    name: "a proxy's HTML 502 page: ServerError(502), retried to the ceiling (3 attempts)",
    plan: { otherwise: { _tag: "HtmlError", status: 502 } },
    arrivals: 3,
    afterCall: "pooled",
    expect: {
      reason: "attempts",
      last: { _tag: "ServerError", status: 502, providerCode: undefined, retryAfter: undefined },
      check: (failed) => assert.include((failed.last as Failure.ServerError).detail, "502 Bad Gateway")
    }
  },
  {
    name: "an empty 200: NotJson with an empty excerpt, terminal (1 attempt)",
    plan: { otherwise: { _tag: "Raw" } },
    arrivals: 1,
    afterCall: "pooled",
    expect: { reason: "terminal", last: { _tag: "NotJson", status: 200, contentType: undefined, excerpt: "" } }
  },
  {
    name: "a 200 whose body is an error object: ContractViolation naming the missing fields, terminal (1 attempt)",
    plan: {
      otherwise: {
        _tag: "Raw",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ error: { message: "upstream timed out", type: "server_error", code: "timeout" } })
      }
    },
    arrivals: 1,
    afterCall: "pooled",
    expect: {
      reason: "terminal",
      last: { _tag: "ContractViolation" },
      check: (failed) => {
        const paths = (failed.last as Failure.ContractViolation).issues.map((issue) => issue.path)
        for (const field of ["id", "object", "choices", "usage"]) assert.include(paths, field)
      }
    }
  },
  {
    name: "stream, 200 whose first event is an overloaded error: retried like a 503, then the stream (2 attempts)",
    plan: { steps: [sseError({ type: "service_unavailable_error", code: "server_is_overloaded" }), { _tag: "Ok" }] },
    call: "chatStream",
    arrivals: 2,
    afterCall: "pooled",
    expect: {
      succeeds: (value) => assert.isAbove((value as ReadonlyArray<unknown>).length, 1)
    }
  },
  {
    name: "stream, 200 whose first event is an insufficient_quota error: QuotaExhausted, terminal (1 attempt)",
    plan: { otherwise: sseError({ type: "insufficient_quota", code: "insufficient_quota" }) },
    call: "chatStream",
    arrivals: 1,
    afterCall: "pooled",
    expect: { reason: "terminal", last: { _tag: "QuotaExhausted", status: 429, providerCode: "insufficient_quota" } }
  },
  {
    name: "Retry-After garbage: no hint, so full-jitter backoff decides (3 attempts, 100 ms apart)",
    ...hinted("soon, maybe"),
    arrivals: 3,
    afterCall: "pooled",
    expect: {
      reason: "attempts",
      last: { _tag: "RateLimited", status: 429, retryAfter: undefined },
      check: (failed, { arrivals }) => {
        // The policy sleeps until the time the schedule drew, and records what is left when it starts
        // to: a busy machine makes that less than 100 ms, and the server's arrival times move with
        // when it gets to each request. Half the backoff is still far from a hint of zero.
        const [first, ...retries] = delaysBefore(failed)
        assert.strictEqual(first, 0)
        for (const delay of retries) assert.isAtLeast(delay, backoffMillis / 2)
        for (const gap of gapsBetween(arrivals)) assert.isAtLeast(gap, backoffMillis / 2)
      }
    }
  },
  hintOfZero("negative", "-5"),
  {
    name: "Retry-After huge (a day): the call ends with retry-after-too-long instead of sleeping (1 attempt)",
    ...hinted("86400"),
    arrivals: 1,
    afterCall: "pooled",
    expect: {
      reason: "retry-after-too-long",
      last: { _tag: "RateLimited", status: 429, retryAfter: Duration.seconds(86_400) },
      // Sleeping toward the hint would last until the deadline: ending before it is "instead of sleeping".
      check: (_, { elapsedMillis }) => assert.isBelow(elapsedMillis, hintedDeadlineMillis)
    }
  },
  hintOfZero("an HTTP date in the past", "Wed, 21 Oct 2015 07:28:00 GMT"),
  {
    name: "429 insufficient_quota: QuotaExhausted, terminal (1 attempt)",
    plan: {
      otherwise: {
        _tag: "Status",
        status: 429,
        code: "insufficient_quota",
        type: "insufficient_quota",
        message: "You exceeded your current quota, please check your plan and billing details.",
        retryAfter: "1"
      }
    },
    arrivals: 1,
    afterCall: "pooled",
    expect: {
      reason: "terminal",
      last: { _tag: "QuotaExhausted", status: 429, providerCode: "insufficient_quota" }
    }
  },
  {
    name: "503 model_not_found: ModelUnavailable naming the model, terminal (1 attempt)",
    plan: {
      otherwise: {
        _tag: "Status",
        status: 503,
        code: "model_not_found",
        type: "invalid_request_error",
        message: "The model `test-model` does not exist or you do not have access to it."
      }
    },
    arrivals: 1,
    afterCall: "pooled",
    expect: {
      reason: "terminal",
      last: { _tag: "ModelUnavailable", status: 503, providerCode: "model_not_found", model: "test-model" }
    }
  },
  {
    name: "a server that closes every connection, chat: ConnectionReset after send, not replayed (1 attempt)",
    plan: { otherwise: { _tag: "Close" } },
    arrivals: 1,
    afterCall: "closed",
    expect: {
      reason: "not-replay-safe",
      last: { _tag: "ConnectionReset", afterSend: true },
      check: (failed) => assert.match((failed.last as Failure.ConnectionReset).detail!, /UND_ERR_SOCKET|ECONNRESET/)
    }
  },
  {
    name:
      "a server that closes every connection, embeddings: ConnectionReset after send, replayed to the ceiling (3 attempts)",
    plan: { otherwise: { _tag: "Close" } },
    call: "embeddings",
    arrivals: 3,
    afterCall: "closed",
    expect: { reason: "attempts", last: { _tag: "ConnectionReset", afterSend: true } }
  },
  {
    name: "DNS failure: ConnectFailed, retried to the ceiling with nothing sent (3 attempts, 0 arrivals)",
    plan: {},
    baseUrl: Effect.succeed("http://nonexistent.invalid/v1"),
    arrivals: 0,
    afterCall: "closed",
    expect: {
      reason: "attempts",
      last: { _tag: "ConnectFailed" },
      attempts: 3,
      check: (failed) => assert.match((failed.last as Failure.ConnectFailed).detail, /ENOTFOUND|EAI_AGAIN/)
    }
  },
  {
    name: "connection refused (a freed port): ConnectFailed, retried to the ceiling (3 attempts, 0 arrivals)",
    plan: {},
    baseUrl: Effect.map(
      Effect.scoped(Effect.map(FaultServer.make({}), (freed) => freed.port)),
      (port) => `http://127.0.0.1:${port}/v1`
    ),
    arrivals: 0,
    afterCall: "closed",
    expect: {
      reason: "attempts",
      last: { _tag: "ConnectFailed" },
      attempts: 3,
      check: (failed) => assert.match((failed.last as Failure.ConnectFailed).detail, /ECONNREFUSED/)
    }
  }
]

const runRow = (row: Row) =>
  Effect.gen(function*() {
    const server = yield* FaultServer.make(row.plan)
    const baseUrl = row.baseUrl === undefined ? server.url : yield* row.baseUrl
    // The HTTP client lives in a scope of its own, so the row can check what closing it releases.
    const httpScope = yield* Scope.make()
    // Closed by the row once it has looked; closed here too when an assertion ends the row early.
    yield* Effect.addFinalizer(() => Scope.close(httpScope, Exit.void))
    const http = yield* Layer.buildWithScope(HttpLive, httpScope)
    const client = yield* Effect.provide(ModelClient.make(managedAt(baseUrl, row.target)), http)

    const started = Date.now()
    const call: Effect.Effect<unknown, ModelClient.CallFailed | Failure.Failure> = row.call === "embeddings"
      ? client.embeddings({ input: ["a", "b"] }, row.options)
      : row.call === "chatStream"
      ? collect(client.chatStream(hello, row.options))
      : client.chat(hello, row.options)
    // Every draw at the top of its range: backoff delays are their ceiling, a hint's spread its maximum.
    const exit = yield* Effect.exit(drawing([0.999])(call))
    const observed: Observed = { exit, arrivals: yield* server.arrivals, elapsedMillis: Date.now() - started }

    // (a) the typed outcome
    if ("succeeds" in row.expect) {
      if (Exit.isFailure(exit)) assert.fail(`expected a success, got ${Cause.pretty(exit.cause)}`)
      row.expect.succeeds(exit.value, observed)
    } else {
      const failure = failureOf(exit)
      if (failure._tag !== "CallFailed") assert.fail(`expected CallFailed, got ${failure.message}`)
      const failed = failure as ModelClient.CallFailed
      assert.strictEqual(failed.reason, row.expect.reason, failed.message)
      const last = failed.last as unknown as Readonly<Record<string, unknown>>
      for (const [field, expected] of Object.entries(row.expect.last)) {
        assert.deepStrictEqual(last[field], expected, `last.${field} (${failed.last.message})`)
      }
      // (b) the attempts the call recorded
      assert.strictEqual(failed.attempts.length, row.expect.attempts ?? row.arrivals, "attempts recorded")
      assert.isTrue(failed.attempts.every((attempt) => attempt.outcome === failed.last._tag))
      row.expect.check?.(failed, observed)
    }
    // (b) the attempts the server saw
    assert.strictEqual(observed.arrivals.length, row.arrivals, "arrivals at the server")
    if (row.arrivals === 0) assert.strictEqual(yield* server.connectionsAccepted, 0, "connections accepted")

    // (c) nothing left open: a failed or unread connection is gone now; a complete one is idle in the
    // pool, the one connection every attempt used, and stays there until the layer closes.
    if (row.afterCall === "closed") {
      assert.strictEqual(yield* settled(server.openConnections, (n) => n === 0), 0, "connections open after the call")
    } else {
      assert.strictEqual(yield* settled(server.openConnections, (n) => n <= 1), 1, "idle connections after the call")
      assert.strictEqual(yield* server.connectionsAccepted, 1, "connections accepted")
    }
    assert.strictEqual(yield* settled(server.inFlight, (n) => n === 0), 0, "responses in flight after the call")
    const aborted = (yield* server.arrivals).map((arrival) => arrival.aborted)
    assert.deepStrictEqual(aborted, aborted.map(() => row.aborted ?? false), "arrivals the client abandoned")
    yield* Scope.close(httpScope, Exit.void)
    assert.strictEqual(yield* settled(server.openConnections, (n) => n === 0), 0, "connections open after the layer")
  })

describe("fault matrix: the real client against the real fault server", () => {
  for (const row of rows) {
    it.scopedLive(row.name, () => runRow(row))
  }
})
