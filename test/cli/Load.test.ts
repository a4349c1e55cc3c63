import { isInterrupted } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Demo, Load, Summary } from "@resilient-ai/cli/internal"
import { ModelClient } from "@resilient-ai/client"
import { Metrics } from "@resilient-ai/policy"
import { EffectLine } from "@resilient-ai/policy/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Deferred, Effect, Fiber } from "effect"
import { performance } from "node:perf_hooks"
import { eventually, HttpLive, managedAt, selfHostedAt } from "./support.js"

/** Every key of the JSON summary, in a stable order. */
const jsonKeys = [
  "target",
  "kind",
  "model",
  "requests",
  "concurrency",
  "concurrencyRequested",
  "deadlineMs",
  "ratePerSecond",
  "interrupted",
  "calls",
  "callsInterrupted",
  "successes",
  "failures",
  "failuresByTag",
  "failuresByReason",
  "failureExamples",
  "attempts",
  "attemptsPerSuccess",
  "retries",
  "retriesSucceeded",
  "budgetExhausted",
  "deadlineSkips",
  "shed",
  "unbudgetedRetries",
  "latencyMs",
  "wallMs"
]

/** The labels of every field of the table. */
const tableLabels = [
  "calls",
  "successes",
  "failures",
  "failures by last failure",
  "failures by stop reason",
  "attempts",
  "attempts per success",
  "retries",
  "retries that succeeded",
  "budget exhaustions",
  "deadline skips",
  "shed",
  "retries without a budget",
  "latency p50, successes",
  "latency p99, successes",
  "latency p50, failures",
  "latency p99, failures",
  "latency p50, all calls",
  "latency p99, all calls",
  "wall time"
]

/**
 * One call after another, so the steps meet the calls in order: call 1 fails once and succeeds,
 * call 2 succeeds, call 3 is refused (terminal), call 4 fails three times, call 5 succeeds.
 */
const scripted = {
  steps: [
    { _tag: "Status", status: 503 },
    { _tag: "Ok" },
    { _tag: "Ok" },
    { _tag: "Status", status: 401 },
    { _tag: "Status", status: 500 },
    { _tag: "Status", status: 500 },
    { _tag: "Status", status: 500 },
    { _tag: "Ok" }
  ]
} as const

/** Samples the requests `server` has in flight every 2 ms while the scope is open; gives the most seen so far. */
const peakInFlight = (server: FaultServer.Service) =>
  Effect.gen(function*() {
    let peak = 0
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(
      Effect.tap(server.inFlight, (n) => Effect.sync(() => (peak = Math.max(peak, n)))),
      Effect.sleep("2 millis")
    )))
    return Effect.sync(() => peak)
  })

