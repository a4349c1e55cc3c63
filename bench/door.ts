/**
 * Weight at the door: what a client costs a serverless function before and at its first call. For
 * each subject (an entry module in `door-subjects/`, one item in `subjects` below), side by side:
 *
 * - its bundled size: esbuild, bundle + minify, ESM, for platform "neutral" (what an edge or
 *   serverless user ships; Node's built-in modules left external, and the ones a bundle imports
 *   listed), then gzip at level 9; every bundle holds the subjects' shared harness, 0.3 KB. A
 *   client's own weight, which the goal is for, is what its bundle weighs beyond the openai SDK's;
 * - its cold start: a fresh `node` on that same bundle (after a `createRequire` line for the CommonJS
 *   dependencies' `require`), from the spawn to the process's report of a completed chat call
 *   against a server in this process; median of the runs, the subjects taking turns within each
 *   run so a busy moment touches them all;
 * - its heap: `heapUsed` after a full GC (`--expose-gc`, `gc()` twice) with the client built, one
 *   call made and the client still referenced, next to an empty Node process's.
 *
 * The Effect subjects are bundled and measured once per Effect line (`bundleOptionsFor`), the others
 * once. The Effect 4 line's Node platform needs Node 22 (to be bundled, as scripts/bundleLine.ts
 * loads its undici, and to run): on an older Node the rows that use it are skipped with a line
 * saying so.
 *
 * `pnpm bench:door` (under 2 minutes on 2 busy cores, about a third of it bundling). Settings:
 * `--runs N` or DOOR_RUNS (10), `--top N` or DOOR_TOP (0: the N biggest inputs of each size
 * bundle, by package and by module), DOOR_SUBJECTS (ids, comma-separated), DOOR_LINES
 * (`effect3,effect4`).
 */
import { FaultServerBody } from "@resilient-ai/testing/internal"
import * as esbuild from "esbuild"
import { spawn } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { mkdir, writeFile } from "node:fs/promises"
import { createServer } from "node:http"
import { builtinModules, createRequire } from "node:module"
import type { AddressInfo } from "node:net"
import { availableParallelism, loadavg } from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { gzipSync } from "node:zlib"
import { bundleOptionsFor, type Line } from "../scripts/bundleLine.js"
import type { Report } from "./door-subjects/harness.js"

const here = fileURLToPath(new URL(".", import.meta.url))
const root = Path.join(here, "..")
const outDir = Path.join(root, "build", "bench", "door")
const requireHere = createRequire(import.meta.url)
/** The version of the package `name` the bench resolves (not every package exports its package.json). */
const versionOf = (name: string): string => {
  for (
    let folder = Path.dirname(requireHere.resolve(name));
    folder !== Path.dirname(folder);
    folder = Path.dirname(folder)
  ) {
    const manifest = Path.join(folder, "package.json")
    if (!existsSync(manifest)) continue
    const read = JSON.parse(readFileSync(manifest, "utf8")) as { name?: string; version?: string }
    if (read.name === name && read.version !== undefined) return read.version
  }
  return "?"
}

// ─── settings ──────────────────────────────────────────────────────────────────────────────────

/** `--name N` on the command line, else the variable `variable`, else `fallback`: a whole number ≥ `least`. */
const setting = (name: string, variable: string, fallback: number, least: number): number => {
  const at = process.argv.indexOf(`--${name}`)
  const text = at === -1 ? process.env[variable] : process.argv[at + 1]
  if (text === undefined || text.trim() === "") return fallback
  const value = Number(text)
  if (!Number.isInteger(value) || value < least) {
    throw new RangeError(`--${name} (${variable}) must be a whole number >= ${least}, got ${text}`)
  }
  return value
}
const list = (variable: string): ReadonlyArray<string> | undefined =>
  process.env[variable]?.split(",").map((item) => item.trim()).filter((item) => item !== "")

