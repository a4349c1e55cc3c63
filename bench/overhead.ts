/**
 * What a resilient call costs when its attempt succeeds at once: our whole stack (deadline,
 * per-attempt timeout, budget, gate, metrics, retry) next to the bare Effect, Effect's own
 * retry and timeout, and cockatiel and p-retry wrapping the same no-op.
 *
 * Run with `pnpm bench`. The library is measured as built by `tsc` (dist), as users run it.
 */
import { ConcurrencyGate, Deadline, Resilient, RetryBudget } from "@resilient-ai/policy"
import { ExponentialBackoff, handleAll, retry, timeout, TimeoutStrategy, wrap } from "cockatiel"
import { Effect, Layer, Schedule } from "effect"
import pRetry from "p-retry"

const calls = Number(process.env.BENCH_CALLS ?? 50_000)
const rounds = Number(process.env.BENCH_ROUNDS ?? 9)

/** Median of the rounds' microseconds per call. */
const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const noop = async () => 1
const inPromises = (call: () => Promise<unknown>) => async (count: number) => {
  for (let i = 0; i < count; i++) await call()
}

/** Runs `count` calls one after another inside one fiber, as a request handler would. */
const inOneFiber = <E>(call: Effect.Effect<unknown, E>) => (count: number) =>
  Effect.runPromise(Effect.gen(function*() {
    for (let i = 0; i < count; i++) yield* call
  }))

const cockatielRetry = retry(handleAll, { maxAttempts: 2, backoff: new ExponentialBackoff() })
const cockatielRetryTimeout = wrap(cockatielRetry, timeout(60_000, TimeoutStrategy.Aggressive))

const policy = Resilient.policy({ target: "bench", maxAttempts: 3 })
const services = await Effect.runPromise(
  Layer.build(Layer.merge(RetryBudget.layerMemory(), ConcurrencyGate.layer({ target: "bench", limit: 10_000 })))
    .pipe(Effect.scoped)
)
const succeed = Effect.succeed(1)
const resilient = Resilient.retry(succeed, policy, { timeout: "30 seconds" })
const provided =
  <A, E>(call: Effect.Effect<A, E, RetryBudget.RetryBudget | ConcurrencyGate.ConcurrencyGate>) => (count: number) =>
    Effect.runPromise(
      Effect.gen(function*() {
        for (let i = 0; i < count; i++) yield* call
      }).pipe(Effect.provide(services))
    )

const cases: ReadonlyArray<readonly [string, (calls: number) => Promise<void>]> = [
  ["bare async function", inPromises(noop)],
  ["cockatiel 3.2 retry", inPromises(() => cockatielRetry.execute(noop))],
  ["cockatiel 3.2 retry + timeout", inPromises(() => cockatielRetryTimeout.execute(noop))],
  ["p-retry 7", inPromises(() => pRetry(noop, { retries: 2 }))],
  ["Effect.succeed, in one fiber", inOneFiber(succeed)],
  ["Effect.retry, in one fiber", inOneFiber(Effect.retry(succeed, Schedule.recurs(2)))],
  [
    "Effect.timeout + Effect.retry, in one fiber",
    inOneFiber(Effect.retry(Effect.timeout(succeed, "60 seconds"), Schedule.recurs(2)))
  ],
  ["resilient-ai: Resilient.retry, whole stack, in one fiber", provided(resilient)],
  [
    "resilient-ai: same, under Deadline.within at the entry point",
    provided(Deadline.within(Resilient.retry(succeed, policy), "30 seconds"))
  ]
]

console.log(`${calls} calls of a no-op that succeeds at once; median of ${rounds} rounds, the cases taking turns`)
console.log(`within each round so a busy moment of the machine touches them all; Node ${process.version}\n`)
// One warm-up round, then the measured rounds.
const samples = cases.map(() => [] as Array<number>)
for (let round = 0; round <= rounds; round++) {
  for (const [index, [, run]] of cases.entries()) {
    const started = performance.now()
    await run(calls)
    if (round > 0) samples[index]!.push(((performance.now() - started) * 1000) / calls)
  }
}
const rows = cases.map(([name], index) => [name, median(samples[index]!)] as const)
for (const [name, micros] of rows) console.log(`${name.padEnd(60)} ${micros.toFixed(2).padStart(8)} µs`)

const micros = (name: string) => rows.find(([label]) => label.startsWith(name))![1]
const ours = micros("resilient-ai: Resilient.retry")
console.log()
console.log(`resilient-ai whole stack / Effect.succeed:               ${(ours / micros("Effect.succeed")).toFixed(1)}×`)
console.log(`resilient-ai whole stack / Effect.timeout + retry:       ${(ours / micros("Effect.timeout")).toFixed(2)}×`)
console.log(
  `resilient-ai whole stack / cockatiel retry + timeout:    ${
    (ours / micros("cockatiel 3.2 retry + timeout")).toFixed(2)
  }×`
)
console.log(`resilient-ai whole stack / p-retry:                      ${(ours / micros("p-retry")).toFixed(2)}×`)
console.log(`goal: ≤ 15 µs per call inside a fiber — ${ours <= 15 ? "met" : "NOT met"} (${ours.toFixed(2)} µs)`)
