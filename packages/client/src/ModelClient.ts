/**
 * The model client: chat, embeddings and streaming chat against one target, each call resilient.
 *
 * Every call is one logical request: it carries the caller's deadline (or `timeout`), one request
 * id sent as the idempotency key on every attempt, and whether replaying it is safe (embeddings
 * are, by default; chat is not, since a replayed generation is billed again). Each target has its
 * own retry budget, concurrency gate and rate limiter, so several targets can be used side by side
 * (build each with `make` under a tag of your own), and every client of one target and API key
 * shares them.
 *
 * ```ts
 * import { ModelClient, Target } from "@resilient-ai/client"
 * import { Context, Layer } from "effect"
 *
 * class Mistral extends Context.Tag("app/Mistral")<Mistral, ModelClient.Service>() {}
 * const MistralLive = Layer.effect(Mistral, ModelClient.makeConfig(Target.managedConfig("MISTRAL")))
 * ```
 *
 * Each call is a span named and attributed after OpenTelemetry's GenAI conventions
 * (`chat mistral-small-latest`, kind client, `gen_ai.*`), with the policy's span per attempt under it
 * and the HTTP client's spans under those. Unless the target's `propagateTrace` says otherwise, the
 * trace context is not sent: `traceparent` and `b3` would tell a third-party API the ids of your
 * traces.
 */
import { HttpClient } from "#client-line"
import type * as Failure from "@resilient-ai/policy/Failure"
import * as Engine from "@resilient-ai/policy/internal/engine"
import * as EffectLine from "@resilient-ai/policy/internal/line"
import * as Retries from "@resilient-ai/policy/internal/resilient"
import * as Resilient from "@resilient-ai/policy/Resilient"
import type * as Settings from "@resilient-ai/policy/Settings"
import type * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as ChatCompletion from "./ChatCompletion.js"
import * as Embeddings from "./Embeddings.js"
import * as HealthProbe from "./HealthProbe.js"
import * as GenAi from "./internal/genAi.js"
import * as Requests from "./internal/requests.js"
import * as HttpAttempt from "./internal/transport.js"
import * as Wiring from "./internal/wiring.js"
import type * as Target from "./Target.js"

/** How a call can end without a value: the policy's aggregate of its attempts. */
export type CallFailed = Failure.CallFailed<Failure.Failure>

/** Settings of one call: a policy's, but for its span, which the client names after the call. */
export interface CallOptions extends Omit<Resilient.CallOptions, "span"> {}

/** A client of one target. */
export interface Service {
  readonly target: Target.Target
  readonly chat: (
    request: ChatCompletion.ChatRequest,
    options?: CallOptions
  ) => Effect.Effect<ChatCompletion.ChatCompletion, CallFailed>
  readonly embeddings: (
    request: Embeddings.EmbeddingsRequest,
    options?: CallOptions
  ) => Effect.Effect<Embeddings.Embeddings, CallFailed>
  /**
   * A streamed chat completion. Attempts are retried only until the first chunk reaches the
   * caller (a `CallFailed` before it); after it, a failure ends the stream with that failure and
   * nothing is replayed. The stream holds one permit of the target's gate until it ends.
   */
  readonly chatStream: (
    request: ChatCompletion.ChatRequest,
    options?: CallOptions
  ) => Stream.Stream<ChatCompletion.ChatCompletionChunk, CallFailed | Failure.Failure>
}

/** The client of the application's default target. */
export class ModelClient extends EffectLine.Service<ModelClient, Service>()("@resilient-ai/client/ModelClient") {}

