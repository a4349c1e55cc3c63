/**
 * One process of a fleet, for the fleet and lease tests: started as a separate OS process by
 * `process.ts`, told what to do by one JSON argument, it reports on stdout as JSON lines.
 *
 * - `calls`: makes `calls` chat calls (or calls until its stdin ends), `concurrency` at a time,
 *   through a managed target whose budget and gate live on Redis (`coordination: "redis"`) or in
 *   this process (`"memory"`), and reports how each call ended and how many decisions fell back to
 *   the process.
 * - `hold`: takes `permits` permits of a Redis gate, says so, and holds them until it is killed.
 */
import { logfmtTo, replaceDefaultLogger } from "#test-line"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { ModelClient, Target } from "@resilient-ai/client"
import { EffectLine, Meters } from "@resilient-ai/policy/internal"
import { RedisConnection, RedisCoordination } from "@resilient-ai/redis"
import { RedisGate } from "@resilient-ai/redis/internal"
import { Effect, Layer, Redacted } from "effect"
import { canary } from "../../canary.js"

export type Task =
  | {
    readonly _tag: "calls"
    readonly faultUrl: string
    readonly redisUrl: string
    readonly keyPrefix: string
    readonly coordination: "redis" | "memory"
    /** How many calls; or calls until the member's stdin ends, for a run as long as the test needs. */
    readonly calls: number | "until stdin ends"
    readonly concurrency: number
    /** The connection's command timeout; the connection's own default (50 ms) when absent. */
    readonly commandTimeout?: EffectLine.DurationInput | undefined
    /** The fleet size the member assumes until Redis tells it (`_FLEET_SIZE`); 1 when absent. */
    readonly fleetSize?: number | undefined
    /** The target's limits per minute (`_REQUESTS_PER_MINUTE`, `_TOKENS_PER_MINUTE`); none when absent. */
    readonly rateLimit?: { readonly requestsPerMinute: number; readonly tokensPerMinute: number } | undefined
    /** What each call says: `hello` when absent. */
    readonly content?: string | undefined
    /** Each call's `max_tokens`, reserved with its prompt and settled with the usage the server reports. */
    readonly maxTokens?: number | undefined
  }
  | {
    readonly _tag: "hold"
    readonly redisUrl: string
    readonly keyPrefix: string
    readonly target: string
    readonly limit: number
    readonly permits: number
    readonly leaseTimeMillis: number
  }

/** What a `calls` member reports when it is done. */
export interface CallsReport {
  readonly _tag: "done"
  readonly pid: number
  readonly made: number
  readonly succeeded: number
  readonly failed: Readonly<Record<string, number>>
  readonly fallbacks: number
  /** The rate limiter's decisions made in process. */
  readonly limiterFallbacks: number
  /** The calls' time, each from its start to its end, added up. */
  readonly callMillis: number
  /** Of that, the time attempts waited for their turn in the key's pace (`resilient_ai_paced_wait_seconds`). */
  readonly pacedMillis: number
}

const task = JSON.parse(process.argv[2] ?? "{}") as Task
const say = (line: object) => Effect.sync(() => process.stdout.write(`${JSON.stringify(line)}\n`))

const connection = (
  redisUrl: string,
  keyPrefix: string,
  commandTimeout?: EffectLine.DurationInput,
  fleetSize?: number
) => RedisConnection.layer({ url: Redacted.make(redisUrl), keyPrefix, commandTimeout, fleetSize })

/** The fleet's target and model: every process calls the same name with the same key, so they share. */
const fleetName = "fleet-llm"
const fleetModel = "fleet-model"

/** The fleet test's target. */
const fleetTarget = (faultUrl: string, rateLimit: Extract<Task, { _tag: "calls" }>["rateLimit"]) =>
  Target.managed({
    ...rateLimit,
    name: fleetName,
    baseUrl: faultUrl,
    model: fleetModel,
    apiKey: Redacted.make(canary),
    maxAttempts: 3,
    baseDelay: "1 millis",
    maxDelay: "5 millis",
    hintSpread: "5 millis",
    attemptTimeout: "5 seconds",
    // The whole floor, whatever the retries did: the test counts how the fleet shares it.
    budget: { ratio: 0.1, minPerSecond: 0.5, shareWhenRetriesFail: 1 }
  })

