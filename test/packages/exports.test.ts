import { assert, describe, it } from "@effect/vitest"
import { createRequire } from "node:module"
import { hasInternalEntry, packages, publicModules, read } from "./support.js"

// Node's own resolution, as an application that installed the packages gets it (vitest's aliases
// map the names to sources and would not see an exports map at all).
const require = createRequire(import.meta.url)

const resolves = (specifier: string): string => {
  try {
    require.resolve(specifier)
    return "resolved"
  } catch (error) {
    return (error as { code?: string }).code ?? String(error)
  }
}

describe("the packages' exports maps", () => {
  for (const name of packages) {
    it(`@resilient-ai/${name} exports its index and each public module, and nothing else`, () => {
      const exportsMap = JSON.parse(read(`${name}/package.json`)).exports as Record<string, unknown>
      // The internal entry its siblings reach the engine through, marked as no part of the surface;
      // for the policy and the client, each internal module on its own too, so that a bundle of a
      // sibling (the promise door) holds only what it uses, and the policy's seam on each line.
      const internal = !hasInternalEntry(name)
        ? []
        : name === "policy"
        ? ["./internal", "./internal/line", "./internal/*"]
        : name === "client"
        ? ["./internal", "./internal/*"]
        : ["./internal"]
      assert.deepStrictEqual(
        Object.keys(exportsMap),
        [".", ...publicModules(name).map((module) => `./${module}`), ...internal]
      )
      assert.strictEqual(resolves(`@resilient-ai/${name}`), "resolved")
      for (const module of publicModules(name)) {
        assert.strictEqual(resolves(`@resilient-ai/${name}/${module}`), "resolved", module)
      }
      assert.strictEqual(resolves(`@resilient-ai/${name}/index`), "ERR_PACKAGE_PATH_NOT_EXPORTED")
    })
  }

  it("no internal module can be imported but from under internal/, and only the policy's and the client's", () => {
    for (const specifier of ["@resilient-ai/policy/internal/timer", "@resilient-ai/client/internal/secrets"]) {
      assert.strictEqual(resolves(specifier), "resolved", specifier)
    }
    const internal = [
      "@resilient-ai/policy/timer",
      "@resilient-ai/client/secrets",
      "@resilient-ai/redis/internal/script",
      "@resilient-ai/cli/internal/flags",
      "@resilient-ai/cli/internal/colour",
      "@resilient-ai/testing/internal/faultServerBody",
      "@resilient-ai/storm/internal/series",
      "@resilient-ai/otel/internal/producer",
      // Internal helpers that used to be public modules.
      "@resilient-ai/cli/Flags",
      "@resilient-ai/cli/Progress",
      "@resilient-ai/testing/FaultServerBody",
      "@resilient-ai/policy/RetryHint",
      "@resilient-ai/client/Transport",
      "@resilient-ai/client/ProviderError",
      "@resilient-ai/redis/RedisBudget",
      "@resilient-ai/redis/RedisGate",
      "@resilient-ai/redis/RedisRateLimiter"
    ]
    for (const specifier of internal) {
      assert.strictEqual(resolves(specifier), "ERR_PACKAGE_PATH_NOT_EXPORTED", specifier)
    }
  })
})
