/**
 * A real loopback HTTP server that speaks the OpenAI / Mistral and Anthropic wire formats and
 * misbehaves on cue.
 *
 * It answers, with the bodies and headers the real APIs send (JSON, or server-sent events for
 * `"stream": true`): OpenAI's `POST /v1/chat/completions`, `POST /v1/embeddings` and
 * `POST /v1/responses` (the Responses API, which `@effect/ai-openai` and the Vercel AI SDK call),
 * Anthropic's `POST /v1/messages`, and `GET /v1/models`, a health probe's request, served apart
 * from inference as a provider serves it: outside the plan's `capacity` and `steps`, by its windows
 * and `otherwise` alone. It applies a `FaultPlan` to each request, every fault in the
 * wire format of the endpoint: error statuses with provider bodies and retry hints, stalls before
 * or inside the body, connection resets, truncated or contract-breaking bodies, proxy HTML pages,
 * recorded fixtures, broken streams, streams that report an error, and a concurrency limit. Every
 * arrival is recorded, so a test counts attempts and reads the headers a client sent. The bodies
 * are built apart from the server (`internal/faultAnswers` chooses them by endpoint), and which
 * fault a request gets is decided apart from the sockets (`internal/faultEngine`); this module holds
 * the sockets, the timers and the writing.
 *
 * It is built on `node:http` rather than a framework because the interesting faults live below
 * HTTP: a reset must be a TCP reset, a stall must hold a real socket. For the same reason time is
 * real (timers, not `TestClock`); every timer and socket is released with the scope.
 */
import { callback } from "#testing-line"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Buffer } from "node:buffer"
import * as Http from "node:http"
import type * as Net from "node:net"
import { performance } from "node:perf_hooks"
import type * as FaultPlan from "./FaultPlan.js"
import { fixtures } from "./Fixtures.js"
import { type Answers, answersOf } from "./internal/faultAnswers.js"
import { type Api, apiOf, FaultEngine } from "./internal/faultEngine.js"
import * as FaultServerBody from "./internal/faultServerBody.js"

/** One request the server received, and what it did with it. */
export interface Arrival {
  /** 0 for the first arrival since the server started or `clearArrivals`. */
  readonly index: number
  /** Milliseconds since the server started, on the real clock, when the request arrived. */
  readonly at: number
  readonly method: string
  /** The path without the query string, as `/v1/chat/completions`. */
  readonly path: string
  /** Request headers, lower-case names, repeated headers joined with `, `. */
  readonly headers: Readonly<Record<string, string>>
  /** The parsed JSON body, or the raw text when it was not JSON. */
  readonly body: unknown
  /** What was served; `Status` also for 404, 405, 400 and capacity refusals. */
  readonly fault: FaultPlan.Fault["_tag"]
  /** The client closed the connection before the response was complete. */
  readonly aborted: boolean
}

/** A running fault server. */
export interface Service {
  /** The base URL an OpenAI client expects, as `http://127.0.0.1:PORT/v1`. */
  readonly url: string
  /** The origin, as `http://127.0.0.1:PORT`: the base URL of an Anthropic client, which adds `/v1/messages` itself. */
  readonly origin: string
  readonly port: number
  /** Every arrival so far, oldest first. */
  readonly arrivals: Effect.Effect<ReadonlyArray<Arrival>>
  /** Replaces the plan, restarting the step count, the window clock and the PRNG. */
  readonly setPlan: (plan: FaultPlan.Plan) => Effect.Effect<void>
  readonly clearArrivals: Effect.Effect<void>
  /** Requests received whose response is not complete yet. */
  readonly inFlight: Effect.Effect<number>
  /** TCP connections open now: a client that leaks a socket leaves this above zero. */
  readonly openConnections: Effect.Effect<number>
  /** TCP connections accepted since the server started. */
  readonly connectionsAccepted: Effect.Effect<number>
  /**
   * Milliseconds since the server started, on the clock of `Arrival.at`: read before a client
   * starts, it bounds from below when the client's requests can arrive.
   */
  readonly elapsed: Effect.Effect<number>
}

/** A stall of this many milliseconds or more never ends. */
export const never = 1e9

