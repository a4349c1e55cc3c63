/**
 * The hidden difference between each SDK's own retries and resilient-ai under the SDK, during an
 * outage, in one run: the same calls through each SDK at its default (or, where it retries only when
 * asked, as its documentation sets it up) and through the same SDK with its retries off and
 * `ResilientFetch` under it (the target's ceiling of 3 attempts and its budget: 10% of successes,
 * a floor of 5 a second over 60 s), against a fault server that answers every request with 503.
 * Every call has a deadline of 30 s, as a caller would give it. Printed: the requests the provider
 * received per call, the share of calls still retrying when their deadline passed, and the share
 * still pending a second after it (their SDK did not end the call when its signal aborted). Then a
 * call aborted in its backoff's sleep, per SDK and set-up, against a 503 with `Retry-After` and one
 * without: how long it took to settle after the abort, and whether a request followed.
 *
 * `npx -y pnpm@12.4.2 --filter @resilient-ai/sdks run outage` on Node 22 or later. Settings
 * (environment): OUTAGE_CALLS (1000), OUTAGE_CONCURRENCY (500), OUTAGE_DEADLINE_MS (30000).
 */
import { createOpenAI } from "@ai-sdk/openai"
import { ChatOpenAI } from "@langchain/openai"
import { HTTPClient, Mistral } from "@mistralai/mistralai"
import { ResilientFetch, Target } from "@resilient-ai/client"
import { Coordination } from "@resilient-ai/policy"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { generateText } from "ai"
import { Effect, Logger, Redacted } from "effect"
import OpenAI from "openai"

// Enough calls that the budget's ratio, not its floor (300 retries a minute), decides.
const calls = Number(process.env["OUTAGE_CALLS"] ?? 1_000)
const concurrency = Number(process.env["OUTAGE_CONCURRENCY"] ?? 500)
const deadlineMs = Number(process.env["OUTAGE_DEADLINE_MS"] ?? 30_000)
const apiKey = "sk-bench"
const prompt = "Say hello"

/** One call through an SDK at `baseURL`, sent by `fetch` (the global one when undefined), until `signal`. */
type Call = (baseURL: string, fetch: ResilientFetch.Fetch | undefined, signal: AbortSignal) => Promise<unknown>

/** An SDK as a user sets it up: on its own, with its retries on, and on the resilient layer, with them off. */
interface Sdk {
  readonly name: string
  /** How the SDK retries on its own, in a few words. */
  readonly ownRetries: string
  readonly alone: Call
  readonly underResilient: Call
}

const openAi = (baseURL: string, fetch: ResilientFetch.Fetch | undefined, maxRetries?: number) =>
  new OpenAI({
    apiKey,
    baseURL,
    ...(fetch === undefined ? {} : { fetch }),
    ...(maxRetries === undefined ? {} : { maxRetries })
  })

const chat = (client: OpenAI, signal: AbortSignal) =>
  client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: prompt }] }, { signal })

const vercel = (baseURL: string, fetch: ResilientFetch.Fetch | undefined, signal: AbortSignal, maxRetries?: number) =>
  generateText({
    model: createOpenAI({ baseURL, apiKey, ...(fetch === undefined ? {} : { fetch }) }).chat("gpt-4o-mini"),
    prompt,
    abortSignal: signal,
    ...(maxRetries === undefined ? {} : { maxRetries })
  })

const mistral = (serverURL: string, fetch: ResilientFetch.Fetch | undefined, signal: AbortSignal, retries: boolean) =>
  new Mistral({
    apiKey,
    serverURL,
    ...(fetch === undefined ? {} : { httpClient: new HTTPClient({ fetcher: fetch }) }),
    // Its documented retry set-up: exponential backoff from 0.5 s, until an hour has passed.
    retryConfig: retries ? { strategy: "backoff", retryConnectionErrors: true } : { strategy: "none" }
  }).chat.complete({ model: "mistral-small-latest", messages: [{ role: "user", content: prompt }] }, { signal })

const langChain = (
  baseURL: string,
  fetch: ResilientFetch.Fetch | undefined,
  signal: AbortSignal,
  maxRetries?: number
) =>
  new ChatOpenAI({
    model: "gpt-4o-mini",
    apiKey,
    ...(maxRetries === undefined ? {} : { maxRetries }),
    configuration: { baseURL, ...(fetch === undefined ? {} : { fetch }) }
  }).invoke(prompt, { signal })

/** Mistral's client adds `/v1` itself; the others take the API's base URL. */
const withoutV1 = (baseURL: string) => baseURL.replace(/\/v1$/, "")

