/**
 * `@resilient-ai/testing`: a real loopback fault server speaking the OpenAI / Mistral wire format,
 * the plans that script its faults, recorded provider responses, and the storm simulator that
 * compares retry policies on a simulated provider in simulated time.
 */
export * as Contention from "./Contention.js"
export * as FaultPlan from "./FaultPlan.js"
export * as FaultServer from "./FaultServer.js"
export * as FaultServerBody from "./FaultServerBody.js"
export * as Fixtures from "./Fixtures.js"
export * as SimulatedProvider from "./SimulatedProvider.js"
export * as Simulation from "./Simulation.js"
export * as Storm from "./Storm.js"
export * as StormPolicies from "./StormPolicies.js"
export * as StormReport from "./StormReport.js"
export * as StormScenarios from "./StormScenarios.js"
