import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { EffectLine } from "@resilient-ai/policy/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import { apiKey, bin, builtBin, eventually, requireBuild, root, runBin, start } from "./support.js"

beforeAll(requireBuild)

/**
 * Each test starts node processes, and one start alone took 3 s on a loaded machine, so these
 * tests wait as long as it takes; no test here bounds how long a step may take on the wall clock
 * except against another step measured in the same run. They run side by side (vitest's
 * `maxConcurrency`, 5 at a time): each mostly waits for its processes, and one after another they
 * were the suite's longest file by far.
 */
const patient = 300_000

const scratch = mkdtempSync(join(tmpdir(), "resilient-ai-cli-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** Writes `content` to a file of its own and returns the path. */
const file = (name: string, content: string) => {
  const path = join(scratch, name)
  writeFileSync(path, content)
  return path
}

const loadArgs = (url: string, extra: ReadonlyArray<string> = []) => [
  "load",
  "--base-url",
  url,
  "--model",
  "test-model",
  "--requests",
  "6",
  "--concurrency",
  "2",
  ...extra
]

describe.concurrent("resilient-ai load", () => {
  it.scopedLive(
    "--json prints one JSON object on stdout, with the run's counts; the key is sent, never printed",
    () =>
      Effect.gen(function*() {
        // Every third request fails once with a 401: terminal, so exactly two calls fail.
        const server = yield* FaultServer.make({
          steps: [{ _tag: "Ok" }, { _tag: "Ok" }, { _tag: "Status", status: 401 }, { _tag: "Ok" }, { _tag: "Ok" }, {
            _tag: "Status",
            status: 401
          }]
        })
        const ran = yield* runBin(loadArgs(server.url, ["--target", "managed", "--deadline-ms", "5000", "--json"]), {
          RESILIENT_AI_API_KEY: apiKey
        })
        assert.strictEqual(ran.code, 0, ran.stderr)
        assert.strictEqual(ran.stderr, "")
        const lines = ran.stdout.trim().split("\n")
        assert.strictEqual(lines.length, 1)
        const summary = JSON.parse(lines[0]!) as Record<string, unknown>
        assert.strictEqual(summary["target"], "managed")
        assert.strictEqual(summary["kind"], "managed")
        assert.strictEqual(summary["model"], "test-model")
        assert.strictEqual(summary["calls"], 6)
        assert.strictEqual(summary["successes"], 4)
        assert.strictEqual(summary["failures"], 2)
        assert.deepStrictEqual(summary["failuresByTag"], { AuthenticationFailed: 2 })
        assert.deepStrictEqual(summary["failuresByReason"], { terminal: 2 })
        assert.strictEqual(summary["attempts"], 6)
        assert.strictEqual(summary["retries"], 0)
        assert.strictEqual(summary["deadlineMs"], 5000)
        assert.strictEqual(summary["attemptsPerSuccess"], 1.5)
        const arrivals = yield* server.arrivals
        assert.strictEqual(arrivals.length, 6)
        assert.isTrue(arrivals.every((arrival) => arrival.headers.authorization === `Bearer ${apiKey}`))
        assert.notInclude(ran.stdout + ran.stderr, apiKey)
      }),
    patient
  )

  it.scopedLive(
    "prints the table by default; --verbose adds the attempt log lines on stderr, without the key",
    () =>
      Effect.gen(function*() {
        const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }] })
        const quiet = yield* runBin(loadArgs(server.url, ["--target", "self-hosted"]))
        assert.strictEqual(quiet.code, 0, quiet.stderr)
        assert.strictEqual(quiet.stderr, "")
        assert.match(quiet.stdout, /^self-hosted target "self-hosted", model test-model: 6 calls, 2 at a time/)
        for (
          const label of ["calls", "successes", "failures", "attempts per success", "budget exhaustions", "wall time"]
        ) {
          assert.match(quiet.stdout, new RegExp(`\\n  ${label} `), label)
        }
        // The pool's classifier does not retry a 503 that reached it.
        assert.match(quiet.stdout, /\n {4}Overloaded +1\n/)
        assert.match(quiet.stdout, /\n {4}terminal +1\n/)

        yield* server.setPlan({ steps: [{ _tag: "Status", status: 503 }] })
        const verbose = yield* runBin(loadArgs(server.url, ["--target", "managed", "--verbose"]), {
          RESILIENT_AI_API_KEY: apiKey
        })
        assert.strictEqual(verbose.code, 0, verbose.stderr)
        assert.include(verbose.stderr, "attempt failed, retrying")
        assert.notInclude(verbose.stdout, "attempt failed")
        assert.notInclude(verbose.stdout + verbose.stderr, apiKey)
      }),
    patient
  )

  it.live(
    "a --requests too large to run is refused before anything is sized by it, naming the flag",
    () =>
      Effect.gen(function*() {
        const url = "http://127.0.0.1:9/v1"
        const runs = yield* Effect.forEach(
          ["2000000000", "99999999999"],
          (requests) =>
            runBin([
              "load",
              "--base-url",
              url,
              "--model",
              "m",
              "--requests",
              requests,
              "--concurrency",
              "1",
              "--target",
              "self-hosted"
            ]),
          { concurrency: "unbounded" }
        )
        for (const [ran, requests] of runs.map((ran, index) => [ran, ["2000000000", "99999999999"][index]] as const)) {
          assert.strictEqual(ran.code, 2, ran.stderr)
          assert.include(ran.stderr, `--requests must be a whole number from 1 to 10,000,000, got '${requests}'`)
          assert.strictEqual(ran.stdout, "")
        }
      }),
    patient
  )

  it.live(
    "a managed target without a key exits with code 2 and says where the key is read from",
    () =>
      Effect.gen(function*() {
        const ran = yield* runBin(loadArgs("http://127.0.0.1:9/v1", ["--target", "managed"]))
        assert.strictEqual(ran.code, 2, ran.stderr)
        assert.include(ran.stderr, "resilient-ai: a managed target needs an API key: set RESILIENT_AI_API_KEY")
      }),
    patient
  )

  it.scopedLive(
    "Ctrl-C: the calls in flight are cancelled, the report so far is printed and says so, exit code 130",
    () =>
      Effect.gen(function*() {
        // Two quick answers, then every request stalls for a minute.
        const server = yield* FaultServer.make({
          steps: [{ _tag: "Ok" }, { _tag: "Ok" }],
          otherwise: { _tag: "Ok", delayMs: 60_000 }
        })
        // The largest load: its calls are counted out as they start, so it starts at once.
        const running = yield* start([
          "load",
          "--base-url",
          server.url,
          "--model",
          "test-model",
          "--requests",
          "10000000",
          "--concurrency",
          "2",
          "--target",
          "self-hosted",
          "--json"
        ])
        yield* eventually(
          Effect.map(server.arrivals, (arrivals) => arrivals.length >= 4),
          patient / 2,
          "two calls answered and two more in flight"
        )
        running.signal("SIGINT")
        const ran = yield* running.exited
        assert.strictEqual(ran.code, 130, ran.stderr)
        assert.strictEqual(ran.stderr, "")
        const lines = ran.stdout.trim().split("\n")
        assert.strictEqual(lines.length, 1)
        const summary = JSON.parse(lines[0]!) as Record<string, unknown>
        assert.strictEqual(summary["interrupted"], true)
        assert.strictEqual(summary["requests"], 10_000_000)
        assert.strictEqual(summary["calls"], 2)
        assert.strictEqual(summary["successes"], 2)
        assert.strictEqual(summary["callsInterrupted"], 2)
        // Cancelled, not awaited: the stalled requests were abandoned (they had a minute to go).
        const arrivals = yield* server.arrivals
        assert.strictEqual(arrivals.length, 4)
        assert.isTrue(
          arrivals.slice(2).every((arrival) => arrival.aborted),
          JSON.stringify(arrivals.map((a) => a.aborted))
        )
      }),
    patient
  )

  it.scopedLive(
    "--metrics-port serves the load's metrics for Prometheus while it runs, and closes the endpoint with it",
    () =>
      Effect.gen(function*() {
        // Three quick answers, then every request stalls for a minute: the load is still running
        // when the endpoint is read, whatever the machine's speed.
        const server = yield* FaultServer.make({
          steps: [{ _tag: "Ok" }, { _tag: "Ok" }, { _tag: "Ok" }],
          otherwise: { _tag: "Ok", delayMs: 60_000 }
        })
        const running = yield* start([
          "load",
          "--base-url",
          server.url,
          "--model",
          "test-model",
          "--requests",
          "10000000",
          "--concurrency",
          "1",
          "--target",
          "self-hosted",
          "--metrics-port",
          "0"
        ])
        const said = /^metrics for Prometheus on (http:\/\/127\.0\.0\.1:\d+\/metrics) while the load runs$/m
        yield* running.printed(({ stderr }) => said.test(stderr), "the endpoint's address")
        const url = said.exec(running.output().stderr)![1]!
        yield* eventually(
          Effect.map(server.arrivals, (arrivals) => arrivals.length >= 4),
          patient / 2,
          "call 4 in flight"
        )
        const response = yield* Effect.promise(() => fetch(url))
        assert.strictEqual(response.status, 200)
        assert.strictEqual(response.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8")
        const exposition = yield* Effect.promise(() => response.text())
        const labels = `{target="self-hosted",model="test-model"}`
        assert.include(exposition, "# TYPE resilient_ai_attempts_total counter\n")
        assert.include(exposition, `\nresilient_ai_attempts_total${labels} 4\n`)
        assert.include(exposition, `\nresilient_ai_successes_total${labels} 3\n`)
        assert.include(
          exposition,
          `\nresilient_ai_attempts_per_success_bucket{target="self-hosted",model="test-model",le="1"} 3\n`
        )
        // Its labels in the order the line's @effect/opentelemetry writes them (test/otel/Prometheus.test.ts).
        const targetInfo = exposition.split("\n").find((line) => line.startsWith("target_info{"))
        assert.include(targetInfo, `service_name="resilient-ai"`, exposition)
        // The toolkit's metrics only: not the command's own Effect runtime metrics.
        assert.notInclude(exposition, "effect_fiber")
        running.signal("SIGINT")
        const ran = yield* running.exited
        assert.strictEqual(ran.code, 130, ran.stderr)
        const closed = yield* Effect.promise(() => fetch(url).then(() => "answered", () => "refused"))
        assert.strictEqual(closed, "refused")
      }),
    patient
  )

  it.live(
    "--wizard without a terminal on stdin fails at once, saying so, instead of waiting for answers",
    () =>
      Effect.gen(function*() {
        // The bound comes from this run: a start that asks nothing, five times over, and five seconds.
        const started = performance.now()
        const version = yield* runBin(["--version"])
        const baseline = performance.now() - started
        assert.strictEqual(version.code, 0)
        const bound = 5 * baseline + 5_000
        const ran = yield* EffectLine.timeoutFail(runBin(["load", "--wizard"]), {
          duration: bound,
          onTimeout: () =>
            new Error(`--wizard still waiting after ${Math.round(bound)} ms (--version took ${Math.round(baseline)})`)
        })
        assert.strictEqual(ran.code, 2, ran.stderr)
        assert.include(ran.stderr, "resilient-ai: --wizard asks its questions on a terminal, and stdin is not one")
      }),
    patient
  )
})

