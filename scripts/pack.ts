/**
 * Packs every package once per Effect line (docs/effect-lines.md), into `build/packs/<line>/`:
 *
 * - Effect 3: the package as its package.json says, version 0.x (published under the `effect3`
 *   dist-tag).
 * - Effect 4: the same sources built by `tsc -b lines/effect4`, `dist-effect4` shipped as `dist`,
 *   version 4.x (0.m.p becomes 4.m.p: both lines are released from one commit), and dependencies
 *   of Effect 4: a package the line's install has (lines/effect4/package.json) at that version,
 *   one Effect 4 has folded into `effect` (`@effect/platform`, `@effect/cli`, …) left out.
 *
 * Each tarball's `imports` names only its own line's seam, and the workspace's own conditions
 * (`@resilient-ai/source`, `@resilient-ai/effect4`) are not published. Run after both builds:
 * `tsx scripts/pack.ts [effect3|effect4]`; prints each tarball's path.
 */
import { execFileSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

type Line = "effect3" | "effect4"
type Dependencies = Record<string, string>

interface Manifest {
  name: string
  version: string
  files?: Array<string> | undefined
  exports?: Record<string, unknown> | undefined
  imports?: Record<string, unknown> | undefined
  dependencies?: Dependencies | undefined
  peerDependencies?: Dependencies | undefined
  devDependencies?: Dependencies | undefined
  scripts?: Record<string, string> | undefined
  [field: string]: unknown
}

const root = fileURLToPath(new URL("../", import.meta.url))
const packagesDir = Path.join(root, "packages")
const workspaceConditions = new Set(["@resilient-ai/source", "@resilient-ai/effect4"])

/** The Effect 4 line's packages and their versions, as its install pins them. */
const effect4Versions: Dependencies = (JSON.parse(
  readFileSync(Path.join(root, "lines", "effect4", "package.json"), "utf8")
) as Manifest).devDependencies ?? {}

const readManifest = (dir: string): Manifest => JSON.parse(readFileSync(Path.join(dir, "package.json"), "utf8"))

/** The Node versions Effect 4's `@effect/platform-node` runs on (22.19 and later for 4.1). */
const platformNodeEngines = readManifest(
  Path.join(root, "lines", "effect4", "node_modules", "@effect", "platform-node")
).engines

/** The version a package of ours has on `line`. */
const versionOn = (version: string, line: Line): string => {
  if (line === "effect3") return version
  const [major, minor, patch] = version.split(".")
  if (major !== "0") throw new Error(`the Effect 3 line is versioned 0.x; found ${version}`)
  return `4.${minor}.${patch}`
}

/** A package of Effect's on the Effect 4 line: its version there, or `undefined` if Effect 4 has none. */
const onEffect4 = (name: string): string | undefined => effect4Versions[name]

const isEffects = (name: string): boolean => name === "effect" || name.startsWith("@effect/")

/** `dependencies` for `line`: our packages at that line's version, Effect's at that line's. */
const dependenciesOn = (
  dependencies: Dependencies | undefined,
  line: Line,
  ours: ReadonlyMap<string, string>,
  range: "exact" | "caret"
): Dependencies | undefined => {
  if (dependencies === undefined) return undefined
  const result: Dependencies = {}
  for (const [name, version] of Object.entries(dependencies)) {
    const own = ours.get(name)
    if (own !== undefined) {
      result[name] = versionOn(own, line)
    } else if (line === "effect4" && isEffects(name)) {
      const version4 = onEffect4(name)
      if (version4 !== undefined) result[name] = range === "caret" ? `^${version4}` : version4
    } else {
      result[name] = version
    }
  }
  return result
}

/** A conditional export or import without the workspace's conditions; on Effect 4 its seam's branch, moved to `dist`. */
const published = (target: unknown, line: Line): unknown => {
  if (typeof target === "string") return line === "effect4" ? target.replace("./dist-effect4/", "./dist/") : target
  if (typeof target !== "object" || target === null) return target
  const entries = Object.entries(target as Record<string, unknown>)
  const branch = entries.find(([condition]) => condition === "@resilient-ai/effect4")
  if (line === "effect4" && branch !== undefined) return published(branch[1], line)
  return Object.fromEntries(
    entries.filter(([condition]) => !workspaceConditions.has(condition)).map((
      [condition, value]
    ) => [condition, published(value, line)])
  )
}

/** The seam file the other line uses, left out of this line's tarball. */
const otherSeam = (line: Line) => Path.join("internal", "line", line === "effect3" ? "effect4" : "effect3")

const pack = (name: string, line: Line, ours: ReadonlyMap<string, string>, out: string): string => {
  const dir = Path.join(packagesDir, name)
  const manifest = readManifest(dir)
  const staging = Path.join(root, "build", "pack-staging", line, name)
  rmSync(staging, { recursive: true, force: true })
  mkdirSync(staging, { recursive: true })
  for (const entry of [...(manifest.files ?? []), "README.md", "LICENSE"]) {
    const from = Path.join(dir, line === "effect4" && entry === "dist" ? "dist-effect4" : entry)
    if (!existsSync(from)) continue
    cpSync(from, Path.join(staging, entry), {
      recursive: true,
      filter: (path) => !path.endsWith(".tsbuildinfo") && !path.includes(otherSeam(line))
    })
  }
  const { devDependencies: _dev, scripts: _scripts, ...kept } = manifest
  const written: Manifest = {
    ...kept,
    version: versionOn(manifest.version, line),
    ...(manifest.exports === undefined ? {} : { exports: published(manifest.exports, line) as Manifest["exports"] }),
    ...(manifest.imports === undefined ? {} : { imports: published(manifest.imports, line) as Manifest["imports"] }),
    ...(manifest.dependencies === undefined ? {} : {
      dependencies: dependenciesOn(manifest.dependencies, line, ours, "exact")
    }),
    ...(manifest.peerDependencies === undefined ? {} : {
      peerDependencies: dependenciesOn(manifest.peerDependencies, line, ours, "caret")
    })
  }
  // What runs on Effect 4's Node platform (the command) needs the Node that platform needs.
  if (line === "effect4" && written.dependencies?.["@effect/platform-node"] !== undefined) {
    written.engines = platformNodeEngines
  }
  writeFileSync(Path.join(staging, "package.json"), `${JSON.stringify(written, null, 2)}\n`)
  const file = execFileSync("npm", ["pack", "--silent", "--pack-destination", out], { cwd: staging, encoding: "utf8" })
    .trim().split("\n").pop()!
  return Path.join(out, file)
}

const lines: ReadonlyArray<Line> = process.argv[2] === undefined ? ["effect3", "effect4"] : [process.argv[2] as Line]
const names = readdirSync(packagesDir).filter((name) => existsSync(Path.join(packagesDir, name, "package.json")))
const ours = new Map(names.map((name) => {
  const manifest = readManifest(Path.join(packagesDir, name))
  return [manifest.name, manifest.version] as const
}))
for (const line of lines) {
  const out = Path.join(root, "build", "packs", line)
  rmSync(out, { recursive: true, force: true })
  mkdirSync(out, { recursive: true })
  for (const name of names) {
    if (!existsSync(Path.join(packagesDir, name, line === "effect4" ? "dist-effect4" : "dist"))) {
      throw new Error(`packages/${name} has no ${line} build: run \`tsc -b\` and \`tsc -b lines/effect4\` first`)
    }
    process.stdout.write(`${pack(name, line, ours, out)}\n`)
  }
}
