import { assert, describe, it } from "@effect/vitest"
import { Classifier, Failure } from "@resilient-ai/policy"
import { Failures } from "@resilient-ai/policy/internal"
import { Duration, Effect } from "effect"

type Tag = Failure.Failure["_tag"]

type Row<K extends Tag> = readonly [Extract<Failure.Failure, { _tag: K }>, Classifier.Verdict]

/** Every failure class with its documented verdict; the mapped type makes a missing class a type error. */
const table: { readonly [K in Tag]: ReadonlyArray<Row<K>> } = {
  ConnectFailed: [[new Failure.ConnectFailed({ detail: "ECONNREFUSED" }), "retryable"]],
  ConnectTimeout: [[new Failure.ConnectTimeout({ timeout: Duration.seconds(5) }), "retryable"]],
  ReadTimeout: [
    [new Failure.ReadTimeout({ timeout: Duration.seconds(30), phase: "headers" }), "ambiguous"],
    [new Failure.ReadTimeout({ timeout: Duration.seconds(30), phase: "body" }), "ambiguous"],
    [new Failure.ReadTimeout({ timeout: Duration.seconds(30), phase: "attempt" }), "ambiguous"]
  ],
  ConnectionReset: [
    [new Failure.ConnectionReset({ afterSend: false }), "retryable"],
    [new Failure.ConnectionReset({ afterSend: true, detail: "ECONNRESET" }), "ambiguous"]
  ],
  RateLimited: [
    [new Failure.RateLimited({ status: 429 }), "retryable"],
    [new Failure.RateLimited({ status: 429, providerCode: "rate_limit_exceeded" }), "retryable"]
  ],
  QuotaExhausted: [[new Failure.QuotaExhausted({ status: 429, providerCode: "insufficient_quota" }), "terminal"]],
  ServerError: [
    [new Failure.ServerError({ status: 500 }), "retryable"],
    [new Failure.ServerError({ status: 502 }), "retryable"]
  ],
  Overloaded: [
    [new Failure.Overloaded({ status: 503 }), "retryable"],
    [new Failure.Overloaded({ status: 529, providerCode: "overloaded_error" }), "retryable"]
  ],
  ClientError: [[new Failure.ClientError({ status: 400 }), "terminal"]],
  AuthenticationFailed: [[new Failure.AuthenticationFailed({ status: 401 }), "terminal"]],
  ModelUnavailable: [[new Failure.ModelUnavailable({ status: 404, model: "mistral-large-4" }), "terminal"]],
  NotJson: [[new Failure.NotJson({ status: 200, excerpt: "<html>" }), "terminal"]],
  ResponseTooLarge: [[new Failure.ResponseTooLarge({ status: 200, limitBytes: 1024 }), "terminal"]],
  ContractViolation: [
    [new Failure.ContractViolation({ issues: [{ path: "choices", message: "missing" }] }), "terminal"]
  ],
  DeadlineExceeded: [[new Failure.DeadlineExceeded({ deadline: 1000, phase: "sleep" }), "terminal"]],
  Shed: [[new Failure.Shed({ target: "pool", limit: 4, inFlight: 4 }), "terminal"]],
  RateLimitedLocally: [[
    new Failure.RateLimitedLocally({
      target: "openai",
      dimension: "tokens",
      availableAt: 1_000,
      retryAfter: Duration.seconds(1)
    }),
    "terminal"
  ]],
  Cancelled: [[new Failure.Cancelled({ reason: "AbortSignal aborted" }), "terminal"]]
}

const cases = Object.values(table).flat() as ReadonlyArray<readonly [Failure.Failure, Classifier.Verdict]>

const verdictOf = Classifier.classifyDefault
const readTimeout = new Failure.ReadTimeout({ timeout: Duration.seconds(1), phase: "body" })

const statusFailures = {
  RateLimited: (fields: Failures.HintedResponseFields) => new Failure.RateLimited(fields),
  ServerError: (fields: Failures.HintedResponseFields) => new Failure.ServerError(fields),
  Overloaded: (fields: Failures.HintedResponseFields) => new Failure.Overloaded(fields)
} as const

