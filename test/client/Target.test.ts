import { assert, describe, it } from "@effect/vitest"
import { Failover, Target } from "@resilient-ai/client"
import { Targets } from "@resilient-ai/client/internal"
import { Failure, Resilient } from "@resilient-ai/policy"
import { Failures } from "@resilient-ai/policy/internal"
import { Duration, Effect, Redacted } from "effect"
import { invalidSettings } from "../policy/support.js"
import { checked } from "./support.js"

const base = { name: "t", baseUrl: "https://api.mistral.ai/v1", model: "mistral-small-latest" }

describe("Target", () => {
  it("managed targets default to three attempts, a 20% budget with a 5/s floor that learns whether retries pay, and a queue of 64", () => {
    const target = checked(Target.managed({ ...base, apiKey: Redacted.make("k") }))
    assert.strictEqual(target.kind, "managed")
    assert.strictEqual(target.maxAttempts, 3)
    assert.deepStrictEqual(target.budget, { ratio: 0.2, minPerSecond: 5, shareWhenRetriesFail: 0.05 })
    assert.strictEqual(target.concurrency, 64)
    assert.strictEqual(Targets.gateMode(target), "queue")
    assert.strictEqual(Duration.toMillis(target.attemptTimeout), 60_000)
  })

  it("self-hosted targets default to a near-zero budget and a gate that sheds", () => {
    const target = checked(Target.selfHosted(base))
    assert.deepStrictEqual(target.budget, { ratio: 0.01, minPerSecond: 0.2, shareWhenRetriesFail: 1 })
    assert.strictEqual(Targets.gateMode(target), "shed")
    assert.isUndefined(target.apiKey)
  })

  it("a self-hosted pool retries only what never reached it", () => {
    const { classify } = Targets.selfHostedClassifier
    assert.strictEqual(classify(new Failure.ConnectFailed({ detail: "ECONNREFUSED" })), "retryable")
    assert.strictEqual(classify(new Failure.ConnectTimeout({ timeout: Duration.seconds(3) })), "retryable")
    assert.strictEqual(classify(new Failure.ConnectionReset({ afterSend: false })), "retryable")
    assert.strictEqual(classify(new Failure.ConnectionReset({ afterSend: true })), "terminal")
    assert.strictEqual(classify(new Failure.Overloaded({ status: 503 })), "terminal")
    assert.strictEqual(classify(new Failure.RateLimited({ status: 429 })), "terminal")
    assert.strictEqual(
      classify(new Failure.ReadTimeout({ timeout: Duration.seconds(1), phase: "headers" })),
      "terminal"
    )
  })

  it("names every setting that cannot work, in one typed failure", () => {
    assert.match(
      invalidSettings(Target.managed({
        ...base,
        baseUrl: "ftp://x",
        maxAttempts: 0,
        attemptTimeout: 0,
        baseDelay: "5 seconds",
        maxDelay: "1 second",
        concurrency: 0
      })),
      /^target t: baseUrl must be an http\(s\) URL.*; apiKey is required; attemptTimeout must be positive.*; maxAttempts must be an integer >= 1.*; concurrency must be an integer >= 1, got 0$/
    )
    // A rule between two settings is checked once each is valid on its own.
    assert.strictEqual(
      invalidSettings(
        Target.managed({ ...base, apiKey: Redacted.make("k"), baseDelay: "5 seconds", maxDelay: "1 second" })
      ),
      "target t: baseDelay (5s) must not exceed maxDelay (1s)"
    )
  })

  it("carries every setting of a policy to the policy of each model", () => {
    const defaults = Targets.policyFor(checked(Target.managed({ ...base, apiKey: Redacted.make("k") })))
    assert.strictEqual(Duration.toMillis(defaults.maxRetryAfter), 60_000)
    assert.strictEqual(Duration.toMillis(defaults.minAttemptTime), 100)
    assert.isFalse(defaults.replaySafe)
    const target = checked(Target.managed({
      ...base,
      apiKey: Redacted.make("k"),
      attemptTimeoutByModel: { fast: "150 millis" },
      maxRetryAfter: "5 seconds",
      minAttemptTime: "120 millis",
      replaySafe: true,
      propagateTrace: true
    }))
    for (const model of [undefined, "fast"]) {
      const policy = Targets.policyFor(target, model)
      assert.strictEqual(Duration.toMillis(policy.maxRetryAfter), 5_000)
      assert.strictEqual(Duration.toMillis(policy.minAttemptTime), 120)
      assert.isTrue(policy.replaySafe)
    }
    assert.isTrue(target.propagateTrace)
    assert.isFalse(checked(Target.selfHosted(base)).propagateTrace)
  })

  it("refuses a minAttemptTime no attempt timeout leaves room for, when the target is built", () => {
    assert.include(
      invalidSettings(Target.selfHosted({ ...base, attemptTimeout: "1 second", minAttemptTime: "1 second" })),
      "minAttemptTime (1s) must be shorter than attemptTimeout (1s)"
    )
    assert.include(
      invalidSettings(
        Target.selfHosted({ ...base, attemptTimeoutByModel: { fast: "100 millis" }, minAttemptTime: "200 millis" })
      ),
      "minAttemptTime (200ms) must be shorter than attemptTimeoutByModel.fast (100ms)"
    )
  })

  it("a request for another model gets that model's timeout", () => {
    const target = checked(Target.managed({
      ...base,
      apiKey: Redacted.make("k"),
      attemptTimeout: "20 seconds",
      attemptTimeoutByModel: { "mistral-large-latest": "90 seconds" }
    }))
    assert.strictEqual(Duration.toMillis(Targets.policyFor(target).attemptTimeout), 20_000)
    assert.strictEqual(Duration.toMillis(Targets.policyFor(target, "mistral-large-latest").attemptTimeout), 90_000)
    assert.strictEqual(Targets.policyFor(target, "mistral-large-latest").model, "mistral-large-latest")
  })
})

