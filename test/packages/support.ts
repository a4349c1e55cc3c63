/** What the package tests share: where the packages are, and which of their modules are public. */
import { readFileSync } from "node:fs"

export const packages = ["policy", "client", "fetch", "redis", "testing", "storm", "cli", "otel"] as const

/** The text of `path`, relative to `packages/`. */
export const read = (path: string): string => readFileSync(new URL(`../../packages/${path}`, import.meta.url), "utf8")

/** Entries a package offers beside its index that the index does not re-export: the door's fleet. */
const besideIndex: Readonly<Record<string, ReadonlyArray<string>>> = { fetch: ["redis"] }

/** The modules a package's index re-exports as namespaces. */
const reexported = (name: string): ReadonlyArray<string> =>
  [...read(`${name}/src/index.ts`).matchAll(/export \* as (\w+) from "\.\/(\w+)\.js"/g)].map((match) => match[2]!)

/** The modules of a package's surface besides its index: those the index re-exports, and any beside it. */
export const publicModules = (
  name: string
): ReadonlyArray<string> => [...reexported(name), ...(besideIndex[name] ?? [])]

/**
 * The modules a package's README lists names under: its public modules, and the index itself when it
 * declares names of its own instead of re-exporting modules (`@resilient-ai/fetch`).
 */
export const documentedModules = (name: string): ReadonlyArray<string> =>
  reexported(name).length > 0 ? publicModules(name) : ["index", ...publicModules(name)]

/** Whether a package offers its siblings an internal entry (`src/internal/index.ts`, marked `@internal`). */
export const hasInternalEntry = (name: string): boolean => {
  try {
    return read(`${name}/src/internal/index.ts`).includes("@internal")
  } catch {
    return false
  }
}
