/**
 * A model provider in simulated time: a fixed number of slots, a service time per request and a
 * bounded queue, with incidents scripted on a timeline, (S6) an API key's requests- and
 * tokens-per-minute limits, and a cheap health endpoint for a probe (S2, S7).
 *
 * What makes it useful for storms is what real providers do and clients forget: a request whose
 * caller has given up (timed out, interrupted) is still queued and still served, burning a slot
 * and billing tokens for nobody. That wasted work is the sustaining effect of a metastable
 * failure: after the trigger is gone, a queue full of abandoned requests keeps every new request
 * waiting past its timeout, and retries keep the queue full.
 */
import { ProviderError } from "@resilient-ai/client/internal"
import { Failure } from "@resilient-ai/policy"
import { Attempts, EffectLine, Limiters } from "@resilient-ai/policy/internal"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { SimulatedClock } from "./Simulation.js"

/** Something that goes wrong for a while. Times are milliseconds of simulated time. */
export type Incident =
  /** A share of calls fail on every attempt (a poisoned shard, a bad prompt): a 500 after service. */
  | { readonly _tag: "FailingCalls"; readonly fromMillis: number; readonly toMillis: number; readonly share: number }
  /** Each attempt fails on its own with probability `share` (a flaky node behind a balancer): a retry mostly succeeds. */
  | {
    readonly _tag: "FailingAttempts"
    readonly fromMillis: number
    readonly toMillis: number
    readonly share: number
  }
  /**
   * No capacity at all. `hang`: requests are still accepted into the queue but nothing is served
   * (a wedged backend behind a live load balancer); `refuse`: every request gets a 503 at once.
   */
  | {
    readonly _tag: "Outage"
    readonly fromMillis: number
    readonly toMillis: number
    readonly mode: "hang" | "refuse"
  }
  /** Fewer slots for a while. */
  | { readonly _tag: "CapacityDrop"; readonly fromMillis: number; readonly toMillis: number; readonly slots: number }
  /** Every request arriving in the window gets a 429 with `Retry-After`. */
  | {
    readonly _tag: "RateLimitBurst"
    readonly fromMillis: number
    readonly toMillis: number
    readonly retryAfterMillis: number
  }

/** Settings of a simulated provider. */
export interface Options {
  /** Requests served at once. */
  readonly slots: number
  /** Time to serve one request. */
  readonly serviceMillis: number
  /** Requests waiting for a slot; more are refused with a 503. */
  readonly queueLimit: number
  readonly incidents?: ReadonlyArray<Incident> | undefined
  /** The key's limits, enforced as `KeyLimits` does. Without them, requests carry no tokens that count. */
  readonly rateLimit?: { readonly requestsPerMinute: number; readonly tokensPerMinute: number } | undefined
  /** Time to generate one completion token, added to `serviceMillis`. Default 0. */
  readonly millisPerToken?: number | undefined
  /** Time the health endpoint (`probe`) takes to answer while the provider is up. Default 20 ms. */
  readonly probeMillis?: number | undefined
}

/** The tokens of one request: its prompt, its `max_tokens`, and what the model will generate. */
export interface Tokens {
  readonly prompt: number
  readonly maxTokens: number
  readonly completion: number
}

/** What the provider saw, per time bucket. */
export interface Series {
  readonly bucketMillis: number
  /** Attempts that arrived. */
  readonly arrivals: Array<number>
  /** Attempts refused at once (queue full, outage, rate limit). */
  readonly refused: Array<number>
  /** Requests served whose caller had already gone. */
  readonly wasted: Array<number>
  /** Requests waiting or in service, sampled at the end of each bucket. */
  readonly load: Array<number>
}

/**
 * How the provider answers one attempt: with nothing, or, when the key's limits count it, with what
 * the client's transport reads from the answer (the key's limits, the usage) as the attempt's report.
 */
type Answer = Effect.Effect<
  void | Attempts.Answered<void>,
  Failure.Failure | Attempts.Reported<Failure.Failure>
>

interface Request {
  readonly call: number
  readonly tokens: Tokens | undefined
  /** The request's place among all the provider received: what an attempt's own failure is drawn from. */
  readonly serial: number
  readonly arrivedAt: number
  abandoned: boolean
  respond: ((effect: Answer) => void) | undefined
}

