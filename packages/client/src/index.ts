/**
 * `@resilient-ai/client`: the HTTP transport mapped onto the policy's failures, response schemas,
 * the model client service, targets built from `Config`, and failover.
 */
export * as ChatCompletion from "./ChatCompletion.js"
export * as Embeddings from "./Embeddings.js"
export * as Failover from "./Failover.js"
export * as HealthProbe from "./HealthProbe.js"
export * as ModelClient from "./ModelClient.js"
export * as ProviderError from "./ProviderError.js"
export * as ResilientFetch from "./ResilientFetch.js"
export * as ResilientHttpClient from "./ResilientHttpClient.js"
export * as Target from "./Target.js"
export * as Transport from "./Transport.js"
