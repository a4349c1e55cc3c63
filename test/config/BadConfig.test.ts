/**
 * Bad configuration: every invalid setting of a target or of the Redis connection fails the layer
 * with a `ConfigError` that names the variable and the rule it breaks, never shows a secret, and
 * fails before any traffic — the fault server sees no request, the Redis port no connection.
 */
import { emptyVariableIsUnset, isConfigError, withEnvironment } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { ModelClient, Target } from "@resilient-ai/client"
import { ConcurrencyGate, Coordination, Resilient, RetryBudget, Settings } from "@resilient-ai/policy"
import { EffectLine } from "@resilient-ai/policy/internal"
import { RedisConnection, RedisCoordination } from "@resilient-ai/redis"
import { RedisBudget, RedisGate } from "@resilient-ai/redis/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Cause, Duration, Effect, Exit, Layer, Option, Redacted } from "effect"
import type { Scope } from "effect"
import * as Net from "node:net"
import { canary } from "../canary.js"
import { failureOf, HttpLive, quiet } from "../client/support.js"

const withEnv = (env: Record<string, string>) => withEnvironment(env)

/**
 * Asserts `exit` is a `ConfigError` (not a defect) whose message names every one of `names` and
 * says `rule`, and holds none of `secrets`; returns the message.
 */
const refusal = (
  exit: Exit.Exit<unknown, unknown>,
  names: ReadonlyArray<string>,
  rule: string,
  secrets: ReadonlyArray<string>
): string => {
  assert.isTrue(Exit.isFailure(exit), "the layer was built")
  if (Exit.isSuccess(exit)) return ""
  assert.isFalse(EffectLine.hasDefect(exit.cause), `a defect, not a ConfigError: ${Cause.pretty(exit.cause)}`)
  const failure = EffectLine.failureOf(exit.cause)
  assert.isTrue(Option.isSome(failure) && isConfigError(failure.value), Cause.pretty(exit.cause))
  const message = String(Option.getOrThrow(failure))
  for (const name of names) assert.include(message, name)
  assert.include(message, rule)
  const rendered = Cause.pretty(exit.cause, { renderErrorCause: true })
  for (const secret of secrets) {
    assert.notInclude(message, secret)
    assert.notInclude(rendered, secret)
  }
  return message
}

/**
 * Asserts `exit` failed (not died) with an error of class `error` that holds none of `secrets`;
 * returns its message.
 */
const refusedWith = (
  exit: Exit.Exit<unknown, unknown>,
  error: new(...args: Array<any>) => { readonly message: string },
  secrets: ReadonlyArray<string>
): string => {
  assert.isTrue(Exit.isFailure(exit), "built, though its settings cannot work")
  if (Exit.isSuccess(exit)) return ""
  assert.isFalse(EffectLine.hasDefect(exit.cause), `a defect, not a typed error: ${Cause.pretty(exit.cause)}`)
  const failure = Option.getOrUndefined(EffectLine.failureOf(exit.cause))
  assert.instanceOf(failure, error, Cause.pretty(exit.cause))
  const message = (failure as { readonly message: string }).message
  const rendered = Cause.pretty(exit.cause, { renderErrorCause: true })
  for (const secret of secrets) {
    assert.notInclude(message, secret)
    assert.notInclude(rendered, secret)
  }
  return message
}

/** Lets a connection or request that was started anyway arrive before counting. */
const settle = Effect.sleep(Duration.millis(10))

/** One bad setting: the variable after the prefix, its value (`undefined`: unset), the rule the message states. */
interface Case {
  readonly variable: string
  readonly value: string | undefined
  readonly rule: string
  /** Other settings the case needs, after the prefix. */
  readonly with?: Readonly<Record<string, string>> | undefined
  /** Other variables, after the prefix, that the message must name too (the other side of a rule). */
  readonly alsoNamed?: ReadonlyArray<string> | undefined
}

/** The rule every reader states for a duration it cannot read, and for one below zero. */
const durationRule = "must be a duration such as"
const negativeRule = "must not be negative"

/**
 * The bad values of a duration setting, the same for every component that reads one (each reads
 * it with `Checked.duration`): text that is no duration, a negative one, and, when `zeroRule` is
 * given, zero.
 */
const badDurations = (variable: string, zeroRule?: string): ReadonlyArray<Case> => [
  ...["soon", "30s", "NaN", "Infinity", ""].map((value) => ({ variable, value, rule: durationRule })),
  ...["-5 seconds", "-100"].map((value) => ({ variable, value, rule: negativeRule })),
  ...(zeroRule === undefined ? [] : ["0", "0 seconds", "0.0"].map((value) => ({ variable, value, rule: zeroRule })))
]

