/**
 * Properties of the policy on generated inputs: hint parsing, classification, backoff and the
 * deadline, and the retry budget against a reference model.
 *
 * Every `fc.assert` runs from a fixed seed, so a failure reproduces; each property also counts
 * the kinds of cases it saw, so a generator that drifts into trivial cases fails instead of passing.
 */
import { dieMessage, pollFiber, promiseRunner, seeded, TestClock } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Targets } from "@resilient-ai/client/internal"
import { Backoff, Classifier, Failure, Resilient, RetryBudget } from "@resilient-ai/policy"
import { Backoffs, Budgets, EffectLine, Failures, RetryHint } from "@resilient-ai/policy/internal"
import { Clock, Duration, Effect, Exit, Fiber, Layer, Option, Schedule } from "effect"
import * as fc from "fast-check"
import { captureLogs, failureOf, freshTarget, policyOf, services, valid } from "./support.js"

const runs = (numRuns: number) => ({ seed: 42, numRuns })

/**
 * Checks `property` on every case inside the test's own runtime, whose `TestClock` only moves
 * forward: a case that needs the time reads it. One runtime for all cases keeps them fast.
 */
const checkEach = <T>(arbitrary: fc.Arbitrary<T>, numRuns: number, property: (input: T) => Effect.Effect<void>) =>
  Effect.flatMap(
    promiseRunner,
    (run) =>
      Effect.promise(() => fc.assert(fc.asyncProperty(arbitrary, (input) => run(property(input))), runs(numRuns)))
  )

/** The fiber's exit once the clock has moved `by`; a fiber still running then fails the case. */
const finishedBy = <A, E>(fiber: Fiber.Fiber<A, E>, by: string) =>
  Effect.flatMap(pollFiber(fiber), (exit) => {
    if (Option.isSome(exit)) return Effect.succeed(exit.value)
    return Effect.andThen(Fiber.interrupt(fiber), dieMessage(`still running after ${by}`))
  })

const millisOf = (hint: Option.Option<Duration.Duration>): number | undefined =>
  Option.match(hint, { onNone: () => undefined, onSome: Duration.toMillis })

/** Milliseconds as a `Duration` keeps them: to the nanosecond. */
const asDuration = (millis: number) => Duration.toMillis(Duration.millis(millis))

/** A hint that exists is a finite, non-negative number of milliseconds. */
const assertSaneHint = (hint: Option.Option<Duration.Duration>, input: unknown) => {
  const millis = millisOf(hint)
  if (millis === undefined) return
  assert.isTrue(Number.isFinite(millis) && millis >= 0, `${JSON.stringify(input)} gave ${millis}`)
}

const tally = () => {
  const counts = new Map<string, number>()
  return {
    add: (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1),
    get: (key: string) => counts.get(key) ?? 0,
    keys: () => [...counts.keys()]
  }
}

// ---------------------------------------------------------------------------------------------
// Hint texts

const weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"] as const
const longWeekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"] as const
const monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"] as const

/** Fields of a date as a header spells them, possibly impossible ones (day 31 of February, hour 27). */
interface DateFields {
  readonly weekday: number
  readonly day: number
  readonly month: number
  readonly year: number
  readonly hour: number
  readonly minute: number
  readonly second: number
}

const pad = (value: number, width: number, fill = "0") => String(value).padStart(width, fill)
const clockText = (f: DateFields) => `${pad(f.hour, 2)}:${pad(f.minute, 2)}:${pad(f.second, 2)}`

type DateForm = "imf" | "rfc850" | "asctime"

const formatDate = (form: DateForm, f: DateFields): string => {
  const month = monthNames[f.month]!
  switch (form) {
    case "imf":
      return `${weekdays[f.weekday]}, ${pad(f.day, 2)} ${month} ${pad(f.year, 4)} ${clockText(f)} GMT`
    case "rfc850":
      return `${longWeekdays[f.weekday]}, ${pad(f.day, 2)}-${month}-${pad(f.year % 100, 2)} ${clockText(f)} GMT`
    case "asctime":
      return `${weekdays[f.weekday]} ${month} ${pad(f.day, 2, " ")} ${clockText(f)} ${pad(f.year, 4)}`
  }
}

const fieldsOf = (epochMillis: number): DateFields => {
  const date = new Date(epochMillis)
  return {
    weekday: date.getUTCDay(),
    day: date.getUTCDate(),
    month: date.getUTCMonth(),
    year: date.getUTCFullYear(),
    hour: date.getUTCHours(),
    minute: date.getUTCMinutes(),
    second: date.getUTCSeconds()
  }
}

const isLeap = (year: number) => year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
const daysIn = (year: number, month: number) =>
  month === 1 ? (isLeap(year) ? 29 : 28) : [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month]!

/** Days from 1970-01-01 to a proleptic Gregorian date (Hinnant's `days_from_civil`), without `Date`. */
const daysFromCivil = (year: number, month: number, day: number): number => {
  const y = month <= 1 ? year - 1 : year
  const era = Math.floor(y / 400)
  const yearOfEra = y - era * 400
  const dayOfYear = Math.floor((153 * (month > 1 ? month - 2 : month + 10) + 2) / 5) + day - 1
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear
  return era * 146097 + dayOfEra - 719468
}

/** What the fields mean in epoch milliseconds, or `undefined` for an impossible date. */
const epochOf = (f: DateFields, year: number): number | undefined => {
  const possible = f.day >= 1 && f.day <= daysIn(year, f.month) && f.hour < 24 && f.minute < 60 && f.second < 60
  return possible
    ? daysFromCivil(year, f.month, f.day) * 86_400_000 + ((f.hour * 60 + f.minute) * 60 + f.second) * 1000
    : undefined
}

/**
 * The year an RFC 850 date means: of the years ending in those two digits, the one in
 * (now − 50, now + 50] — never more than 50 years ahead (RFC 9110 §5.6.7), nor further behind.
 * Counted here by stepping a century at a time, not by the parser's arithmetic.
 */
const rfc850Year = (twoDigits: number, nowMillis: number): number => {
  const thisYear = new Date(nowMillis).getUTCFullYear()
  let year = twoDigits
  while (year <= thisYear - 50) year += 100
  return year
}

/** A clock from TestClock's start to the 22nd century, so two-digit years cross centuries both ways. */
const realisticNow = fc.integer({ min: 0, max: Date.UTC(2199, 11, 31) })

const dateFields: fc.Arbitrary<DateFields> = fc.record({
  weekday: fc.integer({ min: 0, max: 6 }),
  day: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 31 }) }, fc.integer({ min: 0, max: 99 })),
  month: fc.integer({ min: 0, max: 11 }),
  year: fc.oneof(fc.integer({ min: 0, max: 9999 }), fc.integer({ min: 1990, max: 2110 })),
  hour: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 0, max: 23 }) }, fc.integer({ min: 0, max: 99 })),
  minute: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 0, max: 59 }) }, fc.integer({ min: 0, max: 99 })),
  second: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 0, max: 59 }) }, fc.integer({ min: 0, max: 99 }))
})

