/**
 * The key of `kind` for a target and an API key's fingerprint (as the `Coordination` gives it: the
 * key itself never reaches Redis, nor its logs, nor its dumps), under `prefix`. Every key of one
 * target and key carries the same hash tag, `{target:fingerprint}`, the only part a Redis Cluster
 * hashes: a script that touches several of them finds them in one slot instead of failing with
 * CROSSSLOT. Neither the prefix (its rule) nor the target (URI-encoded) can hold a brace to end the
 * tag early, nor can a fingerprint (hexadecimal digits).
 */
export const keyFor = (
  prefix: string,
  kind: string,
  target: string,
  keyFingerprint: string | undefined,
  part?: string
): string =>
  [prefix, `{${encodeURIComponent(target)}:${keyFingerprint ?? "no-key"}}`, kind, ...(part === undefined ? [] : [part])]
    .join(":")
