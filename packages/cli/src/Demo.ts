/**
 * The demo: a realistic bad few seconds of a provider, served by the local fault server, and a load
 * through a managed target that lives through it. No API key, no network.
 *
 * The server answers most calls in 20–50 ms, fails about 10% with a 503 and 5% with a 429 that
 * asks to wait a second, and for a stretch in the middle of the run (1.5 s of a 5 s run) answers
 * every request with a 503. Calls arrive at a steady rate, as users do, so the outage meets a
 * stream of new calls. The explanation that follows the table is written from the run's own
 * numbers: how many retries the budget allowed against what a naive 3-attempt policy would have
 * sent, attempts per success, what the server saw during the outage, and the tail latency.
 */
import { ModelClient, Target } from "@resilient-ai/client"
import type { ClientLine } from "@resilient-ai/client/internal"
import { type Settings } from "@resilient-ai/policy"
import { Budgets, EffectLine } from "@resilient-ai/policy/internal"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Load from "./Load.js"

/** Settings of a demo run; each has a default that keeps the whole demo under ten seconds. */
export interface Options {
  /** Calls to make. Default 400; the run's length and its outage scale with it. */
  readonly requests?: number | undefined
  /** Calls in flight at once. Default 16. */
  readonly concurrency?: number | undefined
  /** Calls started per second. Default 80. */
  readonly ratePerSecond?: number | undefined
  /** Each call's deadline. Default 3 seconds. */
  readonly deadline?: EffectLine.DurationInput | undefined
  /** Told after each call ends. */
  readonly onProgress?: ((completed: number, total: number) => void) | undefined
}

/** When, since the server started, every request is answered with a 503. */
export interface OutageWindow {
  readonly fromMs: number
  readonly toMs: number
}

/** What the server saw during the outage. */
export interface OutageReport extends OutageWindow {
  /** Requests that arrived in the window. */
  readonly requests: number
  /** Of them, first attempts: calls that arrived in the window. */
  readonly newCalls: number
  /** Of them, retries of calls that had already been tried. */
  readonly retries: number
}

/** A demo's run: its summary, the target and plan it ran with, and the outage as the server saw it. */
export interface Result {
  readonly summary: Load.Summary
  readonly target: Target.Target
  readonly plan: FaultPlan.Plan
  readonly outage: OutageReport
}

/** A time far beyond any demo: windows that last the whole run end there. */
const always = 24 * 60 * 60 * 1000

/**
 * The demo's plan: an outage over `outage`, and for the rest of the run ~10% 503s, ~5% 429s with
 * `Retry-After: 1` (and `retry-after-ms: 1000`), and 20–50 ms of service time. Windows are tried in
 * order, each share drawn from what the windows before it left, so the shares below make 10% and
 * 5% of all requests, and split the successes into thirds.
 */
const plan = (outage: OutageWindow): FaultPlan.Plan => ({
  seed: 7,
  windows: [
    { fromMs: outage.fromMs, toMs: outage.toMs, fault: { _tag: "Status", status: 503 } },
    { fromMs: 0, toMs: always, share: 0.1, fault: { _tag: "Status", status: 503 } },
    {
      fromMs: 0,
      toMs: always,
      share: 0.05 / 0.9,
      fault: { _tag: "Status", status: 429, retryAfter: "1", retryAfterMs: "1000" }
    },
    { fromMs: 0, toMs: always, share: 1 / 3, fault: { _tag: "Ok", delayMs: 20 } },
    { fromMs: 0, toMs: always, share: 1 / 2, fault: { _tag: "Ok", delayMs: 35 } }
  ],
  otherwise: { _tag: "Ok", delayMs: 50 }
})

/**
 * The demo's client: a managed target with small backoff (100 ms to 1 s) so the run is short, and a
 * retry budget of 10% of successes whose floor (0.5 a second over the 60 s window, 30 retries)
 * suits a run of a few hundred calls; the managed default floor (5 a second, 300 retries a window)
 * would let a run this small retry everything and hide what the budget does.
 */
const target = (baseUrl: string): Effect.Effect<Target.Target, Settings.InvalidSettings> =>
  Target.managed({
    name: "managed",
    baseUrl,
    model: "demo-model",
    // The fault server accepts any key; this one only satisfies the managed target's check.
    apiKey: Redacted.make("demo-key"),
    ...policySettings
  })

