import { collect, environmentLayer, printLogfmtInto, withMinimumLogLevel } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Failover, ModelClient, Target } from "@resilient-ai/client"
import { Targets } from "@resilient-ai/client/internal"
import { Failure } from "@resilient-ai/policy"
import { EffectLine, Failures, Meters } from "@resilient-ai/policy/internal"
import { FaultServer } from "@resilient-ai/testing"
import type { Fixtures } from "@resilient-ai/testing/internal"
import { Duration, Effect, Exit, Fiber, Stream } from "effect"
import {
  apiKey,
  eventually,
  failureOf,
  hello,
  HttpLive,
  managedAt,
  patienceMillis,
  selfHostedAt,
  serverAndClient
} from "./support.js"

/** What each recorded fixture must come to on a managed target with three attempts. */
const table: ReadonlyArray<
  readonly [
    Fixtures.FixtureName,
    { readonly arrivals: number; readonly last?: Failure.Failure["_tag"]; readonly reason?: string }
  ]
> = [
  ["chatSuccess", { arrivals: 1 }],
  ["chatSuccessMistral", { arrivals: 1 }],
  ["rateLimitedMistral", { arrivals: 3, last: "RateLimited", reason: "attempts" }],
  ["quotaExhausted", { arrivals: 1, last: "QuotaExhausted", reason: "terminal" }],
  ["serverError", { arrivals: 3, last: "ServerError", reason: "attempts" }],
  ["overloaded", { arrivals: 3, last: "Overloaded", reason: "attempts" }],
  ["overloadedMistral", { arrivals: 3, last: "Overloaded", reason: "attempts" }],
  ["auth", { arrivals: 1, last: "AuthenticationFailed", reason: "terminal" }],
  ["badRequest", { arrivals: 1, last: "ClientError", reason: "terminal" }],
  ["modelNotFound", { arrivals: 1, last: "ModelUnavailable", reason: "terminal" }],
  ["modelNotFound503", { arrivals: 1, last: "ModelUnavailable", reason: "terminal" }],
  ["badGatewayHtml", { arrivals: 3, last: "ServerError", reason: "attempts" }],
  ["malformedJson", { arrivals: 1, last: "NotJson", reason: "terminal" }],
  ["schemaMismatch", { arrivals: 1, last: "ContractViolation", reason: "terminal" }]
]

