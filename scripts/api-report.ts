/**
 * The API report: for every published package, every name each public entry exports, with its
 * declaration as the build emits it, sorted, so that a diff of the committed report shows any change
 * to the public surface.
 *
 *   pnpm api:update   writes packages/<pkg>/api/<pkg>.api.md
 *   pnpm api:check    fails, naming the package and showing the diff, when the build differs
 *   pnpm api:count    the names each public module exports (the count issue 24 sets targets on)
 *
 * Why not `@microsoft/api-extractor` (tried, 7.60.1): it reads one entry per run, and flattens the
 * index's `export * as Failure` namespaces into one scope, so the many modules that export `Options`,
 * `layer` or `Service` come out renamed `Options_2` … `Options_4`, `Failure_2`, `Failure_3` (161 such
 * names in policy's report alone), numbered in an order that shifts when an unrelated module gains a
 * name, with "forgotten export" warnings for types a user reaches through a namespace. A report
 * should read as a user imports: module by module, through the exports map. This one does, with the
 * compiler it is built with, in about the time of one api-extractor run for all seven packages.
 * Like api-extractor, it also lists the declarations the surface reaches without exporting them
 * (the `_base` a `Data.TaggedError` class extends, a type from `internal/`), since their shape is part
 * of the contract.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import ts from "typescript"
import type { Entry, Export } from "./surface.js"
import { compare, declarationProgram, exportsOf, ownNames, packages, root } from "./surface.js"

const printer = ts.createPrinter({ removeComments: true, newLine: ts.NewLineKind.LineFeed })

const reportPath = (dir: string): string => path.join(root, "packages", dir, "api", `${dir}.api.md`)

/** A declaration as the build emits it, without comments and without `export`/`declare`. */
const printDeclaration = (declaration: ts.Declaration): string => {
  const sourceFile = declaration.getSourceFile()
  if (ts.isVariableDeclaration(declaration)) {
    const list = declaration.parent
    const keyword = ts.isVariableDeclarationList(list)
      ? list.flags & ts.NodeFlags.Const ? "const" : list.flags & ts.NodeFlags.Let ? "let" : "var"
      : "const"
    return `${keyword} ${printer.printNode(ts.EmitHint.Unspecified, declaration, sourceFile)}`
  }
  return printer.printNode(ts.EmitHint.Unspecified, declaration, sourceFile)
    .replace(/^(export |declare |default )+/, "")
}

const declarationName = (declaration: ts.Declaration): string | undefined => {
  const name = ts.getNameOfDeclaration(declaration)
  return name !== undefined && ts.isIdentifier(name) ? name.text : undefined
}

/** Declared at the top of a file or a namespace: the kind of thing a report lists. */
const isTopLevel = (declaration: ts.Declaration): boolean => {
  const parent = ts.isVariableDeclaration(declaration) ? declaration.parent.parent.parent : declaration.parent
  return parent !== undefined && (ts.isSourceFile(parent) || ts.isModuleBlock(parent))
}

const packagesDir = path.join(root, "packages") + path.sep
const isOurs = (fileName: string): boolean =>
  path.resolve(fileName).startsWith(packagesDir) && !fileName.includes(`${path.sep}node_modules${path.sep}`)

interface Report {
  readonly dir: string
  readonly name: string
  readonly text: string
}

