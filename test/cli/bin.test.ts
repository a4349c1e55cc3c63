import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { apiKey, eventually, requireBuild, runBin, start } from "./support.js"

beforeAll(requireBuild)

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

describe("resilient-ai load", () => {
  it.scopedLive("--json prints one JSON object on stdout, with the run's counts; the key is sent, never printed", () =>
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
    }))

  it.scopedLive("prints the table by default; --verbose adds the attempt log lines on stderr, without the key", () =>
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
    }))

  it.live("usage mistakes exit with code 2 and say what is wrong", () =>
    Effect.gen(function*() {
      const url = "http://127.0.0.1:9/v1"
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
        [loadArgs("ftp://example.com/v1", ["--target", "self-hosted"]), /--base-url must be an http\(s\) URL/],
        [
          [
            "load",
            "--base-url",
            url,
            "--model",
            "m",
            "--requests",
            "0",
            "--concurrency",
            "1",
            "--target",
            "self-hosted"
          ],
          /--requests must be a whole number of at least 1/
        ],
        [
          [
            "load",
            "--base-url",
            url,
            "--model",
            "m",
            "--requests",
            "1",
            "--concurrency",
            "0",
            "--target",
            "self-hosted"
          ],
          /--concurrency must be a whole number of at least 1/
        ],
        [loadArgs(url, ["--target", "somewhere"]), /managed|self-hosted/],
        [loadArgs(url, ["--target", "managed"]), /a managed target needs an API key: set RESILIENT_AI_API_KEY/],
        [["load", "--requests", "many"], /integer|requests/i]
      ]
      const runs = yield* Effect.forEach(cases, ([args]) => runBin(args), { concurrency: "unbounded" })
      runs.forEach((ran, index) => {
        const [args, message] = cases[index]!
        assert.strictEqual(ran.code, 2, `${args.join(" ")}\n${ran.stdout}${ran.stderr}`)
        assert.match(ran.stderr + ran.stdout, message, args.join(" "))
      })
    }))

  it.live("an unknown subcommand or flag exits non-zero with @effect/cli's message", () =>
    Effect.gen(function*() {
      const [unknown, flag] = yield* Effect.all([runBin(["bogus"]), runBin(["demo", "--bogus"])], {
        concurrency: "unbounded"
      })
      assert.notStrictEqual(unknown.code, 0)
      assert.notStrictEqual(flag.code, 0)
      assert.match(unknown.stderr, /Invalid subcommand for resilient-ai - use one of 'load', 'faults', 'demo'/)
      assert.match(flag.stderr, /Received unknown argument: '--bogus'/)
    }))
})

describe("resilient-ai faults", () => {
  it.scopedLive("serves the plan, prints how to reach it, and closes cleanly on Ctrl-C", () =>
    Effect.gen(function*() {
      const plan = file("plan.json", JSON.stringify({ steps: [{ _tag: "Status", status: 503 }] }))
      const running = yield* start(["faults", "--plan", plan])
      yield* eventually(Effect.sync(() => running.output().stdout.includes("Ctrl-C")), 5_000, "the server is listening")
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
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.include(ran.stderr, "fault server closed")
    }))

  it.scopedLive("a bad plan or a port that is taken exits with code 2 naming the problem", () =>
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
      assert.include(badPlan.stderr, `${typo} is not a fault plan`)
      assert.match(badPlan.stderr, /window: is unexpected/)
      assert.match(badPlan.stderr, /steps\[0\]\.status: Expected a number between 400 and 599, actual 700/)
      assert.include(notJson.stderr, `${broken} is not a fault plan`)
      assert.match(missing.stderr, /missing\.json' must exist/)
      assert.include(port.stderr, `--port ${occupied.port}: cannot listen on 127.0.0.1:${occupied.port} (EADDRINUSE)`)
    }))
})

describe("resilient-ai storm", () => {
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
    }))
})

describe("resilient-ai demo", () => {
  it.live("exits 0 and prints the introduction, the summary and what it means", () =>
    Effect.gen(function*() {
      const ran = yield* runBin(["demo"], { RESILIENT_AI_DEMO_REQUESTS: "60" })
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.strictEqual(ran.stderr, "")
      assert.match(ran.stdout, /^resilient-ai demo: 60 chat calls through a managed target/)
      assert.match(ran.stdout, /\nmanaged target "managed", model demo-model: 60 calls, 16 at a time, 80\/s/)
      assert.match(ran.stdout, /\n {2}calls +60\n/)
      assert.include(ran.stdout, "\nWhat it means\n")
      assert.match(ran.stdout, /\n {2}- 60 calls in \d+\.\d s: \d+ succeeded/)
      assert.match(ran.stdout, /The retry budget allowed \d+ retr/)
      assert.match(ran.stdout, /During the \d+\.\d s outage, \d+ new calls arrived/)
    }))
})
