import { either, seeded, TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Backoff, Failure } from "@resilient-ai/policy"
import { Backoffs, EffectLine, Either } from "@resilient-ai/policy/internal"
import { Clock, Duration, Effect, Fiber, Ref, Schedule } from "effect"

const options = { base: "100 millis", cap: "2 seconds" } as const
/** `min(2000, 100·2^n)` for n = 0…7. */
const bounds = [100, 200, 400, 800, 1600, 2000, 2000, 2000] as const
/** The first eight delays of `fullJitter(options)` seeded with 42. */
const seed42Delays = [60, 90, 341, 536, 279, 1053, 546, 1250] as const

const rateLimited = (retryAfter: Duration.Duration) => new Failure.RateLimited({ status: 429, retryAfter })
const serverError = new Failure.ServerError({ status: 500 })

interface Step<Out> {
  readonly output: Out
  /** What the decision asks to sleep, `undefined` when the schedule is done. */
  readonly delay: number | undefined
}

/** Steps a schedule by hand at a fixed `now`, as the retry driver does, without sleeping. */
const stepAll = <Out, In>(
  schedule: Schedule.Schedule<Out, In>,
  inputs: ReadonlyArray<In>,
  now = 0
): Effect.Effect<Array<Step<Out>>> =>
  Effect.gen(function*() {
    const stepper = EffectLine.stepperOf(schedule)
    const steps: Array<Step<Out>> = []
    for (const input of inputs) {
      const { delay, output } = yield* stepper.step(now, input)
      steps.push({ output: output as Out, delay })
    }
    return steps
  })

const delaysOf = (steps: ReadonlyArray<Step<Duration.Duration>>) => steps.map((step) => step.delay)
const outputsOf = (steps: ReadonlyArray<Step<Duration.Duration>>) => steps.map((step) => Duration.toMillis(step.output))

/**
 * Retries an attempt that fails with `failures` in turn and then succeeds, under `TestClock`, and
 * returns the clock time of every attempt and the outcome.
 */
const retryTimes = <E>(schedule: Schedule.Schedule<unknown, E>, failures: ReadonlyArray<E>) =>
  Effect.gen(function*() {
    const times = yield* Ref.make<ReadonlyArray<number>>([])
    const attempt = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const made = yield* Ref.updateAndGet(times, (ts) => [...ts, now])
      const failure = failures[made.length - 1]
      return failure === undefined ? made.length : yield* Effect.fail(failure)
    })
    const fiber = yield* EffectLine.fork(either(Effect.retry(attempt, schedule)))
    yield* TestClock.adjust("5 minutes")
    const outcome = yield* Fiber.join(fiber)
    return { times: yield* Ref.get(times), outcome }
  })

/** Running sums: the clock time of each attempt when the first runs at 0. */
/** `schedule`, done after `times` recurrences: its state counts them. */
const atMost = <Out, In>(schedule: Schedule.Schedule<Out, In>, times: number) =>
  EffectLine.scheduleOf(
    { count: 0, stepper: undefined as EffectLine.Stepper<Out, In> | undefined },
    (now, input: In, state) => {
      const stepper = state.stepper ?? EffectLine.stepperOf(schedule)
      return Effect.map(
        stepper.step(now, input),
        ({ delay }) => [{ count: state.count + 1, stepper }, state.count < times ? delay : undefined] as const
      )
    }
  )

const cumulative = (delays: ReadonlyArray<number>) =>
  delays.reduce<Array<number>>((times, delay) => [...times, (times.at(-1) ?? 0) + delay], [0])

