/**
 * The simulator's engine, which `@resilient-ai/cli` and the tests reach: simulated time,
 * the simulated provider, the policies compared, the scenarios, the runs, the report's sections and
 * their rendering. Not the documented surface, and no compatibility promise.
 *
 * @internal
 */
export * as Contention from "../Contention.js"
export * as SimulatedProvider from "../SimulatedProvider.js"
export * as Simulation from "../Simulation.js"
export * as Storm from "../Storm.js"
export * as StormPolicies from "../StormPolicies.js"
export * as StormRender from "../StormRender.js"
export * as StormScenarios from "../StormScenarios.js"
export * as StormSections from "./sections.js"
