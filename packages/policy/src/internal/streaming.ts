/**
 * A streamed call on the engine: one permit of the target's gate held for the whole stream, its
 * attempts (each in a scope of its own) retried until one delivers the first element, and the
 * deadline bounding the rest. `Resilient.retryStream` and the client's streams (`Engine.stream`) run it.
 */
import {
  clockOf,
  Either,
  forkScope,
  getRef,
  inScope,
  metricScopeOf,
  unwrapScopedStream,
  update,
  withFiber
} from "#effect-line"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Tracer from "effect/Tracer"
import { within } from "../Deadline.js"
import * as Failure from "../Failure.js"
import type { CallOptions, Opened, Policy } from "../Resilient.js"
import { Answered } from "./attempt.js"
import * as Coordination from "./coordination.js"
import type { TargetServices } from "./coordination.js"
import { CurrentDeadline } from "./deadline.js"
import * as FastPath from "./fastPath.js"
import * as ConcurrencyGate from "./gate.js"
import * as Instruments from "./instrumentation.js"
import * as Policies from "./policy.js"
import type { PolicyOf } from "./policy.js"
import type { AttemptError, LastFailure } from "./resilient.js"
import { type AttemptOf, type GivenSpan, runSequence, spanStartOf } from "./sequence.js"
import * as Spans from "./spans.js"

/**
 * A gate that takes no permits but passes what attempts say about capacity to `gate`: for a stream,
 * which holds one permit of its own across all its attempts.
 */
const observing = (gate: ConcurrencyGate.Service): FastPath.With<ConcurrencyGate.Service, FastPath.Gate> => ({
  ...gate,
  acquire: () => Effect.void,
  release: gate.observe,
  // The gate's own shortcuts would take and give back real permits.
  [FastPath.key]: { tryAcquireNow: () => true }
})

/** The failure of a stream that could not take a permit, counted as `retry` counts a refused call. */
const refusedStream = (
  services: TargetServices,
  policy: Policy,
  refusal: Failure.Shed | Failure.DeadlineExceeded,
  given: GivenSpan | undefined
): Effect.Effect<never, Failure.CallFailed<Failure.Shed | Failure.DeadlineExceeded>> =>
  withFiber((fiber) => {
    const scope = metricScopeOf(fiber)
    const { metrics } = services.learned.of(policy.target, policy.model)
    const reason = refusal._tag === "Shed" ? "shed" : "deadline"
    if (given !== undefined) {
      given.span.attribute("resilient_ai.target", policy.target)
      given.span.attribute("resilient_ai.stop_reason", reason)
      given.span.attribute("error.type", refusal._tag)
    }
    update(refusal._tag === "Shed" ? metrics.shed : metrics.deadlineSkips, 1, scope)
    update(metrics.callsFailed(reason), 1, scope)
    return Effect.fail(new Failure.CallFailed({ reason, last: refusal, attempts: [], target: policy.target }))
  })

/**
 * Each attempt opens in a scope of its own: a failed attempt's resources (its connection) close at
 * once, the one that delivered the first element stays open, in the caller's scope, for the rest.
 */
const inScopeOfItsOwn = <X, Y, Z>(
  open: Effect.Effect<X, Y, Z>
): Effect.Effect<X, Y, Exclude<Z, Scope.Scope> | Scope.Scope> =>
  Effect.flatMap(
    Effect.scope,
    (outer) =>
      Effect.flatMap(forkScope(outer), (scope) =>
        open.pipe(
          inScope(scope),
          Effect.onExit((exit) => Exit.isFailure(exit) ? Scope.close(scope, exit) : Effect.void)
        ))
  )

/**
 * The span of a streamed call, made while someone can see it: it covers the whole stream, its first
 * element's attempts and the rest, and ends as the stream's scope closes.
 */
const streamSpan = (
  policy: Policy,
  options: CallOptions | undefined
): Effect.Effect<GivenSpan | undefined, never, Scope.Scope> =>
  withFiber((fiber) => {
    const tracing = Spans.tracingOf(fiber, clockOf(fiber))
    if (tracing === undefined) return Effect.succeed(undefined)
    const span = Spans.startCallSpan(tracing, fiber, spanStartOf(policy, options))
    return Effect.as(
      Effect.addFinalizer((exit) => Effect.sync(() => Spans.endCallSpan(tracing, span, exit))),
      { tracing, span }
    )
  })

