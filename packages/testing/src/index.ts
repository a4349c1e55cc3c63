/**
 * `@resilient-ai/testing`: a real loopback fault server speaking the OpenAI / Mistral and Anthropic
 * wire formats, and the plans that script its faults (recorded provider responses among them). The
 * storm simulator is `@resilient-ai/storm`.
 */
export * as FaultPlan from "./FaultPlan.js"
export * as FaultServer from "./FaultServer.js"
