/**
 * The API key never leaves the request's `Authorization` header: not in a log line, an error
 * message, a serialised failure or a configuration error — even when the provider (or a proxy in
 * front of it) echoes the key back in its answer.
 */
import { addLogger, logScanner, withEnvironment, withMinimumLogLevel } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { ModelClient, Target } from "@resilient-ai/client"
import { RedisConnection } from "@resilient-ai/redis"
import type { FaultPlan } from "@resilient-ai/testing"
import { FaultServer } from "@resilient-ai/testing"
import { Cause, Effect, Exit, Layer, Stream } from "effect"
import { inspect } from "node:util"
import { canary, providerEchoesKey } from "../canary.js"
import { hello, HttpLive, managedAt } from "../client/support.js"

/** Every form a failure takes when someone prints, logs, serialises or reports it. */
const renderings = (failure: unknown): ReadonlyArray<string> => [
  String(failure),
  (failure as { readonly message?: string }).message ?? "",
  JSON.stringify(failure),
  inspect(failure, { depth: Number.POSITIVE_INFINITY }),
  Cause.pretty(Cause.fail(failure), { renderErrorCause: true })
]

// The fault servers below are providers that quote the key back: their answers hold it by design.
providerEchoesKey()

const echoed = `Incorrect API key provided: ${canary}. You can find your API key at https://example.invalid.`

/** Answers that carry the key back: the ways a provider or a proxy could hand it to our failures. */
const echoes: ReadonlyArray<readonly [string, FaultPlan.Fault]> = [
  ["a 401 whose message quotes the key", { _tag: "Status", status: 401, code: "invalid_api_key", message: echoed }],
  ["a Mistral-style 401 quoting the key", { _tag: "Status", status: 401, style: "mistral", message: echoed }],
  ["a 429 quoting the key", { _tag: "Status", status: 429, message: echoed, retryAfterMs: "1" }],
  ["a 400 whose code is the key", { _tag: "Status", status: 400, code: canary }],
  [
    "a proxy page quoting the Authorization header",
    { _tag: "Raw", status: 502, headers: { "content-type": "text/html" }, body: `<pre>Bearer ${canary}</pre>` }
  ],
  [
    "a 200 that is not JSON and quotes the key",
    { _tag: "Raw", headers: { "content-type": "text/plain" }, body: `echo: Bearer ${canary}` }
  ],
  [
    "a 200 whose JSON breaks the schema with the key as a value",
    { _tag: "Raw", headers: { "content-type": "application/json" }, body: JSON.stringify({ id: canary }) }
  ],
  [
    "a 200 whose usage holds the key where a number belongs",
    {
      _tag: "Raw",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        id: "x",
        object: "chat.completion",
        created: 1,
        model: "m",
        choices: [],
        usage: { prompt_tokens: canary, completion_tokens: 1, total_tokens: 1 }
      })
    }
  ]
]

describe("the canary API key", () => {
  for (const [name, fault] of echoes) {
    it.scopedLive(`is in no failure, message or log line after ${name}`, () =>
      Effect.gen(function*() {
        const lines: Array<string> = []
        const server = yield* FaultServer.make({ otherwise: fault })
        const client = yield* ModelClient.make(managedAt(server.url, { maxAttempts: 2 }))
        const chat = yield* Effect.flip(client.chat(hello)).pipe(
          // Every line as the logfmt and JSON loggers would write it, its annotations, spans and cause.
          Effect.provide(addLogger(logScanner((_where, text) => lines.push(text)))),
          withMinimumLogLevel("Debug")
        )
        const texts = [
          ...renderings(chat),
          ...chat.attempts.flatMap((attempt) => renderings(attempt)),
          ...lines
        ]
        // The key was sent, so the provider could echo it: the check is not vacuous.
        const arrivals = yield* server.arrivals
        assert.isAtLeast(arrivals.length, 1)
        assert.strictEqual(arrivals[0]!.headers["authorization"], `Bearer ${canary}`)
        assert.isAtLeast(lines.length, 2)
        for (const text of texts) assert.notInclude(text, canary)
      }).pipe(Effect.provide(HttpLive)))
  }

  it.scopedLive("is in no failure of an embeddings call or a stream that the provider answered with it", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: echoes[0]![1] })
      const client = yield* ModelClient.make(managedAt(server.url, { maxAttempts: 1 }))
      const embeddings = yield* Effect.flip(client.embeddings({ input: "hello" }))
      const stream = yield* Effect.flip(Stream.runDrain(client.chatStream(hello)))
      for (const text of [...renderings(embeddings), ...renderings(stream)]) assert.notInclude(text, canary)
      assert.strictEqual((yield* server.arrivals).length, 2)
    }).pipe(Effect.provide(HttpLive)))

  it.effect("is in no configuration error, whatever else is wrong", () =>
    Effect.gen(function*() {
      const failures: Array<unknown> = []
      const environments: ReadonlyArray<Record<string, string>> = [
        { MISTRAL_API_KEY: canary, MISTRAL_MODEL: "m" },
        { MISTRAL_API_KEY: canary, MISTRAL_MODEL: "m", MISTRAL_BASE_URL: `ftp://${canary}@host` },
        {
          MISTRAL_API_KEY: canary,
          MISTRAL_MODEL: "m",
          MISTRAL_BASE_URL: "https://x.invalid",
          MISTRAL_MAX_ATTEMPTS: "0"
        }
      ]
      for (const environment of environments) {
        const exit = yield* Effect.exit(
          Layer.build(ModelClient.layerConfig(Target.managedConfig("MISTRAL"))).pipe(
            Effect.scoped,
            Effect.provide(HttpLive),
            withEnvironment(environment)
          )
        )
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) failures.push(Cause.squash(exit.cause))
      }
      for (const url of [`redis://:${canary}@`, `http://:${canary}@127.0.0.1:1`, `redis://user:${canary}@host:99999`]) {
        const exit = yield* Effect.exit(
          Layer.build(RedisConnection.layerConfig()).pipe(
            Effect.scoped,
            withEnvironment({ REDIS_URL: url })
          )
        )
        assert.isTrue(Exit.isFailure(exit), url)
        if (Exit.isFailure(exit)) failures.push(Cause.squash(exit.cause))
      }
      assert.strictEqual(failures.length, 6)
      for (const failure of failures) {
        for (const text of renderings(failure)) assert.notInclude(text, canary)
      }
    }))
})
