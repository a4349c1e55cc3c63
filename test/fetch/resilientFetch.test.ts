/**
 * The promise door (`@resilient-ai/fetch`) under the `openai` SDK, against the real fault server, on
 * the real clock (the door runs its calls itself, as a program without Effect gets them run): what
 * the server saw, what the SDK's caller got, and what the door's metrics say decide each test.
 */
import { assert, describe, it } from "@effect/vitest"
import { Target } from "@resilient-ai/client"
import { resilientFetch, type Settings } from "@resilient-ai/fetch"
import { Either } from "@resilient-ai/policy/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import OpenAI from "openai"
import { haiku } from "../../examples/promise-door.js"
import { canary } from "../canary.js"
import { chat, openAiOn, streamInto } from "../client/openai.js"
import { assertOneIdempotencyKey, rejection, thrown } from "../client/sdkSupport.js"
import { freshName } from "../client/support.js"

/** A door to the fault server at `url`, with tiny backoff so the tests stay fast. */
const doorAt = (url: string, settings: Partial<Settings> = {}) =>
  resilientFetch({
    name: freshName("door"),
    baseUrl: url,
    model: "gpt-4o-mini",
    apiKey: canary,
    baseDelay: 1,
    maxDelay: 5,
    hintSpread: 0,
    ...settings
  } as Settings)

/** Waits on the real clock until `holds`, for at most `millis`. */
const until = (holds: () => boolean, millis = 10_000) =>
  Effect.promise(async () => {
    const end = Date.now() + millis
    while (!holds()) {
      if (Date.now() > end) throw new Error("never held")
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  })

/** Waits on the real clock until `count` requests reached `server`. */
const untilArrived = (server: FaultServer.Service, count: number) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 2_000; turn++) {
      if ((yield* server.arrivals).length >= count) return
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
    return yield* Effect.die(new Error(`${count} requests never arrived`))
  })

