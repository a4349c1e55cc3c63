/**
 * What the tests start as processes of their own runs as plain JavaScript: Node 20 runs no
 * TypeScript itself, and through tsx such a process took 2–3 times the CPU of the same code built
 * (tsx's loader handles each of the ~900 modules a member imports): seconds each, tens of seconds
 * to start on a busy machine.
 *
 * - The `resilient-ai` bin, and a fresh Node importing a package, run the packages' build
 *   (`dist`, their exports maps' `default`), as a user's do: `requireBuild` checks it is there and
 *   no older than the sources (`pnpm test` runs `tsc -b` first).
 * - Fleet members, fixtures and the examples run as one bundle each, made from the sources
 *   (`bundleSetup.ts`, once per run): a member then starts on a third of the CPU of the built
 *   packages (one file read, and only the modules it uses).
 */
import { existsSync, readdirSync, statSync } from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { Line as BundleLine } from "../scripts/bundleLine.js"

/** The repository root. */
export const root = fileURLToPath(new URL("../", import.meta.url))

/** Each package's sources, and the file `tsc -b` writes last when it builds them. */
const packages: ReadonlyArray<{ readonly sources: string; readonly buildInfo: string }> = readdirSync(
  Path.join(root, "packages")
).map((name) => ({
  sources: Path.join("packages", name, "src"),
  buildInfo: Path.join("packages", name, "dist", ".tsbuildinfo")
}))

const newestSource = (dir: string): { readonly path: string; readonly mtimeMs: number } => {
  let newest = { path: dir, mtimeMs: 0 }
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = Path.join(dir, entry.name)
    const found = entry.isDirectory()
      ? newestSource(path)
      : entry.name.endsWith(".ts") && !otherLinesSeam(path)
      ? { path, mtimeMs: statSync(path).mtimeMs }
      : newest
    if (found.mtimeMs > newest.mtimeMs) newest = found
  }
  return newest
}

/** The Effect 4 side of a package's seam: the build `requireBuild` checks (Effect 3's) leaves it out. */
const otherLinesSeam = (path: string): boolean => path.endsWith(Path.join("internal", "line", "effect4.ts"))

let checked = false

/**
 * Fails, saying what to do, when a package's build is missing or older than its sources: the
 * processes would run code other than the sources the test reads.
 */
export const requireBuild = (): void => {
  if (checked) return
  for (const { buildInfo, sources } of packages) {
    const info = Path.join(root, buildInfo)
    const built = existsSync(info) ? statSync(info).mtimeMs : 0
    const newest = newestSource(Path.join(root, sources))
    if (newest.mtimeMs > built) {
      throw new Error(
        `${Path.relative(root, newest.path)} is newer than its build (${buildInfo}); these tests run the build: ` +
          "run `pnpm test` (it runs `tsc -b` first), or `npx tsc -b` before `vitest`"
      )
    }
  }
  checked = true
}

/** Which Effect line a bundle is built for. */
export type Line = BundleLine

/** Where `bundleSetup.ts` writes the bundles of `line`: each line's apart, since both suites may run at once. */
export const bundlesDir = (line: Line): string =>
  Path.join(root, "build", line === "effect3" ? "bundles" : "bundles-effect4")

/**
 * What `bundleSetup.ts` bundles, for each line alike: the command, the fleet member, a fixture, the
 * storm tests' thread, and every example.
 */
export const bundleEntries: ReadonlyArray<string> = [
  "test/redis/fleet/member.ts",
  "test/policy/fixtures/timersEnd.ts",
  "test/storm/simulator.ts",
  "packages/cli/src/main.ts",
  ...readdirSync(Path.join(root, "examples")).filter((name) => name.endsWith(".ts")).map((name) => `examples/${name}`)
]

/** The bundle for `line` of a TypeScript file that `bundleEntries` names, to run with `node`. */
export const bundled = (source: string | URL, line: Line = "effect3"): string => {
  const relative = Path.relative(root, source instanceof URL ? fileURLToPath(source) : Path.resolve(root, source))
  const bundle = Path.join(bundlesDir(line), relative.replace(/\.ts$/, ".mjs"))
  if (!existsSync(bundle)) {
    throw new Error(`${bundle} is missing: vitest's global setup (test/bundleSetup.ts) bundles ${relative}`)
  }
  return bundle
}
