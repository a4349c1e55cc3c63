import {
  type AttemptFiber,
  callback,
  type CallerFlags,
  type FiberView,
  interruptAsFork,
  liveClock,
  pollFiber,
  type RefValue,
  startFiber
} from "#effect-line"
import type * as Clock from "effect/Clock"
import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { armTimer } from "./timer.js"

/** The marker a pending attempt returns when the time ran out. */
export const timedOut: unique symbol = Symbol.for("@resilient-ai/policy/timedOut")

/** Lets the effect it is given be interrupted as its caller could be: `Effect.uninterruptibleMask`'s. */
export type Restore = <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>

/** An attempt that finished while it was started, or one still running. */
export type Started<A, E> =
  | { readonly _tag: "Finished"; readonly exit: Exit.Exit<A, E> }
  | {
    readonly _tag: "Running"
    readonly fiber: AttemptFiber<Exit.Exit<A, E>, never>
    /** Its exit, or `timedOut` once its time ran out and it was stopped; no handler for the caller's interruption. */
    readonly wait: Effect.Effect<Exit.Exit<A, E> | typeof timedOut>
  }

/**
 * Starts `self` in a fiber of its own, with `context` and `fiberRefs`, bounded by `timeoutMillis`.
 *
 * The fiber is started on the current thread, so an effect that completes without suspending is
 * `Finished` at once and never pays for a timer or a race: that is the fast path of every
 * first-try success. Only an effect that suspends gets the timer, and on timeout or on the
 * caller's interruption while awaiting it is interrupted and awaited, so nothing it opened outlives
 * it. The fiber is not the caller's child: the caller must start it where it cannot be interrupted
 * and interrupt it itself if it is interrupted before awaiting it.
 */
export const startBounded = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  parent: FiberView,
  flags: CallerFlags,
  context: Context.Context<R>,
  refs: ReadonlyArray<RefValue>,
  timeoutMillis: number,
  clock: Clock.Clock
): Started<A, E> => {
  // The fiber ends with the attempt's exit as its value, so an attempt that fails is not a fiber
  // that failed: Effect logs no "unhandled error" for it, and it needs no FiberRef set to say so.
  const fiber = startFiber(Effect.exit(self), parent, flags, context, refs)
  const polled = pollFiber(fiber)
  if (polled !== undefined) return { _tag: "Finished", exit: attemptExit(polled) }
  const millis = Math.max(0, timeoutMillis)
  // On the real clock the timer is the platform's own, armed beside the wait: no fiber races the
  // attempt. Any other clock (a TestClock, a simulation) is asked to sleep, as Effect.timeout would;
  // the timeout interrupts the inner wait, which stops the attempt.
  const wait: Effect.Effect<Exit.Exit<A, E> | typeof timedOut> = !Number.isFinite(millis) || clock === liveClock
    ? awaitExit(fiber, parent, Number.isFinite(millis) ? millis : undefined)
    : Effect.map(
      Effect.timeoutOption(
        Effect.onInterrupt(awaitExit(fiber, parent, undefined), () => Fiber.interrupt(fiber)),
        Duration.millis(millis)
      ),
      Option.getOrElse((): typeof timedOut => timedOut)
    )
  return { _tag: "Running", fiber, wait }
}

/**
 * Waits, interruptibly as `restore` allows, for a running attempt's exit, or `timedOut`, and goes
 * on with `then`. If the wait is interrupted, the attempt is interrupted and awaited, then
 * `cancelled` runs. Called where the caller cannot be interrupted (inside
 * `Effect.uninterruptibleMask`): this one handler is the only one, since the wait has none, which
 * spares every attempt the second region `callback`'s canceler would cost.
 */
export const awaitThen = <A, E, B, E2, R2>(
  running: Extract<Started<A, E>, { readonly _tag: "Running" }>,
  restore: Restore,
  cancelled: () => Effect.Effect<void>,
  then: (result: Exit.Exit<A, E> | typeof timedOut) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E2, R2> =>
  Effect.matchCauseEffect(restore(running.wait), {
    onFailure: (cause) =>
      Effect.andThen(Effect.andThen(Fiber.interrupt(running.fiber), cancelled()), Effect.failCause(cause)),
    onSuccess: then
  })

/** The attempt's own exit, from its fiber's: the fiber fails only when it is interrupted. */
const attemptExit = <A, E>(exit: Exit.Exit<Exit.Exit<A, E>>): Exit.Exit<A, E> =>
  Exit.isSuccess(exit) ? exit.value : exit as Exit.Exit<never>

/**
 * Waits for `fiber` to end. With `timeoutMillis`, a timer interrupts it when the time is up, and
 * the wait gives `timedOut` once it has ended (unless it succeeded meanwhile). The wait has no
 * canceler: whoever interrupts it stops the fiber (a later resume is dropped by the fiber it was
 * meant for).
 */
const awaitExit = <A, E>(
  fiber: AttemptFiber<Exit.Exit<A, E>, never>,
  parent: FiberView,
  timeoutMillis: number | undefined
): Effect.Effect<Exit.Exit<A, E> | typeof timedOut> =>
  callback<Exit.Exit<A, E> | typeof timedOut>((resume) => {
    let expired = false
    const disarm = timeoutMillis === undefined ? undefined : armTimer(timeoutMillis, () => {
      expired = true
      interruptAsFork(fiber, parent)
    })
    fiber.addObserver((fiberExit) => {
      disarm?.()
      const exit = attemptExit(fiberExit)
      resume(Exit.succeed(expired && !Exit.isSuccess(exit) ? timedOut : exit))
    })
  })
