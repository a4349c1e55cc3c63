/**
 * Reads the provider's own answer to "when can I try again": `retry-after-ms` (milliseconds,
 * OpenAI-style) and `Retry-After` (seconds or an HTTP date, RFC 9110 §10.2.3).
 *
 * The hint beats any backoff formula: the formula is a guess about when capacity returns, the
 * header is the answer. A value that does not parse is no hint at all; a negative value or a date
 * in the past means "now". A rate-limited answer without one still says when its limit resets, in
 * the provider's rate-limit headers (`fromRateLimitHeaders`).
 */
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"

/** Response headers in any of the shapes HTTP libraries hand out. */
export type HeaderSource =
  | { readonly get: (name: string) => string | null | undefined }
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/** The first value of header `name` (lower case), whatever the shape of `headers`. */
export const header = (headers: HeaderSource, name: string): string | undefined => {
  if (typeof headers.get === "function") {
    return (headers as { readonly get: (name: string) => string | null | undefined }).get(name) ?? undefined
  }
  const record = headers as Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  for (const key in record) {
    if (key.toLowerCase() !== name) continue
    const value = record[key]
    const first = typeof value === "string" ? value : value?.[0]
    if (first !== undefined) return first
  }
  return undefined
}

const decimal = /^\s*-?(?:\d+(?:\.\d*)?|\.\d+)\s*$/
const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
const day = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
const longDay = "(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
const month = `(${months.join("|")})`
const time = "(\\d{2}):(\\d{2}):(\\d{2})"
// Each form captures day, month, year, hours, minutes, seconds, in that order.
const imfFixdate = new RegExp(`^${day}, (\\d{2}) ${month} (\\d{4}) ${time} GMT$`)
const rfc850Date = new RegExp(`^${longDay}, (\\d{2})-${month}-(\\d{2}) ${time} GMT$`)
const asctimeDate = new RegExp(`^${day} ${month} ( \\d|\\d{2}) ${time} (\\d{4})$`)

const utc = (
  year: number,
  monthName: string,
  dayOfMonth: number,
  hours: number,
  minutes: number,
  seconds: number
): number | undefined => {
  const monthIndex = months.indexOf(monthName)
  // Not `Date.UTC`, which reads years 0–99 as 1900–1999: a date in year 0042 is a date in the past.
  const date = new Date(0)
  date.setUTCFullYear(year, monthIndex, dayOfMonth)
  date.setUTCHours(hours, minutes, seconds)
  const millis = date.getTime()
  // The setters roll 31 Feb over to 3 Mar and 24:00 to the next day; an impossible date is no date.
  const exact = date.getUTCFullYear() === year && date.getUTCMonth() === monthIndex &&
    date.getUTCDate() === dayOfMonth && date.getUTCHours() === hours && date.getUTCMinutes() === minutes &&
    date.getUTCSeconds() === seconds
  return exact ? millis : undefined
}

/**
 * Parses an HTTP date in any of the three forms HTTP allows (RFC 9110 §5.6.7), to epoch
 * milliseconds; anything else, an impossible date included, is `undefined`.
 */
export const parseHttpDate = (value: string, nowMillis: number): number | undefined => {
  const text = value.trim()
  const imf = imfFixdate.exec(text)
  if (imf !== null) {
    const [, dd, mon, yyyy, hh, mm, ss] = imf
    return utc(Number(yyyy), mon!, Number(dd), Number(hh), Number(mm), Number(ss))
  }
  const rfc850 = rfc850Date.exec(text)
  if (rfc850 !== null) {
    const [, dd, mon, yy, hh, mm, ss] = rfc850
    // The year with those two digits in the hundred years around now: one more than 50 years ahead
    // is the most recent past one (RFC 9110), whatever century the clock is in.
    const thisYear = new Date(nowMillis).getUTCFullYear()
    const sameCentury = thisYear - (thisYear % 100) + Number(yy)
    const year = sameCentury > thisYear + 50
      ? sameCentury - 100
      : sameCentury <= thisYear - 50
      ? sameCentury + 100
      : sameCentury
    return utc(year, mon!, Number(dd), Number(hh), Number(mm), Number(ss))
  }
  const asctime = asctimeDate.exec(text)
  if (asctime !== null) {
    const [, mon, dd, hh, mm, ss, yyyy] = asctime
    return utc(Number(yyyy), mon!, Number(dd), Number(hh), Number(mm), Number(ss))
  }
  return undefined
}

const finiteMillis = (millis: number): Option.Option<Duration.Duration> =>
  Number.isFinite(millis) ? Option.some(Duration.millis(Math.max(0, millis))) : Option.none()

/** Parses a `Retry-After` value (seconds or HTTP date) relative to `nowMillis`. */
export const parseRetryAfter = (value: string, nowMillis: number): Option.Option<Duration.Duration> => {
  if (decimal.test(value)) return finiteMillis(Number(value) * 1000)
  const date = parseHttpDate(value, nowMillis)
  return date === undefined ? Option.none() : finiteMillis(date - nowMillis)
}

