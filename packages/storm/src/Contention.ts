/**
 * Marc Brooker's contention experiment ("Exponential Backoff And Jitter", AWS Architecture Blog,
 * 2015), reproduced: clients race to update one row with optimistic concurrency control, and the
 * backoff between their attempts decides how much work the race costs.
 *
 * The model follows the public simulator behind the article: each client reads the row's
 * version, writes with it, and on a conflict (someone wrote in between) backs off and starts
 * over; every message crosses a network with a delay of |N(10 ms, 2 ms)|; backoff base 5 ms, cap
 * 2 s. Full jitter runs our shipped `Backoff.fullJitter` schedule; the others follow the article's
 * formulas. Each client is a fiber in simulated time.
 */
import { Backoff } from "@resilient-ai/policy"
import { Backoffs, EffectLine } from "@resilient-ai/policy/internal"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as Simulation from "./Simulation.js"

/** The backoff algorithms the article compares. */
export type Algorithm = "none" | "exponential" | "equal-jitter" | "full-jitter" | "decorrelated-jitter"

/** Every algorithm, in the article's order. */
export const algorithms: ReadonlyArray<Algorithm> = [
  "none",
  "exponential",
  "equal-jitter",
  "full-jitter",
  "decorrelated-jitter"
]

/** The article's figures for 100 clients (calls, completion time in seconds), to print beside ours. */
export const published: Readonly<Record<Algorithm, { readonly calls: number; readonly seconds: number }>> = {
  none: { calls: 2421, seconds: 2.0 },
  exponential: { calls: 1855, seconds: 63.3 },
  "equal-jitter": { calls: 813, seconds: 6.5 },
  "full-jitter": { calls: 795, seconds: 4.9 },
  "decorrelated-jitter": { calls: 1001, seconds: 4.6 }
}

const baseMillis = 5
const capMillis = 2_000

/** |N(mean, sd)| from the seeded `Random` (Box–Muller). */
const networkDelay = Effect.map(
  Effect.zip(Random.next, Random.next),
  ([u, v]) => Math.abs(10 + 2 * Math.sqrt(-2 * Math.log(1 - u)) * Math.cos(2 * Math.PI * v))
)

/** A client's backoff: after its `attempt`-th conflict (from 1), how long to wait. */
const backoffFor = (algorithm: Algorithm): Effect.Effect<(attempt: number) => Effect.Effect<number>> => {
  const exponential = (attempt: number) => Backoffs.ceilingMillis(baseMillis, capMillis, attempt)
  switch (algorithm) {
    case "none":
      return Effect.succeed(() => Effect.succeed(0))
    case "exponential":
      return Effect.succeed((attempt) => Effect.succeed(exponential(attempt)))
    case "equal-jitter":
      return Effect.succeed((attempt) =>
        Effect.map(Random.next, (fraction) => exponential(attempt) / 2 + (fraction * exponential(attempt)) / 2)
      )
    case "decorrelated-jitter":
      return Effect.sync(() => {
        let sleep = baseMillis
        return () =>
          Effect.map(Random.next, (fraction) => {
            sleep = Math.min(capMillis, baseMillis + fraction * (sleep * 3 - baseMillis))
            return sleep
          })
      })
    case "full-jitter": {
      // The article's attempt n (from 1) waits U(0, min(cap, 5 ms · 2^n)); the shipped schedule's
      // retry n (from 0) waits U(0, min(cap, base · 2^n)): the same with a base of 10 ms.
      const schedule = Backoff.fullJitter({ base: Duration.millis(2 * baseMillis), cap: Duration.millis(capMillis) })
      return Effect.sync(() => {
        const stepper = EffectLine.stepperOf(schedule)
        // Full jitter never ends: every step has a delay.
        return () => Effect.map(stepper.step(0, undefined), ({ delay }) => delay!)
      })
    }
  }
}

/** What one run of the race cost. */
interface Race {
  /** Writes the row received, conflicts included. */
  readonly calls: number
  /** When the last client's update was confirmed. */
  readonly completionMillis: number
}

/** One race of `clients` clients under `algorithm`, in simulated time. */
const race = (algorithm: Algorithm, clients: number, seed: number): Race => {
  const program = Effect.gen(function*() {
    let version = 0
    let calls = 0
    let lastDone = 0
    const client = Effect.gen(function*() {
      const backoff = yield* backoffFor(algorithm)
      for (let attempt = 0;; attempt++) {
        if (attempt > 0) yield* Effect.sleep(yield* backoff(attempt))
        yield* Effect.sleep(yield* networkDelay)
        const read = version
        yield* Effect.sleep(yield* networkDelay)
        yield* Effect.sleep(yield* networkDelay)
        calls++
        const won = version === read
        if (won) version++
        yield* Effect.sleep(yield* networkDelay)
        if (won) {
          lastDone = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          return
        }
      }
    })
    yield* Effect.all(Array.from({ length: clients }, () => client), { concurrency: "unbounded", discard: true })
    return { calls, completionMillis: lastDone }
  })
  return Simulation.run(program, { seed }).value
}

/** The mean of `trials` races (the article averages 100). */
export const experiment = (
  algorithm: Algorithm,
  options: { readonly clients: number; readonly trials: number; readonly seed: number }
): Race => {
  let calls = 0
  let completionMillis = 0
  for (let trial = 0; trial < options.trials; trial++) {
    const result = race(algorithm, options.clients, options.seed + trial)
    calls += result.calls
    completionMillis += result.completionMillis
  }
  return { calls: calls / options.trials, completionMillis: completionMillis / options.trials }
}