// What every generated reply says, for a test to compare with what its client read.
export { replyText } from "./internal/faultServerBody.js"

/** A response before it is written: JSON is one part, a stream one part per event. */
interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly parts: ReadonlyArray<string>
  readonly stream: boolean
}

/** The header that carries the id of every answer, in the API's name for it. */
const requestIdHeader: Readonly<Record<Api, string>> = { openai: "x-request-id", anthropic: "request-id" }

/** The status an API answers when it is overloaded: a `StreamError`'s default. */
const overloadStatus: Readonly<Record<Api, number>> = { openai: 503, anthropic: 529 }

type StatusFault = Extract<FaultPlan.Fault, { readonly _tag: "Status" }>

/** One request being answered. */
interface Exchange {
  readonly res: Http.ServerResponse
  readonly api: Api
  readonly answers: Answers
  /** A request for a reply that asked for a stream. */
  readonly stream: boolean
  /** A model list: served apart from inference, without the plan's `latencyMs`. */
  readonly apart: boolean
  readonly requestId: string
  readonly timers: Set<NodeJS.Timeout>
  closed: boolean
  /** The server cut the connection on purpose, so the close is not the client's abort. */
  cut: boolean
}

type MutableArrival = { -readonly [K in keyof Arrival]: Arrival[K] }

/** The sockets, timers and arrivals, and the writing of each answer. Plain callbacks: `node:http` drives it, not a fiber. */
class Server {
  readonly http = Http.createServer()
  private readonly sockets = new Set<Net.Socket>()
  private readonly timers = new Set<NodeJS.Timeout>()
  private readonly startedAt = performance.now()
  private readonly engine: FaultEngine
  private records: Array<MutableArrival> = []
  private open = 0
  private accepted = 0
  private admitted = 0
  private served = 0
  private closing = false

  constructor(plan: FaultPlan.Plan) {
    this.engine = new FaultEngine(plan)
    this.http.on("connection", (socket) => {
      this.accepted++
      this.sockets.add(socket)
      socket.on("close", () => this.sockets.delete(socket))
    })
    this.http.on("request", (req, res) => this.handle(req, res))
  }

  get port(): number {
    const address = this.http.address()
    return typeof address === "object" && address !== null ? address.port : 0
  }

  get inFlight(): number {
    return this.open
  }

  get openConnections(): number {
    return this.sockets.size
  }

  get connectionsAccepted(): number {
    return this.accepted
  }

  arrivals(): ReadonlyArray<Arrival> {
    return this.records.map((arrival) => ({ ...arrival }))
  }

  clearArrivals(): void {
    this.records = []
  }

  setPlan(plan: FaultPlan.Plan): void {
    this.engine.setPlan(plan, this.now())
  }

  readonly close: Effect.Effect<void> = callback<void>((resume) => {
    this.closing = true
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
    for (const socket of this.sockets) socket.destroy()
    this.http.close(() => resume(Effect.void))
  })

  now(): number {
    return performance.now() - this.startedAt
  }

