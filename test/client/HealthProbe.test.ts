/**
 * A target's health probe against the real fault server, on the TestClock: an outage (every
 * endpoint down) is `provider-degraded`, and the recovery ramp waits for the probe, not for a lucky
 * call; a healthy server with a tiny capacity under a stampede is `self-inflicted`; the diagnosis is
 * a gauge and one log line per change; the probe of `ModelClient.layer` ends with its scope.
 */
import { captureLogs, dieMessage, TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { HealthProbe, ModelClient, type Target } from "@resilient-ai/client"
import { isUp } from "@resilient-ai/client/internal"
import { Coordination, type Health } from "@resilient-ai/policy"
import { EffectLine, Meters } from "@resilient-ai/policy/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Effect, Exit, Fiber, Layer, Scope } from "effect"
import { hello, HttpLive, managedAt, stateOf } from "./support.js"

const down = { _tag: "Status", status: 503 } as const

/** Waits on the real clock (the probe's exchange is real I/O) until `condition` holds. */
const until = (condition: Effect.Effect<boolean>, what: string): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 2_000; turn++) {
      if (yield* condition) return
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
    return yield* dieMessage(`not in time: ${what}`)
  })

const probesOf = (server: FaultServer.Service) =>
  Effect.map(server.arrivals, (arrivals) => arrivals.filter((arrival) => arrival.path === "/v1/models"))

/** The next probe: the clock moves one interval and the probe's answer is read. */
const nextProbe = (server: FaultServer.Service, expected: number) =>
  Effect.gen(function*() {
    yield* TestClock.adjust("10 seconds")
    yield* until(Effect.map(probesOf(server), (probes) => probes.length >= expected), `probe ${expected} sent`)
  })

const gateOf = (target: Target.Target) =>
  Effect.flatMap(
    stateOf(target),
    (services) => services === undefined ? dieMessage("the target has no state yet") : services.gate.snapshot
  )

const diagnosisGauge = (target: Target.Target, state: Health.Diagnosis) =>
  EffectLine.gaugeValue(Meters.healthOf(target.name).diagnosis(state))

/** The log lines of the probe, as messages with their annotations. */
const recordedLogs = () => {
  const captured = Effect.runSync(captureLogs)
  return {
    layer: captured.layer,
    lines: Effect.map(captured.lines, (all) => all.filter((line) => line.message.startsWith("diagnosis")))
  }
}