const dateForm = fc.constantFrom<DateForm>("imf", "rfc850", "asctime")
const digits = (minLength: number, maxLength: number) =>
  fc.string({ unit: fc.constantFrom(..."0123456789"), minLength, maxLength })
const blank = fc.constantFrom("", "", "", " ", "  ", "\t", "\n", "\u00a0", "\u2003", "\ufeff")

/** A decimal the headers allow: optional minus, digits with an optional fraction, spaces around. */
const plainDecimal = fc
  .record({
    minus: fc.boolean(),
    // Past about 306 digits, seconds overflow a double once made milliseconds; past 309, so do milliseconds.
    whole: fc.oneof({ weight: 4, arbitrary: digits(0, 6) }, digits(0, 30), digits(300, 320)),
    fraction: fc.option(digits(0, 4), { nil: undefined }),
    before: blank,
    after: blank
  })
  .filter(({ fraction, whole }) => whole.length > 0 || (fraction !== undefined && fraction.length > 0))
  .map(({ after, before, fraction, minus, whole }) => {
    const core = `${minus ? "-" : ""}${whole}${fraction === undefined ? "" : `.${fraction}`}`
    return { text: `${before}${core}${after}`, value: Number(core) }
  })

/** Numbers in spellings the headers do not allow: signs, exponents, hex, separators, units, words. */
const nearMissNumber = fc
  .tuple(
    digits(1, 8),
    fc.constantFrom(
      (n: string) => `+${n}`,
      (n: string) => `${n}e3`,
      (n: string) => `${n}E-2`,
      (n: string) => `0x${n}`,
      (n: string) => `${n}_000`,
      (n: string) => `${n},5`,
      (n: string) => `${n} 5`,
      (n: string) => `${n}s`,
      (n: string) => `--${n}`,
      (n: string) => `- ${n}`,
      (n: string) => `${n}.5.1`,
      (n: string) => `${n}-`,
      (n: string) => `Infinity${n}`,
      () => "Infinity",
      () => "-Infinity",
      () => "NaN",
      () => "."
    )
  )
  .map(([n, spell]) => spell(n))

const httpDateText = fc.tuple(dateForm, dateFields).map(([form, fields]) => formatDate(form, fields))

/** One edit of a well-formed value: a character dropped, inserted, replaced, or its case flipped. */
const mutated = (source: fc.Arbitrary<string>) =>
  fc
    .tuple(
      source,
      fc.nat(),
      fc.constantFrom("drop" as const, "insert" as const, "replace" as const, "case" as const),
      fc.string({ maxLength: 2 })
    )
    .map(([text, at, edit, extra]) => {
      const i = text.length === 0 ? 0 : at % text.length
      const char = text[i] ?? ""
      switch (edit) {
        case "drop":
          return text.slice(0, i) + text.slice(i + 1)
        case "insert":
          return text.slice(0, i) + extra + text.slice(i)
        case "replace":
          return text.slice(0, i) + extra + text.slice(i + 1)
        case "case":
          return text.slice(0, i) + (char.toLowerCase() === char ? char.toUpperCase() : char.toLowerCase()) +
            text.slice(i + 1)
      }
    })

/** Anything a header could carry. */
const hintText: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  plainDecimal.map(({ text }) => text),
  nearMissNumber,
  httpDateText,
  mutated(fc.oneof(plainDecimal.map(({ text }) => text), httpDateText))
)

