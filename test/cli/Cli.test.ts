import { line } from "#test-line"
import { assert, describe, it } from "@effect/vitest"
import { Load } from "@resilient-ai/cli/internal"
import { EffectLine } from "@resilient-ai/policy/internal"
import { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"
import { createServer, type Server } from "node:net"
import { colours, withoutEscapes } from "../../packages/cli/src/internal/colour.js"
import { runCli } from "./support.js"

/** `load` against `url` with every required flag, as in `flags` where it says, and `extra` after them. */
const loadArgs = (url: string, flags: Readonly<Record<string, string>> = {}, extra: ReadonlyArray<string> = []) => {
  const all = { "base-url": url, model: "test-model", requests: "2", concurrency: "1", target: "self-hosted", ...flags }
  return ["load", ...Object.entries(all).flatMap(([name, value]) => [`--${name}`, value]), ...extra]
}

/** A port on 127.0.0.1 that nothing listens on: taken from the system, then let go. */
const closedPort = EffectLine.callback<number>((resume) => {
  const server = createServer().listen(0, "127.0.0.1", () => {
    const { port } = server.address() as { port: number }
    server.close(() => resume(Effect.succeed(port)))
  })
})

describe("resilient-ai flags", () => {
  const url = "http://127.0.0.1:9/v1"
  const logLevels = "one of all, trace, debug, info, warning, error, fatal, none"
  const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
    [loadArgs(url, { requests: "abc" }), "--requests must be a whole number from 1 to 10,000,000, got 'abc'"],
    [loadArgs(url, { requests: "0" }), "--requests must be a whole number from 1 to 10,000,000, got '0'"],
    [
      loadArgs(url, { requests: "2000000000" }),
      "--requests must be a whole number from 1 to 10,000,000, got '2000000000'"
    ],
    [loadArgs(url, { requests: "1e3" }), "--requests must be a whole number from 1 to 10,000,000, got '1e3'"],
    [loadArgs(url, { concurrency: "0" }), "--concurrency must be a whole number from 1 to 1,000,000, got '0'"],
    [
      loadArgs(url, { "deadline-ms": "99999999999" }),
      "--deadline-ms must be a whole number from 1 to 86,400,000, got '99999999999'"
    ],
    [loadArgs(url, { rate: "0.5" }), "--rate must be a whole number from 1 to 100,000, got '0.5'"],
    [loadArgs(url, { target: "somewhere" }), "--target must be one of managed, self-hosted, got 'somewhere'"],
    [
      loadArgs(url, { "metrics-port": "70000" }),
      "--metrics-port must be a whole number from 0 to 65,535, got '70000'"
    ],
    [loadArgs(url, { model: " " }), "--model must not be empty"],
    [loadArgs("http://127.0.0.1:9/v1?key=1"), "--base-url must not have a query or fragment"],
    [
      ["faults", "--port", "70000", "--plan", "plan.json"],
      "--port must be a whole number from 0 to 65,535, got '70000'"
    ],
    [["faults", "--plan", ""], "--plan must be a fault plan file (JSON), got ''"],
    [
      ["storm", "--scenario", "S1", "--scenario", "nope"],
      "--scenario must be one of all, S1, S1b, S2, S3, S4, S5, S6, S7, contention, got 'nope'"
    ],
    [["storm", "--clients", "0"], "--clients must be a whole number from 1 to 10,000, got '0'"],
    [
      ["storm", "--seed", "x"],
      "--seed must be a whole number from -9,007,199,254,740,991 to 9,007,199,254,740,991, got 'x'"
    ],
    [["storm", "--out", ""], "--out must be a folder to write the report in, got ''"],
    [["--log-level", "loud", ...loadArgs(url)], `--log-level must be ${logLevels}, got 'loud'`],
    [loadArgs(url, {}, ["--log-level"]), `--log-level needs a value, ${logLevels}`]
  ]

  it.live("every bad value is refused with exit code 2, naming the flag and what it accepts", () =>
    Effect.gen(function*() {
      for (const [args, message] of cases) {
        const ran = yield* runCli(args)
        const shown = `${args.join(" ")}\n${ran.stdout}\n${ran.stderr}`
        assert.strictEqual(ran.code, 2, shown)
        assert.include(ran.stderr, message, shown)
        assert.strictEqual(ran.stdout, "", shown)
      }
    }))

  it.live("a base URL is refused by the target's own rules, any password in it masked", () =>
    Effect.gen(function*() {
      const ftp = yield* runCli(loadArgs("ftp://user:hunter2@example.com/v1"))
      const credentials = yield* runCli(loadArgs("https://user:hunter2@example.com/v1"))
      for (const ran of [ftp, credentials]) {
        assert.strictEqual(ran.code, 2)
        assert.notInclude(ran.stderr, "hunter2")
      }
      assert.include(ftp.stderr, `--base-url must be an http(s) URL, got "ftp://***@example.com/v1"`)
      assert.include(credentials.stderr, "--base-url must not hold credentials")
    }))

  // The command-line library's own words: @effect/cli's on Effect 3, effect/cli's on Effect 4.
  const libraryWords = line === "effect3"
    ? {
      subcommand: /Invalid subcommand for resilient-ai - use one of 'load', 'faults', 'demo'/,
      flag: /Received unknown argument: '--bogus'/
    }
    : {
      subcommand: /Unknown subcommand "bogus" for "resilient-ai"/,
      flag: /Unrecognized flag: --bogus in command resilient-ai demo/
    }

  it.live("an unknown subcommand or flag exits with code 2 and the command-line library's message", () =>
    Effect.gen(function*() {
      const unknown = yield* runCli(["bogus"])
      const flag = yield* runCli(["demo", "--bogus"])
      assert.strictEqual(unknown.code, 2)
      assert.strictEqual(flag.code, 2)
      assert.match(unknown.stderr, libraryWords.subcommand)
      assert.match(flag.stderr, libraryWords.flag)
    }))

  it("the largest --requests is the largest load Load.run makes", () => {
    assert.strictEqual(Load.maxRequests, 10_000_000)
    assert.deepStrictEqual(Load.problems({ requests: Load.maxRequests, concurrency: 1 }), [])
    assert.deepStrictEqual(
      Load.problems({ requests: Load.maxRequests + 1, concurrency: 1 }).map((problem) => problem.setting),
      ["requests"]
    )
  })
})

