/**
 * The retry budget's arithmetic, without Effect: its settings with the defaults filled in, the
 * allowance a window grants, and the window itself, shared by the budget in memory and the fleet's
 * budget on Redis.
 */
import { Either } from "#effect-line"
import * as Duration from "effect/Duration"
import type { Options, Snapshot } from "../RetryBudget.js"
import { BudgetSettings } from "./budgetRules.js"
import * as Checked from "./settings.js"
import { SlidingCounts } from "./slidingWindow.js"

/** `Options` with every default filled in. */
export interface Settings {
  readonly ratio: number
  readonly windowMillis: number
  readonly minPerSecond: number
  readonly buckets: number
  readonly shareWhenRetriesFail: number
}

const decodeSettings = Checked.decoder(BudgetSettings, () => "retry budget")

/** Fills in the defaults and checks the values; bad ones are one `InvalidSettings` naming each. */
export const settings = (options: Options = {}): Either.Either<Settings, Checked.InvalidSettings> =>
  Either.map(decodeSettings(options), ({ window, ...rest }) => ({ ...rest, windowMillis: Duration.toMillis(window) }))

/**
 * The settings with every default: a ratio of 0.1 over 60 seconds in 60 buckets, a floor of 5 per
 * second, all of it whether retries pay or not.
 */
export const defaults: Settings = {
  ratio: 0.1,
  windowMillis: 60_000,
  minPerSecond: 5,
  buckets: 60,
  shareWhenRetriesFail: 1
}

/**
 * Retries counted as having paid before any was seen: a budget starts out trusting retries, and a
 * handful that fail do not yet say they never pay.
 */
const trustedRetries = 2

/**
 * The share of the allowance a window keeps: `shareWhenRetriesFail` when none of its settled
 * retries paid, all of it when every one did, in proportion between (with `trustedRetries` counted
 * as paid). A retry still in flight has not settled: a burst of retries sent together is not
 * judged before any of them answers.
 */
export const payoff = (settings: Settings, paid: number, unpaid: number): number =>
  settings.shareWhenRetriesFail +
  (1 - settings.shareWhenRetriesFail) * ((paid + trustedRetries) / (paid + unpaid + trustedRetries))

/**
 * `payoff × max(floor, ratio × successes)`: the retries a window with `successes` allows. With a
 * `floorShare` below 1, only that share of the floor: what one process of a fleet may spend alone.
 */
export const allowance = (settings: Settings, successes: number, floorShare = 1, payoffShare = 1): number =>
  payoffShare *
  Math.max((floorShare * settings.minPerSecond * settings.windowMillis) / 1000, settings.ratio * successes)

/**
 * The budget's arithmetic without Effect, for callers that decide synchronously: the budget in
 * memory, `@resilient-ai/redis`'s, whose budget falls back to one in process, and the bench. Time is
 * passed in, so it is whatever clock the caller uses.
 */
export class Window {
  private readonly counts: SlidingCounts

  constructor(readonly settings: Settings) {
    this.counts = new SlidingCounts(settings.windowMillis, settings.buckets)
  }

  /** The share of the allowance this window keeps, from how many of its retries paid. */
  payoff(nowMillis: number): number {
    const { paid, unpaid } = this.counts.totals(nowMillis)
    return payoff(this.settings, paid, unpaid)
  }

  /** Grants a retry if the window allows one; `floorShare` as in `allowance`. */
  tryAcquire(nowMillis: number, floorShare = 1): boolean {
    const { paid, retries, successes, unpaid } = this.counts.totals(nowMillis)
    if (retries + 1 > allowance(this.settings, successes, floorShare, payoff(this.settings, paid, unpaid))) {
      return false
    }
    this.counts.add("retries", nowMillis)
    return true
  }

  /** Counts a retry granted elsewhere (by a fleet's budget), so the window knows what was spent. */
  recordRetry(nowMillis: number): void {
    this.counts.add("retries", nowMillis)
  }

  /** Counts a successful call, which took `attempts`: more than one, and its last retry paid. */
  recordSuccess(nowMillis: number, attempts = 1): void {
    this.counts.add("successes", nowMillis)
    if (attempts > 1) this.counts.add("paid", nowMillis)
  }

  /** Counts a failed attempt numbered `attempt`: above 1, a retry that did not pay. */
  recordFailure(nowMillis: number, attempt: number): void {
    if (attempt > 1) this.counts.add("unpaid", nowMillis)
  }

  snapshot(nowMillis: number): Snapshot {
    const { paid, retries, successes, unpaid } = this.counts.totals(nowMillis)
    return {
      successes,
      retries,
      paid,
      allowance: allowance(this.settings, successes, 1, payoff(this.settings, paid, unpaid))
    }
  }
}