describe("Properties: RetryHint", () => {
  it("no text makes a parser throw or give a negative or non-finite hint", () => {
    fc.assert(
      fc.property(hintText, fc.oneof(fc.integer({ min: 0, max: 8.64e15 }), realisticNow), (text, now) => {
        assertSaneHint(RetryHint.parseRetryAfter(text, now), text)
        assertSaneHint(RetryHint.parseRetryAfterMillis(text), text)
        const date = RetryHint.parseHttpDate(text, now)
        assert.isTrue(date === undefined || Number.isFinite(date), text)
      }),
      runs(2000)
    )
  })

  it("a plain decimal is that many seconds, or milliseconds in retry-after-ms, negative as zero", () => {
    const seen = tally()
    fc.assert(
      fc.property(plainDecimal, realisticNow, ({ text, value }, now) => {
        const seconds = millisOf(RetryHint.parseRetryAfter(text, now))
        const millis = millisOf(RetryHint.parseRetryAfterMillis(text))
        // A number too large for a double is no hint rather than an infinite wait.
        const expectedSeconds = Number.isFinite(value * 1000) ? asDuration(Math.max(0, value * 1000)) : undefined
        const expectedMillis = Number.isFinite(value) ? asDuration(Math.max(0, value)) : undefined
        assert.strictEqual(seconds, expectedSeconds, text)
        assert.strictEqual(millis, expectedMillis, text)
        seen.add(expectedSeconds === undefined ? "too large" : expectedSeconds === 0 ? "now" : "later")
      }),
      runs(500)
    )
    for (const kind of ["too large", "now", "later"]) assert.isAbove(seen.get(kind), 5, kind)
  })

  it("a number spelled any other way is no hint", () => {
    fc.assert(
      fc.property(nearMissNumber, realisticNow, (text, now) => {
        assert.isUndefined(millisOf(RetryHint.parseRetryAfter(text, now)), text)
        assert.isUndefined(millisOf(RetryHint.parseRetryAfterMillis(text)), text)
      }),
      runs(300)
    )
  })

  it("an HTTP date in any form is the time until it, zero once past, and an impossible one no hint", () => {
    const seen = tally()
    fc.assert(
      fc.property(dateForm, dateFields, realisticNow, (form, fields, now) => {
        const text = formatDate(form, fields)
        const year = form === "rfc850" ? rfc850Year(fields.year % 100, now) : fields.year
        const epoch = epochOf(fields, year)
        assert.strictEqual(RetryHint.parseHttpDate(text, now), epoch, text)
        assert.strictEqual(
          millisOf(RetryHint.parseRetryAfter(text, now)),
          epoch === undefined ? undefined : Math.max(0, epoch - now),
          text
        )
        // The date form is never read from retry-after-ms.
        assert.isUndefined(millisOf(RetryHint.parseRetryAfterMillis(text)), text)
        seen.add(epoch === undefined ? "impossible" : epoch <= now ? "past" : "future")
        if (form === "rfc850" && epoch !== undefined) {
          // RFC 9110: a two-digit year never puts the date more than 50 years ahead.
          assert.isAtMost(year, new Date(now).getUTCFullYear() + 50, text)
        }
      }),
      runs(1000)
    )
    for (const kind of ["impossible", "past", "future"]) assert.isAbove(seen.get(kind), 50, kind)
  })

  it("a date near now reads back to the millisecond in all three forms", () => {
    const seen = tally()
    fc.assert(
      fc.property(dateForm, realisticNow, fc.integer({ min: -172_800, max: 172_800 }), (form, now, offsetSeconds) => {
        const at = Math.floor(now / 1000) * 1000 + offsetSeconds * 1000
        const text = formatDate(form, fieldsOf(at))
        const hint = millisOf(RetryHint.parseRetryAfter(text, now))
        assert.strictEqual(hint, Math.max(0, at - now), text)
        seen.add(hint === 0 ? "now" : "later")
      }),
      runs(300)
    )
    assert.isAbove(seen.get("now"), 50)
    assert.isAbove(seen.get("later"), 50)
  })

  it("fromHeaders takes retry-after-ms when it parses and Retry-After otherwise, in any header shape", () => {
    const seen = tally()
    const headerCase = fc.record(
      {
        millis: fc.option(hintText, { nil: undefined }),
        seconds: fc.option(hintText, { nil: undefined }),
        millisName: fc.mixedCase(fc.constant("retry-after-ms")),
        secondsName: fc.mixedCase(fc.constant("retry-after")),
        shape: fc.constantFrom("record", "array", "get"),
        millisFirst: fc.boolean(),
        now: realisticNow
      }
    )
    fc.assert(
      fc.property(headerCase, ({ millis, millisFirst, millisName, now, seconds, secondsName, shape }) => {
        const entries: Array<readonly [string, string]> = []
        if (millis !== undefined) entries.push([millisName, millis])
        if (seconds !== undefined) entries.push([secondsName, seconds])
        if (!millisFirst) entries.reverse()
        const headers: RetryHint.HeaderSource = shape === "get"
          ? {
            get: (name: string) => entries.find(([key]) => key.toLowerCase() === name)?.[1] ?? null
          }
          : Object.fromEntries(entries.map(([key, value]) => [key, shape === "array" ? [value, "1"] : value]))
        const fromMillis = millis === undefined ? Option.none() : RetryHint.parseRetryAfterMillis(millis)
        const expected = Option.isSome(fromMillis)
          ? fromMillis
          : seconds === undefined
          ? Option.none()
          : RetryHint.parseRetryAfter(seconds, now)
        const hint = RetryHint.fromHeaders(headers, now)
        assert.strictEqual(millisOf(hint), millisOf(expected), JSON.stringify(entries))
        assertSaneHint(hint, entries)
        seen.add(Option.isSome(fromMillis) ? "millis" : Option.isSome(hint) ? "seconds" : "none")
      }),
      runs(500)
    )
    for (const kind of ["millis", "seconds", "none"]) assert.isAbove(seen.get(kind), 20, kind)
  })

  // The parser bounds a hint below (zero) but not above: `retry-after: 1e300 seconds` written out
  // is a finite hint. The cap is promised by `Resilient.retry`: a hint beyond `maxRetryAfter`
  // ends the call with `retry-after-too-long`, and a shorter one is slept with at most
  // `min(hintSpread, hint / 2)` added. So the upper bound is asserted there, on whatever the headers said.
  it.effect("a resilient call never sleeps on a hint beyond maxRetryAfter + hintSpread, nor past 1.5 × the hint", () =>
    Effect.gen(function*() {
      const seen = tally()
      // A header as sent, or a date some seconds from the moment the case runs.
      const headerValue = fc.oneof(
        fc.oneof(
          hintText,
          fc.integer({ min: 0, max: 150 }).map(String),
          fc.integer({ min: 0, max: 150_000 }).map(String)
        )
          .map((text) => ({ _tag: "text" as const, text })),
        fc.record({
          _tag: fc.constant("date" as const),
          form: dateForm,
          offsetSeconds: fc.integer({ min: -60, max: 200 })
        })
      )
      const hintCase = fc.record({
        header: fc.constantFrom("retry-after", "retry-after-ms"),
        value: headerValue,
        maxRetryAfter: fc.integer({ min: 0, max: 120_000 }),
        hintSpread: fc.integer({ min: 0, max: 2000 }),
        seed: fc.integer()
      })
      yield* TestClock.setTime(Date.UTC(2026, 10, 30))
      yield* checkEach(hintCase, 100, (c) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const text = c.value._tag === "text"
            ? c.value.text
            : formatDate(c.value.form, fieldsOf(Math.floor(now / 1000) * 1000 + c.value.offsetSeconds * 1000))
          const hint = RetryHint.fromHeaders({ [c.header]: text }, now)
          const failure = new Failure.RateLimited({ status: 429, retryAfter: Option.getOrUndefined(hint) })
          const target = freshTarget("hint-cap")
          const policy = policyOf({
            target,
            maxAttempts: 2,
            maxRetryAfter: c.maxRetryAfter,
            hintSpread: c.hintSpread
          })
          const starts: Array<number> = []
          const attempt = Effect.flatMap(Clock.currentTimeMillis, (at) => {
            starts.push(at)
            return starts.length === 1 ? Effect.fail(failure) : Effect.succeed("ok")
          })
          const fiber = yield* EffectLine.fork(
            attempt.pipe(
              Resilient.retry(policy),
              seeded(c.seed),
              Effect.provide(services(target))
            )
          )
          yield* TestClock.adjust("10 minutes")
          const exit = yield* finishedBy(fiber, "10 minutes")
          const hintMillis = millisOf(hint)
          if (hintMillis !== undefined && hintMillis > c.maxRetryAfter) {
            assert.strictEqual(starts.length, 1)
            assert.strictEqual(failureOf(exit).reason, "retry-after-too-long")
            seen.add("too long")
            return
          }
          assert.deepStrictEqual(exit, Exit.succeed("ok"))
          const slept = starts[1]! - starts[0]!
          // The clock sits near 2^40 ms, where a fractional hint is off by a few microseconds.
          const epsilon = 0.001
          if (hintMillis === undefined) {
            assert.isAtMost(slept, 8000, "the default jitter's cap")
            seen.add("no hint")
          } else {
            assert.isAtLeast(slept, hintMillis - epsilon)
            assert.isAtMost(slept, hintMillis + Math.min(c.hintSpread, hintMillis / 2) + epsilon)
            assert.isAtMost(slept, c.maxRetryAfter + c.hintSpread + epsilon)
            seen.add(c.value._tag === "date" ? "slept on a date" : "slept")
          }
        }))
      for (const kind of ["too long", "no hint", "slept", "slept on a date"]) assert.isAbove(seen.get(kind), 5, kind)
    }))
})

// ---------------------------------------------------------------------------------------------
// Classification

