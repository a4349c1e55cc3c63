/**
 * The retry policies a storm compares: ours, with the managed and the fixed-capacity presets
 * exactly as `@resilient-ai/client` ships them, and the policies users would otherwise pick,
 * each built from its public specification.
 *
 * Every policy runs on the same engine (`Resilient.retryWith`'s), so what differs is only what
 * the specification says: its attempt ceiling, its schedule, its budget (none, a token bucket,
 * a quota) and whether it knows about deadlines, hints and capacity. The references have no
 * deadline of their own (the caller gives up at its deadline and interrupts them), no gate, and
 * replay timeouts; they do not read `Retry-After`.
 */
import { Target } from "@resilient-ai/client"
import { Targets } from "@resilient-ai/client/internal"
import { Backoff, Classifier, ConcurrencyGate, Failure, RateLimiter, RetryBudget } from "@resilient-ai/policy"
import {
  type Attempts,
  Backoffs,
  Coordinations,
  EffectLine,
  Engine,
  FastPath,
  Policies
} from "@resilient-ai/policy/internal"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"

/** What a scenario tells a policy about the world it runs in. */
export interface Setting {
  /** The per-attempt timeout every policy uses, so only the retry behaviour differs. */
  readonly attemptTimeoutMillis: number
  /** The provider's slots: what a fixed-capacity pool's operator configures its gate to. */
  readonly providerSlots: number
  /**
   * Told the state of the target a policy calls, so the run can chart its gate's limit and its
   * health probe can read what the calls learned.
   */
  readonly watchTarget?: ((state: Coordinations.TargetServices) => void) | undefined
  /** The API key's limits (S6): what an operator who knows them configures. */
  readonly rateLimit?: RateLimiter.Limits | undefined
}

/** What a call asks of the key's limits (S6): the tokens it reserves and its lane. */
export interface CallShape {
  readonly tokens: number
  readonly lane: RateLimiter.Lane
}

/**
 * A call under a policy: the attempt (which reports what the provider's answer says, as the client's
 * transport does), the caller's deadline from now, and what it asks of the key.
 */
export type Caller = (
  attempt: Effect.Effect<void | Attempts.Answered<void>, Failure.Failure | Attempts.Reported<Failure.Failure>>,
  deadlineMillis: number,
  call?: CallShape | undefined
) => Effect.Effect<void, unknown>

/** A policy in the comparison. */
export interface Contender {
  readonly name: string
  /** Where it comes from and the parameters used, for the report. */
  readonly description: string
  readonly ours: boolean
  /** Builds the policy's services for one run (budgets and gates hold state). */
  readonly make: (setting: Setting) => Effect.Effect<Caller>
}

/**
 * `call`, given up (interrupted, and failed with `"deadline"`) once `deadlineMillis` have passed: the
 * caller's own deadline. Its timer is set before the call starts, so it fires before the call's own
 * deadline in the same instant on either Effect line. With a timeout around the call, Effect 4 runs
 * the call first and sets the timer after (Effect 3 starts both as tasks): a call still waiting in
 * the gate's queue at its deadline then failed there, a deadline skip in the metrics the health
 * diagnosis reads, where on Effect 3 its caller had given up.
 */
const givingUpAt = <A, E>(deadlineMillis: number, call: Effect.Effect<A, E>): Effect.Effect<A, E | "deadline"> =>
  Effect.raceFirst(Effect.andThen(Effect.sleep(deadlineMillis), Effect.fail("deadline" as const)), call)

const unboundedGate = (name: string) => ConcurrencyGate.make({ target: name, limit: Number.POSITIVE_INFINITY })

