/**
 * docs/policy.md's example, kept here so the type-checker proves it still compiles.
 * (`sendChat` is declared, not implemented: the client package provides the real one.)
 */
import { Deadline, Failure, Resilient } from "@resilient-ai/policy"
import { Effect } from "effect"

// One attempt: any Effect that fails with the toolkit's typed failures.
declare const sendChat: (prompt: string) => Effect.Effect<string, Failure.Failure>

const program = Effect.gen(function*() {
  // Checked once, when the program starts: a bad setting is an InvalidSettings naming it.
  const mistral = yield* Resilient.policy({
    target: "mistral",
    model: "mistral-large-latest",
    maxAttempts: 3, // first attempt included
    attemptTimeout: "45 seconds", // per model: above its p99 under load
    baseDelay: "500 millis", // full jitter: uniform in [0, min(maxDelay, base·2^n)]
    maxDelay: "8 seconds",
    budget: { ratio: 0.1, minPerSecond: 5 }, // in this process; RedisCoordination shares it across a fleet
    gate: { limit: 64, mode: "queue" } // a self-hosted pool would shed, with a budget near zero
  })
  const answer = (prompt: string) =>
    sendChat(prompt).pipe(
      Resilient.retry(mistral, { replaySafe: false }),
      // A CallFailed says why it stopped, what failed last, and every attempt made.
      Effect.catchTag("CallFailed", (failed) =>
        failed.reason === "budget"
          ? Effect.succeed("the provider is struggling; try again later")
          : Effect.fail(failed))
    )
  return yield* answer("Summarise the incident report").pipe(
    Deadline.within("20 seconds") // one deadline at the entry point
  )
})

void program
