/**
 * Where a fiber carries its deadline: read by the engine on every call, set by `Deadline.at` and
 * `Deadline.within`.
 */
import * as FiberRef from "effect/FiberRef"
import { globalValue } from "effect/GlobalValue"

/**
 * The current deadline in epoch milliseconds of Effect's `Clock`; `Infinity` when none is set.
 * A joining child never moves its parent's deadline.
 */
export const CurrentDeadline: FiberRef.FiberRef<number> = globalValue(
  "@resilient-ai/policy/Deadline/CurrentDeadline",
  () => FiberRef.unsafeMake(Number.POSITIVE_INFINITY, { join: (parent) => parent })
)
