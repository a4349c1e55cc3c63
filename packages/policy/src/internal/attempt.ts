/**
 * The attempt a fiber is running, as the transport reads it: `Resilient` re-exports both names.
 * Kept apart from the engine so a transport's import of it loads nothing else.
 */
import * as FiberRef from "effect/FiberRef"
import { globalValue } from "effect/GlobalValue"

/** What an attempt knows about itself; transports read it to set timeouts and idempotency keys. */
export interface AttemptInfo {
  /** The same for every attempt of one logical call: use it as the idempotency key. */
  readonly requestId: string
  /** 1 for the first attempt. */
  readonly attempt: number
  readonly target: string
  /** When this attempt's time runs out, in epoch milliseconds of Effect's `Clock`. */
  readonly deadline: number
  readonly replaySafe: boolean
  /**
   * Says how far the attempt got: `"headers"` once the request is on its way and the answer's
   * headers are awaited, `"body"` once they arrived. If the attempt's time runs out, the
   * `ReadTimeout` names the phase it stalled in.
   */
  readonly enter: (phase: "headers" | "body") => void
  /** Adds a key to this attempt's log line: token usage, the provider's own request id. */
  readonly annotate: (key: string, value: unknown) => void
  /**
   * Sets an attribute of the attempt's span, and of the call's once this attempt's value is the
   * call's: what the answer says of itself (OpenTelemetry's `gen_ai.response.id`,
   * `gen_ai.usage.input_tokens`). Nothing while no span is recorded.
   */
  readonly spanAttribute: (key: string, value: unknown) => void
  /** The tokens the provider says the attempt used: its rate limiter's reservation is settled with them. */
  readonly reportUsage: (tokens: number) => void
  /** The limits the provider stated in its answer's headers (`RateLimiter.limitsOf`): the limiter learns them. */
  readonly reportLimits: (
    limits: { readonly requestsPerMinute?: number | undefined; readonly tokensPerMinute?: number | undefined }
  ) => void
}

/** The attempt the current fiber is running, inside a resilient call; `undefined` outside one. */
export const CurrentAttempt: FiberRef.FiberRef<AttemptInfo | undefined> = globalValue(
  "@resilient-ai/policy/Resilient/CurrentAttempt",
  () => FiberRef.unsafeMake<AttemptInfo | undefined>(undefined, { join: (parent) => parent })
)
