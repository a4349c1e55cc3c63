/**
 * The hidden difference between an SDK's own retries and resilient-ai under the SDK, during an
 * outage: the same calls through the `openai` SDK at its default (2 retries each, no budget) and
 * through the SDK with its retries off and `ResilientFetch` under it (the target's attempt ceiling
 * of 3 and its budget: 10% of successes, a floor of 5 a second over 60 s), against a fault server
 * that answers every request with 503. Printed: the requests the provider received per call.
 *
 * `npx -y pnpm@12.4.2 --filter @resilient-ai/bench run sdk-outage`. Settings (environment):
 * OUTAGE_CALLS (1000), OUTAGE_CONCURRENCY (100).
 */
import { ResilientFetch, Target } from "@resilient-ai/client"
import { FaultServer } from "@resilient-ai/testing"
import { Effect, Logger, Redacted } from "effect"
import OpenAI from "openai"

const calls = Number(process.env.OUTAGE_CALLS ?? 1_000)
const concurrency = Number(process.env.OUTAGE_CONCURRENCY ?? 100)
const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [{ role: "user", content: "Say hello" }]

/** Runs `calls` chat calls through `client`, `concurrency` at a time; each ends in the SDK's error. */
const drive = async (client: OpenAI): Promise<number> => {
  const started = performance.now()
  let next = 0
  const worker = async () => {
    while (next < calls) {
      next++
      await client.chat.completions.create({ model: "gpt-4o-mini", messages }).catch(() => undefined)
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, calls) }, worker))
  return (performance.now() - started) / 1000
}

const program = Effect.gen(function*() {
  const server = yield* FaultServer.make({ otherwise: { _tag: "Status", status: 503 } })
  const measure = (name: string, client: OpenAI) =>
    Effect.gen(function*() {
      yield* server.clearArrivals
      const seconds = yield* Effect.promise(() => drive(client))
      const requests = (yield* server.arrivals).length
      return { name, requests, seconds }
    })
  const sdkAlone = yield* measure(
    "openai SDK, its default retries (2), no budget",
    new OpenAI({ apiKey: "sk-bench", baseURL: server.url })
  )
  const fetch = yield* ResilientFetch.make(Target.managed({
    name: "outage",
    baseUrl: server.url,
    model: "gpt-4o-mini",
    apiKey: Redacted.make("sk-bench"),
    // The SDK's own backoff, so both runs wait alike: 0.5 s growing to 8 s.
    baseDelay: "500 millis",
    maxDelay: "8 seconds"
  }))
  const underIt = yield* measure(
    "openai SDK, retries off, resilient-ai under it (3 attempts, 10% budget, floor 5/s)",
    new OpenAI({ apiKey: "sk-bench", baseURL: server.url, fetch, maxRetries: 0 })
  )
  console.log(
    `sdk-outage: ${calls} calls, ${concurrency} at a time, every request answered 503; Node ${process.version}`
  )
  for (const { name, requests, seconds } of [sdkAlone, underIt]) {
    console.log(
      `  ${name.padEnd(84)} ${String(requests).padStart(6)} requests, ${(requests / calls).toFixed(2)} per call, ${
        seconds.toFixed(1)
      } s`
    )
  }
  const ratio = underIt.requests / sdkAlone.requests
  console.log(`  resilient-ai under the SDK sends ${ratio.toFixed(2)}× the requests the SDK's own retries send`)
}).pipe(Effect.scoped, Effect.provide(Logger.remove(Logger.defaultLogger)))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