describe.concurrent("resilient-ai help", () => {
  it.live("piped, it carries no colour codes", () =>
    Effect.gen(function*() {
      const ran = yield* runBin(["load", "--help"])
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.include(ran.stdout, "--requests integer")
      assert.notInclude(ran.stdout, "\u001b")
    }), patient)

  // util-linux `script` gives the bin a terminal of its own. Whether a terminal has colours is
  // read from the environment (TERM, CI, ...), which differs between machines: the test names a
  // colour terminal and clears what would override it.
  const script = "/usr/bin/script"
  it.live.skipIf(!existsSync(script))(
    "on a terminal it is in colour, unless NO_COLOR is set",
    () =>
      Effect.gen(function*() {
        const {
          CI: _ci,
          COLORTERM: _colorterm,
          FORCE_COLOR: _force,
          NODE_DISABLE_COLORS: _disable,
          NO_COLOR: _noColor,
          TEAMCITY_VERSION: _teamcity,
          TERM: _term,
          TERM_PROGRAM: _termProgram,
          ...inherited
        } = process.env
        const env = { ...inherited, TERM: "xterm-256color" }
        const onTerminal = (extra: Record<string, string>) =>
          EffectLine.callback<string>((resume) => {
            const child = execFile(
              script,
              ["-qec", `'${process.execPath}' '${bin}' load --help`, "/dev/null"],
              { cwd: root, env: { ...env, ...extra }, encoding: "utf8" },
              (error, stdout) => resume(error === null ? Effect.succeed(stdout) : Effect.die(error))
            )
            return Effect.sync(() => child.kill("SIGKILL"))
          })
        const coloured = yield* onTerminal({})
        assert.include(coloured, "\u001b[")
        assert.include(coloured, "USAGE")
        const plain = yield* onTerminal({ NO_COLOR: "1" })
        assert.include(plain, "USAGE")
        assert.notInclude(plain, "\u001b")
      }),
    patient
  )
})