/** A reference policy: the caller's deadline interrupts it; it knows nothing of the deadline itself. */
const reference = (
  name: string,
  description: string,
  options: {
    readonly maxAttempts: number
    readonly schedule: Schedule.Schedule<unknown, Failure.Failure>
    readonly budget: Effect.Effect<RetryBudget.Service>
  }
): Contender => ({
  name,
  description,
  ours: false,
  // The contenders' settings are the simulator's own: one it cannot build is a defect of the simulator.
  make: (setting) =>
    Effect.orDie(Effect.gen(function*() {
      const budget = yield* options.budget
      const gate = yield* unboundedGate(name)
      const services = Coordinations.targetServices({ budget, gate })
      // Each reference's own backoff, which reads no hint.
      const policy = yield* Policies.withSchedule(
        {
          target: name,
          maxAttempts: options.maxAttempts,
          attemptTimeout: Duration.millis(setting.attemptTimeoutMillis),
          minAttemptTime: 0,
          // No hint is read, so none can be too long.
          maxRetryAfter: Duration.infinity
        },
        options.schedule,
        { readsHints: false }
      )
      return (attempt, deadlineMillis) =>
        givingUpAt(deadlineMillis, Engine.run(() => attempt, policy, services, { replaySafe: true }))
    }))
})

/** Exponential without jitter: `base · 2^n`, capped. */
const exponential = (baseMillis: number, capMillis: number): Schedule.Schedule<Duration.Duration> =>
  EffectLine.scheduleOf(
    0,
    (_now, _input: unknown, retry: number) =>
      Effect.succeed([retry + 1, Backoffs.ceilingMillis(baseMillis, capMillis, retry)] as const)
  )

/** A failure carrying the provider's "do not retry" (`x-should-retry: false`): gRPC's pushback. */
const pushedBack = (failure: Failure.Failure): boolean => "shouldRetry" in failure && failure.shouldRetry === false

/**
 * A decimal's thousandths, the rest dropped. The binary product can land just under the decimal
 * one (1.005 · 1000 is 1004.99…), so it is rounded to a millionth before the cut.
 */
const thousandths = (value: number): number => Math.trunc(Math.round(value * 1_000_000) / 1000)

/**
 * gRPC retry throttling (gRFC A6): a token count that starts at `maxTokens`; a failed attempt whose
 * status the policy retries, or a pushback saying not to retry, spends one; a success earns
 * `tokenRatio`; retries are allowed while more than `maxTokens / 2` is left. A failure the policy does
 * not retry (a malformed request, an exhausted quota) spends nothing: it says nothing about the
 * server's health. The policy's retryable set is what the classifier in context does not call
 * terminal, ambiguous failures included: the references replay them. Tokens are counted in
 * thousandths, as gRPC does (`tokenRatio` has up to 3 decimals), so ten successes of 0.1 earn
 * exactly one token; further decimals are dropped, not rounded (A6: 0.5466 is treated as 0.546).
 */
export const grpcThrottling = (maxTokens: number, tokenRatio: number): Effect.Effect<RetryBudget.Service> =>
  Effect.sync(() => {
    const maxMilli = thousandths(maxTokens)
    const ratioMilli = thousandths(tokenRatio)
    let milli = maxMilli
    const throttle: FastPath.With<RetryBudget.Service, FastPath.Budget> = {
      tryAcquire: () => Effect.sync(() => milli * 2 > maxMilli),
      [FastPath.key]: {
        // The simulated provider fails only with the toolkit's failures.
        recordFailure: (failure) =>
          Effect.map(Classifier.Classifier, ({ classify }) => {
            const known = failure as Failure.Failure
            if (classify(known) !== "terminal" || pushedBack(known)) milli = Math.max(0, milli - 1000)
          })
      },
      recordSuccess: () =>
        Effect.sync(() => {
          milli = Math.min(maxMilli, milli + ratioMilli)
        }),
      snapshot: Effect.sync(() => ({ successes: 0, retries: 0, paid: 0, allowance: milli / 1000 }))
    }
    return throttle
  })

/**
 * Finagle's leaky token bucket (util's `TokenBucket.newLeakyBucket`): what is put in or taken out
 * lands in the current slice of `ttl / 10`, and a slice counts until nine more have ended. A slice
 * ends at the first use after its length has passed, and the next starts at that use: whole
 * slices that passed unused meanwhile end empty, the rest of the gap is not counted, so a bucket
 * used sparsely keeps its tokens longer. A token lasts about `ttl`, never less than nine tenths of
 * it. The bucket holds `reserve` on top of its slices, whatever the time. Tokens put and taken are
 * kept apart only so a snapshot can tell them; the bucket nets them, as Finagle's does.
 */
