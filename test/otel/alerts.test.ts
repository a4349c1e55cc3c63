/**
 * docs/alerts.yml's rules pass their unit tests (docs/alerts.test.yml) under `promtool test rules`,
 * and every alert of the file is tested both firing and silent.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { readFileSync } from "node:fs"
import { promisify } from "node:util"
import { binary, required, root } from "./support.js"

const promtool = binary("promtool")

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8")

/** Runs promtool in the repository root: its output, and its exit code (0 when it passed). */
const run = (args: ReadonlyArray<string>) =>
  promisify(execFile)(required(promtool), [...args], { cwd: root, timeout: 60_000 }).then(
    ({ stderr, stdout }) => ({ code: 0, output: stdout + stderr }),
    (error: { readonly code?: number; readonly stdout?: string; readonly stderr?: string }) => ({
      code: error.code ?? 1,
      output: (error.stdout ?? "") + (error.stderr ?? "")
    })
  )

describe.skipIf(promtool.skipped)("docs/alerts.yml under promtool", () => {
  it("is a valid rule file", async () => {
    const checked = await run(["check", "rules", "docs/alerts.yml"])
    assert.strictEqual(checked.code, 0, checked.output.slice(0, 2_000))
    assert.include(checked.output, "SUCCESS: 7 rules found")
  })

  it("passes its unit tests, docs/alerts.test.yml", async () => {
    const tested = await run(["test", "rules", "docs/alerts.test.yml"])
    assert.strictEqual(tested.code, 0, tested.output.slice(0, 2_000))
    assert.include(tested.output, "SUCCESS")
  })
})

describe("docs/alerts.test.yml", () => {
  it("tests every alert firing, and silent before its `for:` or where it should not fire", () => {
    const alerts = [...read("docs/alerts.yml").matchAll(/^\s+- alert: (\w+)$/gm)].map((match) => match[1]!)
    assert.strictEqual(alerts.length, 7)
    const tests = read("docs/alerts.test.yml")
    const untested = alerts.filter((alert) =>
      !new RegExp(`alertname: ${alert}\\n\\s+exp_alerts: \\[\\]`).test(tests) ||
      !new RegExp(`alertname: ${alert}\\n\\s+exp_alerts:\\n\\s+- exp_labels:`).test(tests)
    )
    assert.deepStrictEqual(untested, [])
  })
})
