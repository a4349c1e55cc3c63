/**
 * Where a target's settings are read from environment variables: shared by `Target.config` and the
 * readers that take variables without `Config` (`Targets.fromVariables`).
 */
import type * as Checked from "@resilient-ai/policy/internal/settings"

/** The environment variable of each setting, after the prefix and `_`. */
const variables: Checked.Variables = [
  [["baseUrl"], "BASE_URL"],
  [["model"], "MODEL"],
  [["apiKey"], "API_KEY"],
  [["attemptTimeout"], "ATTEMPT_TIMEOUT"],
  [["attemptTimeoutByModel"], "ATTEMPT_TIMEOUTS"],
  [["maxAttempts"], "MAX_ATTEMPTS"],
  [["baseDelay"], "BASE_DELAY"],
  [["maxDelay"], "MAX_DELAY"],
  [["hintSpread"], "HINT_SPREAD"],
  [["maxRetryAfter"], "MAX_RETRY_AFTER"],
  [["minAttemptTime"], "MIN_ATTEMPT_TIME"],
  [["replaySafe"], "REPLAY_SAFE"],
  [["propagateTrace"], "PROPAGATE_TRACE"],
  [["budget", "ratio"], "BUDGET_RATIO"],
  [["budget", "minPerSecond"], "BUDGET_MIN_PER_SECOND"],
  [["budget", "shareWhenRetriesFail"], "BUDGET_SHARE_WHEN_RETRIES_FAIL"],
  [["concurrency"], "CONCURRENCY"],
  [["requestsPerMinute"], "REQUESTS_PER_MINUTE"],
  [["tokensPerMinute"], "TOKENS_PER_MINUTE"],
  [["idempotencyHeader"], "IDEMPOTENCY_HEADER"],
  [["maxResponseBytes"], "MAX_RESPONSE_BYTES"],
  [["connectTimeout"], "CONNECT_TIMEOUT"],
  [["probeInterval"], "PROBE_INTERVAL"],
  [["probePath"], "PROBE_PATH"]
]

/** Where `config` reads the target `name` from: the variables under `prefix`. */
export const variablesOf = (prefix: string, name: string): Checked.FromVariables => ({
  prefix,
  variables,
  subject: `target ${name}`,
  fixed: { name }
})
