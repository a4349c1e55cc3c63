/**
 * `ConcurrencyGate` with what only the toolkit uses of it: what a failure says about capacity, the
 * settings with their defaults, the ramp's and the learned limit's arithmetic (which the fleet's gate
 * on Redis repeats in its script), and the gate in memory with a share of a fleet's limit.
 */
import { currentClock, Either, failureOf, nowMillis } from "#effect-line"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type { Health, Mode, Options, Outcome, Service } from "../ConcurrencyGate.js"
import * as Failures from "./failures.js"
import * as FastPath from "./fastPath.js"
import * as Checked from "./settings.js"
import { wakeOrTimeout } from "./timer.js"

export * from "../ConcurrencyGate.js"

/**
 * What an attempt's failure says about the target's capacity: only the toolkit's failures say
 * anything (`Failures.isFailure`), so an error of the caller's own named `RateLimited` is neutral.
 */
export const outcomeOf = (failure: unknown): Outcome => {
  if (!Failures.isFailure(failure)) return "neutral"
  switch (failure._tag) {
    // A 500 is as often a bug in one request as a busy provider: only gateways that could not reach
    // the model (502, 504) say something about capacity.
    case "ServerError":
      return failure.status === 502 || failure.status === 504 ? "overload" : "neutral"
    case "Overloaded":
    case "RateLimited":
    case "ReadTimeout":
    case "ConnectTimeout":
    case "ConnectFailed":
    case "ConnectionReset":
      return "overload"
    // The caller's deadline cut the attempt short: that says nothing about the target's capacity,
    // and counting it would keep a recovering target degraded by calls that were already late.
    case "DeadlineExceeded":
    default:
      return "neutral"
  }
}

/** What an effect's exit says about capacity: a success, one of the toolkit's failures, or nothing. */
export const outcomeOfExit = (exit: Exit.Exit<unknown, unknown>): Outcome => {
  if (Exit.isSuccess(exit)) return "success"
  const failure = failureOf(exit.cause)
  return Option.isSome(failure) ? outcomeOf(failure.value) : "neutral"
}

/** `Options` with every default filled in. */
export interface Settings {
  readonly target: string
  readonly limit: number
  readonly mode: Mode
  readonly adaptive: boolean
  readonly minLimit: number
  readonly backoffRatio: number
  readonly backoffIntervalMillis: number
  readonly rampStart: number
  readonly rampFactor: number
  readonly rampStepMillis: number
  readonly degradeAfter: number
  readonly maxWaiting: number
}

/** The rules of a gate's settings, defaults included. */
const GateSettings = Checked.refine(
  Checked.struct({
    target: Checked.nonEmpty,
    limit: Checked.integerAtLeast(1, { orInfinite: true }),
    mode: Checked.withDefault(Checked.oneOf("queue", "shed"), "queue"),
    adaptive: Checked.optional(Checked.flag),
    minLimit: Checked.withDefault(Checked.integerAtLeast(1), 1),
    backoffRatio: Checked.withDefault(
      Checked.refine(Checked.number, (ratio) => (ratio >= 0.5 && ratio < 1) || `must be in [0.5, 1), got ${ratio}`),
      0.9
    ),
    backoffInterval: Checked.withDefault(Checked.finitePositiveDuration, Duration.seconds(1)),
    rampStart: Checked.withDefault(
      Checked.refine(Checked.number, (share) => (share > 0 && share <= 1) || `must be in (0, 1], got ${share}`),
      0.1
    ),
    rampFactor: Checked.withDefault(
      Checked.refine(
        Checked.number,
        (factor) => (factor > 1 && Number.isFinite(factor)) || `must be a finite number > 1, got ${factor}`
      ),
      1.5
    ),
    rampStep: Checked.withDefault(Checked.finitePositiveDuration, Duration.seconds(5)),
    degradeAfter: Checked.withDefault(Checked.integerAtLeast(1), 5),
    maxWaiting: Checked.withDefault(Checked.integerAtLeast(0, { orInfinite: true }), Number.POSITIVE_INFINITY)
  }),
  ({ limit, minLimit }) =>
    minLimit <= limit || { path: ["minLimit"], message: `must not exceed limit (${limit}), got ${minLimit}` }
)

const decodeSettings = Checked.decoder(GateSettings, (input) => {
  const target = (input as { readonly target?: unknown } | undefined)?.target
  return typeof target === "string" && target !== "" ? `concurrency gate for ${target}` : "concurrency gate"
})

/** Fills in the defaults and checks the values; bad ones are one `InvalidSettings` naming each. */
export const settings = (options: Options): Either.Either<Settings, Checked.InvalidSettings> =>
  Either.map(decodeSettings(options), ({ adaptive, backoffInterval, rampStep, ...rest }) => ({
    ...rest,
    adaptive: adaptive ?? rest.mode === "queue",
    backoffIntervalMillis: Duration.toMillis(backoffInterval),
    rampStepMillis: Duration.toMillis(rampStep)
  }))