const runs = setting("runs", "DOOR_RUNS", 10, 1)
const top = setting("top", "DOOR_TOP", 0, 0)
const lines = (list("DOOR_LINES") ?? ["effect3", "effect4"]).map((line): Line => {
  if (line !== "effect3" && line !== "effect4") throw new RangeError(`DOOR_LINES: unknown line ${line}`)
  return line
})
const names: Record<Line, string> = { effect3: "Effect 3", effect4: "Effect 4" }
const nodeMajor = Number(process.versions.node.split(".")[0])

const goals = { gzipBytes: 60_000, coldStart: 1.5, heap: 2 }

// ─── the subjects ──────────────────────────────────────────────────────────────────────────────

interface Subject {
  readonly id: string
  readonly label: string
  /** Its entry module, in door-subjects/. */
  readonly entry: URL
  /** Bundled and measured once per Effect line. */
  readonly effect?: boolean
  /** The requests its process makes: 1, one chat call. */
  readonly calls?: number
  /** On the Effect 4 line it runs on `@effect/platform-node` 4, whose undici needs Node 22. */
  readonly node22OnEffect4?: boolean
}

const subjects: ReadonlyArray<Subject> = [
  {
    id: "empty",
    label: "empty node (baseline)",
    entry: new URL("./door-subjects/empty.ts", import.meta.url),
    calls: 0
  },
  { id: "fetch", label: "fetch + JSON.parse", entry: new URL("./door-subjects/fetch.ts", import.meta.url) },
  {
    id: "openai",
    label: `openai ${versionOf("openai")} (reference)`,
    entry: new URL("./door-subjects/openai.ts", import.meta.url)
  },
  {
    id: "cockatiel",
    label: `cockatiel ${versionOf("cockatiel")} fetch + openai`,
    entry: new URL("./door-subjects/cockatiel.ts", import.meta.url)
  },
  {
    id: "resilient-fetch",
    label: "ResilientFetch + openai",
    entry: new URL("./door-subjects/resilient-fetch.ts", import.meta.url),
    effect: true
  },
  {
    id: "model-client",
    label: "ModelClient, layerUndici",
    entry: new URL("./door-subjects/model-client.ts", import.meta.url),
    effect: true,
    node22OnEffect4: true
  },
  {
    id: "door",
    label: "@resilient-ai/fetch + openai",
    entry: new URL("./door-subjects/promise-door.ts", import.meta.url),
    effect: true
  }
]
const reference = "openai"
const baseline = "empty"
/** The rows held to the goals: the promise door's, and the others next to it for comparison. */
const goalRows = ["door", "resilient-fetch", "model-client"]

const chosen = list("DOOR_SUBJECTS")
for (const id of chosen ?? []) {
  if (!subjects.some((subject) => subject.id === id)) {
    throw new RangeError(`DOOR_SUBJECTS: unknown subject ${id} (${subjects.map((s) => s.id).join(", ")})`)
  }
}

// ─── bundling ──────────────────────────────────────────────────────────────────────────────────

/** One subject bundled for one line (or for none), and what became of it. */
interface Build {
  readonly subject: Subject
  readonly line: Line | undefined
  readonly key: string
  /** Why it has no figures at all. */
  skipped?: string
  /** Why it has a size but no figures from a process. */
  runSkipped?: string
  size?: {
    readonly minified: number
    readonly gzipped: number
    readonly builtins: ReadonlyArray<string>
    readonly inputs: ReadonlyArray<{ readonly path: string; readonly bytes: number }>
  }
  nodeFile?: string
  samples: Array<{ readonly round: number; readonly millis: number; readonly heapUsed: number }>
  /** Runs whose process was still alive 5 s after its report, and was killed. */
  lingered: number
}

const builtins = [...builtinModules, ...builtinModules.map((name) => `node:${name}`), "node:*"]