const bump = (series: Array<number>, index: number, by = 1) => {
  while (series.length <= index) series.push(0)
  series[index]! += by
}

/** A provider that serves requests in simulated time. */
export class Provider {
  private busy = 0
  private queue: Array<Request> = []
  private head = 0
  private readonly failingShare: (request: Request) => boolean
  private received = 0
  /** Arrivals per 10 ms slice, for spikes that a one-second bucket hides. */
  readonly slices: Array<number> = []
  readonly series: Series
  /** Requests served in all, and those served for nobody. */
  served = 0
  wasted = 0
  /** Requests refused with a 429 for the key's limits. */
  rateLimited = 0
  /** Requests to the health endpoint. */
  probes = 0
  private readonly limits: KeyLimits | undefined

  constructor(
    private readonly clock: SimulatedClock,
    readonly options: Options,
    bucketMillis = 1000
  ) {
    this.series = { bucketMillis, arrivals: [], refused: [], wasted: [], load: [] }
    this.limits = options.rateLimit === undefined
      ? undefined
      : new KeyLimits(options.rateLimit.requestsPerMinute, options.rateLimit.tokensPerMinute)
    const failing = (options.incidents ?? []).filter((incident) =>
      incident._tag === "FailingCalls" || incident._tag === "FailingAttempts"
    )
    // A call is failing or not for all its attempts (hash the call number, so every policy fails the
    // same calls), an attempt on its own (hash the request's serial, with another salt): no state.
    this.failingShare = ({ arrivedAt, call, serial }) =>
      failing.some((incident) =>
        arrivedAt >= incident.fromMillis && arrivedAt < incident.toMillis &&
        (incident._tag === "FailingCalls" ? hashUnit(call) : hashUnit(serial ^ 0x5bd1e995)) < incident.share
      )
    // Capacity that returns with time alone must start serving the queue when it does.
    for (const incident of options.incidents ?? []) {
      if (incident._tag === "Outage" || incident._tag === "CapacityDrop") {
        clock.schedule(incident.toMillis, () => this.pump())
      }
    }
  }

  private now(): number {
    return this.clock.currentMillis()
  }

  private bucket(at: number): number {
    return Math.floor(at / this.series.bucketMillis)
  }

  private active<T extends Incident["_tag"]>(tag: T, at: number): Extract<Incident, { _tag: T }> | undefined {
    for (const incident of this.options.incidents ?? []) {
      if (incident._tag === tag && at >= incident.fromMillis && at < incident.toMillis) {
        return incident as Extract<Incident, { _tag: T }>
      }
    }
    return undefined
  }

  /** Slots that can serve right now. */
  capacity(at: number = this.now()): number {
    const outage = this.active("Outage", at)
    if (outage !== undefined) return 0
    const drop = this.active("CapacityDrop", at)
    return drop === undefined ? this.options.slots : Math.min(this.options.slots, drop.slots)
  }

  /** Requests waiting or in service. */
  get inSystem(): number {
    return this.busy + (this.queue.length - this.head)
  }

  /**
   * One attempt of call `call`: it succeeds after service, or fails the way the provider says. With
   * `tokens`, the key's limits count it, and the answer's report says its usage and the key's
   * limits, as the client's transport reports them.
   */
  request(call: number, tokens?: Tokens): Answer {
    return EffectLine.callback<void | Attempts.Answered<void>, Failure.Failure | Attempts.Reported<Failure.Failure>>(
      (resume) => {
        const at = this.now()
        bump(this.series.arrivals, this.bucket(at))
        bump(this.slices, Math.floor(at / 10))
        const limits = this.limits
        if (limits !== undefined && tokens !== undefined && !limits.take(at, tokens)) {
          bump(this.series.refused, this.bucket(at))
          this.rateLimited++
          resume(limits.refusal(at, tokens))
          return
        }
        const burst = this.active("RateLimitBurst", at)
        if (burst !== undefined) {
          bump(this.series.refused, this.bucket(at))
          // `Retry-After` in whole seconds, as the header carries it: the time left in the window.
          const retryAfter = Math.ceil(Math.min(burst.retryAfterMillis, burst.toMillis - at) / 1000) * 1000
          resume(Effect.fail(new Failure.RateLimited({ status: 429, retryAfter: Duration.millis(retryAfter) })))
          return
        }
        const outage = this.active("Outage", at)
        if (outage?.mode === "refuse") {
          bump(this.series.refused, this.bucket(at))
          resume(Effect.fail(new Failure.Overloaded({ status: 503, detail: "outage" })))
          return
        }
        const request: Request = {
          call,
          tokens,
          serial: this.received++,
          arrivedAt: at,
          abandoned: false,
          respond: resume
        }
        if (this.busy < this.capacity(at) && this.head === this.queue.length) {
          this.start(request)
        } else if (this.queue.length - this.head < this.options.queueLimit) {
          this.queue.push(request)
        } else {
          bump(this.series.refused, this.bucket(at))
          resume(Effect.fail(new Failure.Overloaded({ status: 503, detail: "queue full" })))
          return
        }
        // The caller went away: the provider does not know, and serves the request anyway.
        return Effect.sync(() => {
          request.abandoned = true
          request.respond = undefined
        })
      }
    )
  }

