/**
 * Drives a model client with a load and reports what the failure path cost.
 *
 * A load is N chat calls, at most C in flight (never more than the target's gate admits),
 * optionally started at a steady rate. Calls are counted out as they start, never listed up front,
 * so a large N costs memory only for the latencies of calls that ended. Calls, their outcomes and
 * last failures are taken from the calls themselves; attempts, retries, budget exhaustions,
 * deadline skips, shed calls and why failed calls stopped come from the policy's own metrics
 * (`Metrics.summary`), read before and after the run, so the report shows exactly what the
 * resilient calls did and not a re-implementation of it. Latencies are measured per call on the
 * real clock. Interrupted (Ctrl-C), a load cancels the calls in flight and still says what it did.
 * Settings it cannot run with fail it with `LoadSettingsError`, every one of them named, before any
 * call is sent.
 *
 * ```ts
 * import { Load } from "@resilient-ai/cli/internal"
 * import { ModelClient, type Target } from "@resilient-ai/client"
 *
 * declare const target: Target.Target
 * const client = yield* ModelClient.make(target)
 * const summary = yield* Load.run(client, { requests: 400, concurrency: 16, deadline: "3 seconds" })
 * ```
 */
import type { ChatCompletion, ModelClient, Target } from "@resilient-ai/client"
import { Metrics } from "@resilient-ai/policy"
import { EffectLine, Meters } from "@resilient-ai/policy/internal"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { performance } from "node:perf_hooks"
import { range, refusal } from "./internal/wording.js"

/** The short, fixed prompt every call of a load sends unless told otherwise. */
export const prompt: ChatCompletion.ChatRequest = {
  messages: [{ role: "user", content: "Reply with one short sentence." }]
}

/**
 * The most calls one load makes. The report keeps every call's latency (for exact percentiles),
 * 16 bytes a call, so ten million is 160 MB, well inside Node's default heap; at the client's
 * measured ~0.8 CPU-ms a call it is already over two CPU-hours, and against a paid API a bill
 * nobody should start by a typo. A longer test is several loads.
 */
export const maxRequests = 10_000_000

/** Settings of a load. */
export interface Options {
  /** Chat calls to make, from 1 to `maxRequests`. */
  readonly requests: number
  /**
   * Calls in flight at once, at least 1. Capped at the target's gate (`Target.concurrency`): beyond
   * it a managed target would only queue the calls and a self-hosted one shed them at once.
   */
  readonly concurrency: number
  /** Each call's deadline, from the moment it starts. Without it, only the target's attempt timeout bounds a call. */
  readonly deadline?: EffectLine.DurationInput | undefined
  /**
   * Calls started per second. Without it the load is closed: a call starts as soon as one ends, so
   * calls that fail fast start the next at once. With it, calls arrive as users do, whether or not
   * earlier ones have ended (still at most `concurrency` in flight).
   */
  readonly ratePerSecond?: number | undefined
  /** The request each call sends. Default `prompt`. */
  readonly request?: ChatCompletion.ChatRequest | undefined
  /** Told after each call ends; for progress bars, so it must be cheap. */
  readonly onProgress?: ((completed: number, total: number) => void) | undefined
  /**
   * Runs, uninterruptibly, with what the load did so far when it is interrupted, once the calls in
   * flight have been cancelled; the interruption then goes on (the load still ends interrupted).
   */
  readonly onInterrupt?: ((partial: Summary) => Effect.Effect<void>) | undefined
}

/** A setting of a load that `problems` can refuse. */
export type Setting = "requests" | "concurrency" | "ratePerSecond" | "deadline"

/** A setting a load cannot run with: which one, the rule it breaks, and the value it was given. */
export interface Problem {
  readonly setting: Setting
  /** What the setting accepts: `a whole number from 1 to 10,000,000`. */
  readonly rule: string
  readonly value: unknown
}

/** What is wrong with a load's settings, every problem and not only the first; empty when it can run. */
export const problems = (options: Options): ReadonlyArray<Problem> => {
  const found: Array<Problem> = []
  const check = (setting: Setting, value: unknown, ok: boolean, rule: string) => {
    if (!ok) found.push({ setting, rule, value })
  }
  const { concurrency, deadline, ratePerSecond, requests } = options
  check(
    "requests",
    requests,
    Number.isInteger(requests) && requests >= 1 && requests <= maxRequests,
    range(1, maxRequests)
  )
  check("concurrency", concurrency, Number.isInteger(concurrency) && concurrency >= 1, "a whole number of at least 1")
  check(
    "ratePerSecond",
    ratePerSecond,
    ratePerSecond === undefined || (ratePerSecond > 0 && Number.isFinite(ratePerSecond)),
    "a positive, finite number of calls"
  )
  check(
    "deadline",
    deadline,
    deadline === undefined || EffectLine.durationFrom(deadline) !== undefined,
    "a duration (milliseconds, or text such as \"3 seconds\")"
  )
  return found
}