const bundle = async (build: Build): Promise<void> => {
  const { line, subject } = build
  if (line === "effect4" && subject.node22OnEffect4 === true && nodeMajor < 22) {
    build.skipped = `Node ${process.versions.node}: the Effect 4 line's Node platform (undici 8) needs Node 22 or later`
    return
  }
  const options = line === undefined ? { conditions: [], plugins: [] } : bundleOptionsFor(line)
  const plugins = [...(options.plugins ?? [])]
  const sizeFile = Path.join(outDir, `${build.key}.mjs`)
  const nodeFile = Path.join(outDir, `${build.key}.node.mjs`)
  try {
    const built = await esbuild.build({
      absWorkingDir: root,
      entryPoints: [fileURLToPath(subject.entry)],
      outfile: sizeFile,
      write: false,
      bundle: true,
      minify: true,
      format: "esm",
      platform: "neutral",
      mainFields: ["module", "main"],
      target: "es2022",
      external: builtins,
      metafile: true,
      logLevel: "silent",
      conditions: options.conditions ?? [],
      plugins
    })
    const contents = built.outputFiles[0]!.contents
    const output = Object.values(built.metafile.outputs)[0]!
    build.size = {
      minified: contents.length,
      gzipped: gzipSync(contents, { level: 9 }).length,
      builtins: [
        ...new Set(output.imports.filter((i) => i.external).map((i) => i.path.replace(/^node:/, "")))
      ].sort(),
      inputs: Object.entries(output.inputs).map(([path, input]) => ({ path, bytes: input.bytesInOutput }))
    }
    // The same bundle runs on node, after the line esbuild's `banner` would add: the CommonJS
    // dependencies (undici) `require` Node's modules, which an ES module has no `require` for.
    await mkdir(outDir, { recursive: true })
    await writeFile(sizeFile, contents)
    await writeFile(nodeFile, `${bundleOptionsFor("effect3").banner!.js}\n${built.outputFiles[0]!.text}`)
    build.nodeFile = nodeFile
  } catch (error) {
    const first = (error as { errors?: ReadonlyArray<esbuild.Message> }).errors?.[0]
    const text = first === undefined
      ? String(error)
      : `${first.text}${first.location ? ` (${first.location.file})` : ""}`
    build.skipped = `failed to bundle: ${text}`
  }
}

// ─── the server ────────────────────────────────────────────────────────────────────────────────

const answer = "Hello! How can I help you today?"
const completion = Buffer.from(JSON.stringify(FaultServerBody.openAiChatCompletion(
  { id: "chatcmpl-door0bench", created: 1764460800, model: "gpt-4o-mini-2024-07-18" },
  answer,
  FaultServerBody.usage(11, 9),
  "fp_door0bench"
)))
let requests = 0
let unexpected = 0
const server = createServer((request, response) => {
  requests++
  const expected = request.method === "POST" && request.url === "/v1/chat/completions"
  if (!expected) unexpected++
  request.resume()
  request.on("end", () => {
    const body = expected ? completion : Buffer.from(`{"error":{"message":"Unknown request URL"}}`)
    response.writeHead(expected ? 200 : 404, { "content-type": "application/json", "content-length": body.length })
      .end(body)
  })
})

// ─── one process ───────────────────────────────────────────────────────────────────────────────

interface Sample {
  readonly millis: number
  readonly heapUsed: number
  readonly lingered: boolean
}