  private handle(req: Http.IncomingMessage, res: Http.ServerResponse): void {
    const at = this.now()
    this.open++
    let arrival: MutableArrival | undefined
    let exchange: Exchange | undefined
    let admitted = false
    res.on("close", () => {
      this.open--
      if (admitted) this.admitted--
      if (exchange !== undefined) {
        exchange.closed = true
        for (const timer of exchange.timers) {
          clearTimeout(timer)
          this.timers.delete(timer)
        }
      }
      if (arrival !== undefined && !res.writableFinished && !(exchange?.cut ?? false) && !this.closing) {
        arrival.aborted = true
      }
    })
    // A client that goes away mid-request makes the request emit an error; the close above records it.
    req.on("error", () => {})
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      const method = req.method ?? "GET"
      const path = (req.url ?? "/").split("?")[0] ?? "/"
      let body: unknown = text
      try {
        body = JSON.parse(text)
      } catch {
        // recorded as text
      }
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value
      }
      const decision = this.engine.decide({ method, path, body, at }, this.admitted)
      arrival = {
        index: this.records.length,
        at,
        method,
        path,
        headers,
        body,
        fault: decision._tag === "Refuse" ? "Status" : decision.fault._tag,
        aborted: false
      }
      this.records.push(arrival)
      const requestId = `req_fault${String(++this.served).padStart(6, "0")}`
      const api = apiOf(path)
      if (decision._tag === "Refuse") {
        return this.write(res, errorReply(api, requestId, decision.status, api, decision.error, decision.headers))
      }
      const { fault, request } = decision
      // A model list is served apart from inference: it takes no place in the capacity.
      if (request.endpoint !== "models") {
        admitted = true
        this.admitted++
      }
      exchange = {
        res,
        api,
        answers: answersOf(request, requestId),
        stream: "stream" in request && request.stream,
        apart: request.endpoint === "models",
        requestId,
        timers: new Set(),
        closed: false,
        cut: false
      }
      this.serve(exchange, fault)
    })
  }

  private serve(ex: Exchange, fault: FaultPlan.Fault): void {
    switch (fault._tag) {
      case "Ok":
        return this.later(
          ex,
          fault.delayMs ?? (ex.apart ? 0 : this.engine.plan.latencyMs ?? 0),
          () => this.write(ex.res, this.ok(ex))
        )
      case "Status":
        return this.write(ex.res, this.status(ex, fault))
      case "StallHeaders":
        if (fault.ms >= never) return
        return this.later(ex, fault.ms, () => this.write(ex.res, this.ok(ex)))
      case "StallBody": {
        const [head, tail] = this.halves(this.ok(ex), fault.afterChunks ?? 1)
        this.writeHead(ex.res, head)
        ex.res.flushHeaders()
        for (const part of head.parts) ex.res.write(part)
        if (fault.ms >= never) return
        return this.later(ex, fault.ms, () => {
          for (const part of tail) ex.res.write(part)
          ex.res.end()
        })
      }
      case "ResetHeaders":
        return this.cut(ex)
      case "ResetBody": {
        const [head] = this.halves(this.ok(ex))
        this.writeHead(ex.res, head)
        for (const part of head.parts) ex.res.write(part)
        return this.cutSoon(ex)
      }
      case "StreamBreak": {
        if (!ex.stream) return this.serve(ex, { _tag: "ResetBody" })
        this.startStream(ex, fault.afterChunks)
        return this.cutSoon(ex)
      }
      case "StreamError": {
        const { _tag, afterChunks, ...given } = fault
        const status: StatusFault = { _tag: "Status", ...given, status: given.status ?? overloadStatus[ex.api] }
        if (!ex.stream) return this.serve(ex, status)
        const sent = this.startStream(ex, afterChunks)
        for (const part of ex.answers.failedEvents(this.error(ex, status), sent)) ex.res.write(part)
        ex.res.end()
        return
      }
      case "TruncatedJson": {
        const whole = this.json(ex, ex.answers.body())
        const body = whole.parts.join("")
        // No content-length: the response frames correctly (chunked) and only the JSON is cut.
        ex.res.writeHead(200, { ...whole.headers })
        ex.res.write(body.slice(0, Math.floor(body.length / 2)))
        ex.res.end()
        return
      }
      case "SchemaBreak":
        return this.write(ex.res, this.schemaBreak(ex))
      case "HtmlError": {
        const status = fault.status ?? 502
        return this.write(ex.res, {
          status,
          headers: { "content-type": "text/html", "server": "cloudflare" },
          parts: [FaultServerBody.htmlErrorPage(status)],
          stream: false
        })
      }
      case "Raw": {
        const piece = fault.bodyBase64 !== undefined
          ? Buffer.from(fault.bodyBase64, "base64")
          : Buffer.from(fault.body ?? "", "utf8")
        if (fault.chunked === true) {
          ex.res.writeHead(fault.status ?? 200, { ...fault.headers })
          for (let i = 0; i < (fault.repeat ?? 1) && !ex.closed; i++) ex.res.write(piece)
          ex.res.end()
          return
        }
        const body = Buffer.alloc(piece.length * (fault.repeat ?? 1), piece)
        ex.res.writeHead(fault.status ?? 200, { ...fault.headers, "content-length": String(body.length) })
        ex.res.end(body)
        return
      }
      case "Close": {
        ex.cut = true
        ex.res.socket?.end()
        return
      }
      case "Fixture": {
        const fixture = fixtures[fault.name]
        return this.write(ex.res, {
          status: fixture.status,
          headers: fixture.headers,
          parts: [fixture.body],
          stream: false
        })
      }
    }
  }

  private later(ex: Exchange, ms: number, f: () => void): void {
    if (ms <= 0) return f()
    const timer = setTimeout(() => {
      ex.timers.delete(timer)
      this.timers.delete(timer)
      if (!ex.closed) f()
    }, ms)
    ex.timers.add(timer)
    this.timers.add(timer)
  }

  private cut(ex: Exchange): void {
    ex.cut = true
    // A reset (RST), not a close (FIN): what a crashed upstream or a load balancer dropping the connection sends.
    const socket = ex.res.socket
    if (socket !== null) socket.resetAndDestroy()
  }

  // The partial body must reach the client before the reset, or the kernel drops it with the connection.
  private cutSoon(ex: Exchange): void {
    this.later(ex, 10, () => this.cut(ex))
  }

  private writeHead(res: Http.ServerResponse, reply: Reply): void {
    res.writeHead(reply.status, { ...reply.headers })
  }

  private write(res: Http.ServerResponse, reply: Reply): void {
    if (reply.stream) {
      this.writeHead(res, reply)
      for (const part of reply.parts) res.write(part)
      res.end()
      return
    }
    const body = reply.parts.join("")
    res.writeHead(reply.status, { ...reply.headers, "content-length": String(Buffer.byteLength(body)) })
    res.end(body)
  }

  /** The first half of a reply (of a stream, its first `events`) with its headers, and the parts that complete it. */
  private halves(reply: Reply, events = 1): readonly [Reply, ReadonlyArray<string>] {
    if (reply.stream) return [{ ...reply, parts: reply.parts.slice(0, events) }, reply.parts.slice(events)]
    const body = reply.parts.join("")
    const middle = Math.floor(body.length / 2)
    return [
      {
        ...reply,
        headers: { ...reply.headers, "content-length": String(Buffer.byteLength(body)) },
        parts: [body.slice(0, middle)]
      },
      [body.slice(middle)]
    ]
  }

  /**
   * Sends the status, the headers and the first `events` of a streamed success, never the one that
   * ends the stream; answers how many it sent.
   */
  private startStream(ex: Exchange, events: number): number {
    const reply = this.ok(ex)
    this.writeHead(ex.res, reply)
    ex.res.flushHeaders()
    const opening = reply.parts.slice(0, Math.min(events, reply.parts.length - 1))
    for (const part of opening) ex.res.write(part)
    return opening.length
  }

  private json(ex: Exchange, value: unknown): Reply {
    return {
      status: 200,
      headers: {
        "content-type": "application/json",
        [requestIdHeader[ex.api]]: ex.requestId,
        ...(ex.api === "openai" ? { "openai-processing-ms": String(this.engine.plan.latencyMs ?? 0) } : {})
      },
      parts: [JSON.stringify(value)],
      stream: false
    }
  }

  private sse(ex: Exchange, events: ReadonlyArray<string>): Reply {
    return {
      status: 200,
      headers: {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        [requestIdHeader[ex.api]]: ex.requestId
      },
      parts: events,
      stream: true
    }
  }

  private ok(ex: Exchange): Reply {
    return ex.stream ? this.sse(ex, ex.answers.events()) : this.json(ex, ex.answers.body())
  }

  private schemaBreak(ex: Exchange): Reply {
    return ex.stream ? this.sse(ex, ex.answers.brokenEvents()) : this.json(ex, ex.answers.brokenBody())
  }

  /** Whose error body the exchange gets: Anthropic's on its endpoint, else OpenAI's or the style the fault asks. */
  private styleOf(ex: Exchange, fault: StatusFault): FaultServerBody.ErrorStyle {
    return ex.api === "anthropic" ? "anthropic" : fault.style ?? "openai"
  }

  /** The error of `fault`: the API's own for the status, where the fault does not say. */
  private error(ex: Exchange, fault: StatusFault): FaultServerBody.ErrorObject {
    const defaults = FaultServerBody.defaultError(fault.status, this.styleOf(ex, fault))
    return {
      message: fault.message ?? defaults.message,
      type: fault.type ?? defaults.type,
      code: fault.code ?? defaults.code
    }
  }

  private status(ex: Exchange, fault: StatusFault): Reply {
    const headers: Record<string, string> = {}
    if (fault.retryAfter !== undefined) headers["retry-after"] = fault.retryAfter
    if (fault.retryAfterMs !== undefined) headers["retry-after-ms"] = fault.retryAfterMs
    if (fault.shouldRetry !== undefined) headers["x-should-retry"] = String(fault.shouldRetry)
    const style = this.styleOf(ex, fault)
    return errorReply(ex.api, ex.requestId, fault.status, style, this.error(ex, fault), {
      ...headers,
      ...fault.headers
    })
  }
}

