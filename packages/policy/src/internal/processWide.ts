/**
 * One value per process under a key, made on first use, for what must be shared by every copy of
 * the package loaded in a process (two versions in one bundle, a test runner's module isolation):
 * the metrics' caches. Effect 3's `GlobalValue` does this; Effect 4 has no such module.
 */

/** The value under `key` in this process, made by `make` the first time it is asked for. */
export const processWide = <A>(key: string, make: () => A): A => {
  const store = globalThis as unknown as Record<symbol, A | undefined>
  const id = Symbol.for(key)
  const found = store[id]
  if (found !== undefined) return found
  const made = make()
  store[id] = made
  return made
}