/** The name of a case's test: the variable, its value (or that it is unset) and the rule. */
const nameOf = (prefix: string, { rule, value, variable }: Case) =>
  `${prefix}_${variable} ${value === undefined ? "unset" : JSON.stringify(value)}: ${rule}`

/**
 * The environment of a case: `valid` (settings that work, named after the prefix) with the case's
 * variable unset or set to its value, then its other settings; `fill` fills in the placeholders.
 */
const environmentOf = (
  prefix: string,
  valid: Readonly<Record<string, string>>,
  { value, variable, with: settings = {} }: Case,
  fill: (text: string) => string
): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [name, text] of Object.entries(valid)) env[`${prefix}_${name}`] = fill(text)
  delete env[`${prefix}_${variable}`]
  if (value !== undefined) env[`${prefix}_${variable}`] = fill(value)
  for (const [name, text] of Object.entries(settings)) env[`${prefix}_${name}`] = fill(text)
  return env
}

/**
 * The case as this line reads it. On Effect 4 a variable set to "" is unset (its environment
 * provider reads it so): a required one is then refused as missing, and an optional one is no
 * mistake at all (its default applies), so that case is not one there.
 */
const onThisLine = (bad: Case, required: ReadonlyArray<string>): Case | undefined => {
  if (bad.value !== "" || !emptyVariableIsUnset) return bad
  return required.includes(bad.variable) ? { ...bad, rule: "is required" } : undefined
}

