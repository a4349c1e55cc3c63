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

/** `@effect/vitest` as the tests import it on this line: version 4 with Effect 3's names for scoped tests. */
const vitestShim = fileURLToPath(new URL("../../test/line/vitest4.ts", import.meta.url))

const resolveFromLine: Plugin = {
  name: "resilient-ai:effect4-line",
  enforce: "pre",
  resolveId(source, importer, options) {
    if (source === "@effect/vitest" && importer !== vitestShim) return vitestShim
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
    include: [
      "test/policy/**/*.test.ts",
      "test/client/**/*.test.ts",
      "test/fetch/**/*.test.ts",
      "sdks/test/**/*.test.ts",
      "test/examples/**/*.test.ts",
      "test/config/**/*.test.ts",
      "test/secrets/**/*.test.ts",
      "test/packages/**/*.test.ts",
      "test/testing/**/*.test.ts",
      "test/storm/**/*.test.ts",
      "test/redis/**/*.test.ts",
      "test/otel/**/*.test.ts",
      "test/cli/**/*.test.ts"
    ],
    // @effect/ai 0.37 is built on Effect 3's platform and has no release for Effect 4 yet: the Effect 4
    // adapter is tested under an HttpClient used as @effect/ai uses one (test/client/ResilientHttpClient.test.ts).
    exclude: ["sdks/test/effect-ai.test.ts"],
    // Bundles for Effect 4 what the tests that have come over run as processes of their own
    // (`bundleEntries` in test/built.ts).
    globalSetup: ["test/redis/globalSetup.ts", "lines/effect4/bundleSetup.ts"]
  }
})
