import * as Redacted from "effect/Redacted"
import { createHash } from "node:crypto"

/**
 * A short, stable fingerprint of an API key: budgets and gates are shared per key, but the key
 * itself never reaches Redis (nor its logs, nor its dumps).
 */
const fingerprint = (apiKey: Redacted.Redacted | undefined): string =>
  apiKey === undefined ? "no-key" : createHash("sha256").update(Redacted.value(apiKey)).digest("hex").slice(0, 16)

/**
 * The key of `kind` for a target and API key, under `prefix`. Every key of one target and key
 * carries the same hash tag, `{target:fingerprint}`, the only part a Redis Cluster hashes: a script
 * that touches several of them finds them in one slot instead of failing with CROSSSLOT. Neither
 * the prefix (its rule) nor the target (URI-encoded) can hold a brace to end the tag early.
 */
export const keyFor = (
  prefix: string,
  kind: string,
  target: string,
  apiKey: Redacted.Redacted | undefined,
  part?: string
): string =>
  [prefix, `{${encodeURIComponent(target)}:${fingerprint(apiKey)}}`, kind, ...(part === undefined ? [] : [part])]
    .join(":")
