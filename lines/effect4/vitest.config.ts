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

/** The whole suite on the Effect 4 line: the same test files, with Effect 4, its packages and vitest 5. */
export default defineConfig({
  root: fileURLToPath(new URL("../../", import.meta.url)),
  plugins: [resolveFromLine],
  ...suiteConfig("effect4")
})
