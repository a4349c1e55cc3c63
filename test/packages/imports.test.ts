import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { requireBuild, root } from "../built.js"

// Vega is slow to load: a fault server for a test, or the storm's figures, must not pay for it.
// A loader hook refuses to resolve it, so a module that loads it fails its import.
const dataModule = (source: string) => `data:text/javascript,${encodeURIComponent(source)}`
const refuseVega = dataModule(
  `import { register } from "node:module"; register(${
    JSON.stringify(dataModule(
      "export async function resolve(specifier, context, next) {" +
        "if (specifier === 'vega' || specifier === 'vega-lite') throw new Error('Vega loaded: ' + specifier);" +
        "return next(specifier, context) }"
    ))
  })`
)

// Only a hung import waits this long, however busy the cores.
const limitMillis = 120_000

/** Runs `code` as a module in a fresh Node, against the packages' build (`tsc -b`), with Vega refused. */
const runWithoutVega = (code: string) => {
  requireBuild()
  return promisify(execFile)(
    process.execPath,
    ["--import", refuseVega, "--input-type=module", "-e", code],
    { cwd: root, timeout: limitMillis }
  )
}

describe("what importing a package loads", () => {
  it("the fault server and the storm's index load no Vega; drawing a chart does", async () => {
    const { stdout } = await runWithoutVega(`
      await import("@resilient-ai/testing")
      const { StormReport } = await import("@resilient-ai/storm")
      const { StormRender } = await import("@resilient-ai/storm/internal")
      console.log(StormReport.scenarioIds.join(" "))
      const chart = { x: "seconds", panels: [{ title: "goodput", points: [{ x: 0, y: 1, policy: "ours" }] }] }
      await StormRender.svg(chart, "one point").then(() => console.log("drawn"), (error) => console.log(error.message))
    `)
    assert.deepStrictEqual(stdout.trim().split("\n"), ["S1 S1b S2 S3 S4 S5 S6 S7 contention", "Vega loaded: vega"])
  }, limitMillis)
})
