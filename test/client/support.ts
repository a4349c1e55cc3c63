/** Helpers shared by the client tests: a fault server, targets pointed at it, a real HTTP client. */
import { NodeHttpClient } from "@effect/platform-node"
import { ModelClient, Target } from "@resilient-ai/client"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect, Layer, Logger, Redacted } from "effect"
import { canary } from "../canary.js"

/** The API key the tests use: the canary, which no output, log line or failure may ever contain. */
export const apiKey = canary

/**
 * The real undici-based HTTP client, as an application on Node provides it. Log lines stay out of
 * the test output (`test/setup.ts` still checks each for the key).
 */
export const HttpLive = Layer.merge(NodeHttpClient.layerUndici, Logger.remove(Logger.defaultLogger))

let targets = 0
/** A target name no other test uses, so metrics read back belong to one test. */
export const freshName = (name: string) => `${name}-${++targets}`

/** A managed target pointed at `url`, with real but tiny backoff so tests stay fast. */
export const managedAt = (url: string, options: Partial<Target.Options> = {}): Target.Target =>
  Target.managed({
    name: freshName("managed"),
    baseUrl: url,
    model: "test-model",
    apiKey: Redacted.make(apiKey),
    maxAttempts: 3,
    baseDelay: "1 millis",
    maxDelay: "5 millis",
    hintSpread: "5 millis",
    attemptTimeout: "2 seconds",
    ...options
  })

/** A self-hosted target pointed at `url`. */
export const selfHostedAt = (url: string, options: Partial<Target.Options> = {}): Target.Target =>
  Target.selfHosted({
    name: freshName("pool"),
    baseUrl: url,
    model: "test-model",
    baseDelay: "1 millis",
    maxDelay: "5 millis",
    attemptTimeout: "2 seconds",
    ...options
  })

/** A fault server with `plan` and a client of a target pointed at it. */
export const serverAndClient = (
  plan: FaultPlan.Plan,
  target: (url: string) => Target.Target = (url) => managedAt(url)
) =>
  Effect.gen(function*() {
    const server = yield* FaultServer.make(plan)
    const client = yield* ModelClient.make(target(server.url))
    return { server, client }
  })

/** The chat request most tests send. */
export const hello = { messages: [{ role: "user", content: "Say hello." }] } as const

/** Waits (real time, in small steps) until `condition` holds, failing the test after `limitMillis`. */
export const eventually = <E, R>(condition: Effect.Effect<boolean, E, R>, limitMillis = 2_000) =>
  Effect.gen(function*() {
    const started = Date.now()
    while (!(yield* condition)) {
      if (Date.now() - started > limitMillis) return yield* Effect.dieMessage("condition not met in time")
      yield* Effect.sleep("5 millis")
    }
  })