describe("resilientFetch: the promise door", () => {
  it.scopedLive("settings from the environment by prefix: a 503 is retried under one idempotency key, then succeeds", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
      const name = freshName("DOOR").toUpperCase().replace("-", "_")
      const fetch = resilientFetch({
        env: name,
        variables: {
          [`${name}_BASE_URL`]: server.url,
          [`${name}_MODEL`]: "gpt-4o-mini",
          [`${name}_API_KEY`]: canary,
          [`${name}_BASE_DELAY`]: "1 millis",
          [`${name}_MAX_DELAY`]: "5 millis",
          // Unset, as an empty variable is.
          [`${name}_MAX_ATTEMPTS`]: ""
        }
      })
      assert.strictEqual(fetch.target, name.toLowerCase())
      const completion = yield* Effect.promise(() => chat(openAiOn(server.url, fetch)))
      assert.strictEqual(completion.choices[0]!.message.content, FaultServer.replyText)
      const arrivals = yield* server.arrivals
      assert.strictEqual(arrivals.length, 2)
      assertOneIdempotencyKey(arrivals)
      const metrics = fetch.metrics()
      assert.deepStrictEqual(
        [metrics.attempts, metrics.successes, metrics.retries, metrics.retriesSucceeded, metrics.sdkRetries],
        [2, 1, 1, 1, 0]
      )
      assert.strictEqual(metrics.attemptsPerSuccess, 2)
      assert.deepStrictEqual(metrics.failuresByKind, { Overloaded: 1 })
      assert.strictEqual(metrics.delays.count, 1)
      assert.deepStrictEqual(fetch.metrics("another-model").attempts, 0)
      yield* Effect.promise(() => fetch.close())
    }))

  it.scopedLive("the README's example: the SDK and the door read OPENAI_* from process.env; a 503 is retried", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
      const variables = {
        OPENAI_BASE_URL: server.url,
        OPENAI_MODEL: "gpt-4o-mini",
        OPENAI_API_KEY: canary,
        OPENAI_BASE_DELAY: "1 millis",
        OPENAI_MAX_DELAY: "5 millis"
      }
      const before = { ...process.env }
      yield* Effect.acquireRelease(
        Effect.sync(() => Object.assign(process.env, variables)),
        () =>
          Effect.sync(() => {
            for (const key of Object.keys(variables)) {
              if (before[key] === undefined) delete process.env[key]
              else process.env[key] = before[key]
            }
          })
      )
      // The metrics are the process's, and another test may have called a target named openai.
      const earlier = resilientFetch({ env: "OPENAI" }).metrics()
      const answer = yield* Effect.promise(() => haiku())
      assert.strictEqual(answer.text, FaultServer.replyText)
      assert.deepStrictEqual(
        [answer.attempts - earlier.attempts, answer.retries - earlier.retries, answer.budgetExhausted],
        [2, 1, earlier.budgetExhausted]
      )
      const arrivals = yield* server.arrivals
      assertOneIdempotencyKey(arrivals)
      assert.strictEqual(arrivals[0]!.headers["authorization"], `Bearer ${canary}`)
    }))

  it("bad settings throw a TypeError when the door is made, with the message Target.managed fails with", () => {
    const settings = {
      name: "mistral",
      baseUrl: "https://user:secret@api.example.com/v1",
      model: "",
      apiKey: `${canary} with spaces`,
      maxAttempts: 0
    }
    const error = thrown(() => resilientFetch(settings))
    assert.instanceOf(error, TypeError)
    const expected = Target.decode("managed", settings as unknown as Target.Options)
    if (!Either.isLeft(expected)) return assert.fail("Target.decode took the settings")
    assert.strictEqual((error as TypeError).message, Either.leftOf(expected).message)
    assert.include((error as TypeError).message, "target mistral: ")
    for (const setting of ["baseUrl", "model", "apiKey", "maxAttempts"]) {
      assert.include((error as TypeError).message, setting)
    }
    // No secret in the message: neither the key nor the URL's password.
    assert.notInclude((error as TypeError).message, canary)
    assert.notInclude((error as TypeError).message, "secret")
    assert.strictEqual(((error as TypeError).cause as { _tag: string })._tag, "InvalidSettings")
  })

  it("bad variables throw naming each variable, as Target.config fails", () => {
    const error = thrown(() =>
      resilientFetch({
        env: "ACME",
        variables: { ACME_BASE_URL: "ftp://files.example.com", ACME_API_KEY: canary, ACME_MAX_ATTEMPTS: "many" }
      })
    )
    assert.instanceOf(error, TypeError)
    assert.strictEqual(
      (error as TypeError).message,
      "target acme (ACME_*): ACME_BASE_URL must be an http(s) URL, got \"ftp://files.example.com\"; ACME_MODEL is required; " +
        "ACME_MAX_ATTEMPTS must be a number, got \"many\""
    )
    assert.notInclude((error as TypeError).message, canary)
  })

  it("a runtime without process.env is told to pass the variables, and a record of settings is required", () => {
    const env = process.env
    const error = (() => {
      Object.defineProperty(process, "env", { value: undefined, configurable: true, writable: true })
      try {
        return thrown(() => resilientFetch({ env: "ACME" }))
      } finally {
        Object.defineProperty(process, "env", { value: env, configurable: true, writable: true })
      }
    })()
    assert.instanceOf(error, TypeError)
    assert.include((error as TypeError).message, "pass the variables")
    assert.instanceOf(thrown(() => resilientFetch(undefined as never)), TypeError)
    assert.include(
      (thrown(() => resilientFetch({ env: "ACME", kind: "elastic" as never })) as TypeError).message,
      "kind must be \"managed\" or \"self-hosted\""
    )
  })

  it.scopedLive("the provider's retry-after-ms is honoured before the retry", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 429, retryAfterMs: "300" }, { _tag: "Ok" }]
      })
      const fetch = doorAt(server.url)
      yield* Effect.promise(() => chat(openAiOn(server.url, fetch)))
      const [first, second] = yield* server.arrivals
      assert.isAtLeast(second!.at - first!.at, 300)
      assert.strictEqual(fetch.metrics().delays.count, 1)
    }))

  it.scopedLive("an abort during the backoff ends the call at once with the SDK's abort error, and no request follows", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503, retryAfter: "5" } })
      const fetch = doorAt(server.url)
      const controller = new AbortController()
      const call = chat(openAiOn(server.url, fetch), { signal: controller.signal })
      const outcome = call.then(() => "resolved", (error: unknown) => error)
      // The retry is decided, and its 5 s sleep begins.
      yield* until(() => fetch.metrics().retries === 1)
      const abortedAt = Date.now()
      controller.abort()
      const error = yield* Effect.promise(() => outcome)
      assert.instanceOf(error, OpenAI.APIUserAbortError)
      // Long before the 5 s the provider asked for were up.
      assert.isBelow(Date.now() - abortedAt, 4_000)
      yield* Effect.promise(() => fetch.close())
      assert.strictEqual((yield* server.arrivals).length, 1)
    }))

  it.scopedLive("a fetch that throws before any request exists is a defect: rejected as fetch rejects, not retried, not the provider's", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Ok" } })
      let throwing = true
      const fetch = doorAt(server.url, {
        concurrency: 1,
        fetch: (input, init) => {
          if (throwing) throw new TypeError("AbortSignal.any is not a function")
          return globalThis.fetch(input, init)
        }
      })
      const error = yield* rejection(() => fetch(`${server.url}/chat/completions`, { method: "POST", body: "{}" }))
      assert.instanceOf(error, TypeError)
      assert.strictEqual(((error as TypeError).cause as Error).message, "AbortSignal.any is not a function")
      const metrics = fetch.metrics()
      assert.deepStrictEqual([metrics.attempts, metrics.retries, metrics.failuresByKind], [1, 0, {}])
      assert.strictEqual((yield* server.arrivals).length, 0)
      // The gate's one permit was given back: the next call goes through.
      throwing = false
      yield* Effect.promise(() => chat(openAiOn(server.url, fetch)))
      assert.strictEqual((yield* server.arrivals).length, 1)
    }))

  it.scopedLive("without AbortSignal.any (Vercel's edge runtime), the SDK's abort still ends a call in its backoff", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503, retryAfter: "5" } })
      const any = AbortSignal.any
      yield* Effect.acquireRelease(
        Effect.sync(() => Object.defineProperty(AbortSignal, "any", { value: undefined, configurable: true })),
        () => Effect.sync(() => Object.defineProperty(AbortSignal, "any", { value: any, configurable: true }))
      )
      const fetch = doorAt(server.url)
      const controller = new AbortController()
      const outcome = chat(openAiOn(server.url, fetch), { signal: controller.signal }).then(
        () => "resolved",
        (error: unknown) => error
      )
      yield* until(() => fetch.metrics().retries === 1)
      controller.abort()
      assert.instanceOf(yield* Effect.promise(() => outcome), OpenAI.APIUserAbortError)
      yield* Effect.promise(() => fetch.close())
      assert.strictEqual((yield* server.arrivals).length, 1)
    }))

  it.scopedLive("a stream is retried before its first chunk, never after it", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 503 }, { _tag: "StreamBreak", afterChunks: 2 }]
      })
      const fetch = doorAt(server.url)
      const received: Array<string> = []
      const error = yield* rejection(() => streamInto(openAiOn(server.url, fetch), received))
      assert.isAtLeast(received.length, 1, "the first chunks reached the SDK")
      assert.isDefined(error)
      assert.strictEqual((yield* server.arrivals).length, 2)
    }))

  it.scopedLive("close refuses new calls, waits for those in flight, and is the door's async dispose", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Ok", delayMs: 200 } })
      let answered = false
      const fetch = doorAt(server.url, {
        fetch: async (input, init) => {
          const response = await globalThis.fetch(input, init)
          answered = true
          return response
        }
      })
      assert.strictEqual(fetch[Symbol.asyncDispose], fetch.close)
      const inFlight = chat(openAiOn(server.url, fetch))
      yield* untilArrived(server, 1)
      yield* Effect.promise(() => fetch.close())
      assert.isTrue(answered, "close returned before the call in flight was answered")
      yield* Effect.promise(() => inFlight)
      const refused = yield* rejection(() => chat(openAiOn(server.url, fetch)))
      assert.instanceOf(refused, OpenAI.APIConnectionError)
      const refusal = yield* rejection(() => fetch(`${server.url}/chat/completions`, { method: "POST", body: "{}" }))
      assert.instanceOf(refusal, TypeError)
      assert.include(String((refusal as TypeError).cause), "closed")
      assert.strictEqual((yield* server.arrivals).length, 1)
    }))

  it.scopedLive("requests that are not model calls pass through untouched", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503 } })
      const fetch = doorAt(server.url)
      const response = yield* Effect.promise(() => fetch(`${server.url}/models`))
      assert.strictEqual(response.status, 503)
      assert.strictEqual((yield* server.arrivals).length, 1)
      assert.strictEqual(fetch.metrics().attempts, 0)
    }))

  it.scopedLive("two doors of one target and key share its gate", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Ok", delayMs: 100 } })
      const name = freshName("shared")
      const one = doorAt(server.url, { name, concurrency: 1 })
      const other = doorAt(server.url, { name, concurrency: 1 })
      yield* Effect.promise(() => Promise.all([chat(openAiOn(server.url, one)), chat(openAiOn(server.url, other))]))
      const [first, second] = yield* server.arrivals
      // One permit between them: the second call started after the first was answered.
      assert.isAtLeast(second!.at - first!.at, 100)
      assert.strictEqual(one.metrics().successes, 2)
    }))
})
