/**
 * Simulated time for Effect programs: a clock that jumps from event to event, and a scheduler
 * that runs every ready fiber before time moves on, so minutes of a fleet run in seconds and the
 * same seed gives the same run, to the event.
 *
 * Effect's `TestClock` gives the same determinism, but each of its wake-ups waits on real timers
 * to see that every fiber is suspended (two `setTimeout`s, about 2 ms), which is hours for the
 * hundreds of thousands of sleeps of a storm. Here the scheduler is synchronous: when its queue
 * is empty, every fiber is suspended by construction, and the clock can jump straight to the
 * next timer. The program is an ordinary Effect, so it runs the shipped policy code unchanged:
 * the policy reads time from `Clock`, sleeps with `Effect.sleep` and draws from `Random`.
 */
import { EffectLine } from "@resilient-ai/policy/internal"
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"

interface Timer {
  readonly at: number
  readonly order: number
  readonly run: () => void
  live: boolean
}

const earlier = (a: Timer, b: Timer) => a.at < b.at || (a.at === b.at && a.order < b.order)

/** A binary heap of timers, earliest first; equal times keep their order of arrival. */
class Timers {
  private readonly heap: Array<Timer> = []

  get size(): number {
    return this.heap.length
  }

  push(timer: Timer): void {
    const heap = this.heap
    heap.push(timer)
    let index = heap.length - 1
    while (index > 0) {
      const parent = (index - 1) >> 1
      if (!earlier(heap[index]!, heap[parent]!)) break
      ;[heap[index], heap[parent]] = [heap[parent]!, heap[index]!]
      index = parent
    }
  }

  pop(): Timer | undefined {
    const heap = this.heap
    const top = heap[0]
    const last = heap.pop()
    if (top === undefined || last === undefined || heap.length === 0) return top
    heap[0] = last
    let index = 0
    for (;;) {
      const left = 2 * index + 1
      const right = left + 1
      let smallest = index
      if (left < heap.length && earlier(heap[left]!, heap[smallest]!)) smallest = left
      if (right < heap.length && earlier(heap[right]!, heap[smallest]!)) smallest = right
      if (smallest === index) return top
      ;[heap[index], heap[smallest]] = [heap[smallest]!, heap[index]!]
      index = smallest
    }
  }
}

/**
 * The simulation's clock, with timers for models that are not fibers; `service` is it as Effect's
 * `Clock`, which the program's fibers read and sleep on.
 */
export class SimulatedClock {
  private nowMillis = 0
  private order = 0
  private readonly timers = new Timers()

  /** Simulated time, in milliseconds from the start. */
  currentMillis(): number {
    return this.nowMillis
  }

  readonly service: Clock.Clock = EffectLine.makeClock({
    millis: () => this.nowMillis,
    sleep: (millis) =>
      EffectLine.callback<void>((resume) => {
        const cancel = this.schedule(millis, () => resume(Effect.void))
        return Effect.sync(cancel)
      })
  })

  /** Runs `run` after `delayMillis` of simulated time; the returned function cancels it. */
  schedule(delayMillis: number, run: () => void): () => void {
    const now = this.nowMillis
    // A positive delay must move time: a delay below the precision of `now` would otherwise fire
    // at the same instant, and a wait for "a moment later" would never end.
    const at = delayMillis > 0
      ? Math.max(now + delayMillis, now + Math.max(1, Math.abs(now)) * Number.EPSILON * 2)
      : now
    const timer: Timer = { at, order: this.order++, run, live: true }
    this.timers.push(timer)
    return () => {
      timer.live = false
    }
  }

  /** Moves time to the next live timer and runs it; false when none is left or the next is after `until`. */
  advance(until: number): boolean {
    for (;;) {
      const timer = this.timers.pop()
      if (timer === undefined) return false
      if (!timer.live) continue
      if (timer.at > until) {
        this.timers.push(timer)
        return false
      }
      this.nowMillis = timer.at
      timer.run()
      return true
    }
  }
}

/** Runs fiber work as soon as it is ready, all of it, before simulated time moves on. */
class SimulatedScheduler {
  private ready: Array<() => void> = []

