/**
 * One connection to the Redis a fleet shares, and what happens when it cannot be reached.
 *
 * Redis is an optimisation of the fleet's behaviour, never a dependency of a call: a decision waits
 * for Redis a short time, a disconnected client fails at once instead of queueing, and a decision
 * Redis does not answer in time is made in process (each process with its share of the fleet's
 * budget). A command the caller stopped waiting for never takes effect when it reaches Redis late:
 * every script carries the instant after which it is void, on Redis's own clock. When the
 * connection refuses commands or Redis stays silent, it is marked down and callers decide in process
 * until a probe a little later finds Redis back. Fallbacks are counted in a metric, and logged once
 * per transition, not once per call.
 *
 * The Redis may be one server or a Redis (or Valkey) Cluster: every script's keys carry one hash
 * tag per target and API key, so each runs on the node that owns that slot.
 */
import { Settings } from "@resilient-ai/policy"
import { Checked, EffectLine } from "@resilient-ai/policy/internal"
import type * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { Cluster, Redis } from "ioredis"
import { hostname } from "node:os"
import {
  type CheckedOptions,
  ConnectionSettings,
  decodeSettings,
  urlsOf,
  variables
} from "./internal/connectionSettings.js"

/** Settings of the connection. */
export interface Options {
  /**
   * `redis://[user:password@]host:port[/db]` or `rediss://…`; kept `Redacted`, it may hold a
   * password. A Redis Cluster's seed nodes, one or several separated by commas
   * (`redis://10.0.0.1:6379,redis://10.0.0.2:6379`): the client finds the others from them.
   */
  readonly url: Redacted.Redacted
  /**
   * Whether `url` names a Redis Cluster. Default: when it names several nodes. Set it for a
   * cluster given by one seed node.
   */
  readonly cluster?: boolean | undefined
  /** Prepended to every key, so several applications can share one Redis. Default `resilient-ai`. */
  readonly keyPrefix?: string | undefined
  /**
   * How long a decision waits for Redis before it is made in process instead. Default 50 ms. A
   * command Redis receives later than this after it was sent never takes effect (see `decide`);
   * the wait is longer by twice the error of the connection's reading of Redis's clock.
   */
  readonly commandTimeout?: EffectLine.DurationInput | undefined
  /** How long after Redis was found unreachable before it is tried again. Default 1 second. */
  readonly retryAfter?: EffectLine.DurationInput | undefined
  /**
   * How many processes share a target at least. A process deciding alone while Redis cannot
   * answer spends `1 / fleet size` of a budget's floor; the size is learned from Redis (the
   * processes that decided there lately) when that is larger. Default 1: set it when processes
   * may start while Redis is unreachable and so have never learned it.
   */
  readonly fleetSize?: number | undefined
}

/** Whether Redis answered lately, and when to try it again if not. */
export type Health = { readonly _tag: "up" } | {
  readonly _tag: "down"
  readonly since: number
  readonly retryAt: number
}

/** The client of one Redis server, or of a Redis Cluster. */
export type Client = Redis | Cluster

/** The shared connection. */
export interface Service {
  readonly client: Client
  readonly keyPrefix: string
  /** This connection's name among a fleet's members: the fleet's size is learned from them. */
  readonly member: string
  /** The `fleetSize` setting: the least fleet size a process assumes. */
  readonly fleetSize: number
  /**
   * Runs `command` on Redis, or `fallback` when Redis is down or does not answer within the
   * command timeout. Never fails: a decision is always made somewhere.
   *
   * `command` is given the instant, on Redis's own clock (epoch ms, compare with `TIME`), after
   * which its script must not take effect and must answer nil: by then the caller has stopped
   * waiting and decided in process, so a command that reaches a stalled Redis late can take no
   * permit and count no retry. If an answer that did take effect still arrives after the caller
   * stopped waiting (only a clock estimate off by more than its bound allows), `late` undoes it.
   */
  readonly decide: <A>(
    operation: string,
    command: (voidAfter: number) => Promise<A | null>,
    fallback: Effect.Effect<A>,
    late?: ((answer: A) => void) | undefined
  ) => Effect.Effect<A>
  /**
   * Sends a command whose effect is wanted however late it arrives (giving a lease back): waits
   * for it at most the command timeout, and sends it again once Redis is back if the connection
   * could not take it, closing included. Never fails.
   */
  readonly tell: (command: () => Promise<unknown>) => Effect.Effect<void>
  readonly health: Effect.Effect<Health>
}

