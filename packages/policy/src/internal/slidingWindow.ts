/**
 * Four counters over a sliding time window — successes, retries, and of those the ones that paid (a
 * call succeeded on it) and the ones that failed — kept in a fixed ring of buckets: memory and time
 * per operation do not grow with traffic, only with the number of buckets.
 */
export class SlidingCounts {
  private readonly successes: Float64Array
  private readonly retries: Float64Array
  private readonly paid: Float64Array
  private readonly unpaid: Float64Array
  private successTotal = 0
  private retryTotal = 0
  private paidTotal = 0
  private unpaidTotal = 0
  /** Index (in bucket units since the epoch) of the newest bucket. */
  private newest = Number.NEGATIVE_INFINITY

  constructor(
    readonly windowMillis: number,
    readonly bucketCount: number
  ) {
    this.successes = new Float64Array(bucketCount)
    this.retries = new Float64Array(bucketCount)
    this.paid = new Float64Array(bucketCount)
    this.unpaid = new Float64Array(bucketCount)
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
        this.successTotal -= this.successes[slot]!
        this.retryTotal -= this.retries[slot]!
        this.paidTotal -= this.paid[slot]!
        this.unpaidTotal -= this.unpaid[slot]!
        this.successes[slot] = 0
        this.retries[slot] = 0
        this.paid[slot] = 0
        this.unpaid[slot] = 0
      }
      this.newest = current
    }
    return this.slotOf(this.newest)
  }

  private slotOf(bucket: number): number {
    return ((bucket % this.bucketCount) + this.bucketCount) % this.bucketCount
  }

  addSuccess(nowMillis: number, count = 1): void {
    const slot = this.advance(nowMillis)
    this.successes[slot]! += count
    this.successTotal += count
  }

  addRetry(nowMillis: number, count = 1): void {
    const slot = this.advance(nowMillis)
    this.retries[slot]! += count
    this.retryTotal += count
  }

  addPaid(nowMillis: number, count = 1): void {
    const slot = this.advance(nowMillis)
    this.paid[slot]! += count
    this.paidTotal += count
  }

  addUnpaid(nowMillis: number, count = 1): void {
    const slot = this.advance(nowMillis)
    this.unpaid[slot]! += count
    this.unpaidTotal += count
  }

  totals(nowMillis: number): {
    readonly successes: number
    readonly retries: number
    readonly paid: number
    readonly unpaid: number
  } {
    this.advance(nowMillis)
    return { successes: this.successTotal, retries: this.retryTotal, paid: this.paidTotal, unpaid: this.unpaidTotal }
  }
}