const leakyBucket = (ttlMillis: number, reserve: number, now: () => number) => {
  const sliceMillis = Math.trunc(ttlMillis / 10)
  const endedIn = [0, 0, 0, 0, 0, 0, 0, 0, 0]
  const endedOut = [0, 0, 0, 0, 0, 0, 0, 0, 0]
  // The oldest ended slice, the one the next to end replaces.
  let oldest = 0
  let putIn = 0
  let takenOut = 0
  let began = now()
  const end = (tokensIn: number, tokensOut: number) => {
    endedIn[oldest] = tokensIn
    endedOut[oldest] = tokensOut
    oldest = (oldest + 1) % endedIn.length
  }
  const roll = () => {
    const at = now()
    if (at - began < sliceMillis) return
    end(putIn, takenOut)
    putIn = 0
    takenOut = 0
    const unused = Math.min(Math.trunc((at - began) / sliceMillis) - 1, endedIn.length)
    for (let slice = 0; slice < unused; slice++) end(0, 0)
    began = at
  }
  const sum = (values: ReadonlyArray<number>, current: number) =>
    values.reduce((total, tokens) => total + tokens, current)
  const bucket = {
    /** Tokens put in over the slices still counted, and taken out of them. */
    totals: () => {
      roll()
      return { in: sum(endedIn, putIn), out: sum(endedOut, takenOut) }
    },
    count: () => {
      const { in: tokensIn, out } = bucket.totals()
      return reserve + tokensIn - out
    },
    put: (tokens: number) => {
      roll()
      putIn += tokens
    },
    tryGet: (tokens: number) => {
      if (bucket.count() < tokens) return false
      takenOut += tokens
      return true
    }
  }
  return bucket
}

/**
 * Finagle's `RetryBudget(ttl, minRetriesPerSec, percentCanRetry)` as its `RetryFilter` uses it:
 * every call deposits, before its first attempt; a retry withdraws, refused while the bucket holds
 * less than a withdrawal. Finagle counts whole tokens, scaled by 1000: a deposit is 1000 of them, a
 * withdrawal `trunc(1000 / percentCanRetry)`, and the reserve `minRetriesPerSec · ttl in whole
 * seconds` withdrawals (with `percentCanRetry` 0, a deposit is nothing and a withdrawal 1). Finagle
 * takes `ttl` from 1 to 60 seconds and `percentCanRetry` up to 1000.
 *
 * Its snapshot counts the calls that deposited as successes and the withdrawals as retries, and
 * gives as allowance the withdrawals the bucket would hold had none been made, reserve included:
 * `allowance - retries`, cut to a whole number, is Finagle's `balance`.
 */
export const finagleBudget = (
  ttlMillis: number,
  minRetriesPerSecond: number,
  percentCanRetry: number
): Effect.Effect<RetryBudget.Service> =>
  Effect.map(EffectLine.currentClock, (clock) => {
    const deposit = percentCanRetry === 0 ? 0 : 1000
    const withdrawal = percentCanRetry === 0 ? 1 : Math.trunc(1000 / percentCanRetry)
    const reserve = minRetriesPerSecond * Math.trunc(ttlMillis / 1000) * withdrawal
    const bucket = leakyBucket(ttlMillis, reserve, () => EffectLine.nowMillis(clock))
    const budget: FastPath.With<RetryBudget.Service, FastPath.Budget> = {
      [FastPath.key]: {
        recordCall: Effect.sync(() => bucket.put(deposit))
      },
      tryAcquire: () => Effect.sync(() => bucket.tryGet(withdrawal)),
      recordSuccess: () => Effect.void,
      snapshot: Effect.sync(() => {
        const totals = bucket.totals()
        return {
          successes: deposit === 0 ? 0 : totals.in / deposit,
          retries: totals.out / withdrawal,
          paid: 0,
          allowance: (reserve + totals.in) / withdrawal
        }
      })
    }
    return budget
  })

