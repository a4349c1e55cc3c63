/**
 * The install check (docs/effect-lines.md): for each Effect line, what a new user does, from the
 * packed tarballs (`scripts/pack.ts`). A fresh project with that line's `effect` and platform
 * installs every package of ours from npm's registry and the tarballs; the install must print no
 * peer-dependency warning. Then the README's three moves (test/examples/moves.test.ts, as it is)
 * type-check against the tarballs' declarations and run under that line's vitest there, against
 * the fault server of the tarball of `@resilient-ai/testing`. Then, in a project with no Effect of its
 * own, the promise door (`@resilient-ai/fetch`) under the openai SDK retries a 503 under one key.
 *
 * `tsx test/install/check.ts [effect3|effect4]`, after both builds; the Effect 4 line needs Node 22
 * or later (vitest 5), where it is skipped with a line saying so.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

type Line = "effect3" | "effect4"

const root = fileURLToPath(new URL("../../", import.meta.url))
const pins = (path: string): Record<string, string> => {
  const manifest = JSON.parse(readFileSync(Path.join(root, path), "utf8")) as {
    readonly dependencies?: Record<string, string>
    readonly devDependencies?: Record<string, string>
  }
  return { ...manifest.dependencies, ...manifest.devDependencies }
}

/** What a user of each line has in their project besides us, at the versions the repository tests with. */
const projectOf = (line: Line): Record<string, string> => {
  const versions = line === "effect3" ? pins("package.json") : pins("lines/effect4/package.json")
  const names = line === "effect3"
    ? ["effect", "@effect/platform", "@effect/platform-node", "@effect/vitest", "vitest"]
    : ["effect", "@effect/platform-node", "@effect/vitest", "vitest"]
  return Object.fromEntries(
    [...names, "typescript"].map((name) => [name, versions[name] ?? pins("package.json")[name]!])
  )
}

/** Lines of npm's output that speak of peer dependencies: any is a failure of the line's packaging. */
const peerTrouble = (output: string): ReadonlyArray<string> =>
  output.split("\n").filter((line) => /peer|ERESOLVE|conflicting|overriding/i.test(line))

/** Longest a step may take: a registry that stops answering fails the check rather than hang CI. */
const stepTimeoutMillis = 10 * 60_000

const run = (command: string, args: ReadonlyArray<string>, cwd: string): string => {
  const result = spawnSync(command, args, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, CI: "true" },
    timeout: stepTimeoutMillis
  })
  const output = `${result.stdout}${result.stderr}`
  if (result.error !== undefined) {
    throw new Error(`${command} ${args.join(" ")} in ${cwd}: ${result.error.message}\n${output}`)
  }
  if (result.status !== 0) throw new Error(`${command} ${args.join(" ")} failed in ${cwd}:\n${output}`)
  return output
}

/**
 * npm's own patience is five minutes a request, twice over: a stalled connection to the registry
 * (seen once on CI's machine) is given up on after 30 s and tried again, up to five times.
 */
const npmNetwork = ["--fetch-timeout=30000", "--fetch-retries=5", "--fetch-retry-maxtimeout=20000"]

const check = (line: Line): void => {
  const packs = Path.join(root, "build", "packs", line)
  execFileSync("npx", ["tsx", Path.join(root, "scripts", "pack.ts"), line], { cwd: root, stdio: "ignore" })
  const tarballs = readdirSync(packs).filter((name) => name.endsWith(".tgz"))
  const project = mkdtempSync(Path.join(tmpdir(), `resilient-ai-${line}-`))
  try {
    const ours = Object.fromEntries(tarballs.map((file) => {
      const name = `@resilient-ai/${file.replace(/^resilient-ai-/, "").replace(/-\d+\.\d+\.\d+\.tgz$/, "")}`
      return [name, `file:${Path.join(packs, file)}`]
    }))
    writeFileSync(
      Path.join(project, "package.json"),
      JSON.stringify(
        {
          name: `resilient-ai-${line}-user`,
          private: true,
          type: "module",
          // The moves' harness reaches what differs between the lines through `#test-line`, as in the repository.
          imports: { "#test-line": "./line.ts" },
          dependencies: { ...projectOf(line), ...ours }
        },
        null,
        2
      )
    )
    const installed = run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=warn", ...npmNetwork], project)
    const trouble = peerTrouble(installed)
    if (trouble.length > 0) throw new Error(`npm warned about peer dependencies on ${line}:\n${trouble.join("\n")}`)

    // The moves as the repository runs them; the canary key is the only import from outside.
    const moves = readFileSync(Path.join(root, "test", "examples", "moves.test.ts"), "utf8").replace(
      /^import \{ canary \} from "\.\.\/canary\.js"$/m,
      `const canary = ${JSON.stringify("sk-canary-Zq7Xw3Lp9Tn2Vb6Md4Rf")}`
    )
    writeFileSync(Path.join(project, "moves.test.ts"), moves)
    copyFileSync(Path.join(root, "test", "line", `${line}.ts`), Path.join(project, "line.ts"))
    writeFileSync(
      Path.join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          allowImportingTsExtensions: true,
          skipLibCheck: true,
          types: ["node"],
          lib: ["ES2022", "DOM"]
        },
        include: ["moves.test.ts", "line.ts"]
      })
    )
    run(
      "npm",
      ["install", "--no-audit", "--no-fund", "--loglevel=error", ...npmNetwork, "--no-save", "@types/node@22"],
      project
    )
    run("npx", ["tsc", "-p", "."], project)
    process.stdout.write(run("npx", ["vitest", "run"], project))
    process.stdout.write(
      `${line}: installed from ${tarballs.length} tarballs with no peer warning; the three moves pass\n`
    )
  } finally {
    rmSync(project, { recursive: true, force: true })
  }
  checkDoor(line, packs, tarballs)
}

