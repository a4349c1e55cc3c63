/**
 * `@resilient-ai/testing`: a real loopback fault server speaking the OpenAI / Mistral and Anthropic
 * wire formats, the plans that script its faults, and recorded provider responses. The storm
 * simulator is `@resilient-ai/storm`.
 */
export * as FaultPlan from "./FaultPlan.js"
export * as FaultServer from "./FaultServer.js"
export * as Fixtures from "./Fixtures.js"
