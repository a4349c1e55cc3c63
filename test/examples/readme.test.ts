import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8")

describe("README", () => {
  it("shows only code that an example in examples/ type-checks, or that moves.test.ts runs", () => {
    const examples = readdirSync(new URL("../../examples/", import.meta.url))
      .filter((name) => name.endsWith(".ts"))
      .map((name) => read(`examples/${name}`))
      .concat(read("test/examples/moves.test.ts"))
    const blocks = [...read("README.md").matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!)
    assert.isAtLeast(blocks.length, 2)
    for (const block of blocks) {
      assert.isTrue(examples.some((example) => example.includes(block)), `not in any example:\n${block}`)
    }
  })
})