describe("a target's bad configuration", () => {
  const exists = "is required"
  const http = "must be an http(s) URL"
  const positive = "must be positive"
  const aNumber = "must be a number"
  const integer = "must be an integer >= 1"
  const pairs = "must read model=duration"
  const header = "must be a header name"
  const reserved = "must not be a header the client sets itself"
  const shorter = "must be shorter than"
  const flag = "must be true or false"
  /** `{url}` is the fault server's base URL. */
  const cases: ReadonlyArray<Case> = [
    { variable: "BASE_URL", value: undefined, rule: exists },
    { variable: "BASE_URL", value: "", rule: http },
    { variable: "BASE_URL", value: "{host}/v1", rule: http },
    { variable: "BASE_URL", value: "ftp://{host}/v1", rule: http },
    { variable: "BASE_URL", value: "http://", rule: http },
    { variable: "BASE_URL", value: "{url}/chat completions", rule: "must not contain spaces" },
    { variable: "BASE_URL", value: "{url} ", rule: "must not contain spaces" },
    { variable: "BASE_URL", value: "http://user:{secret}@{host}/v1", rule: "must not hold credentials" },
    { variable: "BASE_URL", value: "ftp://user:{secret}@{host}/v1", rule: http },
    { variable: "BASE_URL", value: "{url}?key={secret}", rule: "must not have a query or fragment" },
    { variable: "BASE_URL", value: "{url} ?key={secret}", rule: "must not contain spaces" },
    { variable: "MODEL", value: undefined, rule: exists },
    { variable: "MODEL", value: "", rule: "must not be empty" },
    { variable: "MODEL", value: "   ", rule: "must not be empty" },
    { variable: "API_KEY", value: undefined, rule: exists },
    { variable: "API_KEY", value: "", rule: "must not be empty" },
    { variable: "API_KEY", value: "{secret}\n", rule: "must not contain spaces, control or non-ASCII characters" },
    { variable: "API_KEY", value: "{secret} x", rule: "must not contain spaces, control or non-ASCII characters" },
    { variable: "API_KEY", value: "{secret}é", rule: "must not contain spaces, control or non-ASCII characters" },
    ...badDurations("ATTEMPT_TIMEOUT", positive),
    { variable: "ATTEMPT_TIMEOUTS", value: "mistral-large-latest", rule: pairs },
    { variable: "ATTEMPT_TIMEOUTS", value: "=90 seconds", rule: pairs },
    { variable: "ATTEMPT_TIMEOUTS", value: "mistral-large-latest=soon", rule: durationRule },
    { variable: "ATTEMPT_TIMEOUTS", value: "mistral-large-latest=90 seconds, mistral-tiny", rule: pairs },
    { variable: "ATTEMPT_TIMEOUTS", value: "a=1 second=2 seconds", rule: pairs },
    { variable: "ATTEMPT_TIMEOUTS", value: "mistral-tiny=0", rule: positive },
    { variable: "ATTEMPT_TIMEOUTS", value: "mistral-tiny=-5 seconds", rule: negativeRule },
    { variable: "ATTEMPT_TIMEOUTS", value: "a=1 second,a=2 seconds", rule: "must name each model once" },
    { variable: "MAX_ATTEMPTS", value: "three", rule: aNumber },
    { variable: "MAX_ATTEMPTS", value: "", rule: aNumber },
    { variable: "MAX_ATTEMPTS", value: "NaN", rule: aNumber },
    { variable: "MAX_ATTEMPTS", value: "0", rule: integer },
    { variable: "MAX_ATTEMPTS", value: "-1", rule: integer },
    { variable: "MAX_ATTEMPTS", value: "2.5", rule: integer },
    { variable: "MAX_ATTEMPTS", value: "Infinity", rule: integer },
    ...badDurations("BASE_DELAY", positive),
    { variable: "BASE_DELAY", value: "1 minute", rule: "must not exceed", alsoNamed: ["MAX_DELAY"] },
    {
      variable: "BASE_DELAY",
      value: "2 seconds",
      rule: "must not exceed",
      with: { MAX_DELAY: "1 second" },
      alsoNamed: ["MAX_DELAY"]
    },
    ...badDurations("MAX_DELAY"),
    { variable: "MAX_DELAY", value: "0", rule: "must not exceed", alsoNamed: ["BASE_DELAY"] },
    { variable: "MAX_DELAY", value: "100 millis", rule: "must not exceed", alsoNamed: ["BASE_DELAY"] },
    ...badDurations("HINT_SPREAD"),
    ...badDurations("MAX_RETRY_AFTER"),
    ...badDurations("MIN_ATTEMPT_TIME"),
    { variable: "MIN_ATTEMPT_TIME", value: "2 minutes", rule: shorter, alsoNamed: ["ATTEMPT_TIMEOUT"] },
    {
      variable: "MIN_ATTEMPT_TIME",
      value: "1 second",
      rule: shorter,
      with: { ATTEMPT_TIMEOUTS: "fast=500" },
      alsoNamed: ["ATTEMPT_TIMEOUTS (fast)"]
    },
    { variable: "REPLAY_SAFE", value: "maybe", rule: flag },
    { variable: "REPLAY_SAFE", value: "", rule: flag },
    { variable: "PROPAGATE_TRACE", value: "sometimes", rule: flag },
    { variable: "PROPAGATE_TRACE", value: "2", rule: flag },
    { variable: "BUDGET_RATIO", value: "ten percent", rule: aNumber },
    { variable: "BUDGET_RATIO", value: "10%", rule: aNumber },
    { variable: "BUDGET_RATIO", value: "", rule: aNumber },
    { variable: "BUDGET_RATIO", value: "NaN", rule: aNumber },
    { variable: "BUDGET_RATIO", value: "-0.1", rule: "must be between 0 and 1" },
    { variable: "BUDGET_RATIO", value: "1.5", rule: "must be between 0 and 1" },
    { variable: "BUDGET_RATIO", value: "10", rule: "must be between 0 and 1" },
    { variable: "BUDGET_RATIO", value: "Infinity", rule: "must be between 0 and 1" },
    { variable: "BUDGET_MIN_PER_SECOND", value: "five", rule: aNumber },
    { variable: "BUDGET_MIN_PER_SECOND", value: "NaN", rule: aNumber },
    { variable: "BUDGET_MIN_PER_SECOND", value: "-1", rule: "must be a finite number >= 0" },
    { variable: "BUDGET_MIN_PER_SECOND", value: "Infinity", rule: "must be a finite number >= 0" },
    { variable: "CONCURRENCY", value: "many", rule: aNumber },
    { variable: "CONCURRENCY", value: "", rule: aNumber },
    { variable: "CONCURRENCY", value: "0", rule: integer },
    { variable: "CONCURRENCY", value: "-4", rule: integer },
    { variable: "CONCURRENCY", value: "1.5", rule: integer },
    { variable: "CONCURRENCY", value: "Infinity", rule: integer },
    { variable: "IDEMPOTENCY_HEADER", value: "", rule: header },
    { variable: "IDEMPOTENCY_HEADER", value: "Idempotency Key", rule: header },
    { variable: "IDEMPOTENCY_HEADER", value: "Idempotency:Key", rule: header },
    { variable: "IDEMPOTENCY_HEADER", value: "Idempotency-Key\r\nX-Injected: 1", rule: header },
    { variable: "IDEMPOTENCY_HEADER", value: "Authorization", rule: reserved },
    { variable: "IDEMPOTENCY_HEADER", value: "content-type", rule: reserved },
    { variable: "MAX_RESPONSE_BYTES", value: "8MiB", rule: aNumber },
    { variable: "MAX_RESPONSE_BYTES", value: "0", rule: integer },
    { variable: "MAX_RESPONSE_BYTES", value: "-1", rule: integer },
    { variable: "MAX_RESPONSE_BYTES", value: "1024.5", rule: integer },
    { variable: "MAX_RESPONSE_BYTES", value: "Infinity", rule: integer },
    { variable: "PROBE_INTERVAL", value: "often", rule: durationRule },
    { variable: "PROBE_INTERVAL", value: "0", rule: positive },
    { variable: "PROBE_PATH", value: "models", rule: "must be a path starting with /" },
    { variable: "PROBE_PATH", value: "/models?key={secret}", rule: "must be a path starting with /" },
    ...badDurations("CONNECT_TIMEOUT", positive)
  ]

  const targets = [
    { kind: "managed", prefix: "MISTRAL", config: Target.managedConfig },
    { kind: "self-hosted", prefix: "POOL", config: Target.selfHostedConfig }
  ] as const

  for (const { config, kind, prefix } of targets) {
    describe(`${kind} (${prefix}_*)`, () => {
      for (const written of cases) {
        // An unset key is no mistake for a self-hosted pool.
        if (kind === "self-hosted" && written.variable === "API_KEY" && written.value === undefined) continue
        const bad = onThisLine(written, kind === "managed" ? ["BASE_URL", "MODEL", "API_KEY"] : ["BASE_URL", "MODEL"])
        if (bad === undefined) continue
        it.scopedLive(nameOf(prefix, written), () =>
          Effect.gen(function*() {
            const server = yield* FaultServer.make()
            const host = new URL(server.url).host
            const fill = (text: string) =>
              text.replaceAll("{url}", server.url).replaceAll("{host}", host).replaceAll("{secret}", canary)
            const valid = { BASE_URL: server.url, MODEL: "mistral-small-latest", API_KEY: canary }
            const env = environmentOf(prefix, valid, bad, fill)
            const exit = yield* Layer.build(ModelClient.layerConfig(config(prefix))).pipe(withEnv(env), Effect.exit)
            const names = [bad.variable, ...(bad.alsoNamed ?? [])].map((name) => `${prefix}_${name}`)
            refusal(exit, names, bad.rule, [canary])
            yield* settle
            assert.strictEqual((yield* server.arrivals).length, 0)
            assert.strictEqual(yield* server.inFlight, 0)
          }).pipe(Effect.provide(HttpLive)))
      }
    })
  }

  /** The option each variable sets, as the options object names it (`budget.ratio`). */
  const optionOf: Readonly<Record<string, ReadonlyArray<string>>> = {
    BASE_URL: ["baseUrl"],
    MODEL: ["model"],
    API_KEY: ["apiKey"],
    ATTEMPT_TIMEOUT: ["attemptTimeout"],
    ATTEMPT_TIMEOUTS: ["attemptTimeoutByModel"],
    MAX_ATTEMPTS: ["maxAttempts"],
    BASE_DELAY: ["baseDelay"],
    MAX_DELAY: ["maxDelay"],
    HINT_SPREAD: ["hintSpread"],
    MAX_RETRY_AFTER: ["maxRetryAfter"],
    MIN_ATTEMPT_TIME: ["minAttemptTime"],
    REPLAY_SAFE: ["replaySafe"],
    PROPAGATE_TRACE: ["propagateTrace"],
    BUDGET_RATIO: ["budget", "ratio"],
    BUDGET_MIN_PER_SECOND: ["budget", "minPerSecond"],
    CONCURRENCY: ["concurrency"],
    IDEMPOTENCY_HEADER: ["idempotencyHeader"],
    MAX_RESPONSE_BYTES: ["maxResponseBytes"],
    CONNECT_TIMEOUT: ["connectTimeout"],
    PROBE_INTERVAL: ["probeInterval"],
    PROBE_PATH: ["probePath"]
  }
  /** How the message names a variable's option: `budget.ratio`, `attemptTimeoutByModel.fast`. */
  const optionNamed = (variable: string) =>
    variable.replace(
      /^(\w+)(?: \((.+)\))?$/,
      (_, name: string, model?: string) => [...optionOf[name]!, ...(model === undefined ? [] : [model])].join(".")
    )

  /** Options for `Target.managed`: valid ones with the case's variable set as text, as the environment would. */
  const optionsOf = (
    valid: Record<string, unknown>,
    { value, variable, with: settings = {} }: Case,
    fill: (text: string) => string
  ) => {
    const options: Record<string, unknown> = { ...valid }
    const set = (name: string, text: string | undefined) => {
      const path = optionOf[name]!
      if (path.length === 1) {
        if (text === undefined) delete options[path[0]!]
        else options[path[0]!] = fill(text)
      } else if (text !== undefined) {
        options[path[0]!] = { ...(options[path[0]!] as object | undefined), [path[1]!]: fill(text) }
      }
    }
    set(variable, value)
    for (const [name, text] of Object.entries(settings)) set(name, text)
    return options
  }

  for (
    const { constructor, kind } of [
      { kind: "managed", constructor: Target.managed },
      { kind: "self-hosted", constructor: Target.selfHosted }
    ] as const
  ) {
    describe(`${kind}, as an options object: the same Schema, the option named, a typed error from the layer`, () => {
      for (const bad of cases) {
        if (kind === "self-hosted" && bad.variable === "API_KEY" && bad.value === undefined) continue
        it.scopedLive(`${optionNamed(bad.variable)} ${bad.value === undefined ? "unset" : JSON.stringify(bad.value)}: ${bad.rule}`, () =>
          Effect.gen(function*() {
            const server = yield* FaultServer.make()
            const host = new URL(server.url).host
            const fill = (text: string) =>
              text.replaceAll("{url}", server.url).replaceAll("{host}", host).replaceAll("{secret}", canary)
            const valid = {
              name: "mistral",
              baseUrl: server.url,
              model: "mistral-small-latest",
              apiKey: Redacted.make(canary)
            }
            const options = optionsOf(valid, bad, fill) as unknown as Target.Options
            const exit = yield* Layer.build(ModelClient.layer(constructor(options))).pipe(Effect.exit)
            const message = refusedWith(exit, Settings.InvalidSettings, [canary])
            for (const name of [bad.variable, ...(bad.alsoNamed ?? [])].map(optionNamed)) assert.include(message, name)
            assert.include(message, bad.rule)
            assert.include(message, "target mistral: ")
            yield* settle
            assert.strictEqual((yield* server.arrivals).length, 0)
          }).pipe(Effect.provide(HttpLive)))
      }
    })
  }

  it.scopedLive("several bad settings are each named in one message", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make()
      const exit = yield* Layer.build(ModelClient.layerConfig(Target.managedConfig("MISTRAL"))).pipe(
        withEnv({
          MISTRAL_BASE_URL: "ftp://x",
          MISTRAL_MODEL: "m",
          MISTRAL_API_KEY: canary,
          MISTRAL_MAX_ATTEMPTS: "0",
          MISTRAL_BUDGET_RATIO: "2",
          MISTRAL_IDEMPOTENCY_HEADER: "Host"
        }),
        Effect.exit
      )
      const message = refusal(
        exit,
        ["MISTRAL_BASE_URL", "MISTRAL_MAX_ATTEMPTS", "MISTRAL_BUDGET_RATIO", "MISTRAL_IDEMPOTENCY_HEADER"],
        "target mistral (MISTRAL_*)",
        [canary]
      )
      assert.match(message, /MISTRAL_BASE_URL must .*; MISTRAL_MAX_ATTEMPTS must .*; MISTRAL_BUDGET_RATIO must/)
      assert.strictEqual((yield* server.arrivals).length, 0)
    }).pipe(Effect.provide(HttpLive)))

  // The other side of each rule: its edges are accepted, and the counting server sees the call.
  const edges: ReadonlyArray<readonly [string, Target.Kind, Record<string, string>]> = [
    ["a budget of 0 and a floor of 0", "managed", { BUDGET_RATIO: "0", BUDGET_MIN_PER_SECOND: "0" }],
    ["a budget of 1", "managed", { BUDGET_RATIO: "1" }],
    ["no hint spread", "managed", { HINT_SPREAD: "0" }],
    ["no wait on any hint", "managed", { MAX_RETRY_AFTER: "0" }],
    ["an attempt started with any time left", "managed", { MIN_ATTEMPT_TIME: "0" }],
    ["a minimum attempt time just under the timeout", "managed", {
      ATTEMPT_TIMEOUT: "2 seconds",
      MIN_ATTEMPT_TIME: "1999"
    }],
    ["replay-safe chat and trace context sent, in any spelling", "managed", {
      REPLAY_SAFE: "yes",
      PROPAGATE_TRACE: "TRUE"
    }],
    ["neither, spelled as numbers", "self-hosted", { REPLAY_SAFE: "0", PROPAGATE_TRACE: "off" }],
    ["a base delay equal to the cap", "managed", { BASE_DELAY: "2 seconds", MAX_DELAY: "2 seconds" }],
    ["one attempt and one call at a time", "managed", { MAX_ATTEMPTS: "1", CONCURRENCY: "1" }],
    ["a model allowed 90 ms, less than an attempt needs left by default", "managed", { ATTEMPT_TIMEOUTS: "fast=90" }],
    ["an idempotency header of its own", "managed", { IDEMPOTENCY_HEADER: "X-Request-Id" }],
    ["no API key on a self-hosted pool", "self-hosted", {}]
  ]
  for (const [name, kind, settings] of edges) {
    it.scopedLive(`accepts ${name}`, () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make()
        const env: Record<string, string> = {
          EDGE_BASE_URL: server.url,
          EDGE_MODEL: "fast",
          ...(kind === "managed" ? { EDGE_API_KEY: canary } : {}),
          ...Object.fromEntries(Object.entries(settings).map(([key, value]) => [`EDGE_${key}`, value]))
        }
        const config = Target.config(kind, "EDGE")
        const client = yield* ModelClient.makeConfig(config).pipe(withEnv(env))
        const exit = yield* Effect.exit(
          client.chat({ messages: [{ role: "user", content: "Say hello." }] }, { timeout: "5 seconds" })
        )
        const arrivals = (yield* server.arrivals).length
        if (Exit.isSuccess(exit)) {
          assert.strictEqual(arrivals, 1)
        } else {
          // A busy machine can take longer than the 90 ms edge to answer, or even to send the request
          // (one loaded to 15 did): the attempt then ends at its timeout. A `ReadTimeout` is the
          // failure of an attempt that was started, which is all the edge is about (one refused for
          // lack of time would fail with the deadline). Nothing else may fail.
          const failed = failureOf(exit)
          assert.strictEqual(failed.last._tag, "ReadTimeout")
          assert.isAtLeast(failed.attempts.length, 1)
          assert.isAtMost(arrivals, failed.attempts.length)
        }
      }).pipe(Effect.provide(HttpLive)))
  }
})

