/**
 * The engine's own doors, for attempts that are functions of their context (a transport's): what
 * they report with their outcome (usage, limits, log annotations, span attributes) is read by the
 * engine, and the caller gets the plain value or failure.
 */
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type * as Failure from "../Failure.js"
import type { CallOptions, Policy } from "../Resilient.js"
import type { TargetServices } from "./coordination.js"
import type { AttemptError, LastFailure } from "./resilient.js"
import { type AttemptOf, runSequence } from "./sequence.js"
import { type OpenedReporting, streamAttempts } from "./streaming.js"

export type { AttemptOf, OpenedReporting }

/**
 * Runs `attempt` under `policy` as `Resilient.retryWith` runs an effect, each attempt given its
 * context; the target's state is `services`, or the `Coordination` in context's.
 */
export const run = <A, E, R>(
  attempt: AttemptOf<A, E, R>,
  policy: Policy,
  services: TargetServices | undefined,
  options?: CallOptions | undefined
): Effect.Effect<A, Failure.CallFailed<LastFailure<E>>, R> => runSequence(attempt, policy, options, services, undefined)

/** Streams under `policy`, as `Resilient.retryStream` does, each attempt given its context. */
export const stream = <A, E extends AttemptError, R, E2, R2>(
  open: AttemptOf<OpenedReporting<A, E2, R2>, E, R>,
  policy: Policy,
  services: TargetServices | undefined,
  options?: CallOptions | undefined
): Stream.Stream<A, Failure.CallFailed<LastFailure<E>> | E2 | Failure.DeadlineExceeded, Exclude<R, Scope.Scope> | R2> =>
  streamAttempts(open, policy, options, services)
