/**
 * A call classified, retried within budget and deadline, and the failure path measured.
 *
 * The provider here is simulated in-process (no network, no API key): each call meets one of the
 * failures a model API really returns, and the policy decides what to do with it. Then an outage
 * shows the budget refusing retries once successes stop.
 *
 * Run it with `npx -y pnpm@12.4.2 exec tsx --conditions=@resilient-ai/source examples/retry-within-budget.ts`.
 */
import { Failure, Metrics, Resilient } from "@resilient-ai/policy"
import { Duration, Effect, Ref } from "effect"
// What Effect 3 and Effect 4 spell differently: examples/line/effect3.ts and effect4.ts show each form.
import { printLogLines, withMinimumLogLevel } from "#examples-line"

/** What the simulated provider does on each attempt of a call. */
type Reply = "ok" | Failure.Failure | "hang"

const overloaded = new Failure.Overloaded({ status: 503, retryAfter: Duration.millis(200), detail: "try again" })
const serverError = new Failure.ServerError({ status: 500 })
const quota = new Failure.RateLimited({ status: 429, providerCode: "insufficient_quota" })
const longHint = new Failure.RateLimited({ status: 429, retryAfter: Duration.seconds(5) })

/** A provider that plays `replies` in order, one per attempt; the last one repeats. */
const provider = (replies: ReadonlyArray<Reply>) =>
  Effect.map(
    Ref.make(0),
    (attempts) =>
      Effect.flatMap(Ref.getAndUpdate(attempts, (n) => n + 1), (n): Effect.Effect<string, Failure.Failure> => {
        const reply = replies[Math.min(n, replies.length - 1)]!
        if (reply === "ok") return Effect.succeed(`answer after ${n + 1} attempt(s)`)
        if (reply === "hang") return Effect.never
        return Effect.fail(reply)
      })
  )

const policySettings = {
  target: "example",
  model: "mistral-small",
  maxAttempts: 3,
  baseDelay: "50 millis",
  maxDelay: "400 millis",
  hintSpread: "50 millis",
  attemptTimeout: "300 millis",
  minAttemptTime: "20 millis",
  gate: { limit: 8 }
} as const

const scenarios: ReadonlyArray<{
  readonly name: string
  readonly replies: ReadonlyArray<Reply>
  readonly options?: Resilient.CallOptions
}> = [
  { name: "healthy", replies: ["ok"] },
  { name: "503 overloaded, retry-after-ms 200", replies: [overloaded, "ok"] },
  { name: "two 500s", replies: [serverError, serverError, "ok"] },
  { name: "429 insufficient_quota", replies: [quota, "ok"] },
  { name: "read timeout, not replay-safe", replies: ["hang", "ok"] },
  { name: "read timeout, replay-safe", replies: ["hang", "ok"], options: { replaySafe: true } },
  { name: "429 retry-after 5 s, deadline 1 s", replies: [longHint, "ok"], options: { timeout: "1 second" } },
  { name: "three 500s", replies: [serverError] }
]

/** How a call ended: its answer, or the `CallFailed` that says why it stopped. */
type Outcome = { readonly answer: string } | { readonly failed: Failure.CallFailed }

const describe = (outcome: Outcome): string => {
  if ("answer" in outcome) return `ok      ${outcome.answer}`
  const { attempts, last, reason } = outcome.failed
  return `failed  stop=${reason}, last=${last._tag}, attempts=${attempts.length}`
}

const runCall = (
  replies: ReadonlyArray<Reply>,
  callPolicy: Resilient.Policy,
  options?: Resilient.CallOptions
): Effect.Effect<Outcome> =>
  Effect.flatMap(provider(replies), (attempt) =>
    attempt.pipe(
      Resilient.retry(callPolicy, { timeout: "5 seconds", ...options }),
      Effect.match({ onSuccess: (answer): Outcome => ({ answer }), onFailure: (failed): Outcome => ({ failed }) })
    ))

const program = Effect.gen(function*() {
  const policy = yield* Resilient.policy(policySettings)
  const outagePolicy = yield* Resilient.policy({
    ...policySettings,
    target: "example-outage",
    budget: { minPerSecond: 0.1 }
  })
  yield* Effect.log("one call per failure kind")
  for (const scenario of scenarios) {
    const outcome = yield* runCall(scenario.replies, policy, scenario.options)
    yield* Effect.logInfo(`${scenario.name.padEnd(38)} → ${describe(outcome)}`)
  }

  yield* Effect.log("an outage: 40 calls, every attempt fails; the outage target's budget floor is 0.1 retry/s")
  const outage = yield* Effect.forEach(
    Array.from({ length: 40 }, () => runCall([overloaded], outagePolicy)),
    (call) => call,
    { concurrency: 10 }
  ).pipe(withMinimumLogLevel("Error"))
  const stoppedBy = (reason: Failure.StopReason) =>
    outage.filter((outcome) => "failed" in outcome && outcome.failed.reason === reason).length
  const outageSummary = yield* Metrics.summary(outagePolicy.target, outagePolicy.model)
  yield* Effect.logInfo(
    `outage → ${outageSummary.attempts} attempts for 40 calls (3 attempts each would have been 120): ` +
      `the floor granted ${outageSummary.retries} retries, then ${stoppedBy("budget")} calls ended with reason=budget`
  )

  const summary = yield* Metrics.summary(policy.target, policy.model)
  yield* Effect.log("failure path, as the metrics recorded it")
  for (
    const [name, value] of [
      ["attempts", summary.attempts],
      ["successes", summary.successes],
      ["attempts per success", summary.attemptsPerSuccess.toFixed(2)],
      ["retries", summary.retries],
      ["retries that succeeded", summary.retriesSucceeded],
      ["budget exhaustions", summary.budgetExhausted],
      ["deadline skips", summary.deadlineSkips],
      ["delays slept (count / total ms)", `${summary.retryDelay.count} / ${Math.round(summary.retryDelay.sum * 1000)}`],
      ["failures by kind", JSON.stringify(summary.failuresByKind)],
      ["calls stopped, by reason", JSON.stringify(summary.callsFailedByReason)]
    ] as const
  ) {
    yield* Effect.logInfo(`${name.padEnd(32)} ${value}`)
  }
})

/** One line per log entry: level, message, then the annotations as key=value. */
const compactLogger = printLogLines(({ annotations, level, message }) => {
  const text = Array.isArray(message) ? message.join(" ") : String(message)
  const pairs = annotations.map(([key, value]) => `${key}=${String(value)}`).join(" ")
  console.log(`${level.padEnd(5)} ${text}${pairs === "" ? "" : `  ${pairs}`}`)
})

Effect.runPromise(program.pipe(Effect.provide(compactLogger), withMinimumLogLevel("Info")))