describe("Backoff", () => {
  describe("ceilingMillis", () => {
    it("doubles from base and stops at cap", () => {
      assert.deepStrictEqual(
        [0, 1, 2, 3, 4, 5, 6, 40].map((retry) => Backoffs.ceilingMillis(100, 2000, retry)),
        [100, 200, 400, 800, 1600, 2000, 2000, 2000]
      )
      assert.strictEqual(Backoffs.ceilingMillis(250, Number.POSITIVE_INFINITY, 3), 2000)
      assert.strictEqual(Backoffs.ceilingMillis(0, 1000, 5), 0)
      assert.strictEqual(Backoffs.ceilingMillis(100, 2000, 2000), 2000)
    })

    it("stays finite with an infinite cap, however many retries", () => {
      assert.strictEqual(Backoffs.ceilingMillis(100, Number.POSITIVE_INFINITY, 2000), Number.MAX_SAFE_INTEGER)
    })
  })

  describe("stepping by hand", () => {
    it.effect("reads the delay of Effect's own schedules", () =>
      Effect.gen(function*() {
        const [spaced] = yield* stepAll(Schedule.spaced("2 seconds"), [undefined], 10_000)
        assert.strictEqual(spaced?.delay, 2000)
        const recurs = yield* stepAll(Schedule.recurs(1), [undefined, undefined], 10_000)
        assert.deepStrictEqual(recurs.map((step) => step.delay), [0, undefined])
      }))
  })

  describe("fullJitter", () => {
    it.effect("draws exact, seeded delays within [0, min(cap, base·2^n)]", () =>
      Effect.gen(function*() {
        const steps = yield* stepAll(Backoff.fullJitter(options), Array.from({ length: 8 }, () => undefined))
        assert.deepStrictEqual(delaysOf(steps), [...seed42Delays])
        // the schedule outputs the delay it chose
        assert.deepStrictEqual(outputsOf(steps), [...seed42Delays])
        steps.forEach((step, n) => {
          const delay = step.delay ?? Number.NaN
          assert.isTrue(Number.isInteger(delay), `retry ${n}: ${delay} is whole milliseconds`)
          assert.isTrue(delay >= 0 && delay <= Math.min(2000, 100 * 2 ** n), `retry ${n}: ${delay} out of range`)
        })
      }).pipe(seeded(42)))

    it.effect("asks for the same delays relative to any now", () =>
      Effect.gen(function*() {
        const steps = yield* stepAll(
          Backoff.fullJitter(options),
          Array.from({ length: 8 }, () => undefined),
          1_700_000_000_000
        )
        assert.deepStrictEqual(delaysOf(steps), [...seed42Delays])
      }).pipe(seeded(42)))

    it.effect("is the same for the same seed and different for another", () =>
      Effect.gen(function*() {
        const inputs = Array.from({ length: 8 }, () => undefined)
        const again = yield* stepAll(Backoff.fullJitter(options), inputs).pipe(seeded(42))
        const other = yield* stepAll(Backoff.fullJitter(options), inputs).pipe(seeded(43))
        assert.deepStrictEqual(delaysOf(again), [...seed42Delays])
        assert.notDeepEqual(delaysOf(other), [...seed42Delays])
      }))

    it.effect("spreads draws over the whole range across many seeds", () =>
      Effect.gen(function*() {
        const inputs = Array.from({ length: bounds.length }, () => undefined)
        const byRetry: Array<Array<number>> = bounds.map(() => [])
        for (let seed = 0; seed < 200; seed++) {
          const steps = yield* stepAll(Backoff.fullJitter(options), inputs).pipe(seeded(seed))
          steps.forEach((step, n) => byRetry[n]?.push(step.delay ?? Number.NaN))
        }
        byRetry.forEach((draws, n) => {
          const bound = bounds[n] ?? Number.NaN
          assert.strictEqual(draws.length, 200)
          for (const delay of draws) {
            assert.isTrue(
              Number.isInteger(delay) && delay >= 0 && delay <= bound,
              `retry ${n}: ${delay} not in [0, ${bound}]`
            )
          }
          const max = Math.max(...draws)
          const min = Math.min(...draws)
          const mean = draws.reduce((sum, delay) => sum + delay, 0) / draws.length
          // the largest draw approaches the bound and the smallest approaches zero: full jitter, not
          // Schedule.jittered, which stays within 0.8–1.2 of the exponential delay
          assert.isAbove(max, 0.9 * bound, `retry ${n}: max ${max}`)
          assert.isBelow(min, 0.1 * bound, `retry ${n}: min ${min}`)
          assert.isTrue(mean > 0.4 * bound && mean < 0.6 * bound, `retry ${n}: mean ${mean}`)
          assert.isAbove(new Set(draws).size, 50, `retry ${n}: distinct draws`)
        })
      }))

    it.effect("never ends by itself and stays under the cap", () =>
      Effect.gen(function*() {
        const steps = yield* stepAll(Backoff.fullJitter(options), Array.from({ length: 60 }, () => undefined))
        for (const step of steps) {
          assert.isDefined(step.delay)
          assert.isTrue((step.delay ?? Number.NaN) >= 0 && (step.delay ?? Number.NaN) <= 2000)
        }
      }).pipe(seeded(7)))

    it.effect("makes Effect.retry sleep exactly the drawn delays", () =>
      Effect.gen(function*() {
        const failures = Array.from({ length: 7 }, () => serverError)
        const { outcome, times } = yield* retryTimes(Backoff.fullJitter(options), failures)
        assert.deepStrictEqual(outcome, Either.right(8))
        assert.deepStrictEqual(times, cumulative(seed42Delays.slice(0, 7)))
        assert.deepStrictEqual(times, [0, 60, 150, 491, 1027, 1306, 2359, 2905])
      }).pipe(seeded(42)))

    it.effect("does not retry before the drawn delay has passed", () =>
      Effect.gen(function*() {
        const count = yield* Ref.make(0)
        const attempt = Ref.updateAndGet(count, (n) => n + 1).pipe(
          Effect.flatMap((n) => n < 3 ? Effect.fail(serverError) : Effect.succeed(n))
        )
        const fiber = yield* EffectLine.fork(Effect.retry(attempt, Backoff.fullJitter(options)))
        yield* TestClock.adjust("59 millis")
        assert.strictEqual(yield* Ref.get(count), 1)
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(yield* Ref.get(count), 2)
        yield* TestClock.adjust("89 millis")
        assert.strictEqual(yield* Ref.get(count), 2)
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(yield* Fiber.join(fiber), 3)
      }).pipe(seeded(42)))
  })

  describe("withRetryAfter", () => {
    const hinted7s = rateLimited(Duration.seconds(7))

    it.effect("sleeps the hint plus a seeded spread in [0, 1 s) by default", () =>
      Effect.gen(function*() {
        const steps = yield* stepAll(Backoffs.withRetryAfter(Backoff.fullJitter(options)), [hinted7s, hinted7s])
        assert.deepStrictEqual(delaysOf(steps), [7448, 7669])
        assert.deepStrictEqual(outputsOf(steps), [7448, 7669])
      }).pipe(seeded(42)))

    it.effect("keeps the spread in [0, 1 s) across many seeds, and uses the whole of it", () =>
      Effect.gen(function*() {
        const delays: Array<number> = []
        for (let seed = 0; seed < 200; seed++) {
          const [step] = yield* stepAll(Backoffs.withRetryAfter(Backoff.fullJitter(options)), [hinted7s]).pipe(
            seeded(seed)
          )
          delays.push(step?.delay ?? Number.NaN)
        }
        for (const delay of delays) {
          assert.isTrue(Number.isInteger(delay) && delay >= 7000 && delay < 8000, `${delay} not in [7000, 8000)`)
        }
        assert.isAbove(Math.max(...delays), 7900)
        assert.isBelow(Math.min(...delays), 7100)
        assert.isAbove(new Set(delays).size, 100)
      }))

    it.effect("takes a custom spread", () =>
      Effect.gen(function*() {
        const [quarter] = yield* stepAll(
          Backoffs.withRetryAfter(Backoff.fullJitter(options), { spread: "250 millis" }),
          [hinted7s]
        ).pipe(seeded(42))
        assert.strictEqual(quarter?.delay, 7112)
        for (let seed = 0; seed < 50; seed++) {
          const [none] = yield* stepAll(
            Backoffs.withRetryAfter(Backoff.fullJitter(options), { spread: Duration.zero }),
            [hinted7s]
          ).pipe(seeded(seed))
          assert.strictEqual(none?.delay, 7000)
        }
      }))

    it.effect("offers both call styles", () =>
      Effect.gen(function*() {
        const inner = Backoff.fullJitter(options)
        const spread = { spread: "250 millis" } as const
        const dataFirst = yield* stepAll(Backoffs.withRetryAfter(inner, spread), [hinted7s]).pipe(seeded(42))
        const dataLast = yield* stepAll(inner.pipe(Backoffs.withRetryAfter(spread)), [hinted7s]).pipe(seeded(42))
        const defaults = yield* stepAll(Backoffs.withRetryAfter()(inner), [hinted7s]).pipe(seeded(42))
        assert.deepStrictEqual(delaysOf(dataFirst), [7112])
        assert.deepStrictEqual(delaysOf(dataLast), [7112])
        assert.deepStrictEqual(delaysOf(defaults), [7448])
      }))

    it.effect("falls back to the inner schedule's delay without a hint", () =>
      Effect.gen(function*() {
        const jitter = yield* stepAll(
          Backoffs.withRetryAfter(Backoff.fullJitter(options)),
          [serverError, new Failure.RateLimited({ status: 429 }), new Failure.ConnectFailed({ detail: "refused" })]
        ).pipe(seeded(42))
        assert.deepStrictEqual(delaysOf(jitter), [60, 90, 341])
        assert.deepStrictEqual(outputsOf(jitter), [60, 90, 341])
        const spaced = yield* stepAll(Backoffs.withRetryAfter(Schedule.spaced("2 seconds")), [serverError], 5000)
        assert.deepStrictEqual(delaysOf(spaced), [2000])
        assert.deepStrictEqual(outputsOf(spaced), [2000])
      }))

    it.effect("reads the hint from any input with a Duration retryAfter, and only a Duration", () =>
      Effect.gen(function*() {
        const steps = yield* stepAll(
          Backoffs.withRetryAfter(Schedule.spaced("2 seconds"), { spread: Duration.zero }),
          [{ retryAfter: Duration.millis(1234) }, { retryAfter: 1234 }, "Retry-After: 5", null]
        )
        assert.deepStrictEqual(delaysOf(steps), [1234, 2000, 2000, 2000])
      }))

    it.effect("spreads a short hint in proportion to it, within [hint, 1.5 × hint), as Envoy does", () =>
      Effect.gen(function*() {
        // Retry-After: 0.1 and retry-after-ms: 10, with the default 1 s cap; seed 42 draws 0.679…, then 0.944….
        const tenth = yield* stepAll(Backoffs.withRetryAfter(Backoff.fullJitter(options)), [
          rateLimited(Duration.millis(100)),
          rateLimited(Duration.millis(100))
        ]).pipe(seeded(42))
        assert.deepStrictEqual(delaysOf(tenth), [122, 133])
        const tenMillis = yield* stepAll(Backoffs.withRetryAfter(Backoff.fullJitter(options)), [
          rateLimited(Duration.millis(10)),
          rateLimited(Duration.millis(10))
        ]).pipe(seeded(42))
        assert.deepStrictEqual(delaysOf(tenMillis), [12, 13])
        // Half of a 1 s hint is 500 ms, under the cap; half of 7 s is over it, so the cap decides.
        const [second] = yield* stepAll(Backoffs.withRetryAfter(Backoff.fullJitter(options)), [
          rateLimited(Duration.seconds(1))
        ]).pipe(seeded(42))
        assert.strictEqual(second?.delay, 1224)
      }))

    it.effect("keeps a short hint's spread under half the hint across many seeds, and uses the whole of it", () =>
      Effect.gen(function*() {
        const delays: Array<number> = []
        for (let seed = 0; seed < 200; seed++) {
          const [step] = yield* stepAll(
            Backoffs.withRetryAfter(Backoff.fullJitter(options)),
            [rateLimited(Duration.millis(100))]
          ).pipe(seeded(seed))
          delays.push(step?.delay ?? Number.NaN)
        }
        for (const delay of delays) {
          assert.isTrue(Number.isInteger(delay) && delay >= 100 && delay < 150, `${delay} not in [100, 150)`)
        }
        assert.isAbove(Math.max(...delays), 145)
        assert.isBelow(Math.min(...delays), 105)
      }))

    it.effect("sleeps a hint of zero as zero: the provider said now, and the spread is half of nothing", () =>
      Effect.gen(function*() {
        for (let seed = 0; seed < 50; seed++) {
          const steps = yield* stepAll(
            Backoffs.withRetryAfter(Backoff.fullJitter(options), { spread: "5 seconds" }),
            [rateLimited(Duration.zero), rateLimited(Duration.zero)]
          ).pipe(seeded(seed))
          assert.deepStrictEqual(delaysOf(steps), [0, 0])
        }
      }))

    it.effect("replaces the formula even when the hint is shorter, and a zero hint means now", () =>
      Effect.gen(function*() {
        const steps = yield* stepAll(
          Backoffs.withRetryAfter(Schedule.spaced("10 seconds"), { spread: Duration.zero }),
          [rateLimited(Duration.millis(300)), rateLimited(Duration.zero)]
        )
        assert.deepStrictEqual(delaysOf(steps), [300, 0])
      }))

    it.effect("is done when the inner schedule is done, even with a hint", () =>
      Effect.gen(function*() {
        const limited = atMost(Backoff.fullJitter(options), 2)
        const steps = yield* stepAll(Backoffs.withRetryAfter(limited), [hinted7s, hinted7s, hinted7s])
        assert.deepStrictEqual(delaysOf(steps), [7448, 7669, undefined])
        assert.deepStrictEqual(outputsOf(steps), [7448, 7669, 0])
      }).pipe(seeded(42)))

    it.effect("makes Effect.retry wait for the hint, and stop when the inner schedule stops", () =>
      Effect.gen(function*() {
        const limited = atMost(Backoff.fullJitter(options), 2)
        const failures = Array.from({ length: 5 }, () => hinted7s)
        const { outcome, times } = yield* retryTimes(Backoffs.withRetryAfter(limited), failures)
        assert.deepStrictEqual(times, [0, 7448, 15117])
        assert.deepStrictEqual(outcome, Either.left(hinted7s))
      }).pipe(seeded(42)))
  })

  describe("fullJitterWithRetryAfter", () => {
    it.effect("sleeps the hint when there is one and keeps counting retries for the formula", () =>
      Effect.gen(function*() {
        const schedule = Backoffs.fullJitterWithRetryAfter({ ...options, spread: "1 second" })
        const { outcome, times } = yield* retryTimes(schedule, [rateLimited(Duration.seconds(3)), serverError])
        assert.deepStrictEqual(outcome, Either.right(3))
        // 3000 + ⌊0.679·1000⌋, then the second retry's full jitter ⌊0.421·(200 + 1)⌋ (the first retry's
        // bound would give ⌊0.421·101⌋ = 42)
        assert.deepStrictEqual(times, [0, 3448, 3619])
      }).pipe(seeded(42)))

    it.effect("defaults the spread to one second", () =>
      Effect.gen(function*() {
        const steps = yield* stepAll(Backoffs.fullJitterWithRetryAfter(options), [rateLimited(Duration.seconds(7))])
        assert.deepStrictEqual(delaysOf(steps), [7448])
      }).pipe(seeded(42)))
  })
})