const verdicts: ReadonlyArray<Classifier.Verdict> = ["retryable", "terminal", "ambiguous"]
const status = fc.integer({ min: 100, max: 599 })
const optional = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: undefined })
const specialCodes = [...Failures.quotaCodes, ...Failures.modelUnavailableCodes]
const providerCode = fc.oneof(
  fc.constantFrom(...specialCodes, "rate_limit_exceeded", "overloaded_error", "server_error", "invalid_request", ""),
  fc.string({ maxLength: 20 })
)
const responseFields = fc.record(
  { status, providerCode: optional(providerCode), detail: optional(fc.string()), shouldRetry: optional(fc.boolean()) },
  { requiredKeys: ["status"] }
)
const hintedFields = fc.record(
  {
    status,
    providerCode: optional(providerCode),
    detail: optional(fc.string()),
    shouldRetry: optional(fc.boolean()),
    retryAfter: optional(fc.nat().map(Duration.millis))
  },
  { requiredKeys: ["status"] }
)
const timeout = fc.nat().map(Duration.millis)
const phase = fc.constantFrom("headers" as const, "body" as const, "attempt" as const)

/** Every failure constructor, with arbitrary fields. */
const anyFailure: fc.Arbitrary<Failure.Failure> = fc.oneof(
  fc.string().map((detail) => new Failure.ConnectFailed({ detail })),
  timeout.map((timeout) => new Failure.ConnectTimeout({ timeout })),
  fc.record({ timeout, phase }).map((fields) => new Failure.ReadTimeout(fields)),
  fc.record({ afterSend: fc.boolean(), detail: optional(fc.string()) }).map((fields) =>
    new Failure.ConnectionReset(fields)
  ),
  hintedFields.map((fields) => new Failure.RateLimited(fields)),
  responseFields.map((fields) => new Failure.QuotaExhausted(fields)),
  hintedFields.map((fields) => new Failure.ServerError(fields)),
  hintedFields.map((fields) => new Failure.Overloaded(fields)),
  responseFields.map((fields) => new Failure.ClientError(fields)),
  responseFields.map((fields) => new Failure.AuthenticationFailed(fields)),
  fc.tuple(responseFields, optional(fc.string())).map(([fields, model]) =>
    new Failure.ModelUnavailable({ ...fields, model })
  ),
  fc.record({ status, contentType: optional(fc.string()), excerpt: fc.string() }).map((fields) =>
    new Failure.NotJson(fields)
  ),
  fc.record({ status, limitBytes: fc.nat() }).map((fields) => new Failure.ResponseTooLarge(fields)),
  fc.array(fc.record({ path: fc.string(), message: fc.string() }), { maxLength: 8 }).map((issues) =>
    new Failure.ContractViolation({ issues })
  ),
  fc.record({
    // Only deadlines a `Date` can show: a finite one beyond ±8.64e15 ms cannot be reached by a clock.
    deadline: fc.oneof(fc.integer({ min: -8.64e15, max: 8.64e15 }), fc.constantFrom(Infinity, -Infinity, NaN)),
    phase: fc.constantFrom("before-attempt" as const, "attempt" as const, "sleep" as const, "queue" as const)
  }).map((fields) => new Failure.DeadlineExceeded(fields)),
  fc.record({ target: fc.string(), limit: fc.nat(), inFlight: fc.nat() }).map((fields) => new Failure.Shed(fields)),
  fc.record({
    target: fc.string(),
    dimension: fc.constantFrom("requests" as const, "tokens" as const),
    availableAt: fc.nat(),
    retryAfter: fc.nat().map(Duration.millis)
  }).map((fields) => new Failure.RateLimitedLocally(fields)),
  fc.string().map((reason) => new Failure.Cancelled({ reason }))
)

const alwaysTerminal: ReadonlySet<Failure.Failure["_tag"]> = new Set([
  "QuotaExhausted",
  "ModelUnavailable",
  "NotJson",
  "ResponseTooLarge",
  "ContractViolation",
  "DeadlineExceeded",
  "Shed",
  "RateLimitedLocally",
  "Cancelled"
])
const hasSpecialCode = (failure: Failure.Failure) =>
  "providerCode" in failure && failure.providerCode !== undefined && specialCodes.includes(failure.providerCode)
const shouldRetryOf = (failure: Failure.Failure) => "shouldRetry" in failure ? failure.shouldRetry : undefined

/** The documented invariants of the default table. */
const assertDefaultInvariants = (failure: Failure.Failure, verdict: Classifier.Verdict) => {
  const label = `${failure._tag} ${JSON.stringify(failure)}`
  assert.include(verdicts, verdict, label)
  if (alwaysTerminal.has(failure._tag) || hasSpecialCode(failure)) {
    // Whatever x-should-retry says: a spent quota or a missing model does not come back by waiting.
    assert.strictEqual(verdict, "terminal", label)
    return
  }
  const ambiguous = failure._tag === "ReadTimeout" || (failure._tag === "ConnectionReset" && failure.afterSend)
  assert.strictEqual(verdict === "ambiguous", ambiguous, label)
  const shouldRetry = shouldRetryOf(failure)
  if (shouldRetry !== undefined) {
    assert.strictEqual(verdict, shouldRetry ? "retryable" : "terminal", label)
    return
  }
  switch (failure._tag) {
    case "ConnectFailed":
    case "ConnectTimeout":
    case "RateLimited":
    case "ServerError":
    case "Overloaded":
      return assert.strictEqual(verdict, "retryable", label)
    case "ConnectionReset":
      return assert.strictEqual(verdict, failure.afterSend ? "ambiguous" : "retryable", label)
    case "AuthenticationFailed":
      return assert.strictEqual(verdict, "terminal", label)
    case "ClientError":
      return assert.strictEqual(verdict, [408, 409].includes(failure.status) ? "retryable" : "terminal", label)
  }
}

