/**
 * `@resilient-ai/client`: the model client service, whose HTTP calls fail as the policy's failures;
 * response schemas, targets built from `Config`, failover, a health probe, and the adapters that put
 * an SDK's `fetch` or Effect's `HttpClient` under a target's policy.
 */
export * as ChatCompletion from "./ChatCompletion.js"
export * as Embeddings from "./Embeddings.js"
export * as Failover from "./Failover.js"
export * as HealthProbe from "./HealthProbe.js"
export * as ModelClient from "./ModelClient.js"
export * as ResilientFetch from "./ResilientFetch.js"
export * as ResilientHttpClient from "./ResilientHttpClient.js"
export * as Target from "./Target.js"