/** Settings a load cannot run with, each named with the rule it breaks; no call was sent. */
export class LoadSettingsError extends Data.TaggedError("LoadSettingsError")<{
  readonly problems: ReadonlyArray<Problem>
}> {
  override get message() {
    return this.problems.map((problem) => refusal(problem.setting, problem.rule, String(problem.value))).join("; ")
  }
}

/** Two points of a latency distribution, in milliseconds; `null` when no call was measured. */
export interface Latency {
  readonly p50: number | null
  readonly p99: number | null
}

/** What a load did. */
export interface Summary {
  readonly target: string
  readonly kind: Target.Kind
  readonly model: string
  readonly requests: number
  /** The most calls in flight at once: what was asked, capped at what the target's gate admits. */
  readonly concurrency: number
  /** The concurrency asked for, before the cap. */
  readonly concurrencyRequested: number
  readonly deadlineMs: number | null
  readonly ratePerSecond: number | null
  /** Whether the load was interrupted before all its calls were made; the counts are those so far. */
  readonly interrupted: boolean
  /** Logical calls that ended (all of `requests` unless interrupted). */
  readonly calls: number
  /** Calls in flight when the load was interrupted, cancelled before they ended; not in `calls`. */
  readonly callsInterrupted: number
  readonly successes: number
  readonly failures: number
  /** Failed calls by the tag of their last failure. */
  readonly failuresByTag: Readonly<Record<string, number>>
  /** Failed calls by why their retry sequence stopped. */
  readonly failuresByReason: Readonly<Record<string, number>>
  /** For each tag of `failuresByTag`, the message of its first failure: what happened, in words. */
  readonly failureExamples: Readonly<Record<string, string>>
  /** Attempts sent, first attempts included (and those of calls an interruption cancelled). */
  readonly attempts: number
  /** `attempts / successes`; `null` without a success. */
  readonly attemptsPerSuccess: number | null
  readonly retries: number
  readonly retriesSucceeded: number
  /** Retries the budget refused (each ends its call). */
  readonly budgetExhausted: number
  /** Attempts and sleeps not started because they could not finish before the deadline. */
  readonly deadlineSkips: number
  /** Calls refused at once by a full gate of a shedding target. */
  readonly shed: number
  /**
   * The most retries the same attempt ceiling would have sent without a budget: the retries made,
   * plus, for each call the budget stopped, the attempts it had left.
   */
  readonly unbudgetedRetries: number
  readonly latencyMs: {
    /** Successful calls only. */
    readonly successes: Latency
    /** Failed calls only: low when failures are fast, near the deadline when calls wait it out. */
    readonly failures: Latency
    /** Every call. */
    readonly all: Latency
  }
  /** From the first call's start to the last call's end. */
  readonly wallMs: number
}

const tenths = (value: number): number => Math.round(value * 10) / 10

const latencyOf = (samples: Array<number>): Latency => {
  const sorted = samples.sort((a, b) => a - b)
  const at = (q: number) => {
    const value = Meters.quantile(sorted, q, { sorted: true })
    return value === undefined ? null : tenths(value)
  }
  return { p50: at(0.5), p99: at(0.99) }
}

/**
 * Runs a load through `client` and reports it. The policy's metrics are process-wide per target
 * and model, so two loads on the same target name and model must not run at the same time.
 * Settings it cannot run with (`problems`) fail it with `LoadSettingsError` before any call is sent.
 */
export const run = (client: ModelClient.Service, options: Options): Effect.Effect<Summary, LoadSettingsError> =>
  Effect.suspend(() => {
    const refused = problems(options)
    return refused.length === 0 ? measure(client, options) : Effect.fail(new LoadSettingsError({ problems: refused }))
  })

