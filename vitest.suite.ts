import { fileURLToPath } from "node:url"

const packagesDir = fileURLToPath(new URL("./packages/", import.meta.url))

// The SDKs' current majors (sdks/) need Node 22; on Node 20 their tests are left out, and this says so.
const nodeMajor = Number(process.versions.node.split(".")[0])
const sdkTests = nodeMajor >= 22 ? ["sdks/test/**/*.test.ts"] : []
if (sdkTests.length === 0 && !process.env["VITEST_WORKER_ID"]) {
  process.stderr.write(
    `Node ${process.versions.node}: the current SDK majors' tests (sdks/test) need Node 22 or later and are not run\n`
  )
}

/** Which Effect line a run of the suite is for (docs/effect-lines.md). */
export type Line = "effect3" | "effect4"

/**
 * The suite's settings on `line`: tests run against the packages' sources, so no build is needed
 * first. Plain data, no import of vitest: each line's config hands it to its own vitest.
 */
export const suiteConfig = (line: Line) => ({
  resolve: {
    alias: [
      { find: /^@resilient-ai\/([^/]+)$/, replacement: `${packagesDir}$1/src/index.ts` },
      // The internal entry a package offers its siblings and the tests (`@resilient-ai/policy/internal`).
      { find: /^@resilient-ai\/([^/]+)\/internal$/, replacement: `${packagesDir}$1/src/internal/index.ts` },
      // One internal module, as a sibling package imports it so that a bundler keeps only what it
      // uses (`@resilient-ai/policy/internal/attempt`); the policy's seam on this line.
      {
        find: /^@resilient-ai\/policy\/internal\/line$/,
        replacement: `${packagesDir}policy/src/internal/line/${line}.ts`
      },
      { find: /^@resilient-ai\/([^/]+)\/internal\/(\w+)$/, replacement: `${packagesDir}$1/src/internal/$2.ts` },
      // A public module, as the exports maps name them (`@resilient-ai/policy/Resilient`,
      // `@resilient-ai/fetch/redis`); never internal/.
      { find: /^@resilient-ai\/([^/]+)\/(?!internal$)(\w+)$/, replacement: `${packagesDir}$1/src/$2.ts` },
      // The policy package's seam, on this line (docs/effect-lines.md).
      { find: /^#effect-line$/, replacement: `${packagesDir}policy/src/internal/line/${line}.ts` },
      // The client's seam (its HTTP client, response schemas, streams), on this line.
      { find: /^#client-line$/, replacement: `${packagesDir}client/src/internal/line/${line}.ts` },
      // The testing package's seam (its wait on a callback, the fault plan's schemas), on this line.
      { find: /^#testing-line$/, replacement: `${packagesDir}testing/src/internal/line/${line}.ts` },
      // The otel package's seam (`@effect/opentelemetry`'s modules, 0.x on Effect 3, 4.x on Effect 4), on this line.
      { find: /^#otel-line$/, replacement: `${packagesDir}otel/src/internal/line/${line}.ts` },
      // The command's seam (its command-line library, Node services, log levels, console), on this line.
      { find: /^#cli-line$/, replacement: `${packagesDir}cli/src/internal/line/${line}.ts` },
      // The tests' side of the seam, on this line.
      { find: /^#test-line$/, replacement: fileURLToPath(new URL(`./test/line/${line}.ts`, import.meta.url)) }
    ]
  },
  test: {
    include: ["test/**/*.test.ts", ...sdkTests],
    // Finds or starts the Redis the Redis tests share, and says so when there is none; bundles what
    // tests run as processes of their own (fleet members, examples).
    globalSetup: ["test/redis/globalSetup.ts", "test/bundleSetup.ts"],
    // Fails a test file whose output or log lines contain the canary API key, or that leaves a
    // promise rejected with nobody listening.
    setupFiles: ["test/setup.ts"],
    // A hang guard, not a speed limit: a test bounds what the code promises, measured in the same
    // run, never how fast the machine is. With other work loading this machine to 15–20, property
    // tests that take 3 s on a quiet one took over 20 s.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // A worker runs file after file in one process rather than a process per file: a fresh one
    // loads vitest, Effect and the packages again, about 2 CPU-seconds a file, a third of the suite
    // on two cores. What a file leaves in a process (Effect's metric registry, a support module's
    // counter of target names) no other file reads; `test/setup.ts` keeps its checks per file.
    isolate: false,
    // Many tests wait on loopback I/O, timers and child processes rather than the CPU: with one
    // worker per core the two cores sat idle 40% of the run. Three cut the suite by a third.
    // As many from the start: tinypool ends a worker it counts idle above the minimum, and with
    // `isolate: false` that failed the run ("Terminating worker thread").
    maxWorkers: 3,
    minWorkers: 3
  }
})
