/**
 * `resilient-ai storm`: runs the storm simulator's scenarios under every policy, prints a table
 * per scenario with the goals it must show, and writes a report folder: `report.md`, an SVG chart
 * per scenario, and `figures.json` with every figure, so docs/storms.md quotes numbers the command
 * produced.
 */
import { FileSystem, Path } from "#cli-line"
import { StormReport } from "@resilient-ai/storm"
import { StormRender } from "@resilient-ai/storm/internal"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"

/** Settings of a storm run. */
export interface Options {
  readonly scenarios: ReadonlyArray<StormReport.ScenarioId>
  /** S3's burst size and the contention experiment's clients; their defaults (200, 100) otherwise. */
  readonly clients?: number | undefined
  readonly seed: number
  /** The report folder; nothing is written without it. */
  readonly out?: string | undefined
  /** The command line, quoted in the report. */
  readonly command: string
}

const goalLine = (goal: StormReport.Goal) => `  ${goal.met ? "✓" : "✗"} ${goal.text}: ${goal.evidence}`

/** Runs the scenarios one after another, printing each table as soon as it is ready. */
export const run = (
  options: Options
): Effect.Effect<ReadonlyArray<StormReport.Section>, unknown, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const sections: Array<StormReport.Section> = []
    for (const id of options.scenarios) {
      const section = yield* Effect.sync(() =>
        StormReport.section(id, { seed: options.seed, clients: options.clients })
      )
      sections.push(section)
      yield* Console.log(
        [
          "",
          `${section.title}  (${(section.wallMillis / 1000).toFixed(1)} s)`,
          StormRender.textTable(section.table),
          ...(section.timeline === undefined ? [] : ["", StormRender.textTable(section.timeline)]),
          ...section.goals.map(goalLine)
        ].join("\n")
      )
    }
    if (options.out !== undefined) {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      yield* fs.makeDirectory(options.out, { recursive: true })
      for (const section of sections) {
        const svg = yield* Effect.promise(() => StormRender.svg(section.chart, section.title))
        yield* fs.writeFileString(path.join(options.out, `${section.id.toLowerCase()}.svg`), svg)
      }
      yield* fs.writeFileString(
        path.join(options.out, "report.md"),
        StormRender.markdown(sections, { seed: options.seed, command: options.command })
      )
      const figures = Object.fromEntries(
        sections.map((section) => [
          section.id,
          { figures: section.figures, goals: section.goals.map(({ met, text }) => ({ text, met })) }
        ])
      )
      yield* fs.writeFileString(
        path.join(options.out, "figures.json"),
        JSON.stringify({ seed: options.seed, command: options.command, scenarios: figures }, null, 2) + "\n"
      )
      yield* Console.log(`\nreport written to ${path.join(options.out, "report.md")}`)
    }
    return sections
  })
