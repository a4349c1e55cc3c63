/** What the package tests share: where the packages are, and which of their modules are public. */
import { readFileSync } from "node:fs"

export const packages = ["policy", "client", "fetch", "redis", "testing", "storm", "cli", "otel"] as const

/** The text of `path`, relative to `packages/`. */
export const read = (path: string): string => readFileSync(new URL(`../../packages/${path}`, import.meta.url), "utf8")

/** The modules a package's index re-exports: its public surface. */
export const publicModules = (name: string): ReadonlyArray<string> =>
  [...read(`${name}/src/index.ts`).matchAll(/export \* as (\w+) from "\.\/(\w+)\.js"/g)].map((match) => match[2]!)

/**
 * The modules a package's README lists names under: its public modules, or, for a package whose
 * index declares its names itself (`@resilient-ai/fetch`), the index.
 */
export const documentedModules = (name: string): ReadonlyArray<string> => {
  const modules = publicModules(name)
  return modules.length > 0 ? modules : ["index"]
}

/** Whether a package offers its siblings an internal entry (`src/internal/index.ts`, marked `@internal`). */
export const hasInternalEntry = (name: string): boolean => {
  try {
    return read(`${name}/src/internal/index.ts`).includes("@internal")
  } catch {
    return false
  }
}
