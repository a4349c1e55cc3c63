/**
 * Each package's README names its public surface, one line a name: a `## \`Module\`` heading for
 * every module the index re-exports (or one `## \`@resilient-ai/name\`` heading for an index that
 * declares its names itself), and under it a `- \`name\`: …` line for every name the module
 * exports. A name exported and not listed, or listed and not exported, fails; so does an exported
 * name without a doc comment.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import ts from "typescript"
import { documentedModules, packages, read } from "./support.js"

const packagesDir = new URL("../../packages/", import.meta.url)

const isExported = (statement: ts.Statement) =>
  ts.canHaveModifiers(statement) &&
  (ts.getModifiers(statement) ?? []).some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword)

const hasDoc = (node: ts.Node) =>
  ts.getJSDocCommentsAndTags(node).some((doc) => ts.isJSDoc(doc) && doc.comment !== undefined)

/**
 * The names `file` exports, each with whether it has a doc comment: a name declared twice (a
 * schema and its type) needs one, and a re-exported name has the one where it is declared.
 */
const exportsOf = (file: URL): ReadonlyMap<string, boolean> => {
  const source = ts.createSourceFile(file.pathname, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true)
  const names = new Map<string, boolean>()
  const add = (name: string, documented: boolean) => names.set(name, names.get(name) === true || documented)
  for (const statement of source.statements) {
    if (ts.isExportDeclaration(statement)) {
      const { exportClause, moduleSpecifier } = statement
      if (
        exportClause === undefined || !ts.isNamedExports(exportClause) || moduleSpecifier === undefined ||
        !ts.isStringLiteral(moduleSpecifier)
      ) {
        throw new Error(`${file.pathname}: only \`export { … } from "./module.js"\` is read: ${statement.getText()}`)
      }
      const declared = exportsOf(new URL(moduleSpecifier.text.replace(/\.js$/, ".ts"), file))
      for (const element of exportClause.elements) {
        add(element.name.text, declared.get((element.propertyName ?? element.name).getText(source)) === true)
      }
    } else if (isExported(statement)) {
      if (ts.isVariableStatement(statement)) {
        for (const declaration of statement.declarationList.declarations) {
          add(declaration.name.getText(source), hasDoc(statement))
        }
      } else {
        const name = (statement as ts.DeclarationStatement).name
        if (name === undefined) throw new Error(`${file.pathname}: an export without a name: ${statement.getText()}`)
        add(name.getText(source), hasDoc(statement))
      }
    }
  }
  return names
}

/** The names a package's README lists, by module. */
const listed = (name: string): ReadonlyMap<string, ReadonlyArray<string>> => {
  const modules = new Map<string, Array<string>>()
  let current: Array<string> | undefined
  for (const line of read(`${name}/README.md`).split("\n")) {
    if (line.startsWith("## ")) {
      const heading = /^## `(?:(\w+)|@resilient-ai\/[\w-]+)`$/.exec(line)
      const module = heading === null ? undefined : heading[1] ?? "index"
      current = module === undefined ? undefined : []
      if (module !== undefined && current !== undefined) modules.set(module, current)
    }
    const item = /^- `(\w+)`/.exec(line)?.[1]
    if (item !== undefined) current?.push(item)
  }
  return modules
}

const sorted = (names: Iterable<string>) => [...names].sort()

describe("the packages' READMEs", () => {
  for (const name of packages) {
    it(`@resilient-ai/${name}: every public module and every name it exports, listed once, and nothing else`, () => {
      const readme = listed(name)
      assert.deepStrictEqual(sorted(readme.keys()), sorted(documentedModules(name)), "the modules")
      for (const module of documentedModules(name)) {
        const exported = exportsOf(new URL(`${name}/src/${module}.ts`, packagesDir))
        const names = readme.get(module) ?? []
        assert.deepStrictEqual(
          {
            exportedNotListed: sorted(exported.keys()).filter((exportedName) => !names.includes(exportedName)),
            listedNotExported: names.filter((listedName) => !exported.has(listedName)),
            listedTwice: names.filter((listedName, index) => names.indexOf(listedName) !== index)
          },
          { exportedNotListed: [], listedNotExported: [], listedTwice: [] },
          module
        )
      }
    })

    it(`@resilient-ai/${name}: every exported name has a doc comment`, () => {
      for (const module of documentedModules(name)) {
        const exported = exportsOf(new URL(`${name}/src/${module}.ts`, packagesDir))
        const undocumented = sorted(exported.keys()).filter((exportedName) => exported.get(exportedName) !== true)
        assert.deepStrictEqual(undocumented, [], module)
      }
    })
  }
})
