/**
 * The retry budget's speed and memory: decisions per second, and heap used after 1,000,000
 * decisions compared with after 1,000 — it must be flat, since the window is a fixed ring of buckets.
 *
 * Run with `pnpm bench` (node runs it with `--expose-gc`).
 */
import { Failure, RetryBudget } from "@resilient-ai/policy"
import { Budgets } from "@resilient-ai/policy/internal"
import { Effect } from "effect"

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with --expose-gc")

/** A decision every microsecond of simulated time: 1 success and 1 retry request per 10 calls. */
const decide = (window: Budgets.Window, count: number, startMillis = 0) => {
  let granted = 0
  for (let i = 0; i < count; i++) {
    const now = startMillis + i / 1000
    if (i % 10 === 0) {
      if (window.tryAcquire(now)) granted++
    } else {
      window.recordSuccess(now)
    }
  }
  return granted
}

/** Heap retained by a window (created after the baseline) once it has made `count` decisions; median of 5. */
const heapAfter = (count: number) => {
  const samples: Array<number> = []
  for (let trial = 0; trial < 5; trial++) {
    gc()
    const before = process.memoryUsage().heapUsed
    const window = new Budgets.Window(Budgets.defaults)
    decide(window, count)
    gc()
    samples.push(process.memoryUsage().heapUsed - before)
    // Keep the window alive until its heap was read.
    if (window.snapshot(0).allowance < 0) console.log("unreachable")
  }
  samples.sort((a, b) => a - b)
  return samples[2]!
}

const decisions = 5_000_000
const window = new Budgets.Window(Budgets.defaults)
decide(window, 100_000)
const started = performance.now()
decide(window, decisions, 100)
const seconds = (performance.now() - started) / 1000
console.log(`budget decisions, synchronous core:   ${(decisions / seconds / 1e6).toFixed(1)} M/s`)

const budget = await Effect.runPromise(RetryBudget.make())
const failure = new Failure.ServerError({ status: 503 })
const viaService = 1_000_000
const serviceStarted = performance.now()
await Effect.runPromise(Effect.gen(function*() {
  for (let i = 0; i < viaService; i++) {
    if (i % 10 === 0) yield* budget.tryAcquire(failure)
    else yield* budget.recordSuccess(1)
  }
}))
const serviceSeconds = (performance.now() - serviceStarted) / 1000
console.log(`budget decisions, through the service: ${(viaService / serviceSeconds / 1e6).toFixed(2)} M/s`)

// Warm up so the comparison measures the window, not the JIT's first allocations.
heapAfter(1_000_000)
const small = heapAfter(1_000)
const large = heapAfter(1_000_000)
const larger = heapAfter(10_000_000)
console.log(`heap retained after 1,000 decisions:     ${(small / 1024).toFixed(1)} KiB`)
console.log(`heap retained after 1,000,000 decisions: ${(large / 1024).toFixed(1)} KiB`)
console.log(`heap retained after 10,000,000 decisions: ${(larger / 1024).toFixed(1)} KiB`)
console.log(
  `difference 1,000 → 1,000,000: ${
    ((large - small) / 1024).toFixed(1)
  } KiB (the window keeps ${Budgets.defaults.buckets} buckets whatever the traffic)`
)