/** The limit right after a degraded period: `rampStart` of the setting, at least one. */
export const rampFloor = (settings: Settings): number => Math.max(1, Math.floor(settings.limit * settings.rampStart))

/**
 * The limit `steps` ramp steps after recovery: the floor grown ×factor per step, rounded up, capped
 * at steady state: the setting, or the learned limit of an adaptive gate (the floor too).
 */
export const rampLimit = (settings: Settings, steps: number, steady: number = settings.limit): number => {
  let limit = Math.min(steady, rampFloor(settings))
  for (let step = 0; step < steps && limit < steady; step++) {
    limit = Math.min(steady, Math.ceil(limit * settings.rampFactor))
  }
  return limit
}

/**
 * The learned limit after an overload: ×`backoffRatio`, rounded down, at least one less and at
 * least `minLimit`. The fleet gate's script on Redis computes the same.
 */
export const backoffLimit = (settings: Settings, learned: number): number =>
  Math.max(settings.minLimit, Math.min(learned - 1, Math.floor(learned * settings.backoffRatio)))

const wholeLimit = () => 1

/**
 * The gate's bookkeeping without Effect: permits, health, the ramp and the learned limit. Time is
 * passed in, so the storm simulator and the Redis layer's fallback use the same arithmetic.
 */
class Limiter {
  private inFlightCount = 0
  private healthState: Health = "steady"
  private recoveredAt = 0
  private overloadsInARow = 0
  /** Steady state: the setting, or what an adaptive gate has learned of the target (see `adapt`). */
  private learned: number
  private cutAt = Number.NEGATIVE_INFINITY
  private successesWhileFull = 0
  /** While a health probe finds the provider down, a call's success does not end a degraded period. */
  recoveryHeld = false

  /**
   * `share` is the part of the limit this limiter may use, read at every decision: 1 for a gate of
   * its own, less for one process's part of a fleet's limit (at least one permit).
   */
  constructor(readonly settings: Settings, private readonly share: () => number = wholeLimit) {
    this.learned = settings.limit
  }

  get inFlight(): number {
    return this.inFlightCount
  }

  health(nowMillis: number): Health {
    this.limit(nowMillis)
    return this.healthState
  }

  limit(nowMillis: number): number {
    const limit = this.fleetLimit(nowMillis)
    const share = this.share()
    return share >= 1 ? limit : Math.max(1, Math.floor(limit * share))
  }

  private fleetLimit(nowMillis: number): number {
    switch (this.healthState) {
      case "steady":
        return this.learned
      case "degraded":
        return Math.min(this.learned, rampFloor(this.settings))
      case "recovering": {
        const limit = rampLimit(this.settings, this.stepsSinceRecovery(nowMillis), this.learned)
        if (limit >= this.learned) this.healthState = "steady"
        return limit
      }
    }
  }

  /**
   * Whole ramp steps since recovery. Computed so that the time of the next step is always after
   * `nowMillis`: with floating-point division alone, a time a hair short of a step boundary could
   * name a "next" step that is already now, and a waiter would wake at the same instant forever.
   */
  private stepsSinceRecovery(nowMillis: number): number {
    const step = this.settings.rampStepMillis
    let steps = Math.floor((nowMillis - this.recoveredAt) / step)
    while (this.recoveredAt + (steps + 1) * step <= nowMillis) steps++
    return steps
  }

  /** When the ramp next raises the limit, always after `nowMillis`; `undefined` when it is not ramping. */
  nextRaiseAt(nowMillis: number): number | undefined {
    if (this.health(nowMillis) !== "recovering") return undefined
    return this.recoveredAt + (this.stepsSinceRecovery(nowMillis) + 1) * this.settings.rampStepMillis
  }

  tryAcquire(nowMillis: number): boolean {
    if (this.inFlightCount >= this.limit(nowMillis)) return false
    this.inFlightCount++
    return true
  }

  release(nowMillis: number, outcome: Outcome): void {
    const inFlight = this.inFlightCount
    this.inFlightCount = Math.max(0, inFlight - 1)
    this.observe(nowMillis, outcome, inFlight)
  }

  /** `inFlight`: the attempts in flight when this one ended, itself included. */
  observe(nowMillis: number, outcome: Outcome, inFlight = this.inFlightCount): void {
    if (this.settings.adaptive) this.adapt(nowMillis, outcome, inFlight)
    if (outcome === "success") {
      this.overloadsInARow = 0
      if (this.healthState === "degraded" && !this.recoveryHeld) this.markRecovered(nowMillis)
    } else if (outcome === "overload") {
      this.overloadsInARow++
      if (this.overloadsInARow >= this.settings.degradeAfter && this.health(nowMillis) !== "degraded") {
        this.markDegraded()
      }
    }
  }

