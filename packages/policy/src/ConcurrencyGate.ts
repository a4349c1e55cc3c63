/**
 * A limit on in-flight calls per target, that sheds or queues when full and ramps back after an
 * incident instead of letting the backlog stampede the recovering provider.
 *
 * Two kinds of targets want opposite things. A managed, elastic API can take a short queue
 * (`mode: "queue"`, each wait bounded by the caller's deadline). A fixed-capacity, self-hosted pool
 * is exactly the GPUs you pay for: piling more requests on a saturated queue turns a queue that
 * would have drained into one that will not, so it sheds (`mode: "shed"`) with a fast `Shed`.
 *
 * The gate also watches outcomes. After `degradeAfter` capacity failures in a row (overloaded,
 * rate limited, a gateway's 502/504, timeouts, refused or reset connections) the target is
 * degraded and the limit drops to `rampStart` of steady state (10%), so only probes go through.
 * The first success starts the recovery ramp: the limit grows ×`rampFactor` (1.5) every
 * `rampStep` (5 s) back to steady state.
 *
 * An `adaptive` gate (the default in `"queue"` mode) also learns the target's capacity: its steady
 * state is a learned limit, at most `limit`, cut on overload and grown while the gate is full (see
 * `Limiter.adapt`), so the ramp after an incident ends where the provider is, not at the setting.
 * The limit is computed from the clock when asked, so no background fiber runs and `TestClock`
 * drives the ramp.
 */
import { type DurationInput, getRef } from "#effect-line"
import * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import type * as Failure from "./Failure.js"
import { CurrentDeadline } from "./internal/deadline.js"
import * as FastPath from "./internal/fastPath.js"
import { makeShared, outcomeOfExit } from "./internal/gate.js"
import type { InvalidSettings } from "./Settings.js"

/** What the gate does when it is full. */
export type Mode = "queue" | "shed"

/** Where the target is in the incident cycle. */
export type Health = "steady" | "degraded" | "recovering"

/** What an attempt told the gate about the target's capacity. */
export type Outcome = "success" | "overload" | "neutral"

/** Settings of a gate. */
export interface Options {
  /** Names the target in `Shed` failures. */
  readonly target: string
  /** In-flight calls in steady state; with `adaptive`, the most the learned limit reaches. */
  readonly limit: number
  /** Default `"queue"`. */
  readonly mode?: Mode | undefined
  /**
   * Learn the target's capacity below `limit`: cut it ×`backoffRatio` on overload, grow it by one
   * while the gate is full. Default on in `"queue"` mode, off in `"shed"` mode, whose limit is a
   * pool's known slots.
   */
  readonly adaptive?: boolean | undefined
  /** The least the learned limit falls to. Default 1; at most `limit`. */
  readonly minLimit?: number | undefined
  /** What an overload multiplies the learned limit by, in [0.5, 1). Default 0.9. */
  readonly backoffRatio?: number | undefined
  /**
   * The least time between two cuts, so that one moment's burst of overloads is one cut (an overload
   * right after another, at a gate within its lowered limit, cuts again). Default 1 second.
   */
  readonly backoffInterval?: DurationInput | undefined
  /** Share of the steady limit the ramp starts from. Default 0.1. */
  readonly rampStart?: number | undefined
  /** Growth of the limit per ramp step. Default 1.5. */
  readonly rampFactor?: number | undefined
  /** Time between ramp steps. Default 5 seconds. */
  readonly rampStep?: DurationInput | undefined
  /** Capacity failures in a row that mark the target degraded. Default 5. */
  readonly degradeAfter?: number | undefined
  /** Calls allowed to wait in `"queue"` mode; more are shed. Default unbounded (the deadline bounds each wait). */
  readonly maxWaiting?: number | undefined
}

/** What the gate holds right now. */
export interface Snapshot {
  readonly limit: number
  readonly inFlight: number
  readonly waiting: number
  readonly health: Health
}

/** The gate of the target being called. */
export interface Service {
  /**
   * Takes a permit. When the gate is full, a `"shed"` gate fails at once with `Shed`; a `"queue"`
   * gate waits in line, until `deadline` (epoch ms) at the latest.
   */
  readonly acquire: (deadline: number) => Effect.Effect<void, Failure.Shed | Failure.DeadlineExceeded>
  /** Gives a permit back, with what the attempt said about the target's capacity. */
  readonly release: (outcome: Outcome) => Effect.Effect<void>
  /**
   * Records what an attempt said about capacity without giving a permit back: for work that holds
   * one permit across several attempts, like a stream retried until its first chunk.
   */
  readonly observe: (outcome: Outcome) => Effect.Effect<void>
  /** Marks the target degraded from outside, as a health check would. */
  readonly markDegraded: Effect.Effect<void>
  /** Starts the recovery ramp from outside. */
  readonly markRecovered: Effect.Effect<void>
  readonly snapshot: Effect.Effect<Snapshot>
}

/**
 * Builds a gate in memory. Waiters are served first come, first served while the target is
 * steady, newest first while it is degraded or recovering (adaptive LIFO); a waiter that is
 * interrupted after being granted a permit gives it back, so no permit is lost.
 * Bad options fail with `InvalidSettings`, when the program is assembled.
 */
export const make = (options: Options): Effect.Effect<Service, InvalidSettings> => makeShared(options)

const unboundedGate: FastPath.With<Service, FastPath.Gate> = {
  acquire: () => Effect.void,
  release: () => Effect.void,
  observe: () => Effect.void,
  markDegraded: Effect.void,
  markRecovered: Effect.void,
  snapshot: Effect.succeed({
    limit: Number.POSITIVE_INFINITY,
    inFlight: 0,
    waiting: 0,
    health: "steady"
  }),
  [FastPath.key]: { tryAcquireNow: () => true, releaseNow: () => {} }
}

/**
 * A gate that never limits and never waits, and tracks nothing: for a test that wants the gate out
 * of the way (`Coordination.layerWith({ gate: ConcurrencyGate.unbounded })`).
 */
export const unbounded: Service = unboundedGate

/**
 * Runs `self` holding a permit of `gate`, for work that is gated without being retried. Waiting for
 * the permit is bounded by the current deadline and can be interrupted; the permit is given back,
 * with what `self`'s exit says about capacity, however `self` ends.
 */
export const withPermit: {
  (
    gate: Service
  ): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | Failure.Shed | Failure.DeadlineExceeded, R>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    gate: Service
  ): Effect.Effect<A, E | Failure.Shed | Failure.DeadlineExceeded, R>
} = dual(
  2,
  <A, E, R>(self: Effect.Effect<A, E, R>, gate: Service) =>
    Effect.flatMap(
      getRef(CurrentDeadline),
      (deadline) =>
        Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(restore(gate.acquire(deadline)), () =>
            Effect.onExit(restore(self), (exit) => gate.release(outcomeOfExit(exit))))
        )
    )
)
