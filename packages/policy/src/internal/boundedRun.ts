import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as FiberRefs from "effect/FiberRefs"
import * as Runtime from "effect/Runtime"
import type * as RuntimeFlags from "effect/RuntimeFlags"

/** The marker `runBounded` returns when the time ran out. */
export const timedOut: unique symbol = Symbol.for("@resilient-ai/policy/timedOut")

/**
 * Runs `self` in a fiber of its own, with `fiberRefs`, bounded by `timeoutMillis`.
 *
 * The fiber is started on the current thread, so an effect that completes without suspending
 * returns its exit at once and never pays for a timer or a race: that is the fast path of every
 * first-try success. Only an effect that suspends gets the timer, and on timeout or on the
 * caller's interruption it is interrupted and awaited, so nothing it opened outlives it.
 */
export const runBounded = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  parent: Fiber.RuntimeFiber<unknown, unknown>,
  runtimeFlags: RuntimeFlags.RuntimeFlags,
  fiberRefs: FiberRefs.FiberRefs,
  timeoutMillis: number
): Effect.Effect<Exit.Exit<A, E> | typeof timedOut> => {
  const context = parent.currentContext as Context.Context<R>
  const runtime = Runtime.make({ context, fiberRefs, runtimeFlags })
  const fiber = Runtime.runFork(runtime)(self)
  const polled = fiber.unsafePoll()
  if (polled !== null) return Effect.succeed(polled)
  const awaitExit = Effect.async<Exit.Exit<A, E>>((resume) => {
    fiber.addObserver((exit) => resume(Effect.succeed(exit)))
    return Fiber.interrupt(fiber)
  })
  if (!Number.isFinite(timeoutMillis)) return awaitExit
  return Effect.timeoutTo(awaitExit, {
    duration: Duration.millis(Math.max(0, timeoutMillis)),
    onSuccess: (exit): Exit.Exit<A, E> | typeof timedOut => exit,
    onTimeout: () => timedOut
  })
}
