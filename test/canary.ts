/**
 * The secret every test uses as an API key (and as a Redis password), and the log sink that checks
 * for it. A key that reaches a log line, an error message or a serialised failure is found by
 * `test/setup.ts`, which fails the run.
 */
import { logScanner } from "#test-line"
import { Effect } from "effect"

/** Distinctive, so a search for it finds only leaks: no real key looks like this. */
export const canary = "sk-canary-Zq7Xw3Lp9Tn2Vb6Md4Rf"

/** Where a text containing the canary was seen, and the text. */
export interface Leak {
  readonly where: string
  readonly text: string
}

const leaks: Array<Leak> = []
let scanned = 0
let scanningSerialisations = true

/**
 * For a file whose fault server plays a provider that echoes the key: the server's own
 * `JSON.stringify` of its answers holds the key by design, so serialisations are not scanned there
 * (that file renders every failure itself and asserts on each).
 */
export const providerEchoesKey = (): void => {
  scanningSerialisations = false
}

/** Whether `JSON.stringify` output is scanned in this file. */
export const scansSerialisations = (): boolean => scanningSerialisations

/** Records `text` as a leak if it contains the canary. */
export const scan = (where: string, text: string): void => {
  scanned++
  if (text.includes(canary)) leaks.push({ where, text: text.slice(0, 2_000) })
}

/**
 * Runs `self` and gives the leaks it caused, taking them off the record so they fail nothing: for
 * the test that shows the tripwire catches a key where it should.
 */
export const leaksOf = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<ReadonlyArray<Leak>, E, R> =>
  Effect.suspend(() => {
    const from = leaks.length
    return Effect.map(self, () => leaks.splice(from))
  })

/**
 * Starts a test file's record: no leaks yet, serialisations scanned. A worker runs many files in
 * one process; `test/setup.ts` calls this before each.
 */
export const startFile = (): void => {
  leaks.length = 0
  scanningSerialisations = true
}

/** Leaks found so far in this file, and how many texts were scanned in this worker. */
export const report = (): { readonly leaks: ReadonlyArray<Leak>; readonly scanned: number } => ({
  leaks: [...leaks],
  scanned
})

/**
 * A logger that prints nothing and scans everything a log line could carry: the message, the
 * annotations, the spans and the cause, as the logfmt and JSON loggers would write them.
 * `test/setup.ts` gives it to every fiber.
 */
export const scanningLogger = logScanner(scan)