/**
 * The seconds attempts waited for the key's pace, by the toolkit's histogram of the fleet's target
 * (`resilient_ai_paced_wait_seconds`; the member tags no metrics of its own).
 */
const pacedSeconds = Effect.sync(() => EffectLine.histogramState(Meters.forTarget(fleetName, fleetModel).pacedWait).sum)

const calls = (task: Extract<Task, { _tag: "calls" }>) => {
  const coordination = task.coordination === "redis"
    ? RedisCoordination.layer().pipe(
      Layer.provide(connection(task.redisUrl, task.keyPrefix, task.commandTimeout, task.fleetSize))
    )
    : Layer.empty
  const client = ModelClient.layer(fleetTarget(task.faultUrl, task.rateLimit)).pipe(
    Layer.provide(coordination),
    Layer.provide(NodeHttpClient.layerUndici)
  )
  return Effect.gen(function*() {
    const model = yield* ModelClient.ModelClient
    const failed: Record<string, number> = {}
    let succeeded = 0
    let made = 0
    let callMillis = 0
    let stdinOpen = true
    if (task.calls === "until stdin ends") {
      process.stdin.on("end", () => (stdinOpen = false)).resume()
    }
    const another = () => task.calls === "until stdin ends" ? stdinOpen : made < task.calls
    const worker: Effect.Effect<void> = Effect.suspend(() => {
      if (!another()) return Effect.void
      made++
      const started = performance.now()
      return model.chat({ messages: [{ role: "user", content: task.content ?? "hello" }], max_tokens: task.maxTokens })
        .pipe(
          Effect.match({
            onSuccess: () => void succeeded++,
            onFailure: (failure) => void (failed[failure.reason] = (failed[failure.reason] ?? 0) + 1)
          }),
          Effect.tap(() => Effect.sync(() => void (callMillis += performance.now() - started))),
          Effect.andThen(worker)
        )
    })
    yield* Effect.all(Array.from({ length: task.concurrency }, () => worker), {
      concurrency: "unbounded",
      discard: true
    })
    const fallbacksOf = (operation: string) =>
      Effect.sync(() => EffectLine.counted(EffectLine.tagged(RedisConnection.fallbacks, { operation })))
    yield* say(
      {
        _tag: "done",
        pid: process.pid,
        made,
        succeeded,
        failed,
        fallbacks: yield* fallbacksOf("budget"),
        limiterFallbacks: yield* fallbacksOf("limiter"),
        callMillis,
        pacedMillis: 1_000 * (yield* pacedSeconds)
      } satisfies CallsReport
    )
  }).pipe(Effect.provide(client))
}

const hold = (task: Extract<Task, { _tag: "hold" }>) =>
  Effect.gen(function*() {
    const gate = yield* RedisGate.make({
      target: task.target,
      limit: task.limit,
      mode: "shed",
      leaseTime: task.leaseTimeMillis
    })
    yield* Effect.replicateEffect(gate.acquire(Number.POSITIVE_INFINITY), task.permits)
    yield* say({ _tag: "held", pid: process.pid, permits: task.permits })
    return yield* Effect.never
  }).pipe(Effect.provide(connection(task.redisUrl, task.keyPrefix, "5 seconds")))

const program = task._tag === "calls" ? calls(task) : hold(task)

// Log lines go to stderr, which the test scans for the key; stdout carries only the reports.
const logger = replaceDefaultLogger(logfmtTo((line) => void process.stderr.write(`${line}\n`)))
Effect.runPromiseExit(program.pipe(Effect.provide(logger))).then((exit) => {
  if (exit._tag === "Failure") {
    process.stderr.write(`member failed: ${String(exit.cause)}\n`)
    process.exitCode = 1
  }
})
