import { either, pollFiber, TestClock, yieldNow } from "#test-line"
import { assert, it } from "@effect/vitest"
import { ConcurrencyGate, type Failure } from "@resilient-ai/policy"
import { EffectLine, Either, FastPath, keyFingerprint } from "@resilient-ai/policy/internal"
import { RedisConnection } from "@resilient-ai/redis"
import { RedisGate } from "@resilient-ai/redis/internal"
import { Clock, Effect, Exit, Fiber, Option, Redacted } from "effect"
import { canary } from "../canary.js"
import { lineOf, startMember } from "./fleet/process.js"
import {
  connection,
  describeRedis,
  eventually,
  freshPrefix,
  hashTagOf,
  holdingConnection,
  onOwnConnection,
  redis,
  redisUrl
} from "./support.js"

const fieldsOf = (failure: Failure.Failure): { readonly [field: string]: unknown } => ({ ...failure })

/** A gate of the fleet under `prefix`, on a connection of its own: one process of the fleet. */
const member = (prefix: string, options: Partial<RedisGate.Options> = {}) =>
  onOwnConnection(prefix, RedisGate.make({ target: "llm", limit: 3, mode: "shed", ...options }))

const forever = Number.POSITIVE_INFINITY

/** What refused a permit; a permit granted instead fails the test saying so. */
const refusal = (gate: ConcurrencyGate.Service) =>
  Effect.flatMap(either(gate.acquire(forever)), (taken) =>
    Either.isLeft(taken)
      ? Effect.succeed(Either.leftOf(taken))
      : Effect.die(new Error("granted a permit that the fleet's leases on Redis leave no room for")))

/** Moves the TestClock in `step`s, letting Redis replies through between steps, until `fiber` ends. */
const driveUntilDone = <A, E>(fiber: Fiber.Fiber<A, E>, step: number) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 1_000; turn++) {
      const done = yield* pollFiber(fiber)
      if (Option.isSome(done)) return done.value
      yield* TestClock.adjust(step)
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
    return yield* Effect.die(new Error("the fiber never ended"))
  })

/**
 * A test that starts a Node process waits for it as long as a busy machine takes (half a minute has
 * been seen) and bounds only what the process does: only a hung process waits this long.
 */
const startsAProcess = 300_000