describe("Properties: classification", () => {
  it("the default and self-hosted classifiers give a verdict for every failure, and keep their invariants", () => {
    const tags = tally()
    const verdictsSeen = tally()
    fc.assert(
      fc.property(anyFailure, (failure) => {
        const verdict = Classifier.classifyDefault(failure)
        assertDefaultInvariants(failure, verdict)
        assert.strictEqual(Classifier.classifyDefault(failure), verdict, "the same failure, the same verdict")
        // A person reads the message when the call fails; it must exist for any fields.
        assert.isString(failure.message)

        const selfHosted = Targets.selfHostedClassifier.classify(failure)
        assert.include(verdicts, selfHosted)
        // A busy pool is never asked to replay, and retries only what the default table retries too.
        assert.notStrictEqual(selfHosted, "ambiguous")
        const nothingSent = failure._tag === "ConnectFailed" || failure._tag === "ConnectTimeout" ||
          (failure._tag === "ConnectionReset" && !failure.afterSend)
        assert.strictEqual(selfHosted === "retryable", nothingSent, failure._tag)
        if (selfHosted === "retryable") assert.strictEqual(verdict, "retryable", failure._tag)

        tags.add(failure._tag)
        verdictsSeen.add(verdict)
        if (shouldRetryOf(failure) === true && verdict === "terminal") verdictsSeen.add("x-should-retry overruled")
      }),
      runs(3000)
    )
    // A failure added to `Failure` without a generator here fails this, rather than going untested.
    assert.sameMembers(tags.keys(), [...Failures.failureTags])
    for (const tag of Failures.failureTags) assert.isAbove(tags.get(tag), 50, tag)
    for (const kind of [...verdicts, "x-should-retry overruled"]) assert.isAbove(verdictsSeen.get(kind), 50, kind)
  })

  it("every response from status 100 to 599 maps to a failure with a verdict", () => {
    const summary = fc.record(
      {
        providerCode: optional(providerCode),
        providerType: optional(fc.oneof(fc.constantFrom(...specialCodes, "overloaded_error"), fc.string())),
        detail: optional(fc.string()),
        retryAfter: optional(fc.nat().map(Duration.millis)),
        shouldRetry: optional(fc.boolean()),
        model: optional(fc.string())
      },
      { requiredKeys: [] }
    )
    const check = (response: Failures.ResponseSummary) => {
      const failure = Failures.fromResponse(response)
      assert.strictEqual(Failures.statusOf(failure), response.status)
      const verdict = Classifier.classifyDefault(failure)
      assertDefaultInvariants(failure, verdict)
      const kinds = [response.providerCode, response.providerType]
      if (kinds.some((kind) => kind !== undefined && Failures.quotaCodes.has(kind))) {
        assert.strictEqual(failure._tag, "QuotaExhausted")
      } else if (kinds.some((kind) => kind !== undefined && Failures.modelUnavailableCodes.has(kind))) {
        assert.strictEqual(failure._tag, "ModelUnavailable")
      }
      // The hint is kept exactly on the failures that may be retried, `x-should-retry` counted: an
      // exhausted quota and an unavailable model, which no wait fixes, drop it.
      const hinted = failure._tag !== "QuotaExhausted" && failure._tag !== "ModelUnavailable"
      assert.strictEqual(Failures.retryAfterOf(failure), hinted ? response.retryAfter : undefined, failure._tag)
      return verdict
    }
    for (let code = 100; code <= 599; code++) {
      const verdict = check({ status: code })
      const retryable = code >= 500 || code === 429 || code === 408 || code === 409
      assert.strictEqual(verdict, retryable ? "retryable" : "terminal", String(code))
    }
    fc.assert(fc.property(status, summary, (code, rest) => void check({ ...rest, status: code })), runs(2000))
  })
})

// ---------------------------------------------------------------------------------------------
// Backoff and the deadline

interface Stepped {
  /** What the decision asks to sleep, `undefined` when the schedule is done. */
  readonly delay: number | undefined
  readonly output: number
}

/** Steps a schedule by hand at `now`, as the retry loop does, without sleeping. */
const stepAll = <Out, In>(
  schedule: Schedule.Schedule<Out, In>,
  inputs: ReadonlyArray<In>,
  seed: number,
  now: number,
  outputMillis: (out: Out) => number
): ReadonlyArray<Stepped> =>
  Effect.runSync(
    Effect.gen(function*() {
      const stepper = EffectLine.stepperOf(schedule)
      const steps: Array<Stepped> = []
      for (const input of inputs) {
        const { delay, output } = yield* stepper.step(now, input)
        steps.push({ delay, output: outputMillis(output as Out) })
      }
      return steps
    }).pipe(seeded(seed))
  )

const serverError = new Failure.ServerError({ status: 500 })
const rateLimited = (hintMillis: number) =>
  new Failure.RateLimited({ status: 429, retryAfter: Duration.millis(hintMillis) })

const envelope = fc
  .tuple(
    fc.oneof(fc.integer({ min: 0, max: 5000 }), fc.double({ min: 0, max: 50, noNaN: true })),
    fc.oneof(fc.integer({ min: 0, max: 120_000 }), fc.double({ min: 0, max: 100, noNaN: true }))
  )
  .map(([base, cap]) => ({ base, cap }))

describe("Properties: Backoff", () => {
  it("full jitter: the n-th delay is whole milliseconds in [0, min(cap, base·2^n)]", () => {
    let nearTop = 0
    let nearZero = 0
    fc.assert(
      fc.property(
        envelope,
        fc.integer({ min: 1, max: 40 }),
        fc.integer(),
        fc.integer({ min: 0, max: 4e12 }),
        ({ base, cap }, retries, seed, now) => {
          const steps = stepAll(
            Backoff.fullJitter({ base, cap }),
            Array.from({ length: retries }, () => serverError),
            seed,
            now,
            Duration.toMillis
          )
          // As the schedule reads them: a Duration keeps whole nanoseconds.
          const [baseMillis, capMillis] = [base, cap].map((millis) => Duration.toMillis(Duration.millis(millis)))
          steps.forEach(({ delay, output }, n) => {
            const bound = Math.min(capMillis!, baseMillis! * 2 ** n)
            assert.isDefined(delay, "full jitter never ends by itself")
            assert.isTrue(Number.isInteger(delay), `delay ${delay}`)
            assert.isTrue(delay! >= 0 && delay! <= bound, `retry ${n}: ${delay} outside [0, ${bound}]`)
            assert.strictEqual(output, delay, "the output is the delay chosen")
            if (bound >= 100 && delay! >= 0.9 * bound) nearTop++
            if (bound >= 100 && delay! <= 0.1 * bound) nearZero++
          })
        }
      ),
      runs(300)
    )
    // Both ends of the range are drawn: the jitter is full, not a narrow band.
    assert.isAbove(nearTop, 100)
    assert.isAbove(nearZero, 100)
  })

  it("with the provider's hint: hint plus [0, min(spread, hint / 2)), the formula counting every failure", () => {
    const seen = tally()
    const input = fc.oneof(
      fc.constant(undefined),
      fc.oneof(fc.integer({ min: 0, max: 120_000 }), fc.integer({ min: 0, max: 200 }), fc.constant(0))
    )
    fc.assert(
      fc.property(
        envelope,
        fc.oneof(fc.integer({ min: 0, max: 5000 }), fc.double({ min: 0, max: 20, noNaN: true })),
        fc.array(input, { minLength: 1, maxLength: 20 }),
        fc.integer(),
        ({ base, cap }, spread, hints, seed) => {
          const failures = hints.map((hint) => hint === undefined ? serverError : rateLimited(hint))
          const schedule = Backoffs.fullJitterWithRetryAfter({ base, cap, spread })
          const steps = stepAll(schedule, failures, seed, 1_700_000_000_000, Duration.toMillis)
          steps.forEach(({ delay, output }, n) => {
            const hint = hints[n]
            assert.isDefined(delay)
            assert.strictEqual(output, delay)
            if (hint === undefined) {
              // The formula stepped on every earlier failure, hinted or not.
              assert.isTrue(delay! >= 0 && delay! <= Math.min(cap, base * 2 ** n), `retry ${n}: ${delay}`)
              seen.add("formula")
            } else {
              assert.isTrue(Number.isInteger(delay), `delay ${delay}`)
              assert.isAtLeast(delay!, hint)
              // Envoy's [reset, 1.5 × reset), capped by the spread: a zero hint is slept as zero.
              const bound = Math.min(spread, hint / 2)
              if (bound === 0) assert.strictEqual(delay, hint)
              else assert.isBelow(delay! - hint, bound)
              seen.add(delay! > hint ? "hint + spread" : "hint")
              if (hint > 0 && hint < 2 * spread && delay! > hint) seen.add("spread in proportion to the hint")
            }
          })
        }
      ),
      runs(300)
    )
    for (const kind of ["formula", "hint + spread", "hint", "spread in proportion to the hint"]) {
      assert.isAbove(seen.get(kind), 50, kind)
    }
  })

  it("with the provider's hint: a finite schedule still ends when it is done, hinted or not", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 6 }),
        fc.array(optional(fc.nat({ max: 10_000 })), { minLength: 8, maxLength: 12 }),
        fc.integer(),
        (recurs, hints, seed) => {
          const limited = Backoffs.withRetryAfter(Schedule.recurs(recurs), { spread: 10 })
          const failures = hints.map((hint) => hint === undefined ? serverError : rateLimited(hint))
          const steps = stepAll(limited, failures, seed, 0, Duration.toMillis)
          steps.forEach(({ delay }, n) => assert.strictEqual(delay === undefined, n >= recurs, `step ${n}`))
        }
      ),
      runs(100)
    )
  })
})

