/**
 * The end-to-end bench: what one chat call costs its caller, on the path a real call takes. The
 * same tiny chat request is made by resilient-ai's `ModelClient` (a managed target with its
 * defaults, on `NodeHttpClient.layerUndici`, called through a runtime built once), by the `openai`
 * SDK (retries off, and at its default of 2) and by plain `fetch` + `JSON.parse`, against a
 * chat-completions server in another process (`e2e-server.ts`), with 1, 64 and 1024 calls in flight.
 *
 * The figure is the client process's CPU time per call (user + system, every thread, the GC's
 * included): on a shared machine the wall clock says as much about the neighbours as about the
 * client. Calls/s is printed too. Segments are interleaved (each round runs every client once at
 * each concurrency, the order rotated, a full GC before each segment, outside the timing) and
 * ratios are taken between segments of the same round, so a neighbour's burst slows the clients
 * of a round alike; the tables show medians and min–max over the rounds. A warm-up round (JIT,
 * connection pools) is not reported. Then the heap the ModelClient keeps after 10,000 and 100,000
 * calls, after a full GC: what a long-lived process keeps per call grows without bound.
 *
 * It measures the built packages (`dist`), as users run them: `pnpm bench:e2e` builds them first.
 * About 4 to 5 minutes on 2 cores. Settings (environment): E2E_ROUNDS (5), E2E_CALLS (calls a
 * segment at 64 and 1024 in flight: 5000), E2E_CALLS_1 (at 1 in flight: 1500), E2E_WARM_UP (calls
 * a warm-up segment: 3000, and at least one per worker),
 * E2E_CONCURRENCY (`1,64,1024`), E2E_CLIENTS (ids, comma-separated: resilient-ai, openai,
 * openai-retries, fetch, and resilient-ai-fibers, the ModelClient driven by fibers instead of
 * promises), E2E_HEAP_CALLS (100000; 0 skips the heap), E2E_HEAP_CLIENTS (resilient-ai),
 * E2E_CPU_PROFILE (a directory for a CPU profile of each timed segment).
 */
import { NodeHttpClient } from "@effect/platform-node"
import { ModelClient, Target } from "@resilient-ai/client"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { fork } from "node:child_process"
import { mkdir, writeFile } from "node:fs/promises"
import { Session } from "node:inspector/promises"
import { createRequire } from "node:module"
import { availableParallelism, loadavg } from "node:os"
import * as Path from "node:path"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import OpenAI from "openai"
import { VERSION as openaiVersion } from "openai/version"
import type { ServerMessage } from "./e2e-server.js"

/** This folder, where the server's source is: lines.ts runs a bundle of this file from elsewhere and says so. */
const benchDir = process.env["BENCH_DIR"] ?? fileURLToPath(new URL(".", import.meta.url))
/** tsx's loader, for the server's TypeScript. */
const tsxLoader = process.env["BENCH_TSX"] ?? import.meta.resolve("tsx")

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with --expose-gc")

/** A whole number of at least `least` from the environment, or `fallback`. */
const setting = (name: string, fallback: number, least = 1): number => {
  const text = process.env[name]
  if (text === undefined || text.trim() === "") return fallback
  const value = Number(text)
  if (!Number.isInteger(value) || value < least) {
    throw new RangeError(`${name} must be a whole number >= ${least}, got ${text}`)
  }
  return value
}
const list = (name: string, fallback: string): ReadonlyArray<string> =>
  (process.env[name] ?? fallback).split(",").map((item) => item.trim()).filter((item) => item !== "")

