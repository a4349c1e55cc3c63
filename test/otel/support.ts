/**
 * What the otel tests share: Debian's `prometheus` package's binaries (`promtool`, `prometheus`),
 * found on the PATH, and a real Prometheus server of a test's own.
 *
 * Without the binaries the tests that need them are skipped, and say so, on a developer's machine;
 * under CI (`CI` set), where `.ci/run` installs the package, they fail instead, so a broken install
 * cannot pass unnoticed.
 */
import { Effect } from "effect"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { type AddressInfo, createServer } from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

/** The repository root. */
export const root = fileURLToPath(new URL("../../", import.meta.url))

/** `name` on the PATH when it runs, else `undefined`. */
const found = (name: string): string | undefined => {
  try {
    execFileSync(name, ["--version"], { stdio: "ignore" })
    return name
  } catch {
    return undefined
  }
}

/** Whether this is CI, where a missing binary is a failure rather than a skip. */
const underCi = (process.env["CI"] ?? "") !== ""

/** A binary of Debian's `prometheus` package, and whether the tests that need it run. */
export interface Binary {
  readonly name: string
  /** The binary to run; `undefined` when it is missing. */
  readonly path: string | undefined
  /** Missing, and not under CI: the tests that need it are skipped. */
  readonly skipped: boolean
}

const said = new Set<string>()

/** Looks `name` up once per file; when the tests that need it are skipped, says so on stderr. */
export const binary = (name: "promtool" | "prometheus"): Binary => {
  const path = found(name)
  const skipped = path === undefined && !underCi
  if (skipped && !said.has(name)) {
    said.add(name)
    process.stderr.write(
      `\n*** ${name} tests SKIPPED: no ${name} on the PATH. Install Debian's prometheus package ` +
        `(apt-get install --no-install-recommends prometheus; .ci/run does), or set CI to make this a failure.\n\n`
    )
  }
  return { name, path, skipped }
}

/** The binary's path; under CI, a missing binary fails the test here, saying what to install. */
export const required = (binary: Binary): string => {
  if (binary.path === undefined) {
    throw new Error(`${binary.name} is not on the PATH, and CI is set: .ci/run installs Debian's prometheus package`)
  }
  return binary.path
}

/** A loopback port nothing listens on right now. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })

/** A running Prometheus server of a test's own. */
export interface PrometheusServer {
  /** Its HTTP API's origin, as `http://127.0.0.1:PORT`. */
  readonly origin: string
  /** What it wrote to stderr so far (its log), for a failing test to show. */
  readonly log: () => string
  /** A query of its HTTP API (`/api/v1/…`), parsed; `undefined` when it did not answer. */
  readonly api: (path: string) => Effect.Effect<unknown>
}

/** Settings of a Prometheus server: what it scrapes, and the rule files' contents. */
export interface PrometheusOptions {
  /** `host:port` of the endpoint to scrape (at `/metrics`). */
  readonly scrape: string
  /** The rules it evaluates, as the text of a rule file. */
  readonly rules: string
  /** Scrape and evaluation interval. Default `1s`. */
  readonly interval?: string | undefined
}

const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null

const waitForExit = (child: ChildProcess, millis: number) =>
  new Promise<boolean>((resolve) => {
    if (exited(child)) return resolve(true)
    const timer = setTimeout(() => resolve(false), millis)
    child.once("exit", () => {
      clearTimeout(timer)
      resolve(true)
    })
  })

/** Stops `child` (SIGTERM, then SIGKILL if it lingers) and removes `dir`, whatever state either is in. */
const stop = async (child: ChildProcess | undefined, dir: string) => {
  if (child !== undefined && !exited(child)) {
    child.kill("SIGTERM")
    if (!(await waitForExit(child, 5_000))) {
      child.kill("SIGKILL")
      await waitForExit(child, 5_000)
    }
  }
  rmSync(dir, { recursive: true, force: true })
}

const fetchJson = (url: string): Promise<unknown> =>
  fetch(url, { signal: AbortSignal.timeout(2_000) }).then((response) => response.json()).catch(() => undefined)

/**
 * Starts `prometheus` on a free loopback port, in a temporary directory of its own (its config,
 * rules and storage), and waits until it is ready (at most `readyMillis`). The server is stopped and
 * the directory removed when the scope closes, or at once if it never became ready.
 */
export const startPrometheus = (path: string, options: PrometheusOptions, readyMillis = 15_000) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<PrometheusServer & { readonly stop: () => Promise<void> }> => {
      const dir = mkdtempSync(Path.join(Os.tmpdir(), "resilient-ai-prometheus-"))
      let child: ChildProcess | undefined
      try {
        const interval = options.interval ?? "1s"
        writeFileSync(Path.join(dir, "alerts.yml"), options.rules)
        writeFileSync(
          Path.join(dir, "prometheus.yml"),
          [
            "global:",
            `  scrape_interval: ${interval}`,
            `  evaluation_interval: ${interval}`,
            "rule_files:",
            "  - alerts.yml",
            "scrape_configs:",
            "  - job_name: resilient-ai",
            "    static_configs:",
            `      - targets: ["${options.scrape}"]`,
            ""
          ].join("\n")
        )
        // The port is free when picked, but something else may take it before Prometheus binds it:
        // then Prometheus exits saying so, and another port is tried.
        let origin = ""
        let log = ""
        for (let tries = 1;; tries++) {
          const port = await freePort()
          origin = `http://127.0.0.1:${port}`
          log = ""
          child = spawn(path, [
            `--config.file=${Path.join(dir, "prometheus.yml")}`,
            `--storage.tsdb.path=${Path.join(dir, "data")}`,
            `--web.listen-address=127.0.0.1:${port}`,
            "--log.level=warn"
          ], { cwd: dir, stdio: ["ignore", "ignore", "pipe"] })
          child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (log = (log + chunk).slice(-4_000)))
          const started = Date.now()
          let ready = false
          while (!ready) {
            ready = await fetch(`${origin}/-/ready`, { signal: AbortSignal.timeout(1_000) }).then(
              (response) => response.ok,
              () => false
            )
            if (ready) break
            if (exited(child)) break
            if (Date.now() - started > readyMillis) {
              throw new Error(`prometheus not ready in ${readyMillis} ms:\n${log}`)
            }
            await new Promise((resolve) => setTimeout(resolve, 50))
          }
          if (ready) break
          if (tries === 3 || !log.includes("address already in use")) {
            throw new Error(`prometheus exited before it was ready:\n${log}`)
          }
        }
        const running = child!
        return {
          origin,
          log: () => log,
          api: (apiPath) => Effect.promise(() => fetchJson(`${origin}${apiPath}`)),
          stop: () => stop(running, dir)
        }
      } catch (error) {
        await stop(child, dir)
        throw error
      }
    }),
    (server) => Effect.promise(server.stop)
  )