  /**
   * AIMD on outcomes. An overload cuts the learned limit as Netflix's `AIMDLimit` does (×0.9, at
   * least one less), but only while at least half the limit is in use (the test `AIMDLimit` puts on
   * its increase: below it the overload is not the limit's doing, and cuts an idle gate never grows
   * back would sink it to the floor), and at most once per `backoffInterval` (the overloads of one
   * moment are one signal; the attempts admitted before a cut report under the old limit) unless
   * the gate, within its limit, is refused again with no success between. A
   * success while the gate is full counts towards +1, one per limit's worth of them: a round of the
   * gate, as TCP's congestion avoidance adds one segment per round trip, where `AIMDLimit`'s +1 per
   * success would overshoot a full provider again within a few calls. Not within `backoffInterval`
   * of a cut, and not while the ramp runs, which raises the limit by itself. Idle or half used,
   * nothing moves: a target never overloaded stays at the setting. While degraded nothing is
   * learned: the provider is down, not smaller.
   *
   * Outcomes rather than latency (Netflix's Gradient2, Envoy's minRTT against sampled latency): a
   * model call's latency follows the tokens it generates, from a fraction of a second to minutes,
   * so a latency gradient reads a long answer as a queue; and Envoy's minRTT window, a few calls in
   * flight for some tens of calls, stalls a target whose calls last seconds. A provider says it is
   * full by refusing (429, 503, 529) and timing out, which `outcomeOf` already reads.
   */
  private adapt(nowMillis: number, outcome: Outcome, inFlight: number): void {
    const health = this.health(nowMillis)
    if (health === "degraded" || outcome === "neutral") return
    const limit = this.limit(nowMillis)
    const settled = nowMillis - this.cutAt >= this.settings.backoffIntervalMillis
    if (outcome === "overload") {
      // Above the limit, the attempts in flight were admitted before a cut: what they report is known.
      if (inFlight * 2 < limit || inFlight > limit) return
      // Within `backoffInterval` of a cut, only an overload right after another (no success between)
      // cuts again: the limit still overshoots, and the permit the provider refused would go to the
      // next caller, refused too, until five in a row mark the target degraded.
      if (!settled && this.overloadsInARow === 0) return
      this.learned = backoffLimit(this.settings, this.learned)
      this.cutAt = nowMillis
      this.successesWhileFull = 0
    } else if (settled && health === "steady" && inFlight >= limit && this.learned < this.settings.limit) {
      this.successesWhileFull++
      if (this.successesWhileFull >= limit) {
        this.learned++
        this.successesWhileFull = 0
      }
    }
  }

  markDegraded(): void {
    this.healthState = "degraded"
    this.overloadsInARow = 0
  }

  markRecovered(nowMillis: number): void {
    if (this.healthState !== "degraded") return
    this.healthState = "recovering"
    this.recoveredAt = nowMillis
    this.limit(nowMillis)
  }
}

interface Waiter {
  granted: boolean
  wake: () => void
}

const noWake = () => {}

/**
 * The callers waiting for a permit, oldest first. Taking the oldest is O(1) (an array's `shift`
 * moves every other waiter, and a busy gate has hundreds); the array is compacted once most of it
 * is taken.
 */
class Line<A> {
  private items: Array<A> = []
  private head = 0

  get length(): number {
    return this.items.length - this.head
  }
  push(item: A): void {
    this.items.push(item)
  }
  takeOldest(): A | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items[this.head]
    this.items[this.head] = undefined as A
    this.head++
    this.compact()
    return item
  }
  takeNewest(): A | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items.pop()
    this.compact()
    return item
  }
  /** Takes `item` out of the line wherever it stands (a waiter that gave up). */
  remove(item: A): void {
    const index = this.items.indexOf(item, this.head)
    if (index >= 0) this.items.splice(index, 1)
    this.compact()
  }
  /** Drops the slots already taken: all of them once the line is empty, else once they are most of it. */
  private compact(): void {
    if (this.head === this.items.length) {
      this.items = []
      this.head = 0
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
  }
  forEach(f: (item: A) => void): void {
    for (let i = this.head; i < this.items.length; i++) f(this.items[i]!)
  }
}

/**
 * `ConcurrencyGate.make`, with `share`: one process's part of a larger limit (see `Limiter`), for
 * the fleet's gate on Redis, which falls back to one in process.
 */