/** Spawns `build`'s bundle and waits for its reports and its exit; rejects on anything unexpected. */
const runOnce = (build: Build, baseUrl: string): Promise<Sample> =>
  new Promise((resolve, reject) => {
    const requestsBefore = requests
    const unexpectedBefore = unexpected
    const started = performance.now()
    const child = spawn(process.execPath, ["--expose-gc", build.nodeFile!], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NODE_OPTIONS: "", DOOR_BASE_URL: baseUrl }
    })
    let called: number | undefined
    let heapUsed: number | undefined
    let lingered = false
    let pending = ""
    let errors = ""
    let failure: string | undefined
    const fail = (text: string) => {
      failure ??= text
      child.kill("SIGKILL")
    }
    const deadline = setTimeout(() => fail("no report within 30 s"), 30_000)
    let lingering: NodeJS.Timeout | undefined
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => errors += chunk)
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      pending += chunk
      let end: number
      while ((end = pending.indexOf("\n")) !== -1) {
        const text = pending.slice(0, end)
        pending = pending.slice(end + 1)
        const report = JSON.parse(text) as Report
        if (report._tag === "Called") {
          called = performance.now() - started
          const calls = build.subject.calls ?? 1
          const wanted = calls === 0 ? null : answer
          if (report.content !== wanted) fail(`answered ${JSON.stringify(report.content)}`)
          else if (requests - requestsBefore !== calls || unexpected > unexpectedBefore) {
            fail(
              `${requests - requestsBefore} requests (${unexpected - unexpectedBefore} unexpected) for ${calls} call`
            )
          }
        } else {
          heapUsed = report.heapUsed
          clearTimeout(deadline)
          lingering = setTimeout(() => {
            lingered = true
            child.kill("SIGKILL")
          }, 5_000)
        }
      }
    })
    child.on("error", (error) => fail(error.message))
    child.on("close", (code, signal) => {
      clearTimeout(deadline)
      clearTimeout(lingering)
      if (failure === undefined && (called === undefined || heapUsed === undefined)) {
        failure = `exited (${signal ?? code}) before its reports`
      }
      if (failure === undefined && !lingered && code !== 0) failure = `exited with ${signal ?? code}`
      if (failure !== undefined) {
        const stderr = errors.trim().split("\n").slice(0, 4).join(" | ")
        reject(new Error(`${failure}${stderr === "" ? "" : `: ${stderr}`}`))
      } else {
        resolve({ millis: called!, heapUsed: heapUsed!, lingered })
      }
    })
  })

// ─── reporting ─────────────────────────────────────────────────────────────────────────────────

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
const kb = (bytes: number) => (bytes / 1000).toFixed(1)
const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(2)
const times = (ratio: number | undefined) => ratio === undefined ? "–" : `${ratio.toFixed(2)}×`
const row = (cells: ReadonlyArray<string>, widths: ReadonlyArray<number>) =>
  cells.map((cell, index) => index === 0 ? cell.padEnd(widths[index] ?? 0) : cell.padStart(widths[index] ?? 0)).join(
    "  "
  ).trimEnd()

/** Per round, `build`'s cold start over `base`'s in the same round: the median of those ratios. */
const coldRatio = (build: Build, base: Build | undefined) => {
  if (base === undefined || build.samples.length === 0) return undefined
  const ratios = build.samples.flatMap((sample) => {
    const theirs = base.samples.find((s) => s.round === sample.round)
    return theirs === undefined ? [] : [sample.millis / theirs.millis]
  })
  return ratios.length === 0 ? undefined : median(ratios)
}
const heapOf = (build: Build | undefined) =>
  build === undefined || build.samples.length === 0 ? undefined : median(build.samples.map((s) => s.heapUsed))
const millisOf = (build: Build) => median(build.samples.map((s) => s.millis))

/** The package an input of a bundle belongs to, and the module within it. */
const packageOf = (path: string): { readonly name: string; readonly module: string } => {
  const at = path.lastIndexOf("node_modules/")
  if (at !== -1) {
    const rest = path.slice(at + "node_modules/".length).split("/")
    const count = rest[0]!.startsWith("@") ? 2 : 1
    return { name: rest.slice(0, count).join("/"), module: rest.join("/") }
  }
  const workspace = /^packages\/([^/]+)\//.exec(path)
  if (workspace !== null) return { name: `@resilient-ai/${workspace[1]}`, module: path }
  return { name: path.startsWith("bench/") ? "bench" : path, module: path }
}