describe("resilient-ai --log-level", () => {
  it.scopedLive("works before the subcommand and after it; without it the attempt lines stay hidden", () =>
    Effect.gen(function*() {
      // The pool's classifier stops at a 503 that reached it: one warning line, "attempt failed, stopping".
      const server = yield* FaultServer.make({})
      const run = (args: ReadonlyArray<string>) =>
        Effect.andThen(server.setPlan({ steps: [{ _tag: "Status", status: 503 }] }), runCli(args))
      const quiet = yield* run(loadArgs(server.url))
      const after = yield* run(loadArgs(server.url, {}, ["--log-level", "warning"]))
      const before = yield* run(["--log-level=warning", ...loadArgs(server.url)])
      const tooHigh = yield* run(loadArgs(server.url, {}, ["--log-level", "error"]))
      for (const ran of [quiet, after, before, tooHigh]) {
        assert.strictEqual(ran.code, 0, ran.stderr)
        assert.match(ran.stdout, /\n {2}successes +1 /)
      }
      assert.notInclude(quiet.stderr, "attempt failed")
      assert.include(after.stderr, `level=WARN`)
      assert.include(after.stderr, `message="attempt failed, stopping"`)
      assert.include(before.stderr, `message="attempt failed, stopping"`)
      assert.notInclude(tooHigh.stderr, "attempt failed")
    }))
})