/** A client of a wired target. */
const makeWith = (wiring: Wiring.Wiring): Effect.Effect<Service, never, HttpClient.HttpClient> =>
  Effect.map(Effect.context<HttpClient.HttpClient>(), (context) => {
    const { endpoint, policyFor, state, target } = wiring
    const http = Context.get(context, HttpClient.HttpClient)
    // Each call's span, named and attributed after OpenTelemetry's GenAI conventions, made once per model.
    const server = GenAi.serverOf(target.baseUrl)
    const spansOf = (make: (model: string) => Retries.CallSpan) => {
      const made = new Map<string, Retries.CallSpan>()
      return (model: string) => {
        let span = made.get(model)
        if (span === undefined) made.set(model, span = make(model))
        return span
      }
    }
    const chatSpan = spansOf((model) => GenAi.spanOf(server, "chat", model))
    const embeddingsSpan = spansOf((model) => GenAi.spanOf(server, "embeddings", model))

    const chat: Service["chat"] = (request, options) => {
      const model = request.model ?? target.model
      return Engine.run(
        HttpAttempt.jsonAttempt(
          http,
          endpoint,
          "/chat/completions",
          Requests.chatBody(request, model, false),
          ChatCompletion.ChatCompletion,
          (completion) => completion.usage
        ),
        policyFor(model),
        state,
        { tokens: Requests.chatTokens(request), ...options, span: GenAi.withRequest(chatSpan(model), request) }
      )
    }

    const embeddings: Service["embeddings"] = (request, options) => {
      const model = request.model ?? target.model
      return Engine.run(
        HttpAttempt.jsonAttempt(
          http,
          endpoint,
          "/embeddings",
          Requests.embeddingsBody(request, model),
          Embeddings.Embeddings,
          (result) => result.usage
        ),
        policyFor(model),
        state,
        { replaySafe: true, tokens: Requests.embeddingsTokens(request), ...options, span: embeddingsSpan(model) }
      )
    }

    const chatStream: Service["chatStream"] = (request, options) => {
      const model = request.model ?? target.model
      const policy = policyFor(model)
      const post = HttpAttempt.streamAttempt(
        endpoint,
        "/chat/completions",
        Requests.chatBody(request, model, true),
        ChatCompletion.ChatCompletionChunk,
        (chunk) => chunk.usage,
        policy.attemptTimeout
      )
      return Engine.stream(post, policy, state, {
        tokens: Requests.chatTokens(request),
        ...options,
        span: GenAi.withRequest(chatSpan(model), request)
      })
        .pipe(Stream.provideContext(context))
    }

    return { target, chat, embeddings, chatStream }
  })

/**
 * A client of `target`: a checked target, or the effect that checks one (`Target.managed(options)`,
 * `Target.managedConfig(prefix)`), whose failure is the client's. Its budget, gate and rate limiter
 * are the target's in the `Coordination` in context (in this process unless one is provided), kept
 * under the target's name and API key: another client of the same target and key shares them.
 *
 * ```ts
 * import { ModelClient, Target } from "@resilient-ai/client"
 * import { Context, Layer } from "effect"
 *
 * class Pool extends Context.Tag("app/Pool")<Pool, ModelClient.Service>() {}
 * const PoolLive = Layer.effect(
 *   Pool,
 *   ModelClient.make(Target.selfHosted({ name: "pool", baseUrl: "http://gpu-pool:8000/v1", model: "mistral-small" }))
 * )
 * ```
 */
export const make = <E = never, R = never>(
  target: Target.Target | Effect.Effect<Target.Target, E, R>
): Effect.Effect<Service, E | Settings.InvalidSettings, HttpClient.HttpClient | R> =>
  Effect.flatMap(
    Effect.isEffect(target) ? target : Effect.succeed(target),
    (checked) => Effect.flatMap(Effect.map(Wiring.wire(checked), HttpAttempt.withTracePolicy), makeWith)
  )

/** `make` for a target read from `config`, failing with the `ConfigError` before any request. */
export const makeConfig = (
  config: Config.Config<Target.Target>
): Effect.Effect<Service, EffectLine.ConfigError | Settings.InvalidSettings, HttpClient.HttpClient> => make(config)

/**
 * Provides `ModelClient` for `target` (a checked target, or the effect that checks one), and runs the
 * target's health probe (`HealthProbe`) while the layer lives when the target has a `probeInterval`.
 *
 * ```ts
 * import { NodeHttpClient } from "@effect/platform-node"
 * import { ModelClient, Target } from "@resilient-ai/client"
 * import { Layer } from "effect"
 *
 * const MistralLive = ModelClient.layer(Target.managedConfig("MISTRAL")).pipe(Layer.provide(NodeHttpClient.layerUndici))
 * ```
 */
export const layer = <E = never, R = never>(
  target: Target.Target | Effect.Effect<Target.Target, E, R>
): Layer.Layer<ModelClient, E | Settings.InvalidSettings, HttpClient.HttpClient | R> =>
  EffectLine.layerScoped(
    ModelClient,
    Effect.tap(
      make(target),
      (client) => client.target.probeInterval === undefined ? Effect.void : HealthProbe.run(client.target)
    )
  )

/** `layer` for the target read from `config`. */
export const layerConfig = (
  config: Config.Config<Target.Target>
): Layer.Layer<ModelClient, EffectLine.ConfigError | Settings.InvalidSettings, HttpClient.HttpClient> => layer(config)