describe("HealthProbe, against the fault server", () => {
  it.scoped("an outage is provider-degraded, and the ramp starts when the probe says the provider is back, not on a lucky call", () => {
    const logs = recordedLogs()
    return Effect.gen(function*() {
      const server = yield* FaultServer.make({ otherwise: down })
      // One attempt per call: each failed call is one overload for the gate, which degrades after 5.
      const target = managedAt(server.url, { maxAttempts: 1, probeInterval: "10 seconds" })
      const client = yield* ModelClient.make(target)
      const probe = yield* HealthProbe.run(target)
      yield* until(Effect.map(probesOf(server), (probes) => probes.length === 1), "first probe")
      yield* until(Effect.map(probe.probeUp, (up) => !up), "first probe read as down")
      // One probe down is not yet an outage (downAfter 2).
      assert.strictEqual(yield* probe.diagnosis, "healthy")
      for (let call = 0; call < 5; call++) yield* Effect.exit(client.chat(hello))
      assert.strictEqual((yield* gateOf(target)).health, "degraded")

      yield* nextProbe(server, 2)
      yield* until(Effect.map(probe.diagnosis, (now) => now === "provider-degraded"), "provider-degraded")
      assert.strictEqual(diagnosisGauge(target, "provider-degraded"), 1)
      assert.strictEqual(diagnosisGauge(target, "healthy"), 0)
      assert.strictEqual(EffectLine.gaugeValue(Meters.healthOf(target.name).probeUp), 0)

      // A lucky call while the probe still fails: the gate stays degraded.
      yield* server.setPlan({ steps: [{ _tag: "Ok" }], otherwise: down })
      const lucky = yield* Effect.exit(client.chat(hello))
      assert.isTrue(Exit.isSuccess(lucky), "the lucky call succeeded")
      assert.strictEqual((yield* gateOf(target)).health, "degraded", "a lucky call does not start the ramp")

      // The provider is back: two probes in a row (upAfter 2), then the ramp.
      yield* server.setPlan({})
      yield* nextProbe(server, 3)
      yield* until(Effect.map(probe.probeUp, (up) => up), "third probe read as up")
      assert.strictEqual(yield* probe.diagnosis, "provider-degraded", "one probe up is not yet back")
      assert.strictEqual((yield* gateOf(target)).health, "degraded")
      yield* nextProbe(server, 4)
      yield* until(Effect.map(probe.diagnosis, (now) => now === "healthy"), "healthy again")
      assert.strictEqual((yield* gateOf(target)).health, "recovering", "the probe started the ramp")

      const lines = yield* logs.lines
      assert.deepStrictEqual(
        lines.map((line) => [line.annotations["diagnosis"], line.annotations["was"]]),
        [["provider-degraded", "healthy"], ["healthy", "provider-degraded"]]
      )
      assert.strictEqual(lines[0]!.annotations["target"], target.name)
    }).pipe(Effect.provide(Layer.merge(HttpLive, logs.layer)), Effect.provide(Coordination.layerMemory))
  })

  it.scoped("a healthy server with a tiny capacity under a stampede: self-inflicted, and the probe stays up", () => {
    const logs = recordedLogs()
    return Effect.gen(function*() {
      // Two requests at once; the rest are refused with 429 at once. The model list is served apart.
      const server = yield* FaultServer.make({ capacity: { concurrent: 2, status: 429 }, latencyMs: 300 })
      const target = managedAt(server.url, { maxAttempts: 1, probeInterval: "10 seconds" })
      const client = yield* ModelClient.make(target)
      const probe = yield* HealthProbe.run(target)
      yield* until(Effect.map(probesOf(server), (probes) => probes.length === 1), "first probe")
      assert.strictEqual(yield* probe.diagnosis, "healthy")

      const stampede = yield* Effect.forEach(
        Array.from({ length: 30 }, () => client.chat(hello)),
        (call) => EffectLine.fork(Effect.exit(call))
      )
      const exits = yield* Fiber.joinAll(stampede)
      const refused = exits.filter(Exit.isFailure).length
      assert.isAtLeast(refused, 20, "most of the stampede was refused for capacity")

      yield* nextProbe(server, 2)
      yield* until(Effect.map(probe.diagnosis, (now) => now === "self-inflicted"), "self-inflicted")
      assert.isTrue(yield* probe.probeUp)
      assert.strictEqual(diagnosisGauge(target, "self-inflicted"), 1)
      assert.strictEqual((yield* probesOf(server)).every((arrival) => arrival.fault === "Ok"), true)
      const lines = yield* logs.lines
      assert.deepStrictEqual(lines.map((line) => line.annotations["diagnosis"]), ["self-inflicted"])
      assert.strictEqual(lines[0]!.annotations["troubles"], refused)

      // The stampede is over and the window moves past it: healthy again.
      for (let probeNumber = 3; probeNumber <= 6; probeNumber++) yield* nextProbe(server, probeNumber)
      yield* until(Effect.map(probe.diagnosis, (now) => now === "healthy"), "healthy after the window")
    }).pipe(Effect.provide(Layer.merge(HttpLive, logs.layer)), Effect.provide(Coordination.layerMemory))
  })

  it.scoped("a probe answered 404 or 401 is up: a path the provider lacks is not an outage", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        [200, 401, 404, 408, 429, 500, 503].map(isUp),
        [true, true, true, false, false, false, false]
      )
      const server = yield* FaultServer.make({})
      const target = managedAt(server.url, { probeInterval: "10 seconds", probePath: "/no-such-path" })
      const probe = yield* HealthProbe.run(target)
      yield* until(Effect.map(server.arrivals, (arrivals) => arrivals.length === 1), "first probe")
      yield* TestClock.adjust("10 seconds")
      yield* until(Effect.map(server.arrivals, (arrivals) => arrivals.length === 2), "second probe")
      assert.strictEqual((yield* server.arrivals)[0]!.path, "/v1/no-such-path")
      yield* until(probe.probeUp, "probe read as up")
      assert.strictEqual(yield* probe.diagnosis, "healthy")
    }).pipe(Effect.provide(HttpLive), Effect.provide(Coordination.layerMemory)))

  it.scoped("ModelClient.layer runs the probe of a target with probeInterval, and stops it with its scope", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({})
      const target = managedAt(server.url, { probeInterval: "10 seconds" })
      const scope = yield* Scope.make()
      yield* Layer.buildWithScope(ModelClient.layer(target), scope)
      yield* until(Effect.map(probesOf(server), (probes) => probes.length === 1), "first probe")
      yield* TestClock.adjust("10 seconds")
      yield* until(Effect.map(probesOf(server), (probes) => probes.length === 2), "second probe")
      yield* Scope.close(scope, Exit.void)
      yield* TestClock.adjust("30 seconds")
      // Anything the probe still sent would have arrived by now.
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
      assert.strictEqual((yield* probesOf(server)).length, 2, "no probe after the scope closed")
      assert.strictEqual(yield* server.inFlight, 0)

      // Without probeInterval, no probe.
      const quiet = managedAt(server.url)
      yield* Layer.buildWithScope(ModelClient.layer(quiet), yield* Effect.scope)
      yield* TestClock.adjust("30 seconds")
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
      assert.strictEqual((yield* probesOf(server)).length, 2)
    }).pipe(Effect.provide(HttpLive), Effect.provide(Coordination.layerMemory)))
})
