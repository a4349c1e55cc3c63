/**
 * Bundles what the tests run as processes of their own (`bundleEntries` in `built.ts`) from the
 * sources, the workspace packages' included (their `@resilient-ai/source` condition), once per
 * vitest run and only when a source changed since the last: esbuild's metafile lists every file a
 * bundle read. Shared code goes to chunks of their own, so the whole takes about as long as one.
 * This bundles for Effect 3; `lines/effect4/bundleSetup.ts` bundles for Effect 4.
 */
import * as esbuild from "esbuild"
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as Path from "node:path"
import { bundleOptionsFor } from "../scripts/bundleLine.js"
import { bundleEntries, bundlesDir, type Line, root } from "./built.js"

interface Meta {
  readonly entries: ReadonlyArray<string>
  readonly inputs: ReadonlyArray<string>
}

/** Whether the bundles in `metaFile`'s folder were made from these entries and no file they read changed since. */
const fresh = (metaFile: string, entries: ReadonlyArray<string>): boolean => {
  if (!existsSync(metaFile)) return false
  const madeAt = statSync(metaFile).mtimeMs
  const meta = JSON.parse(readFileSync(metaFile, "utf8")) as Meta
  return meta.entries.join("\n") === entries.join("\n") &&
    meta.inputs.every((input) => {
      const path = Path.resolve(root, input)
      return existsSync(path) && statSync(path).mtimeMs <= madeAt
    })
}

/** Bundles `line`'s entries into its folder, unless they are fresh. */
export const bundle = async (line: Line): Promise<void> => {
  const entries = bundleEntries
  const outdir = bundlesDir(line)
  const metaFile = Path.join(outdir, "meta.json")
  if (fresh(metaFile, entries)) return
  rmSync(outdir, { recursive: true, force: true })
  const built = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [...entries],
    outdir,
    outbase: ".",
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node20",
    ...bundleOptionsFor(line),
    outExtension: { ".js": ".mjs" },
    metafile: true,
    logLevel: "warning"
  })
  writeFileSync(metaFile, JSON.stringify({ entries, inputs: Object.keys(built.metafile.inputs) } satisfies Meta))
}

export default function setup(): Promise<void> {
  return bundle("effect3")
}