describe("Load.run against the fault server", () => {
  it.scopedLive("counts every call, attempt and retry of a scripted plan exactly", () =>
    Effect.gen(function*() {
      // Each of the three successes takes 30 ms, one after another.
      const server = yield* FaultServer.make({ ...scripted, latencyMs: 30 })
      const client = yield* ModelClient.make(managedAt(server.url))
      const started = performance.now()
      const summary = yield* Load.run(client, { requests: 5, concurrency: 1, deadline: "5 seconds" })
      const elapsed = performance.now() - started
      assert.strictEqual((yield* server.arrivals).length, 8)
      assert.strictEqual(summary.target, client.target.name)
      assert.strictEqual(summary.kind, "managed")
      assert.strictEqual(summary.model, "test-model")
      assert.strictEqual(summary.deadlineMs, 5_000)
      assert.strictEqual(summary.calls, 5)
      assert.strictEqual(summary.successes, 3)
      assert.strictEqual(summary.failures, 2)
      assert.deepStrictEqual(summary.failuresByTag, { AuthenticationFailed: 1, ServerError: 1 })
      assert.deepStrictEqual(summary.failuresByReason, { attempts: 1, terminal: 1 })
      // What happened, in each failure's own words: the first of each tag.
      assert.deepStrictEqual(Object.keys(summary.failureExamples), ["AuthenticationFailed", "ServerError"])
      assert.match(summary.failureExamples["AuthenticationFailed"]!, /HTTP 401/)
      assert.match(summary.failureExamples["ServerError"]!, /HTTP 500/)
      assert.deepStrictEqual([summary.concurrency, summary.concurrencyRequested], [1, 1])
      assert.deepStrictEqual([summary.interrupted, summary.callsInterrupted], [false, 0])
      assert.strictEqual(summary.attempts, 8)
      assert.closeTo(summary.attemptsPerSuccess!, 8 / 3, 1e-9)
      assert.strictEqual(summary.retries, 3)
      assert.strictEqual(summary.retriesSucceeded, 1)
      assert.strictEqual(summary.budgetExhausted, 0)
      assert.strictEqual(summary.deadlineSkips, 0)
      assert.strictEqual(summary.shed, 0)
      assert.strictEqual(summary.unbudgetedRetries, 3)
      const { all, failures, successes } = summary.latencyMs
      for (const latency of [all, failures, successes]) {
        assert.isNotNull(latency.p50)
        assert.isAtMost(latency.p50!, latency.p99!)
      }
      // A timer may fire a millisecond early: each bound leaves two per wait.
      assert.isAtLeast(successes.p50!, 28)
      // The wall time is the run's: it holds the three successes in turn, and no more than the run took.
      assert.isAtLeast(summary.wallMs, 84)
      assert.isAtMost(summary.wallMs, Math.ceil(elapsed))
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("a second load on the same client reports only its own calls", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }] })
      const client = yield* ModelClient.make(managedAt(server.url))
      const first = yield* Load.run(client, { requests: 3, concurrency: 1 })
      const second = yield* Load.run(client, { requests: 4, concurrency: 2 })
      assert.deepStrictEqual([first.attempts, first.retries, first.retriesSucceeded], [4, 1, 1])
      assert.deepStrictEqual([second.calls, second.successes, second.attempts, second.retries], [4, 4, 4, 0])
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("a budget that allows nothing: every failed call stops at once, counted as an exhaustion", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503 } })
      const client = yield* ModelClient.make(managedAt(server.url, { budget: { ratio: 0, minPerSecond: 0 } }))
      const summary = yield* Load.run(client, { requests: 6, concurrency: 3 })
      assert.strictEqual((yield* server.arrivals).length, 6)
      assert.strictEqual(summary.successes, 0)
      assert.deepStrictEqual(summary.failuresByTag, { Overloaded: 6 })
      assert.deepStrictEqual(summary.failuresByReason, { budget: 6 })
      assert.strictEqual(summary.attempts, 6)
      assert.strictEqual(summary.retries, 0)
      assert.strictEqual(summary.budgetExhausted, 6)
      // Three attempts each, the first made: two retries a call were refused.
      assert.strictEqual(summary.unbudgetedRetries, 12)
      assert.isNull(summary.attemptsPerSuccess)
      assert.deepStrictEqual(summary.latencyMs.successes, { p50: null, p99: null })
      assert.isNotNull(summary.latencyMs.all.p99)
      assert.deepStrictEqual(summary.latencyMs.failures, summary.latencyMs.all)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("a Retry-After longer than the deadline ends the call at once (retry-after-too-long), not a sleep", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 429, retryAfter: "5" } })
      const client = yield* ModelClient.make(managedAt(server.url))
      const started = Date.now()
      const summary = yield* Load.run(client, { requests: 2, concurrency: 2, deadline: "500 millis" })
      // Sleeping the hint would take 5 s: anything short of that (however busy the machine) did not sleep it.
      assert.isBelow(Date.now() - started, 5_000)
      assert.deepStrictEqual(summary.failuresByTag, { RateLimited: 2 })
      assert.deepStrictEqual(summary.failuresByReason, { "retry-after-too-long": 2 })
      assert.strictEqual(summary.deadlineSkips, 0)
      assert.strictEqual(summary.attempts, 2)
      assert.strictEqual(summary.deadlineMs, 500)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("a concurrency beyond the target's gate is capped at it: the gate's limit in flight, nothing shed", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ latencyMs: 100 })
      const client = yield* ModelClient.make(selfHostedAt(server.url, { concurrency: 2 }))
      const peak = yield* peakInFlight(server)
      const summary = yield* Load.run(client, { requests: 6, concurrency: 5 })
      assert.strictEqual(summary.kind, "self-hosted")
      assert.strictEqual(summary.concurrency, 2)
      assert.strictEqual(summary.concurrencyRequested, 5)
      assert.strictEqual(summary.successes, 6)
      assert.strictEqual(summary.shed, 0)
      assert.deepStrictEqual(summary.failuresByTag, {})
      assert.isAtMost(yield* peak, 2)
      assert.strictEqual((yield* server.arrivals).length, 6)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("calls a full self-hosted gate refuses are counted as shed", () =>
    Effect.gen(function*() {
      // Another caller holds the pool's only permit, its answer stalled for a minute.
      const server = yield* FaultServer.make({ steps: [{ _tag: "Ok", delayMs: 60_000 }] })
      const client = yield* ModelClient.make(selfHostedAt(server.url, { concurrency: 1 }))
      const holder = yield* EffectLine.fork(client.chat(Load.prompt))
      yield* eventually(Effect.map(server.inFlight, (n) => n === 1), 15_000, "the other caller's request arrived")
      const summary = yield* Load.run(client, { requests: 2, concurrency: 1 })
      yield* Fiber.interrupt(holder)
      assert.strictEqual(summary.successes, 0)
      assert.strictEqual(summary.shed, 2)
      assert.deepStrictEqual(summary.failuresByTag, { Shed: 2 })
      assert.deepStrictEqual(summary.failuresByReason, { shed: 2 })
      assert.strictEqual(summary.attempts, 0)
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("calls are counted, not listed: the largest load holds no list of them, and interrupted it cancels the calls in flight and says what it did", () =>
    Effect.gen(function*() {
      // Two quick answers, then every request stalls for a minute.
      const server = yield* FaultServer.make({
        steps: [{ _tag: "Ok" }, { _tag: "Ok" }],
        otherwise: { _tag: "Ok", delayMs: 60_000 }
      })
      // An attempt timeout beyond the stall, so the stalled calls are neither timed out nor retried.
      const client = yield* ModelClient.make(managedAt(server.url, { attemptTimeout: "5 minutes" }))
      const partial = yield* Deferred.make<Load.Summary>()
      const heapBefore = process.memoryUsage().heapUsed
      // Load.maxRequests: a list of its calls would take 80 MB of heap (8 bytes an entry).
      const load = yield* EffectLine.fork(
        Load.run(client, {
          requests: 10_000_000,
          concurrency: 2,
          onInterrupt: (summary) => Deferred.succeed(partial, summary)
        })
      )
      yield* eventually(
        Effect.map(server.arrivals, (arrivals) => arrivals.length >= 4),
        15_000,
        "two calls answered and two more in flight"
      )
      const heapGrowth = process.memoryUsage().heapUsed - heapBefore
      assert.isBelow(heapGrowth, 32 * 1024 * 1024, `the heap grew by ${heapGrowth} bytes`)
      yield* Fiber.interrupt(load)
      const exit = yield* Fiber.await(load)
      assert.isTrue(isInterrupted(exit), "the load ends interrupted: the interruption is not swallowed")
      assert.isTrue(yield* Deferred.isDone(partial), "onInterrupt was told what the load did")
      const summary = yield* Deferred.await(partial)
      assert.isTrue(summary.interrupted)
      assert.strictEqual(summary.requests, 10_000_000)
      assert.strictEqual(summary.calls, 2)
      assert.strictEqual(summary.successes, 2)
      assert.strictEqual(summary.callsInterrupted, 2)
      // The stalled requests were cancelled, not waited for: the server saw the client go away.
      yield* eventually(
        Effect.map(server.arrivals, (arrivals) => arrivals.slice(2).every((arrival) => arrival.aborted)),
        15_000,
        "the server saw both stalled requests abandoned"
      )
      assert.strictEqual((yield* server.arrivals).length, 4)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("a rate paces the starts; concurrency bounds what is in flight", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({ latencyMs: 30 })
      const client = yield* ModelClient.make(managedAt(server.url))
      const peak = yield* peakInFlight(server)
      const progress: Array<readonly [number, number]> = []
      const before = yield* server.elapsed
      const summary = yield* Load.run(client, {
        requests: 6,
        concurrency: 2,
        ratePerSecond: 50,
        onProgress: (done, total) => void progress.push([done, total])
      })
      // The sixth call starts 100 ms in and takes 30 ms; unpaced, six calls two at a time take about 90.
      assert.isAtLeast(summary.wallMs, 125)
      // Call i starts no sooner than i × 20 ms in; a busy machine can only make it arrive later.
      // (A millisecond's grace: the event loop reads its timers' clock once per turn.)
      const arrivals = yield* server.arrivals
      assert.deepStrictEqual(
        arrivals.map((arrival, i) => arrival.at - before >= i * 20 - 1),
        [true, true, true, true, true, true],
        `arrivals ${arrivals.map((arrival) => (arrival.at - before).toFixed(1)).join(", ")} ms in`
      )
      assert.isAtMost(yield* peak, 2)
      assert.deepStrictEqual(progress, [[1, 6], [2, 6], [3, 6], [4, 6], [5, 6], [6, 6]])
      assert.strictEqual(summary.ratePerSecond, 50)
      assert.strictEqual(summary.successes, 6)

      // Paced at 50/s, 30 ms calls never overlap by more than two, bound or not. Calls of 100 ms
      // started at once would all be in flight together, but for the bound.
      const slow = yield* FaultServer.make({ latencyMs: 100 })
      const slowPeak = yield* peakInFlight(slow)
      const unpaced = yield* Load.run(yield* ModelClient.make(managedAt(slow.url)), { requests: 6, concurrency: 2 })
      assert.strictEqual(unpaced.successes, 6)
      assert.strictEqual(yield* slowPeak, 2)
      // Three rounds of two: unbounded, the six would take one round.
      assert.isAtLeast(unpaced.wallMs, 294)
      assert.strictEqual((yield* slow.arrivals).length, 6)
    }).pipe(Effect.provide(HttpLive)))

  it.scopedLive("bad settings fail the load with LoadSettingsError, each one named, and send nothing", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({})
      const client = yield* ModelClient.make(managedAt(server.url))
      const refused = (options: Load.Options) => Effect.flip(Load.run(client, options))
      const cases: ReadonlyArray<readonly [Load.Options, Load.Setting]> = [
        [{ requests: 0, concurrency: 1 }, "requests"],
        [{ requests: Load.maxRequests + 1, concurrency: 1 }, "requests"],
        [{ requests: 1.5, concurrency: 1 }, "requests"],
        [{ requests: 1, concurrency: 0 }, "concurrency"],
        [{ requests: 1, concurrency: 1, ratePerSecond: 0 }, "ratePerSecond"],
        [{ requests: 1, concurrency: 1, ratePerSecond: Number.POSITIVE_INFINITY }, "ratePerSecond"],
        [{ requests: 1, concurrency: 1, deadline: "soon" as EffectLine.DurationInput }, "deadline"]
      ]
      for (const [options, setting] of cases) {
        const error = yield* refused(options)
        assert.strictEqual(error._tag, "LoadSettingsError")
        assert.deepStrictEqual(error.problems.map((problem) => problem.setting), [setting])
        assert.match(error.message, new RegExp(`^${setting} must be `))
      }
      // Every problem at once, not only the first.
      const all = yield* refused({
        requests: 0,
        concurrency: 0,
        ratePerSecond: -1,
        deadline: "soon" as EffectLine.DurationInput
      })
      assert.strictEqual(
        all.message,
        "requests must be a whole number from 1 to 10,000,000, got 0; concurrency must be a whole number of at " +
          "least 1, got 0; ratePerSecond must be a positive, finite number of calls, got -1; deadline must be a " +
          `duration (milliseconds, or text such as "3 seconds"), got soon`
      )
      assert.strictEqual((yield* server.arrivals).length, 0)
      assert.strictEqual((yield* Metrics.summary(client.target.name, client.target.model)).attempts, 0)
      // The same client with settings it can run with is seen at the server.
      yield* Load.run(client, { requests: 1, concurrency: 1 })
      assert.strictEqual((yield* server.arrivals).length, 1)
    }).pipe(Effect.provide(HttpLive)))
})

