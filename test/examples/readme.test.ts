import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8")

describe("README", () => {
  it("shows the example that examples/compose-a-policy.ts type-checks", () => {
    const readme = read("README.md")
    const block = /```ts\n(import \{ Deadline[\s\S]*?)```/.exec(readme)?.[1]
    assert.isDefined(block)
    assert.include(read("examples/compose-a-policy.ts"), block!)
  })
})