describeRedis("RedisGate", () => {
  it.scoped("limits in-flight calls across processes, and sheds the excess", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const first = yield* member(prefix)
      const second = yield* member(prefix)
      yield* first.acquire(forever)
      yield* first.acquire(forever)
      yield* second.acquire(forever)
      const refused = yield* refusal(second)
      assert.deepStrictEqual(fieldsOf(refused), { _tag: "Shed", target: "llm", limit: 3, inFlight: 3 })
      yield* first.release("success")
      yield* second.acquire(forever)
      assert.deepStrictEqual(yield* first.snapshot, { limit: 3, inFlight: 3, waiting: 0, health: "steady" })
    }))

  it.scoped("hands a queued caller the permit another process gave back", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const holder = yield* member(prefix, { limit: 1, mode: "queue" })
      const waiter = yield* member(prefix, { limit: 1, mode: "queue", pollInterval: "100 millis" })
      yield* holder.acquire(forever)
      const queued = yield* EffectLine.fork(waiter.acquire(forever))
      yield* eventually(Effect.map(waiter.snapshot, (snapshot) => snapshot.waiting === 1), "the caller waits")
      yield* TestClock.adjust("1 second")
      yield* eventually(Effect.map(waiter.snapshot, (snapshot) => snapshot.waiting === 1), "it still waits")
      assert.isTrue(Option.isNone(yield* pollFiber(queued)))
      yield* holder.release("success")
      yield* driveUntilDone(queued, 50)
      assert.deepStrictEqual(yield* waiter.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
    }))

  it.scoped("lets a queued caller go at its deadline, taking nothing", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const holder = yield* member(prefix, { limit: 1, mode: "queue" })
      const waiter = yield* member(prefix, { limit: 1, mode: "queue" })
      yield* holder.acquire(forever)
      const deadline = (yield* Clock.currentTimeMillis) + 1_000
      const queued = yield* EffectLine.fork(waiter.acquire(deadline))
      const exit = yield* driveUntilDone(queued, 40)
      assert.deepStrictEqual(Exit.match(exit, { onFailure: () => undefined, onSuccess: () => "acquired" }), undefined)
      const failure = yield* Effect.flip(exit)
      assert.deepStrictEqual(fieldsOf(failure), { _tag: "DeadlineExceeded", deadline, phase: "queue" })
      assert.isAtLeast(yield* Clock.currentTimeMillis, deadline)
      assert.deepStrictEqual(yield* waiter.snapshot, { limit: 1, inFlight: 1, waiting: 0, health: "steady" })
    }))

  it.scoped("sheds once maxWaiting callers of a process are already waiting", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const holder = yield* member(prefix, { limit: 1, mode: "queue" })
      const waiter = yield* member(prefix, { limit: 1, mode: "queue", maxWaiting: 1 })
      yield* holder.acquire(forever)
      yield* EffectLine.fork(waiter.acquire(forever))
      yield* eventually(Effect.map(waiter.snapshot, (snapshot) => snapshot.waiting === 1), "one caller waits")
      const refused = yield* refusal(waiter)
      assert.deepStrictEqual(fieldsOf(refused), { _tag: "Shed", target: "llm", limit: 1, inFlight: 1 })
    }))

  it.scoped("gives nothing away when a waiting caller is interrupted", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const gate = yield* member(prefix, { limit: 2, mode: "queue" })
      yield* gate.acquire(forever)
      yield* gate.acquire(forever)
      const queued = yield* EffectLine.fork(gate.acquire(forever))
      yield* eventually(Effect.map(gate.snapshot, (snapshot) => snapshot.waiting === 1), "the caller waits")
      yield* Fiber.interrupt(queued)
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 2, inFlight: 2, waiting: 0, health: "steady" })
      yield* gate.release("success")
      // Polls that would still run take the freed permit: time for many, with Redis replies let through.
      for (let poll = 0; poll < 20; poll++) {
        yield* TestClock.adjust("100 millis")
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      }
      assert.strictEqual((yield* gate.snapshot).inFlight, 1, "the interrupted caller stopped asking")
      yield* gate.release("success")
      assert.deepStrictEqual(yield* gate.snapshot, { limit: 2, inFlight: 0, waiting: 0, health: "steady" })
    }))

  it.scoped("gives back the lease Redis grants to a waiting caller as it is interrupted", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const holder = yield* member(prefix, { limit: 1, mode: "queue" })
      // The waiter's connection holds Redis's answers back after `hold()`, until the test lets one through.
      const redis = yield* holdingConnection(prefix)
      const waiter = yield* RedisGate.make({ target: "llm", limit: 1, mode: "queue" }).pipe(
        Effect.provideService(RedisConnection.RedisConnection, redis.connection)
      )
      yield* holder.acquire(forever)
      const queued = yield* EffectLine.fork(waiter.acquire(forever))
      yield* eventually(Effect.map(waiter.snapshot, (snapshot) => snapshot.waiting === 1), "the caller waits")
      yield* holder.release("success")
      redis.hold()
      // Its next poll asks for the permit given back; the answer waits.
      yield* TestClock.adjust("1 second")
      yield* eventually(Effect.sync(redis.asked), "the caller asks again")
      const interrupting = yield* EffectLine.fork(Fiber.interrupt(queued))
      yield* yieldNow
      redis.letThrough()
      yield* Fiber.join(interrupting)
      assert.deepStrictEqual(yield* holder.snapshot, { limit: 1, inFlight: 0, waiting: 0, health: "steady" })
    }))

  it.scoped("degrades and ramps back fleet-wide, step for step as the in-memory gate", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const options = { target: "llm", limit: 100, mode: "queue", degradeAfter: 3, rampStep: "5 seconds" } as const
      const seeing = yield* member(prefix, options)
      const other = yield* member(prefix, options)
      const local = yield* ConcurrencyGate.make(options)
      const both = (effect: (gate: ConcurrencyGate.Service) => Effect.Effect<void, unknown>) =>
        Effect.zip(effect(seeing), effect(local))
      for (let i = 0; i < 3; i++) {
        yield* both((gate) => Effect.andThen(gate.acquire(forever), gate.release("overload")))
      }
      assert.deepStrictEqual(yield* other.snapshot, { limit: 10, inFlight: 0, waiting: 0, health: "degraded" })
      yield* both((gate) => Effect.andThen(gate.acquire(forever), gate.release("success")))
      const limits: Array<number> = []
      for (let step = 0; step <= 7; step++) {
        const [fleet, memory] = yield* Effect.zip(other.snapshot, local.snapshot)
        assert.deepStrictEqual(fleet, memory, `step ${step}`)
        limits.push(fleet.limit)
        yield* TestClock.adjust("5 seconds")
      }
      assert.deepStrictEqual(limits, [10, 15, 23, 35, 53, 80, 100, 100])
      assert.strictEqual((yield* other.snapshot).health, "steady")
    }))

  it.scoped("learns one limit fleet-wide, cut and grown step for step as the in-memory gate", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const options = { target: "llm", limit: 10, mode: "queue" } as const
      const seeing = yield* member(prefix, options)
      const other = yield* member(prefix, options)
      const local = yield* ConcurrencyGate.make(options)
      const both = (effect: (gate: ConcurrencyGate.Service) => Effect.Effect<void, unknown>) =>
        Effect.zip(effect(seeing), effect(local))
      const limits: Array<number> = []
      const compare = Effect.gen(function*() {
        const [fleet, memory] = yield* Effect.zip(other.snapshot, local.snapshot)
        assert.deepStrictEqual(fleet, memory, `after ${limits.join(", ")}`)
        limits.push(fleet.limit)
      })
      yield* both((gate) => Effect.asVoid(Effect.replicateEffect(gate.acquire(forever), 10)))
      // Cut ×0.9 at a full gate, then at once again for an overload right after it.
      yield* both((gate) => gate.release("overload"))
      yield* compare
      yield* both((gate) => gate.release("overload"))
      yield* compare
      // One limit's worth of successes at a full gate, a second after the cut, adds one.
      yield* TestClock.adjust("1 second")
      for (let i = 0; i < 8; i++) {
        yield* both((gate) => Effect.andThen(gate.release("success"), gate.acquire(forever)))
      }
      yield* compare
      // The ramp after an incident ends at the learned limit.
      yield* both((gate) => gate.markDegraded)
      yield* both((gate) => gate.markRecovered)
      for (let step = 0; step < 6; step++) {
        yield* compare
        yield* TestClock.adjust("5 seconds")
      }
      assert.deepStrictEqual(limits, [9, 8, 9, 1, 2, 3, 5, 8, 9])
      assert.strictEqual((yield* other.snapshot).health, "steady")
    }))

  it.scoped("marks the fleet degraded and recovered from outside", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const first = yield* member(prefix, { limit: 20 })
      const second = yield* member(prefix, { limit: 20 })
      yield* first.markDegraded
      assert.deepStrictEqual(yield* second.snapshot, { limit: 2, inFlight: 0, waiting: 0, health: "degraded" })
      yield* second.markRecovered
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(yield* first.snapshot, { limit: 3, inFlight: 0, waiting: 0, health: "recovering" })
    }))

  it.scoped("a process whose probe finds the provider down does not start the fleet's ramp on a lucky call; its probe does", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const probing = yield* member(prefix, { limit: 20 })
      const other = yield* member(prefix, { limit: 20 })
      yield* probing.markDegraded
      yield* FastPath.gate(probing)!.holdRecovery!(true)
      yield* probing.observe("success")
      assert.strictEqual((yield* other.snapshot).health, "degraded", "held: the success does not recover")
      yield* probing.markRecovered
      assert.strictEqual((yield* other.snapshot).health, "recovering", "the probe's word starts the ramp")
      // Another process's success still recovers the fleet: the hold is the probing process's.
      yield* other.markDegraded
      yield* other.observe("success")
      assert.strictEqual((yield* probing.snapshot).health, "recovering")
      // Given back, a success recovers again.
      yield* probing.markDegraded
      yield* FastPath.gate(probing)!.holdRecovery!(false)
      yield* probing.observe("success")
      assert.strictEqual((yield* other.snapshot).health, "recovering")
    }))

  it.scoped("takes back the permits of a process that stopped, at its callers' deadlines", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const deadline = (yield* Clock.currentTimeMillis) + 10_000
      // A process that takes every permit and goes away without giving them back.
      yield* Effect.scoped(Effect.flatMap(member(prefix), (gate) => Effect.replicateEffect(gate.acquire(deadline), 3)))
      const survivor = yield* member(prefix)
      assert.strictEqual((yield* refusal(survivor))._tag, "Shed")
      yield* TestClock.adjust("10999 millis")
      assert.strictEqual(
        (yield* refusal(survivor))._tag,
        "Shed",
        "leases run a second past the deadline"
      )
      yield* TestClock.adjust("1 millis")
      yield* Effect.replicateEffect(survivor.acquire(forever), 3)
    }))

  it.scoped("gives back the lease that ends soonest, so the callers still running keep the longest", () =>
    Effect.gen(function*() {
      const gate = yield* member(freshPrefix())
      const now = yield* Clock.currentTimeMillis
      yield* gate.acquire(now + 10_000)
      yield* gate.acquire(now + 60_000)
      // The 10-second caller may be the one still running, but it has 61 seconds of lease either way.
      yield* gate.release("success")
      yield* TestClock.adjust("12 seconds")
      assert.strictEqual((yield* gate.snapshot).inFlight, 1)
      yield* TestClock.adjust("49 seconds")
      assert.strictEqual((yield* gate.snapshot).inFlight, 0)
    }))

  it.scoped("takes back the permits of a killed OS process after the lease time", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const holder = yield* startMember({
        _tag: "hold",
        redisUrl,
        keyPrefix: prefix,
        target: "llm",
        limit: 4,
        permits: 3,
        leaseTimeMillis: 30_000
      })
      yield* lineOf(holder, "held")
      holder.kill("SIGKILL")
      yield* holder.exited
      // The member leased on the real clock: start this process's TestClock there.
      yield* TestClock.setTime(Date.now())
      const survivor = yield* member(prefix, { limit: 4 })
      yield* survivor.acquire(forever)
      const refused = yield* refusal(survivor)
      assert.deepStrictEqual(fieldsOf(refused), { _tag: "Shed", target: "llm", limit: 4, inFlight: 4 })
      yield* TestClock.adjust("29 seconds")
      assert.strictEqual((yield* refusal(survivor))._tag, "Shed")
      yield* TestClock.adjust("1 second")
      yield* Effect.replicateEffect(survivor.acquire(forever), 3)
      assert.deepStrictEqual(yield* survivor.snapshot, { limit: 4, inFlight: 4, waiting: 0, health: "steady" })
    }), startsAProcess)

  it.scoped("keys by target and API key fingerprint, never the key", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const secret = canary
      const gate = yield* member(prefix, { keyFingerprint: keyFingerprint(Redacted.make(secret)) })
      yield* gate.acquire(forever)
      yield* gate.acquire(forever)
      yield* gate.release("overload")
      const keys = [...(yield* redis((client) => client.keys(`${prefix}:*`)))].sort()
      assert.strictEqual(keys.length, 3)
      // Every script touches several of them: one hash tag puts them in one Redis Cluster slot.
      assert.strictEqual(new Set(keys.map(hashTagOf)).size, 1)
      for (const key of keys) {
        assert.match(key, new RegExp(`^${prefix}:\\{llm:[0-9a-f]{16}\\}:(gate:(health|leases)|members)$`))
        assert.notInclude(key, secret)
        assert.isAbove(yield* redis((client) => client.pttl(key)), 0, `${key} expires`)
      }
    }).pipe(Effect.provide(connection(freshPrefix()))))
})
