/**
 * `Resilient` with what only the toolkit uses of it: the types a call's errors are made of, the
 * span a call is made as, and `retry` with the target's state given as a value
 * rather than taken from the `Coordination` in context (the storm's reference policies, some tests).
 */
import * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import type * as Tracer from "effect/Tracer"
import type * as Failure from "../Failure.js"
import type { CallOptions } from "../Resilient.js"
import type { TargetServices } from "./coordination.js"
import * as Policies from "./policy.js"
import type { PolicyError, PolicyOf } from "./policy.js"
import { runSequence } from "./sequence.js"

export * from "../Resilient.js"

/**
 * What a call's span says of the call. A resilient call is one span, with a child span per attempt,
 * made with Effect's tracer (`@effect/opentelemetry` exports them); a model call is named and
 * attributed after OpenTelemetry's GenAI conventions (`chat mistral-small-latest`).
 */
export interface CallSpan {
  /** The span's name: what the call does. Default `resilient_ai.call {target}`. */
  readonly name?: string | undefined
  /** Default `"internal"`; a call to a remote service (a model's API) is `"client"`. */
  readonly kind?: Tracer.SpanKind | undefined
  /** Set on the span when it starts, the undefined ones left out (a model call's `gen_ai.request.*`). */
  readonly attributes?: Readonly<Record<string, unknown>> | undefined
}

/** What an attempt may fail with: a failure, or a nested resilient call's aggregate. */
export type AttemptError = Failure.Failure | Failure.CallFailed<Failure.Failure>

/** A nested call's aggregate stands for its last failure. */
export type Unwrapped<E> = E extends Failure.CallFailed<infer F> ? F : E

/** The failures a sequence adds to its attempts': it ran out of time, or the gate refused it. */
export type Refusal = Failure.DeadlineExceeded | Failure.Shed | Failure.ReadTimeout

/** What a sequence over attempts failing with `E` can end with. */
export type LastFailure<E> = Unwrapped<E> | Refusal

/** A call's arguments start with the effect it makes resilient: a policy is an Effect too, told apart by its id. */
const isDataFirst = (args: IArguments | ReadonlyArray<unknown>) =>
  Effect.isEffect(args[0]) && !Policies.isPolicy(args[0])

/**
 * `retry` with the target's state given as a value rather than taken from the `Coordination` in
 * context: for a client that holds the state of several targets at once.
 */
export const retryWith: {
  <P extends PolicyOf<unknown>>(policy: P, services: TargetServices, options?: CallOptions): <
    A,
    E extends AttemptError,
    R
  >(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, Failure.CallFailed<LastFailure<E>> | PolicyError<P>, R>
  <A, E extends AttemptError, R, P extends PolicyOf<unknown>>(
    self: Effect.Effect<A, E, R>,
    policy: P,
    services: TargetServices,
    options?: CallOptions
  ): Effect.Effect<A, Failure.CallFailed<LastFailure<E>> | PolicyError<P>, R>
} = dual(
  isDataFirst,
  <A, E extends AttemptError, R>(
    self: Effect.Effect<A, E, R>,
    policy: PolicyOf<unknown>,
    services: TargetServices,
    options?: CallOptions
  ) => runSequence(self, policy, options, services, undefined)
)
