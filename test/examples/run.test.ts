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
  it("retry-within-budget: each failure kind gets its verdict, and the outage meets the budget", async () => {
    const { stdout } = await run("examples/retry-within-budget.ts")
    assert.match(stdout, /429 insufficient_quota +→ failed {2}stop=terminal, last=RateLimited, attempts=1/)
    assert.match(
      stdout,
      /read timeout, not replay-safe +→ failed {2}stop=not-replay-safe, last=ReadTimeout, attempts=1/
    )
    assert.match(stdout, /read timeout, replay-safe +→ ok {6}answer after 2 attempt\(s\)/)
    assert.match(stdout, /outage → 46 attempts for 40 calls/)
  }, 30_000)

  it("two-targets-failover: the pool serves what it has slots for, the API the rest", async () => {
    const { stdout } = await run("examples/two-targets-failover.ts")
    assert.include(stdout, `answered by model: {"open-mistral-7b":4,"mistral-small-latest":20}`)
    assert.include(stdout, `requests that reached each provider: {"pool":4,"api":20}`)
    assert.include(stdout, "failovers from the pool to the API: 20")
  }, 30_000)
})