const measure = (client: ModelClient.Service, options: Options): Effect.Effect<Summary> => {
  const { concurrency, requests } = options
  const rate = options.ratePerSecond
  // Checked by `problems` before the load runs.
  const deadline = options.deadline === undefined ? undefined : EffectLine.durationFrom(options.deadline)!
  const request = options.request ?? prompt
  const target = client.target
  const model = request.model ?? target.model
  const callOptions: ModelClient.CallOptions = deadline === undefined ? {} : { timeout: deadline }
  const inFlight = Math.min(concurrency, target.concurrency)

  return Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const before = yield* Metrics.summary(target.name, model)
      const successLatencies: Array<number> = []
      const failureLatencies: Array<number> = []
      const failuresByTag: Record<string, number> = {}
      const failureExamples: Record<string, string> = {}
      let attemptsLeftAtBudget = 0
      let cancelled = 0
      let started = 0
      const startedAt = performance.now()

      const measured = Effect.suspend(() => {
        const at = performance.now()
        const ended = () => options.onProgress?.(successLatencies.length + failureLatencies.length, requests)
        return Effect.match(client.chat(request, callOptions), {
          onSuccess: () => {
            successLatencies.push(performance.now() - at)
            ended()
          },
          onFailure: (failure) => {
            failureLatencies.push(performance.now() - at)
            failuresByTag[failure.last._tag] = (failuresByTag[failure.last._tag] ?? 0) + 1
            failureExamples[failure.last._tag] ??= failure.last.message
            if (failure.reason === "budget") {
              attemptsLeftAtBudget += Math.max(0, target.maxAttempts - failure.attempts.length)
            }
            ended()
          }
        })
      }).pipe(Effect.onInterrupt(() => Effect.sync(() => cancelled++)))

      // Paced on the real clock, as latencies are: call `index` starts `index / rate` seconds in.
      const call = (index: number) =>
        rate === undefined ? measured : Effect.suspend(() => {
          const wait = startedAt + (index * 1000) / rate - performance.now()
          return wait > 0 ? Effect.andThen(Effect.sleep(Duration.millis(wait)), measured) : measured
        })

      // `inFlight` workers take the calls in turn, so the calls are counted, never listed.
      const worker: Effect.Effect<void> = Effect.suspend(() =>
        started < requests ? Effect.andThen(call(started++), worker) : Effect.void
      )
      const exit = yield* Effect.exit(
        restore(Effect.all(Array.from({ length: Math.min(inFlight, requests) }, () => worker), {
          concurrency: "unbounded",
          discard: true
        }))
      )
      const wallMs = performance.now() - startedAt
      const after = yield* Metrics.summary(target.name, model)
      const delta = (
        key: "attempts" | "retries" | "retriesSucceeded" | "budgetExhausted" | "deadlineSkips" | "shed"
      ) => after[key] - before[key]
      // Calls by why the policy stopped them: what its metrics counted during the run.
      const failuresByReason: Record<string, number> = {}
      for (const [reason, calls] of Object.entries(after.callsFailedByReason)) {
        const stopped = calls - (before.callsFailedByReason[reason] ?? 0)
        if (stopped > 0) failuresByReason[reason] = stopped
      }
      const attempts = delta("attempts")
      const retries = delta("retries")
      const successes = successLatencies.length
      const calls = successes + failureLatencies.length
      const byTag = sortedByCount(failuresByTag)
      const summary: Summary = {
        target: target.name,
        kind: target.kind,
        model,
        requests,
        concurrency: inFlight,
        concurrencyRequested: concurrency,
        deadlineMs: deadline === undefined ? null : Duration.toMillis(deadline),
        ratePerSecond: rate ?? null,
        interrupted: Exit.isFailure(exit) && EffectLine.hasInterruption(exit.cause),
        calls,
        callsInterrupted: cancelled,
        successes,
        failures: calls - successes,
        failuresByTag: byTag,
        failuresByReason: sortedByCount(failuresByReason),
        failureExamples: Object.fromEntries(Object.keys(byTag).map((tag) => [tag, failureExamples[tag]!])),
        attempts,
        attemptsPerSuccess: successes === 0 ? null : attempts / successes,
        retries,
        retriesSucceeded: delta("retriesSucceeded"),
        budgetExhausted: delta("budgetExhausted"),
        deadlineSkips: delta("deadlineSkips"),
        shed: delta("shed"),
        unbudgetedRetries: retries + attemptsLeftAtBudget,
        latencyMs: {
          successes: latencyOf(successLatencies),
          failures: latencyOf(failureLatencies),
          all: latencyOf(successLatencies.concat(failureLatencies))
        },
        wallMs: Math.round(wallMs)
      }
      if (Exit.isSuccess(exit)) return summary
      if (summary.interrupted && options.onInterrupt !== undefined) yield* options.onInterrupt(summary)
      return yield* Effect.failCause(exit.cause)
    })
  )
}

/** The same counts, largest first, so reports read from the most common failure down. */
const sortedByCount = (counts: Record<string, number>): Record<string, number> =>
  Object.fromEntries(Object.entries(counts).sort(([a, x], [b, y]) => y - x || a.localeCompare(b)))