const rounds = setting("E2E_ROUNDS", 5)
const callsAlone = setting("E2E_CALLS_1", 1_500)
const callsTogether = setting("E2E_CALLS", 5_000)
const callsAt = (inFlight: number) => inFlight === 1 ? callsAlone : callsTogether
const warmUpCalls = setting("E2E_WARM_UP", 3_000)
const concurrencies = list("E2E_CONCURRENCY", "1,64,1024").map((text) => {
  const value = Number(text)
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`E2E_CONCURRENCY: ${text} is not a count`)
  return value
})
const selected = list("E2E_CLIENTS", "resilient-ai,openai,openai-retries,fetch")
const heapCalls = setting("E2E_HEAP_CALLS", 100_000, 0)
const heapCheckpoint = Math.floor(heapCalls / 10)
const heapClients = list("E2E_HEAP_CLIENTS", "resilient-ai")
const heapInFlight = 64

const model = "gpt-4o-mini"
const apiKey = "sk-e2e-bench-not-a-real-key"
const messages = [{ role: "user" as const, content: "Say hello." }]

// ─── the server ────────────────────────────────────────────────────────────────────────────────

type Stats = Extract<ServerMessage, { _tag: "Stats" }>

interface Server {
  readonly baseUrl: string
  readonly answer: string
  readonly stats: () => Promise<Stats>
  readonly stop: () => void
}

/** Starts `e2e-server.ts` in a child process; it exits when this process's IPC channel closes. */
const startServer = (): Promise<Server> =>
  new Promise((resolve, reject) => {
    const child = fork(Path.join(benchDir, "e2e-server.ts"), [], {
      execArgv: ["--import", tsxLoader],
      stdio: ["ignore", "inherit", "inherit", "ipc"]
    })
    let stopping = false
    const waiting: Array<(stats: Stats) => void> = []
    const stop = () => {
      stopping = true
      if (child.connected) child.disconnect()
      child.kill()
    }
    // However this process ends, the server ends with it (and with the IPC channel, if killed).
    process.once("exit", stop)
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      process.once(signal, () => {
        stop()
        process.exit(128 + (signal === "SIGINT" ? 2 : 15))
      })
    }
    child.on("error", reject)
    child.on("exit", (code, signal) => {
      if (stopping) return
      const error = new Error(`the server exited (${signal ?? code}) during the run`)
      reject(error)
      // A call in flight would only see a refused connection; name the cause.
      console.error(error.message)
      process.exit(1)
    })
    child.on("message", (message: ServerMessage) => {
      if (message._tag === "Listening") {
        resolve({
          baseUrl: message.baseUrl,
          answer: message.answer,
          stats: () =>
            new Promise((resolveStats) => {
              waiting.push(resolveStats)
              child.send("stats")
            }),
          stop
        })
      } else {
        waiting.shift()?.(message)
      }
    })
  })

// ─── the clients ───────────────────────────────────────────────────────────────────────────────

interface Client {
  readonly id: string
  readonly label: string
  /** Makes `calls` calls with `inFlight` at a time; rejects on the first failed call or wrong answer. */
  readonly run: (calls: number, inFlight: number) => Promise<void>
  readonly close: () => Promise<void>
}

/** `inFlight` workers, each awaiting one call after another until `calls` are made. */
const inParallel = async (calls: number, inFlight: number, call: () => Promise<void>): Promise<void> => {
  let started = 0
  const worker = async () => {
    while (started < calls) {
      started++
      await call()
    }
  }
  await Promise.all(Array.from({ length: Math.min(inFlight, calls) }, worker))
}

const checker = (answer: string) => (content: string | null | undefined) => {
  if (content !== answer) throw new Error(`unexpected answer: ${JSON.stringify(content)}`)
}

