/**
 * A target's health probe: a background fiber that asks the provider something cheap (`GET /models`)
 * at a low fixed rate, outside the retry budget, the gate and the rate limiter, and with the calls'
 * metrics diagnoses the target (`Health`): `provider-degraded` when the probe fails too,
 * `self-inflicted` when the probe is fine while our calls fail for capacity, are shed or exhaust the
 * budget, `healthy` otherwise. Any answer says the provider is up except a 5xx, a 408 or a 429 (a
 * 401 or a 404 still comes from a provider that serves).
 *
 * The diagnosis tells the two incidents apart that the client's own graphs cannot, and it steers the
 * gate: while the probe finds the provider down, a lucky call does not start the recovery ramp; the
 * ramp starts when the probe says the provider is back. Off unless asked for: `ModelClient.layer`
 * starts one for a target with `probeInterval` set, and `run` starts one in any scope.
 *
 * ```ts
 * import { ModelClient, Target } from "@resilient-ai/client"
 *
 * declare const options: Target.Options
 * // Every 10 s, GET {baseUrl}/models; the diagnosis is a metric and a log line on each change.
 * const MistralLive = ModelClient.layer(Target.managed({ ...options, probeInterval: "10 seconds" }))
 * ```
 */
import { HttpClient, HttpClientRequest, withoutTracerPropagation } from "#client-line"
import type * as ConcurrencyGate from "@resilient-ai/policy/ConcurrencyGate"
import * as Health from "@resilient-ai/policy/Health"
import * as FastPath from "@resilient-ai/policy/internal/fastPath"
import * as Diagnoses from "@resilient-ai/policy/internal/health"
import * as EffectLine from "@resilient-ai/policy/internal/line"
import { Either } from "@resilient-ai/policy/internal/line"
import * as Checked from "@resilient-ai/policy/internal/settings"
import * as Settings from "@resilient-ai/policy/Settings"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { isUp } from "./internal/probe.js"
import type * as Transport from "./internal/transport.js"
import * as Wiring from "./internal/wiring.js"
import type * as Target from "./Target.js"

/** Settings of a probe; the target's `probeInterval` and `probePath` are the defaults. */
export interface Options {
  /** Time between two probes. Default the target's `probeInterval`, else 10 seconds. */
  readonly interval?: EffectLine.DurationInput | undefined
  /** What is asked, under the base URL. Default the target's `probePath`, else `/models`. */
  readonly path?: string | undefined
  /** A probe not answered within this is down. Default 5 seconds, at most the interval. */
  readonly timeout?: EffectLine.DurationInput | undefined
  /** How the probes and the calls make a diagnosis. */
  readonly diagnosis?: Health.Options | undefined
}

/** A running probe. */
export interface Service {
  /** The target's diagnosis now: `healthy` until the probes say otherwise. */
  readonly diagnosis: Effect.Effect<Health.Diagnosis>
  /** Whether the last probe found the provider answering; `true` before the first. */
  readonly probeUp: Effect.Effect<boolean>
}

const ProbeSettings = Checked.struct({
  interval: Checked.withDefault(Checked.finitePositiveDuration, Duration.seconds(10)),
  timeout: Checked.optional(Checked.finitePositiveDuration)
})

const decodeSettings = Checked.decoder(ProbeSettings, () => "health probe")

/** One probe: up or down, and how long it took, on the Effect clock. Never fails. */
const probeOnce = (
  http: HttpClient.HttpClient,
  endpoint: Transport.Endpoint,
  path: string,
  timeout: Duration.Duration
): Effect.Effect<Diagnoses.ProbeResult> =>
  Effect.gen(function*() {
    const unsigned = HttpClientRequest.get(`${endpoint.baseUrl.replace(/\/+$/, "")}${path}`).pipe(
      HttpClientRequest.acceptJson
    )
    const request = endpoint.apiKey === undefined
      ? unsigned
      : HttpClientRequest.bearerToken(unsigned, endpoint.apiKey)
    const started = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    const answer = yield* http.execute(request).pipe(
      // The body is read, so the connection goes back to the pool, and dropped.
      Effect.flatMap((response) => Effect.as(Effect.ignore(response.arrayBuffer), response.status)),
      Effect.scoped,
      Effect.timeoutOption(timeout),
      Effect.option
    )
    const ended = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    const status = Option.flatten(answer)
    return { up: Option.isSome(status) && isUp(status.value), millis: ended - started }
  })

/**
 * Starts the probe of `target` in the current scope: one probe at once, then one per `interval`.
 * The gate of the target (from the `Coordination` in context, the one its calls use) holds its
 * recovery while the probe finds the provider down, and starts the ramp when it is back; the scope's
 * end stops the probe and gives recovery back to the calls. Bad settings fail with `InvalidSettings`.
 */
export const run = (
  target: Target.Target,
  options: Options = {}
): Effect.Effect<Service, Settings.InvalidSettings, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function*() {
    const checked = yield* Either.toEffect(decodeSettings({
      interval: options.interval ?? target.probeInterval,
      timeout: options.timeout
    }))
    const diagnosisSettings = yield* Either.toEffect(Diagnoses.settings(options.diagnosis))
    const path = options.path ?? target.probePath ?? "/models"
    const timeout = Duration.min(checked.timeout ?? Duration.seconds(5), checked.interval)
    // Without the tracer's propagation: the probe's trace context is not the provider's business.
    const http = withoutTracerPropagation(yield* HttpClient.HttpClient)
    const { endpoint, state } = yield* Wiring.wire(target)
    const { gate } = state
    const diagnoser = new Diagnoses.Diagnoser(diagnosisSettings)

    const step = Effect.gen(function*() {
      const probe = yield* probeOnce(http, endpoint, path, timeout)
      const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      const result = diagnoser.observe(now, probe, Diagnoses.callTotals(target.name, state))
      yield* holdRecovery(gate, !probe.up || result.diagnosis === "provider-degraded")
      if (result.providerBack) yield* gate.markRecovered
      yield* Diagnoses.report(target.name, result, probe, diagnoser.trouble())
    })

    yield* Effect.addFinalizer(() => holdRecovery(gate, false))
    yield* step.pipe(
      Effect.repeat(Schedule.fixed(checked.interval)),
      Effect.annotateLogs({ target: target.name }),
      Effect.forkScoped
    )
    return {
      diagnosis: Effect.sync(() => diagnoser.diagnosis),
      probeUp: Effect.sync(() => diagnoser.probeUp)
    }
  })

const holdRecovery = (gate: ConcurrencyGate.Service, held: boolean): Effect.Effect<void> =>
  FastPath.gate(gate)?.holdRecovery?.(held) ?? Effect.void

/** The probe of `target` for as long as the layer lives. */
export const layer = <E = never, R = never>(
  target: Target.Target | Effect.Effect<Target.Target, E, R>,
  options?: Options
): Layer.Layer<never, E | Settings.InvalidSettings, HttpClient.HttpClient | R> =>
  EffectLine.layerScopedDiscard(
    Effect.flatMap(Effect.isEffect(target) ? target : Effect.succeed(target), (checked) => run(checked, options))
  )
