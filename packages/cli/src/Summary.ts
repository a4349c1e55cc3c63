/**
 * A load's summary, rendered for a person (an aligned table) or for a program (one JSON object).
 *
 * The JSON keys are those of `Load.Summary` and are kept stable: scripts and dashboards read
 * them. Numbers stay numbers; a value that does not exist (a percentile of no calls, attempts per
 * success without a success) is `null`, never `NaN` or a string.
 */
import { count } from "./internal/wording.js"
import type * as Load from "./Load.js"

/** A row of the table: a label, a value, and an optional remark after it. */
interface Row {
  readonly label: string
  readonly value: string
  readonly note?: string | undefined
}

const decimal = (value: number | null, digits: number): string =>
  value === null
    ? "n/a"
    : value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })

const millis = (value: number | null): string => value === null ? "n/a" : `${decimal(value, 1)} ms`

const share = (part: number, whole: number): string | undefined =>
  whole === 0 ? undefined : `${decimal((100 * part) / whole, 1)}%`

const breakdown = (label: string, counts: Readonly<Record<string, number>>): ReadonlyArray<Row> => {
  const entries = Object.entries(counts)
  if (entries.length === 0) return [{ label, value: "none" }]
  return [{ label, value: "" }, ...entries.map(([key, calls]) => ({ label: `  ${key}`, value: count(calls) }))]
}

const inFlight = (summary: Load.Summary): string =>
  summary.concurrency < summary.concurrencyRequested
    ? `${count(summary.concurrency)} at a time (${count(summary.concurrencyRequested)} asked, capped at the ` +
      `target's gate)`
    : `${count(summary.concurrency)} at a time`

/** One line that says what was run: target, model, size, pacing and deadline. */
const heading = (summary: Load.Summary): string => {
  const parts = [
    `${count(summary.requests)} calls`,
    inFlight(summary),
    summary.ratePerSecond === null ? undefined : `${decimal(summary.ratePerSecond, 0)}/s`,
    summary.deadlineMs === null ? "no deadline" : `deadline ${count(summary.deadlineMs)} ms each`
  ].filter((part) => part !== undefined)
  return `${summary.kind} target "${summary.target}", model ${summary.model}: ${parts.join(", ")}`
}

/** Said under the heading of a load that was interrupted, so nobody reads its counts as a whole run. */
const interruption = (summary: Load.Summary): string =>
  `interrupted: ${count(summary.calls)} of ${count(summary.requests)} calls ended; ` +
  `${count(summary.callsInterrupted)} in flight were cancelled and are not counted`

/** The rows of the table, in the order a person reads a failure path: outcome, cost, time. */
const rows = (summary: Load.Summary): ReadonlyArray<Row> => [
  { label: "calls", value: count(summary.calls) },
  { label: "successes", value: count(summary.successes), note: share(summary.successes, summary.calls) },
  { label: "failures", value: count(summary.failures), note: share(summary.failures, summary.calls) },
  ...breakdown("failures by last failure", summary.failuresByTag),
  ...breakdown("failures by stop reason", summary.failuresByReason),
  { label: "attempts", value: count(summary.attempts) },
  { label: "attempts per success", value: decimal(summary.attemptsPerSuccess, 2) },
  { label: "retries", value: count(summary.retries) },
  {
    label: "retries that succeeded",
    value: count(summary.retriesSucceeded),
    note: share(summary.retriesSucceeded, summary.retries)
  },
  { label: "budget exhaustions", value: count(summary.budgetExhausted), note: "retries the budget refused" },
  { label: "deadline skips", value: count(summary.deadlineSkips), note: "attempts or sleeps not started" },
  { label: "shed", value: count(summary.shed), note: "refused at once by a full gate" },
  {
    label: "retries without a budget",
    value: count(summary.unbudgetedRetries),
    note: "at most, same attempt ceiling"
  },
  { label: "latency p50, successes", value: millis(summary.latencyMs.successes.p50) },
  { label: "latency p99, successes", value: millis(summary.latencyMs.successes.p99) },
  { label: "latency p50, failures", value: millis(summary.latencyMs.failures.p50) },
  { label: "latency p99, failures", value: millis(summary.latencyMs.failures.p99) },
  { label: "latency p50, all calls", value: millis(summary.latencyMs.all.p50) },
  { label: "latency p99, all calls", value: millis(summary.latencyMs.all.p99) },
  { label: "wall time", value: `${decimal(summary.wallMs / 1000, 2)} s` }
]

/** The summary as an aligned text table, one field a line, under a heading. */
export const table = (summary: Load.Summary): string => {
  const all = rows(summary)
  const labelWidth = Math.max(...all.map((row) => row.label.length))
  const valueWidth = Math.max(...all.map((row) => row.value.length))
  const lines = all.map((row) => {
    const line = `  ${row.label.padEnd(labelWidth)}  ${row.value.padStart(valueWidth)}`
    return row.note === undefined ? line.trimEnd() : `${line}  (${row.note})`
  })
  return [heading(summary), ...(summary.interrupted ? [interruption(summary)] : []), ...lines].join("\n")
}

/** The summary as a plain object with `Load.Summary`'s keys, ratios rounded to 3 decimals. */
const toJson = (summary: Load.Summary): Load.Summary => ({
  ...summary,
  attemptsPerSuccess: summary.attemptsPerSuccess === null
    ? null
    : Math.round(summary.attemptsPerSuccess * 1000) / 1000
})

/** The summary as one line of JSON. */
export const json = (summary: Load.Summary): string => JSON.stringify(toJson(summary))
