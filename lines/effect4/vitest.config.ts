import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import { defineConfig, type Plugin } from "vitest/config"
import { suiteConfig } from "../../vitest.suite.ts"

/**
 * The packages whose Effect 4 versions this line installs. An import of one of them resolves from
 * here, wherever the importing file lives: the packages' sources and the tests sit above the root's
 * install, which holds the Effect 3 line.
 */
const lineOwned = /^(effect|@effect\/(platform-node|opentelemetry|vitest)|vitest)(\/.*)?$/
const here = createRequire(import.meta.url).resolve("./package.json")

const resolveFromLine: Plugin = {
  name: "resilient-ai:effect4-line",
  enforce: "pre",
  resolveId(source, _importer, options) {
    return lineOwned.test(source) ? this.resolve(source, here, { ...options, skipSelf: true }) : null
  }
}

const suite = suiteConfig("effect4")

/**
 * The suite on the Effect 4 line: the same test files, with Effect 4, its packages and vitest 5.
 * The packages come over one at a time (docs/effect-lines.md); until all have, this runs the tests
 * of those that have, and leaves out the files that load a package that has not.
 */
export default defineConfig({
  root: fileURLToPath(new URL("../../", import.meta.url)),
  plugins: [resolveFromLine],
  ...suite,
  test: {
    ...suite.test,
    include: ["test/policy/**/*.test.ts"],
    // Both load @resilient-ai/client, which is not on Effect 4 yet.
    exclude: ["test/policy/Properties.test.ts", "test/policy/types.test.ts"],
    // No test that comes over yet runs a bundled process (test/bundleSetup.ts bundles from the Effect 3 install).
    globalSetup: ["test/redis/globalSetup.ts"]
  }
})
