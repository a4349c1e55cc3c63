/**
 * They are down, or we hit them too hard: a target's health probe tells the two apart.
 *
 * The provider is a fault server on loopback. Callers ask it something every 100 ms, and the
 * target's probe asks `GET /v1/models` every second (each probe allowed as long). First the provider has an outage (every
 * endpoint answers 503): the probe fails too, so the diagnosis is `provider-degraded`. Then it is
 * back, but with two slots, and a stampede of 60 calls at once overloads it: the probe is answered
 * while the calls are refused, so the diagnosis is `self-inflicted`. Each change is one log line and
 * the `resilient_ai_diagnosis` gauge.
 *
 * Run it with `npx -y pnpm@12.4.2 exec tsx --conditions=@resilient-ai/source examples/health-probe.ts`.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { type ChatCompletion, HealthProbe, ModelClient, Target } from "@resilient-ai/client"
import { FaultServer } from "@resilient-ai/testing"
import { Console, Effect, Fiber, Redacted, Schedule } from "effect"
// What Effect 3 and Effect 4 spell differently: examples/line/effect3.ts and effect4.ts show each form.
import { withMinimumLogLevel } from "#examples-line"

const request: ChatCompletion.ChatRequest = { messages: [{ role: "user", content: "Classify this ticket." }] }

const program = Effect.gen(function*() {
  const server = yield* FaultServer.make({ latencyMs: 20 })
  const target = yield* Target.managed({
    name: "probed",
    baseUrl: server.url,
    model: "mistral-small-latest",
    apiKey: Redacted.make("example-key"),
    maxAttempts: 2,
    probeInterval: "1 second"
  })
  const client = yield* ModelClient.make(target)
  // The diagnosis reads the calls of the last 5 s (30 s unless set), so this example runs in seconds.
  const probe = yield* HealthProbe.run(target, { diagnosis: { window: "5 seconds" } })

  const started = Date.now()
  const seen: Array<string> = []
  // Each change is printed once, whoever reads it first: the watcher, or the wait for a diagnosis.
  const record = (diagnosis: string) =>
    seen[seen.length - 1] === diagnosis ? Effect.void : Effect.suspend(() => {
      seen.push(diagnosis)
      return Console.log(`${((Date.now() - started) / 1000).toFixed(1)} s: ${diagnosis}`)
    })
  const watch = yield* Effect.forkScoped(
    Effect.forever(Effect.andThen(Effect.flatMap(probe.diagnosis, record), Effect.sleep("50 millis")))
  )
  const steady = yield* Effect.forkScoped(
    Effect.forever(Effect.andThen(Effect.ignore(client.chat(request)), Effect.sleep("100 millis")))
  )
  const until = (wanted: string) =>
    Effect.repeat(Effect.tap(probe.diagnosis, record), {
      until: (diagnosis) => diagnosis === wanted,
      schedule: Schedule.spaced("50 millis")
    }).pipe(
      Effect.timeout("20 seconds"),
      Effect.mapError(() => new Error(`never ${wanted}`))
    )

  yield* Effect.sleep("1 second")
  yield* Console.log("the provider goes down")
  yield* server.setPlan({ otherwise: { _tag: "Status", status: 503 } })
  yield* until("provider-degraded")
  yield* Console.log("the provider is back, with two slots; a stampede of 60 calls")
  yield* server.setPlan({ capacity: { concurrent: 2, status: 429 }, latencyMs: 200 })
  yield* until("healthy")
  // Diagnosed while it lasts: once the 60 calls are served, the calls of the window are healthy again.
  const stampede = yield* Effect.forkScoped(
    Effect.forEach(Array.from({ length: 60 }), () => Effect.ignore(client.chat(request)), { concurrency: "unbounded" })
  )
  yield* until("self-inflicted")
  yield* Fiber.interrupt(watch)
  yield* Console.log(`diagnoses, in order: ${seen.join(" → ")}`)
  yield* Fiber.interrupt(steady)
  yield* Fiber.join(stampede)
})

program.pipe(
  Effect.scoped,
  Effect.provide(NodeHttpClient.layerUndici),
  // The diagnosis is printed as it changes; the attempts' and the diagnosis's log lines are not.
  withMinimumLogLevel("Error"),
  Effect.runPromise
).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
