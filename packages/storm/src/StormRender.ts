/**
 * Draws the storm report's figures (`StormReport`): a table as aligned text for a terminal or as
 * Markdown, a chart as SVG, and the Markdown report that puts the sections together.
 *
 * Charts are Vega-Lite specifications rendered to SVG by Vega, headless, so the report is made
 * the same way on every machine, with no browser.
 */
import type * as VegaLite from "vega-lite"
import * as StormPolicies from "./StormPolicies.js"
import type { Chart, Section, Table } from "./StormReport.js"

/**
 * Vega and Vega-Lite, loaded by the first chart drawn, not by importing this module: they take
 * nearly as long to load as the whole simulator, and the package's internal entry, which a caller
 * that wants only the figures imports, re-exports this module.
 */
const vegaModules = () => Promise.all([import("vega"), import("vega-lite")])

/** A table as aligned text, for a terminal. */
export const textTable = (table: Table): string => {
  const widths = table.columns.map((column, index) =>
    Math.max(column.length, ...table.rows.map((row) => (row[index] ?? "").length))
  )
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((cell, index) => index === 0 ? cell.padEnd(widths[index]!) : cell.padStart(widths[index]!)).join("  ")
  return [line(table.columns), widths.map((width) => "-".repeat(width)).join("  "), ...table.rows.map(line)].join("\n")
}

/** A table in Markdown. */
export const markdownTable = (table: Table): string =>
  [
    `| ${table.columns.join(" | ")} |`,
    `| ${table.columns.map((_, index) => index === 0 ? "---" : "---:").join(" | ")} |`,
    ...table.rows.map((row) => `| ${row.join(" | ")} |`)
  ].join("\n")

/** Renders a chart to SVG with Vega-Lite and Vega. */
export const svg = async (chart: Chart, title: string): Promise<string> => {
  const rows = chart.panels.flatMap((panel) => panel.points)
  const line = (title: string, points: ReadonlyArray<unknown>) => ({
    title: { text: title, anchor: "start" as const, fontSize: 12 },
    width: 760,
    height: 190,
    data: { values: points },
    mark: { type: "line" as const, interpolate: "step-after" as const },
    encoding: {
      x: { field: "x", type: "quantitative" as const, title: chart.x },
      y: { field: "y", type: "quantitative" as const, title: null },
      color: { field: "policy", type: "nominal" as const, title: "policy", legend: { labelLimit: 240 } },
      // Ours drawn solid and thicker, the references dashed, so the comparison reads at a glance.
      strokeDash: { condition: { test: "indexof(datum.policy, 'ours') === 0", value: [1, 0] }, value: [5, 3] },
      strokeWidth: { condition: { test: "indexof(datum.policy, 'ours') === 0", value: 2.2 }, value: 1.2 }
    }
  })
  // A diagnosis over time: a strip per policy, each span coloured by its diagnosis.
  const strip = (title: string, points: ReadonlyArray<unknown>) => ({
    title: { text: title, anchor: "start" as const, fontSize: 12 },
    width: 760,
    data: { values: points },
    mark: { type: "rect" as const },
    encoding: {
      x: { field: "x", type: "quantitative" as const, title: chart.x },
      x2: { field: "x2" },
      // Without a canvas, Vega estimates a label at 0.8 × the font size a character, and cuts it at the limit.
      y: { field: "policy", type: "nominal" as const, title: null, sort: null, axis: { labelLimit: 400 } },
      // `fill`, not `color`: a scale of its own, so the lines' colours stay the policies'.
      fill: {
        field: "category",
        type: "nominal" as const,
        title: "diagnosis",
        scale: {
          domain: ["healthy", "provider-degraded", "self-inflicted"],
          range: ["#54a24b", "#f58518", "#e45756"]
        }
      }
    }
  })
  const spec: VegaLite.TopLevelSpec = chart.bars
    ? {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      title,
      data: { values: rows },
      width: 640,
      height: 280,
      mark: "bar",
      encoding: {
        x: { field: "category", type: "nominal", sort: null, axis: { labelAngle: 0, title: null } },
        xOffset: { field: "policy", type: "nominal" },
        y: { field: "y", type: "quantitative", title: chart.panels[0]?.title ?? "" },
        color: { field: "policy", type: "nominal", title: null }
      }
    }
    : {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      title: { text: title, fontSize: 15 },
      vconcat: chart.panels.map((panel) =>
        panel.strip === true ? strip(panel.title, panel.points) : line(panel.title, panel.points)
      )
    }
  const [vega, vegaLite] = await vegaModules()
  const view = new vega.View(vega.parse(vegaLite.compile(spec).spec), { renderer: "none" })
  const rendered = await view.toSVG()
  view.finalize()
  return rendered
}

/** The Markdown report: the command, the seed, then per scenario its setup, table, goals and chart. */
export const markdown = (
  sections: ReadonlyArray<Section>,
  options: { readonly seed: number; readonly command: string }
): string =>
  [
    "# Storm report",
    "",
    `Produced by \`${options.command}\` (seed ${options.seed}). Every policy runs the same scenario with the same ` +
    "seed, in simulated time; ours is the shipped `@resilient-ai/policy` code with the `@resilient-ai/client` presets.",
    "",
    "## Policies",
    "",
    ...StormPolicies.all.concat([
      StormPolicies.oursManagedNoRamp,
      StormPolicies.bottleneckRps,
      StormPolicies.oursPaced,
      StormPolicies.oursPacedNoLanes,
      StormPolicies.oursPacedLearned
    ]).map((contender) => `- **${contender.name}**: ${contender.description}`),
    "",
    ...sections.flatMap((section) => [
      `## ${section.title}`,
      "",
      section.setup,
      "",
      markdownTable(section.table),
      "",
      ...(section.timeline === undefined ? [] : ["Diagnosis over time:", "", markdownTable(section.timeline), ""]),
      ...section.goals.map((goal) => `- ${goal.met ? "✅" : "❌"} ${goal.text}: ${goal.evidence}`),
      "",
      ...section.notes,
      "",
      `![${section.title}](${section.id.toLowerCase()}.svg)`,
      ""
    ])
  ].join("\n")
