/**
 * The storm's scenarios, each one failure pattern of the seeds, with the figures that show it.
 *
 * The provider is the same everywhere unless a scenario says otherwise: 20 slots of 200 ms, so
 * 100 requests a second. Every call has a deadline and every attempt a 5 s timeout, for every
 * policy. `scale` shortens a scenario for the test suite; its shape (what happens when) stays.
 */
import * as SimulatedProvider from "./SimulatedProvider.js"
import type * as Storm from "./Storm.js"
import type { Scenario } from "./Storm.js"
import * as StormPolicies from "./StormPolicies.js"

/** The standard provider's slots: 20 slots × 200 ms = 100 requests a second. */
export const slots = 20
/** The standard provider's time to serve one request. */
export const serviceMillis = 200
/** Requests a second the provider can serve. */
export const capacityPerSecond = (slots * 1000) / serviceMillis

const provider = (
  incidents: ReadonlyArray<SimulatedProvider.Incident>,
  queueLimit = 1000
): SimulatedProvider.Options => ({ slots, serviceMillis, queueLimit, incidents })

const seconds = (value: number, scale: number) => Math.round(value * scale * 1000)

/** Ours with and without the budget that learns whether retries pay, then the rest. */
const withLearning = [
  StormPolicies.oursManaged,
  StormPolicies.oursManagedFixedRatio,
  StormPolicies.oursFixedCapacity,
  ...StormPolicies.references
]

/** S1: 10% of calls fail on every attempt, at 70% of capacity. What do retries add? */
export const correlatedFailure = (scale = 1): Scenario => ({
  id: "S1",
  title: "S1 correlated 10% failure",
  provider: provider([{ _tag: "FailingCalls", fromMillis: 0, toMillis: Number.POSITIVE_INFINITY, share: 0.1 }]),
  workload: { ratePerSecond: () => 70, untilMillis: seconds(120, scale), deadlineMillis: 10_000 },
  attemptTimeoutMillis: 5_000,
  horizonMillis: seconds(120, scale) + 15_000,
  contenders: withLearning
})

/**
 * S1b: S1's load, but each attempt fails on its own with 10%, so a retry mostly succeeds. Does a
 * budget that stops useless retries still make the useful ones?
 */
export const independentFailure = (scale = 1): Scenario => ({
  ...correlatedFailure(scale),
  id: "S1b",
  title: "S1b independent 10% failure",
  provider: provider([{ _tag: "FailingAttempts", fromMillis: 0, toMillis: Number.POSITIVE_INFINITY, share: 0.1 }])
})

/**
 * The health probe ours runs in S2 and S7: the provider's model listing every 5 s, each given 2 s,
 * with the diagnosis's defaults (2 probes in a row to say degraded or back; 10% of the calls in
 * trouble over 30 s, at least 5, to say self-inflicted).
 */
export const probe: Storm.Probe = { intervalMillis: 5_000, timeoutMillis: 2_000 }

/** When S2's outage starts and ends. */
export const outageMillis = (scale = 1) => ({ from: seconds(60, scale), to: seconds(120, scale) })

/**
 * S2: demand at 80% of capacity, then a full outage for 60 s during which the provider still
 * accepts requests but serves none (its queue fills with requests whose callers give up), then
 * capacity restored. Who recovers, and how fast?
 */
export const outageThenRecovery = (scale = 1): Scenario => {
  const outage = outageMillis(scale)
  return {
    id: "S2",
    title: "S2 outage then recovery",
    provider: provider([{ _tag: "Outage", fromMillis: outage.from, toMillis: outage.to, mode: "hang" }]),
    workload: { ratePerSecond: () => 80, untilMillis: seconds(300, scale), deadlineMillis: 10_000 },
    attemptTimeoutMillis: 5_000,
    horizonMillis: seconds(300, scale),
    probe
  }
}

/** When S3's burst is refused. */
export const burstAtMillis = 1_000
/** How long the provider refuses from then. */
const burstRetryAfterMillis = 2_000

/**
 * S3: `clients` callers refused at the same instant with `Retry-After: 2`; the provider keeps
 * refusing for those 2 seconds (a later request is told the time left). Do they come back together?
 */