const printTop = (build: Build, title: string) => {
  const inputs = build.size!.inputs
  const byPackage = new Map<string, number>()
  for (const input of inputs) {
    const { name } = packageOf(input.path)
    byPackage.set(name, (byPackage.get(name) ?? 0) + input.bytes)
  }
  const biggest = <A>(entries: Iterable<readonly [A, number]>) =>
    [...entries].filter(([, bytes]) => bytes > 0).sort((a, b) => b[1] - a[1]).slice(0, top)
  console.log(`  ${title}: ${kb(build.size!.minified)} KB minified, the ${top} biggest inputs`)
  for (const [name, bytes] of biggest(byPackage)) console.log(`    ${kb(bytes).padStart(7)} KB  package ${name}`)
  for (const [path, bytes] of biggest(inputs.map((input) => [packageOf(input.path).module, input.bytes] as const))) {
    console.log(`    ${kb(bytes).padStart(7)} KB  module  ${path}`)
  }
}

// ─── the run ───────────────────────────────────────────────────────────────────────────────────

const program = async () => {
  const builds: Array<Build> = subjects
    .filter((subject) => chosen === undefined || chosen.includes(subject.id))
    .flatMap((subject) =>
      (subject.effect === true ? lines : [undefined]).map((line): Build => ({
        subject,
        line,
        key: line === undefined ? subject.id : `${subject.id}.${line}`,
        samples: [],
        lingered: 0
      }))
    )
  const bundlingStarted = performance.now()
  await Promise.all(builds.map(bundle))
  const bundlingSeconds = (performance.now() - bundlingStarted) / 1000

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
  const [load1, load5, load15] = loadavg().map((load) => load.toFixed(2))
  console.log("weight at the door: each subject's bundle, its cold start to a first call, its heap after a full GC")
  console.log(
    `Node ${process.version}, ${availableParallelism()} cores, load average ${load1} ${load5} ${load15} (wall-clock figures move with the load: compare the ratios)`
  )
  console.log(
    `size: esbuild ${esbuild.version}, bundle + minify, ESM, platform "neutral" with Node's built-in modules external (those imported listed), gzip level 9; KB = 1,000 bytes`
  )
  console.log(
    `cold start: spawn of \`node --expose-gc\` on that bundle (+ a createRequire line) → its report of a completed chat call against a server in this process; median (min–max) of ${runs} runs, subjects taking turns, after one unreported run each`
  )
  console.log(
    "heap: heapUsed after gc() twice, the client built, one call made, the client still referenced; median of the same runs"
  )
  console.log(
    "resilient-ai bundled from its sources for each Effect line; the rows without Effect are measured once and shown on both"
  )
  console.log(`bundled in ${bundlingSeconds.toFixed(1)} s`)

  const runnable = () => builds.filter((b) => b.skipped === undefined && b.runSkipped === undefined)
  // One unreported run each: the bundle read from disk once, and a subject that fails is set aside.
  for (const build of runnable()) {
    await runOnce(build, baseUrl).catch((error: Error) => {
      build.runSkipped = `failed: ${error.message}`
      process.exitCode = 1
    })
  }
  const measured = runnable()
  const runsStarted = performance.now()
  for (let round = 0; round < runs; round++) {
    const order = measured.map((_, index) => measured[(index + round) % measured.length]!)
    for (const build of order) {
      if (build.runSkipped !== undefined) continue
      try {
        const sample = await runOnce(build, baseUrl)
        build.samples.push({ round, millis: sample.millis, heapUsed: sample.heapUsed })
        if (sample.lingered) build.lingered++
      } catch (error) {
        build.runSkipped = `failed in run ${round + 1}: ${(error as Error).message}`
        build.samples.length = 0
        process.exitCode = 1
      }
    }
  }
  server.close()
  console.log(`${runs} runs in ${((performance.now() - runsStarted) / 1000).toFixed(1)} s`)

  const find = (id: string, line: Line) =>
    builds.find((b) => b.subject.id === id && (b.line === undefined || b.line === line))
  const widths = [34, 8, 8, 9, 20, 9, 9, 9, 11]
  for (const line of lines) {
    const rows = builds.filter((b) => b.line === undefined || b.line === line)
    const base = find(reference, line)
    const empty = find(baseline, line)
    console.log()
    console.log(`=== ${names[line]} line (${line}) ===`)
    console.log(row([
      "subject",
      "min KB",
      "gzip KB",
      "built-ins",
      "cold start ms",
      "÷ openai",
      "heap MiB",
      "÷ openai",
      "− empty MiB"
    ], widths))
    const notes: Array<string> = []
    for (const build of rows) {
      const { size, subject } = build
      if (build.skipped !== undefined) {
        console.log(row([subject.label, build.skipped], [widths[0]!, 0]))
        continue
      }
      const sized = [kb(size!.minified), kb(size!.gzipped), String(size!.builtins.length)]
      if (size!.builtins.length > 0) notes.push(`${subject.label} imports node: ${size!.builtins.join(", ")}`)
      if (build.lingered > 0) {
        notes.push(`${subject.label}: ${build.lingered} of ${runs} processes still alive 5 s after the call (killed)`)
      }
      if (build.runSkipped !== undefined || build.samples.length === 0) {
        console.log(row([subject.label, ...sized], widths) + `  ${build.runSkipped ?? "not run"}`)
        continue
      }
      const millis = build.samples.map((s) => s.millis)
      const heap = heapOf(build)!
      const emptyHeap = heapOf(empty)
      console.log(row([
        subject.label,
        ...sized,
        `${median(millis).toFixed(0)} (${Math.min(...millis).toFixed(0)}–${Math.max(...millis).toFixed(0)})`,
        build === base ? "1.00×" : times(coldRatio(build, base)),
        mib(heap),
        times(heapOf(base) === undefined ? undefined : heap / heapOf(base)!),
        emptyHeap === undefined ? "–" : mib(heap - emptyHeap)
      ], widths))
    }
    for (const note of notes) console.log(`  ${note}`)

    console.log()
    console.log(
      `goals (${
        names[line]
      }), set for the promise door; ResilientFetch and ModelClient held to the same bars for comparison:`
    )
    const verdict = (ok: boolean) => ok ? "met" : "NOT MET"
    const goalWidths = [34, 20, 26, 30, 24]
    console.log(row([
      "",
      "gzip KB with openai",
      `beyond openai's (≤ ${goals.gzipBytes / 1000})`,
      `cold start ÷ openai (≤ ${goals.coldStart}×)`,
      `heap ÷ openai (≤ ${goals.heap}×)`
    ], goalWidths))
    for (const id of goalRows) {
      const build = find(id, line)
      if (build === undefined) continue
      const label = build.subject.label
      if (build.skipped !== undefined) {
        console.log(row([label, build.skipped], [goalWidths[0]!, 0]))
        continue
      }
      const gzipped = build.size!.gzipped
      const cold = coldRatio(build, base)
      const heap = heapOf(build)
      const heapRatio = heap === undefined || heapOf(base) === undefined ? undefined : heap / heapOf(base)!
      console.log(row([
        label,
        kb(gzipped),
        base?.size === undefined
          ? "–"
          : `+${kb(gzipped - base.size.gzipped)} ${verdict(gzipped - base.size.gzipped <= goals.gzipBytes)}`,
        cold === undefined ? "not measured" : `${times(cold)} ${verdict(cold <= goals.coldStart)}`,
        heapRatio === undefined ? "not measured" : `${times(heapRatio)} ${verdict(heapRatio <= goals.heap)}`
      ], goalWidths))
    }
    if (base !== undefined && base.samples.length > 0 && empty !== undefined && empty.samples.length > 0) {
      console.log(
        `  (openai's own: ${millisOf(base).toFixed(0)} ms to its first call, ${
          mib(heapOf(base)!)
        } MiB; an empty node: ${millisOf(empty).toFixed(0)} ms, ${mib(heapOf(empty)!)} MiB)`
      )
    }
  }

  if (top > 0) {
    console.log()
    console.log(`the biggest inputs of each size bundle (bytes in the minified bundle, before gzip):`)
    for (const build of builds) {
      if (build.size === undefined) continue
      printTop(build, `${build.subject.label}${build.line === undefined ? "" : ` (${names[build.line]})`}`)
    }
  }
}

program().catch((error) => {
  server.close()
  console.error(error)
  process.exitCode = 1
})