type Outcome = "server-error" | "rate-limited" | "connect-failed" | "read-timeout" | "client-error" | "success"

/** One scripted attempt: how long it runs and how it ends. */
interface ScriptStep {
  readonly outcome: Outcome
  readonly latency: number
  readonly hint: number
}

/**
 * Cases at two scales: seconds, as calls run, and a few milliseconds, where an attempt's end, a
 * sleep and the deadline often fall on the same instant.
 */
const deadlineCaseAt = (unit: number) => {
  const upTo = (max: number) =>
    fc.oneof(
      { weight: 1, arbitrary: fc.constant(0) },
      { weight: 4, arbitrary: fc.integer({ min: 0, max: Math.ceil(max * unit) }) }
    )
  const step: fc.Arbitrary<ScriptStep> = fc.record({
    outcome: fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom<Outcome>("server-error", "rate-limited", "connect-failed") },
      { weight: 2, arbitrary: fc.constantFrom<Outcome>("success", "read-timeout", "client-error") }
    ),
    latency: fc.oneof({ weight: 3, arbitrary: upTo(0.5) }, { weight: 1, arbitrary: upTo(25) }),
    hint: fc.oneof(upTo(3), upTo(15))
  })
  return fc
    .record({
      // Mostly a deadline that leaves room for a first attempt; sometimes one that does not.
      roomForOne: fc.oneof({ weight: 4, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
      timeout: fc.oneof(upTo(2), upTo(30)),
      maxAttempts: fc.integer({ min: 1, max: 8 }),
      baseDelay: upTo(2),
      extraDelay: upTo(8),
      minAttemptTime: upTo(1),
      extraAttemptTime: fc.integer({ min: 1, max: 20 * unit }),
      hintSpread: upTo(1),
      maxRetryAfter: upTo(10),
      replaySafe: fc.boolean(),
      seed: fc.integer(),
      script: fc.array(step, { minLength: 1, maxLength: 10 })
    })
    .map(({ roomForOne, ...c }) => ({
      ...c,
      timeout: roomForOne ? c.minAttemptTime + c.timeout : c.minAttemptTime > 0 ? c.timeout % c.minAttemptTime : 0
    }))
}
/**
 * A first attempt whose hint ends exactly `minAttemptTime` before the deadline: the boundary
 * where a `>` and a `>=` disagree (with a zero `minAttemptTime`, the sleep ends at the deadline).
 */
const hintEndsAtDeadline = deadlineCaseAt(1).map((c) => {
  const first = { ...c.script[0]!, outcome: "rate-limited" as const }
  const timeout = first.latency + first.hint + c.minAttemptTime
  return { ...c, hintSpread: 0, timeout, script: [first, ...c.script.slice(1)] }
})
/** A first attempt that fails with `outcome` within its attempt timeout. */
const firstFailing = (c: DeadlineCase, outcome: Outcome): ScriptStep => {
  const first = c.script[0]!
  return { ...first, outcome, latency: Math.min(first.latency, c.minAttemptTime + c.extraAttemptTime - 1) }
}
type DeadlineCase = typeof deadlineCaseAt extends (unit: number) => fc.Arbitrary<infer C> ? C : never

/**
 * A first attempt whose backoff (drawn as the policy will draw it) ends exactly `minAttemptTime`
 * before the deadline, or a millisecond later: the same boundary for the formula's own delay.
 */
const backoffEndsAtDeadline = fc.tuple(deadlineCaseAt(1), fc.boolean()).map(([c, late]) => {
  const first = firstFailing(c, "server-error")
  const schedule = Backoff.fullJitter({ base: c.baseDelay, cap: c.baseDelay + c.extraDelay })
  const [{ delay }] = stepAll(schedule, [serverError], c.seed, 0, Duration.toMillis) as [Stepped]
  const timeout = Math.max(0, first.latency + delay! + c.minAttemptTime - (late ? 1 : 0))
  return { ...c, timeout, script: [first, ...c.script.slice(1)] }
})
/**
 * A first attempt whose hint fits with one millisecond to spare but whose spread mostly does not:
 * where the spread must give way rather than the call give up.
 */
const spreadPastDeadline = deadlineCaseAt(1).map((c) => {
  const first = { ...firstFailing(c, "rate-limited"), hint: c.script[0]!.hint + 8 }
  const timeout = first.latency + first.hint + c.minAttemptTime + 1
  return {
    ...c,
    hintSpread: c.hintSpread + 4,
    maxRetryAfter: Math.max(c.maxRetryAfter, first.hint),
    timeout,
    script: [first, ...c.script.slice(1)]
  }
})
const deadlineCase = fc.oneof(
  deadlineCaseAt(1000),
  deadlineCaseAt(1),
  hintEndsAtDeadline,
  backoffEndsAtDeadline,
  spreadPastDeadline
)

const failureFor = (step: ScriptStep): Failure.Failure => {
  switch (step.outcome) {
    case "rate-limited":
      return rateLimited(step.hint)
    case "connect-failed":
      return new Failure.ConnectFailed({ detail: "ECONNREFUSED" })
    case "read-timeout":
      return new Failure.ReadTimeout({ timeout: Duration.seconds(1), phase: "body" })
    case "client-error":
      return new Failure.ClientError({ status: 400 })
    default:
      return serverError
  }
}

describe("Properties: Resilient.retry and the deadline", () => {
  it.effect("no attempt starts without minAttemptTime left, no sleep is wasted, and the call ends by the deadline", () =>
    Effect.gen(function*() {
      const seen = tally()
      yield* checkEach(deadlineCase, 200, (c) =>
        Effect.gen(function*() {
          const startedAt = yield* Clock.currentTimeMillis
          const target = freshTarget("deadline")
          const policy = policyOf({
            target,
            maxAttempts: c.maxAttempts,
            baseDelay: c.baseDelay,
            maxDelay: c.baseDelay + c.extraDelay,
            hintSpread: c.hintSpread,
            minAttemptTime: c.minAttemptTime,
            attemptTimeout: c.minAttemptTime + c.extraAttemptTime,
            maxRetryAfter: c.maxRetryAfter,
            replaySafe: c.replaySafe
          })
          const stepAt = (index: number) => c.script[Math.min(index, c.script.length - 1)]!
          const attempts: Array<{ readonly start: number; end: number }> = []
          const attempt = Effect.flatMap(Clock.currentTimeMillis, (start) => {
            const record = { start, end: Number.NaN }
            attempts.push(record)
            const step = stepAt(attempts.length - 1)
            const outcome = step.outcome === "success" ? Effect.succeed("ok") : Effect.fail(failureFor(step))
            return (step.latency > 0 ? Effect.andThen(Effect.sleep(step.latency), outcome) : outcome).pipe(
              Effect.ensuring(Effect.map(Clock.currentTimeMillis, (end) => {
                record.end = end
              }))
            )
          })
          const logs = yield* captureLogs
          const fiber = yield* EffectLine.fork(
            Effect.gen(function*() {
              const exit = yield* Effect.exit(attempt.pipe(Resilient.retry(policy, { timeout: c.timeout })))
              return { exit, end: yield* Clock.currentTimeMillis }
            }).pipe(seeded(c.seed), Effect.provide(Layer.merge(services(target), logs.layer)))
          )
          yield* TestClock.adjust("1 hour")
          const { end, exit } = yield* yield* finishedBy(fiber, "an hour")

          const deadline = startedAt + c.timeout
          const minimum = c.minAttemptTime
          for (const { start } of attempts) {
            assert.isTrue(deadline - start > 0 && deadline - start >= minimum, `attempt at ${start}`)
          }
          assert.strictEqual(attempts.length === 0, c.timeout <= 0 || c.timeout < minimum)
          assert.isAtMost(end, deadline)
          // A sequence stops right after an attempt, never after a sleep that led to none.
          assert.strictEqual(end, attempts.at(-1)?.end ?? startedAt)

          const failed = (yield* logs.lines).filter((line) => line.message.startsWith("attempt failed"))
          const retries = failed.filter((line) => line.message === "attempt failed, retrying")
          assert.strictEqual(retries.length, Math.max(0, attempts.length - 1), "every retry granted is attempted")
          // The delays the policy's schedule draws for these failures from the same seed: the
          // sleeps must be exactly these, so no other wait hides in the sequence.
          const inputs = failed.map((line, i) =>
            line.annotations.failure === "RateLimited" ? rateLimited(stepAt(i).hint) : serverError
          )
          const schedule = Backoffs.fullJitterWithRetryAfter({
            base: c.baseDelay,
            cap: c.baseDelay + c.extraDelay,
            spread: c.hintSpread
          })
          const delays = stepAll(schedule, inputs, c.seed, 0, () => 0).map(({ delay }) => delay!)
          retries.forEach((line, i) => {
            const slept = attempts[i + 1]!.start - attempts[i]!.end
            assert.strictEqual(line.annotations.retryInMs, slept)
            if (line.annotations.failure === "RateLimited") {
              assert.isAtMost(delays[i]!, c.maxRetryAfter + c.hintSpread)
              seen.add("slept on a hint")
            }
            if (slept === delays[i]) return
            // Only a hint's spread gives way, never the hint itself, and only as far as it must: the
            // next attempt starts at the last whole millisecond that leaves it its time.
            assert.strictEqual(line.annotations.failure, "RateLimited")
            assert.isBelow(slept, delays[i]!)
            assert.isAtLeast(slept, stepAt(i).hint)
            if (slept > stepAt(i).hint) assert.isAtMost(deadline - attempts[i + 1]!.start - minimum, 1)
            seen.add("spread cut to fit")
          })
          const last = failed.at(-1)?.annotations
          if (last?.stop === "deadline" && last.failure !== "DeadlineExceeded") {
            // It gave up only because the next attempt could not have had its time.
            const left = deadline - (attempts.at(-1)!.end + delays[failed.length - 1]!)
            assert.isTrue(left <= 0 || left < minimum, `${left} ms would have been left`)
            seen.add(left === 0 ? "deadline: sleep would end at the deadline" : "deadline: sleep would not fit")
          }
          if (last?.stop === "deadline" && last.failure === "DeadlineExceeded") seen.add("deadline: attempt cut")
          if (last?.stop === "retry-after-too-long") {
            // Longer than the policy sleeps, or than the call could wait with time for an attempt
            // left, while time for an attempt was left: another target could have had it.
            const hint = stepAt(failed.length - 1).hint
            const end = attempts.at(-1)!.end
            const fits = (wait: number) => deadline - (end + wait) > 0 && deadline - (end + wait) >= minimum
            if (hint <= c.maxRetryAfter) {
              assert.isFalse(fits(hint), `a hint of ${hint} ms fitted`)
              assert.isTrue(fits(0), "the time was gone")
              seen.add("retry-after-too-long: past the deadline")
            }
          }
          if (Exit.isSuccess(exit)) {
            seen.add("success")
          } else if (attempts.length === 0) {
            const failure = failureOf(exit)
            assert.strictEqual(failure.reason, "deadline")
            assert.deepStrictEqual(failure.last, new Failure.DeadlineExceeded({ deadline, phase: "before-attempt" }))
            seen.add(c.timeout > 0 ? "no attempt: too little time" : "no attempt: no time")
          } else {
            assert.strictEqual(failureOf(exit).reason, last?.stop)
            seen.add(String(last?.stop))
          }
          assert.isAtMost(attempts.length, c.maxAttempts)
          if (last?.stop === "attempts") assert.strictEqual(attempts.length, c.maxAttempts)
          if (attempts.length >= 3) seen.add("three or more attempts")
        }))
      for (
        const kind of [
          "success",
          "no attempt: too little time",
          "no attempt: no time",
          "deadline: sleep would not fit",
          "deadline: sleep would end at the deadline",
          "deadline: attempt cut",
          "attempts",
          "terminal",
          "not-replay-safe",
          "retry-after-too-long",
          "retry-after-too-long: past the deadline",
          "slept on a hint",
          "spread cut to fit",
          "three or more attempts"
        ]
      ) {
        assert.isAtLeast(seen.get(kind), 3, kind)
      }
    }))
})

// ---------------------------------------------------------------------------------------------
// The retry budget

interface BudgetOptions {
  readonly ratio: number
  readonly minPerSecond: number
  readonly bucketMillis: number
  readonly buckets: number
}

/** Whole-millisecond buckets, so the model's window is the budget's to the millisecond. */
const budgetOptions: fc.Arbitrary<BudgetOptions> = fc.record({
  // A ratio is a share of the successes: between 0 and 1, as the budget's rule says.
  ratio: fc.oneof(fc.constantFrom(0, 0.1, 0.5, 1), fc.double({ min: 0, max: 1, noNaN: true })),
  minPerSecond: fc.oneof(fc.constantFrom(0, 0.5, 1, 5), fc.double({ min: 0, max: 20, noNaN: true })),
  bucketMillis: fc.oneof(fc.constant(1000), fc.integer({ min: 1, max: 1000 })),
  buckets: fc.oneof(fc.constant(60), fc.integer({ min: 1, max: 20 }))
})

const windowMillisOf = (options: BudgetOptions) => options.bucketMillis * options.buckets
const settingsOf = (options: BudgetOptions): RetryBudget.Options => ({
  ratio: options.ratio,
  minPerSecond: options.minPerSecond,
  window: windowMillisOf(options),
  buckets: options.buckets
})

/**
 * The budget as its documentation states it, over a plain list of timestamps: the window is the
 * `buckets` whole buckets up to the one `now` falls in, and a retry is granted while the retries
 * in it, this one included, stay within `max(minPerSecond × window, ratio × successes in it)`.
 */
class ReferenceBudget {
  private readonly successes: Array<number> = []
  private readonly retries: Array<number> = []

  constructor(readonly options: BudgetOptions) {}

  private inWindow(times: ReadonlyArray<number>, now: number): number {
    const newest = Math.floor(now / this.options.bucketMillis)
    return times.filter((at) => Math.floor(at / this.options.bucketMillis) > newest - this.options.buckets).length
  }

  allowance(successes: number): number {
    return Math.max((this.options.minPerSecond * windowMillisOf(this.options)) / 1000, this.options.ratio * successes)
  }

  snapshot(now: number): RetryBudget.Snapshot {
    const successes = this.inWindow(this.successes, now)
    return { successes, retries: this.inWindow(this.retries, now), paid: 0, allowance: this.allowance(successes) }
  }

  tryAcquire(now: number): boolean {
    const { allowance, retries } = this.snapshot(now)
    if (retries + 1 > allowance) return false
    this.retries.push(now)
    return true
  }

  recordSuccess(now: number): void {
    this.successes.push(now)
  }
}

/**
 * The promise itself, with no buckets in it: when a retry is granted at `t`, the retries granted
 * in the last `window − bucket` ms never exceed the allowance of the successes of the last `window`
 * ms. (The budget's window slides a bucket at a time, so it covers between those two spans.) The
 * bound is the documented `max(floor, ratio × successes)`, tighter than their sum.
 */
const assertWithinAllowance = (
  options: BudgetOptions,
  grants: ReadonlyArray<number>,
  successes: ReadonlyArray<number>,
  now: number
) => {
  const window = windowMillisOf(options)
  const recentRetries = grants.filter((at) => at >= now - window + options.bucketMillis && at <= now).length
  const recentSuccesses = successes.filter((at) => at > now - window && at <= now).length
  const allowance = Math.max((options.minPerSecond * window) / 1000, options.ratio * recentSuccesses)
  assert.isAtMost(recentRetries, allowance, `at ${now}: ${recentRetries} retries, ${recentSuccesses} successes`)
}

type BudgetOp = "success" | "retry"

const budgetOp = fc.oneof(
  { weight: 2, arbitrary: fc.constant<BudgetOp>("success") },
  { weight: 3, arbitrary: fc.constant<BudgetOp>("retry") }
)
const waitMillis = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 0, max: 50 }),
  fc.integer({ min: 0, max: 2000 }),
  fc.integer({ min: 0, max: 30_000 })
)