describe("ModelClient against the fault server", () => {
  describe("every row of the classification table", () => {
    for (const [name, expected] of table) {
      it.scopedLive(`${name}: ${expected.arrivals} attempt(s)${expected.reason ? `, stops (${expected.reason})` : ""}`, () =>
        Effect.gen(function*() {
          const { client, server } = yield* serverAndClient({ otherwise: { _tag: "Fixture", name } })
          const exit = yield* Effect.exit(client.chat(hello))
          const arrivals = yield* server.arrivals
          assert.strictEqual(arrivals.length, expected.arrivals)
          if (expected.last === undefined) {
            assert.isTrue(Exit.isSuccess(exit))
          } else {
            const failure = failureOf(exit)
            assert.strictEqual(failure.last._tag, expected.last)
            assert.strictEqual(failure.reason, expected.reason)
            assert.strictEqual(failure.attempts.length, expected.arrivals)
          }
        }).pipe(Effect.provide(HttpLive)))
    }

    it.scopedLive("a 429 whose Retry-After is longer than the time left ends the call at once, for failover", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({ otherwise: { _tag: "Fixture", name: "rateLimited" } })
        const started = Date.now()
        const failure = failureOf(yield* Effect.exit(client.chat(hello, { timeout: "1900 millis" })))
        // Sleeping toward the hint would have lasted until the deadline: ending before it is "at once",
        // however slowly a busy machine answered the one request.
        assert.isBelow(Date.now() - started, 1_900)
        assert.strictEqual(failure.reason, "retry-after-too-long")
        assert.deepStrictEqual(failure.last._tag, "RateLimited")
        // retry-after-ms (2000) is read over retry-after (2 s): both say the same here.
        assert.strictEqual(Duration.toMillis(Failures.retryAfterOf(failure.last)!), 2_000)
        assert.strictEqual((yield* server.arrivals).length, 1)
      }).pipe(Effect.provide(HttpLive)))
  })

  describe("the wire", () => {
    it.scopedLive("a success is the decoded completion, with its usage recorded", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({})
        const completion = yield* client.chat(hello)
        assert.strictEqual(completion.object, "chat.completion")
        assert.strictEqual(completion.model, "test-model")
        assert.strictEqual(completion.choices[0].message.content, FaultServer.replyText)
        const [arrival] = yield* server.arrivals
        assert.strictEqual(arrival!.headers.authorization, `Bearer ${apiKey}`)
        assert.deepStrictEqual(arrival!.body, { messages: hello.messages, model: "test-model" })
        const tokens = Meters.forTarget(client.target.name, "test-model").tokens
        assert.strictEqual(EffectLine.counted(tokens("prompt")), completion.usage.prompt_tokens)
        assert.strictEqual(EffectLine.counted(tokens("completion")), completion.usage.completion_tokens)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("every attempt of one call sends the same Idempotency-Key; another call sends another", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({
          steps: [{ _tag: "Status", status: 503 }, { _tag: "Status", status: 500 }, { _tag: "Ok" }, { _tag: "Ok" }]
        })
        yield* client.chat(hello)
        yield* client.chat(hello)
        const keys = (yield* server.arrivals).map((arrival) => arrival.headers["idempotency-key"])
        assert.strictEqual(keys.length, 4)
        assert.strictEqual(new Set(keys.slice(0, 3)).size, 1)
        assert.notStrictEqual(keys[3], keys[0])
        assert.match(keys[0]!, /^[0-9a-f-]{36}$/)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("the idempotency header is named by the target, and a caller's request id is used", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient(
          {},
          (url) => managedAt(url, { idempotencyHeader: "X-Request-Key" })
        )
        yield* client.chat(hello, { requestId: "req-7" })
        const [arrival] = yield* server.arrivals
        assert.strictEqual(arrival!.headers["x-request-key"], "req-7")
        assert.isUndefined(arrival!.headers["idempotency-key"])
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a retry-after-ms hint is honoured: no attempt arrives before it", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({
          steps: [{ _tag: "Status", status: 429, retryAfterMs: "150" }, { _tag: "Ok" }]
        })
        yield* client.chat(hello)
        const [first, second] = yield* server.arrivals
        assert.isAtLeast(second!.at - first!.at, 150)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a retryable 4xx waits for its retry-after-ms: 408, 409, and 400 with x-should-retry: true", () =>
      Effect.gen(function*() {
        const statuses = [{ status: 408 }, { status: 409 }, { status: 400, shouldRetry: true }] as const
        for (const fault of statuses) {
          const { client, server } = yield* serverAndClient(
            { otherwise: { _tag: "Status", ...fault, retryAfterMs: "200" } },
            (url) => managedAt(url, { maxAttempts: 2, hintSpread: 0 })
          )
          const failure = failureOf(yield* Effect.exit(client.chat(hello)))
          assert.strictEqual(failure.reason, "attempts", `HTTP ${fault.status}`)
          // The retry was timed from the hint, not from the backoff (a few ms): the server saw it no
          // sooner. (The exact delay is `Resilient.test.ts`'s to check, under the test clock.)
          const [first, second] = yield* server.arrivals
          assert.isAtLeast(second!.at - first!.at, 200, `HTTP ${fault.status}`)
          assert.deepStrictEqual(Failures.retryAfterOf(failure.last), Duration.millis(200))
        }
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a 429 with no Retry-After waits for the spent limit's reset in its rate-limit headers", () =>
      Effect.gen(function*() {
        const spent = [
          // OpenAI: the requests are spent, the tokens are not (their reset is not the wait).
          {
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "300ms",
            "x-ratelimit-remaining-tokens": "9000",
            "x-ratelimit-reset-tokens": "6m0s"
          },
          // The generic form: seconds to wait.
          { "x-ratelimit-remaining": "0", "x-ratelimit-reset": "0.3" }
        ]
        for (const headers of spent) {
          const { client, server } = yield* serverAndClient(
            { otherwise: { _tag: "Status", status: 429, headers } },
            (url) => managedAt(url, { maxAttempts: 2, hintSpread: 0 })
          )
          const failure = failureOf(yield* Effect.exit(client.chat(hello)))
          assert.deepStrictEqual(Failures.retryAfterOf(failure.last), Duration.millis(300))
          const [first, second] = yield* server.arrivals
          assert.isAtLeast(second!.at - first!.at, 300, JSON.stringify(headers))
        }
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("no trace context goes to the provider unless the target propagates it", () =>
      Effect.gen(function*() {
        const quiet = yield* serverAndClient({})
        yield* quiet.client.chat(hello).pipe(Effect.withSpan("checkout"))
        yield* Stream.runDrain(quiet.client.chatStream(hello))
        const sent = yield* quiet.server.arrivals
        assert.strictEqual(sent.length, 2)
        for (const arrival of sent) {
          assert.isUndefined(arrival.headers.traceparent, arrival.path)
          assert.isUndefined(arrival.headers.b3, arrival.path)
        }
        const traced = yield* serverAndClient({}, (url) => managedAt(url, { propagateTrace: true }))
        yield* traced.client.chat(hello).pipe(Effect.withSpan("checkout"))
        const [propagated] = yield* traced.server.arrivals
        assert.match(propagated!.headers.traceparent!, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/)
        assert.isDefined(propagated!.headers.b3)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("x-should-retry: false makes a 500 terminal; true makes a 400 retryable", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({
          steps: [
            { _tag: "Status", status: 500, shouldRetry: false },
            { _tag: "Status", status: 400, shouldRetry: true },
            { _tag: "Ok" }
          ]
        })
        const failure = failureOf(yield* Effect.exit(client.chat(hello)))
        assert.strictEqual(failure.reason, "terminal")
        assert.strictEqual((yield* server.arrivals).length, 1)
        yield* client.chat(hello)
        assert.strictEqual((yield* server.arrivals).length, 3)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a body that breaks the schema is a ContractViolation naming the fields, never retried", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({ otherwise: { _tag: "SchemaBreak" } })
        const failure = failureOf(yield* Effect.exit(client.chat(hello)))
        assert.strictEqual(failure.last._tag, "ContractViolation")
        const issues = (failure.last as Failure.ContractViolation).issues
        assert.isAbove(issues.length, 0)
        assert.isTrue(issues.every((issue) => issue.path !== "" && issue.message !== ""))
        assert.strictEqual((yield* server.arrivals).length, 1)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("truncated JSON is NotJson with an excerpt, never repaired", () =>
      Effect.gen(function*() {
        const { client } = yield* serverAndClient({ otherwise: { _tag: "TruncatedJson" } })
        const failure = failureOf(yield* Effect.exit(client.chat(hello)))
        assert.strictEqual(failure.last._tag, "NotJson")
        assert.match((failure.last as Failure.NotJson).excerpt, /^\{/)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a body larger than the target allows is ResponseTooLarge", () =>
      Effect.gen(function*() {
        const { client } = yield* serverAndClient({}, (url) => managedAt(url, { maxResponseBytes: 64 }))
        const failure = failureOf(yield* Effect.exit(client.chat(hello)))
        assert.deepStrictEqual(failure.last, new Failure.ResponseTooLarge({ status: 200, limitBytes: 64 }))
        assert.strictEqual(failure.reason, "terminal")
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a refused connection is ConnectFailed and retried", () =>
      Effect.gen(function*() {
        // A port that was just free: nothing listens there.
        const port = yield* Effect.scoped(Effect.map(FaultServer.make({}), (server) => server.port))
        const client = yield* ModelClient.make(managedAt(`http://127.0.0.1:${port}/v1`))
        const failure = failureOf(yield* Effect.exit(client.chat(hello)))
        assert.strictEqual(failure.last._tag, "ConnectFailed")
        assert.strictEqual(failure.reason, "attempts")
        assert.strictEqual(failure.attempts.length, 3)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a reset after the request was sent is ambiguous: chat is not replayed, embeddings are", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({
          steps: [{ _tag: "ResetHeaders" }, { _tag: "ResetHeaders" }]
        })
        const failure = failureOf(yield* Effect.exit(client.chat(hello)))
        assert.deepStrictEqual(failure.last._tag, "ConnectionReset")
        assert.isTrue((failure.last as Failure.ConnectionReset).afterSend)
        assert.strictEqual(failure.reason, "not-replay-safe")
        assert.strictEqual((yield* server.arrivals).length, 1)
        const embedded = yield* client.embeddings({ input: ["a", "b"] })
        assert.strictEqual(embedded.data.length, 2)
        assert.strictEqual((yield* server.arrivals).length, 3)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a stall before the headers times out as ReadTimeout(headers), not replayed for chat", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient(
          { steps: [{ _tag: "StallHeaders", ms: FaultServer.never }] },
          (url) => managedAt(url, { attemptTimeout: "150 millis" })
        )
        const failure = failureOf(yield* Effect.exit(client.chat(hello)))
        assert.deepStrictEqual(
          failure.last,
          new Failure.ReadTimeout({ timeout: Duration.millis(150), phase: "headers" })
        )
        assert.strictEqual(failure.reason, "not-replay-safe")
        assert.strictEqual((yield* server.arrivals).length, 1)
        yield* eventually(Effect.map(server.arrivals, ([arrival]) => arrival!.aborted))
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a stall in the body times out as ReadTimeout(body); replay-safe calls are retried", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient(
          { steps: [{ _tag: "StallBody", ms: FaultServer.never }, { _tag: "Ok" }] },
          // Long enough for the headers, and the retry's whole answer, on a busy machine.
          (url) => managedAt(url, { attemptTimeout: "500 millis" })
        )
        const completion = yield* client.chat(hello, { replaySafe: true })
        assert.strictEqual(completion.choices[0].message.content, FaultServer.replyText)
        assert.strictEqual((yield* server.arrivals).length, 2)
        // The server sees the client leave when the abandoned connection's close reaches it.
        yield* eventually(Effect.map(server.arrivals, ([first]) => first!.aborted), patienceMillis, "first abandoned")
      }).pipe(Effect.provide(HttpLive)))
  })

  describe("interruption", () => {
    it.scopedLive("interrupting a call closes its connection (the server sees the abort) and starts nothing new", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({
          otherwise: { _tag: "StallHeaders", ms: FaultServer.never }
        })
        const fiber = yield* EffectLine.fork(client.chat(hello, { replaySafe: true }))
        yield* eventually(Effect.map(server.arrivals, (arrivals) => arrivals.length === 1))
        yield* Fiber.interrupt(fiber)
        yield* eventually(Effect.map(server.arrivals, ([arrival]) => arrival!.aborted))
        yield* Effect.sleep("50 millis")
        assert.strictEqual((yield* server.arrivals).length, 1)
        assert.strictEqual(yield* server.inFlight, 0)
      }).pipe(Effect.provide(HttpLive)))
  })

  describe("streaming", () => {
    it.scopedLive("a stream delivers every chunk and records the usage of its last one", () =>
      Effect.gen(function*() {
        const { client } = yield* serverAndClient({})
        const chunks = yield* collect(client.chatStream(hello))
        const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")
        assert.strictEqual(text, FaultServer.replyText)
        const prompt = EffectLine.counted(Meters.forTarget(client.target.name, "test-model").tokens("prompt"))
        assert.isAbove(prompt, 0)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a stream is retried until its first chunk", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
        const chunks = yield* collect(client.chatStream(hello))
        assert.isAbove(chunks.length, 1)
        assert.strictEqual((yield* server.arrivals).length, 2)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("after its first chunk, a broken stream ends with a typed failure and is not replayed", () =>
      Effect.gen(function*() {
        const { client, server } = yield* serverAndClient({ otherwise: { _tag: "StreamBreak", afterChunks: 2 } })
        const received: Array<unknown> = []
        const exit = yield* Effect.exit(
          Stream.runForEach(client.chatStream(hello), (chunk) => Effect.sync(() => received.push(chunk)))
        )
        assert.strictEqual(received.length, 2)
        const failure = failureOf(exit)
        assert.strictEqual(failure._tag, "ConnectionReset")
        yield* Effect.sleep("30 millis")
        assert.strictEqual((yield* server.arrivals).length, 1)
      }).pipe(Effect.provide(HttpLive)))
  })

  describe("targets", () => {
    it.scopedLive("a fixed-capacity target sheds when its gate is full, without sending anything", () =>
      Effect.gen(function*() {
        // The first call holds the only slot for as long as the test needs, however slow the machine.
        const { client, server } = yield* serverAndClient(
          { steps: [{ _tag: "StallHeaders", ms: FaultServer.never }] },
          (url) => selfHostedAt(url, { concurrency: 1, attemptTimeout: "30 seconds" })
        )
        const first = yield* EffectLine.fork(client.chat(hello))
        yield* eventually(Effect.map(server.arrivals, (arrivals) => arrivals.length === 1))
        const failure = failureOf(yield* Effect.exit(client.chat(hello)))
        assert.strictEqual(failure.reason, "shed")
        assert.strictEqual(failure.last._tag, "Shed")
        assert.deepStrictEqual(failure.attempts, [])
        yield* Fiber.interrupt(first)
        assert.strictEqual((yield* server.arrivals).length, 1)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a fixed-capacity target never retries into a saturated pool", () =>
      Effect.gen(function*() {
        for (const fault of [{ _tag: "Status", status: 503 }, { _tag: "Status", status: 429 }] as const) {
          const { client, server } = yield* serverAndClient({ otherwise: fault }, (url) => selfHostedAt(url))
          const failure = failureOf(yield* Effect.exit(client.chat(hello)))
          assert.strictEqual(failure.reason, "terminal")
          assert.strictEqual((yield* server.arrivals).length, 1)
        }
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("several targets live side by side, each with its own budget", () =>
      Effect.gen(function*() {
        const a = yield* serverAndClient({ otherwise: { _tag: "Status", status: 503 } }, (url) =>
          managedAt(url, { budget: { ratio: 0, minPerSecond: 1 / 60 } }))
        const b = yield* serverAndClient({ otherwise: { _tag: "Status", status: 503 } }, (url) =>
          managedAt(url, { budget: { ratio: 0, minPerSecond: 1 / 60 } }))
        // Each budget allows one retry a minute: one call each retries once, then stops on the budget.
        for (const { client } of [a, b]) {
          const failure = failureOf(yield* Effect.exit(client.chat(hello)))
          assert.strictEqual(failure.reason, "budget")
          assert.strictEqual(failure.attempts.length, 2)
        }
      }).pipe(Effect.provide(HttpLive)))
  })

  describe("failover", () => {
    it.scopedLive("after the first target's retries run out, the second makes exactly one attempt", () =>
      Effect.gen(function*() {
        const primary = yield* serverAndClient({ otherwise: { _tag: "Status", status: 503 } })
        const secondary = yield* serverAndClient({})
        const client = Failover.between(primary.client, secondary.client)
        const completion = yield* client.chat(hello)
        assert.strictEqual(completion.object, "chat.completion")
        assert.strictEqual((yield* primary.server.arrivals).length, 3)
        assert.strictEqual((yield* secondary.server.arrivals).length, 1)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("a terminal failure is not failed over", () =>
      Effect.gen(function*() {
        const primary = yield* serverAndClient({ otherwise: { _tag: "Fixture", name: "badRequest" } })
        const secondary = yield* serverAndClient({})
        const failure = failureOf(yield* Effect.exit(Failover.between(primary.client, secondary.client).chat(hello)))
        assert.strictEqual(failure.reason, "terminal")
        assert.strictEqual(failure.target, primary.client.target.name)
        assert.strictEqual((yield* secondary.server.arrivals).length, 0)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("the second target's own ceiling applies, not a product of both", () =>
      Effect.gen(function*() {
        const primary = yield* serverAndClient({ otherwise: { _tag: "Status", status: 500 } })
        const secondary = yield* serverAndClient({ otherwise: { _tag: "Status", status: 500 } })
        const failure = failureOf(yield* Effect.exit(Failover.between(primary.client, secondary.client).chat(hello)))
        assert.strictEqual(failure.target, secondary.client.target.name)
        assert.strictEqual((yield* primary.server.arrivals).length, 3)
        assert.strictEqual((yield* secondary.server.arrivals).length, 3)
      }).pipe(Effect.provide(HttpLive)))

    it.scopedLive("the caller's deadline bounds both targets", () =>
      Effect.gen(function*() {
        // The primary spends two attempt timeouts, at least 400 ms, and leaves the secondary the
        // rest of the second: time enough for its attempt on a busy machine.
        const attemptMillis = 200
        const deadlineMillis = 1_000
        const primary = yield* serverAndClient(
          { otherwise: { _tag: "StallHeaders", ms: FaultServer.never } },
          (url) => managedAt(url, { attemptTimeout: `${attemptMillis} millis`, maxAttempts: 2 })
        )
        const secondary = yield* serverAndClient({ otherwise: { _tag: "StallHeaders", ms: FaultServer.never } })
        const started = Date.now()
        const failure = failureOf(
          yield* Effect.exit(
            Failover.between(primary.client, secondary.client).chat(hello, {
              timeout: `${deadlineMillis} millis`,
              replaySafe: true
            })
          )
        )
        const took = Date.now() - started
        assert.strictEqual(failure.reason, "deadline")
        assert.isAtLeast(took, deadlineMillis - 50)
        // A deadline started afresh for the secondary would end no sooner than the primary's time
        // (400 ms or more) after the caller's: the margin a busy machine gets.
        assert.isBelow(took, 2 * attemptMillis + deadlineMillis)
        assert.strictEqual((yield* primary.server.arrivals).length, 2)
        assert.strictEqual((yield* secondary.server.arrivals).length, 1)
      }).pipe(Effect.provide(HttpLive)))
  })

  describe("configuration", () => {
    const environment = (entries: Record<string, string>) => environmentLayer(entries)

    it.scopedLive("a target read from the environment, with its settings", () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({})
        const target = yield* Target.managedConfig("MISTRAL").pipe(
          Effect.provide(environment({
            MISTRAL_BASE_URL: server.url,
            MISTRAL_MODEL: "mistral-small-latest",
            MISTRAL_API_KEY: apiKey,
            MISTRAL_ATTEMPT_TIMEOUT: "20 seconds",
            MISTRAL_ATTEMPT_TIMEOUTS: "mistral-large-latest=90 seconds, mistral-tiny=5000",
            MISTRAL_MAX_ATTEMPTS: "4",
            MISTRAL_BASE_DELAY: "250",
            MISTRAL_BUDGET_RATIO: "0.2",
            MISTRAL_CONCURRENCY: "16",
            MISTRAL_MAX_RETRY_AFTER: "10 seconds",
            MISTRAL_MIN_ATTEMPT_TIME: "250",
            MISTRAL_REPLAY_SAFE: "true",
            MISTRAL_PROPAGATE_TRACE: "yes"
          }))
        )
        assert.strictEqual(target.name, "mistral")
        assert.strictEqual(target.model, "mistral-small-latest")
        assert.strictEqual(target.maxAttempts, 4)
        assert.strictEqual(target.concurrency, 16)
        assert.strictEqual(target.budget.ratio, 0.2)
        assert.strictEqual(target.budget.minPerSecond, 5)
        assert.strictEqual(Duration.toMillis(Targets.policyFor(target).attemptTimeout), 20_000)
        assert.strictEqual(Duration.toMillis(Targets.policyFor(target, "mistral-large-latest").attemptTimeout), 90_000)
        assert.strictEqual(Duration.toMillis(Targets.policyFor(target, "mistral-tiny").attemptTimeout), 5_000)
        assert.strictEqual(Targets.policyFor(target, "mistral-large-latest").maxAttempts, 4)
        // Every setting of the policy is the target's, and a variable's.
        const policy = Targets.policyFor(target, "mistral-tiny")
        assert.strictEqual(Duration.toMillis(policy.maxRetryAfter), 10_000)
        assert.strictEqual(Duration.toMillis(policy.minAttemptTime), 250)
        assert.isTrue(policy.replaySafe)
        assert.isTrue(target.propagateTrace)
        assert.deepStrictEqual(
          Object.keys(target.attemptTimeoutByModel),
          ["mistral-large-latest", "mistral-tiny"]
        )
      }).pipe(Effect.provide(HttpLive)))
    // Every bad setting, and that it fails before any request: test/config/BadConfig.test.ts.
  })

  describe("secrets", () => {
    it.scopedLive("no log line contains the API key", () =>
      Effect.gen(function*() {
        const printed: Array<string> = []
        const { client } = yield* serverAndClient({
          steps: [{ _tag: "Status", status: 503 }, { _tag: "Fixture", name: "auth" }, { _tag: "Ok" }]
        })
        yield* Effect.exit(client.chat(hello)).pipe(
          Effect.provide(printLogfmtInto(printed)),
          withMinimumLogLevel("Debug")
        )
        yield* client.chat(hello).pipe(
          Effect.provide(printLogfmtInto(printed)),
          withMinimumLogLevel("Debug")
        )
        assert.isAtLeast(printed.length, 3)
        for (const line of printed) assert.notInclude(line, apiKey)
        assert.isTrue(printed.some((line) => line.includes("promptTokens=")))
      }).pipe(Effect.provide(HttpLive)))
  })
})
