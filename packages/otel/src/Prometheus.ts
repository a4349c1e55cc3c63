/**
 * Effect's metrics in Prometheus's text format, through OpenTelemetry's Prometheus exporter: served
 * on `/metrics` by a scoped layer (`layerServer`), or as text for a server of one's own (`text`).
 *
 * What a scrape sees: each Effect counter as a Prometheus counter under its own name (the
 * toolkit's end in `_total` already, and keep one `_total`), each histogram as `_bucket` series
 * (`le`, cumulative, up to `+Inf`), `_sum` and `_count`, each gauge as a gauge; Effect's tags are
 * the labels (`target`, `model`, `kind`, `reason`). OpenTelemetry's exporter adds two things, made
 * choices here: a `target_info` gauge of the resource's attributes (`service_name`, the SDK's name
 * and language), kept by default since it is how OpenTelemetry's resource reaches Prometheus; and
 * an `otel_scope_name` label on every series, left out by default since every series would carry
 * the same value (`@effect/opentelemetry/Metrics`). `# UNIT` lines (OpenMetrics, not Prometheus's
 * text format) are left out too.
 *
 * Effect's metrics live in one registry per process: every endpoint shows every metric of the
 * process, counted from its start (see `Telemetry`).
 */
import { registerProducer } from "#otel-line"
import type * as Resource from "@effect/opentelemetry/Resource"
import { PrometheusExporter, PrometheusSerializer } from "@opentelemetry/exporter-prometheus"
import type { ResourceMetrics } from "@opentelemetry/sdk-metrics"
import { EffectLine } from "@resilient-ai/policy/internal"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as Producer from "./internal/producer.js"

/** Which metrics the exposition holds, and what it holds beyond them. */
export interface Options {
  /**
   * Only the metrics whose name matches: `/^resilient_ai_/` for the toolkit's alone. Default every
   * metric of the process, the program's own and Effect's runtime metrics (`effect_fiber_*`) among them.
   */
  readonly names?: RegExp | undefined
  /** Keep OpenTelemetry's `target_info` series, the resource's attributes as labels. Default `true`. */
  readonly targetInfo?: boolean | undefined
  /** Label every series with `otel_scope_name` (always `@effect/opentelemetry/Metrics`). Default `false`. */
  readonly scopeLabels?: boolean | undefined
  /**
   * Resource attributes, chosen by a pattern on their names, copied as labels onto every series
   * (`/^service\.name$/` adds `service_name`). Default none: Prometheus's own `job` and `instance`
   * name the process.
   */
  readonly resourceLabels?: RegExp | undefined
}

/** The media type of the text format, for a server of one's own. */
export const contentType = "text/plain; version=0.0.4; charset=utf-8"

/** Effect's metrics, rendered on demand. */
export interface Service {
  /** Every Effect metric of the process, now, in Prometheus's text format. */
  readonly text: Effect.Effect<string>
}

/** Effect's metrics in Prometheus's text format, for a server of one's own. */
export class PrometheusMetrics extends EffectLine.Service<PrometheusMetrics, Service>()(
  "@resilient-ai/otel/Prometheus/PrometheusMetrics"
) {}

/**
 * The metrics `names` admits, without units: Prometheus's text format has no `# UNIT` line. A
 * global or sticky pattern would remember where it last matched, so neither flag is kept.
 */
const exposed = (names: RegExp | undefined) => {
  const admits = names === undefined ? undefined : new RegExp(names.source, names.flags.replace(/[gy]/g, ""))
  return (resourceMetrics: ResourceMetrics): ResourceMetrics => ({
    ...resourceMetrics,
    scopeMetrics: resourceMetrics.scopeMetrics.map((scope) => ({
      ...scope,
      metrics: scope.metrics
        .filter((metric) => admits === undefined || admits.test(metric.descriptor.name))
        .map((metric) => ({ ...metric, descriptor: { ...metric.descriptor, unit: "" } }))
    }))
  })
}

/** The exposition as a promise, for Node's callbacks; the reader is shut down with the scope. */
const collector = (options: Options): Effect.Effect<() => Promise<string>, never, Resource.Resource | Scope.Scope> =>
  Effect.gen(function*() {
    const producer = yield* Producer.make
    // The exporter is the reader; its own server is never started (it cannot be asked for port 0,
    // and its `close` leaves keep-alive connections open): `serve` listens instead.
    const exporter = new PrometheusExporter({ preventServerStart: true })
    yield* registerProducer(producer, () => exporter)
    const serializer = new PrometheusSerializer(
      "",
      false,
      options.resourceLabels,
      options.targetInfo === false,
      options.scopeLabels !== true
    )
    const select = exposed(options.names)
    return () => exporter.collect().then(({ resourceMetrics }) => serializer.serialize(select(resourceMetrics)))
  })

