/**
 * What both sides of the seam describe alike: shapes the engine reads that name nothing of either
 * Effect line beyond what both share.
 */
import type * as Clock from "effect/Clock"
import type * as Effect from "effect/Effect"
import type * as Tracer from "effect/Tracer"

/** Where a call's spans are made: the fiber's tracer and clock, read once per call. */
export interface SpanTracing {
  readonly tracer: Tracer.Tracer
  readonly clock: Clock.Clock
  readonly timing: boolean
}

/** The delay in milliseconds a schedule's step asks for before the next recurrence; `undefined` when it ends. */
export type StepDelay = number | undefined

/** One step of a schedule stepped by hand: its output, and its delay (`undefined` once it ends). */
export interface Step<Out> {
  readonly output: Out | undefined
  readonly delay: StepDelay
}

/** A schedule stepped by hand, one recurrence at a time. */
export interface Stepper<Out, In> {
  readonly step: (now: number, input: In) => Effect.Effect<Step<Out>>
}
