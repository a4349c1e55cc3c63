/** What the window counts: successes, retries, and of those the ones that paid and the ones that failed. */
export type Series = "successes" | "retries" | "paid" | "unpaid"

const allSeries: ReadonlyArray<Series> = ["successes", "retries", "paid", "unpaid"]

/**
 * Counters over a sliding time window, one per `Series`, kept in a fixed ring of buckets each:
 * memory and time per operation do not grow with traffic, only with the number of buckets.
 */
export class SlidingCounts {
  private readonly rings: Readonly<Record<Series, Float64Array>>
  private readonly sums: Record<Series, number> = { successes: 0, retries: 0, paid: 0, unpaid: 0 }
  /** Index (in bucket units since the epoch) of the newest bucket. */
  private newest = Number.NEGATIVE_INFINITY

  constructor(
    readonly windowMillis: number,
    readonly bucketCount: number
  ) {
    this.rings = {
      successes: new Float64Array(bucketCount),
      retries: new Float64Array(bucketCount),
      paid: new Float64Array(bucketCount),
      unpaid: new Float64Array(bucketCount)
    }
  }

  get bucketMillis(): number {
    return this.windowMillis / this.bucketCount
  }

  /** Drops the buckets that fell out of the window by `nowMillis`. */
  private advance(nowMillis: number): number {
    const current = Math.floor(nowMillis / this.bucketMillis)
    if (current > this.newest) {
      const stale = Math.min(this.bucketCount, current - this.newest)
      for (let step = 1; step <= stale; step++) {
        const slot = this.slotOf(current - stale + step)
        for (const series of allSeries) {
          this.sums[series] -= this.rings[series][slot]!
          this.rings[series][slot] = 0
        }
      }
      this.newest = current
    }
    return this.slotOf(this.newest)
  }

  private slotOf(bucket: number): number {
    return ((bucket % this.bucketCount) + this.bucketCount) % this.bucketCount
  }

  add(series: Series, nowMillis: number, count = 1): void {
    const slot = this.advance(nowMillis)
    this.rings[series][slot]! += count
    this.sums[series] += count
  }

  totals(nowMillis: number): Readonly<Record<Series, number>> {
    this.advance(nowMillis)
    return { ...this.sums }
  }
}