/** Reads Effect's metrics through an OpenTelemetry Prometheus exporter, shut down with the scope. */
export const make = (options: Options = {}): Effect.Effect<Service, never, Resource.Resource | Scope.Scope> =>
  Effect.map(collector(options), (collect) => ({ text: Effect.promise(collect) }))

/** Provides `PrometheusMetrics`. */
export const layer = (options: Options = {}): Layer.Layer<PrometheusMetrics, never, Resource.Resource> =>
  EffectLine.layerScoped(PrometheusMetrics, make(options))

/** The exposition now, from the `PrometheusMetrics` in context. */
export const text: Effect.Effect<string, never, PrometheusMetrics> = Effect.gen(function*() {
  const metrics = yield* PrometheusMetrics
  return yield* metrics.text
})

/** Where to serve the metrics, and what they hold. */
export interface ServeOptions extends Options {
  /** The port to listen on; 0 picks a free one (`Server.port` says which). */
  readonly port: number
  /** The address to listen on. Default: every interface, as Prometheus usually scrapes from elsewhere. */
  readonly host?: string | undefined
  /** The path the metrics are served on. Default `/metrics`. */
  readonly path?: string | undefined
}

/** A running metrics endpoint. */
export interface Server {
  /** The address it listens on, as bound (`::` or `0.0.0.0` for every interface). */
  readonly host: string
  /** The port it listens on, as bound: the free one picked for port 0. */
  readonly port: number
  /** The endpoint's URL, on loopback when it listens on every interface: `http://127.0.0.1:9464/metrics`. */
  readonly url: string
}

/** The running metrics endpoint. */
export class PrometheusServer extends EffectLine.Service<PrometheusServer, Server>()(
  "@resilient-ai/otel/Prometheus/PrometheusServer"
) {}

/** The metrics endpoint could not listen: the port is taken, or not ours to use. */
export class MetricsListenError extends Data.TaggedError("MetricsListenError")<{
  readonly host: string | undefined
  readonly port: number
  /** Node's error code, as `EADDRINUSE`, or its message. */
  readonly reason: string
}> {
  override get message() {
    return `the metrics endpoint cannot listen on ${this.host ?? "every interface"}, port ${this.port}: ${this.reason}`
  }
}

const unspecified = new Set(["::", "0.0.0.0"])

const listen = (server: Http.Server, options: ServeOptions) =>
  EffectLine.callback<void, MetricsListenError>((resume) => {
    const onError = (error: NodeJS.ErrnoException) =>
      resume(
        Effect.fail(
          new MetricsListenError({ host: options.host, port: options.port, reason: error.code ?? error.message })
        )
      )
    server.once("error", onError)
    server.listen({ port: options.port, host: options.host }, () => {
      server.off("error", onError)
      resume(Effect.void)
    })
    return Effect.sync(() => server.close())
  })

/** Closes the server and every connection, idle or not: a scraper keeps its connection alive. */
const close = (server: Http.Server) =>
  EffectLine.callback<void>((resume) => {
    server.close(() => resume(Effect.void))
    server.closeAllConnections()
  })

/**
 * Serves Effect's metrics on `http://host:port/path` (GET and HEAD) until the scope closes, when
 * the server and its connections are closed. Other paths answer 404.
 */
export const serve = (
  options: ServeOptions
): Effect.Effect<Server, MetricsListenError, Resource.Resource | Scope.Scope> =>
  Effect.gen(function*() {
    const collect = yield* collector(options)
    const path = options.path ?? "/metrics"
    const server = Http.createServer((request, response) => {
      const pathname = (request.url ?? "/").split("?")[0]
      if (pathname !== path) {
        response.writeHead(404).end()
      } else if (request.method !== "GET" && request.method !== "HEAD") {
        response.writeHead(405, { allow: "GET, HEAD" }).end()
      } else {
        collect().then(
          (text) => {
            response.writeHead(200, { "content-type": contentType })
            response.end(request.method === "HEAD" ? undefined : text)
          },
          (error) => {
            response.writeHead(500, { "content-type": "text/plain; charset=utf-8" })
            response.end(`# failed to collect the metrics: ${String(error)}\n`)
          }
        )
      }
    })
    yield* Effect.acquireRelease(listen(server, options), () => close(server))
    const bound = server.address() as Net.AddressInfo
    const host = unspecified.has(bound.address)
      ? "127.0.0.1"
      : bound.family === "IPv6"
      ? `[${bound.address}]`
      : bound.address
    return { host: bound.address, port: bound.port, url: `http://${host}:${bound.port}${path}` }
  })

/** Provides `PrometheusServer`: `serve` for the layer's lifetime. */
export const layerServer = (
  options: ServeOptions
): Layer.Layer<PrometheusServer, MetricsListenError, Resource.Resource> =>
  EffectLine.layerScoped(PrometheusServer, serve(options))
