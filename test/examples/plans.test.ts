import { assert, describe, it } from "@effect/vitest"
import { FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"

const folder = new URL("../../examples/plans/", import.meta.url)
const plans = readdirSync(folder).filter((name) => name.endsWith(".json")).sort()

describe("examples/plans", () => {
  it("holds the plans docs/testing.md names", () => {
    assert.deepStrictEqual(plans, ["flaky-network.json", "overloaded.json", "rate-limited.json", "saturated-pool.json"])
  })

  it("docs/testing.md shows overloaded.json as it is", () => {
    const guide = readFileSync(new URL("../../docs/testing.md", import.meta.url), "utf8")
    assert.include(guide, "```json\n" + readFileSync(new URL("overloaded.json", folder), "utf8"))
  })

  for (const name of plans) {
    it.scopedLive(`${name} decodes strictly (an unknown key would fail it) and the server runs it`, () =>
      Effect.gen(function*() {
        const plan = yield* FaultPlan.decodeJson(readFileSync(new URL(name, folder), "utf8"))
        const server = yield* FaultServer.make(plan)
        const response = yield* Effect.promise(() =>
          fetch(`${server.url}/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] })
          }).then(async (answer) => ({ status: answer.status, body: await answer.text() }), () => undefined)
        )
        // Whatever the plan drew for it, the request was served and counted.
        assert.strictEqual((yield* server.arrivals).length, 1, JSON.stringify(response))
      }))
  }
})
