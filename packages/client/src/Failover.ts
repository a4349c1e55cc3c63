/**
 * Failover from one target to another, for calls the first target could not serve.
 *
 * Failing over is a new logical call on another provider, so it is taken only when the first
 * target's sequence ended for a reason that says the target, not the request, was the problem:
 * its attempts or budget ran out on retryable failures, its gate shed the call, or it asked to
 * wait longer than the policy will or than the call's time left allows (a `Retry-After: 30` under
 * a 20 s deadline: the next target may well answer in the 20 s). Never on a terminal failure (the
 * second target would reject the same request) nor on an ambiguous one that was not replay-safe
 * (the first may have run it), nor once the deadline has passed. The second target starts its own
 * sequence with its own budget and gate: it does not inherit the first one's attempt count, so one
 * request makes at most the two targets' ceilings, never their product. The caller's deadline
 * bounds both.
 */
import * as Deadline from "@resilient-ai/policy/Deadline"
import * as Failure from "@resilient-ai/policy/Failure"
import * as Failures from "@resilient-ai/policy/internal/failures"
import * as EffectLine from "@resilient-ai/policy/internal/line"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type * as ModelClient from "./ModelClient.js"

/** Stop reasons after which another target may serve the call. */
const failsOverOn: ReadonlySet<Failure.StopReason> = new Set([
  "attempts",
  "budget",
  "shed",
  // This key's pace has no room before the deadline; another target's key may.
  "rate-limited-locally",
  "retry-after-too-long"
])

/** Whether a call that ended with `failure` should be tried on the next target. */
export const shouldFailOver = (failure: ModelClient.CallFailed): boolean => failsOverOn.has(failure.reason)

/** Failovers taken, tagged `from` and `to`. */
export const failovers = EffectLine.counter("resilient_ai_failovers_total", "calls passed from one target to another")

/**
 * A client that calls `primary` and, when its sequence ends for a failover reason, `secondary`.
 * A stream fails over only before its first chunk.
 */
export const between = (primary: ModelClient.Service, secondary: ModelClient.Service): ModelClient.Service => {
  const counted = EffectLine.tagged(failovers, { from: primary.target.name, to: secondary.target.name })
  const passOn = (failure: ModelClient.CallFailed) =>
    Effect.andThen(
      Effect.logInfo("failing over").pipe(
        Effect.annotateLogs({
          from: primary.target.name,
          to: secondary.target.name,
          stop: failure.reason,
          failure: failure.last._tag
        })
      ),
      Effect.sync(() => EffectLine.update(counted, 1, EffectLine.noMetricScope))
    )
  // One deadline for both targets: a `timeout` becomes a deadline before the first call starts.
  const bounded = <A, E, R>(
    options: ModelClient.CallOptions | undefined,
    call: (options: ModelClient.CallOptions | undefined) => Effect.Effect<A, E, R>
  ) => {
    if (options?.timeout === undefined) return call(options)
    const { timeout, ...rest } = options
    return Deadline.within(call(rest), timeout)
  }
  const orNext = <A>(
    first: Effect.Effect<A, ModelClient.CallFailed>,
    next: () => Effect.Effect<A, ModelClient.CallFailed>
  ): Effect.Effect<A, ModelClient.CallFailed> =>
    Effect.catchIf(first, shouldFailOver, (failure) => Effect.andThen(passOn(failure), next()))
  return {
    target: primary.target,
    chat: (request, options) =>
      bounded(options, (each) => orNext(primary.chat(request, each), () => secondary.chat(request, each))),
    embeddings: (request, options) =>
      bounded(options, (each) => orNext(primary.embeddings(request, each), () => secondary.embeddings(request, each))),
    chatStream: (request, options) =>
      Stream.unwrap(Effect.map(Clock.currentTimeMillis, (started) => {
        // A stream runs after this returns, so the deadline travels as the time left when the
        // second target starts.
        const timeout = options?.timeout
        const deadline = timeout === undefined ? undefined : started + Duration.toMillis(timeout)
        const remaining = Effect.map(Clock.currentTimeMillis, (now) =>
          deadline === undefined ? options : { ...options, timeout: Duration.millis(Math.max(0, deadline - now)) })
        return EffectLine.catchAllStream(primary.chatStream(request, options), (failure) =>
          Failures.isCallFailed(failure) && shouldFailOver(failure)
            ? Stream.unwrap(
              Effect.flatMap(remaining, (left) =>
                Effect.as(passOn(failure), secondary.chatStream(request, left)))
            )
            : Stream.fail(failure))
      }))
  }
}
