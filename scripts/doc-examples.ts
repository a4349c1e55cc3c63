/**
 * Type-checks every ```ts block in the doc comments of the packages' sources (`pnpm docs:check`),
 * against the build of the workspace's packages, as a user's code would import them.
 *
 * The convention (docs/reference.md says it for authors):
 * - A block is a module: it imports what it uses (`effect`, `@resilient-ai/*` public entries, the
 *   workspace's other dependencies) and `declare`s what it assumes but does not show
 *   (`declare const request: ChatCompletion.Request`).
 * - A block that uses `yield*` outside a generator is the body of an `Effect.gen`: its imports,
 *   `declare`s, interfaces and type aliases stay at module level, its other statements are checked
 *   inside `Effect.gen(function*() { … })`.
 * - Only ```ts and ```typescript blocks are checked; a shell line or an output sample takes another
 *   language (```sh, ```text).
 *
 * A block that does not compile fails the run, named by the file and line where it is written.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"
import { root } from "./surface.js"

interface Block {
  /** The source file, relative to the root. */
  readonly file: string
  /** The line (1-based) of the block's first line of code. */
  readonly line: number
  readonly code: string
}

/** The sources whose doc comments are checked: every package's `src`, internal modules too (what they document is re-exported). */
const sourceFiles = (): Array<string> => {
  const found: Array<string> = []
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name)
      if (entry.isDirectory()) walk(full)
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) found.push(full)
    }
  }
  const packagesDir = path.join(root, "packages")
  for (const pkg of fs.readdirSync(packagesDir).sort()) {
    const src = path.join(packagesDir, pkg, "src")
    if (fs.existsSync(src)) walk(src)
  }
  return found.sort()
}

const fence = /^(\s*)```\s*(\S*)\s*$/

/** The doc comments of a file: the leading comments of its nodes, found by the parser (never text in a string). */
const docComments = (sourceFile: ts.SourceFile): Array<ts.CommentRange> => {
  const text = sourceFile.text
  const found = new Map<number, ts.CommentRange>()
  const visit = (node: ts.Node): void => {
    for (const range of ts.getLeadingCommentRanges(text, node.getFullStart()) ?? []) {
      if (range.kind === ts.SyntaxKind.MultiLineCommentTrivia && text.startsWith("/**", range.pos)) {
        found.set(range.pos, range)
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(sourceFile)
  visit(sourceFile.endOfFileToken)
  return [...found.values()].sort((a, b) => a.pos - b.pos)
}

/** The ```ts blocks of a file's doc comments. */
const blocksOf = (file: string): Array<Block> => {
  const sourceFile = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true)
  const blocks: Array<Block> = []
  for (const range of docComments(sourceFile)) {
    const firstLine = sourceFile.getLineAndCharacterOfPosition(range.pos).line
    const lines = sourceFile.text.slice(range.pos, range.end).split("\n")
      .map((line) => line.replace(/^\s*\/?\*+\/?( ?)/, "").replace(/\*\/\s*$/, ""))
    let open: { readonly language: string; readonly line: number; readonly code: Array<string> } | undefined
    lines.forEach((line, index) => {
      const marker = fence.exec(line)
      if (marker === null) {
        open?.code.push(line)
      } else if (open === undefined) {
        open = { language: marker[2]!.toLowerCase(), line: firstLine + index + 2, code: [] }
      } else {
        if (open.language === "ts" || open.language === "typescript") {
          blocks.push({ file: path.relative(root, file), line: open.line, code: open.code.join("\n") })
        }
        open = undefined
      }
    })
  }
  return blocks
}

/** The module a block is checked as, with the source line of each of its lines (undefined for added ones). */
interface Checked {
  readonly text: string
  readonly lines: ReadonlyArray<number | undefined>
}

const enclosingFunction = (node: ts.Node): ts.Node | undefined => {
  for (let at = node.parent; at !== undefined; at = at.parent) if (ts.isFunctionLike(at)) return at
  return undefined
}

const yieldsAtTopLevel = (code: string): boolean => {
  const wrapped = ts.createSourceFile("wrapped.ts", `function* __wrap() {\n${code}\n}`, ts.ScriptTarget.Latest, true)
  const wrapper = wrapped.statements[0]!
  let found = false
  const visit = (node: ts.Node): void => {
    if (found) return
    if (ts.isYieldExpression(node) && enclosingFunction(node) === wrapper) found = true
    else ts.forEachChild(node, visit)
  }
  visit(wrapper)
  return found
}

const isModuleLevel = (statement: ts.Statement): boolean =>
  ts.isImportDeclaration(statement) || ts.isInterfaceDeclaration(statement) || ts.isTypeAliasDeclaration(statement)
  || (ts.canHaveModifiers(statement)
    && (ts.getModifiers(statement) ?? []).some((modifier) => modifier.kind === ts.SyntaxKind.DeclareKeyword))

