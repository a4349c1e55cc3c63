/**
 * Storm simulations in a worker thread (`simulator.ts`), for the storm tests. A run is synchronous
 * and takes seconds of CPU; on a busy machine a few in a row held the test worker's event loop past
 * the 60 s vitest gives the worker to hear back from its runner ("Timeout calling onTaskUpdate"),
 * which fails the whole run. In a thread of their own they leave the worker's loop free, and run
 * with a young generation large enough that the garbage collector, much of a run's time at Node's
 * default, scavenges less often (the file took a sixth less CPU).
 */
import { line } from "#test-line"
import type { StormReport } from "@resilient-ai/storm"
import type { Storm, StormPolicies, StormScenarios } from "@resilient-ai/storm/internal"
import { Worker } from "node:worker_threads"
import { bundled } from "../built.js"

type Makers = typeof StormScenarios
type Maker = { [K in keyof Makers]: Makers[K] extends (...args: never) => Storm.Scenario ? K : never }[keyof Makers]

/** A scenario as the thread makes it: a `StormScenarios` maker and its arguments. */
export type ScenarioOf = { [K in Maker]: readonly [K, ...Parameters<Makers[K]>] }[Maker]

/** The report sections the tests run at a size of their own. */
export type SectionId = "s4" | "s6" | "s7"

/** What the thread is asked. */
export type Request =
  | {
    readonly _tag: "runs"
    readonly id: number
    readonly scenario: ScenarioOf
    /** The scenario without its health probe. */
    readonly withoutProbe: boolean
    readonly contenders: ReadonlyArray<string>
    readonly seed: number
  }
  | {
    readonly _tag: "section"
    readonly id: number
    readonly section: SectionId
    readonly seed: number
    /** The report's own when absent. */
    readonly scale?: number | undefined
    readonly contenders?: ReadonlyArray<string> | undefined
  }

/** What it answers. */
export interface Response {
  readonly id: number
  readonly value?: ReadonlyArray<Storm.Run> | StormReport.Section | undefined
  readonly error?: string | undefined
}

let thread: Worker | undefined
let asked = 0
const waiting = new Map<
  number,
  { readonly resolve: (value: unknown) => void; readonly reject: (error: Error) => void }
>()

/** Fails every waiting request, when the thread broke down. */
const fail = (error: Error) => {
  for (const { reject } of waiting.values()) reject(error)
  waiting.clear()
}

const ask = (request: Request) => {
  if (thread === undefined) {
    // The simulator bundled for this line: on Effect 4, from the packages' Effect 4 side.
    const started = new Worker(bundled(new URL("./simulator.ts", import.meta.url), line), {
      resourceLimits: { maxYoungGenerationSizeMb: 192 }
    })
    started.on("message", ({ error, id, value }: Response) => {
      const waiter = waiting.get(id)
      waiting.delete(id)
      if (error === undefined) waiter?.resolve(value)
      else waiter?.reject(new Error(`storm simulation failed: ${error}`))
      if (waiting.size === 0) started.unref()
    })
    started.on("error", (error) => {
      if (thread === started) thread = undefined
      fail(error)
    })
    started.on("exit", (code) => {
      if (thread !== started) return
      thread = undefined
      fail(new Error(`the storm simulation thread exited with code ${code}`))
    })
    thread = started
  }
  thread.ref()
  return new Promise<unknown>((resolve, reject) => {
    waiting.set(request.id, { resolve, reject })
    thread!.postMessage(request)
  })
}

/** Runs `scenario` under each of `contenders` with `seed` (as `Storm.run`), in the thread. */
export const runs = (
  scenario: ScenarioOf,
  contenders: ReadonlyArray<StormPolicies.Contender>,
  options: { readonly seed?: number; readonly withoutProbe?: boolean } = {}
) =>
  ask({
    _tag: "runs",
    id: ++asked,
    scenario,
    withoutProbe: options.withoutProbe ?? false,
    contenders: contenders.map((contender) => contender.name),
    seed: options.seed ?? 1
  }) as Promise<ReadonlyArray<Storm.Run>>

/** A report section (`StormSections.s4` and the like) with `contenders`, in the thread. */
export const section = (
  id: SectionId,
  seed: number,
  scale?: number,
  contenders?: ReadonlyArray<StormPolicies.Contender>
) =>
  ask({
    _tag: "section",
    id: ++asked,
    section: id,
    seed,
    scale,
    contenders: contenders?.map(({ name }) => name)
  }) as Promise<
    StormReport.Section
  >

/** Ends the thread, if one was started. */
export const stop = (): Promise<void> => {
  const stopping = thread
  thread = undefined
  return stopping === undefined ? Promise.resolve() : stopping.terminate().then(() => undefined)
}
