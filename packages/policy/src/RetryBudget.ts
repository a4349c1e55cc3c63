/**
 * The retry budget: retries may add at most `ratio` of the successful traffic over a sliding
 * window, and never fewer than `minPerSecond` per second of it.
 *
 * An attempt ceiling is a per-call property, so it bounds nothing in aggregate: ten thousand
 * callers times three attempts is thirty thousand requests at the moment the provider can least
 * serve them. A ratio is a property of the traffic: while the provider is healthy, successes are
 * plentiful and a lone retry goes through; when it is broadly down, successes fall and the
 * allowance falls with them, down to the floor, without anyone deploying anything.
 *
 * It can also learn whether retries pay. Retries that almost never turn into successes (a failure
 * that repeats on every attempt of a call) are load and latency for nothing, so with
 * `shareWhenRetriesFail` below 1 the allowance, floor included, shrinks with the share of recent
 * retries that succeeded, down to that share of itself; independent failures, which a retry fixes,
 * keep all of it.
 *
 * The budget is a service so the same policy runs per process (`make`) or per fleet (on Redis, with
 * `RedisCoordination` in `@resilient-ai/redis`), whichever the `Coordination` in context makes; `disabled` is for
 * fixed-capacity targets, which should shed instead of retrying, and `unlimited` and `recording`
 * are for tests.
 */
import { currentClock, type DurationInput, Either, nowMillis } from "#effect-line"
import * as Effect from "effect/Effect"
import * as FastPath from "./internal/fastPath.js"
import { settings, Window } from "./internal/retryBudget.js"
import type { InvalidSettings } from "./Settings.js"

/** What the budget holds right now. */
export interface Snapshot {
  /** Successful calls recorded in the window. */
  readonly successes: number
  /** Retries granted in the window. */
  readonly retries: number
  /** Retries in the window that a call succeeded on (this process's, for a fleet's budget). */
  readonly paid: number
  /** How many retries the window allows: `payoff × max(floor, ratio × successes)`. */
  readonly allowance: number
}

/** Grants or refuses retries. Decisions never fail: a budget that cannot decide must still answer. */
export interface Service {
  /**
   * Asks for one retry after `failure` (one of the toolkit's failures, or the caller's own error when
   * a `classify` judged it); when granted, it is counted against the budget.
   */
  readonly tryAcquire: (failure: unknown) => Effect.Effect<boolean>
  /** Records one successful call (not attempt: a logical call succeeds once), which took `attempts`. */
  readonly recordSuccess: (attempts: number) => Effect.Effect<void>
  readonly snapshot: Effect.Effect<Snapshot>
}

/** Settings of a ratio budget. */
export interface Options {
  /** Share of successful calls that retries may add, from 0 to 1. Default 0.1. */
  readonly ratio?: number | undefined
  /** The window successes and retries are counted over. Default 60 seconds. */
  readonly window?: DurationInput | undefined
  /** Retries per second always allowed, so a quiet service can still retry. Default 5. */
  readonly minPerSecond?: number | undefined
  /** Buckets the window is kept in: the window slides one bucket at a time. Default 60. */
  readonly buckets?: number | undefined
  /**
   * The share of the allowance kept while no recent retry succeeds: it grows back to all of it as
   * the share of retries that succeed does (0.05 keeps a twentieth). Default 1: the whole allowance,
   * whether retries pay or not.
   */
  readonly shareWhenRetriesFail?: number | undefined
}

/**
 * Builds an in-memory budget whose time is Effect's `Clock`, so `TestClock` drives it.
 * Bad options fail with `InvalidSettings`, when the program is assembled, not on the first retry.
 */
export const make = (options?: Options): Effect.Effect<Service, InvalidSettings> =>
  Effect.flatMap(
    Effect.suspend(() => Either.toEffect(settings(options))),
    (checked) =>
      Effect.map(currentClock, (clock) => {
        const window = new Window(checked)
        const tryAcquire = Effect.sync(() => window.tryAcquire(nowMillis(clock)))
        const recordSuccessNow = (attempts: number) => window.recordSuccess(nowMillis(clock), attempts)
        // Without learning, what retries did changes nothing: no need to hear of each failure.
        const recordFailure = checked.shareWhenRetriesFail < 1
          ? (_: unknown, attempt: number) =>
            attempt > 1 ? Effect.sync(() => window.recordFailure(nowMillis(clock), attempt)) : Effect.void
          : undefined
        const service: FastPath.With<Service, FastPath.Budget> = {
          tryAcquire: () => tryAcquire,
          recordSuccess: (attempts) => Effect.sync(() => recordSuccessNow(attempts)),
          snapshot: Effect.sync(() => window.snapshot(nowMillis(clock))),
          [FastPath.key]: { recordSuccessNow, recordFailure }
        }
        return service
      })
  )

/** A budget that never grants a retry: for fixed-capacity targets, which shed rather than retry. */
export const disabled: Service = {
  tryAcquire: () => Effect.succeed(false),
  recordSuccess: () => Effect.void,
  snapshot: Effect.succeed({ successes: 0, retries: 0, paid: 0, allowance: 0 })
}

/**
 * A budget that grants every retry: what a policy without a budget does (only the attempt
 * ceiling bounds it). For comparisons and tests, not for production.
 */
export const unlimited: Service = {
  tryAcquire: () => Effect.succeed(true),
  recordSuccess: () => Effect.void,
  snapshot: Effect.succeed({ successes: 0, retries: 0, paid: 0, allowance: Number.POSITIVE_INFINITY })
}

/** What a budget was asked, in order: a retry (and whether it was granted), or a success recorded. */
export type Decision =
  | { readonly _tag: "Retry"; readonly failure: unknown; readonly granted: boolean }
  | { readonly _tag: "Success"; readonly attempts: number }

/** A budget that records every decision it is asked for, for a test to read back. */
export interface Recording extends Service {
  readonly decisions: Effect.Effect<ReadonlyArray<Decision>>
}

/**
 * Wraps `budget` (by default `unlimited`) so every decision asked of it is recorded. Swapped in
 * with `Coordination.layerWith({ budget: recording })`, it shows which retries a test's calls asked
 * for and got.
 */
export const recording = (budget: Service = unlimited): Effect.Effect<Recording> =>
  Effect.sync(() => {
    const decisions: Array<Decision> = []
    // The inner budget's hooks still hear of calls and failures; its successes go through the record.
    const inner = FastPath.budget(budget)
    const recorded: FastPath.With<Recording, FastPath.Budget> = {
      tryAcquire: (failure) =>
        Effect.tap(budget.tryAcquire(failure), (granted) =>
          Effect.sync(() => {
            decisions.push({ _tag: "Retry", failure, granted })
          })),
      recordSuccess: (attempts) =>
        Effect.andThen(
          Effect.sync(() => {
            decisions.push({ _tag: "Success", attempts })
          }),
          budget.recordSuccess(attempts)
        ),
      snapshot: budget.snapshot,
      decisions: Effect.sync(() => [...decisions]),
      [FastPath.key]: { recordCall: inner?.recordCall, recordFailure: inner?.recordFailure }
    }
    return recorded
  })