/** The Redis connection of the fleet. */
export class RedisConnection
  extends EffectLine.Service<RedisConnection, Service>()("@resilient-ai/redis/RedisConnection")
{}

/** Decisions made in process because Redis could not be used, tagged by `operation` (budget, gate, limiter). */
export const fallbacks = Metric.counter("resilient_ai_redis_fallbacks_total", {
  description: "budget, gate and rate limiter decisions made in process because Redis was unreachable or slow",
  incremental: true
})

/** The commands kept to send again once Redis is back, at most. */
const remembered = 4_096

/** How often closing sends again what Redis has not taken yet. */
const closingPauseMillis = 50

const sleep = (millis: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, millis))

/** Settles when `promise` does, or after `millis`, whichever is first. */
const within = (promise: Promise<unknown>, millis: number): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, millis)
    promise.then(() => {
      clearTimeout(timer)
      resolve()
    }, () => {
      clearTimeout(timer)
      resolve()
    })
  })

/** Resolves `true` once `client` is ready, `false` if it is not within `millis`. */
const readyWithin = (client: Client, millis: number): Promise<boolean> =>
  client.status === "ready" ? Promise.resolve(true) : new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer)
      client.off("ready", onReady)
      resolve(ready)
    }
    const onReady = () => done(true)
    const timer = setTimeout(() => done(false), millis)
    client.once("ready", onReady)
  })

/** This host's wall clock in fractional milliseconds: Redis's `TIME` is compared with it. */
const wallClock = (): number => performance.timeOrigin + performance.now()

/**
 * Where Redis's clock is relative to this host's: `offset` (Redis minus local, ms), known to within
 * `error` when it was measured at `at`. Clocks drift, so the bound widens with age.
 */
interface ClockEstimate {
  readonly offset: number
  readonly error: number
  readonly at: number
}

// A generous drift between two hosts' clocks: 100 µs per second (NTP keeps them far closer).
const driftPerMilli = 1e-4

const errorOf = (estimate: ClockEstimate, now: number): number => estimate.error + (now - estimate.at) * driftPerMilli

/** One reading of Redis's `TIME`, bracketed by this host's clock. */
const readClock = async (client: Redis): Promise<ClockEstimate> => {
  const sent = wallClock()
  const [seconds, micros] = await client.time()
  const received = wallClock()
  const redisMillis = Number(seconds) * 1000 + Number(micros) / 1000
  return { offset: redisMillis - (sent + received) / 2, error: (received - sent) / 2, at: received }
}

/** The outcome of asking Redis once. */
type Asked<A> =
  | { readonly _tag: "answered"; readonly value: A }
  /** Redis said the command came too late to take effect (it answered nil). */
  | { readonly _tag: "void" }
  /** No answer within the timeout; the command may still be answered later. */
  | { readonly _tag: "timedOut"; readonly silentFor: number }
  /** The connection refused or failed the command. */
  | { readonly _tag: "failed"; readonly error: unknown }

/** A Redis Cluster's client on its seed nodes; the first URL's credentials and TLS are every node's. */
const clusterClient = (urls: ReadonlyArray<string>, connectTimeoutMillis: number): Cluster => {
  const first = new URL(urls[0]!)
  return new Cluster(
    urls.map((url) => {
      const { hostname, port } = new URL(url)
      return { host: hostname.replace(/^\[|\]$/g, ""), port: Number(port || 6379) }
    }),
    {
      // As for one server: fail at once while the cluster is unreachable, rather than queue.
      enableOfflineQueue: false,
      clusterRetryStrategy: (times) => Math.min(times * 100, 1_000),
      slotsRefreshTimeout: connectTimeoutMillis,
      // A node that restarts takes its slots with it for a moment: a command for them is retried
      // briefly by the client, while the caller has long decided in process.
      retryDelayOnFailover: 100,
      redisOptions: {
        ...(first.username === "" ? {} : { username: decodeURIComponent(first.username) }),
        ...(first.password === "" ? {} : { password: decodeURIComponent(first.password) }),
        ...(first.protocol === "rediss:" ? { tls: {} } : {}),
        connectTimeout: connectTimeoutMillis,
        maxRetriesPerRequest: 0
      },
      lazyConnect: false
    }
  )
}

