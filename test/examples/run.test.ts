import { line } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { type AddressInfo, createServer } from "node:net"
import { promisify } from "node:util"
import { inject } from "vitest"
import { bundled, root } from "../built.js"

// An example takes a second or two on a quiet machine, and as long as the cores let it on a busy
// one: only a hung example waits this long.
const limitMillis = 180_000

/** Runs an example from its sources, as its header says, bundled for the line under test (`test/bundleSetup.ts`). */
const run = (file: string, env: Record<string, string> = {}) =>
  promisify(execFile)(process.execPath, [bundled(file, line)], {
    cwd: root,
    env: { ...process.env, ...env },
    timeout: limitMillis
  })

const redisUrl = inject("redisUrl")

/** A loopback port nothing listens on. */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
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
  }, limitMillis)

  it("two-targets-failover: the pool serves what it has slots for, the API the rest", async () => {
    const { stdout } = await run("examples/two-targets-failover.ts")
    assert.include(stdout, `answered by model: {"open-mistral-7b":4,"mistral-small-latest":20}`)
    assert.include(stdout, `requests that reached each provider: {"pool":4,"api":20}`)
    assert.include(stdout, "failovers from the pool to the API: 20")
  }, limitMillis)

  it("shared-key: the batch job goes at the key's pace, learned from the provider's header", async () => {
    const { stdout } = await run("examples/shared-key.ts")
    assert.include(stdout, "requests the provider saw: 47 (1 to learn the limit, 40 batch, 6 interactive)")
    // 40 calls at 10 a second, after a burst of half a second's worth: never faster, however idle
    // the machine (a busy one can only make it slower).
    const seconds = Number(/the batch job took ([\d.]+) s/.exec(stdout)?.[1])
    assert.isAtLeast(seconds, 3.4, stdout)
  }, limitMillis)

  it("health-probe: an outage is provider-degraded, a stampede on two slots self-inflicted", async () => {
    const { stdout } = await run("examples/health-probe.ts")
    // The example waits for each diagnosis in turn; on a machine loaded enough to time a probe out,
    // a diagnosis may come between them, so the order is checked, not the whole list.
    assert.match(stdout, /^diagnoses, in order: healthy → .*provider-degraded → .*self-inflicted$/m, stdout)
  }, limitMillis)

  it(
    "prometheus: serves /metrics during a fault-server load, counters and histograms as Prometheus reads them",
    async () => {
      const { stdout } = await run("examples/prometheus.ts", { METRICS_PORT: "0" })
      assert.match(stdout, /^metrics for Prometheus on http:\/\/127\.0\.0\.1:\d+\/metrics$/m)
      assert.match(stdout, /^200 calls: \d+ answered, \d+ failed$/m)
      const labels = `{target="api",model="mistral-small-latest"}`
      assert.include(stdout, "# TYPE resilient_ai_attempts_total counter\n")
      const attempts = Number(new RegExp(`^resilient_ai_attempts_total${labels} (\\d+)$`, "m").exec(stdout)?.[1])
      assert.isAtLeast(attempts, 200, stdout)
      assert.match(
        stdout,
        /^resilient_ai_failures_total\{target="api",model="mistral-small-latest",kind="ContractViolation"\} \d+$/m
      )
      assert.include(stdout, "# TYPE resilient_ai_retry_delay_seconds histogram\n")
      assert.match(stdout, new RegExp(`^resilient_ai_retry_delay_seconds_count${labels} \\d+$`, "m"))
      assert.match(stdout, new RegExp(`^resilient_ai_retry_delay_seconds_sum${labels} [\\d.]+$`, "m"))
      assert.notInclude(stdout, "_total_total")
      assert.match(stdout, /^spans recorded: \{.*"load":1.*\}$/m)
    },
    limitMillis
  )

  it.skipIf(redisUrl === "")("fleet: three members on one Redis budget retry as one", async () => {
    const { stdout } = await run("examples/fleet.ts", {
      REDIS_URL: redisUrl,
      // Past the 50 ms default: a decision made in process on a busy test machine would change the count.
      REDIS_COMMAND_TIMEOUT: "10 seconds"
    })
    // A floor of 12 retries per window: each member spends one alone, the three share one on Redis.
    assert.include(stdout, "retries sent with a budget per member: 36", stdout)
    assert.include(stdout, "retries sent with one budget on Redis: 12", stdout)
  }, limitMillis)

  it("fleet: without a Redis, says the members decided in process and claims no fleet figure", async () => {
    const failed = await run("examples/fleet.ts", { REDIS_URL: `redis://127.0.0.1:${await closedPort()}` }).then(
      () => assert.fail("the example exited 0 without a Redis"),
      (error: { readonly code: number; readonly stdout: string }) => error
    )
    assert.strictEqual(failed.code, 1)
    assert.include(failed.stdout, "retries sent with a budget per member: 36")
    assert.match(failed.stdout, /Redis at 127\.0\.0\.1:\d+ did not answer in time for \d+ budget and gate decisions/)
    assert.include(failed.stdout, "this run measured no shared budget")
    assert.notInclude(failed.stdout, "one budget on Redis")
  }, limitMillis)
})
