/**
 * The storm's report, as data: `section` runs one scenario under every policy and gives its table
 * (every policy a row), the goals the report must show with whether they hold, the data of its chart,
 * and every figure by policy. `resilient-ai storm` prints the tables and draws the charts.
 */
import * as Sections from "./internal/sections.js"

/** A table of figures: every policy (or algorithm) a row. */
export interface Table {
  readonly columns: ReadonlyArray<string>
  readonly rows: ReadonlyArray<ReadonlyArray<string>>
}

/** A goal the report must show, and whether this run shows it. */
export interface Goal {
  readonly text: string
  readonly met: boolean
  readonly evidence: string
}

/** A time series to chart: one line per policy. */
export interface Chart {
  /** What the x axis counts. */
  readonly x: string
  readonly panels: ReadonlyArray<{
    readonly title: string
    /**
     * A strip per `policy` rather than a line: each point a span from `x` to `x2`, coloured by its
     * `category` (a diagnosis over time).
     */
    readonly strip?: boolean | undefined
    readonly points: ReadonlyArray<{
      readonly x: number
      readonly y: number
      readonly policy: string
      readonly category?: string | undefined
      readonly x2?: number | undefined
    }>
  }>
  /** Charts with bars rather than lines (the contention experiment). */
  readonly bars?: boolean | undefined
}

/** One scenario's results. */
export interface Section {
  readonly id: string
  readonly title: string
  readonly setup: string
  readonly table: Table
  /** A second table, over time: the diagnosis of each policy that probes (S2, S7). */
  readonly timeline?: Table | undefined
  readonly goals: ReadonlyArray<Goal>
  readonly chart: Chart
  /** Figures by policy, for docs/storms.md and tests. */
  readonly figures: Readonly<Record<string, Readonly<Record<string, number | null>>>>
  readonly notes: ReadonlyArray<string>
  readonly wallMillis: number
}

/** The scenarios a storm can run. */
export type ScenarioId = "S1" | "S1b" | "S2" | "S3" | "S4" | "S5" | "S6" | "S7" | "contention"

/** Every scenario, in the order a storm runs them. */
export const scenarioIds: ReadonlyArray<ScenarioId> = ["S1", "S1b", "S2", "S3", "S4", "S5", "S6", "S7", "contention"]

/** Runs one scenario at full size. */
export const section = (
  id: ScenarioId,
  options: { readonly seed: number; readonly clients?: number | undefined; readonly scale?: number | undefined }
): Section => {
  const scale = options.scale ?? 1
  switch (id) {
    case "S1":
      return Sections.s1(options.seed, scale)
    case "S1b":
      return Sections.s1b(options.seed, scale)
    case "S2":
      return Sections.s2(options.seed, scale)
    case "S3":
      return Sections.s3(options.seed, options.clients ?? 200)
    case "S4":
      return Sections.s4(options.seed, scale)
    case "S5":
      return Sections.s5(options.seed, scale)
    case "S6":
      return Sections.s6(options.seed, scale)
    case "S7":
      return Sections.s7(options.seed, scale)
    case "contention":
      return Sections.contention(options.seed, options.clients ?? 100, scale < 1 ? 3 : 20)
  }
}