const makeClients = async (server: Server): Promise<ReadonlyArray<Client>> => {
  const check = checker(server.answer)

  /** A ModelClient in a runtime built once, as an application that calls it from promises holds it. */
  const modelClient = async () => {
    const target = Target.managed({ name: "e2e", baseUrl: server.baseUrl, model, apiKey: Redacted.make(apiKey) })
    const runtime = ManagedRuntime.make(ModelClient.layer(target).pipe(Layer.provide(NodeHttpClient.layerUndici)))
    return { runtime, client: await runtime.runPromise(ModelClient.ModelClient) }
  }

  const viaPromises = async (): Promise<Client> => {
    const { client, runtime } = await modelClient()
    const call = () => runtime.runPromise(client.chat({ messages })).then((c) => check(c.choices[0].message.content))
    return {
      id: "resilient-ai",
      label: "resilient-ai ModelClient",
      run: (calls, inFlight) => inParallel(calls, inFlight, call),
      close: () => runtime.dispose()
    }
  }

  /** The same calls from fibers, as an Effect application makes them: no promise per call. */
  const viaFibers = async (): Promise<Client> => {
    const { client, runtime } = await modelClient()
    return {
      id: "resilient-ai-fibers",
      label: "resilient-ai ModelClient, fibers",
      run: (calls, inFlight) => {
        let started = 0
        const worker = Effect.whileLoop({
          while: () => started < calls,
          body: () => {
            started++
            return client.chat({ messages })
          },
          step: (completion) => check(completion.choices[0].message.content)
        })
        return runtime.runPromise(
          Effect.all(Array.from({ length: Math.min(inFlight, calls) }, () => worker), {
            concurrency: "unbounded",
            discard: true
          })
        )
      },
      close: () => runtime.dispose()
    }
  }

  const openai = (retries: boolean): Client => {
    const sdk = new OpenAI({ baseURL: server.baseUrl, apiKey, ...(retries ? {} : { maxRetries: 0 }) })
    const call = () =>
      sdk.chat.completions.create({ model, messages }).then((c) => check(c.choices[0]?.message.content))
    return {
      id: retries ? "openai-retries" : "openai",
      label: `openai ${openaiVersion}, ${retries ? "default retries (2)" : "maxRetries 0"}`,
      run: (calls, inFlight) => inParallel(calls, inFlight, call),
      close: async () => {}
    }
  }

  const plainFetch = (): Client => {
    const url = `${server.baseUrl}/chat/completions`
    const headers = { "content-type": "application/json", authorization: `Bearer ${apiKey}` }
    const call = async () => {
      const response = await fetch(url, { method: "POST", headers, body: JSON.stringify({ model, messages }) })
      const text = await response.text()
      if (!response.ok) throw new Error(`status ${response.status}: ${text}`)
      const completion = JSON.parse(text) as { choices: ReadonlyArray<{ message: { content: string | null } }> }
      check(completion.choices[0]?.message.content)
    }
    return {
      id: "fetch",
      label: "fetch + JSON.parse",
      run: (calls, inFlight) => inParallel(calls, inFlight, call),
      close: async () => {}
    }
  }

  const factories: Record<string, () => Client | Promise<Client>> = {
    "resilient-ai": viaPromises,
    "resilient-ai-fibers": viaFibers,
    openai: () => openai(false),
    "openai-retries": () => openai(true),
    fetch: plainFetch
  }
  const clients: Array<Client> = []
  for (const id of selected) {
    const factory = factories[id]
    if (factory === undefined) {
      throw new RangeError(`E2E_CLIENTS: unknown client ${id} (${Object.keys(factories).join(", ")})`)
    }
    clients.push(await factory())
  }
  return clients
}

// ─── measuring ─────────────────────────────────────────────────────────────────────────────────

interface Sample {
  readonly callsPerSecond: number
  readonly cpuPerCall: number
  /** The server's CPU time over the segment's wall time: 1 is a core saturated. */
  readonly serverCore: number
  /** The share of the segment the server's event loop was busy. */
  readonly serverLoop: number
  /** Connections the server accepted during the segment: after the warm-up, calls reuse warm ones. */
  readonly connections: number
}

const fullGc = () => {
  gc()
  gc()
}

const heapUsed = () => {
  fullGc()
  return process.memoryUsage().heapUsed
}

/**
 * With E2E_CPU_PROFILE set to a directory, the CPU profile of every timed segment is written there
 * as `{client}-{in flight}-round{n}.cpuprofile`, without the start-up, the warm-up and the heap
 * phase. The profiler's own cost is then in the figures.
 */