describe("Classifier", () => {
  describe("classifyDefault", () => {
    it("gives every failure class its documented verdict", () => {
      assert.strictEqual(Object.keys(table).length, 18)
      for (const [failure, verdict] of cases) {
        assert.strictEqual(verdictOf(failure), verdict, failure.message)
      }
    })

    it("tells a reset before sending from a reset after sending", () => {
      assert.strictEqual(verdictOf(new Failure.ConnectionReset({ afterSend: false })), "retryable")
      assert.strictEqual(verdictOf(new Failure.ConnectionReset({ afterSend: true })), "ambiguous")
    })

    it("treats a quota code on a 429 as terminal", () => {
      for (const code of ["insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "quota_exceeded"]) {
        const failure = new Failure.RateLimited({ status: 429, providerCode: code, retryAfter: Duration.seconds(1) })
        assert.strictEqual(verdictOf(failure), "terminal", code)
      }
    })

    it("treats a model code on a 5xx or 429 as terminal", () => {
      for (const [name, make] of Object.entries(statusFailures)) {
        for (const code of ["model_not_found", "model_not_available"]) {
          const status = name === "RateLimited" ? 429 : 503
          assert.strictEqual(verdictOf(make({ status, providerCode: code })), "terminal", `${name} ${code}`)
        }
      }
    })

    it("lets the account and model codes win over shouldRetry: true", () => {
      assert.strictEqual(
        verdictOf(new Failure.RateLimited({ status: 429, providerCode: "insufficient_quota", shouldRetry: true })),
        "terminal"
      )
      assert.strictEqual(
        verdictOf(new Failure.ServerError({ status: 503, providerCode: "model_not_found", shouldRetry: true })),
        "terminal"
      )
    })

    it("lets shouldRetry override the status of HTTP failures", () => {
      for (const [name, make] of Object.entries(statusFailures)) {
        const status = name === "RateLimited" ? 429 : 500
        assert.strictEqual(verdictOf(make({ status, shouldRetry: false })), "terminal", name)
        assert.strictEqual(verdictOf(make({ status, shouldRetry: true })), "retryable", name)
      }
      assert.strictEqual(verdictOf(new Failure.ClientError({ status: 400, shouldRetry: true })), "retryable")
      assert.strictEqual(verdictOf(new Failure.ClientError({ status: 422, shouldRetry: true })), "retryable")
      assert.strictEqual(verdictOf(new Failure.ClientError({ status: 408, shouldRetry: false })), "terminal")
      assert.strictEqual(verdictOf(new Failure.ClientError({ status: 409, shouldRetry: false })), "terminal")
    })

    it("lets shouldRetry decide over the status of any response, but never revive a spent quota or a missing model", () => {
      assert.strictEqual(verdictOf(new Failure.AuthenticationFailed({ status: 401, shouldRetry: true })), "retryable")
      assert.strictEqual(verdictOf(new Failure.QuotaExhausted({ status: 429, shouldRetry: true })), "terminal")
      assert.strictEqual(verdictOf(new Failure.ModelUnavailable({ status: 404, shouldRetry: true })), "terminal")
    })

    it("treats shouldRetry: undefined as absent", () => {
      assert.strictEqual(verdictOf(new Failure.ServerError({ status: 500, shouldRetry: undefined })), "retryable")
      assert.strictEqual(verdictOf(new Failure.ClientError({ status: 400, shouldRetry: undefined })), "terminal")
    })

    it("retries a 408 or 409 client error and stops on the others", () => {
      const verdicts = [400, 404, 408, 409, 413, 422].map((status) => verdictOf(new Failure.ClientError({ status })))
      assert.deepStrictEqual(verdicts, ["terminal", "terminal", "retryable", "retryable", "terminal", "terminal"])
    })

    it("agrees with fromResponse's mapping", () => {
      const verdictOfResponse = (summary: Failures.ResponseSummary) => verdictOf(Failures.fromResponse(summary))
      assert.strictEqual(verdictOfResponse({ status: 429 }), "retryable")
      assert.strictEqual(verdictOfResponse({ status: 429, providerCode: "insufficient_quota" }), "terminal")
      assert.strictEqual(verdictOfResponse({ status: 503, providerCode: "model_not_found" }), "terminal")
      assert.strictEqual(verdictOfResponse({ status: 529 }), "retryable")
      assert.strictEqual(verdictOfResponse({ status: 401 }), "terminal")
      assert.strictEqual(verdictOfResponse({ status: 400 }), "terminal")
      assert.strictEqual(verdictOfResponse({ status: 408 }), "retryable")
    })
  })

  describe("Classifier service", () => {
    it.effect("resolves to the default table when nothing is provided", () =>
      Effect.gen(function*() {
        const classifier = yield* Classifier.Classifier
        assert.strictEqual(classifier.classify, Classifier.classifyDefault)
        for (const [failure, verdict] of cases) {
          assert.strictEqual(classifier.classify(failure), verdict, failure._tag)
        }
      }))

    it.effect("is replaced by layer", () =>
      Effect.gen(function*() {
        const classifier = yield* Classifier.Classifier
        assert.strictEqual(classifier.classify(readTimeout), "retryable")
        assert.strictEqual(classifier.classify(new Failure.ClientError({ status: 400 })), "terminal")
        assert.strictEqual(classifier.classify(new Failure.ServerError({ status: 500 })), "terminal")
      }).pipe(Effect.provide(Classifier.layer((failure) => failure._tag === "ReadTimeout" ? "retryable" : "terminal"))))

    it.effect("is extended by layerOverriding, falling through to the default", () =>
      Effect.gen(function*() {
        const seen: Array<string> = []
        const classifier = yield* Classifier.Classifier.pipe(
          Effect.provide(Classifier.layerOverriding((failure) => {
            seen.push(failure._tag)
            if (failure._tag === "ClientError" && failure.status === 400) return "retryable"
            if (failure._tag === "ServerError") return "terminal"
            return undefined
          }))
        )
        assert.strictEqual(classifier.classify(new Failure.ClientError({ status: 400 })), "retryable")
        assert.strictEqual(classifier.classify(new Failure.ServerError({ status: 500 })), "terminal")
        assert.strictEqual(classifier.classify(new Failure.ClientError({ status: 404 })), "terminal")
        assert.strictEqual(classifier.classify(new Failure.ClientError({ status: 409 })), "retryable")
        assert.strictEqual(classifier.classify(readTimeout), "ambiguous")
        assert.deepStrictEqual(seen, ["ClientError", "ServerError", "ClientError", "ClientError", "ReadTimeout"])
      }))

    it.effect("goes back to the default outside the provided layer", () =>
      Effect.gen(function*() {
        const inside = yield* Classifier.Classifier.pipe(Effect.provide(Classifier.layer(() => "terminal")))
        const outside = yield* Classifier.Classifier
        const reset = new Failure.ConnectionReset({ afterSend: false })
        assert.strictEqual(inside.classify(reset), "terminal")
        assert.strictEqual(outside.classify(reset), "retryable")
      }))
  })
})
