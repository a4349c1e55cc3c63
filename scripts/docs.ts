/**
 * The API reference as web pages, from the doc comments of every public module (`pnpm docs:build`,
 * into build/reference, which git ignores). One page per module, named as users import it
 * (`@resilient-ai/policy/Backoff`), its module doc comment at the top; a `{@link Name}` that names
 * nothing fails the build, as does any other warning.
 * docs/reference.md says why TypeDoc, and how to write an example that `pnpm docs:check` accepts.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import {
  Application,
  Comment,
  Converter,
  type DeclarationReflection,
  LogLevel,
  MinimalSourceFile,
  type NormalizedPath,
  ReflectionKind,
  TypeScript as ts
} from "typedoc"
import { type Entry, packages, root } from "./surface.js"

const out = path.join(root, "build", "reference")

/**
 * An index that only re-exports the package's modules as namespaces (`export * as Backoff`) has no
 * page of its own: each module has one. An index with names of its own is documented as a module.
 */
const onlyNamespaces = (entry: Entry, sources: ReadonlySet<string>): boolean => {
  const sourceFile = ts.createSourceFile(entry.source, fs.readFileSync(entry.source, "utf8"), ts.ScriptTarget.Latest)
  return sourceFile.statements.every((statement) =>
    ts.isExportDeclaration(statement) && statement.exportClause !== undefined
    && ts.isNamespaceExport(statement.exportClause) && statement.moduleSpecifier !== undefined
    && ts.isStringLiteral(statement.moduleSpecifier)
    && sources.has(path.resolve(path.dirname(entry.source), statement.moduleSpecifier.text.replace(/\.js$/, ".ts")))
  )
}

/** The first doc comment of a file, as markdown (what a module's page opens with). */
const fileComment = (sourceFile: ts.SourceFile): string | undefined => {
  const first = ts.getLeadingCommentRanges(sourceFile.text, 0)?.find((range) =>
    sourceFile.text.startsWith("/**", range.pos)
  )
  if (first === undefined) return undefined
  return sourceFile.text.slice(first.pos + 3, first.end - 2)
    .split("\n")
    .map((line) => line.replace(/^\s*\* ?/, ""))
    .join("\n")
    .trim()
}

const main = async (): Promise<number> => {
  const entries = packages().flatMap((pkg) => pkg.entries)
  const sources = new Set(entries.map((entry) => path.resolve(entry.source)))
  const documented = entries.filter((entry) => !(entry.subpath === "." && onlyNamespaces(entry, sources)))
  const bySource = new Map(documented.map((entry) => [path.resolve(entry.source), entry]))

  const app = await Application.bootstrapWithPlugins({
    name: "resilient-ai",
    entryPoints: documented.map((entry) => entry.source),
    entryPointStrategy: "resolve",
    tsconfig: path.join(root, "scripts", "tsconfig.docs.json"),
    readme: path.join(root, "docs", "reference.md"),
    out,
    // `tsc -b` type-checks the same sources before this runs.
    skipErrorChecking: true,
    excludePrivate: true,
    excludeInternal: true,
    // Pages link to the types of effect and the other dependencies by name, without documenting them.
    excludeExternals: true,
    disableSources: true,
    // notExported is left to the API reports, which list what the surface reaches without exporting
    // it: across several packages in one project, TypeDoc counts another package's types as external
    // and never reports them.
    validation: { notExported: false, invalidLink: true, rewrittenLink: true, notDocumented: false },
    treatWarningsAsErrors: true,
    logLevel: LogLevel.Info
  })

  app.converter.on(Converter.EVENT_CREATE_DECLARATION, (context, reflection: DeclarationReflection) => {
    if (!reflection.kindOf(ReflectionKind.Module)) return
    const sourceFile = context.getSymbolFromReflection(reflection)?.declarations?.find(ts.isSourceFile)
    const entry = sourceFile === undefined ? undefined : bySource.get(path.resolve(sourceFile.fileName))
    if (sourceFile === undefined || entry === undefined) return
    reflection.name = entry.specifier
    // Our module comments open the file, before the imports, without TypeDoc's `@module` tag.
    if (reflection.comment === undefined) {
      const markdown = fileComment(sourceFile)
      if (markdown !== undefined) {
        const parsed = context.converter.parseRawComment(
          new MinimalSourceFile(markdown, sourceFile.fileName as NormalizedPath),
          context.project.files
        )
        reflection.comment = new Comment(parsed.content)
      }
    }
  })

  const project = await app.convert()
  if (project === undefined) return 1
  app.validate(project)
  if (app.logger.hasErrors() || app.logger.hasWarnings()) return 1
  await app.generateDocs(project, out)
  if (app.logger.hasErrors() || app.logger.hasWarnings()) return 1
  console.log(`The reference for ${documented.length} modules is in ${path.relative(root, out)}/index.html`)
  return 0
}

process.exitCode = await main()
