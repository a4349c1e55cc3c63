import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

const packagesDir = fileURLToPath(new URL("./packages/", import.meta.url))

// The SDKs' current majors (sdks/) need Node 22; on Node 20 their tests are left out, and this says so.
const nodeMajor = Number(process.versions.node.split(".")[0])
const sdkTests = nodeMajor >= 22 ? ["sdks/test/**/*.test.ts"] : []
if (sdkTests.length === 0 && !process.env["VITEST_WORKER_ID"]) {
  process.stderr.write(
    `Node ${process.versions.node}: the current SDK majors' tests (sdks/test) need Node 22 or later and are not run\n`
  )
}

/** Tests run against the packages' sources, so no build is needed first. */
export default defineConfig({
  resolve: {
    alias: [
      { find: /^@resilient-ai\/([^/]+)$/, replacement: `${packagesDir}$1/src/index.ts` },
      // The internal entry a package offers its siblings and the tests (`@resilient-ai/policy/internal`).
      { find: /^@resilient-ai\/([^/]+)\/internal$/, replacement: `${packagesDir}$1/src/internal/index.ts` },
      // A public module, as the exports maps name them (`@resilient-ai/policy/Resilient`); never internal/.
      { find: /^@resilient-ai\/([^/]+)\/([A-Z]\w*)$/, replacement: `${packagesDir}$1/src/$2.ts` }
    ]
  },
  test: {
    include: ["test/**/*.test.ts", ...sdkTests],
    // Finds or starts the Redis the Redis tests share, and says so when there is none.
    globalSetup: ["test/redis/globalSetup.ts"],
    // Fails a test file whose output or log lines contain the canary API key, or that leaves a
    // promise rejected with nobody listening.
    setupFiles: ["test/setup.ts"],
    testTimeout: 20_000,
    // Many tests wait on loopback I/O, timers and child processes rather than the CPU: with one
    // worker per core the two cores sat idle 40% of the run. Three cut the suite by a third.
    maxWorkers: 3,
    minWorkers: 1
  }
})
