/**
 * Bundles what the tests run as processes of their own (`bundleEntries` in `built.ts`) from the
 * sources, the workspace packages' included (their `@resilient-ai/source` condition), once per
 * vitest run and only when a source changed since the last: esbuild's metafile lists every file a
 * bundle read. Shared code goes to chunks of their own, so the whole takes about as long as one.
 * This bundles for Effect 3; `lines/effect4/bundleSetup.ts` bundles for Effect 4.
 */
import * as esbuild from "esbuild"
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
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

/** The Effect 4 install, beside lines/effect4/vitest.config.ts. */
const effect4Dir = Path.join(root, "lines", "effect4")

/**
 * On Effect 4, what lines/effect4/vitest.config.ts resolves from the Effect 4 install, wherever
 * the importing file lives, esbuild resolves from there too. A module that install does not have
 * resolves as before, from the root's, as it does under that config.
 */
const fromEffect4: esbuild.Plugin = {
  name: "resilient-ai:effect4-line",
  setup(build) {
    build.onResolve({ filter: /^(effect|@effect\/(platform-node|opentelemetry))(\/.*)?$/ }, async (args) => {
      if (args.pluginData === effect4Dir) return undefined
      const found = await build.resolve(args.path, { kind: args.kind, resolveDir: effect4Dir, pluginData: effect4Dir })
      return found.errors.length === 0 ? found : undefined
    })
  }
}

/**
 * `@effect/platform-node` 4.1's `Undici.js` is `export * from "undici"`, a CommonJS module: in a
 * bundle split into chunks, esbuild leaves the names of such a re-export off the namespace that
 * `import("./Undici.js")` resolves to (`_.Agent is not a constructor` in a fleet member). The
 * module is written out here with undici's names, read from undici itself.
 */
const undiciByName: esbuild.Plugin = {
  name: "resilient-ai:undici-by-name",
  setup(build) {
    build.onLoad({ filter: /@effect[/\\]platform-node[/\\]dist[/\\]Undici\.js$/ }, (args) => {
      const undici = createRequire(args.path)("undici") as Record<string, unknown>
      const names = Object.keys(undici).filter((name) => name !== "default" && /^[A-Za-z_$][\w$]*$/.test(name))
      return {
        contents: `import undici from "undici"\nexport default undici\nexport const { ${names.join(", ")} } = undici\n`,
        loader: "js",
        resolveDir: Path.dirname(args.path)
      }
    })
  }
}

/** Bundles `line`'s entries into its folder, unless they are fresh. */
export const bundle = async (line: Line): Promise<void> => {
  const entries = bundleEntries(line)
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
    // On Effect 4, the seam's Effect 4 side (`#effect-line`, `#client-line`).
    conditions: line === "effect4" ? ["@resilient-ai/effect4", "@resilient-ai/source"] : ["@resilient-ai/source"],
    plugins: line === "effect4" ? [fromEffect4, undiciByName] : [],
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

export default function setup(): Promise<void> {
  return bundle("effect3")
}
