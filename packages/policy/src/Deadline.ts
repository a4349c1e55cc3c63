/**
 * One absolute deadline, set at the entry point and carried with the fiber.
 *
 * A per-attempt timeout answers "how long do I wait for this call"; the deadline answers the
 * question that matters, "when is the answer worthless". It is set once (`within`, `at`), travels
 * down through every layer in a `FiberRef` (forked fibers inherit it), and a nested deadline can
 * only make it earlier. Like a Go context deadline or a gRPC deadline it is cooperative: resilient
 * calls derive every attempt's timeout from it and never start an attempt or a sleep that cannot
 * finish before it. `enforce` bounds any other effect by it.
 */
import { clockOf, type DurationInput, getRef, locally, nowMillis, readRef, timeoutFail, withFiber } from "#effect-line"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import * as Option from "effect/Option"
import { DeadlineExceeded } from "./Failure.js"
import { CurrentDeadline } from "./internal/deadline.js"

/** Runs `self` with the deadline at `epochMillis`, or the current one if that is earlier. */
export const at: {
  (epochMillis: number): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, epochMillis: number): Effect.Effect<A, E, R>
} = dual(
  2,
  <A, E, R>(self: Effect.Effect<A, E, R>, epochMillis: number): Effect.Effect<A, E, R> =>
    withFiber((fiber) =>
      epochMillis < readRef(fiber, CurrentDeadline) ? locally(self, CurrentDeadline, epochMillis) : self
    )
)

/** Runs `self` with the deadline `duration` from now, or the current one if that is earlier. */
export const within: {
  (duration: DurationInput): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, duration: DurationInput): Effect.Effect<A, E, R>
} = dual(
  2,
  <A, E, R>(self: Effect.Effect<A, E, R>, duration: DurationInput): Effect.Effect<A, E, R> => {
    const millis = Duration.toMillis(duration)
    return withFiber((fiber) => {
      const deadline = nowMillis(clockOf(fiber)) + millis
      return deadline < readRef(fiber, CurrentDeadline) ? locally(self, CurrentDeadline, deadline) : self
    })
  }
)

/** The current deadline, if one is set. */
export const current: Effect.Effect<Option.Option<number>> = Effect.map(
  getRef(CurrentDeadline),
  (deadline) => (Number.isFinite(deadline) ? Option.some(deadline) : Option.none())
)

/** The time left until the current deadline (zero once it has passed), if one is set. */
export const remaining: Effect.Effect<Option.Option<Duration.Duration>> = Effect.flatMap(
  getRef(CurrentDeadline),
  (deadline) =>
    Number.isFinite(deadline)
      ? Effect.map(Clock.currentTimeMillis, (now) => Option.some(Duration.millis(Math.max(0, deadline - now))))
      : Effect.succeed(Option.none())
)

/**
 * Bounds `self` by the current deadline: if it is still running then, it is interrupted and the
 * result is `DeadlineExceeded`. Without a deadline, `self` runs unbounded.
 */
export const enforce = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | DeadlineExceeded, R> =>
  Effect.flatMap(getRef(CurrentDeadline), (deadline) => {
    if (!Number.isFinite(deadline)) return self
    return Effect.flatMap(Clock.currentTimeMillis, (now) =>
      timeoutFail(self, {
        duration: Duration.millis(Math.max(0, deadline - now)),
        onTimeout: () => new DeadlineExceeded({ deadline, phase: "attempt" })
      }))
  })