/**
 * The AWS SDKs' standard retry quota: 500 tokens; a retry costs 5 (10 after a timeout); a
 * successful retried call refunds its cost; a call that succeeds first time adds 1.
 */
const awsRetryQuota = (
  initial = 500,
  retryCost = 5,
  timeoutCost = 10,
  noRetryIncrement = 1
): Effect.Effect<RetryBudget.Service> =>
  Effect.sync(() => {
    let quota = initial
    return {
      tryAcquire: (failure) =>
        Effect.sync(() => {
          const timedOut = Failure.isFailure(failure) &&
            (failure._tag === "ReadTimeout" || failure._tag === "ConnectTimeout")
          const cost = timedOut ? timeoutCost : retryCost
          if (quota < cost) return false
          quota -= cost
          return true
        }),
      recordSuccess: (attempts) =>
        Effect.sync(() => {
          quota = Math.min(initial, quota + (attempts > 1 ? retryCost : noRetryIncrement))
        }),
      snapshot: Effect.sync(() => ({ successes: 0, retries: 0, paid: 0, allowance: quota }))
    }
  })

/** The policies users would otherwise pick, each from its public specification. */
export const references: ReadonlyArray<Contender> = [
  reference("naive", "3 attempts, exponential without jitter (1 s, 2 s), no budget", {
    maxAttempts: 3,
    schedule: exponential(1000, Number.POSITIVE_INFINITY),
    budget: Effect.succeed(RetryBudget.unlimited)
  }),
  reference(
    "tenacity-style",
    "tenacity `stop_after_attempt(5)` + `wait_random_exponential(multiplier=1, max=30)`: 5 attempts, uniform in [0, min(30 s, 2^n s)], no budget",
    {
      maxAttempts: 5,
      schedule: Backoff.fullJitter({ base: "1 second", cap: "30 seconds" }),
      budget: Effect.succeed(RetryBudget.unlimited)
    }
  ),
  reference(
    "effect-retryTransient",
    "`HttpClient.retryTransient` with `Schedule.exponential(\"100 millis\").pipe(Schedule.jittered)`, 3 retries: ×0.8–1.2 jitter, no budget",
    {
      maxAttempts: 4,
      schedule: Schedule.exponential("100 millis").pipe(Schedule.jittered),
      budget: Effect.succeed(RetryBudget.unlimited)
    }
  ),
  reference(
    "grpc-throttling",
    "gRPC retry policy (gRFC A6 example: 4 attempts, backoff random(0, min(1 s, 0.1 s·2^n))) with retry throttling maxTokens 10, tokenRatio 0.1",
    {
      maxAttempts: 4,
      schedule: Backoff.fullJitter({ base: "100 millis", cap: "1 second" }),
      budget: grpcThrottling(10, 0.1)
    }
  ),
  reference(
    "finagle-budget",
    "Finagle `RetryBudget(ttl = 10 s, minRetriesPerSec = 10, percentCanRetry = 0.2)`, 3 attempts, backoff random in [5 ms·2^(n-1), 5 ms·2^n] up to 32 s",
    {
      maxAttempts: 3,
      schedule: equalJitter(5, 32_000),
      budget: finagleBudget(10_000, 10, 0.2)
    }
  ),
  reference(
    "aws-standard",
    "AWS SDK standard retry mode: 3 attempts, backoff random(0, min(20 s, 2^n s)), retry quota 500 tokens, cost 5, timeout cost 10",
    {
      maxAttempts: 3,
      schedule: Backoff.fullJitter({ base: "1 second", cap: "20 seconds" }),
      budget: awsRetryQuota()
    }
  )
]

/** Between half and all of `min(cap, base · 2^n)`. */
function equalJitter(baseMillis: number, capMillis: number): Schedule.Schedule<Duration.Duration> {
  return EffectLine.scheduleOf(0, (_now, _input: unknown, retry: number) =>
    Effect.map(Random.next, (fraction) => {
      const ceiling = Backoffs.ceilingMillis(baseMillis, capMillis, retry)
      return [retry + 1, Math.round(ceiling / 2 + (fraction * ceiling) / 2)] as const
    }))
}