  private start(request: Request): void {
    this.busy++
    const generating = (request.tokens?.completion ?? 0) * (this.options.millisPerToken ?? 0)
    this.clock.schedule(this.options.serviceMillis + generating, () => this.complete(request))
  }

  private complete(request: Request): void {
    this.busy--
    this.served++
    const at = this.now()
    const answered = request.tokens === undefined ? undefined : this.limits?.settle(at, request.tokens)
    if (request.abandoned) {
      this.wasted++
      bump(this.series.wasted, this.bucket(at))
    } else {
      const respond = request.respond!
      request.respond = undefined
      respond(
        this.failingShare(request)
          ? Effect.fail(new Failure.ServerError({ status: 500, detail: "failing call" }))
          : answered ?? Effect.void
      )
    }
    this.pump()
  }

  /**
   * A request to the health endpoint (a `GET /v1/models`). It is served apart from inference, as a
   * provider's model listing is: outside the slots and the queue, not counted against the key, not
   * in the series. So it answers at once while the model is merely overloaded, and only an outage
   * takes it down: a hanging one leaves it unanswered until capacity is back (the prober's timeout
   * decides), a refusing one answers 503.
   */
  probe(): Effect.Effect<void, Failure.Failure> {
    return EffectLine.callback<void, Failure.Failure>((resume) => {
      const at = this.now()
      this.probes++
      const outage = this.active("Outage", at)
      if (outage?.mode === "refuse") {
        resume(Effect.fail(new Failure.Overloaded({ status: 503, detail: "outage" })))
        return
      }
      const answerAt = (outage === undefined ? at : outage.toMillis) + (this.options.probeMillis ?? 20)
      return Effect.sync(this.clock.schedule(answerAt - at, () => resume(Effect.void)))
    })
  }

  /** Starts queued requests while there are free slots. */
  private pump(): void {
    const capacity = this.capacity()
    while (this.busy < capacity && this.head < this.queue.length) {
      const next = this.queue[this.head++]!
      this.start(next)
    }
    // Drop the served prefix now and then, so the queue does not grow without bound.
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head)
      this.head = 0
    }
  }

  /** Samples the requests in the system into the current bucket; call it once per bucket. */
  sampleLoad(): void {
    const index = this.bucket(this.now())
    while (this.series.load.length <= index) this.series.load.push(0)
    this.series.load[index] = Math.max(this.series.load[index]!, this.inSystem)
  }
}

/**
 * A bucket of one limit: refilled continuously at the limit's rate, holding one second of it at
 * most. Anthropic documents a token bucket whose capacity is replenished continuously; OpenAI and
 * Anthropic both document that a per-minute limit may be enforced over shorter intervals (60 000
 * requests a minute as 1 000 a second), so a burst of more than a second's worth is refused even
 * under the minute's limit.
 */
class Bucket {
  private level: number
  private at = 0

  constructor(readonly perMinute: number) {
    this.level = this.capacity
  }

  get capacity(): number {
    return this.perMinute / 60
  }