describe("Summary", () => {
  it.scopedLive("as JSON: one object, every key, numbers as numbers, null where there is no value", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make(scripted)
      const client = yield* ModelClient.make(managedAt(server.url))
      const summary = yield* Load.run(client, { requests: 5, concurrency: 1 })
      const text = Summary.json(summary)
      assert.notInclude(text, "\n")
      const parsed = JSON.parse(text) as Record<string, unknown>
      assert.deepStrictEqual(Object.keys(parsed), jsonKeys)
      assert.strictEqual(parsed["attemptsPerSuccess"], 2.667)
      assert.strictEqual(parsed["deadlineMs"], null)
      assert.strictEqual(parsed["ratePerSecond"], null)
      for (const key of ["calls", "successes", "attempts", "retries", "retriesSucceeded", "wallMs"]) {
        assert.isNumber(parsed[key], key)
      }
      assert.deepStrictEqual(Object.keys(parsed["latencyMs"] as object), ["successes", "failures", "all"])
      assert.deepStrictEqual(parsed["failuresByTag"], { AuthenticationFailed: 1, ServerError: 1 })
    }).pipe(Effect.provide(HttpLive)))

  it("as a table: every field, aligned, under a heading", () => {
    const summary: Load.Summary = {
      target: "managed",
      kind: "managed",
      model: "m",
      requests: 10,
      concurrency: 2,
      concurrencyRequested: 2,
      deadlineMs: 3_000,
      ratePerSecond: 20,
      interrupted: false,
      calls: 10,
      callsInterrupted: 0,
      successes: 8,
      failures: 2,
      failuresByTag: { Overloaded: 2 },
      failuresByReason: { budget: 1, attempts: 1 },
      failureExamples: { Overloaded: "HTTP 503" },
      attempts: 13,
      attemptsPerSuccess: 13 / 8,
      retries: 3,
      retriesSucceeded: 2,
      budgetExhausted: 1,
      deadlineSkips: 0,
      shed: 0,
      unbudgetedRetries: 5,
      latencyMs: {
        successes: { p50: 30.1, p99: 1234.5 },
        failures: { p50: 2, p99: 3.25 },
        all: { p50: 28, p99: null }
      },
      wallMs: 4_321
    }
    const table = Summary.table(summary)
    const lines = table.split("\n")
    assert.strictEqual(
      lines[0],
      `managed target "managed", model m: 10 calls, 2 at a time, 20/s, deadline 3,000 ms each`
    )
    for (const label of tableLabels) {
      assert.isTrue(lines.some((line) => line.startsWith(`  ${label} `) || line === `  ${label}`), label)
    }
    const valueOf = (label: string) =>
      lines.find((line) => line.startsWith(`  ${label} `))!.slice(2 + label.length).trim()
    assert.strictEqual(valueOf("successes"), "8  (80.0%)")
    assert.strictEqual(valueOf("attempts per success"), "1.63")
    assert.strictEqual(valueOf("latency p99, successes"), "1,234.5 ms")
    assert.strictEqual(valueOf("latency p99, failures"), "3.3 ms")
    assert.strictEqual(valueOf("latency p99, all calls"), "n/a")
    assert.strictEqual(valueOf("wall time"), "4.32 s")
    assert.isTrue(lines.some((line) => /^ {4}Overloaded +2$/.test(line)))
    assert.isTrue(lines.some((line) => /^ {4}budget +1$/.test(line)))
    // Values are right-aligned in one column.
    const ends = lines.slice(1).filter((line) =>
      !line.includes("(") && !line.endsWith("reason") &&
      !line.endsWith("failure")
    ).map((line) => line.length)
    assert.strictEqual(new Set(ends).size, 1)

    // A concurrency the gate capped, and a load that was interrupted, say so before any count.
    const cut = Summary.table({
      ...summary,
      requests: 1_000,
      concurrency: 64,
      concurrencyRequested: 100_000,
      interrupted: true,
      callsInterrupted: 64
    }).split("\n")
    assert.strictEqual(
      cut[0],
      `managed target "managed", model m: 1,000 calls, 64 at a time (100,000 asked, capped at the target's gate), ` +
        `20/s, deadline 3,000 ms each`
    )
    assert.strictEqual(cut[1], "interrupted: 10 of 1,000 calls ended; 64 in flight were cancelled and are not counted")
  })
})

