/**
 * Keeps the API key inside the `Authorization` header. A provider or a proxy may quote the key
 * back (an "Incorrect API key provided: sk-…" message, a debug page echoing the request), and
 * whatever it says becomes a failure's detail, excerpt or issue — then a log line and an error
 * report. So every failure the transport returns has the key taken out of its text.
 */
import type * as Failure from "@resilient-ai/policy/Failure"
import * as Redacted from "effect/Redacted"

/** What a secret becomes in text. */
const hidden = "<redacted>"

/** `text` with every occurrence of `secret` hidden. */
const withoutSecret = (text: string, secret: string): string => secret === "" ? text : text.split(secret).join(hidden)

const scrub = (value: unknown, secret: string): unknown => {
  if (typeof value === "string") return withoutSecret(value, secret)
  if (Array.isArray(value)) return value.map((item) => scrub(item, secret))
  if (typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, scrub(item, secret)]))
  }
  return value
}

/**
 * `failure` with `apiKey` hidden in every text it carries, its nested issues included. The
 * failure is one the transport just made, so its fields are rewritten in place.
 */
export const scrubFailure = <F extends Failure.Failure>(failure: F, apiKey: Redacted.Redacted | undefined): F => {
  if (apiKey === undefined) return failure
  const secret = Redacted.value(apiKey)
  const fields = failure as unknown as Record<string, unknown>
  for (const key of Object.keys(fields)) fields[key] = scrub(fields[key], secret)
  return failure
}