/**
 * A program with no Effect of its own, on the openai SDK: the promise door installs (bringing the
 * line's `effect` itself) with no peer warning, and its `fetch` retries a 503 under one key.
 */
const doorProgram = `import { createServer } from "node:http"
import { resilientFetch } from "@resilient-ai/fetch"
import OpenAI from "openai"

const keys = []
const server = createServer((request, response) => {
  keys.push(request.headers["idempotency-key"])
  request.resume()
  request.on("end", () => {
    const body = keys.length === 1
      ? { error: { message: "overloaded", type: "server_error" } }
      : { id: "c", object: "chat.completion", created: 0, model: "m", choices: [{ index: 0, message: { role: "assistant", content: "hello" }, finish_reason: "stop" }] }
    response.writeHead(keys.length === 1 ? 503 : 200, { "content-type": "application/json" }).end(JSON.stringify(body))
  })
})
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve))
const baseUrl = \`http://127.0.0.1:\${server.address().port}/v1\`
const fetch = resilientFetch({ name: "door", baseUrl, model: "m", apiKey: "sk-check", baseDelay: 1, maxDelay: 5 })
const openai = new OpenAI({ baseURL: baseUrl, apiKey: "sk-check", fetch, maxRetries: 0 })
const completion = await openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] })
await fetch.close()
server.close()
const ok = completion.choices[0].message.content === "hello" && keys.length === 2 && keys[0] !== undefined && keys[0] === keys[1]
console.log(JSON.stringify({ ok, keys, attempts: fetch.metrics().attempts }))
process.exitCode = ok ? 0 : 1
`

const checkDoor = (line: Line, packs: string, tarballs: ReadonlyArray<string>): void => {
  const door = ["fetch", "client", "policy", "redis"]
  const project = mkdtempSync(Path.join(tmpdir(), `resilient-ai-door-${line}-`))
  try {
    const ours = Object.fromEntries(
      tarballs.filter((file) => door.some((name) => file.startsWith(`resilient-ai-${name}-`))).map((file) => [
        `@resilient-ai/${file.replace(/^resilient-ai-/, "").replace(/-\d+\.\d+\.\d+\.tgz$/, "")}`,
        `file:${Path.join(packs, file)}`
      ])
    )
    writeFileSync(
      Path.join(project, "package.json"),
      JSON.stringify(
        {
          name: `resilient-ai-door-${line}-user`,
          private: true,
          type: "module",
          dependencies: { openai: pins("package.json")["openai"]!, ...ours }
        },
        null,
        2
      )
    )
    const installed = run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=warn", ...npmNetwork], project)
    const trouble = peerTrouble(installed)
    if (trouble.length > 0) {
      throw new Error(`npm warned about peer dependencies for the door on ${line}:\n${trouble.join("\n")}`)
    }
    writeFileSync(Path.join(project, "door.mjs"), doorProgram)
    const said = run(process.execPath, ["door.mjs"], project)
    process.stdout.write(
      `${line}: the promise door, from ${Object.keys(ours).length} tarballs in a project without Effect: ${said}`
    )
  } finally {
    rmSync(project, { recursive: true, force: true })
  }
}

const major = Number(process.versions.node.split(".")[0])
const lines: ReadonlyArray<Line> = process.argv[2] === undefined ? ["effect3", "effect4"] : [process.argv[2] as Line]
for (const line of lines) {
  if (line === "effect4" && major < 22) {
    process.stdout.write(`Node ${process.versions.node}: the Effect 4 line's install check needs Node 22 or later\n`)
    continue
  }
  check(line)
}