describe("resilient-ai load, what it says", () => {
  it.live("an unreachable port: exit code 1, and the connection refused at host:port, in the failure's words", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const ran = yield* runCli(loadArgs(`http://127.0.0.1:${port}/v1`))
      assert.strictEqual(ran.code, 1, ran.stderr)
      assert.match(ran.stdout, /\n {4}ConnectFailed +2\n/)
      const lines = ran.stderr.split("\n")
      assert.strictEqual(lines[0], `resilient-ai: no call succeeded against 127.0.0.1:${port}:`)
      assert.match(
        lines[1]!,
        /^ {2}ConnectFailed \(2 calls\): could not connect \(connection refused\), nothing was sent: ECONNREFUSED/
      )
    }))

  it.live("a host that does not resolve: exit code 1, naming the host and port; --json still prints the report", () =>
    Effect.gen(function*() {
      // .invalid never resolves (RFC 2606).
      const ran = yield* runCli(
        loadArgs("http://nosuchhost.invalid:8080/v1", { requests: "1" }, ["--json"])
      )
      assert.strictEqual(ran.code, 1, ran.stderr)
      assert.match(ran.stderr, /^resilient-ai: no call succeeded against nosuchhost\.invalid:8080:\n/)
      assert.match(
        ran.stderr,
        /\n {2}ConnectFailed \(1 call\): could not connect \((no such host|the host name could not be looked up now)\), nothing was sent: (ENOTFOUND|EAI_AGAIN)/
      )
      const summary = JSON.parse(ran.stdout) as Load.Summary
      assert.strictEqual(summary.successes, 0)
      assert.deepStrictEqual(Object.keys(summary.failureExamples), ["ConnectFailed"])
    }))

  it.scopedLive("--metrics-port on a port already taken: exit code 2, naming the flag and why, no call sent", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({})
      const taken = yield* Effect.acquireRelease(
        EffectLine.callback<Server>((resume) => {
          const listening = createServer().listen(0, () => resume(Effect.succeed(listening)))
        }),
        (listening) => EffectLine.callback<void>((resume) => void listening.close(() => resume(Effect.void)))
      )
      const port = (taken.address() as { port: number }).port
      const ran = yield* runCli(loadArgs(server.url, { "metrics-port": String(port) }))
      assert.strictEqual(ran.code, 2, ran.stderr)
      assert.strictEqual(ran.stderr, `resilient-ai: --metrics-port ${port}: cannot listen (EADDRINUSE)`)
      assert.strictEqual(ran.stdout, "")
      assert.strictEqual((yield* server.arrivals).length, 0)
    }))

  it.scopedLive("--concurrency beyond the target's gate runs at the gate's limit, and the report says so", () =>
    Effect.gen(function*() {
      const server = yield* FaultServer.make({})
      const table = yield* runCli(loadArgs(server.url, { concurrency: "100000", requests: "3" }))
      assert.strictEqual(table.code, 0, table.stderr)
      assert.match(
        table.stdout,
        /^self-hosted target "self-hosted", model test-model: 3 calls, 8 at a time \(100,000 asked, capped at the target's gate\), no deadline\n/
      )
      const json = yield* runCli(loadArgs(server.url, { concurrency: "100000" }, ["--json"]))
      const summary = JSON.parse(json.stdout) as Load.Summary
      assert.strictEqual(summary.concurrency, 8)
      assert.strictEqual(summary.concurrencyRequested, 100_000)
      const fits = yield* runCli(loadArgs(server.url, { concurrency: "8", requests: "1" }))
      assert.match(fits.stdout, /: 1 calls, 8 at a time, no deadline\n/)
    }))
})

describe("resilient-ai colour", () => {
  it.live("help printed where there is no terminal carries no escape codes", () =>
    Effect.gen(function*() {
      const ran = yield* runCli(["load", "--help"])
      assert.strictEqual(ran.code, 0)
      assert.include(ran.stdout, "USAGE")
      assert.include(ran.stdout, "--requests integer")
      assert.notInclude(ran.stdout, "\u001b")
    }))

  it("colour only on a terminal that has it, never with NO_COLOR", () => {
    const terminal = { isTTY: true, hasColors: () => true }
    assert.isTrue(colours(terminal, {}))
    assert.isFalse(colours(terminal, { NO_COLOR: "1" }))
    // no-color.org: an empty NO_COLOR does not count.
    assert.isTrue(colours(terminal, { NO_COLOR: "" }))
    assert.isFalse(colours({ isTTY: true, hasColors: () => false }, {}))
    assert.isFalse(colours({ isTTY: false }, {}))
    assert.isFalse(colours({}, {}))
    assert.strictEqual(
      withoutEscapes("\u001b[0;1mUSAGE\u001b[0m and \u001b[2K\u001b[36mcyan\u001b[39m"),
      "USAGE and cyan"
    )
  })
})