const sdks: ReadonlyArray<Sdk> = [
  {
    name: "openai 7.55.0",
    ownRetries: "default: 2 retries, 0.5 s to 8 s",
    alone: (baseURL, _, signal) => chat(openAi(baseURL, undefined), signal),
    underResilient: (baseURL, fetch, signal) => chat(openAi(baseURL, fetch, 0), signal)
  },
  {
    name: "ai 7.0.173 + @ai-sdk/openai 4.0.118",
    ownRetries: "default: 2 retries, 2 s then 4 s",
    alone: (baseURL, _, signal) => vercel(baseURL, undefined, signal),
    underResilient: (baseURL, fetch, signal) => vercel(baseURL, fetch, signal, 0)
  },
  {
    name: "@mistralai/mistralai 2.7.0",
    ownRetries: "documented backoff: from 0.5 s, for up to 1 h",
    alone: (baseURL, _, signal) => mistral(withoutV1(baseURL), undefined, signal, true),
    underResilient: (baseURL, fetch, signal) => mistral(withoutV1(baseURL), fetch, signal, false)
  },
  {
    name: "@langchain/openai 1.6.0 ChatOpenAI",
    ownRetries: "default: 6 retries, from 1-2 s, doubling",
    alone: (baseURL, _, signal) => langChain(baseURL, undefined, signal),
    underResilient: (baseURL, fetch, signal) => langChain(baseURL, fetch, signal, 0)
  }
]

/**
 * `sdk` with its retries off and `ResilientFetch` under it, on a managed target with the shipped
 * defaults (openai's own backoff, 0.5 s growing to 8 s), in a coordination of its own so no row
 * spends another's budget.
 */
const underResilient = (sdk: Sdk, baseURL: string) =>
  ResilientFetch.make(Target.managed({
    name: "outage",
    baseUrl: baseURL,
    model: "gpt-4o-mini",
    apiKey: Redacted.make(apiKey)
  })).pipe(
    Effect.map((fetch) => (signal: AbortSignal) => sdk.underResilient(baseURL, fetch, signal)),
    Effect.provide(Coordination.layerMemory),
    Effect.orDie
  )

/** How long past its deadline a call may take to settle before it counts as late: its SDK did not end it when its signal aborted. */
const graceMs = 1_000

/** What the calls of a row came to: those that hit their deadline, and those still pending a second after it. */
interface Ended {
  readonly pastDeadline: number
  readonly lateAfterAbort: number
}

/**
 * Runs `calls` calls, `concurrency` at a time, each with its deadline. A call still pending a second
 * after its deadline is left behind (its SDK did not end it on the abort) so the row can end.
 */
const drive = async (call: (signal: AbortSignal) => Promise<unknown>): Promise<Ended> => {
  let next = 0
  let pastDeadline = 0
  let lateAfterAbort = 0
  const worker = async () => {
    while (next < calls) {
      next++
      const signal = AbortSignal.timeout(deadlineMs)
      let timer: NodeJS.Timeout | undefined
      const abandoned = new Promise<"abandoned">((resolve) => {
        timer = setTimeout(() => resolve("abandoned"), deadlineMs + graceMs)
      })
      const settled = await Promise.race([call(signal).then(() => "settled", () => "settled"), abandoned])
      clearTimeout(timer)
      if (signal.aborted) pastDeadline++
      if (settled === "abandoned") lateAfterAbort++
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, calls) }, worker))
  return { pastDeadline, lateAfterAbort }
}

interface Row extends Ended {
  readonly sdk: string
  readonly setUp: string
  readonly requests: number
  readonly seconds: number
}

const columns = (sdk: string, setUp: string, ...figures: ReadonlyArray<string>) =>
  `  ${sdk.padEnd(36)} ${setUp.padEnd(64)} ${
    figures.map((figure, index) => figure.padStart([8, 8, 13, 13, 7][index]!)).join("  ")
  }`

/**
 * One row: the calls against a fault server of its own, so an SDK that goes on retrying after its
 * calls were left behind cannot add to another row's count.
 */
const measure = <E>(
  sdk: string,
  setUp: string,
  prepare: (baseURL: string) => Effect.Effect<(signal: AbortSignal) => Promise<unknown>, E>
) =>
  Effect.gen(function*() {
    const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503 } })
    const call = yield* prepare(server.url)
    const started = performance.now()
    const ended = yield* Effect.promise(() => drive(call))
    const row: Row = {
      sdk,
      setUp,
      requests: (yield* server.arrivals).length,
      ...ended,
      seconds: (performance.now() - started) / 1000
    }
    const percent = (count: number) => `${Math.round((100 * count) / calls)}%`
    console.log(columns(
      row.sdk,
      row.setUp,
      String(row.requests),
      (row.requests / calls).toFixed(2),
      percent(row.pastDeadline),
      percent(row.lateAfterAbort),
      row.seconds.toFixed(1)
    ))
    return row
  }).pipe(Effect.scoped)

/** Trials of the abort, run side by side, each against a fault server of its own. */
const abortTrials = 5
/** How long after its first request a call is aborted: inside its first backoff, whichever the SDK. */
const abortAfterMs = 200
/** How long an aborted call may take to settle before it counts as never settling. */
const settleLimitMs = 8_000