describe("Demo.run", () => {
  it.live("runs a small demo and explains it with the run's numbers", () =>
    Effect.gen(function*() {
      // A second long, so the outage (0.3–0.6 s) still meets calls when a busy machine starts them late.
      const result = yield* Demo.run({ requests: 40, ratePerSecond: 40 })
      const { outage, summary } = result
      assert.strictEqual(summary.calls, 40)
      assert.strictEqual(summary.target, "managed")
      assert.strictEqual(outage.requests, outage.newCalls + outage.retries)
      const text = Demo.explanation(result).join("\n")
      assert.include(text, `${summary.calls} calls`)
      assert.include(text, `allowed ${summary.retries} retr`)
      assert.include(text, `up to ${summary.unbudgetedRetries} retr`)
      assert.include(text, `${outage.newCalls} new calls arrived`)
      for (const line of Demo.explanation(result)) assert.isAtMost(line.length, 100)
      // Calls met the outage (a machine busy enough to start them all late may leave it none): the
      // verdict is the run's requests per call; without calls, there is no verdict.
      const verdict = (explained: Demo.Result) => {
        const flat = Demo.explanation(explained).join(" ").replace(/\s+/g, " ")
        return /absorbed by the budget|was amplified|neither absorption nor amplification/.exec(flat)?.[0]
      }
      const perCall = outage.newCalls === 0 ? 0 : outage.requests / outage.newCalls
      assert.strictEqual(
        verdict(result),
        outage.newCalls === 0
          ? "neither absorption nor amplification"
          : perCall <= 1.5
          ? "absorbed by the budget"
          : "was amplified"
      )
      const missed = { ...result, outage: { ...outage, requests: 0, newCalls: 0, retries: 0 } }
      assert.strictEqual(verdict(missed), "neither absorption nor amplification")
    }).pipe(Effect.provide(HttpLive)))
})
