/**
 * Each seam's two sides offer the same names (docs/effect-lines.md): a name added to one line's side
 * and forgotten in the other's would compile on one line only, or fail at run time on the other.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../", import.meta.url))

/** Every seam: a folder with an `effect3.ts` and an `effect4.ts`. */
const seams = [
  ...readdirSync(`${root}packages`).map((name) => `packages/${name}/src/internal/line`),
  "test/line",
  "examples/line"
].filter((dir) => existsSync(`${root}${dir}/effect3.ts`))

/** The names a module exports, read from its text: declarations, namespaces and lists. */
const exportedNames = (path: string): ReadonlyArray<string> => {
  const text = readFileSync(`${root}${path}`, "utf8")
  const names = new Set<string>()
  for (
    const [, name] of text.matchAll(
      /^export (?:declare )?(?:abstract )?(?:const|let|function|class|interface|type|namespace) (\w+)/gm
    )
  ) {
    names.add(name!)
  }
  for (const [, name] of text.matchAll(/^export \* as (\w+) from/gm)) names.add(name!)
  for (const [, list] of text.matchAll(/^export (?:type )?\{([^}]*)\}/gm)) {
    for (const item of list!.split(",")) {
      const name = item.trim().replace(/^type /, "").split(/\s+as\s+/).pop()
      if (name !== undefined && name !== "") names.add(name)
    }
  }
  return [...names].sort()
}

describe("the seams", () => {
  it("are there: policy's, the client's, the testing package's, otel's, the tests' and the examples'", () => {
    assert.includeMembers(seams, [
      "packages/policy/src/internal/line",
      "packages/client/src/internal/line",
      "packages/testing/src/internal/line",
      "packages/otel/src/internal/line",
      "test/line",
      "examples/line"
    ])
  })

  for (const seam of seams) {
    it(`${seam}: both sides export the same names`, () => {
      const three = exportedNames(`${seam}/effect3.ts`)
      const four = exportedNames(`${seam}/effect4.ts`)
      assert.isAbove(three.length, 0)
      assert.deepStrictEqual(
        {
          onlyOnEffect3: three.filter((name) => !four.includes(name)),
          onlyOnEffect4: four.filter((name) => !three.includes(name))
        },
        { onlyOnEffect3: [], onlyOnEffect4: [] }
      )
    })
  }
})
