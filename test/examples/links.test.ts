import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../", import.meta.url))

const documents = [
  "README.md",
  ...readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
]

/** The targets of a document's links and images, outside fenced code, that point into the repository. */
const relativeLinks = (text: string): ReadonlyArray<string> =>
  [...text.replace(/^```[\s\S]*?^```/gm, "").matchAll(/!?\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)/g)]
    .map((match) => match[1]!)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target) && !target.startsWith("#"))

describe("relative links in README.md and docs/*.md", () => {
  it("are found", () => {
    const counted = documents.map((document) => relativeLinks(readFileSync(join(root, document), "utf8")).length)
    assert.isAtLeast(counted.reduce((sum, count) => sum + count, 0), 20)
  })

  for (const document of documents) {
    it(`${document}: each names a file or folder of the repository`, () => {
      const missing = relativeLinks(readFileSync(join(root, document), "utf8"))
        .map((target) => decodeURIComponent(target.replace(/[#?].*$/, "")))
        .filter((path) => !existsSync(join(dirname(join(root, document)), path)))
      assert.deepStrictEqual(missing, [], `${document} links to what is not there`)
    })
  }
})