const reports = (): Array<Report> => {
  const found = packages()
  const entries = found.flatMap((pkg) => pkg.entries)
  const program = declarationProgram(entries)
  const checker = program.getTypeChecker()
  const publicFiles = new Set(entries.map((entry) => path.resolve(entry.types)))
  const exportsByEntry = new Map<Entry, Array<Export>>(entries.map((entry) => [entry, exportsOf(program, entry.types)]))
  const publicSymbols = new Set<ts.Symbol>()
  for (const exported of exportsByEntry.values()) for (const each of exported) publicSymbols.add(each.symbol)

  const resolve = (symbol: ts.Symbol): ts.Symbol =>
    symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol

  // What the surface reaches without exporting it, found from the declarations of the exported
  // names and, in turn, from those found: keyed by the file that declares it.
  const reached = new Map<string, Set<ts.Symbol>>()
  const pending: Array<ts.Symbol> = []
  const visit = (node: ts.Node): void => {
    if (ts.isIdentifier(node)) {
      const found = checker.getSymbolAtLocation(node)
      if (found !== undefined) {
        const symbol = resolve(found)
        const declaration = symbol.declarations?.[0]
        if (
          declaration !== undefined && !ts.isSourceFile(declaration) && isTopLevel(declaration)
          && isOurs(declaration.getSourceFile().fileName) && !publicSymbols.has(symbol)
        ) {
          const file = path.resolve(declaration.getSourceFile().fileName)
          const inFile = reached.get(file) ?? new Set()
          if (!inFile.has(symbol)) {
            inFile.add(symbol)
            reached.set(file, inFile)
            pending.push(symbol)
          }
        }
      }
    }
    ts.forEachChild(node, visit)
  }
  for (const exported of exportsByEntry.values()) {
    for (const each of exported) if (each.namespaceOf === undefined) each.symbol.declarations?.forEach(visit)
  }
  while (pending.length > 0) pending.pop()!.declarations?.forEach(visit)

  const entryOfFile = new Map(entries.map((entry) => [path.resolve(entry.types), entry]))
  const symbolBlock = (name: string, symbol: ts.Symbol): Array<string> =>
    (symbol.declarations ?? []).map((declaration) => {
      const declared = declarationName(declaration)
      const text = printDeclaration(declaration)
      return declared !== undefined && declared !== name ? `export { ${declared} as ${name} }\n${text}` : text
    })
  const reachedBlock = (file: string): Array<string> =>
    [...(reached.get(file) ?? [])]
      .sort((a, b) => compare(a.name, b.name))
      .flatMap((symbol) => symbolBlock(symbol.name, symbol))
  const exportBlock = (each: Export): Array<string> => {
    if (each.namespaceOf === undefined) return symbolBlock(each.name, each.symbol)
    const target = entryOfFile.get(path.resolve(each.namespaceOf.fileName))
    if (target !== undefined) return [`export * as ${each.name} from "${target.specifier}"`]
    // A namespace of a module that has no entry of its own: its names are surface too.
    const inner = exportsOf(program, each.namespaceOf.fileName).flatMap(exportBlock)
    return [`namespace ${each.name} {\n${inner.join("\n").replace(/^/gm, "    ")}\n}`]
  }
  const fence = (blocks: ReadonlyArray<string>): string => ["```ts", ...blocks, "```"].join("\n")

  return found.map((pkg) => {
    const sections: Array<string> = [
      `# API report: ${pkg.name}`,
      [
        "Generated by `pnpm api:update` from the build (`dist/*.d.ts`) of every public entry of the package's",
        "`exports` map (all but `./internal`); `pnpm api:check` fails in CI when the build differs. Do not edit:",
        "a change here is a change to what users import. Comments are left out; names are sorted."
      ].join("\n")
    ]
    for (const entry of pkg.entries) {
      const exported = exportsByEntry.get(entry)!
      const counted = ownNames(exported, publicFiles).length
      sections.push(`## ${entry.specifier}\n\n${counted} name${counted === 1 ? "" : "s"}.`)
      const blocks = exported.flatMap(exportBlock)
      const file = path.resolve(entry.types)
      const local = reachedBlock(file)
      if (local.length > 0) blocks.push("// Not exported, reached from the names above:", ...local)
      if (blocks.length > 0) sections.push(fence(blocks))
    }
    const packageDir = path.join(root, "packages", pkg.dir)
    const elsewhere = [...reached.keys()]
      .filter((file) => !publicFiles.has(file) && file.startsWith(packageDir + path.sep))
      .sort(compare)
    if (elsewhere.length > 0) {
      sections.push("## Not exported, reached from the surface")
      for (const file of elsewhere) {
        sections.push(`### ${path.relative(packageDir, file).split(path.sep).join("/")}`, fence(reachedBlock(file)))
      }
    }
    return { dir: pkg.dir, name: pkg.name, text: sections.join("\n\n") + "\n" }
  })
}

