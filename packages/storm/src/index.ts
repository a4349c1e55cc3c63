/**
 * `@resilient-ai/storm`: the storm simulator, which compares retry policies on a simulated
 * provider in simulated time: the simulation, the provider model, the policies compared, the
 * scenarios, and the report.
 */
export * as Contention from "./Contention.js"
export * as SimulatedProvider from "./SimulatedProvider.js"
export * as Simulation from "./Simulation.js"
export * as Storm from "./Storm.js"
export * as StormPolicies from "./StormPolicies.js"
export * as StormRender from "./StormRender.js"
export * as StormReport from "./StormReport.js"
export * as StormScenarios from "./StormScenarios.js"
