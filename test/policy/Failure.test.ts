import { either } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Failure } from "@resilient-ai/policy"
import { Either, Failures } from "@resilient-ai/policy/internal"
import { Duration, Effect } from "effect"

const every: ReadonlyArray<Failure.Failure> = [
  new Failure.ConnectFailed({ detail: "ECONNREFUSED 127.0.0.1:443" }),
  new Failure.ConnectTimeout({ timeout: Duration.seconds(5) }),
  new Failure.ReadTimeout({ timeout: Duration.seconds(30), phase: "body" }),
  new Failure.ConnectionReset({ afterSend: true }),
  new Failure.RateLimited({ status: 429, retryAfter: Duration.seconds(2) }),
  new Failure.QuotaExhausted({ status: 429, providerCode: "insufficient_quota" }),
  new Failure.ServerError({ status: 500 }),
  new Failure.Overloaded({ status: 529 }),
  new Failure.ClientError({ status: 400 }),
  new Failure.AuthenticationFailed({ status: 401 }),
  new Failure.ModelUnavailable({ status: 404, model: "mistral-large-4" }),
  new Failure.NotJson({ status: 200, excerpt: "<html>" }),
  new Failure.ResponseTooLarge({ status: 200, limitBytes: 1024 }),
  new Failure.ContractViolation({ issues: [] }),
  new Failure.DeadlineExceeded({ deadline: 0, phase: "attempt" }),
  new Failure.Shed({ target: "pool", limit: 2, inFlight: 2 }),
  new Failure.Cancelled({ reason: "aborted" })
]

const callFailed = new Failure.CallFailed({
  reason: "attempts",
  last: new Failure.ServerError({ status: 503, providerCode: "unavailable" }),
  attempts: [
    { attempt: 1, outcome: "ServerError", status: 503, latency: Duration.millis(120), delayBefore: Duration.zero },
    { attempt: 2, outcome: "ServerError", status: 503, latency: Duration.millis(80), delayBefore: Duration.millis(74) },
    { attempt: 3, outcome: "ServerError", status: 503, latency: Duration.millis(95), delayBefore: Duration.millis(136) }
  ],
  target: "mistral-large"
})

