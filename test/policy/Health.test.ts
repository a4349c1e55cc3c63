/**
 * The diagnosis arithmetic (`Diagnoses.Diagnoser`), with time passed in: which probes and call totals
 * make each diagnosis, the window the calls are read over, and the settings' checks.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Health } from "@resilient-ai/policy"
import { Diagnoses, Either } from "@resilient-ai/policy/internal"

const make = (options: Health.Options = {}) => new Diagnoses.Diagnoser(Either.getOrThrow(Diagnoses.settings(options)))
const up = { up: true, millis: 20 }
const down = { up: false, millis: 5_000 }

describe("Diagnoses.Diagnoser", () => {
  it("two probes down in a row make the provider degraded; two up bring it back, with the ramp", () => {
    const diagnoser = make()
    const calls = { attempts: 0, troubles: 0 }
    const steps = [up, down, up, down, down, down, up, up, up].map((probe, index) =>
      diagnoser.observe(index * 10_000, probe, calls)
    )
    assert.deepStrictEqual(steps.map((step) => step.diagnosis), [
      "healthy",
      "healthy",
      "healthy",
      "healthy",
      "provider-degraded",
      "provider-degraded",
      "provider-degraded",
      "healthy",
      "healthy"
    ])
    assert.deepStrictEqual(steps.map((step) => step.providerBack), [
      false,
      false,
      false,
      false,
      false,
      false,
      false,
      true,
      false
    ])
    assert.deepStrictEqual(steps.map((step) => step.changedFrom), [
      undefined,
      undefined,
      undefined,
      undefined,
      "healthy",
      undefined,
      undefined,
      "provider-degraded",
      undefined
    ])
  })

  it("the probe fine while a tenth of the calls are in trouble (at least 5): self-inflicted; below either, healthy", () => {
    const diagnoser = make()
    assert.strictEqual(diagnoser.observe(0, up, { attempts: 0, troubles: 0 }).diagnosis, "healthy")
    // 4 troubles in 10 calls: many, but too few to say.
    assert.strictEqual(diagnoser.observe(10_000, up, { attempts: 10, troubles: 4 }).diagnosis, "healthy")
    // 9 in 100: under a tenth.
    assert.strictEqual(diagnoser.observe(20_000, up, { attempts: 100, troubles: 9 }).diagnosis, "healthy")
    const step = diagnoser.observe(25_000, up, { attempts: 110, troubles: 12 })
    assert.deepStrictEqual([step.diagnosis, step.changedFrom], ["self-inflicted", "healthy"])
    assert.deepStrictEqual(diagnoser.trouble(), { ratio: 12 / 110, troubles: 12 })
  })

  it("sheds and budget refusals count with no attempt: all troubles is a ratio of 1", () => {
    const diagnoser = make()
    diagnoser.observe(0, up, { attempts: 50, troubles: 0 })
    assert.strictEqual(diagnoser.observe(10_000, up, { attempts: 50, troubles: 20 }).diagnosis, "self-inflicted")
    assert.deepStrictEqual(diagnoser.trouble(), { ratio: 1, troubles: 20 })
  })

  it("reads the calls over the window: troubles older than it no longer count", () => {
    const diagnoser = make({ window: "30 seconds" })
    diagnoser.observe(0, up, { attempts: 0, troubles: 0 })
    assert.strictEqual(diagnoser.observe(10_000, up, { attempts: 100, troubles: 50 }).diagnosis, "self-inflicted")
    // Still within 30 s of the troubles.
    assert.strictEqual(diagnoser.observe(30_000, up, { attempts: 200, troubles: 50 }).diagnosis, "self-inflicted")
    assert.strictEqual(diagnoser.observe(40_000, up, { attempts: 300, troubles: 50 }).diagnosis, "healthy")
  })

  it("an outage's failed calls do not make the provider's return self-inflicted", () => {
    const diagnoser = make()
    diagnoser.observe(0, down, { attempts: 0, troubles: 0 })
    assert.strictEqual(diagnoser.observe(10_000, down, { attempts: 100, troubles: 100 }).diagnosis, "provider-degraded")
    diagnoser.observe(20_000, up, { attempts: 150, troubles: 140 })
    assert.strictEqual(diagnoser.observe(30_000, up, { attempts: 200, troubles: 140 }).diagnosis, "healthy")
    assert.strictEqual(diagnoser.observe(40_000, up, { attempts: 300, troubles: 141 }).diagnosis, "healthy")
  })

  it("self-inflicted stands only while the probe answers: an outage's first failed calls are not called ours", () => {
    const diagnoser = make()
    diagnoser.observe(0, up, { attempts: 0, troubles: 0 })
    assert.strictEqual(diagnoser.observe(10_000, down, { attempts: 100, troubles: 60 }).diagnosis, "healthy")
    assert.isFalse(diagnoser.probeUp)
    assert.strictEqual(diagnoser.observe(20_000, down, { attempts: 200, troubles: 160 }).diagnosis, "provider-degraded")
    // Once self-inflicted, a single probe down is no longer proof the provider is fine.
    const ours = make()
    ours.observe(0, up, { attempts: 0, troubles: 0 })
    assert.strictEqual(ours.observe(10_000, up, { attempts: 100, troubles: 60 }).diagnosis, "self-inflicted")
    assert.strictEqual(ours.observe(20_000, down, { attempts: 200, troubles: 60 }).diagnosis, "healthy")
    assert.strictEqual(ours.observe(30_000, up, { attempts: 300, troubles: 160 }).diagnosis, "self-inflicted")
  })

  it("bad settings are one InvalidSettings naming each", () => {
    const result = Diagnoses.settings({ downAfter: 0, troubleRatio: 2, window: "-1 seconds" })
    assert.isTrue(Either.isLeft(result))
    const problems = Either.isLeft(result) ? Either.leftOf(result).problems.join("; ") : ""
    for (const name of ["downAfter", "troubleRatio", "window"]) assert.include(problems, name)
  })
})
