/**
 * Runs a bench once per Effect line (docs/effect-lines.md), one after the other on this Node: each
 * bundled from the sources with that line's Effect (scripts/bundleLine.ts, as the tests' processes
 * are), so the two lines' figures come from the same build and the same machine's minute.
 * `tsx lines.ts overhead.ts [effect3|effect4]`.
 */
import * as esbuild from "esbuild"
import { spawnSync } from "node:child_process"
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
  const ran = spawnSync(process.execPath, [...process.execArgv, outfile], {
    stdio: "inherit",
    env: { ...process.env, BENCH_LINE: names[line] }
  })
  if (ran.status !== 0) process.exit(ran.status ?? 1)
}