export const makeShared = (
  options: Options,
  share?: () => number
): Effect.Effect<Service, Checked.InvalidSettings> =>
  Effect.flatMap(
    Effect.suspend(() => Either.toEffect(settings(options))),
    (checked) =>
      Effect.map(currentClock, (clock) => {
        const limiter = new Limiter(checked, share)
        const waiters = new Line<Waiter>()
        const now = () => nowMillis(clock)

        const grantWaiting = (at: number) => {
          while (waiters.length > 0 && limiter.tryAcquire(at)) {
            // Adaptive LIFO: while the target struggles, the callers that have waited longest are the
            // likeliest to run out of time before an attempt can finish; a permit spent on one of them
            // is a request the provider serves for nobody. Healthy, the line is first come, first served.
            const waiter = limiter.health(at) === "steady" ? waiters.takeOldest()! : waiters.takeNewest()!
            waiter.granted = true
            waiter.wake()
          }
        }

        /** Lets every waiter look again at the clock: the health changed, and with it when the limit next rises. */
        const afterHealthChange = (at: number) => {
          grantWaiting(at)
          waiters.forEach((waiter) => waiter.wake())
        }

        const shed = () =>
          new Failures.Shed({ target: checked.target, limit: limiter.limit(now()), inFlight: limiter.inFlight })

        /**
         * Waits in line until granted, until `deadline`, or until interrupted; the place in line is
         * kept throughout. The ramp raises the limit with time alone, so the waiter also wakes at the
         * next raise and serves the head of the line.
         */
        const waitForPermit = (deadline: number): Effect.Effect<void, Failures.DeadlineExceeded> => {
          const waiter: Waiter = { granted: false, wake: noWake }
          const listen = (wake: () => void) => {
            waiter.wake = wake
            return () => {
              waiter.wake = noWake
            }
          }
          const lookAgain = Effect.suspend(() => {
            grantWaiting(now())
            return wait
          })
          const wait: Effect.Effect<void, Failures.DeadlineExceeded> = Effect.suspend(() => {
            if (waiter.granted) return Effect.void
            const at = now()
            if (at >= deadline) {
              waiters.remove(waiter)
              return Effect.fail(new Failures.DeadlineExceeded({ deadline, phase: "queue" }))
            }
            const wakeAt = Math.min(deadline, limiter.nextRaiseAt(at) ?? Number.POSITIVE_INFINITY)
            // Whole milliseconds: `Duration` rounds a sliver of a millisecond to zero, and a wait of
            // zero would wake at the same instant, forever.
            return Effect.andThen(wakeOrTimeout(listen, Math.ceil(wakeAt - at), clock), lookAgain)
          })
          return Effect.suspend(() => {
            waiters.push(waiter)
            return wait
          }).pipe(
            Effect.onInterrupt(() =>
              Effect.sync(() => {
                if (waiter.granted) {
                  limiter.release(now(), "neutral")
                  grantWaiting(now())
                } else {
                  waiters.remove(waiter)
                }
              })
            )
          )
        }

        const tryAcquireNow = (): boolean => {
          const at = now()
          grantWaiting(at)
          return waiters.length === 0 && limiter.tryAcquire(at)
        }
        const releaseNow = (outcome: Outcome): void => {
          const at = now()
          const before = limiter.health(at)
          limiter.release(at, outcome)
          if (limiter.health(at) === before) grantWaiting(at)
          else afterHealthChange(at)
        }

        const service: FastPath.With<Service, FastPath.Gate> = {
          acquire: (deadline) =>
            Effect.suspend((): Effect.Effect<void, Failures.Shed | Failures.DeadlineExceeded> => {
              if (tryAcquireNow()) return Effect.void
              const at = now()
              if (checked.mode === "shed" || waiters.length >= checked.maxWaiting) return Effect.fail(shed())
              if (at >= deadline) return Effect.fail(new Failures.DeadlineExceeded({ deadline, phase: "queue" }))
              return waitForPermit(deadline)
            }),
          release: (outcome) => Effect.sync(() => releaseNow(outcome)),
          observe: (outcome) =>
            Effect.sync(() => {
              const at = now()
              const before = limiter.health(at)
              limiter.observe(at, outcome)
              if (limiter.health(at) !== before) afterHealthChange(at)
            }),
          markDegraded: Effect.sync(() => {
            limiter.markDegraded()
            afterHealthChange(now())
          }),
          markRecovered: Effect.sync(() => {
            limiter.markRecovered(now())
            afterHealthChange(now())
          }),
          snapshot: Effect.sync(() => {
            const at = now()
            return {
              limit: limiter.limit(at),
              inFlight: limiter.inFlight,
              waiting: waiters.length,
              health: limiter.health(at)
            }
          }),
          [FastPath.key]: {
            tryAcquireNow,
            releaseNow,
            holdRecovery: (held) =>
              Effect.sync(() => {
                limiter.recoveryHeld = held
              })
          }
        }
        return service
      })
  )
