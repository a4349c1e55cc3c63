/**
 * Where a fiber carries its deadline: read by the engine on every call, set by `Deadline.at` and
 * `Deadline.within`.
 */
import { makeRef, type Ref } from "#effect-line"

/**
 * The current deadline in epoch milliseconds of Effect's `Clock`; `Infinity` when none is set.
 * A joining child never moves its parent's deadline.
 */
export const CurrentDeadline: Ref<number> = makeRef(
  "@resilient-ai/policy/Deadline/CurrentDeadline",
  Number.POSITIVE_INFINITY
)
