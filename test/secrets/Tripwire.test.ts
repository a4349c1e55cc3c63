/**
 * The tripwire of `test/setup.ts` itself: a key written where it watches is caught. Were a hook to
 * stop working, no file would find a leak and every file would pass; this one would not.
 */
import { withoutDefaultLogger } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { EffectLine } from "@resilient-ai/policy/internal"
import { Effect, Fiber } from "effect"
import { canary, leaksOf } from "../canary.js"

const wheres = (leaks: ReadonlyArray<{ readonly where: string }>) => [...new Set(leaks.map((leak) => leak.where))]

describe("the canary tripwire", () => {
  it.effect("catches the key in a log line's message and annotations, in a test's fiber and in a daemon it forks", () =>
    Effect.gen(function*() {
      const inTest = yield* leaksOf(Effect.log(`key ${canary}`))
      assert.includeMembers(wheres(inTest), ["log line (logfmt)", "log line (json)"])
      const annotated = yield* leaksOf(Effect.log("calling").pipe(Effect.annotateLogs("apiKey", canary)))
      assert.includeMembers(wheres(annotated), ["log annotation apiKey", "log line (logfmt)"])
      const daemon = yield* leaksOf(
        Effect.flatMap(EffectLine.forkDaemon(Effect.logError(canary)), (fiber) => Fiber.await(fiber))
      )
      assert.include(wheres(daemon), "log line (logfmt)")
    }))

  it("catches the key in a log line of a runtime of its own, and in a serialisation", () => {
    const quietly = Effect.log(canary).pipe(Effect.provide(withoutDefaultLogger))
    assert.include(wheres(Effect.runSync(leaksOf(quietly))), "log line (logfmt)")
    const serialised = Effect.runSync(leaksOf(Effect.sync(() => JSON.stringify({ apiKey: canary }))))
    assert.deepStrictEqual(wheres(serialised), ["JSON.stringify"])
  })

  it.effect("finds nothing in a line without the key", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* leaksOf(Effect.log("nothing secret")), [])
    }))
})
