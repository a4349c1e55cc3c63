/**
 * The error types of a resilient call, checked by the compiler (`tsc -b` type-checks this file; the
 * tests below only run the assertions' no-op bodies): an unchecked policy adds `InvalidSettings`,
 * a checked one adds nothing, and the caller's own error type flows through `classify` and `while`
 * without widening.
 */
import { Target } from "@resilient-ai/client"
import { Targets } from "@resilient-ai/client/internal"
import { type Failure, Resilient, type Settings } from "@resilient-ai/policy"
import { Retries } from "@resilient-ai/policy/internal"
import { Data, Effect, Redacted } from "effect"
import { describe, expectTypeOf, it } from "vitest"

class DbError extends Data.TaggedError("DbError")<{ readonly transient: boolean }> {}

// Values only for their types: nothing here is run.
const findUser: Effect.Effect<string, DbError> = Effect.fail(new DbError({ transient: true }))
const sendChat: Effect.Effect<string, Failure.ServerError | Failure.RateLimited> = Effect.succeed("answer")
const target = Effect.runSync(
  Target.managed({ name: "t", baseUrl: "https://api.mistral.ai/v1", model: "m", apiKey: Redacted.make("k") })
)

/** Defined at module level, without `yield*`: not checked yet. */
const usersDb = Resilient.policy({ target: "users-db", maxAttempts: 4 })

type Refused = Retries.Refusal

describe("the types of a resilient call", () => {
  it("an unchecked policy is Policy<InvalidSettings>; a checked one is Policy, its settings readable", () => {
    expectTypeOf(usersDb).toEqualTypeOf<Resilient.Policy<Settings.InvalidSettings>>()
    expectTypeOf(usersDb).toMatchTypeOf<Effect.Effect<Resilient.Policy, Settings.InvalidSettings>>()
    expectTypeOf(Targets.policyFor(target)).toEqualTypeOf<Resilient.Policy>()
    const checked = Effect.gen(function*() {
      const policy = yield* usersDb
      expectTypeOf(policy).toEqualTypeOf<Resilient.Policy>()
      expectTypeOf(policy.maxAttempts).toEqualTypeOf<number>()
      // @ts-expect-error: an unchecked policy's settings are not known yet
      void usersDb.maxAttempts
    })
    expectTypeOf(checked).toEqualTypeOf<Effect.Effect<void, Settings.InvalidSettings>>()
  })

  it("a policy adds its error to the call's: InvalidSettings for an unchecked one, nothing for a checked one", () => {
    const unchecked = sendChat.pipe(Resilient.retry(usersDb))
    expectTypeOf(unchecked).toEqualTypeOf<
      Effect.Effect<
        string,
        Failure.CallFailed<Failure.ServerError | Failure.RateLimited | Refused> | Settings.InvalidSettings
      >
    >()
    const checked = sendChat.pipe(Resilient.retry(Targets.policyFor(target), { timeout: "5 seconds" }))
    expectTypeOf(checked).toEqualTypeOf<
      Effect.Effect<string, Failure.CallFailed<Failure.ServerError | Failure.RateLimited | Refused>>
    >()
    const dataFirst = Resilient.retry(sendChat, usersDb, { timeout: "5 seconds" })
    expectTypeOf(dataFirst).toEqualTypeOf<typeof unchecked>()
  })

  it("the caller's own error flows through classify and while, unwidened", () => {
    const classified = findUser.pipe(
      Resilient.retry(usersDb, { classify: (error: DbError) => error.transient ? "retryable" : "terminal" })
    )
    expectTypeOf(classified).toEqualTypeOf<
      Effect.Effect<string, Failure.CallFailed<DbError | Refused> | Settings.InvalidSettings>
    >()
    const whileTransient = findUser.pipe(Resilient.retry(usersDb, { while: (error: DbError) => error.transient }))
    expectTypeOf(whileTransient).toEqualTypeOf<typeof classified>()
    // Data first, the predicate's error is the effect's, without writing it.
    const dataFirst = Resilient.retry(findUser, usersDb, { while: (error) => error.transient })
    expectTypeOf(dataFirst).toEqualTypeOf<typeof classified>()
    // @ts-expect-error: an error of the caller's own needs classify or while to be judged
    findUser.pipe(Resilient.retry(usersDb))
  })

  it("the options inline: one expression, the policy checked on the first call", () => {
    const inline = findUser.pipe(
      Resilient.retry({
        target: "users-db",
        maxAttempts: 3,
        timeout: "2 seconds",
        while: (error: DbError) => error.transient
      })
    )
    expectTypeOf(inline).toEqualTypeOf<
      Effect.Effect<string, Failure.CallFailed<DbError | Refused> | Settings.InvalidSettings>
    >()
    const inlineFirst = Resilient.retry(findUser, { target: "users-db", while: (error) => error.transient })
    expectTypeOf(inlineFirst).toEqualTypeOf<typeof inline>()
    const failures = sendChat.pipe(Resilient.retry({ target: "mistral", maxAttempts: 2 }))
    expectTypeOf(failures).toEqualTypeOf<
      Effect.Effect<
        string,
        Failure.CallFailed<Failure.ServerError | Failure.RateLimited | Refused> | Settings.InvalidSettings
      >
    >()
  })
})