  readonly scheduler = EffectLine.schedulerOf({
    schedule: (task) => void this.ready.push(task),
    flush: () => this.runReady(),
    // Fibers share one thread: a long-running one gives the others a turn now and then.
    opsBeforeYield: 2048
  })

  runReady(): void {
    while (this.ready.length > 0) {
      const batch = this.ready
      this.ready = []
      for (const task of batch) task()
    }
  }
}

/**
 * A seeded generator of doubles in [0, 1): PCG-XSH-RR 32 as Effect 3's `Random.make(seed)` runs
 * it (its seeding, its 53-bit doubles from two outputs), so a seed gives the same draws as it
 * always has, on either Effect line (Effect 4 seeds a generator of another kind).
 */
const seeded = (seed: number): () => number => {
  const mask = (1n << 64n) - 1n
  let state = 0n
  const output = (): number => {
    const old = state
    state = (old * 0x5851f42d4c957f2dn + 0x14057b7ef767814fn) & mask
    const xorshifted = Number((((old >> 18n) ^ old) >> 27n) & 0xffffffffn)
    const rotation = Number(old >> 59n)
    return ((xorshifted >>> rotation) | (xorshifted << (-rotation & 31))) >>> 0
  }
  output()
  state = (state + BigInt(hashNumber(seed) >>> 0)) & mask
  output()
  return () => ((output() & 0x03ffffff) * 134217728 + (output() & 0x07ffffff)) / 9007199254740992
}

/** Effect 3's hash of a number, which `Random.make` seeds its generator with. */
const hashNumber = (n: number): number => {
  if (n !== n || n === Infinity) return 0
  let h = n | 0
  if (h !== n) h ^= n * 0xffffffff
  while (n > 0xffffffff) h ^= n /= 0xffffffff
  return (h & 0xbfffffff) | ((h >>> 1) & 0x40000000)
}

/** The clock of the running simulation, for models that schedule events without a fiber. */
export class CurrentClock extends EffectLine.Service<CurrentClock, SimulatedClock>()(
  "@resilient-ai/storm/Simulation/CurrentClock"
) {}

/** What a simulation run produced. */
export interface Outcome<A> {
  readonly value: A
  /** Simulated time when the program ended. */
  readonly simulatedMillis: number
  /** Timers fired. */
  readonly events: number
  /** Real time the run took. */
  readonly wallMillis: number
}

/**
 * Runs `program` in simulated time with its `Random` seeded with `seed`, synchronously. Time stops
 * at `horizonMillis` at the latest: fibers still sleeping then are abandoned with the run. A
 * program that fails or dies throws here, with the cause.
 */
export const run = <A, E>(
  program: Effect.Effect<A, E, CurrentClock>,
  options: { readonly seed: number; readonly horizonMillis?: number | undefined }
): Outcome<A> => {
  const started = performance.now()
  const clock = new SimulatedClock()
  const scheduler = new SimulatedScheduler()
  const fiber = Effect.runFork(
    // A storm's hundreds of thousands of attempt log lines would cost more than the storm.
    EffectLine.withoutLogs(
      EffectLine.withRandomFrom(
        EffectLine.withClock(Effect.provideService(program, CurrentClock, clock), clock.service),
        seeded(options.seed)
      )
    ),
    { scheduler: scheduler.scheduler }
  )
  const horizon = options.horizonMillis ?? Number.POSITIVE_INFINITY
  let events = 0
  for (;;) {
    scheduler.runReady()
    const exit = EffectLine.pollFiber(fiber)
    if (exit !== undefined) {
      if (Exit.isFailure(exit)) {
        throw new Error(`simulation failed at ${clock.currentMillis()} ms`, { cause: exit.cause })
      }
      return {
        value: exit.value,
        simulatedMillis: clock.currentMillis(),
        events,
        wallMillis: performance.now() - started
      }
    }
    if (!clock.advance(horizon)) {
      throw new Error(
        `simulation stalled at ${clock.currentMillis()} ms: nothing left to run before the horizon`
      )
    }
    events++
  }
}
