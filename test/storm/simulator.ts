/**
 * A worker thread that runs storm simulations for `Storm.test.ts` (see `offThread.ts`), bundled
 * from the sources (`test/bundleSetup.ts`). It is told what to run by name, since a scenario and a
 * contender hold functions no message can carry, and answers with the results as plain data: each
 * run's contender as its name, description and whether it is ours.
 */
import { Storm, StormPolicies, StormScenarios, StormSections } from "@resilient-ai/storm/internal"
import { parentPort } from "node:worker_threads"
import type { Request, Response } from "./offThread.js"

const isContender = (value: unknown): value is StormPolicies.Contender =>
  typeof value === "object" && value !== null && "name" in value && "make" in value &&
  typeof value.make === "function"

/** Every contender `StormPolicies` exports, alone or in a list, by name. */
const contenders = new Map(
  Object.values(StormPolicies).flatMap((value) => Array.isArray(value) ? value : [value]).filter(isContender).map((
    contender
  ) => [contender.name, contender])
)

const contender = (name: string): StormPolicies.Contender => {
  const found = contenders.get(name)
  if (found === undefined) throw new Error(`no storm contender is named ${name}`)
  return found
}

/** A run as a message carries it: its contender's functions left behind. */
const plainRun = (run: Storm.Run): Storm.Run => ({
  ...run,
  contender: { name: run.contender.name, description: run.contender.description, ours: run.contender.ours } as never
})

const answer = (request: Request): Response["value"] => {
  switch (request._tag) {
    case "runs": {
      const [maker, ...args] = request.scenario
      const made = (StormScenarios[maker] as (...args: ReadonlyArray<unknown>) => Storm.Scenario)(...args)
      const scenario = request.withoutProbe ? { ...made, probe: undefined } : made
      return request.contenders.map((name) => plainRun(Storm.run(scenario, contender(name), request.seed)))
    }
    case "section":
      return StormSections[request.section](request.seed, request.scale, request.contenders?.map(contender))
  }
}

parentPort!.on("message", (request: Request) => {
  let response: Response
  try {
    response = { id: request.id, value: answer(request) }
  } catch (error) {
    response = { id: request.id, error: error instanceof Error ? error.stack ?? error.message : String(error) }
  }
  parentPort!.postMessage(response)
})
