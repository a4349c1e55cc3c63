/**
 * What a resilient call costs when its attempt succeeds: our whole stack (deadline, per-attempt
 * timeout, budget, gate, metrics, retry) next to the bare attempt, Effect's own retry and timeout,
 * and cockatiel and p-retry wrapping the same attempt. The headline attempt suspends once and
 * resumes on the next turn of the event loop, as every HTTP attempt does; an attempt that completes
 * without suspending takes a fast path no real call takes, so it is measured as a lower bound only.
 *
 * Run with `pnpm bench`, which runs it once per Effect line (`lines.ts`), each bundled from the
 * sources with that line's Effect, so each line's stack is compared with that line's own
 * `Effect.timeout` + `Effect.retry`, and both with cockatiel, in one run.
 */
import { Deadline, Resilient } from "@resilient-ai/policy"
import { EffectLine } from "@resilient-ai/policy/internal"
import { ExponentialBackoff, handleAll, retry, timeout, TimeoutStrategy, wrap } from "cockatiel"
import { Effect, Fiber, Schedule } from "effect"
import pRetry from "p-retry"

const calls = Number(process.env.BENCH_CALLS ?? 50_000)
const rounds = Number(process.env.BENCH_ROUNDS ?? 9)

/** Median of the rounds' microseconds per call. */
const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const noop = async () => 1
/** A promise that resolves on the next turn of the event loop: the least an HTTP attempt suspends. */
const nextTurn = () => new Promise<number>((resolve) => setImmediate(() => resolve(1)))
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

// Its budget and gate live in the process's coordination, made by the first call, as in an application.
const policy = await Effect.runPromise(
  Resilient.policy({ target: "bench", maxAttempts: 3, gate: { limit: 10_000 } })
)
// The same, with the key's pace kept: limits no call reaches, so each attempt reserves its request
// and tokens and goes at once, as a first-try success under a paced key does.
const pacedPolicy = await Effect.runPromise(
  Resilient.policy({
    target: "bench-paced",
    maxAttempts: 3,
    gate: { limit: 10_000 },
    rateLimit: { requestsPerMinute: 1e12, tokensPerMinute: 1e15 }
  })
)
const instant = Effect.succeed(1)
/** An attempt that suspends once, resuming on the next turn of the event loop, as every HTTP attempt does. */
const suspends = EffectLine.callback<number>((resume) => {
  setImmediate(() => resume(Effect.succeed(1)))
})

/** The same cases around an attempt: the libraries a user would pick instead, and ours. */
const casesFor = (
  label: string,
  promised: () => Promise<number>,
  attempt: Effect.Effect<number>
): ReadonlyArray<readonly [string, (calls: number) => Promise<void>]> => [
  [`${label}: bare async function`, inPromises(promised)],
  [`${label}: cockatiel 3.2 retry`, inPromises(() => cockatielRetry.execute(promised))],
  [`${label}: cockatiel 3.2 retry + timeout`, inPromises(() => cockatielRetryTimeout.execute(promised))],
  [`${label}: p-retry 7`, inPromises(() => pRetry(promised, { retries: 2 }))],
  [`${label}: the attempt alone, in one fiber`, inOneFiber(attempt)],
  [`${label}: Effect.retry, in one fiber`, inOneFiber(Effect.retry(attempt, Schedule.recurs(2)))],
  // What any stack pays that can end an attempt at its timeout and go on with the call: the attempt
  // in a fiber of its own, joined. Effect's timeout forks two (the attempt and its sleep).
  [
    `${label}: the attempt in a fiber of its own, joined`,
    inOneFiber(Effect.flatMap(EffectLine.fork(attempt), Fiber.join))
  ],
  [
    `${label}: Effect.timeout + Effect.retry, in one fiber`,
    inOneFiber(Effect.retry(Effect.timeout(attempt, "60 seconds"), Schedule.recurs(2)))
  ],
  [
    `${label}: resilient-ai whole stack, in one fiber`,
    inOneFiber(Resilient.retry(attempt, policy, { timeout: "30 seconds" }))
  ],
  [
    `${label}: resilient-ai whole stack, paced by the rate limiter`,
    inOneFiber(Resilient.retry(attempt, pacedPolicy, { timeout: "30 seconds", tokens: 1_000 }))
  ],
  [
    `${label}: resilient-ai, under Deadline.within at the entry point`,
    inOneFiber(Deadline.within(Resilient.retry(attempt, policy), "30 seconds"))
  ]
]

const cases = [...casesFor("suspends", nextTurn, suspends), ...casesFor("instant", noop, instant)]

console.log(
  `${calls} calls of an attempt that succeeds; median of ${rounds} rounds, the cases taking turns within each`
)
console.log(
  `round so a busy moment of the machine touches them all; Node ${process.version}, ${
    process.env.BENCH_LINE ?? "Effect 3"
  }`
)
console.log(
  `"suspends": the attempt resumes on the next turn of the event loop, as every HTTP attempt does (the headline);`
)
console.log(`"instant": it completes without suspending, a fast path no real call takes (a lower bound only)\n`)
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
for (const [name, micros] of rows) console.log(`${name.padEnd(66)} ${micros.toFixed(2).padStart(8)} µs`)

const micros = (name: string) => rows.find(([label]) => label === name)![1]
for (const label of ["suspends", "instant"]) {
  const ours = micros(`${label}: resilient-ai whole stack, in one fiber`)
  const ratio = (other: string) => (ours / micros(`${label}: ${other}`)).toFixed(2)
  console.log(
    `\n${
      label === "suspends"
        ? "an attempt that suspends (every real call)"
        : "an attempt that completes at once (lower bound)"
    }:`
  )
  console.log(`  resilient-ai whole stack / cockatiel retry + timeout:  ${ratio("cockatiel 3.2 retry + timeout")}×`)
  console.log(
    `  resilient-ai whole stack / Effect.timeout + retry:     ${ratio("Effect.timeout + Effect.retry, in one fiber")}×`
  )
  console.log(`  resilient-ai whole stack / p-retry:                    ${ratio("p-retry 7")}×`)
  console.log(`  resilient-ai whole stack / the attempt alone:          ${ratio("the attempt alone, in one fiber")}×`)
  console.log(
    `  the attempt in a fiber, joined / Effect.timeout + retry: ${
      (micros(`${label}: the attempt in a fiber of its own, joined`) /
        micros(`${label}: Effect.timeout + Effect.retry, in one fiber`)).toFixed(2)
    }× (the floor of any stack that times an attempt out and goes on)`
  )
  console.log(
    `  the rate limiter's cost: paced / unpaced whole stack:   ${
      (micros(`${label}: resilient-ai whole stack, paced by the rate limiter`) / ours).toFixed(2)
    }×`
  )
}
const headline = micros("suspends: resilient-ai whole stack, in one fiber")
const cockatiel = micros("suspends: cockatiel 3.2 retry + timeout")
const effectTimeout = micros("suspends: Effect.timeout + Effect.retry, in one fiber")
console.log()
console.log(
  `goal: whole stack ≤ 1.0× cockatiel retry + timeout with a suspending attempt — ${
    headline <= cockatiel ? "met" : "NOT met"
  } (${(headline / cockatiel).toFixed(2)}×)`
)
console.log(
  `goal: whole stack ≤ 0.5× Effect.timeout + Effect.retry with a suspending attempt — ${
    headline <= 0.5 * effectTimeout ? "met" : "NOT met"
  } (${(headline / effectTimeout).toFixed(2)}×)`
)
