import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8")

const typeScriptIn = (folder: string) =>
  readdirSync(new URL(`../../${folder}/`, import.meta.url))
    .filter((name) => name.endsWith(".ts"))
    .map((name) => read(`${folder}/${name}`))

/** Whole lines without their indentation: a snippet may be lifted from inside a function. */
const unindented = (code: string) => `\n${code.trimEnd().split("\n").map((line) => line.trim()).join("\n")}\n`

const examples = () =>
  [...typeScriptIn("examples"), ...typeScriptIn("sdks/examples"), read("test/examples/moves.test.ts")].map(unindented)

const blocksOf = (path: string) =>
  [...read(path).matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => unindented(match[1]!))

/** Every guide in docs/, read from the folder so that a new one is held to the rule too. */
const guides = readdirSync(new URL("../../docs/", import.meta.url))
  .filter((name) => name.endsWith(".md"))
  .sort()
  .map((name) => `docs/${name}`)

describe("README", () => {
  it("shows only code that an example (examples/, sdks/examples/) type-checks, or that moves.test.ts runs", () => {
    const known = examples()
    const blocks = blocksOf("README.md")
    assert.isAtLeast(blocks.length, 2)
    for (const block of blocks) {
      assert.isTrue(known.some((example) => example.includes(block)), `not in any example:\n${block}`)
    }
  })
})

describe("the guides in docs/", () => {
  it("are there", () => {
    assert.includeMembers(guides, ["docs/fleet.md", "docs/policy.md", "docs/storms.md", "docs/testing.md"])
  })

  for (const guide of guides) {
    it(`${guide} shows only code that an example type-checks, or that moves.test.ts runs`, () => {
      const known = examples()
      for (const block of blocksOf(guide)) {
        assert.isTrue(known.some((example) => example.includes(block)), `${guide}: not in any example:\n${block}`)
      }
    })
  }
})
