/**
 * A model provider in simulated time: a fixed number of slots, a service time per request and a
 * bounded queue, with incidents scripted on a timeline.
 *
 * What makes it useful for storms is what real providers do and clients forget: a request whose
 * caller has given up (timed out, interrupted) is still queued and still served, burning a slot
 * and billing tokens for nobody. That wasted work is the sustaining effect of a metastable
 * failure: after the trigger is gone, a queue full of abandoned requests keeps every new request
 * waiting past its timeout, and retries keep the queue full.
 */
import { Failure } from "@resilient-ai/policy"
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

interface Request {
  readonly call: number
  /** The request's place among all the provider received: what an attempt's own failure is drawn from. */
  readonly serial: number
  readonly arrivedAt: number
  abandoned: boolean
  respond: ((effect: Effect.Effect<void, Failure.Failure>) => void) | undefined
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

  constructor(
    private readonly clock: SimulatedClock,
    readonly options: Options,
    bucketMillis = 1000
  ) {
    this.series = { bucketMillis, arrivals: [], refused: [], wasted: [], load: [] }
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
    return this.clock.unsafeCurrentTimeMillis()
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

  /** One attempt of call `call`: it succeeds after service, or fails the way the provider says. */
  request(call: number): Effect.Effect<void, Failure.Failure> {
    return Effect.async<void, Failure.Failure>((resume) => {
      const at = this.now()
      bump(this.series.arrivals, this.bucket(at))
      bump(this.slices, Math.floor(at / 10))
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
      const request: Request = { call, serial: this.received++, arrivedAt: at, abandoned: false, respond: resume }
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
    })
  }

  private start(request: Request): void {
    this.busy++
    this.clock.schedule(this.options.serviceMillis, () => this.complete(request))
  }

  private complete(request: Request): void {
    this.busy--
    this.served++
    const at = this.now()
    if (request.abandoned) {
      this.wasted++
      bump(this.series.wasted, this.bucket(at))
    } else {
      const respond = request.respond!
      request.respond = undefined
      respond(
        this.failingShare(request)
          ? Effect.fail(new Failure.ServerError({ status: 500, detail: "failing call" }))
          : Effect.void
      )
    }
    this.pump()
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

/** A number in [0, 1) that depends only on `n`: which calls fail is the same for every policy. */
const hashUnit = (n: number): number => {
  let x = (n + 0x9e3779b9) | 0
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b)
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35)
  x ^= x >>> 16
  return (x >>> 0) / 4294967296
}
