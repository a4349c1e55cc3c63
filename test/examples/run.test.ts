import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"

const root = fileURLToPath(new URL("../../", import.meta.url))
const run = (file: string) =>
  promisify(execFile)(process.execPath, ["--import", "tsx", "--conditions=@resilient-ai/source", file], {
    cwd: root,
    timeout: 30_000
  })

describe("examples run", () => {
  it("two-targets-failover: the pool serves what it has slots for, the API the rest", async () => {
    const { stdout } = await run("examples/two-targets-failover.ts")
    assert.include(stdout, `answered by model: {"open-mistral-7b":4,"mistral-small-latest":20}`)
    assert.include(stdout, `requests that reached each provider: {"pool":4,"api":20}`)
    assert.include(stdout, "failovers from the pool to the API: 20")
  }, 30_000)
})
