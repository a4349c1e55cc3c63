/**
 * The backoff's parts the engine, the storm and the tests read: the exponential envelope, the
 * provider's hint in place of the formula, the delay a schedule's decision asks for, and full jitter
 * with the hint winning as one schedule.
 */
import { type DurationInput, scheduleOf, type StepDelay, type Stepper, stepperOf } from "#effect-line"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import { fullJitter } from "../Backoff.js"
import { retryAfterOf } from "./failures.js"

/**
 * `min(cap, base·2^retry)` in milliseconds, with `retry` counted from 0. Never infinite, even with
 * an infinite cap after a thousand retries: an infinite bound would draw `NaN` or `Infinity`.
 */
export const ceilingMillis = (baseMillis: number, capMillis: number, retry: number): number =>
  Math.min(capMillis, baseMillis * 2 ** retry, Number.MAX_SAFE_INTEGER)

/** A uniform whole number of milliseconds in `[0, bound]`, from a uniform `fraction` in `[0, 1)`. */
export const wholeMillisUpTo = (fraction: number, bound: number): number =>
  Math.min(Math.floor(bound), Math.floor(fraction * (Math.floor(bound) + 1)))

/** Options for honouring the provider's hint. */
export interface RetryAfterOptions {
  /**
   * The most random spread (whole milliseconds) added to a hint, so clients handed the same
   * `Retry-After` do not reconverge into one wave. The spread is drawn from `[0, hint / 2)`, as
   * Envoy waits within `[reset, 1.5 × reset)`, and this caps it. Defaults to 1 second.
   */
  readonly spread?: DurationInput | undefined
}

/**
 * Lets a failure's `Retry-After` hint replace the formula: when the failure carries a hint, the
 * delay is the hint plus a draw from `[0, min(spread, hint / 2))`; otherwise `self` decides.
 *
 * The spread grows with the hint because a provider that says "100 ms" means it: a flat second on
 * top would multiply its wait by eleven. A hint of zero (`Retry-After: 0`, a date in the past) is
 * the provider saying "now", and gets no spread: the clients it answered reached it at different
 * instants, so their retries are spread already, and the retry budget bounds them.
 *
 * `self` still steps on every failure, so its count of retries stays true, and when it is done the
 * result is done.
 */
export const withRetryAfter: {
  (options?: RetryAfterOptions): <Out, In>(self: Schedule.Schedule<Out, In>) => Schedule.Schedule<Duration.Duration, In>
  <Out, In>(self: Schedule.Schedule<Out, In>, options?: RetryAfterOptions): Schedule.Schedule<Duration.Duration, In>
} = dual(
  (args) => Schedule.isSchedule(args[0]),
  <Out, In>(
    self: Schedule.Schedule<Out, In>,
    options?: RetryAfterOptions
  ): Schedule.Schedule<Duration.Duration, In> => {
    const spreadMillis = Duration.toMillis(options?.spread ?? Duration.seconds(1))
    // Each run steps `self` from its start: the stepper is made on the run's first step.
    return scheduleOf(
      undefined as Stepper<Out, In> | undefined,
      (now, input: In, state) => {
        const inner = state ?? stepperOf(self)
        return Effect.flatMap(
          inner.step(now, input),
          ({ delay }): Effect.Effect<readonly [Stepper<Out, In>, StepDelay]> => {
            if (delay === undefined) return Effect.succeed([inner, undefined] as const)
            const hint = retryAfterOf(input)
            if (hint === undefined) return Effect.succeed([inner, delay] as const)
            const hintMillis = Duration.toMillis(hint)
            return Effect.map(
              Random.next,
              (fraction) => [inner, hintMillis + Math.floor(fraction * Math.min(spreadMillis, hintMillis / 2))] as const
            )
          }
        )
      }
    )
  }
)

/** Options of the default backoff. */
export interface DefaultOptions extends RetryAfterOptions {
  readonly base: DurationInput
  readonly cap: DurationInput
}

/**
 * Full jitter, with the provider's hint winning: as one schedule (for `Effect.retry`), the delays a
 * policy gives, whose engine steps full jitter and lets the hint replace its delay.
 */
export const fullJitterWithRetryAfter = (options: DefaultOptions): Schedule.Schedule<Duration.Duration> =>
  withRetryAfter(fullJitter(options), options)
