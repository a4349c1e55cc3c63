/**
 * Full jitter, the backoff a policy uses between retries, as a `Schedule` of its own for any
 * `Effect.retry`.
 *
 * Exponential backoff without jitter only postpones a synchronised spike: a thousand clients that
 * failed together wake together. Full jitter draws each delay uniformly from
 * `[0, min(cap, base·2^n)]`, which is what decorrelates them. `Schedule.jittered` scales the delay
 * by 0.8–1.2, which keeps clients in lockstep, so it is not used here.
 *
 * The schedule outputs the delay it chose, and draws from Effect's `Random`, so a test that provides
 * `Random.make(seed)` gets the exact same delays every run.
 *
 * ```ts
 * import { Backoff } from "@resilient-ai/policy"
 * import { Effect, Schedule } from "effect"
 *
 * declare const flaky: Effect.Effect<string, Error>
 * const jitter = Backoff.fullJitter({ base: "100 millis", cap: "5 seconds" })
 * const answer = flaky.pipe(Effect.retry(Schedule.intersect(jitter, Schedule.recurs(4))))
 * ```
 */
import { type DurationInput, scheduleOf } from "#effect-line"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import { ceilingMillis, wholeMillisUpTo } from "./internal/backoff.js"

/**
 * Full jitter: the n-th retry (from 0) waits a uniform draw from `[0, min(cap, base·2^n)]`, in whole
 * milliseconds: `base` bounds the first retry's delay, `cap` every delay. Never ends by itself; as a
 * policy's backoff, the attempt ceiling, budget and deadline end a sequence.
 */
export const fullJitter = (options: {
  readonly base: DurationInput
  readonly cap: DurationInput
}): Schedule.Schedule<Duration.Duration> => {
  const baseMillis = Duration.toMillis(options.base)
  const capMillis = Duration.toMillis(options.cap)
  return scheduleOf(
    0,
    (_now, _input: unknown, retry: number) =>
      Effect.map(
        Random.next,
        (fraction) => [retry + 1, wholeMillisUpTo(fraction, ceilingMillis(baseMillis, capMillis, retry))] as const
      )
  )
}