/** The names each public module exports, through the exports maps: the index's namespaces count in their module. */
const count = (): void => {
  const found = packages()
  const entries = found.flatMap((pkg) => pkg.entries)
  const program = declarationProgram(entries)
  const publicFiles = new Set(entries.map((entry) => path.resolve(entry.types)))
  let total = 0
  const lines: Array<string> = []
  for (const pkg of found) {
    const perEntry = pkg.entries.map((entry) => ({
      entry,
      names: ownNames(exportsOf(program, entry.types), publicFiles).length
    }))
    const sum = perEntry.reduce((acc, each) => acc + each.names, 0)
    total += sum
    lines.push(`${pkg.name.padEnd(42)} ${String(sum).padStart(4)}`)
    for (const { entry, names } of perEntry) {
      if (entry.subpath === "." && names === 0) continue
      lines.push(`  ${entry.specifier.padEnd(40)} ${String(names).padStart(4)}`)
    }
  }
  lines.push(`${"all packages".padEnd(42)} ${String(total).padStart(4)}`)
  console.log(lines.join("\n"))
}

const diff = (name: string, committed: string, current: string): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "api-report-"))
  try {
    const before = path.join(dir, "committed")
    const after = path.join(dir, "build")
    fs.writeFileSync(before, committed)
    fs.writeFileSync(after, current)
    const result = spawnSync("diff", [
      "-u",
      "--label",
      `${name} (committed)`,
      "--label",
      `${name} (build)`,
      before,
      after
    ], {
      encoding: "utf8"
    })
    return result.stdout || `(no diff tool: ${result.error?.message ?? result.stderr})`
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** Reports left from a package that is no longer published (made private, removed). */
const staleReports = (current: ReadonlyArray<Report>): Array<string> => {
  const kept = new Set(current.map((report) => reportPath(report.dir)))
  return fs.readdirSync(path.join(root, "packages"))
    .map((dir) => reportPath(dir))
    .filter((file) => fs.existsSync(file) && !kept.has(file))
    .sort(compare)
}

const main = (command: string | undefined): number => {
  switch (command) {
    case "update": {
      const current = reports()
      for (const file of staleReports(current)) {
        fs.rmSync(file)
        console.log(`removed   ${path.relative(root, file)}`)
      }
      for (const report of current) {
        const file = reportPath(report.dir)
        const previous = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined
        fs.mkdirSync(path.dirname(file), { recursive: true })
        if (previous !== report.text) fs.writeFileSync(file, report.text)
        console.log(`${previous === report.text ? "unchanged" : "written  "} ${path.relative(root, file)}`)
      }
      return 0
    }
    case "check": {
      let failed = 0
      const current = reports()
      for (const file of staleReports(current)) {
        failed++
        console.error(`${path.relative(root, file)} reports a package that is no longer published`)
      }
      for (const report of current) {
        const file = reportPath(report.dir)
        const committed = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : ""
        if (committed === report.text) continue
        failed++
        console.error(`${report.name}: the public surface differs from ${path.relative(root, file)}`)
        console.error(diff(path.relative(root, file), committed, report.text))
      }
      if (failed > 0) {
        console.error(
          `${failed} package${failed === 1 ? "" : "s"} changed their public surface. If the change is meant,`
            + " run `pnpm api:update` and commit the reports with it."
        )
        return 1
      }
      console.log("The API reports match the build.")
      return 0
    }
    case "count": {
      count()
      return 0
    }
    default: {
      console.error("usage: tsx scripts/api-report.ts update | check | count")
      return 2
    }
  }
}

process.exitCode = main(process.argv[2])