  /** What the bucket holds at `now`. */
  available(now: number): number {
    this.level = Math.min(this.capacity, this.level + ((now - this.at) * this.perMinute) / 60_000)
    this.at = now
    return this.level
  }

  /** Milliseconds from `now` until the bucket holds `amount`. */
  untilHolds(amount: number, now: number): number {
    return Math.max(0, ((amount - this.available(now)) * 60_000) / this.perMinute)
  }

  move(amount: number, now: number): void {
    this.level = Math.min(this.capacity, this.available(now) + amount)
  }

  /** The limit's headers, OpenAI's names: the limit, what is left, and when the bucket is full again (Go duration). */
  headers(kind: "requests" | "tokens", now: number): Record<string, string> {
    const left = Math.floor(this.available(now))
    return {
      [`x-ratelimit-limit-${kind}`]: `${this.perMinute}`,
      [`x-ratelimit-remaining-${kind}`]: `${Math.max(0, left)}`,
      [`x-ratelimit-reset-${kind}`]: `${(this.untilHolds(this.capacity, now) / 1000).toFixed(3)}s`
    }
  }
}

/**
 * An API key's limits, as the provider enforces them: a request is counted when it arrives, at its
 * prompt and its `max_tokens` (what OpenAI and Anthropic say they estimate a request at), refused
 * with a 429 if either bucket cannot hold it (a refused request takes nothing), and settled when it
 * is served: the tokens it did not generate go back.
 */
class KeyLimits {
  private readonly requests: Bucket
  private readonly tokens: Bucket

  constructor(requestsPerMinute: number, tokensPerMinute: number) {
    this.requests = new Bucket(requestsPerMinute)
    this.tokens = new Bucket(tokensPerMinute)
  }

  /** Takes the request's place if both buckets hold it. */
  take(now: number, tokens: Tokens): boolean {
    const reserved = tokens.prompt + tokens.maxTokens
    if (this.requests.available(now) < 1 || this.tokens.available(now) < reserved) return false
    this.requests.move(-1, now)
    this.tokens.move(-reserved, now)
    return true
  }

  private headers(now: number): Record<string, string> {
    return { ...this.requests.headers("requests", now), ...this.tokens.headers("tokens", now) }
  }

  /**
   * The 429, read by the client's own mapping of an error response: OpenAI's body, the limit headers,
   * and `retry-after` in whole seconds until the request would fit, as Anthropic sends it.
   */
  refusal(now: number, tokens: Tokens): Effect.Effect<never, Attempts.Reported<Failure.Failure>> {
    const waitRequests = this.requests.untilHolds(1, now)
    const waitTokens = this.tokens.untilHolds(tokens.prompt + tokens.maxTokens, now)
    const kind = waitTokens > waitRequests ? "tokens" : "requests"
    const headers = { ...this.headers(now), "retry-after": `${Math.ceil(Math.max(waitRequests, waitTokens) / 1000)}` }
    const failure = ProviderError.toFailure({
      status: 429,
      headers,
      body: { error: { message: `Rate limit reached for ${kind}`, type: kind, code: "rate_limit_exceeded" } }
    }, now)
    return Effect.fail(new Attempts.Reported(failure, told(headers)))
  }

  /** Gives back the tokens a served request did not generate; the answer reports its usage. */
  settle(now: number, tokens: Tokens): Effect.Effect<Attempts.Answered<void>> {
    this.tokens.move(tokens.maxTokens - tokens.completion, now)
    return Effect.succeed(new Attempts.Answered(undefined, told(this.headers(now), tokens.prompt + tokens.completion)))
  }
}

/** What the client's transport reads from an answer: the key's limits, and the usage. */
const told = (headers: Record<string, string>, used?: number): Attempts.Report => {
  const report = new Attempts.Report()
  const limits = Limiters.limitsOf((name) => headers[name])
  if (limits.requestsPerMinute !== undefined || limits.tokensPerMinute !== undefined) report.limits = limits
  report.usage = used
  return report
}

/**
 * A number in [0, 1) that depends only on `n`: which calls fail, or how long a call's completion is,
 * is the same for every policy.
 */
export const hashUnit = (n: number): number => {
  let x = (n + 0x9e3779b9) | 0
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b)
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35)
  x ^= x >>> 16
  return (x >>> 0) / 4294967296
}
