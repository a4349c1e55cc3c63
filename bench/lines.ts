/**
 * Runs a bench once per Effect line (docs/effect-lines.md), one after the other on this Node: each
 * bundled from the sources with that line's Effect (scripts/bundleLine.ts, as the tests' processes
 * are), so the two lines' figures come from the same build and the same machine's minute.
 * `tsx lines.ts overhead.ts [effect3|effect4]` (or `e2e.ts`, whose Effect 4 run needs Node 22).
 */
import * as esbuild from "esbuild"
import { spawnSync } from "node:child_process"
import { realpathSync } from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { bundleOptionsFor, type Line } from "../scripts/bundleLine.js"

const here = fileURLToPath(new URL(".", import.meta.url))
const root = Path.join(here, "..")
const [entry = "overhead.ts", only] = process.argv.slice(2)
const lines: ReadonlyArray<Line> = only === undefined ? ["effect3", "effect4"] : [only as Line]
const names: Record<Line, string> = { effect3: "Effect 3", effect4: "Effect 4" }

for (const line of lines) {
  const outfile = Path.join(root, "build", "bench", line, entry.replace(/\.ts$/, ".mjs"))
  await esbuild.build({
    absWorkingDir: root,
    entryPoints: [Path.join(here, entry)],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    logLevel: "warning",
    ...bundleOptionsFor(line)
  })
  process.stdout.write(`\n=== ${names[line]} (${line}) ===\n`)
  if (line === "effect4" && entry === "e2e.ts" && Number(process.versions.node.split(".")[0]) < 22) {
    // undici 8, under Effect 4's platform, needs Node 22.
    process.stdout.write(`Node ${process.versions.node}: the Effect 4 line's HTTP client needs Node 22 or later\n`)
    continue
  }
  const ran = spawnSync(process.execPath, [...process.execArgv, outfile], {
    stdio: "inherit",
    env: {
      ...process.env,
      BENCH_LINE: names[line],
      // What a bundle run from build/ cannot find from there: this folder, tsx's loader, the line's platform.
      BENCH_DIR: here,
      BENCH_TSX: import.meta.resolve("tsx"),
      // Its real path: the undici beside it is the one it uses (pnpm links the package from its store).
      BENCH_PLATFORM_NODE: realpathSync(
        Path.join(
          line === "effect4" ? Path.join(root, "lines", "effect4") : here,
          "node_modules",
          "@effect",
          "platform-node"
        )
      ) + "/package.json"
    }
  })
  if (ran.status !== 0) process.exit(ran.status ?? 1)
}