/** A target for the simulation, with the kind's shipped defaults. */
const simulatedTarget = (kind: Target.Kind, name: string, setting: Setting, overrides: Partial<Target.Options> = {}) =>
  (kind === "managed" ? Target.managed : Target.selfHosted)({
    name,
    baseUrl: "http://provider.simulated/v1",
    model: "simulated",
    apiKey: Redacted.make("simulated"),
    attemptTimeout: Duration.millis(setting.attemptTimeoutMillis),
    ...overrides
  })

/**
 * How ours paces calls under the key's limits, with the shipped `RateLimiter` made from the target's
 * limits as `Coordination` makes it (without a `Pacing`, ours has no limiter, as before it had one);
 * `lanes` says whether batch calls wait in the batch lane or every call is interactive.
 */
interface Pacing {
  readonly lanes: boolean
}

/** Ours, as `@resilient-ai/client` builds a target of `kind`: its policy, budget, gate and classifier. */
const ours = (
  name: string,
  description: string,
  kind: Target.Kind,
  overrides: (setting: Setting) => Partial<Target.Options> = () => ({}),
  gateOverrides: Partial<ConcurrencyGate.Options> = {},
  pacing?: Pacing | undefined
): Contender => ({
  name,
  description,
  ours: true,
  make: (setting) =>
    Effect.orDie(Effect.gen(function*() {
      const target = yield* simulatedTarget(kind, name, setting, overrides(setting))
      const budget = yield* RetryBudget.make(target.budget)
      const gate = yield* ConcurrencyGate.make({
        target: name,
        limit: target.concurrency,
        mode: Targets.gateMode(target),
        ...gateOverrides
      })
      const policy = Targets.policyFor(target)
      const limiter = pacing === undefined ? undefined : yield* RateLimiter.make({ ...policy.rateLimit, target: name })
      // The target's classifier is in its policy.
      const services = Coordinations.targetServices({ budget, gate, limiter })
      setting.watchTarget?.(services)
      return (attempt, deadlineMillis, call) =>
        givingUpAt(
          deadlineMillis,
          Engine.run(() => attempt, policy, services, {
            replaySafe: true,
            timeout: Duration.millis(deadlineMillis),
            tokens: call?.tokens,
            lane: pacing?.lanes === true ? call?.lane : "interactive"
          })
        )
    }))
})

/**
 * Ours, managed preset: 3 attempts, full jitter 500 ms–8 s with hints winning, a budget of 20% (floor
 * 5/s) that learns whether retries pay, an adaptive gate of at most 64 with ramp.
 */
export const oursManaged: Contender = ours(
  "ours-managed",
  "resilient-ai managed target, shipped defaults: 3 attempts, full jitter 500 ms–8 s, Retry-After wins (+ up to 1 s), budget 20% of successes over 60 s with a floor of 5/s, of which 5% is kept while no recent retry succeeds, deadline-aware, adaptive gate of at most 64 that queues (×0.9 on overload, +1 per full round), recovery ramp 10% → ×1.5 per 5 s up to the learned limit",
  "managed"
)

/** Ours, managed, with the gate's limit fixed at 64: what the adaptive limit changes. */
export const oursManagedFixedLimit: Contender = ours(
  "ours-managed-fixed-limit",
  "ours-managed, but with the gate's limit fixed at 64 instead of learned, as it shipped before: the ramp climbs back to 64 whatever the provider holds",
  "managed",
  () => ({}),
  { adaptive: false }
)

/** Ours, fixed-capacity preset with the gate set to the pool's slots. */
export const oursFixedCapacity: Contender = ours(
  "ours-fixed-capacity",
  "resilient-ai self-hosted target, shipped defaults: 2 attempts only for failures that never reached the pool, budget 1% (floor 0.2/s), gate set to the pool's slots that sheds instead of queueing",
  "self-hosted",
  (setting) => ({ concurrency: setting.providerSlots })
)