/** A TCP server on a free loopback port that counts the connections it accepts and never answers. */
const countingServer = Effect.acquireRelease(
  EffectLine.callback<
    { readonly port: number; readonly connections: () => number; readonly close: () => Promise<void> }
  >(
    (resume) => {
      const sockets = new Set<Net.Socket>()
      let connections = 0
      const server = Net.createServer((socket) => {
        connections++
        sockets.add(socket)
        socket.on("error", () => {})
        socket.on("close", () => sockets.delete(socket))
      })
      const close = () =>
        new Promise<void>((closed) => {
          sockets.forEach((socket) => socket.destroy())
          server.close(() => closed())
        })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as Net.AddressInfo
        resume(Effect.succeed({ port, connections: () => connections, close }))
      })
    }
  ),
  ({ close }) => Effect.promise(close)
)

describe("the Redis connection's bad configuration", () => {
  const positive = "must be a positive duration"
  const aUrl = "must be a redis:// URL"
  const scheme = "must start with redis:// or rediss://"
  const keyPrefix = "must be letters, digits and : _ . -"
  /** `{host}` is the counting server's `127.0.0.1:port`; `{secret}` the password. */
  const cases: ReadonlyArray<Case> = [
    { variable: "URL", value: undefined, rule: "is required" },
    { variable: "URL", value: "", rule: aUrl },
    { variable: "URL", value: "{host}", rule: aUrl },
    { variable: "URL", value: "localhost:6379", rule: scheme },
    { variable: "URL", value: "http://:{secret}@{host}", rule: scheme },
    { variable: "URL", value: "redis://:{secret}@my host:6379", rule: aUrl },
    { variable: "URL", value: "redis://:{secret}@127.0.0.1:99999", rule: aUrl },
    { variable: "URL", value: "redis:///0", rule: "must name a host" },
    { variable: "URL", value: "redis://:{secret}@{host}/cache", rule: "must name its database by number" },
    { variable: "KEY_PREFIX", value: "", rule: keyPrefix },
    { variable: "KEY_PREFIX", value: "my app", rule: keyPrefix },
    { variable: "KEY_PREFIX", value: "app{1}", rule: keyPrefix },
    ...badDurations("COMMAND_TIMEOUT", positive),
    ...badDurations("RETRY_AFTER", positive),
    { variable: "FLEET_SIZE", value: "0", rule: "must be a whole number of at least 1, got 0" },
    { variable: "FLEET_SIZE", value: "2.5", rule: "must be a whole number of at least 1, got 2.5" },
    { variable: "FLEET_SIZE", value: "many", rule: "must be a whole number of at least 1, got no number" }
  ]

  for (const prefix of ["REDIS", "FLEET_REDIS"]) {
    describe(`${prefix}_*`, () => {
      for (const written of cases) {
        const bad = onThisLine(written, ["URL"])
        if (bad === undefined) continue
        it.scopedLive(nameOf(prefix, written), () =>
          Effect.gen(function*() {
            const redis = yield* countingServer
            const fill = (text: string) =>
              text.replaceAll("{host}", `127.0.0.1:${redis.port}`).replaceAll("{secret}", canary)
            const env = environmentOf(prefix, { URL: "redis://:{secret}@{host}/0" }, bad, fill)
            const layer = RedisConnection.layerConfig(prefix === "REDIS" ? undefined : prefix)
            const exit = yield* Layer.build(layer).pipe(withEnv(env), Effect.exit)
            refusal(exit, [`${prefix}_${bad.variable}`], bad.rule, [canary])
            yield* settle
            assert.strictEqual(redis.connections(), 0)
          }))
      }
    })
  }

  const redisOption: Readonly<Record<string, string>> = {
    URL: "url",
    KEY_PREFIX: "keyPrefix",
    COMMAND_TIMEOUT: "commandTimeout",
    RETRY_AFTER: "retryAfter",
    FLEET_SIZE: "fleetSize"
  }
  describe("as an options object: RedisConnection.layer fails with an InvalidSettings naming the option", () => {
    for (const bad of cases) {
      const option = redisOption[bad.variable]!
      it.scopedLive(`${option} ${bad.value === undefined ? "unset" : JSON.stringify(bad.value)}: ${bad.rule}`, () =>
        Effect.gen(function*() {
          const redis = yield* countingServer
          const fill = (text: string) =>
            text.replaceAll("{host}", `127.0.0.1:${redis.port}`).replaceAll("{secret}", canary)
          const options: Record<string, unknown> = { url: Redacted.make(fill("redis://:{secret}@{host}/0")) }
          if (bad.value === undefined) delete options[option]
          else options[option] = option === "url" ? Redacted.make(fill(bad.value)) : fill(bad.value)
          const layer = RedisConnection.layer(options as unknown as RedisConnection.Options)
          const message = refusedWith(yield* Effect.exit(Layer.build(layer)), Settings.InvalidSettings, [canary])
          assert.include(message, `redis: ${option} `)
          assert.include(message, bad.rule)
          yield* settle
          assert.strictEqual(redis.connections(), 0)
        }))
    }
  })

  it.scopedLive("a good URL does reach the counting server", () =>
    Effect.gen(function*() {
      const redis = yield* countingServer
      yield* Layer.build(RedisConnection.layerConfig()).pipe(
        withEnv({ REDIS_URL: `redis://:${canary}@127.0.0.1:${redis.port}/0`, REDIS_COMMAND_TIMEOUT: "20" }),
        Effect.provide(quiet)
      )
      assert.isAtLeast(redis.connections(), 1)
    }))
})