describe("one rule for a budget's ratio, whichever door it comes through", () => {
  /** The problems an `InvalidSettings` names, without what the settings were for. */
  const problems = (message: string) => message.slice(message.indexOf(": ") + 2)

  it("a ratio of 1.5 is refused by Resilient.policy and by Target.managed, with the same message", () => {
    const fromPolicy = invalidSettings(Resilient.policy({ target: "t", budget: { ratio: 1.5 } }))
    const fromTarget = invalidSettings(Target.managed({ ...base, apiKey: Redacted.make("k"), budget: { ratio: 1.5 } }))
    assert.strictEqual(problems(fromPolicy), "budget.ratio must be between 0 and 1 (0.1 allows 10% retries), got 1.5")
    assert.strictEqual(problems(fromTarget), problems(fromPolicy))
  })

  it("0 and 1 pass both", () => {
    for (const ratio of [0, 1]) {
      const policy = Effect.runSync(Resilient.policy({ target: "t", budget: { ratio } }))
      assert.strictEqual(policy.budget.ratio, ratio)
      const target = checked(Target.managed({ ...base, apiKey: Redacted.make("k"), budget: { ratio } }))
      assert.strictEqual(Targets.policyFor(target).budget.ratio, ratio)
    }
  })
})

describe("Failover.shouldFailOver", () => {
  const ended = (reason: Failure.StopReason) =>
    new Failure.CallFailed({ reason, last: new Failure.ServerError({ status: 500 }), attempts: [], target: "a" })

  it("passes on a call the target could not serve, never one the request or the clock doomed", () => {
    const verdicts = Failures.stopReasons.map((reason) => [reason, Failover.shouldFailOver(ended(reason))])
    assert.deepStrictEqual(Object.fromEntries(verdicts), {
      terminal: false,
      "not-replay-safe": false,
      attempts: true,
      budget: true,
      deadline: false,
      shed: true,
      "rate-limited-locally": true,
      "retry-after-too-long": true,
      deferred: false
    })
  })
})
