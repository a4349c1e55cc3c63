/**
 * Runs before every test file (vitest `setupFiles`) and holds two promises for the whole suite.
 *
 * - The API key stays secret: everything a file writes to the console, stdout or stderr, every
 *   log line any fiber writes and every `JSON.stringify` is scanned for the canary key
 *   (`test/canary.ts`); the file fails after its tests if any of it contained the key.
 * - Nothing is lost: a promise rejected with nobody listening fails the file, wherever it came from.
 *
 * A worker runs file after file in one process (`isolate: false` in vitest.config.ts) and this
 * module again before each: the watching is installed once per process, what it finds is the file's.
 */
import { addToEveryFiber } from "#test-line"
import { format } from "node:util"
import { afterAll, assert, beforeAll } from "vitest"
import { report, scan, scanningLogger, scansSerialisations, startFile } from "./canary.js"

startFile()

const install = () => {
  // Every fiber starts with the scanning logger beside the default one. @effect/vitest removes the
  // default logger from `it.effect` tests, and many tests remove or replace it to keep the output
  // quiet, so watching the console alone would miss most log lines. The initial value is the only
  // place all of them share; it is set here, in tests only.
  addToEveryFiber(scanningLogger)

  // vitest routes `console` of a worker around process.stdout, so both are watched.
  for (const method of ["log", "info", "warn", "error", "debug", "trace"] as const) {
    const original = console[method].bind(console)
    console[method] = (...args: Array<unknown>) => {
      scan(`console.${method}`, format(...args))
      original(...args)
    }
  }

  // Every serialisation the suite makes, of failures and everything else, is scanned as well: a
  // failure that carries the key shows it here even if no test prints it.
  const stringify = JSON.stringify
  JSON.stringify = function(this: unknown, ...args: Parameters<typeof JSON.stringify>) {
    const text = stringify.apply(this, args)
    if (typeof text === "string" && scansSerialisations()) scan("JSON.stringify", text)
    return text
  } as typeof JSON.stringify

  const watch = (stream: NodeJS.WriteStream, where: string) => {
    const write = stream.write.bind(stream) as (...args: Array<unknown>) => boolean
    stream.write = ((chunk: unknown, ...rest: Array<unknown>) => {
      scan(where, typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString("utf8"))
      return write(chunk, ...rest)
    }) as typeof stream.write
  }
  watch(process.stdout, "stdout")
  watch(process.stderr, "stderr")
}

const installed = Symbol.for("@resilient-ai/test/setup")
const globals = globalThis as { [installed]?: true }
if (globals[installed] === undefined) {
  globals[installed] = true
  install()
}

afterAll(() => {
  const { leaks } = report()
  const found = leaks.map((leak) => `${leak.where}: ${leak.text.slice(0, 300)}`)
  assert.deepStrictEqual(found, [], "the canary API key appeared in output, a log line or a serialisation")
})

const unhandled: Array<unknown> = []
const onUnhandled = (reason: unknown) => unhandled.push(reason)
beforeAll(() => {
  process.on("unhandledRejection", onUnhandled)
})
afterAll(() => {
  process.off("unhandledRejection", onUnhandled)
  assert.deepStrictEqual(unhandled, [], "no promise may be rejected with nobody listening")
})
