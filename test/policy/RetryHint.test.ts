import { assert, describe, it } from "@effect/vitest"
import { RetryHint } from "@resilient-ai/policy/internal"
import { Duration, Option } from "effect"

/** The example date of RFC 9110 §5.6.7, `Sun, 06 Nov 1994 08:49:37 GMT`, in epoch milliseconds. */
const exampleDate = 784111777000

/** A hint as milliseconds, `undefined` for no hint, so `Some(zero)` and `None` stay apart. */
const millisOf = (hint: Option.Option<Duration.Duration>): number | undefined =>
  Option.match(hint, { onNone: () => undefined, onSome: Duration.toMillis })

describe("RetryHint", () => {
  describe("parseRetryAfter", () => {
    it("reads integer seconds", () => {
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter("7", 0)), 7000)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter("120", exampleDate)), 120_000)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter("0", 0)), 0)
    })

    it("reads decimal seconds", () => {
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter("1.5", 0)), 1500)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter("0.25", 0)), 250)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter(".5", 0)), 500)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter("3.", 0)), 3000)
    })

    it("tolerates surrounding whitespace", () => {
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter(" 2 ", 0)), 2000)
      assert.strictEqual(
        millisOf(RetryHint.parseRetryAfter("  Sun, 06 Nov 1994 08:49:37 GMT ", exampleDate - 1000)),
        1000
      )
    })

    it("reads an IMF-fixdate relative to now, to the millisecond", () => {
      assert.strictEqual(
        millisOf(RetryHint.parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", exampleDate - 30_500)),
        30_500
      )
    })

    it("reads an RFC 850 date relative to now, to the millisecond", () => {
      assert.strictEqual(
        millisOf(RetryHint.parseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", exampleDate - 12_345)),
        12_345
      )
    })

    it("reads an asctime date relative to now, to the millisecond", () => {
      assert.strictEqual(
        millisOf(RetryHint.parseRetryAfter("Sun Nov  6 08:49:37 1994", exampleDate - 61_001)),
        61_001
      )
    })

    it("gives zero for a date in the past", () => {
      for (
        const value of [
          "Sun, 06 Nov 1994 08:49:37 GMT",
          "Sunday, 06-Nov-94 08:49:37 GMT",
          "Sun Nov  6 08:49:37 1994"
        ]
      ) {
        assert.strictEqual(millisOf(RetryHint.parseRetryAfter(value, exampleDate + 5000)), 0, value)
      }
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", exampleDate)), 0)
    })

    it("gives zero for a negative number", () => {
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter("-5", 0)), 0)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter("-0.5", 0)), 0)
    })

    it("gives no hint for garbage", () => {
      for (
        const value of [
          "soon",
          "",
          " ",
          "1e3",
          "12abc",
          "Tue",
          "+5",
          "0x10",
          "Infinity",
          "NaN",
          "1.2.3",
          "- 5",
          "Sun, 06 Nov 1994 08:49:37 UTC",
          "Sun, 6 Nov 1994 08:49:37 GMT",
          "06 Nov 1994 08:49:37 GMT",
          "Sun, 06 Nov 1994 25:61:61 GMT",
          "Sunday, 06-Nov-1994 08:49:37 GMT",
          "Sun Nov 6 08:49:37 1994"
        ]
      ) {
        assert.strictEqual(millisOf(RetryHint.parseRetryAfter(value, exampleDate)), undefined, JSON.stringify(value))
      }
    })
  })

  describe("parseHttpDate", () => {
    it("reads each of the three forms to the same epoch milliseconds", () => {
      assert.strictEqual(RetryHint.parseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT", 0), exampleDate)
      assert.strictEqual(RetryHint.parseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT", exampleDate), exampleDate)
      assert.strictEqual(RetryHint.parseHttpDate("Sun Nov  6 08:49:37 1994", 0), exampleDate)
      assert.strictEqual(RetryHint.parseHttpDate("Thu Nov 16 08:49:37 1994", 0), exampleDate + 10 * 86_400_000)
    })

    it("puts a two-digit year more than 50 years ahead in the past century", () => {
      const now = Date.UTC(2026, 10, 29, 20, 0, 0)
      assert.strictEqual(RetryHint.parseHttpDate("Wednesday, 06-Nov-30 08:49:37 GMT", now), 1920185377000)
      assert.strictEqual(RetryHint.parseHttpDate("Friday, 06-Nov-76 08:49:37 GMT", now), 3371878177000)
      assert.strictEqual(RetryHint.parseHttpDate("Sunday, 06-Nov-77 08:49:37 GMT", now), 247654177000)
      assert.strictEqual(RetryHint.parseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT", now), exampleDate)
    })

    it("reads a two-digit year in the hundred years around the clock's now, whatever its century", () => {
      const yearOf = (text: string, now: number) => new Date(RetryHint.parseHttpDate(text, now)!).getUTCFullYear()
      // TestClock starts at 1970: "21" is 1921, as 2021 would be 51 years ahead; "20" is 2020, 50 ahead.
      assert.strictEqual(yearOf("Sunday, 06-Nov-21 08:49:37 GMT", 0), 1921)
      assert.strictEqual(yearOf("Friday, 06-Nov-20 08:49:37 GMT", 0), 2020)
      assert.strictEqual(yearOf("Saturday, 06-Nov-99 08:49:37 GMT", 0), 1999)
      // Late in a century, a small year is the next century's.
      assert.strictEqual(yearOf("Tuesday, 06-Nov-05 08:49:37 GMT", Date.UTC(2095, 0, 1)), 2105)
    })

    it("rejects anything else", () => {
      assert.strictEqual(RetryHint.parseHttpDate("120", 0), undefined)
      assert.strictEqual(RetryHint.parseHttpDate("1994-11-06T08:49:37Z", 0), undefined)
      assert.strictEqual(RetryHint.parseHttpDate("Tue", 0), undefined)
    })
  })

  describe("years 0 to 99", () => {
    it("are those years, not 1900–1999, so such a date is in the past", () => {
      const year42 = new Date("0042-03-01T12:00:00Z").getTime()
      assert.strictEqual(RetryHint.parseHttpDate("Sat, 01 Mar 0042 12:00:00 GMT", 0), year42)
      assert.strictEqual(RetryHint.parseHttpDate("Sat Mar  1 12:00:00 0042", 0), year42)
      assert.strictEqual(
        RetryHint.parseHttpDate("Sun, 29 Feb 0004 00:00:00 GMT", 0),
        new Date("0004-02-29T00:00:00Z").getTime()
      )
      assert.strictEqual(millisOf(RetryHint.parseRetryAfter("Sat, 01 Mar 0042 12:00:00 GMT", exampleDate)), 0)
      // Year 0 is a leap year; 1900, which `Date.UTC` would have read "00" as, is not.
      assert.isDefined(RetryHint.parseHttpDate("Tue, 29 Feb 0000 00:00:00 GMT", 0))
      assert.isUndefined(RetryHint.parseHttpDate("Mon, 29 Feb 0100 00:00:00 GMT", 0))
    })
  })

  describe("impossible values", () => {
    it("are no date, not a date rolled over", () => {
      for (
        const value of [
          "Tue, 31 Feb 1994 08:49:37 GMT",
          "Sun, 06 Nov 1994 24:00:00 GMT",
          "Sun, 06 Nov 1994 08:60:37 GMT",
          "Sunday, 32-Nov-94 08:49:37 GMT",
          "Sun Nov 31 08:49:37 1994"
        ]
      ) {
        assert.isUndefined(RetryHint.parseHttpDate(value, 0), value)
      }
    })

    it("are no hint when the number does not fit in a duration", () => {
      assert.isUndefined(millisOf(RetryHint.parseRetryAfter("9".repeat(400), 0)))
      assert.isUndefined(millisOf(RetryHint.parseRetryAfterMillis("9".repeat(400))))
    })
  })

  describe("parseRetryAfterMillis", () => {
    it("reads milliseconds, negative as zero, garbage as no hint", () => {
      assert.strictEqual(millisOf(RetryHint.parseRetryAfterMillis("250")), 250)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfterMillis("1.5")), 1.5)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfterMillis("0")), 0)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfterMillis("-20")), 0)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfterMillis("soon")), undefined)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfterMillis("")), undefined)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfterMillis("1e3")), undefined)
      assert.strictEqual(millisOf(RetryHint.parseRetryAfterMillis("Sun, 06 Nov 1994 08:49:37 GMT")), undefined)
    })
  })

  describe("fromHeaders", () => {
    it("skips a header key whose value is undefined and reads the next spelling", () => {
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "Retry-After": undefined, "retry-after": "5" }, 0)), 5000)
    })

    it("reads retry-after-ms in milliseconds", () => {
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "retry-after-ms": "1500" }, 0)), 1500)
    })

    it("reads retry-after in seconds or as a date", () => {
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "retry-after": "3" }, 0)), 3000)
      assert.strictEqual(
        millisOf(RetryHint.fromHeaders({ "retry-after": "Sun, 06 Nov 1994 08:49:37 GMT" }, exampleDate - 4200)),
        4200
      )
    })

    it("prefers retry-after-ms when both parse", () => {
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "retry-after": "7", "retry-after-ms": "250" }, 0)), 250)
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "retry-after-ms": "250", "retry-after": "7" }, 0)), 250)
      // "now" from retry-after-ms is still a hint, and still wins
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "retry-after-ms": "-20", "retry-after": "7" }, 0)), 0)
    })

    it("falls back to retry-after when retry-after-ms is garbled or absent", () => {
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "retry-after-ms": "abc", "retry-after": "7" }, 0)), 7000)
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "retry-after-ms": "", "retry-after": "7" }, 0)), 7000)
      assert.strictEqual(
        millisOf(RetryHint.fromHeaders({ "retry-after-ms": undefined, "retry-after": "7" }, 0)),
        7000
      )
    })

    it("gives no hint when neither header parses or is present", () => {
      assert.strictEqual(millisOf(RetryHint.fromHeaders({}, 0)), undefined)
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "content-type": "application/json" }, 0)), undefined)
      assert.strictEqual(
        millisOf(RetryHint.fromHeaders({ "retry-after-ms": "x", "retry-after": "soon" }, 0)),
        undefined
      )
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "retry-after": [] }, 0)), undefined)
    })

    it("matches header names case-insensitively in a record", () => {
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "Retry-After": "3" }, 0)), 3000)
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "RETRY-AFTER": "4" }, 0)), 4000)
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "Retry-After-Ms": "125", "Retry-After": "4" }, 0)), 125)
    })

    it("takes the first value of an array-valued header", () => {
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "retry-after": ["4", "9"] }, 0)), 4000)
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ "retry-after-ms": ["300"], "retry-after": "4" }, 0)), 300)
    })

    it("reads a WHATWG Headers", () => {
      const both = new Headers({ "Retry-After": "7", "Retry-After-Ms": "1250" })
      assert.strictEqual(millisOf(RetryHint.fromHeaders(both, 0)), 1250)
      const dateOnly = new Headers({ "Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT" })
      assert.strictEqual(millisOf(RetryHint.fromHeaders(dateOnly, exampleDate - 9000)), 9000)
      const garbled = new Headers({ "retry-after-ms": "later", "retry-after": "2.5" })
      assert.strictEqual(millisOf(RetryHint.fromHeaders(garbled, 0)), 2500)
      assert.strictEqual(millisOf(RetryHint.fromHeaders(new Headers(), 0)), undefined)
    })

    it("reads any object with get, asking for lower-case names", () => {
      const asked: Array<string> = []
      const values = new Map([["retry-after", "6"]])
      const headers = {
        get: (name: string) => {
          asked.push(name)
          return values.get(name) ?? null
        }
      }
      assert.strictEqual(millisOf(RetryHint.fromHeaders(headers, 0)), 6000)
      assert.deepStrictEqual(asked, ["retry-after-ms", "retry-after"])
      assert.strictEqual(millisOf(RetryHint.fromHeaders({ get: () => undefined }, 0)), undefined)
    })
  })

  describe("parseGoDuration", () => {
    it("reads the durations OpenAI writes a limit's reset in", () => {
      assert.strictEqual(RetryHint.parseGoDuration("20ms"), 20)
      assert.strictEqual(RetryHint.parseGoDuration("1s"), 1_000)
      assert.strictEqual(RetryHint.parseGoDuration("6m0s"), 360_000)
      assert.strictEqual(RetryHint.parseGoDuration("1h2m3.5s"), 3_723_500)
      assert.strictEqual(RetryHint.parseGoDuration("1.5s"), 1_500)
      assert.strictEqual(RetryHint.parseGoDuration("250us"), 0.25)
      assert.strictEqual(RetryHint.parseGoDuration(" 2 "), 2_000)
    })

    it("reads nothing else", () => {
      for (const text of ["", "s", "1x", "1 s", "ms20", "1s2", "-1s", "1d", "one second"]) {
        assert.isUndefined(RetryHint.parseGoDuration(text), text)
      }
    })
  })

  describe("fromRateLimitHeaders", () => {
    const now = Date.parse("2026-12-01T10:00:00Z")
    const hint = (headers: Record<string, string>) => millisOf(RetryHint.fromRateLimitHeaders(headers, now))

    it("waits for the latest reset among the limits reported spent", () => {
      assert.strictEqual(
        hint({
          "x-ratelimit-remaining-requests": "0",
          "x-ratelimit-reset-requests": "1s",
          "x-ratelimit-remaining-tokens": "0",
          "x-ratelimit-reset-tokens": "6m0s"
        }),
        360_000
      )
      // Only the tokens are spent: the requests' reset is not when the call can pass.
      assert.strictEqual(
        hint({
          "x-ratelimit-remaining-requests": "59",
          "x-ratelimit-reset-requests": "1s",
          "x-ratelimit-remaining-tokens": "0",
          "x-ratelimit-reset-tokens": "20ms"
        }),
        20
      )
    })

    it("reads Anthropic's RFC 3339 instants", () => {
      assert.strictEqual(
        hint({
          "anthropic-ratelimit-requests-remaining": "12",
          "anthropic-ratelimit-requests-reset": "2026-12-01T10:00:30Z",
          "anthropic-ratelimit-input-tokens-remaining": "0",
          "anthropic-ratelimit-input-tokens-reset": "2026-12-01T10:00:02.5Z"
        }),
        2_500
      )
      assert.strictEqual(
        hint({
          "anthropic-ratelimit-tokens-remaining": "0",
          "anthropic-ratelimit-tokens-reset": "2026-12-01T11:00:01+01:00"
        }),
        1_000
      )
    })

    it("reads the generic X-RateLimit-Reset as unix seconds, seconds to wait, or a date", () => {
      assert.strictEqual(hint({ "x-ratelimit-remaining": "0", "x-ratelimit-reset": String(now / 1000 + 7) }), 7_000)
      assert.strictEqual(hint({ "x-ratelimit-reset": "5" }), 5_000)
      assert.strictEqual(hint({ "RateLimit-Reset": "3" }), 3_000)
      assert.strictEqual(hint({ "x-ratelimit-reset": "Tue, 01 Dec 2026 10:00:09 GMT" }), 9_000)
    })

    it("gives no hint when nothing reported is spent, unknown, or resetting in the past", () => {
      assert.isUndefined(hint({}))
      assert.isUndefined(hint({ "x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "1s" }))
      // Azure OpenAI's -1: unknown.
      assert.isUndefined(hint({ "x-ratelimit-remaining-tokens": "-1", "x-ratelimit-reset-tokens": "1s" }))
      assert.isUndefined(hint({ "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "0s" }))
      assert.isUndefined(hint({ "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "soon" }))
      assert.isUndefined(
        hint({
          "anthropic-ratelimit-tokens-remaining": "0",
          "anthropic-ratelimit-tokens-reset": "2026-12-01T09:59:59Z"
        })
      )
      assert.isUndefined(hint({ "x-ratelimit-remaining": "0", "x-ratelimit-reset": String(now / 1000 - 5) }))
    })
  })
})