/** The demo target's retry settings, which the introduction states. */
const policySettings = {
  maxAttempts: 3,
  baseDelay: Duration.millis(100),
  maxDelay: Duration.seconds(1),
  hintSpread: Duration.millis(250),
  attemptTimeout: Duration.seconds(2),
  budget: { ratio: 0.1, minPerSecond: 0.5 }
} as const

/** The settings a demo runs with, defaults filled in. */
export interface Settings {
  readonly requests: number
  readonly ratePerSecond: number
  readonly concurrency: number
  readonly deadline: Duration.Duration
  readonly outage: OutageWindow
}

/** `input` as a duration; like Effect's `Duration.decode`, it throws on what is none (a defect of the caller). */
const durationOf = (input: EffectLine.DurationInput): Duration.Duration => {
  const duration = EffectLine.durationFrom(input)
  if (duration === undefined) throw new Error(`not a duration: ${String(input)}`)
  return duration
}

/** Fills in the defaults of `options`; the outage is placed in proportion to the run's length. */
export const settings = (options: Options = {}): Settings => {
  const requests = options.requests ?? 400
  const ratePerSecond = options.ratePerSecond ?? 80
  const runMs = (1000 * requests) / ratePerSecond
  return {
    requests,
    ratePerSecond,
    concurrency: options.concurrency ?? 16,
    deadline: options.deadline === undefined ? Duration.seconds(3) : durationOf(options.deadline),
    // 1.5 s of a 5 s run, starting once the budget has seen some successes.
    outage: { fromMs: Math.round(runMs * 0.3), toMs: Math.round(runMs * 0.6) }
  }
}

/**
 * Starts the fault server, runs the load through the demo's target, and reads what the server saw.
 * Settings the load cannot run with fail it with `Load.LoadSettingsError`.
 */
export const run = (
  options: Options = {}
): Effect.Effect<Result, Load.LoadSettingsError, ClientLine.HttpClient.HttpClient> => {
  const { concurrency, deadline, outage, ratePerSecond, requests } = settings(options)
  const demoPlan = plan(outage)
  return Effect.scoped(Effect.gen(function*() {
    const server = yield* FaultServer.make(demoPlan)
    // The demo's own settings, which its tests check: a failure here is a defect of the demo.
    const demoTarget = yield* Effect.orDie(target(server.url))
    const client = yield* Effect.orDie(ModelClient.make(demoTarget))
    const summary = yield* Load.run(client, {
      requests,
      concurrency,
      ratePerSecond,
      deadline,
      onProgress: options.onProgress
    })
    const arrivals = yield* server.arrivals
    const header = demoTarget.idempotencyHeader.toLowerCase()
    const seen = new Set<string>()
    let inWindow = 0
    let newCalls = 0
    for (const arrival of arrivals) {
      const key = arrival.headers[header] ?? `arrival-${arrival.index}`
      const first = !seen.has(key)
      seen.add(key)
      if (arrival.at >= outage.fromMs && arrival.at < outage.toMs) {
        inWindow++
        if (first) newCalls++
      }
    }
    return {
      summary,
      target: demoTarget,
      plan: demoPlan,
      outage: { ...outage, requests: inWindow, newCalls, retries: inWindow - newCalls }
    }
  }))
}

const seconds = (millis: number): string => `${(millis / 1000).toFixed(1)} s`

/** Seconds of a setting, without a trailing `.0`. */
const setting = (millis: number): string => `${Number((millis / 1000).toFixed(1))} s`

const percent = (part: number, whole: number): string => whole === 0 ? "0%" : `${((100 * part) / whole).toFixed(1)}%`

const plural = (count: number, one: string, many: string = `${one}s`) => `${count} ${count === 1 ? one : many}`

/** Lines that say what the demo is about to do. */
export const introduction = (options: Options = {}): ReadonlyArray<string> => {
  const { concurrency, deadline, outage, ratePerSecond, requests } = settings(options)
  const client = policySettings
  const budget = { ...client.budget, windowMillis: Budgets.defaults.windowMillis }
  return [
    `resilient-ai demo: ${requests} chat calls through a managed target, against a local fault server`,
    `(no API key, no network)`,
    ``,
    `  server  answers in 20-50 ms; ~10% 503 Overloaded, ~5% 429 with Retry-After: 1;`,
    `          an outage (every request 503) from ${seconds(outage.fromMs)} to ${seconds(outage.toMs)}`,
    `  client  up to ${client.maxAttempts} attempts, full-jitter backoff ${Duration.toMillis(client.baseDelay)} ms ` +
    `to ${setting(Duration.toMillis(client.maxDelay))}, retry budget ${100 * budget.ratio}% of successes`,
    `          (floor ${budget.minPerSecond}/s over ${setting(budget.windowMillis)}: the default 5/s, scaled to a ` +
    `run this short), deadline ${setting(Duration.toMillis(deadline))} a call;`,
    `          ${ratePerSecond} calls started per second, at most ${concurrency} in flight`
  ]
}