/** The servers whose clocks a script may run on: a cluster's masters, or the one server. */
const clocksOf = (client: Client): ReadonlyArray<Redis> => client instanceof Cluster ? client.nodes("master") : [client]

/**
 * Opens the connection (closed with the scope), waiting for it a bounded time (four command timeouts,
 * at least 500 ms); closing waits as long at most for Redis to take what it was told while away.
 * Redis being unreachable now is not an error: the connection starts down and keeps reconnecting
 * in the background. Bad settings fail with `InvalidSettings` naming them.
 *
 * Falling back is a judgement about the connection, not about one slow reply. A reply that is late
 * makes that one decision in process; Redis is marked down (and not asked again for `retryAfter`)
 * only when the connection refuses commands or Redis has answered nothing at all for two command
 * timeouts while commands waited. Before giving up on a command, the connection reads what the
 * socket already holds: a process whose own event loop was busy does not blame Redis for it.
 */
export const make = (options: Options): Effect.Effect<Service, Settings.InvalidSettings, Scope.Scope> =>
  Effect.flatMap(decodeSettings(options), makeChecked)

const makeChecked = (options: CheckedOptions): Effect.Effect<Service, never, Scope.Scope> => {
  const commandTimeoutMillis = Duration.toMillis(options.commandTimeout)
  const retryAfterMillis = Duration.toMillis(options.retryAfter)
  const connectTimeoutMillis = Math.max(500, commandTimeoutMillis * 4)
  const silenceMillis = 2 * commandTimeoutMillis
  return Effect.gen(function*() {
    const clock = yield* EffectLine.currentClock
    const urls = urlsOf(options.url)
    const client: Client = yield* Effect.acquireRelease(
      Effect.sync((): Client =>
        urls.length > 1 || options.cluster === true
          ? clusterClient(urls, connectTimeoutMillis)
          : new Redis(urls[0]!, {
            connectTimeout: connectTimeoutMillis,
            // Fail at once while disconnected: a queued command would block the call it decides for.
            enableOfflineQueue: false,
            maxRetriesPerRequest: 0,
            retryStrategy: (times) => Math.min(times * 100, 1_000),
            lazyConnect: false
          })
      ),
      // A graceful QUIT lets the commands still on their way (a lease given back) finish, as long as
      // Redis answers; a silent one is not waited for longer than a command.
      (client) =>
        Effect.promise(() =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, commandTimeoutMillis)
            client.quit().then(() => clearTimeout(timer), () => {}).finally(resolve)
          }).then(() => client.disconnect())
        )
    )
    // Connection errors are handled by falling back; unhandled, ioredis would print each one.
    client.on("error", () => {})
    const now = () => EffectLine.nowMillis(clock)

    // Redis's clock, read at every (re)connection and every few seconds: a command's void-after
    // instant is set on it, so hosts need not agree on the time. A cluster's script runs on the node
    // that owns its keys, so each master's clock is read, and a command is void on all of them by
    // the time its caller stops waiting.
    const estimates = new Map<string, ClockEstimate>()
    const measureClock = () =>
      Promise.allSettled(
        clocksOf(client).map(async (node) => {
          const name = `${node.options.host}:${node.options.port}`
          for (let reading = 0; reading < 3; reading++) {
            const read = await readClock(node)
            const known = estimates.get(name)
            if (known === undefined || read.error <= errorOf(known, read.at)) estimates.set(name, read)
          }
        })
      ).then(() => {
        if (estimates.size === 0) throw new Error("no clock read")
      })
    const remeasure = () => {
      if (client.status === "ready") measureClock().catch(() => {})
    }
    client.on("ready", remeasure)
    client.on("+node", remeasure)
    const clockTimer = setInterval(remeasure, 10_000)
    clockTimer.unref()
    yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(clockTimer)))
    /**
     * The clocks as one estimate: the earliest of them, and the widest error. A command is then void
     * on every node by `voidAfter` (a node whose clock runs ahead voids it a little sooner), and a
     * command that took effect is answered within the wait.
     */
    const clockAt = (now: number): ClockEstimate | undefined => {
      let combined: ClockEstimate | undefined
      for (const known of estimates.values()) {
        const error = errorOf(known, now)
        combined = combined === undefined
          ? { offset: known.offset, error, at: now }
          : { offset: Math.min(combined.offset, known.offset), error: Math.max(combined.error, error), at: now }
      }
      return combined
    }

    // The first decisions should be the fleet's: wait for the connection, a bounded time, on
    // Node's timers (not Effect's clock, which a TestClock would hold still).
    const ready = yield* Effect.promise(() =>
      readyWithin(client, connectTimeoutMillis).then((ready) =>
        ready ? measureClock().then(() => true, () => false) : false
      )
    )
    let health: Health = ready ? { _tag: "up" } : { _tag: "down", since: now(), retryAt: now() }
    if (!ready) {
      yield* Effect.logWarning("Redis unreachable at start: deciding in process until it is back")
    }

    // Redis is silent when commands wait and none is answered: since the first was sent, or since
    // the last answer.
    let waitingCommands = 0
    let silentSince = 0
    const heard = () => {
      waitingCommands--
      silentSince = wallClock()
    }

    /**
     * Sends `command` and waits for it until its time is up, then once more for whatever the
     * socket already holds (a poll of the event loop runs before `setImmediate` callbacks), so a
     * reply that came in while this process was busy is still taken.
     */
    const ask = <A>(
      command: (voidAfter: number) => Promise<A | null>,
      late: ((answer: A) => void) | undefined
    ): Promise<Asked<A>> =>
      new Promise((resolve) => {
        const sent = wallClock()
        const known = clockAt(sent)
        // Without Redis's clock no command can say when it stops counting: decide in process.
        if (known === undefined) {
          remeasure()
          return resolve({ _tag: "void" })
        }
        // Redis voids the command one command timeout after it was sent, on Redis's clock as far
        // as it is known; this process waits that long plus twice the estimate's error (and a
        // millisecond), so a command that took effect is always answered while it still waits. An
        // estimate made on a busy machine makes the wait a little longer, not the command void.
        const voidAfter = sent + known.offset + commandTimeoutMillis
        const waitMillis = commandTimeoutMillis + 2 * errorOf(known, sent) + 1
        let waiting = true
        if (waitingCommands++ === 0) silentSince = sent
        const settle = (asked: Asked<A>) => {
          if (!waiting) return
          waiting = false
          clearTimeout(timer)
          resolve(asked)
        }
        const timer = setTimeout(
          () => setImmediate(() => settle({ _tag: "timedOut", silentFor: wallClock() - silentSince })),
          waitMillis
        )
        command(voidAfter).then(
          (value) => {
            heard()
            if (waiting) settle(value === null ? { _tag: "void" } : { _tag: "answered", value })
            else if (value !== null) late?.(value)
          },
          (error) => {
            heard()
            settle({ _tag: "failed", error })
          }
        )
      })

    const markDown = (operation: string, cause: string): Effect.Effect<void> => {
      if (health._tag === "down") {
        health = { _tag: "down", since: health.since, retryAt: now() + retryAfterMillis }
        return Effect.void
      }
      health = { _tag: "down", since: now(), retryAt: now() + retryAfterMillis }
      return Effect.logWarning("Redis unreachable: deciding in process until it is back").pipe(
        Effect.annotateLogs({ operation, cause })
      )
    }
    const markUp: Effect.Effect<void> = Effect.suspend(() => {
      if (health._tag === "up") return Effect.void
      const downFor = now() - health.since
      health = { _tag: "up" }
      return Effect.logInfo("Redis is back: deciding on Redis again").pipe(Effect.annotateLogs({ downForMs: downFor }))
    })
    // One counter per operation, tagged once: counting a fallback then makes no metric key.
    const fallbacksOf = new Map<string, EffectLine.Counter>()
    const countFallback = (operation: string) => {
      let counter = fallbacksOf.get(operation)
      if (counter === undefined) {
        counter = EffectLine.tagged(fallbacks, { operation })
        fallbacksOf.set(operation, counter)
      }
      EffectLine.update(counter, 1, EffectLine.noMetricScope)
    }

    const decide: Service["decide"] = (operation, command, fallback, late) =>
      Effect.suspend(() => {
        if (health._tag === "down" && now() < health.retryAt) {
          countFallback(operation)
          return fallback
        }
        return Effect.flatMap(Effect.promise(() => ask(command, late)), (asked) => {
          if (asked._tag === "answered") {
            // A cluster's node that restarted reconnects without the client's "ready": an answer
            // from Redis is the sign to send what it could not take.
            if (resend.length > 0) sendAgain()
            return Effect.as(markUp, asked.value)
          }
          countFallback(operation)
          if (asked._tag === "failed") {
            const cause = asked.error instanceof Error ? asked.error.message : String(asked.error)
            return Effect.andThen(markDown(operation, cause), fallback)
          }
          if (asked._tag === "timedOut" && asked.silentFor >= silenceMillis) {
            return Effect.andThen(markDown(operation, `no answer for ${Math.round(asked.silentFor)} ms`), fallback)
          }
          return fallback
        })
      })

    // Commands to send again once the connection is back: it could not take them, or it failed
    // before answering them. They are tried again on the client's "ready", on any answer from
    // Redis, and every `retryAfter` while some wait: a cluster's node that restarted comes back
    // without the first, and a process whose last call is over sends no command for the second.
    const resend: Array<() => Promise<unknown>> = []
    // Sent and not answered yet: closing waits for them.
    const unanswered = new Set<Promise<void>>()
    let resendTimer: ReturnType<typeof setTimeout> | undefined
    let closing = false
    const keep = (command: () => Promise<unknown>) => {
      resend.push(command)
      // Bounded through a long outage: what is dropped (the oldest) is a lease that expires anyway.
      if (resend.length > remembered) resend.shift()
      if (!closing) resendTimer ??= setTimeout(sendAgain, retryAfterMillis).unref()
    }
    const send = (command: () => Promise<unknown>): Promise<void> => {
      const sent: Promise<void> = command().then(
        () => {
          unanswered.delete(sent)
          // Redis took this one: it is back for those it could not take.
          if (resend.length > 0 && !closing) sendAgain()
        },
        () => {
          unanswered.delete(sent)
          keep(command)
        }
      )
      unanswered.add(sent)
      return sent
    }
    const sendAgain = () => {
      clearTimeout(resendTimer)
      resendTimer = undefined
      for (const command of resend.splice(0)) void send(command)
    }
    client.on("ready", sendAgain)
    // A process that stops gives back what it holds: a lease left on Redis would keep a permit from
    // the fleet until it expires. What Redis has not taken is sent until it is, or until four
    // command timeouts (at least 500 ms) have passed: a Redis that is away does not hold up the exit.
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        closing = true
        clearTimeout(resendTimer)
        const until = wallClock() + connectTimeoutMillis
        while ((resend.length > 0 || unanswered.size > 0) && wallClock() < until) {
          if (resend.length > 0 && client.status === "ready") sendAgain()
          const pause = Math.min(closingPauseMillis, until - wallClock())
          await (unanswered.size > 0 ? within(Promise.all(unanswered), pause) : sleep(pause))
        }
      })
    )
    /** Waits for a command at most the command timeout; the command itself goes on. */
    const tell: Service["tell"] = (command) => Effect.promise(() => within(send(command), commandTimeoutMillis))

    return {
      client,
      keyPrefix: options.keyPrefix,
      fleetSize: options.fleetSize,
      member: `${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 10)}`,
      decide,
      tell,
      health: Effect.sync(() => health)
    }
  })
}

/** Provides `RedisConnection`. */
export const layer = (options: Options): Layer.Layer<RedisConnection, Settings.InvalidSettings> =>
  EffectLine.layerScoped(RedisConnection, make(options))

/**
 * Settings read under `prefix` (default `REDIS`): `{prefix}_URL` (required; a cluster's seed nodes
 * comma-separated), `_CLUSTER` (true or false), `_KEY_PREFIX`,
 * `_COMMAND_TIMEOUT` and `_RETRY_AFTER` (milliseconds, or a duration such as "50 millis"),
 * `_FLEET_SIZE` (a whole number), with the rules of the options object. Bad values are one
 * `ConfigError` naming each variable and its rule, when the layer is built.
 */
export const config = (prefix = "REDIS"): Config.Config<Options> =>
  Checked.config(ConnectionSettings, { prefix, variables, subject: "redis" })

/** Provides `RedisConnection` from `config(prefix)`. */
export const layerConfig = (prefix?: string): Layer.Layer<RedisConnection, EffectLine.ConfigError> =>
  EffectLine.layerScoped(RedisConnection, Effect.flatMap(config(prefix), (options) => Effect.orDie(make(options))))