export const synchronisedBurst = (clients = 200): Scenario => ({
  id: "S3",
  title: "S3 synchronised 429 burst",
  provider: provider([
    {
      _tag: "RateLimitBurst",
      fromMillis: burstAtMillis,
      toMillis: burstAtMillis + burstRetryAfterMillis,
      retryAfterMillis: burstRetryAfterMillis
    }
  ]),
  workload: {
    ratePerSecond: () => 0,
    untilMillis: 0,
    burst: { atMillis: burstAtMillis, calls: clients },
    deadlineMillis: 30_000
  },
  attemptTimeoutMillis: 5_000,
  horizonMillis: 40_000
})

/** When S4's outage starts and ends; after it, capacity comes back in steps. */
export const stampedeOutageMillis = (scale = 1) => ({ from: seconds(20, scale), to: seconds(50, scale) })

/** Slots during S4's recovery: half at first, three quarters 10 s later, all 10 s after that. */
export const stampedeCapacity = (
  scale = 1
): ReadonlyArray<{ readonly from: number; readonly to: number; readonly slots: number }> => {
  const restored = stampedeOutageMillis(scale).to
  return [
    { from: restored, to: restored + seconds(10, scale), slots: slots / 2 },
    { from: restored + seconds(10, scale), to: restored + seconds(20, scale), slots: (slots * 3) / 4 }
  ]
}

/**
 * S4: the provider refuses everything for 30 s while callers with long deadlines wait, then comes
 * back at half capacity, growing to full over 20 s, as a restarted service warms up. Does the
 * backlog arrive all at once and knock it over again? A short queue (40) makes that visible as
 * refusals. Ours runs with its recovery ramp and without it (the limit back to steady at once),
 * and with its limit fixed at the setting rather than learned.
 */
export const recoveryStampede = (scale = 1): Scenario => {
  const outage = stampedeOutageMillis(scale)
  return {
    id: "S4",
    title: "S4 recovery stampede",
    provider: provider([
      { _tag: "Outage", fromMillis: outage.from, toMillis: outage.to, mode: "refuse" },
      ...stampedeCapacity(scale).map((step) => ({
        _tag: "CapacityDrop" as const,
        fromMillis: step.from,
        toMillis: step.to,
        slots: step.slots
      }))
    ], 40),
    workload: { ratePerSecond: () => 80, untilMillis: seconds(110, scale), deadlineMillis: 30_000 },
    attemptTimeoutMillis: 5_000,
    horizonMillis: seconds(110, scale) + 30_000,
    contenders: [
      StormPolicies.oursManaged,
      StormPolicies.oursManagedFixedLimit,
      StormPolicies.oursManagedNoRamp,
      StormPolicies.oursFixedCapacity,
      ...StormPolicies.references
    ]
  }
}

/** When S5's surge ends. */
export const surgeEndsMillis = (scale = 1) => seconds(60, scale)

/**
 * S5: a fixed-capacity pool offered 120% of what it can serve for 60 s, then 60%: retrying into
 * the pool against shedding. A long queue (2000) lets the pool saturate instead of refusing.
 */
export const saturatedPool = (scale = 1): Scenario => {
  const surgeEnds = surgeEndsMillis(scale)
  return {
    id: "S5",
    title: "S5 fixed-capacity pool saturated",
    provider: provider([], 2_000),
    workload: {
      ratePerSecond: (at) => (at < surgeEnds ? 120 : 60),
      untilMillis: seconds(120, scale),
      deadlineMillis: 10_000
    },
    attemptTimeoutMillis: 5_000,
    horizonMillis: seconds(120, scale) + 15_000
  }
}

/** S6's API key: 900 requests and 1 200 000 tokens a minute (15 requests and 20 000 tokens a second). */
export const keyLimits = { requestsPerMinute: 900, tokensPerMinute: 1_200_000 }

/** Completion tokens between `min` and `max`, the same for a call number under every policy. */
const completion = (call: number, min: number, max: number) =>
  Math.round(min + SimulatedProvider.hashUnit(call) * (max - min))

