/**
 * What the door's two entries share: the environment a runtime has, and the Effect context each
 * fleet made by `redisFleet` builds (kept here, so a `Fleet` shows users nothing but `close`).
 */
import type * as Context from "effect/Context"
import type { Fleet } from "../index.js"

/** Each fleet's context, once its connection is open: a door of that fleet makes its `fetch` in it. */
export const contexts = new WeakMap<Fleet, Promise<Context.Context<never>>>()

/** The environment of this runtime, where it has one (Node, Bun, Deno, Vercel's edge runtime). */
export const processVariables = (): Readonly<Record<string, unknown>> | undefined =>
  (globalThis as { readonly process?: { readonly env?: Record<string, unknown> } }).process?.env

/** Looks a variable up in `variables`; one set to the empty text is unset. */
export const variableLookup = (variables: Readonly<Record<string, unknown>>) => (name: string): string | undefined => {
  const value = variables[name]
  return typeof value === "string" && value !== "" ? value : undefined
}