/** Ours, managed, but without the recovery ramp: the limit returns to steady state at once. */
export const oursManagedNoRamp: Contender = ours(
  "ours-managed-no-ramp",
  "ours-managed, but on recovery the gate's limit returns to steady state at once instead of ramping, to isolate what the ramp does",
  "managed",
  () => ({}),
  { rampStep: "1 millis", rampFactor: 1_000 }
)

/**
 * Ours, managed, with the budget it had before it learned whether retries pay: 10% of successes,
 * all of it whatever the retries did.
 */
export const oursManagedFixedRatio: Contender = ours(
  "ours-fixed-ratio",
  "ours-managed with the budget it shipped before it learned whether retries pay: 10% of successes with a floor of 5/s, whatever the retries did",
  "managed",
  () => ({ budget: { ratio: 0.1, minPerSecond: 5, shareWhenRetriesFail: 1 } })
)

/** The key's limits as an operator configures them on the target, from the scenario's key. */
const keyLimits = (setting: Setting): Partial<Target.Options> => ({
  requestsPerMinute: setting.rateLimit?.requestsPerMinute,
  tokensPerMinute: setting.rateLimit?.tokensPerMinute
})

/** Ours, managed, paced under the key's limits set on the target, batch calls in the batch lane. */
export const oursPaced: Contender = ours(
  "ours-paced",
  "ours-managed with the target's requests and tokens per minute set to the key's limits: the shipped `RateLimiter` (GCRA, a burst of 1 s) paces every attempt, which reserves its prompt and `max_tokens` and is settled with the usage reported; batch services' calls wait in the batch lane",
  "managed",
  keyLimits,
  {},
  { lanes: true }
)

/** Ours, paced, but every call in the interactive lane: what the lanes buy. */
export const oursPacedNoLanes: Contender = ours(
  "ours-paced-no-lanes",
  "ours-paced, but every call waits in the interactive lane (first come, first served), to isolate what the lanes do",
  "managed",
  keyLimits,
  {},
  { lanes: false }
)

/** Ours, managed, with no limits set: the limiter learns them from the provider's headers. */
export const oursPacedLearned: Contender = ours(
  "ours-paced-learned",
  "ours-managed as shipped, no limits set: the rate limiter learns them from the `x-ratelimit-limit-*` headers of the first answer, then paces as ours-paced, with lanes",
  "managed",
  () => ({}),
  {},
  { lanes: true }
)

/**
 * A fixed spacing of requests (Bottleneck's `minTime`): each attempt takes the next free slot, one
 * every `1000 / perSecond` ms, first come first served, and waits for it. A slot taken is spent,
 * whether or not the attempt waiting for it still runs.
 */
const spacing = (perSecond: number) =>
  Effect.map(EffectLine.currentClock, (clock) => {
    const gap = 1000 / perSecond
    let next = Number.NEGATIVE_INFINITY
    return <A, E>(attempt: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.suspend(() => {
        const now = EffectLine.nowMillis(clock)
        const slot = Math.max(now, next)
        next = slot + gap
        return slot > now ? Effect.andThen(Effect.sleep(Duration.millis(slot - now)), attempt) : attempt
      })
  })

/**
 * Our retry policy behind a Bottleneck-style limiter of requests per second (the key's requests per
 * minute over 60), which knows nothing of tokens or lanes.
 */
export const bottleneckRps: Contender = {
  name: "bottleneck-rps",
  description:
    "a Bottleneck-style limiter (`minTime` = 60 000 / requests per minute, first come first served, no token awareness, no lanes) in front of each attempt, inside ours-managed's retry policy",
  ours: false,
  make: (setting) =>
    Effect.gen(function*() {
      const caller = yield* oursManaged.make(setting)
      const spaced = yield* spacing((setting.rateLimit?.requestsPerMinute ?? Number.POSITIVE_INFINITY) / 60)
      return (attempt, deadlineMillis, call) => caller(spaced(attempt), deadlineMillis, call)
    })
}

/** Every policy of the standard comparison, ours first. */
export const all: ReadonlyArray<Contender> = [oursManaged, oursFixedCapacity, ...references]