/** Wraps `text` at `width` columns, the first line after `first`, the others after `rest`. */
const wrap = (text: string, first: string, rest: string, width = 100): Array<string> => {
  const lines: Array<string> = []
  let line = first
  for (const word of text.split(" ")) {
    const prefix = lines.length === 0 ? first : rest
    if (line.length > prefix.length && line.length + 1 + word.length > width) {
      lines.push(line)
      line = rest + word
    } else {
      line = line.length > prefix.length ? `${line} ${word}` : line + word
    }
  }
  lines.push(line)
  return lines
}

/** Plain sentences on what the run means, every number taken from it. */
export const explanation = (result: Result): ReadonlyArray<string> => {
  const { outage, summary, target: demoTarget } = result
  const attempts = demoTarget.maxAttempts
  const sentences: Array<string> = []
  const topReasons = Object.entries(summary.failuresByReason)
    .map(([reason, count]) => `${count} ${reason}`)
    .join(", ")
  sentences.push(
    `${summary.calls} calls in ${seconds(summary.wallMs)}: ${summary.successes} succeeded ` +
      `(${percent(summary.successes, summary.calls)}), ${summary.failures} failed` +
      (summary.failures > 0 ? ` (stopped by: ${topReasons}).` : ".")
  )
  sentences.push(
    `The retry budget allowed ${plural(summary.retries, "retry", "retries")}, ` +
      `${summary.retriesSucceeded} of which succeeded, and refused ${summary.budgetExhausted}. ` +
      `A naive ${attempts}-attempt policy with no budget would have sent up to ` +
      `${plural(summary.unbudgetedRetries, "retry", "retries")}.`
  )
  if (summary.attemptsPerSuccess !== null) {
    sentences.push(
      `Attempts per successful call: ${summary.attemptsPerSuccess.toFixed(2)} ` +
        `(${summary.attempts} requests for ${summary.successes} successes). Most of that is the first attempt of ` +
        `calls that failed, not retries: the provider carried ${
          percent(summary.attempts - summary.calls, summary.calls)
        } ` +
        `more requests than there were calls.`
    )
  }
  const naiveOutage = outage.newCalls * attempts
  const perCall = outage.newCalls === 0 ? 0 : outage.requests / outage.newCalls
  sentences.push(
    `During the ${seconds(outage.toMs - outage.fromMs)} outage, ${outage.newCalls} new calls arrived and the ` +
      `server received ${outage.requests} requests, ${plural(outage.retries, "retry", "retries")} among them; ` +
      `retrying each call up to ${attempts} times would have sent up to ${naiveOutage}. ` +
      // A machine busy enough to start every call late can leave the outage with none to meet.
      (outage.newCalls === 0
        ? `With no call in it, the outage shows neither absorption nor amplification.`
        : perCall <= 1.5
        ? `The outage was absorbed by the budget instead of amplified (${perCall.toFixed(2)} requests per call).`
        : `The budget let retries through, so the outage was amplified ${perCall.toFixed(2)}x.`)
  )
  const { all, failures, successes } = summary.latencyMs
  const deadline = summary.deadlineMs
  const latency: Array<string> = []
  if (failures.p50 !== null && failures.p99 !== null) {
    latency.push(
      deadline !== null && failures.p99 < deadline
        ? `Failed calls failed fast instead of waiting out the ${deadline} ms deadline: p50 ` +
          `${failures.p50.toFixed(0)} ms, p99 ${failures.p99.toFixed(0)} ms.`
        : `Failed calls: p50 ${failures.p50.toFixed(0)} ms, p99 ${failures.p99.toFixed(0)} ms.`
    )
  }
  if (successes.p99 !== null) {
    latency.push(
      `Successful calls: p50 ${successes.p50?.toFixed(0)} ms, p99 ${successes.p99.toFixed(0)} ms` +
        (successes.p99 >= 1000 ? ` (a retry after a 429 waits at least the 1 s it asks for)` : "") +
        (all.p99 === null ? "." : `; all calls: p99 ${all.p99.toFixed(0)} ms.`)
    )
  }
  if (latency.length > 0) sentences.push(latency.join(" "))
  return sentences.flatMap((sentence) => wrap(sentence, "  - ", "    "))
}
