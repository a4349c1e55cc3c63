/**
 * The provider's own id of each answer (OpenAI's and Mistral's `x-request-id`, Anthropic's
 * `request-id`) is on the attempt's log line, where an operator looks for what to quote to support.
 */
import { withoutDefaultLogger } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { ModelClient, ResilientFetch } from "@resilient-ai/client"
import { Coordination } from "@resilient-ai/policy"
import { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import { captureLogs } from "../policy/support.js"
import { hello, HttpLive, managedAt } from "./support.js"

const anthropicOverloaded = JSON.stringify({
  type: "error",
  error: { type: "overloaded_error", message: "Overloaded" }
})

describe("the provider's request id", () => {
  it.scopedLive("a ModelClient attempt's log line names the answer's x-request-id", () =>
    Effect.gen(function*() {
      const logs = yield* captureLogs
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Status", status: 503, headers: { "x-request-id": "req_openai_1" } }, { _tag: "Ok" }]
      })
      const client = yield* ModelClient.make(managedAt(server.url))
      yield* client.chat(hello, { timeout: "5 seconds" }).pipe(
        Effect.provide(withoutDefaultLogger),
        Effect.provide(logs.layer)
      )
      const retried = (yield* logs.lines).filter((line) => line.message === "attempt failed, retrying")
      assert.deepStrictEqual(retried.map((line) => line.annotations.providerRequestId), ["req_openai_1"])
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("under an SDK, Anthropic's request-id names its 529 overloaded_error, which is retried", () =>
    Effect.gen(function*() {
      const logs = yield* captureLogs
      const server = yield* FaultServer.make({
        steps: [
          {
            _tag: "Raw",
            status: 529,
            headers: { "content-type": "application/json", "request-id": "req_ant_1" },
            body: anthropicOverloaded
          },
          { _tag: "Ok" }
        ]
      })
      // The fetch runs its calls in the context it was made in: the logs are captured there.
      const fetch = yield* ResilientFetch.make(managedAt(server.url)).pipe(Effect.provide(logs.layer))
      const response = yield* Effect.promise(() =>
        fetch(`${server.url}/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "test-model", messages: [] })
        })
      )
      assert.strictEqual(response.status, 200)
      const retried = (yield* logs.lines).filter((line) => line.message === "attempt failed, retrying")
      assert.deepStrictEqual(retried.map((line) => [line.annotations.failure, line.annotations.providerRequestId]), [
        ["Overloaded", "req_ant_1"]
      ])
    }).pipe(Effect.provide(Coordination.layerMemory), Effect.provide(withoutDefaultLogger)))
})
