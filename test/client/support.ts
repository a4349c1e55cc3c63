/**
 * Helpers shared by the client tests (and others that call over loopback): a fault server, targets
 * pointed at it, a real HTTP client, and waiting in real time for what the server or the client sees.
 */
import { dieMessage, withoutDefaultLogger } from "#test-line"
import { NodeHttpClient } from "@effect/platform-node"
import { ModelClient, Target } from "@resilient-ai/client"
import { Coordination, type Settings } from "@resilient-ai/policy"
import { Coordinations, keyFingerprint } from "@resilient-ai/policy/internal"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect, Layer, Redacted } from "effect"
import { canary } from "../canary.js"

/** The API key the tests use: the canary, which no output, log line or failure may ever contain. */
export const apiKey = canary

export { failureOf } from "../policy/support.js"

/** Keeps log lines out of the test output (`test/setup.ts` still checks each for the key). */
export const quiet = withoutDefaultLogger

/** The real undici-based HTTP client, as an application on Node provides it, with the log lines kept quiet. */
export const HttpLive = Layer.merge(NodeHttpClient.layerUndici, quiet)

/** A target whose settings are the test's own: one that cannot work fails the test. */
export const checked = (target: Effect.Effect<Target.Target, Settings.InvalidSettings>): Target.Target =>
  Effect.runSync(target)

let targets = 0
/** A target name no other test uses, so metrics read back belong to one test. */
export const freshName = (name: string) => `${name}-${++targets}`

/** A managed target pointed at `url`, with real but tiny backoff so tests stay fast. */
export const managedAt = (url: string, options: Partial<Target.Options> = {}): Target.Target =>
  checked(Target.managed({
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
  }))

/** A self-hosted target pointed at `url`. */
export const selfHostedAt = (url: string, options: Partial<Target.Options> = {}): Target.Target =>
  checked(Target.selfHosted({
    name: freshName("pool"),
    baseUrl: url,
    model: "test-model",
    baseDelay: "1 millis",
    maxDelay: "5 millis",
    attemptTimeout: "2 seconds",
    ...options
  }))

/**
 * The state the `Coordination` in context keeps for `target`, under its name and its key's
 * fingerprint, once a client of it made it.
 */
export const stateOf = (target: Target.Target): Effect.Effect<Coordinations.TargetServices | undefined> =>
  Effect.map(
    Coordination.Coordination,
    (coordination) => coordination.targets.get(target.name)?.get(keyFingerprint(target.apiKey))
  )

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

/**
 * How long waiting in real time may take by default. Only a failing test waits this long, so it is
 * generous: on CI's shared machine, with both cores busy, a loopback exchange has taken a second.
 */
export const patienceMillis = 10_000

/**
 * Polls `read` (real time, in small steps) until `check` holds of its value, and gives that value;
 * after `limitMillis`, gives the last value read, for the caller's assertion to show.
 */
export const settled = <A, E, R>(
  read: Effect.Effect<A, E, R>,
  check: (a: A) => boolean,
  limitMillis = patienceMillis
) =>
  Effect.gen(function*() {
    const started = Date.now()
    let value = yield* read
    while (!check(value) && Date.now() - started < limitMillis) {
      yield* Effect.sleep("5 millis")
      value = yield* read
    }
    return value
  })

/** Waits (real time, in small steps) until `condition` holds; after `limitMillis`, fails saying what did not happen. */
export const eventually = <E, R>(
  condition: Effect.Effect<boolean, E, R>,
  limitMillis = patienceMillis,
  what = "the condition"
) =>
  Effect.flatMap(
    settled(condition, (met) => met, limitMillis),
    (met) => met ? Effect.void : dieMessage(`not in time (${limitMillis} ms): ${what}`)
  )

/** 1 MiB of JSON-typed bytes in 1 KiB writes, with no declared length: its size shows only as it arrives. */
export const oversized: FaultPlan.Fault = {
  _tag: "Raw",
  headers: { "content-type": "application/json" },
  body: "x".repeat(1024),
  repeat: 1024,
  chunked: true
}
