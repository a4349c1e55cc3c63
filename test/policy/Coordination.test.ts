/**
 * A coordination holds its targets' state itself, under each target's name and the fingerprint of
 * its API key's text; the fingerprint is SHA-256's, computed in plain JavaScript, so the keys of a
 * fleet on Redis are named as they were with `node:crypto`.
 */
import { isSuspended, TestClock, yieldNow } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import {
  ConcurrencyGate,
  Coordination,
  Failure,
  RateLimiter,
  Resilient,
  RetryBudget,
  Settings
} from "@resilient-ai/policy"
import { Diagnoses, EffectLine, keyFingerprint, Sha256 } from "@resilient-ai/policy/internal"
import { Deferred, Effect, Exit, Fiber, Redacted } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { canary } from "../canary.js"
import { freshTarget } from "./support.js"

const { hex, sha256, sha256Hex } = Sha256

const nodeSha256 = (input: string | Uint8Array) => createHash("sha256").update(input).digest("hex")

describe("SHA-256 in plain JavaScript", () => {
  it("gives FIPS 180-4's digests of its examples", () => {
    assert.strictEqual(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    assert.strictEqual(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    assert.strictEqual(
      sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    )
    assert.strictEqual(
      sha256Hex(
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"
      ),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
    )
    assert.strictEqual(
      sha256Hex("a".repeat(1_000_000)),
      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
    )
  })

  it("agrees with node:crypto on random bytes of every length around the block boundaries", () => {
    for (let length = 0; length <= 300; length++) {
      const bytes = new Uint8Array(randomBytes(length))
      assert.strictEqual(hex(sha256(bytes)), nodeSha256(bytes), `${length} bytes`)
    }
  })

  it("agrees with node:crypto on random text, in UTF-8: ASCII, accents, CJK, emoji and lone surrogates", () => {
    const alphabet = [
      "a",
      "Z",
      "0",
      "~",
      " ",
      "é",
      "ß",
      "€",
      "漢",
      "😀",
      "\ud800",
      "\udfff",
      "\u0000",
      "\u07ff",
      "\uffff"
    ]
    for (let round = 0; round < 500; round++) {
      const length = Math.floor(Math.random() * 80)
      const text = Array.from({ length }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join("")
      assert.strictEqual(sha256Hex(text), nodeSha256(text), JSON.stringify(text))
    }
  })

  it("an API key's fingerprint is what Redis's keys were named after: node:crypto's first 16 hex digits", () => {
    for (const key of [canary, "sk-proj-0123456789abcdef", randomBytes(24).toString("base64url")]) {
      assert.strictEqual(keyFingerprint(Redacted.make(key)), nodeSha256(key).slice(0, 16))
    }
    assert.strictEqual(keyFingerprint(undefined), undefined)
  })
})

/** Makers in memory that record what each was given. */
const recordingMakers = () => {
  const given: Array<Record<string, unknown>> = []
  return {
    given,
    makers: {
      budget: (options: Parameters<Coordination.Makers["budget"]>[0]) => {
        given.push({ part: "budget", ...options })
        return RetryBudget.make(options)
      },
      gate: (options: Parameters<Coordination.Makers["gate"]>[0]) => {
        given.push({ part: "gate", ...options })
        return ConcurrencyGate.make(options)
      },
      rateLimiter: (options: Parameters<NonNullable<Coordination.Makers["rateLimiter"]>>[0]) => {
        given.push({ part: "rateLimiter", ...options })
        return RateLimiter.make(options)
      }
    }
  }
}

describe("a coordination's targets", () => {
  it.effect("are kept under the target's name and its key's fingerprint: two Redacted of one text are one key", () =>
    Effect.gen(function*() {
      const { given, makers } = recordingMakers()
      const coordination = yield* Coordination.make(makers)
      const first = yield* coordination.stateOf({ target: "llm", apiKey: Redacted.make(canary) })
      const again = yield* coordination.stateOf({ target: "llm", apiKey: Redacted.make(canary) })
      const otherKey = yield* coordination.stateOf({ target: "llm", apiKey: Redacted.make(`${canary}-other`) })
      const otherTarget = yield* coordination.stateOf({ target: "embeddings", apiKey: Redacted.make(canary) })
      const keyless = yield* coordination.stateOf({ target: "llm" })
      assert.strictEqual(again, first)
      assert.notStrictEqual(otherKey, first)
      assert.notStrictEqual(otherTarget, first)
      assert.notStrictEqual(keyless, first)
      const fingerprint = nodeSha256(canary).slice(0, 16)
      assert.deepStrictEqual([...coordination.targets.keys()], ["llm", "embeddings"])
      assert.deepStrictEqual([...coordination.targets.get("llm")!.keys()], [
        fingerprint,
        nodeSha256(`${canary}-other`).slice(0, 16),
        undefined
      ])
      assert.strictEqual(coordination.targets.get("llm")!.get(fingerprint), first)
      // Each part made once per target and key, given the fingerprint, never the key.
      assert.strictEqual(given.length, 12)
      assert.deepStrictEqual(
        given.slice(0, 3).map(({ keyFingerprint, part, target }) => ({ part, target, keyFingerprint })),
        ["budget", "gate", "rateLimiter"].map((part) => ({ part, target: "llm", keyFingerprint: fingerprint }))
      )
      for (const options of given) {
        assert.notProperty(options, "apiKey")
        assert.isFalse(Object.values(options).some(Redacted.isRedacted))
      }
    }))

  it.effect("callers that come while a target is being made wait for it; a failure is each waiter's, and the next tries again", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let made = 0
      let fail = true
      const coordination = yield* Coordination.make({
        budget: (options) =>
          Effect.gen(function*() {
            made++
            yield* Deferred.succeed(started, undefined)
            yield* Deferred.await(release)
            return fail
              ? yield* Effect.fail(new Settings.InvalidSettings({ subject: "retry budget", problems: ["refused"] }))
              : yield* RetryBudget.make(options)
          })
      })
      const maker = yield* EffectLine.fork(Effect.exit(coordination.stateOf({ target: "t" })))
      yield* Deferred.await(started)
      const waiter = yield* EffectLine.fork(Effect.exit(coordination.stateOf({ target: "t" })))
      while (!(yield* isSuspended(waiter))) yield* yieldNow
      yield* Deferred.succeed(release, undefined)
      const first = yield* Fiber.join(maker)
      const second = yield* Fiber.join(waiter)
      assert.strictEqual(made, 1, "made once, waited for by the second caller")
      assert.isTrue(Exit.isFailure(first) && Exit.isFailure(second))
      assert.isUndefined(coordination.targets.get("t")?.get(undefined))
      fail = false
      const state = yield* coordination.stateOf({ target: "t" })
      assert.strictEqual(made, 2)
      assert.strictEqual(coordination.targets.get("t")?.get(undefined), state)
    }))

  it.effect("without a layer, a program gets Coordination's default, made once by Effect; a layer gives one of its own", () =>
    Effect.gen(function*() {
      const inContext = yield* Coordination.Coordination
      assert.strictEqual(Effect.runSync(Coordination.Coordination), inContext)
      const own = yield* Effect.provide(Coordination.Coordination, Coordination.layerMemory)
      assert.notStrictEqual(own, inContext)
      assert.strictEqual(own.targets.size, 0)
      assert.notStrictEqual(yield* Effect.provide(Coordination.Coordination, Coordination.layerMemory), own)
    }))

  it.effect("each keeps what its targets' calls learned: the capacity failures the diagnosis reads are not shared", () =>
    Effect.gen(function*() {
      const target = freshTarget("capacity")
      // Two overloads, then a success: two capacity failures, and nothing the metrics count as trouble.
      let attempts = 0
      const overloadedTwice = Effect.suspend(() =>
        attempts++ % 3 < 2 ? Effect.fail(new Failure.Overloaded({ status: 503 })) : Effect.succeed("ok")
      )
      const callThrough = (coordination: Coordination.Coordination) =>
        Effect.gen(function*() {
          const fiber = yield* EffectLine.fork(
            overloadedTwice.pipe(
              Resilient.retry({ target, maxAttempts: 3 }),
              Effect.provideService(Coordination.Coordination, coordination)
            )
          )
          yield* TestClock.adjust("1 minute")
          assert.strictEqual(yield* Fiber.join(fiber), "ok")
          return coordination.targets.get(target)?.get(undefined)
        })
      const first = yield* Coordination.make()
      const second = yield* Coordination.make()
      const inFirst = yield* callThrough(first)
      assert.strictEqual(inFirst?.learned.capacityFailures, 2)
      assert.strictEqual(Diagnoses.callTotals(target, inFirst).troubles, 2)
      // Before the second coordination's calls, and after: the first's count is not the second's.
      assert.strictEqual(Diagnoses.callTotals(target, second.targets.get(target)?.get(undefined)).troubles, 0)
      const inSecond = yield* callThrough(second)
      assert.notStrictEqual(inSecond, inFirst)
      assert.strictEqual(inSecond?.learned.capacityFailures, 2)
      assert.strictEqual(inFirst?.learned.capacityFailures, 2)
      assert.strictEqual(Diagnoses.callTotals(target, inSecond).troubles, 2)
    }))
})