/** The answers a call is aborted against: a 503 naming a 5 s wait, and a bare 503 (the SDK's own backoff). */
const abortFaults = [
  { label: "503 with Retry-After: 5", fault: { _tag: "Status", status: 503, retryAfter: "5" } },
  { label: "503 without Retry-After", fault: { _tag: "Status", status: 503 } }
] as const

/**
 * One call aborted during its backoff: answered with `fault`, aborted 200 ms after its first
 * request. How long it took to settle after the abort, and the requests sent after it.
 */
const abortedCall = (
  fault: FaultPlan.Fault,
  prepare: (baseURL: string) => Effect.Effect<(signal: AbortSignal) => Promise<unknown>>
) =>
  Effect.gen(function*() {
    const server = yield* FaultServer.make({ otherwise: fault })
    const call = yield* prepare(server.url)
    const controller = new AbortController()
    let settledAt: number | undefined
    const settled = call(controller.signal).then(
      () => (settledAt = performance.now()),
      () => (settledAt = performance.now())
    )
    while ((yield* server.arrivals).length === 0) yield* Effect.sleep("5 millis")
    yield* Effect.sleep(`${abortAfterMs} millis`)
    const sentBefore = (yield* server.arrivals).length
    const abortedAt = performance.now()
    controller.abort()
    yield* Effect.promise(() => Promise.race([settled, new Promise((resolve) => setTimeout(resolve, settleLimitMs))]))
    // Past the provider's 5 s and any SDK's first backoffs: a call that went on has sent again by now.
    yield* Effect.sleep(`${Math.max(0, 5_500 - (performance.now() - abortedAt))} millis`)
    return {
      settleMs: settledAt === undefined ? undefined : settledAt - abortedAt,
      requestsAfter: (yield* server.arrivals).length - sentBefore
    }
  }).pipe(Effect.scoped)

/** Each SDK on its own and under resilient-ai: a call aborted in its backoff's sleep. */
const abortInBackoff = Effect.gen(function*() {
  for (const { fault, label } of abortFaults) {
    console.log(
      `\nabort during the backoff: each call answered ${label}, aborted ${abortAfterMs} ms after its first request; ${abortTrials} calls per row`
    )
    console.log(
      `  ${"SDK".padEnd(36)} ${"set-up".padEnd(36)} ${"settled after the abort".padStart(28)}  requests after it`
    )
    for (const sdk of sdks) {
      const setUps = [
        {
          name: "its own retries",
          prepare: (baseURL: string) => Effect.succeed((signal: AbortSignal) => sdk.alone(baseURL, undefined, signal))
        },
        { name: "resilient-ai under it", prepare: (baseURL: string) => underResilient(sdk, baseURL) }
      ]
      for (const setUp of setUps) {
        const trials = yield* Effect.all(
          Array.from({ length: abortTrials }, () => abortedCall(fault, setUp.prepare)),
          { concurrency: "unbounded" }
        )
        const settled = trials.flatMap((trial) => trial.settleMs === undefined ? [] : [trial.settleMs])
          .sort((a, b) => a - b)
        const never = abortTrials - settled.length
        const settleText = settled.length === 0
          ? `none within ${settleLimitMs / 1000} s`
          : `median ${settled[Math.floor(settled.length / 2)]!.toFixed(0)} ms, max ${
            settled[settled.length - 1]!.toFixed(0)
          } ms${never > 0 ? ` (${never} never)` : ""}`
        const after = trials.reduce((total, trial) => total + trial.requestsAfter, 0)
        console.log(`  ${sdk.name.padEnd(36)} ${setUp.name.padEnd(36)} ${settleText.padStart(28)}  ${after}`)
      }
    }
  }
})

const program = Effect.gen(function*() {
  console.log(
    `sdk-outage: ${calls} calls per row, ${concurrency} at a time, a ${
      deadlineMs / 1000
    } s deadline each, every request answered 503; Node ${process.version}`
  )
  console.log(columns("SDK", "set-up", "requests", "per call", "past deadline", "late > 1 s", "seconds"))
  const rows: Array<Row> = []
  for (const sdk of sdks) {
    rows.push(
      yield* measure(
        sdk.name,
        `its own retries (${sdk.ownRetries})`,
        (baseURL) => Effect.succeed((signal: AbortSignal) => sdk.alone(baseURL, undefined, signal))
      )
    )
    rows.push(
      yield* measure(sdk.name, "retries off, resilient-ai under it", (baseURL) => underResilient(sdk, baseURL))
    )
  }
  for (let index = 0; index < rows.length; index += 2) {
    const alone = rows[index]!
    const under = rows[index + 1]!
    console.log(
      `  ${alone.sdk}: resilient-ai under it sends ${
        (under.requests / alone.requests).toFixed(2)
      }× the requests of its own retries`
    )
  }
  yield* abortInBackoff
}).pipe(Effect.provide(Logger.remove(Logger.defaultLogger)))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