/**
 * A connection that fails the test if it is used: settings are checked before a component asks the
 * connection anything.
 */
const untouchable = new Proxy({} as RedisConnection.Service, {
  get: () => {
    throw new Error("settings must be checked before the connection is used")
  }
})

describe("every other constructor and layer: each bad setting is a typed error naming it, never a throw", () => {
  const shed = { target: "t", limit: 1 } as const
  /** What is built, the option the message must name, and the rule. */
  const rows: ReadonlyArray<readonly [string, () => Effect.Effect<unknown, unknown, Scope.Scope>, string, string]> = [
    ["Resilient.policy target", () => Resilient.policy({ target: "" }), "target", "must not be empty"],
    [
      "Resilient.policy maxAttempts",
      () => Resilient.policy({ target: "t", maxAttempts: 0 }),
      "maxAttempts",
      "integer >= 1"
    ],
    [
      "Resilient.policy baseDelay",
      () => Resilient.policy({ target: "t", baseDelay: "soon" as never }),
      "baseDelay",
      "a duration"
    ],
    ["Resilient.policy maxDelay", () => Resilient.policy({ target: "t", maxDelay: -1 }), "maxDelay", "not be negative"],
    [
      "Resilient.policy hintSpread",
      () => Resilient.policy({ target: "t", hintSpread: "x" as never }),
      "hintSpread",
      "a duration"
    ],
    [
      "Resilient.policy attemptTimeout",
      () => Resilient.policy({ target: "t", attemptTimeout: 0 }),
      "attemptTimeout",
      "positive"
    ],
    [
      "Resilient.policy minAttemptTime",
      () => Resilient.policy({ target: "t", minAttemptTime: "2 minutes" }),
      "minAttemptTime",
      "shorter than attemptTimeout"
    ],
    [
      "Resilient.policy maxRetryAfter",
      () => Resilient.policy({ target: "t", maxRetryAfter: "x" as never }),
      "maxRetryAfter",
      "a duration"
    ],
    [
      "Resilient.policy replaySafe",
      () => Resilient.policy({ target: "t", replaySafe: "maybe" as never }),
      "replaySafe",
      "true or false"
    ],
    [
      "Resilient.policy budget",
      () => Resilient.policy({ target: "t", budget: { ratio: -1 } }),
      "budget.ratio",
      "between 0 and 1"
    ],
    [
      "Resilient.policy gate",
      () => Resilient.policy({ target: "t", gate: { limit: 0 } }),
      "gate limit",
      "integer >= 1"
    ],
    [
      "Resilient.policy classify",
      () => Resilient.policy({ target: "t", classify: 3 as never }),
      "classify",
      "a function"
    ],
    ["RetryBudget.make ratio", () => RetryBudget.make({ ratio: Number.NaN }), "ratio", "a number"],
    ["RetryBudget.make window", () => RetryBudget.make({ window: 0 }), "window", "positive"],
    ["RetryBudget.make minPerSecond", () => RetryBudget.make({ minPerSecond: -1 }), "minPerSecond", ">= 0"],
    ["RetryBudget.make buckets", () => RetryBudget.make({ buckets: 0 }), "buckets", "integer >= 1"],
    [
      "RetryBudget.make shareWhenRetriesFail",
      () => RetryBudget.make({ shareWhenRetriesFail: 1.5 }),
      "shareWhenRetriesFail",
      "from 0 to 1"
    ],
    ["ConcurrencyGate.make target", () => ConcurrencyGate.make({ ...shed, target: "" }), "target", "must not be empty"],
    ["ConcurrencyGate.make limit", () => ConcurrencyGate.make({ ...shed, limit: 0 }), "limit", "integer >= 1"],
    ["ConcurrencyGate.make mode", () => ConcurrencyGate.make({ ...shed, mode: "drop" as never }), "mode", "queue"],
    ["ConcurrencyGate.make rampStart", () => ConcurrencyGate.make({ ...shed, rampStart: 0 }), "rampStart", "(0, 1]"],
    ["ConcurrencyGate.make rampFactor", () => ConcurrencyGate.make({ ...shed, rampFactor: 1 }), "rampFactor", "> 1"],
    ["ConcurrencyGate.make rampStep", () => ConcurrencyGate.make({ ...shed, rampStep: 0 }), "rampStep", "positive"],
    [
      "ConcurrencyGate.make degradeAfter",
      () => ConcurrencyGate.make({ ...shed, degradeAfter: 0 }),
      "degradeAfter",
      "integer >= 1"
    ],
    [
      "ConcurrencyGate.make maxWaiting",
      () => ConcurrencyGate.make({ ...shed, maxWaiting: -1 }),
      "maxWaiting",
      "integer >= 0"
    ],
    [
      "Coordination.stateOf budget",
      () =>
        Effect.flatMap(
          Coordination.make(),
          (coordination) => coordination.stateOf({ target: "t", budget: { buckets: 0 } })
        ),
      "buckets",
      "integer >= 1"
    ],
    [
      "RedisBudget.make buckets",
      () =>
        Effect.provideService(
          RedisBudget.make({ target: "t", buckets: 5_000 }),
          RedisConnection.RedisConnection,
          untouchable
        ),
      "buckets",
      "at most 1000"
    ],
    [
      "RedisBudget.make ratio",
      () =>
        Effect.provideService(
          RedisBudget.make({ target: "t", ratio: -1 }),
          RedisConnection.RedisConnection,
          untouchable
        ),
      "ratio",
      "between 0 and 1"
    ],
    [
      "RedisGate.make leaseTime",
      () =>
        Effect.provideService(RedisGate.make({ ...shed, leaseTime: 0 }), RedisConnection.RedisConnection, untouchable),
      "leaseTime",
      "positive"
    ],
    [
      "RedisGate.make pollInterval",
      () =>
        Effect.provideService(
          RedisGate.make({ ...shed, pollInterval: "x" as never }),
          RedisConnection.RedisConnection,
          untouchable
        ),
      "pollInterval",
      "a duration"
    ],
    [
      "RedisGate.make limit",
      () =>
        Effect.provideService(RedisGate.make({ ...shed, limit: 1.5 }), RedisConnection.RedisConnection, untouchable),
      "limit",
      "integer >= 1"
    ],
    [
      "RedisCoordination.layer leaseTime",
      () =>
        Layer.build(
          RedisCoordination.layer({ leaseTime: 0 }).pipe(
            Layer.provide(Layer.succeed(RedisConnection.RedisConnection, untouchable))
          )
        ),
      "leaseTime",
      "positive"
    ],
    [
      "RedisCoordination.layer pollInterval",
      () =>
        Layer.build(
          RedisCoordination.layer({ pollInterval: -5 }).pipe(
            Layer.provide(Layer.succeed(RedisConnection.RedisConnection, untouchable))
          )
        ),
      "pollInterval",
      "not be negative"
    ]
  ]
  for (const [name, build, option, rule] of rows) {
    it(`${name}: ${rule}`, () => {
      // Building must not throw: a throw here fails the test before the assertions.
      const exit = Effect.runSyncExit(Effect.scoped(Effect.suspend(build)))
      const message = refusedWith(exit, Settings.InvalidSettings, [])
      assert.include(message, option)
      assert.include(message, rule)
    })
  }
})