/** An error answer: its body in `style`, the request id under the API's name, and `headers` besides. */
const errorReply = (
  api: Api,
  requestId: string,
  status: number,
  style: FaultServerBody.ErrorStyle,
  error: FaultServerBody.ErrorObject,
  headers: Readonly<Record<string, string>>
): Reply => ({
  status,
  headers: { "content-type": "application/json", [requestIdHeader[api]]: requestId, ...headers },
  parts: [FaultServerBody.errorBody(style, error)],
  stream: false
})

/** The server could not listen where it was asked to (the port is taken, or not ours to take). */
export class ListenError extends Data.TaggedError("ListenError")<{
  readonly port: number
  readonly cause: unknown
}> {
  override get message() {
    const code = (this.cause as { readonly code?: unknown } | undefined)?.code
    return `cannot listen on 127.0.0.1:${this.port}${typeof code === "string" ? ` (${code})` : ""}`
  }
}

const listen = (plan: FaultPlan.Plan, port: number): Effect.Effect<Server, ListenError> =>
  callback<Server, ListenError>((resume) => {
    const server = new Server(plan)
    const failed = (cause: Error) => resume(Effect.fail(new ListenError({ port, cause })))
    server.http.once("error", failed)
    server.http.listen(port, "127.0.0.1", () => {
      server.http.off("error", failed)
      resume(Effect.succeed(server))
    })
  })