describe("Failure", () => {
  describe("fromResponse", () => {
    it("maps 401 and 403 to AuthenticationFailed, keeping the fields", () => {
      const unauthorized = Failures.fromResponse({ status: 401, providerCode: "invalid_api_key", detail: "bad key" })
      assert.instanceOf(unauthorized, Failure.AuthenticationFailed)
      assert.strictEqual(unauthorized._tag, "AuthenticationFailed")
      assert.strictEqual(Failures.statusOf(unauthorized), 401)
      assert.strictEqual((unauthorized as Failure.AuthenticationFailed).providerCode, "invalid_api_key")
      assert.strictEqual((unauthorized as Failure.AuthenticationFailed).detail, "bad key")
      assert.strictEqual(Failures.fromResponse({ status: 403 })._tag, "AuthenticationFailed")
    })

    it("maps 429 to RateLimited, keeping the hint, code and shouldRetry", () => {
      const failure = Failures.fromResponse({
        status: 429,
        providerCode: "rate_limit_exceeded",
        retryAfter: Duration.seconds(7),
        shouldRetry: true
      })
      assert.instanceOf(failure, Failure.RateLimited)
      const limited = failure as Failure.RateLimited
      assert.strictEqual(limited.status, 429)
      assert.strictEqual(limited.providerCode, "rate_limit_exceeded")
      assert.strictEqual(limited.shouldRetry, true)
      assert.strictEqual(Duration.toMillis(Failures.retryAfterOf(failure) ?? Duration.infinity), 7000)
      assert.strictEqual(Failures.retryAfterOf(Failures.fromResponse({ status: 429 })), undefined)
    })

    it("maps a quota code to QuotaExhausted whatever the status, by code or by type", () => {
      const byCode = Failures.fromResponse({
        status: 429,
        providerCode: "insufficient_quota",
        retryAfter: Duration.seconds(7)
      })
      assert.instanceOf(byCode, Failure.QuotaExhausted)
      assert.strictEqual(Failures.statusOf(byCode), 429)
      assert.strictEqual((byCode as Failure.QuotaExhausted).providerCode, "insufficient_quota")
      // waiting will not help, so the hint is not carried
      assert.strictEqual(Failures.retryAfterOf(byCode), undefined)
      const tagOf = (summary: Failures.ResponseSummary) => Failures.fromResponse(summary)._tag
      assert.strictEqual(tagOf({ status: 429, providerType: "insufficient_quota" }), "QuotaExhausted")
      assert.strictEqual(tagOf({ status: 400, providerCode: "billing_hard_limit_reached" }), "QuotaExhausted")
      assert.strictEqual(tagOf({ status: 403, providerCode: "billing_not_active" }), "QuotaExhausted")
      assert.strictEqual(tagOf({ status: 429, providerCode: "quota_exceeded" }), "QuotaExhausted")
    })

    it("maps a model code to ModelUnavailable whatever the status, keeping the model", () => {
      const failure = Failures.fromResponse({
        status: 503,
        providerCode: "model_not_found",
        detail: "no route",
        model: "mistral-large-4",
        retryAfter: Duration.seconds(1)
      })
      assert.instanceOf(failure, Failure.ModelUnavailable)
      const unavailable = failure as Failure.ModelUnavailable
      assert.strictEqual(unavailable.status, 503)
      assert.strictEqual(unavailable.model, "mistral-large-4")
      assert.strictEqual(unavailable.providerCode, "model_not_found")
      assert.strictEqual(unavailable.detail, "no route")
      const tagOf = (summary: Failures.ResponseSummary) => Failures.fromResponse(summary)._tag
      assert.strictEqual(tagOf({ status: 404, providerCode: "model_not_found" }), "ModelUnavailable")
      assert.strictEqual(tagOf({ status: 400, providerType: "model_not_available" }), "ModelUnavailable")
    })

    it("maps 503, 529 and overloaded_error to Overloaded, keeping the hint", () => {
      const unavailable = Failures.fromResponse({ status: 503, retryAfter: Duration.millis(1500) })
      assert.instanceOf(unavailable, Failure.Overloaded)
      assert.strictEqual(Duration.toMillis(Failures.retryAfterOf(unavailable) ?? Duration.infinity), 1500)
      assert.strictEqual(Failures.fromResponse({ status: 529 })._tag, "Overloaded")
      const typed = Failures.fromResponse({ status: 500, providerType: "overloaded_error" })
      assert.strictEqual(typed._tag, "Overloaded")
      assert.strictEqual(Failures.statusOf(typed), 500)
    })

    it("maps the other 5xx to ServerError, keeping the hint", () => {
      for (const status of [500, 502, 504]) {
        const failure = Failures.fromResponse({ status, retryAfter: Duration.seconds(3) })
        assert.instanceOf(failure, Failure.ServerError)
        assert.strictEqual(Failures.statusOf(failure), status)
        assert.strictEqual(Duration.toMillis(Failures.retryAfterOf(failure) ?? Duration.infinity), 3000)
      }
    })

    it("maps the other 4xx to ClientError", () => {
      for (const status of [400, 404, 408, 409, 422]) {
        const failure = Failures.fromResponse({ status, providerCode: "invalid_request_error", detail: "bad field" })
        assert.instanceOf(failure, Failure.ClientError)
        assert.strictEqual(Failures.statusOf(failure), status)
        assert.strictEqual((failure as Failure.ClientError).providerCode, "invalid_request_error")
      }
    })

    it("keeps the hint on the 4xx a retry may follow: 408, 409, and any with x-should-retry: true", () => {
      for (
        const response of [
          { status: 408 },
          { status: 409 },
          { status: 400, shouldRetry: true },
          { status: 422, shouldRetry: true },
          { status: 401, shouldRetry: true },
          { status: 403 }
        ]
      ) {
        const failure = Failures.fromResponse({ ...response, retryAfter: Duration.millis(2000) })
        assert.strictEqual(
          Duration.toMillis(Failures.retryAfterOf(failure) ?? Duration.infinity),
          2000,
          failure.message
        )
      }
    })

    it("does not copy providerType, model or retryAfter onto failures that do not declare them", () => {
      const failure = Failures.fromResponse({ status: 400, providerType: "invalid_request_error", model: "m" })
      assert.isFalse("providerType" in failure)
      assert.isFalse("model" in failure)
      const quota = Failures.fromResponse({
        status: 403,
        providerCode: "billing_not_active",
        retryAfter: Duration.seconds(1)
      })
      assert.isFalse("retryAfter" in quota)
    })
  })

  describe("retryAfterOf", () => {
    it("returns a Duration hint and nothing else", () => {
      const hint = Duration.seconds(4)
      assert.strictEqual(Failures.retryAfterOf(new Failure.RateLimited({ status: 429, retryAfter: hint })), hint)
      assert.strictEqual(Failures.retryAfterOf(new Failure.Overloaded({ status: 529, retryAfter: hint })), hint)
      assert.strictEqual(Failures.retryAfterOf({ retryAfter: hint }), hint)
      assert.strictEqual(Failures.retryAfterOf(new Failure.RateLimited({ status: 429 })), undefined)
      assert.strictEqual(Failures.retryAfterOf(new Failure.ClientError({ status: 400 })), undefined)
      assert.strictEqual(Failures.retryAfterOf(new Failure.ClientError({ status: 409, retryAfter: hint })), hint)
      assert.strictEqual(Failures.retryAfterOf({ retryAfter: 4000 }), undefined)
      assert.strictEqual(Failures.retryAfterOf({ retryAfter: "4 seconds" }), undefined)
      assert.strictEqual(Failures.retryAfterOf(null), undefined)
      assert.strictEqual(Failures.retryAfterOf(undefined), undefined)
      assert.strictEqual(Failures.retryAfterOf("retryAfter"), undefined)
    })
  })

  describe("statusOf", () => {
    it("returns a numeric status and nothing else", () => {
      assert.strictEqual(Failures.statusOf(new Failure.ServerError({ status: 502 })), 502)
      assert.strictEqual(Failures.statusOf(new Failure.NotJson({ status: 200, excerpt: "" })), 200)
      assert.strictEqual(Failures.statusOf({ status: 418 }), 418)
      assert.strictEqual(Failures.statusOf(new Failure.ConnectFailed({ detail: "refused" })), undefined)
      assert.strictEqual(Failures.statusOf({ status: "500" }), undefined)
      assert.strictEqual(Failures.statusOf(null), undefined)
      assert.strictEqual(Failures.statusOf(500), undefined)
    })
  })

  describe("as Effect errors", () => {
    it.effect("every failure is caught by its own tag and only by it", () =>
      Effect.gen(function*() {
        assert.strictEqual(new Set(every.map((failure) => failure._tag)).size, 17)
        for (const failure of every) {
          assert.instanceOf(failure, Error)
          const caught = yield* Effect.fail(failure).pipe(
            Effect.catchTag(failure._tag, (error) => Effect.succeed(error))
          )
          assert.strictEqual(caught, failure)
          const other = failure._tag === "Cancelled" ? "Shed" : "Cancelled"
          const missed = yield* Effect.fail(failure).pipe(
            Effect.catchTag(other, () => Effect.succeed("caught by the wrong tag")),
            either
          )
          assert.isTrue(
            Either.isLeft(missed) && Either.leftOf(missed) === failure,
            `${failure._tag} caught as ${other}`
          )
        }
      }))

    it.effect("yields as a failure in Effect.gen and is picked out by catchTags", () =>
      Effect.gen(function*() {
        const program = Effect.gen(function*() {
          yield* new Failure.RateLimited({ status: 429, retryAfter: Duration.seconds(2) })
          return "unreachable"
        })
        const handled = yield* program.pipe(
          Effect.catchTags({
            RateLimited: (error) => Effect.succeed(`wait ${Duration.toMillis(error.retryAfter ?? Duration.zero)}`)
          })
        )
        assert.strictEqual(handled, "wait 2000")
        const stopped = yield* Effect.fail(callFailed).pipe(
          Effect.catchTag("CallFailed", (error) => Effect.succeed(error.attempts.length))
        )
        assert.strictEqual(stopped, 3)
      }))
  })

  describe("message", () => {
    it("leaves out an empty provider code", () => {
      assert.strictEqual(new Failure.ServerError({ status: 500, providerCode: "" }).message, "server error (HTTP 500)")
    })

    it("prints a deadline that is not a date without throwing", () => {
      assert.strictEqual(
        new Failure.DeadlineExceeded({ deadline: Number.POSITIVE_INFINITY, phase: "attempt" }).message,
        "deadline Infinity reached (attempt)"
      )
      assert.strictEqual(
        new Failure.DeadlineExceeded({ deadline: 9e15, phase: "queue" }).message,
        "deadline 9000000000000000 reached (queue)"
      )
    })

    it("describes HTTP failures with status, code and detail", () => {
      assert.strictEqual(
        new Failure.RateLimited({ status: 429, providerCode: "rate_limit_exceeded", retryAfter: Duration.seconds(7) })
          .message,
        "rate limited (HTTP 429, code rate_limit_exceeded); retry after 7s"
      )
      assert.strictEqual(new Failure.RateLimited({ status: 429 }).message, "rate limited (HTTP 429)")
      assert.strictEqual(
        new Failure.QuotaExhausted({ status: 429, providerCode: "insufficient_quota", detail: "add credits" }).message,
        "quota or billing limit exhausted (HTTP 429, code insufficient_quota, add credits)"
      )
      assert.strictEqual(
        new Failure.ServerError({ status: 502, providerCode: "bad_gateway", detail: "upstream died" }).message,
        "server error (HTTP 502, code bad_gateway, upstream died)"
      )
      assert.strictEqual(
        new Failure.Overloaded({ status: 529, providerCode: "overloaded_error" }).message,
        "provider overloaded (HTTP 529, code overloaded_error)"
      )
      assert.strictEqual(
        new Failure.ClientError({ status: 422, detail: "messages: required" }).message,
        "request rejected (HTTP 422, messages: required)"
      )
      assert.strictEqual(new Failure.ClientError({ status: 400, detail: "" }).message, "request rejected (HTTP 400)")
      assert.strictEqual(
        new Failure.AuthenticationFailed({ status: 401, providerCode: "invalid_api_key" }).message,
        "authentication failed (HTTP 401, code invalid_api_key); check the API key"
      )
      assert.strictEqual(
        new Failure.ModelUnavailable({ status: 503, providerCode: "model_not_found", model: "mistral-large-4" })
          .message,
        "model mistral-large-4 is not available (HTTP 503, code model_not_found)"
      )
      assert.strictEqual(
        new Failure.ModelUnavailable({ status: 404 }).message,
        "the model is not available (HTTP 404)"
      )
    })

    it("describes transport failures", () => {
      assert.strictEqual(
        new Failure.ConnectFailed({ detail: "ECONNREFUSED" }).message,
        "could not connect, nothing was sent: ECONNREFUSED"
      )
      assert.strictEqual(
        new Failure.ConnectFailed({ detail: "ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9", code: "ECONNREFUSED" })
          .message,
        "could not connect (connection refused), nothing was sent: ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9"
      )
      assert.strictEqual(
        new Failure.ConnectFailed({ detail: "ENOTFOUND: getaddrinfo ENOTFOUND nowhere.invalid", code: "ENOTFOUND" })
          .message,
        "could not connect (no such host), nothing was sent: ENOTFOUND: getaddrinfo ENOTFOUND nowhere.invalid"
      )
      assert.strictEqual(
        new Failure.ConnectTimeout({ timeout: Duration.seconds(5) }).message,
        "no connection within 5s, nothing was sent"
      )
      assert.strictEqual(
        new Failure.ReadTimeout({ timeout: Duration.seconds(30), phase: "headers" }).message,
        "no complete answer within 30s (stalled in headers); the request may still be running and billed"
      )
      assert.strictEqual(
        new Failure.ConnectionReset({ afterSend: true }).message,
        "connection reset after the request was sent; the request may have been processed"
      )
      assert.strictEqual(
        new Failure.ConnectionReset({ afterSend: false }).message,
        "connection reset before the request was sent"
      )
    })

    it("describes body, deadline, shedding and cancellation failures", () => {
      assert.strictEqual(
        new Failure.NotJson({ status: 200, contentType: "text/html", excerpt: "<html>502" }).message,
        "HTTP 200 body is not JSON (text/html): <html>502"
      )
      assert.strictEqual(
        new Failure.NotJson({ status: 200, excerpt: "{\"trunc" }).message,
        "HTTP 200 body is not JSON (no content type): {\"trunc"
      )
      assert.strictEqual(
        new Failure.ContractViolation({
          issues: [
            { path: "", message: "expected an object" },
            { path: "choices[0].message.content", message: "missing" }
          ]
        }).message,
        "response breaks the contract: (root): expected an object; choices[0].message.content: missing"
      )
      const seven = Array.from({ length: 7 }, (_, i) => ({ path: `a${i}`, message: "bad" }))
      assert.strictEqual(
        new Failure.ContractViolation({ issues: seven }).message,
        "response breaks the contract: a0: bad; a1: bad; a2: bad; a3: bad; a4: bad and 2 more"
      )
      assert.strictEqual(
        new Failure.DeadlineExceeded({ deadline: Date.UTC(2026, 10, 29, 12, 0, 5, 250), phase: "sleep" }).message,
        "deadline 2026-11-29T12:00:05.250Z reached (sleep)"
      )
      assert.strictEqual(
        new Failure.Shed({ target: "self-hosted", limit: 8, inFlight: 8 }).message,
        "self-hosted is at its concurrency limit (8/8); request shed, not queued"
      )
      assert.strictEqual(new Failure.Cancelled({ reason: "caller aborted" }).message, "cancelled: caller aborted")
    })

    it("names the target, reason, number of attempts and the last failure of a CallFailed", () => {
      assert.strictEqual(
        callFailed.message,
        "mistral-large: stopped (attempts) after 3 attempt(s); last: server error (HTTP 503, code unavailable)"
      )
      const terminal = new Failure.CallFailed({
        reason: "terminal",
        last: new Failure.QuotaExhausted({ status: 429, providerCode: "insufficient_quota" }),
        attempts: [
          {
            attempt: 1,
            outcome: "QuotaExhausted",
            status: 429,
            latency: Duration.millis(40),
            delayBefore: Duration.zero
          }
        ],
        target: "openai"
      })
      assert.strictEqual(
        terminal.message,
        "openai: stopped (terminal) after 1 attempt(s); " +
          "last: quota or billing limit exhausted (HTTP 429, code insufficient_quota)"
      )
    })

    it("shows the message, and is an Error whose message matches", () => {
      for (const failure of every) {
        assert.isTrue(failure.message.length > 0, failure._tag)
        assert.include(String(failure), failure.message)
      }
    })
  })
})