const asModule = (block: Block): Checked => {
  const sourceLines = block.code.split("\n")
  const lineOf = (index: number) => block.line + index
  const sourceFile = ts.createSourceFile("block.ts", block.code, ts.ScriptTarget.Latest, true)
  const body: Array<string> = []
  const bodyLines: Array<number> = []
  const top: Array<string> = []
  const topLines: Array<number> = []
  // Each statement takes its own lines and the comments and blank lines before it.
  let next = 0
  const statements = sourceFile.statements
  const inGenerator = statements.some((statement) =>
    !isModuleLevel(statement) && yieldsAtTopLevel(statement.getFullText())
  )
  if (!inGenerator) return { text: block.code, lines: sourceLines.map((_, index) => lineOf(index)) }
  for (const statement of statements) {
    const last = sourceFile.getLineAndCharacterOfPosition(statement.getEnd()).line
    const [texts, lines] = isModuleLevel(statement) ? [top, topLines] : [body, bodyLines]
    for (let index = next; index <= last; index++) {
      texts.push(sourceLines[index]!)
      lines.push(lineOf(index))
    }
    next = last + 1
  }
  return {
    text: [
      ...top,
      `import * as Effect__ from "effect/Effect"`,
      `export const example__ = Effect__.gen(function*() {`,
      ...body,
      `})`
    ].join("\n"),
    lines: [...topLines, undefined, undefined, ...bodyLines, undefined]
  }
}

const options: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  lib: ["lib.es2022.d.ts"],
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  moduleDetection: ts.ModuleDetectionKind.Force,
  types: ["node"],
  strict: true,
  exactOptionalPropertyTypes: true,
  noUncheckedIndexedAccess: true,
  verbatimModuleSyntax: true,
  isolatedModules: true,
  skipLibCheck: true,
  noEmit: true
}

const main = (): number => {
  const blocks = sourceFiles().flatMap(blocksOf)
  // Virtual files at the root, so that imports resolve as in a user's project whose dependencies
  // are the root's: the packages through their exports maps (their build), effect and the rest.
  const dir = path.join(root, "build", "doc-examples")
  const checked = new Map<string, { readonly block: Block; readonly module: Checked }>()
  blocks.forEach((block, index) => {
    const name = path.join(
      dir,
      `${String(index).padStart(3, "0")}-${path.basename(block.file, ".ts")}-${block.line}.ts`
    )
    checked.set(name, { block, module: asModule(block) })
  })
  const host = ts.createCompilerHost(options)
  const { fileExists, readFile, getSourceFile } = host
  host.fileExists = (file) => checked.has(path.resolve(file)) || fileExists.call(host, file)
  host.readFile = (file) => checked.get(path.resolve(file))?.module.text ?? readFile.call(host, file)
  host.getSourceFile = (file, language, ...rest) => {
    const virtual = checked.get(path.resolve(file))
    return virtual !== undefined
      ? ts.createSourceFile(file, virtual.module.text, language, true)
      : getSourceFile.call(host, file, language, ...rest)
  }
  // An import the root does not install resolves from a private workspace (the SDKs under sdks/).
  const moduleCache = ts.createModuleResolutionCache(root, (name) => name, options)
  const fallbacks = ["examples", "bench", "sdks"].map((dir) => path.join(root, dir, "example.ts"))
  host.resolveModuleNameLiterals = (literals, containingFile, redirected, compilerOptions, containing) =>
    literals.map((literal) => {
      const mode = ts.getModeForUsageLocation(containing, literal, compilerOptions)
      const resolve = (from: string) =>
        ts.resolveModuleName(literal.text, from, compilerOptions, host, moduleCache, redirected, mode)
      const first = resolve(containingFile)
      if (first.resolvedModule !== undefined || !checked.has(path.resolve(containingFile))) return first
      for (const from of fallbacks) {
        const found = resolve(from)
        if (found.resolvedModule !== undefined) return found
      }
      return first
    })
  const program = ts.createProgram({ rootNames: [...checked.keys()], options, host })
  let failed = 0
  for (const [name, { block, module }] of checked) {
    const sourceFile = program.getSourceFile(name)!
    const diagnostics = [...program.getSyntacticDiagnostics(sourceFile), ...program.getSemanticDiagnostics(sourceFile)]
    if (diagnostics.length === 0) continue
    failed++
    for (const diagnostic of diagnostics) {
      const at = diagnostic.start === undefined
        ? undefined
        : sourceFile.getLineAndCharacterOfPosition(diagnostic.start)
      const line = at === undefined ? block.line : module.lines[at.line] ?? block.line
      const column = at === undefined || module.lines[at.line] === undefined ? 1 : at.character + 1
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")
      console.error(`${block.file}:${line}:${column} TS${diagnostic.code}: ${message}`)
    }
  }
  const files = new Set(blocks.map((block) => block.file)).size
  if (failed > 0) {
    console.error(`${failed} of ${blocks.length} doc comment examples (${files} files) do not compile.`)
    console.error("Each is a module with its own imports; see docs/reference.md, \"Examples in doc comments\".")
    return 1
  }
  console.log(`${blocks.length} doc comment examples in ${files} files compile.`)
  return 0
}

process.exitCode = main()
