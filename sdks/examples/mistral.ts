/**
 * Mistral's own client (`@mistralai/mistralai`) with resilient-ai under it: the client's retries
 * off, each model call sent through the target's policy (budget, gate, full jitter, `Retry-After`,
 * one idempotency key). The client takes a custom `fetch` as its `HTTPClient`'s fetcher.
 *
 * `sdks/test/mistral.test.ts` runs it against the fault server.
 */
import { HTTPClient, Mistral } from "@mistralai/mistralai"
import { ResilientFetch, Target } from "@resilient-ai/client"
import { Effect, Redacted } from "effect"

/** A haiku from Mistral at `serverURL`, the API's root (`https://api.mistral.ai`): the client adds `/v1/…` itself. */
export const haiku = (serverURL: string) =>
  Effect.gen(function*() {
    const fetch = yield* ResilientFetch.make(Target.managed({
      name: "mistral",
      baseUrl: `${serverURL}/v1`,
      model: "mistral-small-latest",
      apiKey: Redacted.make("your-key")
    }))
    const mistral = new Mistral({
      apiKey: "your-key",
      serverURL,
      httpClient: new HTTPClient({ fetcher: fetch }),
      // strategy "none" — retrying happens at exactly one layer, this one.
      retryConfig: { strategy: "none" }
    })
    const completion = yield* Effect.promise(() =>
      mistral.chat.complete({ model: "mistral-small-latest", messages: [{ role: "user", content: "A haiku." }] })
    )
    return completion.choices[0]?.message?.content
  })
