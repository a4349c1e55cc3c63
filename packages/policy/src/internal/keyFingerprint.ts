/**
 * The fingerprint of an API key: what a target's state is kept under, in memory and on Redis,
 * instead of the key.
 *
 * @internal
 */
import * as Redacted from "effect/Redacted"
import { sha256Hex } from "./sha256.js"

/**
 * The first 16 hexadecimal digits of the SHA-256 of the key's text (the keys of a fleet on Redis
 * have always been named after it); `undefined` without a key. Two `Redacted` holding one text
 * have one fingerprint.
 */
export const keyFingerprint = (apiKey: Redacted.Redacted | undefined): string | undefined =>
  apiKey === undefined ? undefined : sha256Hex(Redacted.value(apiKey)).slice(0, 16)
