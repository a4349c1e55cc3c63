/**
 * The public surface of the published packages, read the way a user's compiler reads it: every
 * entry of a package's `exports` map (but the internal one) through its `types` file in the build.
 * Shared by the API report, the surface count and the reference pages, so the three agree on what
 * "public" means.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"

export const root = path.resolve(import.meta.dirname, "..")

/** One public entry: `@resilient-ai/policy/Backoff` with its built declarations and its source. */
export interface Entry {
  /** The package's name: `@resilient-ai/policy`. */
  readonly packageName: string
  /** The exports map's key: `.` or `./Backoff`. */
  readonly subpath: string
  /** What a user imports: `@resilient-ai/policy/Backoff`. */
  readonly specifier: string
  /** The built declaration file, absolute. */
  readonly types: string
  /** The source module, absolute. */
  readonly source: string
}

export interface Package {
  readonly name: string
  /** `policy` for `packages/policy`. */
  readonly dir: string
  readonly entries: ReadonlyArray<Entry>
}

/**
 * `./internal` (and anything under it) carries no compatibility promise and is left out, as is an
 * entry whose module doc is marked `@internal`.
 */
const isInternal = (subpath: string): boolean => subpath === "./internal" || subpath.startsWith("./internal/")

const conditionTarget = (target: unknown, condition: string): string | undefined => {
  if (typeof target === "string") return condition === "default" ? target : undefined
  if (target !== null && typeof target === "object") {
    const value = (target as Record<string, unknown>)[condition]
    if (typeof value === "string") return value
  }
  return undefined
}

/** The published packages (not private) under `packages/`, in name order, with their public entries. */
export const packages = (): Array<Package> => {
  const dirs = fs.readdirSync(path.join(root, "packages")).sort()
  const found: Array<Package> = []
  for (const dir of dirs) {
    const manifestPath = path.join(root, "packages", dir, "package.json")
    if (!fs.existsSync(manifestPath)) continue
    const manifest = JSON.parse(fs.readFileSync(manifestPath, "utf8"))
    if (manifest.private === true || manifest.exports === undefined) continue
    const exportsMap: Record<string, unknown> = typeof manifest.exports === "string"
      ? { ".": manifest.exports }
      : manifest.exports
    const entries: Array<Entry> = []
    for (const [subpath, target] of Object.entries(exportsMap)) {
      if (isInternal(subpath) || subpath.includes("*")) continue
      const types = conditionTarget(target, "types")
      const source = conditionTarget(target, "@resilient-ai/source")
      if (types === undefined || source === undefined) {
        throw new Error(`${manifest.name}: the exports entry ${subpath} needs "types" and "@resilient-ai/source"`)
      }
      const packageDir = path.join(root, "packages", dir)
      const sourcePath = path.join(packageDir, source)
      if (isInternalModule(sourcePath)) continue
      entries.push({
        packageName: manifest.name,
        subpath,
        specifier: subpath === "." ? manifest.name : `${manifest.name}/${subpath.slice(2)}`,
        types: path.join(packageDir, types),
        source: sourcePath
      })
    }
    entries.sort((a, b) => compare(a.subpath, b.subpath))
    found.push({ name: manifest.name, dir, entries })
  }
  return found
}

/** A module whose first doc comment carries `@internal` is not documented surface, whatever its entry. */
const isInternalModule = (sourcePath: string): boolean => {
  if (!fs.existsSync(sourcePath)) return false
  const text = fs.readFileSync(sourcePath, "utf8")
  const first = /^\s*\/\*\*([\s\S]*?)\*\//.exec(text)
  return first !== null && /@internal\b/.test(first[1]!)
}

/** Code-point order, the same on every machine and locale. */
export const compare = (a: string, b: string): number => a < b ? -1 : a > b ? 1 : 0

/** A program over the built declarations of every entry (run `tsc -b` first). */
export const declarationProgram = (entries: ReadonlyArray<Entry>): ts.Program => {
  for (const entry of entries) {
    if (!fs.existsSync(entry.types)) {
      throw new Error(`${entry.specifier}: ${path.relative(root, entry.types)} is missing; build first (npx tsc -b)`)
    }
  }
  return ts.createProgram({
    rootNames: entries.map((entry) => entry.types),
    options: {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: [],
      skipLibCheck: true,
      noEmit: true,
      strict: true
    }
  })
}

/** One name an entry exports, resolved through re-exports. */
export interface Export {
  readonly name: string
  readonly symbol: ts.Symbol
  /** The module a namespace re-export (`export * as X from`) names, else undefined. */
  readonly namespaceOf: ts.SourceFile | undefined
}

export const exportsOf = (program: ts.Program, file: string): Array<Export> => {
  const checker = program.getTypeChecker()
  const sourceFile = program.getSourceFile(file)
  if (sourceFile === undefined) throw new Error(`${file} is not in the program`)
  const moduleSymbol = checker.getSymbolAtLocation(sourceFile)
  if (moduleSymbol === undefined) return []
  return checker.getExportsOfModule(moduleSymbol)
    .map((exported) => {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported
      const declaration = symbol.declarations?.[0]
      const namespaceOf = declaration !== undefined && ts.isSourceFile(declaration) ? declaration : undefined
      return { name: exported.name, symbol, namespaceOf }
    })
    .sort((a, b) => compare(a.name, b.name))
}

/**
 * The names an entry adds to the surface: all it exports, but a namespace re-export of another
 * public entry (the index's `export * as Backoff`), whose names that entry counts already.
 */
export const ownNames = (
  exported: ReadonlyArray<Export>,
  publicFiles: ReadonlySet<string>
): Array<Export> =>
  exported.filter((each) => each.namespaceOf === undefined || !publicFiles.has(path.resolve(each.namespaceOf.fileName)))
