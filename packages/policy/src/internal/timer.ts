import { callback, liveClock, thenInterruptible } from "#effect-line"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

// The platform's own timers, which the real clock uses too (every JavaScript runtime has them; this
// package compiles without any runtime's types).
declare const setTimeout: (callback: () => void, millis: number) => unknown
declare const clearTimeout: (handle: unknown) => void

/** Timers fire at once past this (2^31 − 1 ms, about 24.8 days): a longer wait has no timer. */
const maxTimerMillis = 2 ** 31 - 1

/** Arms the platform's timer, or none for a wait too long for it; returns how to disarm it. */
export const armTimer = (millis: number, fire: () => void): () => void => {
  if (!(millis <= maxTimerMillis)) return () => {}
  const handle = setTimeout(fire, Math.max(0, millis))
  return () => clearTimeout(handle)
}

/**
 * Waits until `listen`'s wake is called, or `millis` have passed on `clock`, whichever comes
 * first. On the real clock the timer is the platform's own, armed beside the wait, so a waiter
 * costs one suspension and no fiber; any other clock (a TestClock, a simulation) is asked to
 * sleep, as `Effect.timeout` would. An infinite `millis` waits for the wake alone.
 */
export const wakeOrTimeout = (
  listen: (wake: () => void) => () => void,
  millis: number,
  clock: Clock.Clock
): Effect.Effect<void> => {
  if (Number.isFinite(millis) && clock !== liveClock) {
    return Effect.asVoid(
      Effect.timeoutOption(wakeOrTimeout(listen, Number.POSITIVE_INFINITY, clock), Duration.millis(millis))
    )
  }
  return thenInterruptible(callback<void>((resume) => {
    let disarm = () => {}
    // Whichever comes first stops the other, so neither resumes a fiber that has moved on.
    const stopListening = listen(() => {
      stopListening()
      disarm()
      resume(Effect.void)
    })
    if (Number.isFinite(millis)) {
      disarm = armTimer(millis, () => {
        stopListening()
        resume(Effect.void)
      })
    }
    return Effect.sync(() => {
      disarm()
      stopListening()
    })
  }))
}
