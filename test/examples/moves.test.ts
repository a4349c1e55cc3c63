/**
 * The README's "API in three moves", run: each move's code is shown in the README exactly as it is
 * here (`readme.test.ts` checks), between the harness lines that give it a real server to call. The
 * moves read the same on both Effect lines; the harness reaches what differs through `#test-line`.
 * The install check (test/install) runs this file as it is, in a fresh project of each line built
 * from the packed tarballs.
 */
import { TestClock, withEnvironment } from "#test-line"
import { describe } from "@effect/vitest"
import { EffectLine } from "@resilient-ai/policy/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Exit, Fiber } from "effect"
import { canary } from "../canary.js"
// The README's imports for the three moves:
import { NodeHttpClient } from "@effect/platform-node"
import { assert, it } from "@effect/vitest"
import { ModelClient, Target } from "@resilient-ai/client"
import { Coordination, Resilient, RetryBudget } from "@resilient-ai/policy"
import { Data, Effect, Layer } from "effect"

// Move 1: call Mistral with a deadline.
// MISTRAL_BASE_URL, MISTRAL_MODEL, MISTRAL_API_KEY: read and checked when the layer is built.
const Mistral = ModelClient.layer(Target.managedConfig("MISTRAL")).pipe(Layer.provide(NodeHttpClient.layerUndici))

const haiku = Effect.gen(function*() {
  const mistral = yield* ModelClient.ModelClient
  const completion = yield* mistral.chat(
    { messages: [{ role: "user", content: "A haiku about retries." }] },
    { timeout: "20 seconds" } // one deadline for every attempt and every wait of this call
  )
  return completion.choices[0].message.content
})
// End of move 1.

/** The harness's database, `findUser` in the README: deadlocks `deadlocks` times, then finds the user. */
let deadlocks = 0
const findUser = (id: string): Effect.Effect<{ readonly id: string }, DbError> =>
  Effect.suspend(() => deadlocks-- > 0 ? Effect.fail(new DbError({ code: "deadlock" })) : Effect.succeed({ id }))

// Move 2: wrap your own Effect, with errors of its own.
class DbError extends Data.TaggedError("DbError")<{ readonly code: "deadlock" | "unique_violation" }> {}

// A value, definable anywhere: checked on its first call, where a setting that cannot work is an
// InvalidSettings naming it, in the call's error channel (never a throw).
const usersDb = Resilient.policy({ target: "users-db", maxAttempts: 4, gate: { limit: 16 } })

const findFortyTwo = findUser("42").pipe(
  // Retried while a deadlock; `CallFailed.last` stays a DbError.
  Resilient.retry(usersDb, { while: (error: DbError) => error.code === "deadlock", timeout: "2 seconds" })
)
// End of move 2.

describe("the README's three moves", () => {
  // `it.live` with a scope of its own: Effect 4's @effect/vitest has no `it.scopedLive`.
  it.live("move 1: calls the model under one deadline", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
      const environment = {
        MISTRAL_BASE_URL: server.url,
        MISTRAL_MODEL: "mistral-small-latest",
        MISTRAL_API_KEY: canary
      }
      const answer = yield* haiku.pipe(
        Effect.provide(Mistral),
        withEnvironment(environment),
        Effect.provide(Coordination.layerMemory)
      )
      assert.strictEqual(answer, FaultServer.replyText)
      assert.strictEqual((yield* server.arrivals).length, 2)
    })))

  it.effect("move 2: retries the deadlocks, and the budget, gate and deadline apply", () =>
    Effect.gen(function*() {
      deadlocks = 2
      const fiber = yield* EffectLine.fork(findFortyTwo)
      yield* TestClock.adjust("1 minute")
      assert.deepStrictEqual(yield* Fiber.await(fiber), Exit.succeed({ id: "42" }))
      assert.strictEqual(deadlocks, -1, "three attempts: two deadlocks, then the user")
    }).pipe(Effect.provide(Coordination.layerMemory)))
})

// Move 3: swap the budget in a test.
it.effect("a budget that grants nothing stops the call after its first attempt", () =>
  Effect.gen(function*() {
    deadlocks = 1 // the database behind findUser deadlocks once
    const failed = yield* Effect.flip(findFortyTwo) // no retry, so no backoff to wait for
    assert.strictEqual(failed._tag === "CallFailed" && failed.reason, "budget")
    assert.strictEqual(failed._tag === "CallFailed" && failed.last._tag, "DbError")
  }).pipe(Effect.provide(Coordination.layerWith({ budget: RetryBudget.disabled }))))
// End of move 3.