/** S6's interactive services: three, steady, 2 calls a second each, small requests, a deadline of 10 s. */
const interactiveServices = 3
/** S6's batch services: seven, each running one job of 100 s at 1.5 calls a second, large requests, 120 s deadlines. */
const batchServices = 7

/** When S6's batch service `index` runs its job: they start 15 s apart from 10 s, each for 100 s. */
const batchJobMillis = (index: number, scale = 1) => ({
  from: seconds(10 + 15 * index, scale),
  to: seconds(10 + 15 * index + 100, scale)
})

/**
 * S6: ten services share one API key: three interactive ones, steady, with small requests and
 * deadlines of 10 s, and seven batch jobs, each a burst of large requests with deadlines of 120 s.
 * The jobs overlap, so for a while the offered tokens are well above the key's tokens per minute,
 * and the requests near its requests per minute. Does a policy find the limit through 429s, or
 * pace under it, and who waits while batch saturates the key?
 */
export const sharedKey = (scale = 1): Scenario => {
  const services: Array<Storm.Service> = [
    ...Array.from({ length: interactiveServices }, (_, index): Storm.Service => ({
      name: `interactive-${index + 1}`,
      lane: "interactive",
      ratePerSecond: () => 2,
      deadlineMillis: 10_000,
      tokens: (call) => ({ prompt: 600, maxTokens: 400, completion: completion(call, 100, 400) })
    })),
    ...Array.from({ length: batchServices }, (_, index): Storm.Service => {
      const job = batchJobMillis(index, scale)
      return {
        name: `batch-${index + 1}`,
        lane: "batch",
        ratePerSecond: (at) => (at >= job.from && at < job.to ? 1.5 : 0),
        deadlineMillis: 120_000,
        tokens: (call) => ({ prompt: 1_500, maxTokens: 1_000, completion: completion(call, 200, 1_000) })
      }
    })
  ]
  const untilMillis = seconds(240, scale)
  return {
    id: "S6",
    title: "S6 ten services on one key",
    // A managed provider's capacity is not the question here: slots enough for every request.
    provider: { slots: 10_000, serviceMillis: 300, queueLimit: 0, millisPerToken: 8, rateLimit: keyLimits },
    workload: {
      ratePerSecond: (at) => services.reduce((total, service) => total + service.ratePerSecond(at), 0),
      untilMillis,
      deadlineMillis: 120_000,
      services
    },
    attemptTimeoutMillis: 30_000,
    horizonMillis: untilMillis + 120_000,
    contenders: [
      StormPolicies.oursManaged,
      StormPolicies.bottleneckRps,
      StormPolicies.oursPaced,
      StormPolicies.oursPacedNoLanes,
      StormPolicies.oursPacedLearned
    ]
  }
}

/** When S7's stampede starts and ends. */
export const clientStampedeMillis = (scale = 1) => ({ from: seconds(30, scale), to: seconds(90, scale) })

/**
 * S7: a healthy provider, small (20 requests a second), and our clients: 5 calls a second, then, for
 * 60 s, a stampede of 60 a second (a deploy's warm-up, a batch started everywhere at once), then 5
 * again. The provider is never down, and its health endpoint says so: every failure is our load.
 * Does the diagnosis say self-inflicted, where the calls alone look like S2's outage?
 */
export const clientStampede = (scale = 1): Scenario => {
  const stampede = clientStampedeMillis(scale)
  const untilMillis = seconds(150, scale)
  return {
    id: "S7",
    title: "S7 client stampede on a healthy provider",
    // Healthy throughout, but small: 4 slots of 200 ms (20 requests a second), a queue of 40.
    provider: { slots: 4, serviceMillis, queueLimit: 40 },
    workload: {
      ratePerSecond: (at) => (at >= stampede.from && at < stampede.to ? 60 : 5),
      untilMillis,
      deadlineMillis: 10_000
    },
    attemptTimeoutMillis: 5_000,
    horizonMillis: untilMillis + 15_000,
    probe,
    contenders: [StormPolicies.oursManaged, StormPolicies.oursFixedCapacity]
  }
}