/** Runs of operations at one instant, each after a clock move. */
const bursts = (maxBursts: number, maxOps: number) =>
  fc.array(fc.record({ wait: waitMillis, ops: fc.array(budgetOp, { maxLength: maxOps }) }), { maxLength: maxBursts })

const decisionTally = () => {
  const seen = tally()
  return {
    ...seen,
    decide: (model: ReferenceBudget, now: number, granted: boolean) => {
      const { successes } = model.snapshot(now)
      const aboveFloor =
        model.options.ratio * successes > (model.options.minPerSecond * windowMillisOf(model.options)) / 1000
      seen.add(granted ? (aboveFloor ? "granted on successes" : "granted on the floor") : "refused")
    }
  }
}

describe("Properties: RetryBudget", () => {
  it("the Window core decides as the reference model, and never grants beyond the allowance", () => {
    const seen = decisionTally()
    fc.assert(
      fc.property(budgetOptions, fc.integer({ min: 0, max: 2e12 }), bursts(40, 12), (options, start, plan) => {
        const window = new Budgets.Window(valid(Budgets.settings(settingsOf(options))))
        const model = new ReferenceBudget(options)
        const grants: Array<number> = []
        const successes: Array<number> = []
        let now = start
        for (const { ops, wait } of plan) {
          now += wait
          for (const op of ops) {
            if (op === "success") {
              window.recordSuccess(now)
              model.recordSuccess(now)
              successes.push(now)
              continue
            }
            const granted = window.tryAcquire(now)
            seen.decide(model, now, granted)
            assert.strictEqual(granted, model.tryAcquire(now), `retry at ${now}`)
            if (granted) {
              grants.push(now)
              assertWithinAllowance(options, grants, successes, now)
            }
          }
          assert.deepStrictEqual(window.snapshot(now), model.snapshot(now))
        }
      }),
      runs(400)
    )
    for (const kind of ["granted on successes", "granted on the floor", "refused"]) {
      assert.isAbove(seen.get(kind), 200, kind)
    }
  })

  it.effect("the in-memory service, on the TestClock, decides as the reference model", () =>
    Effect.gen(function*() {
      const seen = decisionTally()
      yield* checkEach(fc.tuple(budgetOptions, bursts(6, 15)), 60, ([options, plan]) =>
        Effect.gen(function*() {
          const budget = yield* Effect.orDie(RetryBudget.make(settingsOf(options)))
          const model = new ReferenceBudget(options)
          for (const { ops, wait } of plan) {
            if (wait > 0) yield* TestClock.adjust(wait)
            const now = yield* Clock.currentTimeMillis
            for (const op of ops) {
              if (op === "success") {
                yield* budget.recordSuccess(1)
                model.recordSuccess(now)
                continue
              }
              const granted = yield* budget.tryAcquire(serverError)
              seen.decide(model, now, granted)
              assert.strictEqual(granted, model.tryAcquire(now), `retry at ${now}`)
            }
            assert.deepStrictEqual(yield* budget.snapshot, model.snapshot(now))
          }
        }))
      for (const kind of ["granted on successes", "granted on the floor", "refused"]) {
        assert.isAbove(seen.get(kind), 20, kind)
      }
    }))
})
