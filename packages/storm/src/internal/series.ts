/** Sums and means over a per-second series of a run, by index range. */

/** The sum of `values` over `[from, to)` (indices; by default all of them). */
export const sum = (values: ReadonlyArray<number>, from = 0, to = values.length): number => {
  let total = 0
  for (let index = from; index < to; index++) total += values[index] ?? 0
  return total
}

/** The mean of `values` over `[from, to)` (indices). */
export const mean = (values: ReadonlyArray<number>, from: number, to: number): number =>
  to > from ? sum(values, from, to) / (to - from) : 0
