/**
 * `@resilient-ai/storm`: the storm simulator, which compares retry policies on a simulated
 * provider in simulated time. Its surface is the report: run a scenario under every policy and
 * read its figures.
 */
export * as StormReport from "./StormReport.js"
