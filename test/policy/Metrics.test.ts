import { assert, describe, it } from "@effect/vitest"
import { Meters } from "@resilient-ai/policy/internal"

describe("Meters.quantile", () => {
  it("is the nearest rank, undefined without values", () => {
    assert.isUndefined(Meters.quantile([], 0.5))
    assert.strictEqual(Meters.quantile([5], 0.99), 5)
    const hundred = Array.from({ length: 100 }, (_, i) => i + 1)
    assert.strictEqual(Meters.quantile(hundred, 0.5), 50)
    assert.strictEqual(Meters.quantile(hundred, 0.99), 99)
    assert.strictEqual(Meters.quantile(hundred, 0.99, { sorted: true }), 99)
  })

  it("sorts a copy of values not said to be sorted, and leaves them as they were", () => {
    const values = [30, 10, 20]
    assert.strictEqual(Meters.quantile(values, 0.5), 20)
    assert.strictEqual(Meters.quantile(values, 1), 30)
    assert.deepStrictEqual(values, [30, 10, 20])
  })
})
