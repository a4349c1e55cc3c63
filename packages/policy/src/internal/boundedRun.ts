import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as FiberRefs from "effect/FiberRefs"
import * as Runtime from "effect/Runtime"
import type * as RuntimeFlags from "effect/RuntimeFlags"

/** The marker a pending attempt returns when the time ran out. */
export const timedOut: unique symbol = Symbol.for("@resilient-ai/policy/timedOut")

/** An attempt that finished while it was started, or one still running. */
export type Started<A, E> =
  | { readonly _tag: "Finished"; readonly exit: Exit.Exit<A, E> }
  | {
    readonly _tag: "Running"
    readonly fiber: Fiber.RuntimeFiber<A, E>
    readonly result: Effect.Effect<Exit.Exit<A, E> | typeof timedOut>
  }

/**
 * Starts `self` in a fiber of its own, with `fiberRefs`, bounded by `timeoutMillis`.
 *
 * The fiber is started on the current thread, so an effect that completes without suspending is
 * `Finished` at once and never pays for a timer or a race: that is the fast path of every
 * first-try success. Only an effect that suspends gets the timer, and on timeout or on the
 * caller's interruption while awaiting it is interrupted and awaited, so nothing it opened outlives
 * it. The fiber is not the caller's child: the caller must start it where it cannot be interrupted
 * and interrupt it itself if it is interrupted before awaiting `result`.
 */
export const startBounded = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  parent: Fiber.RuntimeFiber<unknown, unknown>,
  runtimeFlags: RuntimeFlags.RuntimeFlags,
  fiberRefs: FiberRefs.FiberRefs,
  timeoutMillis: number
): Started<A, E> => {
  const context = parent.currentContext as Context.Context<R>
  const fiber = Runtime.runFork(Runtime.make({ context, fiberRefs, runtimeFlags }))(self)
  const polled = fiber.unsafePoll()
  if (polled !== null) return { _tag: "Finished", exit: polled }
  const awaitExit = Effect.async<Exit.Exit<A, E>>((resume) => {
    fiber.addObserver((exit) => resume(Effect.succeed(exit)))
    return Fiber.interrupt(fiber)
  })
  if (!Number.isFinite(timeoutMillis)) return { _tag: "Running", fiber, result: awaitExit }
  return {
    _tag: "Running",
    fiber,
    result: Effect.timeoutTo(awaitExit, {
      duration: Duration.millis(Math.max(0, timeoutMillis)),
      onSuccess: (exit): Exit.Exit<A, E> | typeof timedOut => exit,
      onTimeout: () => timedOut
    })
  }
}
