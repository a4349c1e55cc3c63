import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

const packagesDir = fileURLToPath(new URL("./packages/", import.meta.url))

/** Tests run against the packages' sources, so no build is needed first. */
export default defineConfig({
  resolve: {
    alias: [
      { find: /^@resilient-ai\/([^/]+)$/, replacement: `${packagesDir}$1/src/index.ts` },
      { find: /^@resilient-ai\/([^/]+)\/(.+)$/, replacement: `${packagesDir}$1/src/$2.ts` }
    ]
  },
  test: {
    include: ["test/**/*.test.ts"],
    // Finds or starts the Redis the Redis tests share, and says so when there is none.
    globalSetup: ["test/redis/globalSetup.ts"],
    testTimeout: 20_000
  }
})