/** Parses a `retry-after-ms` value. */
export const parseRetryAfterMillis = (value: string): Option.Option<Duration.Duration> =>
  decimal.test(value) ? finiteMillis(Number(value)) : Option.none()

/**
 * The hint in a response's headers. `retry-after-ms` is more precise, so it wins when both parse;
 * a garbled one falls back to the other.
 */
export const fromHeaders = (headers: HeaderSource, nowMillis: number): Option.Option<Duration.Duration> => {
  const millis = header(headers, "retry-after-ms")
  const parsedMillis = millis === undefined ? Option.none() : parseRetryAfterMillis(millis)
  if (Option.isSome(parsedMillis)) return parsedMillis
  const seconds = header(headers, "retry-after")
  return seconds === undefined ? Option.none() : parseRetryAfter(seconds, nowMillis)
}

const goDurationPart = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g
const goDuration = /^(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$/
const millisPerUnit: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000
}

/**
 * Parses a duration as Go writes it (`20ms`, `1s`, `6m0s`, `1h2m3.5s`), OpenAI's form of a limit's
 * reset, to milliseconds; a bare number is seconds. Anything else is `undefined`.
 */
export const parseGoDuration = (value: string): number | undefined => {
  const text = value.trim()
  if (decimal.test(text)) return Number(text) * 1_000
  if (!goDuration.test(text)) return undefined
  let millis = 0
  for (const [, amount, unit] of text.matchAll(goDurationPart)) millis += Number(amount) * millisPerUnit[unit!]!
  return millis
}

const rfc3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/

/** The milliseconds from `nowMillis` to an RFC 3339 instant (Anthropic's form of a reset), or `undefined`. */
const untilInstant = (value: string, nowMillis: number): number | undefined => {
  const text = value.trim()
  if (!rfc3339.test(text)) return undefined
  const at = Date.parse(text)
  return Number.isFinite(at) ? at - nowMillis : undefined
}

/** Unix seconds are past 2001; anything smaller is seconds to wait (the IETF draft's `RateLimit-Reset`). */
const unixSecondsFrom = 1_000_000_000

/** The generic `X-RateLimit-Reset`: unix seconds, else as `Retry-After` reads (seconds to wait, or an HTTP date). */
const untilGenericReset = (value: string, nowMillis: number): number | undefined =>
  decimal.test(value) && Number(value) >= unixSecondsFrom
    ? Number(value) * 1_000 - nowMillis
    : Option.match(parseRetryAfter(value, nowMillis), { onNone: () => undefined, onSome: Duration.toMillis })

/** One limit a provider reports: its remaining-header, its reset-header, and how the reset reads. */
interface ReportedLimit {
  readonly remaining: string
  readonly reset: string
  readonly untilReset: (value: string, nowMillis: number) => number | undefined
}

const reportedLimits: ReadonlyArray<ReportedLimit> = [
  ...["requests", "tokens"].map((kind) => ({
    remaining: `x-ratelimit-remaining-${kind}`,
    reset: `x-ratelimit-reset-${kind}`,
    untilReset: parseGoDuration
  })),
  ...["requests", "tokens", "input-tokens", "output-tokens"].map((kind) => ({
    remaining: `anthropic-ratelimit-${kind}-remaining`,
    reset: `anthropic-ratelimit-${kind}-reset`,
    untilReset: untilInstant
  })),
  ...["x-ratelimit", "ratelimit"].map((prefix) => ({
    remaining: `${prefix}-remaining`,
    reset: `${prefix}-reset`,
    untilReset: untilGenericReset
  }))
]

/**
 * When a rate-limited answer that names no `Retry-After` can be tried again, from the provider's
 * rate-limit headers: the latest reset among the limits it reports spent (remaining 0, or a reset
 * with no remaining beside it), as OpenAI (`x-ratelimit-reset-requests: 1s`), Anthropic
 * (`anthropic-ratelimit-tokens-reset`, an RFC 3339 instant) and the generic `X-RateLimit-Reset`
 * write them. A limit with requests left is not what refused the call, an unknown remaining (Azure's
 * `-1`) says nothing, and a reset that is not in the future is no hint: the backoff decides then.
 */
export const fromRateLimitHeaders = (headers: HeaderSource, nowMillis: number): Option.Option<Duration.Duration> => {
  let latest: number | undefined
  for (const limit of reportedLimits) {
    const reset = header(headers, limit.reset)
    if (reset === undefined) continue
    const remaining = header(headers, limit.remaining)?.trim()
    if (remaining !== undefined && !(decimal.test(remaining) && Number(remaining) === 0)) continue
    const millis = limit.untilReset(reset, nowMillis)
    if (millis !== undefined && Number.isFinite(millis) && millis > 0 && (latest === undefined || millis > latest)) {
      latest = millis
    }
  }
  return latest === undefined ? Option.none() : Option.some(Duration.millis(latest))
}
