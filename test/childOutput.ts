/** Waiting on what a child process prints, for the tests that run the bin and fleet members. */
import { dieMessage } from "#test-line"
import { EffectLine } from "@resilient-ai/policy/internal"
import { Effect } from "effect"
import type { ChildProcessWithoutNullStreams } from "node:child_process"

/**
 * Waits until `found()` gives a value, woken by the child's output and its end rather than by a
 * timer, so a slow machine only makes it wait longer; if the child ends first, dies with
 * `endedWithout()`. Call it after the listeners that collect the output are registered, so each
 * check sees the chunk that woke it.
 */
export const whenPrinted = <A>(
  child: ChildProcessWithoutNullStreams,
  closed: () => boolean,
  found: () => A | undefined,
  endedWithout: () => string
): Effect.Effect<A> =>
  EffectLine.callback<A>((resume) => {
    const settle = () => {
      const value = found()
      if (value !== undefined) resume(Effect.succeed(value))
      else if (closed()) resume(dieMessage(endedWithout()))
      else return false
      return true
    }
    if (settle()) return
    const onEvent = () => void (settle() && stop())
    const stop = () => {
      child.stdout.off("data", onEvent)
      child.stderr.off("data", onEvent)
      child.off("close", onEvent)
    }
    child.stdout.on("data", onEvent)
    child.stderr.on("data", onEvent)
    child.on("close", onEvent)
    return Effect.sync(stop)
  })
