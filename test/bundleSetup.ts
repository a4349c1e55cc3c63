/**
 * Bundles what the tests run as processes of their own (`bundleEntries` in `built.ts`) from the
 * sources, the workspace packages' included (their `@resilient-ai/source` condition), once per
 * vitest run and only when a source changed since the last: esbuild's metafile lists every file a
 * bundle read. Shared code goes to chunks of their own, so the whole takes about as long as one.
 */
import * as esbuild from "esbuild"
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as Path from "node:path"
import { bundleEntries, bundlesDir, root } from "./built.js"

const metaFile = Path.join(bundlesDir, "meta.json")

interface Meta {
  readonly entries: ReadonlyArray<string>
  readonly inputs: ReadonlyArray<string>
}

/** Whether the bundles were made from these entries and no file they read changed since. */
const fresh = (entries: ReadonlyArray<string>): boolean => {
  if (!existsSync(metaFile)) return false
  const madeAt = statSync(metaFile).mtimeMs
  const meta = JSON.parse(readFileSync(metaFile, "utf8")) as Meta
  return meta.entries.join("\n") === entries.join("\n") &&
    meta.inputs.every((input) => {
      const path = Path.resolve(root, input)
      return existsSync(path) && statSync(path).mtimeMs <= madeAt
    })
}

export default async function setup(): Promise<void> {
  const entries = bundleEntries()
  if (fresh(entries)) return
  rmSync(bundlesDir, { recursive: true, force: true })
  const built = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [...entries],
    outdir: bundlesDir,
    outbase: ".",
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node20",
    conditions: ["@resilient-ai/source"],
    outExtension: { ".js": ".mjs" },
    // The CommonJS dependencies (ioredis) `require` Node's modules, which an ES module has no `require` for.
    banner: {
      js:
        `import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);`
    },
    metafile: true,
    logLevel: "warning"
  })
  writeFileSync(metaFile, JSON.stringify({ entries, inputs: Object.keys(built.metafile.inputs) } satisfies Meta))
}
