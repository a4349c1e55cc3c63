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
      : entry.name.endsWith(".ts")
      ? { path, mtimeMs: statSync(path).mtimeMs }
      : newest
    if (found.mtimeMs > newest.mtimeMs) newest = found
  }
  return newest
}

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

/** Where `bundleSetup.ts` writes the bundles. */
export const bundlesDir = Path.join(root, "build", "bundles")

/**
 * What `bundleSetup.ts` bundles: the command, the fleet member, a fixture, the storm tests' thread,
 * and every example.
 */
export const bundleEntries = (): ReadonlyArray<string> => [
  "packages/cli/src/main.ts",
  "test/redis/fleet/member.ts",
  "test/policy/fixtures/timersEnd.ts",
  "test/storm/simulator.ts",
  ...readdirSync(Path.join(root, "examples")).filter((name) => name.endsWith(".ts")).map((name) => `examples/${name}`)
]

/** The bundle of a TypeScript file that `bundleEntries` names, to run with `node`. */
export const bundled = (source: string | URL): string => {
  const relative = Path.relative(root, source instanceof URL ? fileURLToPath(source) : Path.resolve(root, source))
  const bundle = Path.join(bundlesDir, relative.replace(/\.ts$/, ".mjs"))
  if (!existsSync(bundle)) {
    throw new Error(`${bundle} is missing: vitest's global setup (test/bundleSetup.ts) bundles ${relative}`)
  }
  return bundle
}
