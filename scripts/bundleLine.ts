/**
 * How esbuild bundles our sources for one Effect line (docs/effect-lines.md): the conditions that
 * pick the packages' sources and the line's seams, and on Effect 4 the resolution of Effect's
 * packages from the line's install. The tests' processes (test/bundleSetup.ts) and the bench
 * (bench/lines.ts) are bundled with it, so both lines are built the same way.
 */
import type * as esbuild from "esbuild"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

/** Which Effect line a bundle is for. */
export type Line = "effect3" | "effect4"

const root = fileURLToPath(new URL("../", import.meta.url))

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

/** The build options that make a bundle of our sources one of `line`'s. */
export const bundleOptionsFor = (line: Line): Pick<esbuild.BuildOptions, "conditions" | "plugins" | "banner"> => ({
  // The packages' sources (`@resilient-ai/source`); on Effect 4, the seams' Effect 4 sides.
  conditions: line === "effect4" ? ["@resilient-ai/effect4", "@resilient-ai/source"] : ["@resilient-ai/source"],
  plugins: line === "effect4" ? [fromEffect4, undiciByName] : [],
  // The CommonJS dependencies (ioredis) `require` Node's modules, which an ES module has no `require` for.
  banner: {
    js:
      `import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);`
  }
})
