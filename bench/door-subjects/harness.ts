/**
 * What every subject of the door bench (`bench/door.ts`) shares: the local server's address, the
 * request, and the report a subject's process makes once its first call has completed. Each
 * subject bundles this module too, so it weighs the same few hundred bytes in every row.
 */

/** The local chat-completions server, `http://127.0.0.1:{port}/v1`: door.ts passes it to each process. */
export const baseUrl = process.env["DOOR_BASE_URL"] ?? "http://127.0.0.1:9/v1"
export const model = "gpt-4o-mini"
export const apiKey = "sk-door-bench-not-a-real-key"
export const messages = [{ role: "user" as const, content: "Say hello." }]

/** What a subject's process writes on its stdout, one JSON object a line. */
export type Report =
  | { readonly _tag: "Called"; readonly content: string | null }
  | { readonly _tag: "Heap"; readonly heapUsed: number; readonly kept: number }

const write = (report: Report) => process.stdout.write(`${JSON.stringify(report)}\n`)

/**
 * Reports the first call's answer (the bench's clock stops when it reads it), then the heap used
 * after a full GC while `keep` (the client, the SDK) is still referenced.
 */
export const report = (content: string | null | undefined, ...keep: ReadonlyArray<unknown>): void => {
  write({ _tag: "Called", content: content ?? null })
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error("run with --expose-gc")
  gc()
  gc()
  // `keep` is read after the GC, so what it holds was alive during it.
  write({ _tag: "Heap", heapUsed: process.memoryUsage().heapUsed, kept: keep.length })
}