/**
 * Starts a fault server on `127.0.0.1` at `port` (0: a free one). Closing the scope destroys every
 * open socket, clears every timer and closes the server, so no test leaks either.
 */
export const serve = (plan: FaultPlan.Plan, port: number): Effect.Effect<Service, ListenError, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(listen(plan, port), (server) => server.close),
    (server): Service => ({
      url: `http://127.0.0.1:${server.port}/v1`,
      origin: `http://127.0.0.1:${server.port}`,
      port: server.port,
      arrivals: Effect.sync(() => server.arrivals()),
      setPlan: (plan) => Effect.sync(() => server.setPlan(plan)),
      clearArrivals: Effect.sync(() => server.clearArrivals()),
      inFlight: Effect.sync(() => server.inFlight),
      openConnections: Effect.sync(() => server.openConnections),
      connectionsAccepted: Effect.sync(() => server.connectionsAccepted),
      elapsed: Effect.sync(() => server.now())
    })
  )

/**
 * Starts a fault server on `127.0.0.1` at a free port, for the scope's lifetime.
 *
 * ```ts
 * import { ModelClient, Target } from "@resilient-ai/client"
 * import { FaultServer } from "@resilient-ai/testing"
 * import type { Redacted } from "effect"
 *
 * declare const apiKey: Redacted.Redacted
 * const server = yield* FaultServer.make({ steps: [{ _tag: "Status", status: 503 }, { _tag: "Ok" }] })
 * const client = yield* ModelClient.make(Target.managed({ name: "test", baseUrl: server.url, model: "m", apiKey }))
 * // …call it, then count the attempts the server saw: (yield* server.arrivals).length
 * ```
 */
export const make = (plan: FaultPlan.Plan = {}): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.orDie(serve(plan, 0))