/** What an attempt of a transport's stream opens: its later chunks may come with their reports. */
export interface OpenedReporting<A, E, R> {
  readonly first: A
  readonly rest: Stream.Stream<A | Answered<A>, E, R>
}

/**
 * A stream whose attempts are functions of their context (a transport's): a later chunk may come
 * with what it reported (its usage, at the end), which describes the call's span.
 */
export const streamAttempts = <A, E extends AttemptError, R, E2, R2, PE>(
  open: AttemptOf<OpenedReporting<A, E2, R2>, E, R>,
  policy: PolicyOf<PE>,
  options: CallOptions | undefined,
  given: TargetServices | undefined
): Stream.Stream<
  A,
  Failure.CallFailed<LastFailure<E>> | E2 | Failure.DeadlineExceeded | PE,
  Exclude<R, Scope.Scope> | R2
> =>
  streamOf(
    (context) => inScopeOfItsOwn(open(context)),
    (rest, span) =>
      Stream.map(rest, (chunk): A => {
        if (!(chunk instanceof Answered)) return chunk
        Instruments.laterChunkTold(span, chunk.report.attributes)
        return chunk.value as A
      }),
    policy,
    options,
    given
  )

export const streamSequence = <A, E extends AttemptError, R, E2, R2, PE>(
  open: Effect.Effect<Opened<A, E2, R2>, E, R>,
  policy: PolicyOf<PE>,
  options: CallOptions | undefined,
  given: TargetServices | undefined
): Stream.Stream<
  A,
  Failure.CallFailed<LastFailure<E>> | E2 | Failure.DeadlineExceeded | PE,
  Exclude<R, Scope.Scope> | R2
> => streamOf(inScopeOfItsOwn(open), (rest) => rest, policy, options, given)

/** What an attempt opens: the stream's first element, and the rest, read as `B`s. */
interface OpenedAs<A, B, E, R> {
  readonly first: A
  readonly rest: Stream.Stream<B, E, R>
}

const streamOf = <A, B, E extends AttemptError, R, E2, R2, PE>(
  open: Effect.Effect<OpenedAs<A, B, E2, R2>, E, R> | AttemptOf<OpenedAs<A, B, E2, R2>, E, R>,
  restOf: (rest: Stream.Stream<B, E2, R2>, span: Tracer.Span | undefined) => Stream.Stream<A, E2, R2>,
  unchecked: PolicyOf<PE>,
  options: CallOptions | undefined,
  given: TargetServices | undefined
): Stream.Stream<
  A,
  Failure.CallFailed<LastFailure<E>> | E2 | Failure.DeadlineExceeded | PE,
  Exclude<R, Scope.Scope> | R2
> => {
  const opened = Effect.gen(function*() {
    // A policy not yet checked is checked first: one whose settings cannot work fails the stream.
    const policy: Policy = Policies.isChecked(unchecked)
      ? unchecked as unknown as Policy
      : yield* Effect.mapError(Either.toEffect(Policies.check(unchecked)), (invalid) => invalid as PE)
    const services = given ??
      (yield* Effect.orDie(
        Effect.flatMap(Coordination.Coordination, (coordination) => coordination.stateOf(policy))
      ))
    const callSpan = yield* streamSpan(policy, options)
    const deadline = yield* getRef(CurrentDeadline)
    const gate = services.gate
    const permit = yield* Effect.acquireRelease(
      Effect.match(Effect.interruptible(gate.acquire(deadline)), {
        onFailure: (refusal) => ({ taken: false, refusal }) as const,
        onSuccess: () => ({ taken: true }) as const
      }),
      (permit, exit) => permit.taken ? gate.release(ConcurrencyGate.outcomeOfExit(exit)) : Effect.void
    )
    if (!permit.taken) return yield* refusedStream(services, policy, permit.refusal, callSpan)
    const { first, rest } = yield* runSequence(
      open,
      policy,
      options,
      { ...services, gate: observing(gate) },
      undefined,
      callSpan
    )
    const whole = Stream.concat(Stream.succeed(first), restOf(rest, callSpan?.span))
    if (!Number.isFinite(deadline)) return whole
    // The deadline bounds the whole stream, not only the wait for its first element.
    const passed = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.andThen(
        Effect.sleep(Duration.millis(Math.max(0, deadline - now))),
        Effect.fail(new Failure.DeadlineExceeded({ deadline, phase: "attempt" }))
      ))
    return Stream.interruptWhen(whole, passed)
  })
  return unwrapScopedStream(options?.timeout === undefined ? opened : within(opened, options.timeout))
}
