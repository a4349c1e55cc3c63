/**
 * `@effect/vitest` as the Effect 4 line's tests import it: version 4, whose `it.effect` and
 * `it.live` give each test a scope of its own, so Effect 3's `it.scoped` and `it.scopedLive` are
 * those two. The test files are written once for both lines (docs/effect-lines.md); the Effect 4
 * config resolves `@effect/vitest` here for every file but this one.
 */
import { it as effectIt } from "@effect/vitest"

export * from "@effect/vitest"

/** `it`, with Effect 3's names for a scoped test on the test clock and on the live one. */
export const it: typeof effectIt & {
  readonly scoped: typeof effectIt.effect
  readonly scopedLive: typeof effectIt.live
} = Object.assign(effectIt, { scoped: effectIt.effect, scopedLive: effectIt.live })
