import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8")

const typeScriptIn = (folder: string) =>
  readdirSync(new URL(`../../${folder}/`, import.meta.url))
    .filter((name) => name.endsWith(".ts"))
    .map((name) => read(`${folder}/${name}`))

/** Whole lines without their indentation: a snippet may be lifted from inside a function. */
const unindented = (code: string) => `\n${code.trimEnd().split("\n").map((line) => line.trim()).join("\n")}\n`

describe("README", () => {
  it("shows only code that an example (examples/, sdks/examples/) type-checks, or that moves.test.ts runs", () => {
    const examples = [
      ...typeScriptIn("examples"),
      ...typeScriptIn("sdks/examples"),
      read("test/examples/moves.test.ts")
    ].map(unindented)
    const blocks = [...read("README.md").matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => unindented(match[1]!))
    assert.isAtLeast(blocks.length, 2)
    for (const block of blocks) {
      assert.isTrue(examples.some((example) => example.includes(block)), `not in any example:\n${block}`)
    }
  })
})
