/**
 * mulberry32: a small, fast PRNG that gives the same numbers on every machine, which is all the
 * fault server needs of one (window shares drawn from a plan's seed, embeddings from their input).
 * Each call returns the next number in `[0, 1)`.
 */
export const prng = (seed: number): () => number => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