const profiler = await (async () => {
  const directory = process.env["E2E_CPU_PROFILE"]
  if (directory === undefined || directory === "") return undefined
  await mkdir(directory, { recursive: true })
  const session = new Session()
  session.connect()
  await session.post("Profiler.enable")
  return async (name: string) => {
    await session.post("Profiler.start")
    return async () => {
      const { profile } = await session.post("Profiler.stop")
      await writeFile(join(directory, `${name}.cpuprofile`), JSON.stringify(profile))
    }
  }
})()

/** One timed segment; the server must have seen exactly one request per call (no retry, no stray path). */
const segment = async (
  server: Server,
  client: Client,
  calls: number,
  inFlight: number,
  profileAs?: string
): Promise<Sample> => {
  fullGc()
  const before = await server.stats()
  const stopProfile = profileAs === undefined ? undefined : await profiler?.(profileAs)
  const cpu = process.cpuUsage()
  const started = performance.now()
  await client.run(calls, inFlight)
  const millis = performance.now() - started
  const used = process.cpuUsage(cpu)
  await stopProfile?.()
  const after = await server.stats()
  const served = after.requests - before.requests
  if (served !== calls || after.unexpected > 0) {
    throw new Error(
      `${client.label}: ${calls} calls made ${served} requests, ${after.unexpected} of them to an unexpected path`
    )
  }
  const loopActive = after.loopActive - before.loopActive
  return {
    callsPerSecond: calls / (millis / 1000),
    cpuPerCall: (used.user + used.system) / calls,
    serverCore: (after.cpuMicros - before.cpuMicros) / 1000 / millis,
    serverLoop: loopActive / (loopActive + after.loopIdle - before.loopIdle),
    connections: after.connections - before.connections
  }
}

// ─── reporting ─────────────────────────────────────────────────────────────────────────────────

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
const sum = (values: ReadonlyArray<number>) => values.reduce((total, value) => total + value, 0)
const whole = (value: number) => Math.round(value).toLocaleString("en")
const twoPlaces = (value: number) => value.toFixed(2)
/** `median (min–max)`. */
const spread = (values: ReadonlyArray<number>, format: (value: number) => string) =>
  `${format(median(values))} (${format(Math.min(...values))}–${format(Math.max(...values))})`
const mebibytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`
const row = (cells: ReadonlyArray<string>, widths: ReadonlyArray<number>) =>
  cells.map((cell, index) => cell.padEnd(widths[index] ?? 0)).join("  ").trimEnd()

const program = async () => {
  // Run by lines.ts, bundled from the sources for one Effect line; on its own, the built code (dist).
  const bundledFor = process.env["BENCH_LINE"]
  const clientEntry = bundledFor === undefined ? fileURLToPath(import.meta.resolve("@resilient-ai/client")) : ""
  if (bundledFor === undefined && !clientEntry.endsWith("/dist/index.js")) {
    throw new Error(`@resilient-ai/client resolved to ${clientEntry}: the bench measures the built code (dist)`)
  }
  // The undici that `NodeHttpClient` uses. Loading it also installs its `Agent` as the global dispatcher
  // when no fetch has run yet, so Node's `fetch` (the openai SDK's too) then sends through that pool.
  const requireUndici = createRequire(
    process.env["BENCH_PLATFORM_NODE"] ?? fileURLToPath(import.meta.resolve("@effect/platform-node"))
  )
  const undiciVersion = (requireUndici("undici/package.json") as { version: string }).version
  const undici = requireUndici("undici") as { Agent: abstract new() => unknown; getGlobalDispatcher: () => unknown }
  const fetchPool = undici.getGlobalDispatcher() instanceof undici.Agent
    ? `the global dispatcher, undici ${undiciVersion}'s Agent`
    : "Node's own dispatcher"

  const server = await startServer()
  const clients = await makeClients(server)
  const heapAtStart = heapUsed()
  const byId = new Map(clients.map((client) => [client.id, client]))
  const [load1, load5, load15] = loadavg().map((load) => load.toFixed(2))
  console.log(`e2e bench: the same chat call from each client against a local server in another process`)
  console.log(`Node ${process.version}, ${availableParallelism()} cores, load average ${load1} ${load5} ${load15}`)
  console.log(
    `resilient-ai ${
      bundledFor === undefined
        ? `from ${relative(process.cwd(), clientEntry)}`
        : `bundled from its sources for ${bundledFor}`
    } on undici ${undiciVersion}; openai ${openaiVersion} and fetch on Node's fetch (undici ${process.versions.undici}) over ${fetchPool}`
  )
  console.log(
    `${rounds} rounds after a warm-up, each every client at ${concurrencies.join(", ")} in flight; ${
      concurrencies.map((inFlight) => `${whole(callsAt(inFlight))} calls a segment at ${inFlight}`).join(", ")
    }; CPU is this process's, user + system`
  )

  const samples = new Map<number, Map<string, Array<Sample>>>(
    concurrencies.map((inFlight) => [inFlight, new Map(clients.map((client) => [client.id, []]))])
  )
  try {
    // At least one call per worker, so the pools hold all their connections before the timed rounds.
    for (const inFlight of concurrencies) {
      for (const client of clients) {
        await segment(server, client, Math.max(inFlight, Math.min(warmUpCalls, callsAt(inFlight))), inFlight)
      }
    }
    for (let round = 0; round < rounds; round++) {
      // Rotated, so no client always runs right after the same one.
      const order = clients.map((_, index) => clients[(index + round) % clients.length]!)
      for (const inFlight of concurrencies) {
        for (const client of order) {
          samples.get(inFlight)!.get(client.id)!.push(
            await segment(server, client, callsAt(inFlight), inFlight, `${client.id}-${inFlight}-round${round + 1}`)
          )
        }
      }
    }

    /** Per round, the CPU per call of `id` at `inFlight` over that of `base` (at `baseInFlight`). */
    const cpuRatios = (id: string, inFlight: number, base: string, baseInFlight = inFlight) => {
      const mine = samples.get(inFlight)?.get(id)
      const theirs = samples.get(baseInFlight)?.get(base)
      return mine === undefined || theirs === undefined
        ? undefined
        : mine.map((s, i) => s.cpuPerCall / theirs[i]!.cpuPerCall)
    }
    const rateRatios = (id: string, inFlight: number, base: string) => {
      const mine = samples.get(inFlight)?.get(id)
      const theirs = samples.get(inFlight)?.get(base)
      return mine === undefined || theirs === undefined
        ? undefined
        : mine.map((s, i) => s.callsPerSecond / theirs[i]!.callsPerSecond)
    }
    const ratioCell = (ratios: ReadonlyArray<number> | undefined) =>
      ratios === undefined ? "–" : spread(ratios, twoPlaces)

    const widths = [36, 22, 20, 24, 22]
    for (const inFlight of concurrencies) {
      console.log()
      console.log(
        `${inFlight} in flight, ${whole(callsAt(inFlight))} calls a segment: median (min–max) of ${rounds} rounds`
      )
      console.log(row(["client", "calls/s", "CPU-µs/call", "CPU ÷ openai, no retry", "CPU ÷ openai, retries"], widths))
      for (const client of clients) {
        const mine = samples.get(inFlight)!.get(client.id)!
        console.log(row([
          client.label,
          spread(mine.map((s) => s.callsPerSecond), whole),
          spread(mine.map((s) => s.cpuPerCall), whole),
          ratioCell(cpuRatios(client.id, inFlight, "openai")),
          ratioCell(cpuRatios(client.id, inFlight, "openai-retries"))
        ], widths))
      }
      const all = [...samples.get(inFlight)!.values()].flat()
      const core = Math.max(...all.map((s) => s.serverCore))
      const loop = Math.max(...all.map((s) => s.serverLoop))
      const opened = clients.flatMap((client) => {
        const count = sum(samples.get(inFlight)!.get(client.id)!.map((s) => s.connections))
        return count === 0 ? [] : [`${client.label} ${whole(count)}`]
      })
      console.log(
        `server, busiest segment: ${(core * 100).toFixed(0)}% of a core, event loop busy ${
          (loop * 100).toFixed(0)
        }% of the time; connections opened in the rounds: ${opened.length === 0 ? "none" : opened.join(", ")}${
          loop > 0.9 ? " — near saturation: calls/s may be the server's, not the client's" : ""
        }`
      )
    }
    if (concurrencies.includes(64) && concurrencies.includes(1024)) {
      console.log()
      console.log(`CPU per call at 1024 in flight ÷ at 64, per round: median (min–max)`)
      for (const client of clients) {
        console.log(row([client.label, ratioCell(cpuRatios(client.id, 1024, client.id, 64))], widths))
      }
    }

    const heap: Array<{ readonly id: string; readonly growth: number }> = []
    if (heapCalls > 0) {
      console.log()
      console.log(
        `heap used after a full GC, ${heapInFlight} in flight; ${
          mebibytes(heapAtStart)
        } at the start (every client built, no call made), the baseline after the rounds (pools of idle connections)`
      )
      console.log(
        row(
          ["client", "baseline", `after ${whole(heapCheckpoint)}`, `after ${whole(heapCalls)}`, "growth between"],
          widths
        )
      )
      for (const id of heapClients) {
        const client = byId.get(id)
        if (client === undefined) throw new RangeError(`E2E_HEAP_CLIENTS: ${id} is not among E2E_CLIENTS`)
        const baseline = heapUsed()
        await client.run(heapCheckpoint, heapInFlight)
        const early = heapUsed()
        await client.run(heapCalls - heapCheckpoint, heapInFlight)
        const late = heapUsed()
        heap.push({ id, growth: late - early })
        console.log(row([
          client.label,
          mebibytes(baseline),
          mebibytes(early),
          mebibytes(late),
          `${mebibytes(late - early)} (${((late - early) / (heapCalls - heapCheckpoint)).toFixed(1)} bytes/call)`
        ], widths))
      }
    }

    console.log()
    console.log("goals (resilient-ai ModelClient; ratios are medians of per-round ratios):")
    const goal = (
      text: string,
      value: number | undefined,
      show: (value: number) => string,
      met: (value: number) => boolean
    ) =>
      console.log(
        `  ${text}: ${value === undefined ? "not measured" : `${show(value)} — ${met(value) ? "met" : "NOT MET"}`}`
      )
    const times = (value: number) => `${twoPlaces(value)}×`
    const medianOf = (ratios: ReadonlyArray<number> | undefined) => ratios === undefined ? undefined : median(ratios)
    for (const inFlight of concurrencies.filter((n) => n !== 1)) {
      const against = `the openai SDK's (default retries), ${inFlight} in flight`
      goal(
        `CPU per call ≤ 1.0× ${against}`,
        medianOf(cpuRatios("resilient-ai", inFlight, "openai-retries")),
        times,
        (r) => r <= 1
      )
      goal(
        `calls/s ≥ ${against}`,
        medianOf(rateRatios("resilient-ai", inFlight, "openai-retries")),
        times,
        (r) => r >= 1
      )
    }
    goal(
      "CPU per call at 1024 in flight ≤ 1.15× at 64",
      medianOf(cpuRatios("resilient-ai", 1024, "resilient-ai", 64)),
      times,
      (r) => r <= 1.15
    )
    goal(
      heapCalls > 0
        ? `heap flat from ${whole(heapCheckpoint)} to ${whole(heapCalls)} calls (grows < 1 MiB)`
        : "heap flat",
      heap.find((h) => h.id === "resilient-ai")?.growth,
      mebibytes,
      (growth) => growth < 1024 * 1024
    )
  } finally {
    for (const client of clients) await client.close()
    server.stop()
  }
}

program().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