describe.concurrent("resilient-ai faults", () => {
  it.scopedLive("serves the plan, prints how to reach it, and closes cleanly on Ctrl-C", () =>
    Effect.gen(function*() {
      const plan = file("plan.json", JSON.stringify({ steps: [{ _tag: "Status", status: 503 }] }))
      const running = yield* start(["faults", "--plan", plan])
      yield* running.printed(({ stdout }) => stdout.includes("Press Ctrl-C to stop."), "the server listens")
      const { stdout } = running.output()
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(stdout)?.[1]
      assert.isDefined(url, stdout)
      assert.include(stdout, `OPENAI_BASE_URL=${url}`)
      const ask = () =>
        fetch(`${url}/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] })
        }).then(async (response) => ({ status: response.status, body: await response.text() }))
      const first = yield* Effect.promise(ask)
      const second = yield* Effect.promise(ask)
      assert.strictEqual(first.status, 503)
      assert.strictEqual(second.status, 200)
      assert.include(second.body, FaultServer.replyText)
      running.signal("SIGINT")
      const ran = yield* running.exited
      assert.strictEqual(ran.code, 130, ran.stderr)
      assert.include(ran.stderr, "fault server closed")
      const closed = yield* Effect.promise(() => ask().then(() => "answered", () => "refused"))
      assert.strictEqual(closed, "refused")
    }), patient)

  it.scopedLive(
    "a bad plan or a port that is taken exits with code 2 naming the problem",
    () =>
      Effect.gen(function*() {
        const occupied = yield* FaultServer.make({})
        const typo = file("typo.json", JSON.stringify({ window: [], steps: [{ _tag: "Status", status: 700 }] }))
        const broken = file("broken.json", "{ not json")
        const good = file("good.json", "{}")
        const [badPlan, notJson, missing, port] = yield* Effect.all([
          runBin(["faults", "--plan", typo]),
          runBin(["faults", "--plan", broken]),
          runBin(["faults", "--plan", join(scratch, "missing.json")]),
          runBin(["faults", "--port", String(occupied.port), "--plan", good])
        ], { concurrency: "unbounded" })
        for (const ran of [badPlan, notJson, missing, port]) assert.strictEqual(ran.code, 2, ran.stderr)
        assert.include(badPlan.stderr, `--plan ${typo} is not a fault plan`)
        // The places and the rules; the words are each line's Schema's (Effect 3: "is unexpected", "Expected a
        // number between 400 and 599, actual 700"; Effect 4: "Expected no excess property", "Expected a value …").
        assert.match(badPlan.stderr, /\n {2}window: .*(unexpected|excess)/)
        assert.match(badPlan.stderr, /\n {2}steps\[0\]\.status: .*between 400 and 599/)
        assert.include(notJson.stderr, `--plan ${broken} is not a fault plan`)
        assert.include(
          missing.stderr,
          `--plan must be a readable fault plan (JSON); ${join(scratch, "missing.json")}: no such file`
        )
        assert.include(port.stderr, `--port ${occupied.port}: cannot listen on 127.0.0.1:${occupied.port} (EADDRINUSE)`)
      }),
    patient
  )
})

describe.concurrent("resilient-ai storm", () => {
  it.live("prints each scenario's table and goals, and writes the report folder", () =>
    Effect.gen(function*() {
      const out = join(scratch, "storm")
      const ran = yield* runBin(["storm", "--scenario", "S3", "--clients", "60", "--seed", "3", "--out", out])
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.match(ran.stdout, /S3 synchronised 429 burst/)
      assert.match(ran.stdout, /\n {2}✓ ours keeps the peak 10 ms slice below 5% of the burst/)
      assert.match(
        readFileSync(join(out, "report.md"), "utf8"),
        /`resilient-ai storm --scenario S3 --clients 60 --seed 3`/
      )
      assert.match(readFileSync(join(out, "s3.svg"), "utf8"), /^<svg /)
      const figures = JSON.parse(readFileSync(join(out, "figures.json"), "utf8"))
      assert.strictEqual(figures.seed, 3)
      assert.strictEqual(figures.scenarios.S3.figures["naive"].peak, 60)
    }), patient)
})

describe.concurrent("resilient-ai demo", () => {
  it.live("exits 0 and prints the introduction, the summary and what it means", () =>
    Effect.gen(function*() {
      // The bin as published, running the build (the other tests run the command bundled).
      const ran = yield* runBin(["demo"], { RESILIENT_AI_DEMO_REQUESTS: "60" }, builtBin)
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.strictEqual(ran.stderr, "")
      assert.match(ran.stdout, /^resilient-ai demo: 60 chat calls through a managed target/)
      assert.match(ran.stdout, /\nmanaged target "managed", model demo-model: 60 calls, 16 at a time, 80\/s/)
      assert.match(ran.stdout, /\n {2}calls +60\n/)
      assert.include(ran.stdout, "\nWhat it means\n")
      assert.match(ran.stdout, /\n {2}- 60 calls in \d+\.\d s: \d+ succeeded/)
      assert.match(ran.stdout, /The retry budget allowed \d+ retr/)
      assert.match(ran.stdout, /During the \d+\.\d s outage, \d+ new calls arrived/)
    }), patient)

  it.live(
    "a call count the load cannot make is a usage error naming the variable, before anything runs",
    () =>
      Effect.gen(function*() {
        for (const requests of ["0", "20000000"]) {
          const ran = yield* runBin(["demo"], { RESILIENT_AI_DEMO_REQUESTS: requests })
          assert.strictEqual(ran.code, 2, ran.stderr)
          assert.strictEqual(ran.stdout, "")
          assert.include(
            ran.stderr,
            `RESILIENT_AI_DEMO_REQUESTS must be a whole number from 1 to 10,000,000, got ${requests}`
          )
        }
      }),
    patient
  )
})
