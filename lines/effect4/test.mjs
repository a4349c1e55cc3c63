// The suite on the Effect 4 line, where vitest 5 runs: Node 22 or later (on Node 20, Effect 3 only).
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"

const major = Number(process.versions.node.split(".")[0])
if (major < 22) {
  process.stderr.write(
    `Node ${process.versions.node}: the Effect 4 line's tests need Node 22 or later (vitest 5) and are not run\n`
  )
  process.exit(0)
}
const here = fileURLToPath(new URL(".", import.meta.url))
const run = spawnSync("vitest", ["run", "--config", "vitest.config.ts", ...process.argv.slice(2)], {
  cwd: here,
  stdio: "inherit",
  shell: false,
  env: { ...process.env, PATH: `${here}node_modules/.bin:${process.env.PATH}` }
})
process.exit(run.status ?? 1)
