/**
 * A real loopback HTTP server that speaks the OpenAI / Mistral wire format and misbehaves on cue.
 *
 * It answers `POST /v1/chat/completions` (JSON, or server-sent events for `"stream": true`) and
 * `POST /v1/embeddings` with the bodies and headers the real APIs send, and applies a
 * `FaultPlan` to each request: error statuses with provider bodies and retry hints, stalls before
 * or inside the body, connection resets, truncated or contract-breaking bodies, proxy HTML pages,
 * recorded fixtures, broken streams and a concurrency limit. Every arrival is recorded, so a test
 * counts attempts and reads the headers a client sent.
 *
 * It is built on `node:http` rather than a framework because the interesting faults live below
 * HTTP: a reset must be a TCP reset, a stall must hold a real socket. For the same reason time is
 * real (timers, not `TestClock`); every timer and socket is released with the scope.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { Buffer } from "node:buffer"
import * as Http from "node:http"
import type * as Net from "node:net"
import { performance } from "node:perf_hooks"
import type * as FaultPlan from "./FaultPlan.js"
import { fixtures } from "./Fixtures.js"

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
  readonly fault: FaultPlan.FaultTag
  /** The client closed the connection before the response was complete. */
  readonly aborted: boolean
}

/** A running fault server. */
export interface Service {
  /** The base URL an OpenAI client expects, as `http://127.0.0.1:PORT/v1`. */
  readonly url: string
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

/** The fault server a test talks to. */
export class FaultServer extends Context.Tag("@resilient-ai/testing/FaultServer")<FaultServer, Service>() {}

/** A stall of this many milliseconds or more never ends. */
export const never = 1e9

/** The content of every generated chat reply. */
export const replyText = "The fault server answered."

// How a generated reply is streamed: one content delta per piece, so `completion_tokens` is 4.
const replyPieces = ["The", " fault", " server", " answered."] as const

/** The dimension of generated embeddings when the request does not ask for one. */
export const defaultDimensions = 8

/** A rough token count (four characters a token), so usage figures are plausible and deterministic. */
export const tokenCount = (text: string): number => Math.max(1, Math.ceil(text.length / 4))

const fnv1a = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return hash >>> 0
}

// mulberry32: small, fast and the same on every machine, which is all a fault plan needs.
const prng = (seed: number): () => number => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * The embedding served for an input: unit length and deterministic. The values are float32, so the
 * JSON numbers and the base64 encoding carry exactly the same vector.
 */
export const embedding = (input: string, dimensions: number = defaultDimensions): ReadonlyArray<number> => {
  const random = prng(fnv1a(input))
  const raw = Array.from({ length: dimensions }, () => random() * 2 - 1)
  const norm = Math.sqrt(raw.reduce((sum, x) => sum + x * x, 0)) || 1
  return raw.map((x) => Math.fround(x / norm))
}

/** Little-endian float32 bytes in base64, as OpenAI answers `encoding_format: "base64"`. */
export const toBase64 = (vector: ReadonlyArray<number>): string => {
  const bytes = Buffer.alloc(vector.length * 4)
  vector.forEach((x, i) => bytes.writeFloatLE(x, i * 4))
  return bytes.toString("base64")
}

type Endpoint = "chat" | "embeddings"

const endpoints: Readonly<Record<string, Endpoint>> = {
  "/v1/chat/completions": "chat",
  "/v1/embeddings": "embeddings"
}

type Body = Readonly<Record<string, unknown>>

/** A response before it is written: JSON is one part, a stream one part per event. */
interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly parts: ReadonlyArray<string>
  readonly stream: boolean
}

interface ProviderError {
  readonly message: string
  readonly type: string
  readonly param?: string | null | undefined
  readonly code: string | null
}

const errorBody = (style: "openai" | "mistral", error: ProviderError): string =>
  style === "mistral"
    ? JSON.stringify({ object: "error", message: error.message, type: error.type, param: null, code: error.code })
    : JSON.stringify({ error: { ...error, param: error.param ?? null } }, null, 4) + "\n"

const statusDefaults = (status: number, style: "openai" | "mistral"): ProviderError => {
  if (status === 429) {
    return style === "mistral"
      ? { message: "Requests rate limit exceeded", type: "rate_limited", code: "1300" }
      : {
        message: "Rate limit reached for requests. Please try again later.",
        type: "requests",
        code: "rate_limit_exceeded"
      }
  }
  if (status === 401 && style === "openai") {
    return {
      message: "Incorrect API key provided: sk-test. You can find your API key at " +
        "https://platform.openai.com/account/api-keys.",
      type: "invalid_request_error",
      code: "invalid_api_key"
    }
  }
  if (status === 500) {
    return {
      message: "The server had an error while processing your request. Sorry about that!",
      type: "server_error",
      code: null
    }
  }
  if (status === 503) {
    return { message: "The engine is currently overloaded, please try again later.", type: "server_error", code: null }
  }
  return {
    message: Http.STATUS_CODES[status] ?? `HTTP ${status}`,
    type: status >= 500 ? "server_error" : "invalid_request_error",
    code: null
  }
}

const invalidRequest = (message: string, param: string | null, code: string | null): ProviderError => ({
  message,
  type: "invalid_request_error",
  param,
  code
})

const unparsable = invalidRequest(
  "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP " +
    "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have " +
    "trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)",
  null,
  null
)

/** The inputs of an embeddings request, one string each, or undefined when `input` is not valid. */
const embeddingInputs = (input: unknown): ReadonlyArray<string> | undefined => {
  if (typeof input === "string") return [input]
  if (!Array.isArray(input) || input.length === 0) return undefined
  // An array of numbers is one input of token ids; an array of arrays is several.
  if (input.every((x) => typeof x === "number")) return [input.join(" ")]
  if (input.every((x) => typeof x === "string" || (Array.isArray(x) && x.every((n) => typeof n === "number")))) {
    return input.map((x: string | ReadonlyArray<number>) => typeof x === "string" ? x : x.join(" "))
  }
  return undefined
}

/** The request's problem, as the API would word it, or undefined when the request is well formed. */
const validate = (endpoint: Endpoint, body: Body): ProviderError | undefined => {
  if (typeof body["model"] !== "string") return invalidRequest("you must provide a model parameter", null, null)
  if (endpoint === "chat") {
    if (body["messages"] === undefined) {
      return invalidRequest("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
    }
    if (!Array.isArray(body["messages"])) {
      return invalidRequest("Invalid type for 'messages': expected an array.", "messages", "invalid_type")
    }
    return undefined
  }
  if (body["input"] === undefined) {
    return invalidRequest("Missing required parameter: 'input'.", "input", "missing_required_parameter")
  }
  if (embeddingInputs(body["input"]) === undefined) {
    return invalidRequest(
      "Invalid 'input': expected a string, an array of strings, or an array of token arrays.",
      "input",
      "invalid_value"
    )
  }
  return undefined
}

const messageText = (messages: unknown): string => {
  if (!Array.isArray(messages)) return ""
  return messages.map((message: unknown) => {
    const content = typeof message === "object" && message !== null
      ? (message as { readonly content?: unknown }).content
      : undefined
    if (typeof content === "string") return content
    if (Array.isArray(content)) {
      return content.map((part: unknown) =>
        typeof part === "object" && part !== null && typeof (part as { text?: unknown }).text === "string"
          ? (part as { text: string }).text
          : ""
      ).join("")
    }
    return ""
  }).join("\n")
}

const htmlPage = (status: number): string => {
  const title = `${status} ${Http.STATUS_CODES[status] ?? "Error"}`
  return `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n<center><h1>${title}</h1></center>\r\n` +
    `<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n`
}

/** One request being answered. */
interface Exchange {
  readonly res: Http.ServerResponse
  readonly endpoint: Endpoint
  readonly body: Body
  readonly stream: boolean
  readonly requestId: string
  readonly timers: Set<NodeJS.Timeout>
  closed: boolean
  /** The server cut the connection on purpose, so the close is not the client's abort. */
  cut: boolean
}

type MutableArrival = { -readonly [K in keyof Arrival]: Arrival[K] }

/** The server's state and request handling. Plain callbacks: `node:http` drives it, not a fiber. */
class Engine {
  readonly server = Http.createServer()
  private readonly sockets = new Set<Net.Socket>()
  private readonly timers = new Set<NodeJS.Timeout>()
  private readonly startedAt = performance.now()
  private plan: FaultPlan.Plan
  private planStartedAt = 0
  private stepsTaken = 0
  private random: () => number
  private records: Array<MutableArrival> = []
  private open = 0
  private accepted = 0
  private admitted = 0
  private served = 0
  private closing = false

  constructor(plan: FaultPlan.Plan) {
    this.plan = plan
    this.random = prng(plan.seed ?? 1)
    this.server.on("connection", (socket) => {
      this.accepted++
      this.sockets.add(socket)
      socket.on("close", () => this.sockets.delete(socket))
    })
    this.server.on("request", (req, res) => this.handle(req, res))
  }

  get port(): number {
    const address = this.server.address()
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
    this.plan = plan
    this.planStartedAt = this.now()
    this.stepsTaken = 0
    this.random = prng(plan.seed ?? 1)
  }

  readonly close: Effect.Effect<void> = Effect.async<void>((resume) => {
    this.closing = true
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
    for (const socket of this.sockets) socket.destroy()
    this.server.close(() => resume(Effect.void))
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
      let parsed = false
      try {
        body = JSON.parse(text)
        parsed = true
      } catch {
        // recorded as text
      }
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value
      }
      const record = (fault: FaultPlan.FaultTag) => {
        arrival = { index: this.records.length, at, method, path, headers, body, fault, aborted: false }
        this.records.push(arrival)
      }
      const requestId = `req_fault${String(++this.served).padStart(6, "0")}`
      const refuse = (status: number, error: ProviderError, extra: Readonly<Record<string, string>> = {}) => {
        record("Status")
        this.write(res, {
          status,
          headers: { "content-type": "application/json", "x-request-id": requestId, ...extra },
          parts: [errorBody("openai", error)],
          stream: false
        })
      }

      const endpoint = endpoints[path]
      if (endpoint === undefined) return refuse(404, invalidRequest(`Invalid URL (${method} ${path})`, null, null))
      if (method !== "POST") {
        return refuse(405, invalidRequest(`Invalid method for URL (${method} ${path})`, null, null), { allow: "POST" })
      }
      if (!parsed || typeof body !== "object" || body === null || Array.isArray(body)) return refuse(400, unparsable)
      const json = body as Body
      const invalid = validate(endpoint, json)
      if (invalid !== undefined) return refuse(400, invalid)
      const capacity = this.plan.capacity
      if (capacity !== undefined && this.admitted >= capacity.concurrent) {
        const status = capacity.status ?? 503
        return refuse(
          status,
          {
            message: `The server is at capacity (${this.admitted} requests in flight). Please try again later.`,
            type: status === 429 ? "rate_limited" : "overloaded",
            code: null
          },
          capacity.retryAfter === undefined ? {} : { "retry-after": capacity.retryAfter }
        )
      }
      admitted = true
      this.admitted++
      const fault = this.choose(at)
      record(fault._tag)
      exchange = {
        res,
        endpoint,
        body: json,
        stream: endpoint === "chat" && json["stream"] === true,
        requestId,
        timers: new Set(),
        closed: false,
        cut: false
      }
      this.serve(exchange, fault)
    })
  }

  /** The next step, else the first window that covers the arrival and wins its draw, else `otherwise`. */
  private choose(at: number): FaultPlan.Fault {
    const step = this.plan.steps?.[this.stepsTaken++]
    if (step !== undefined) return step
    const since = at - this.planStartedAt
    for (const window of this.plan.windows ?? []) {
      if (since >= window.fromMs && since < window.toMs) {
        const share = window.share ?? 1
        if (share >= 1 || this.random() < share) return window.fault
      }
    }
    return this.plan.otherwise ?? { _tag: "Ok" }
  }

  private serve(ex: Exchange, fault: FaultPlan.Fault): void {
    switch (fault._tag) {
      case "Ok":
        return this.later(ex, fault.delayMs ?? this.plan.latencyMs ?? 0, () => this.write(ex.res, this.ok(ex)))
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
        const reply = this.ok(ex)
        this.writeHead(ex.res, reply)
        ex.res.flushHeaders()
        const events = reply.parts.filter((part) => part !== "data: [DONE]\n\n").slice(0, fault.afterChunks)
        for (const part of events) ex.res.write(part)
        return this.cutSoon(ex)
      }
      case "TruncatedJson": {
        const whole = this.json(ex, this.okBody(ex))
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
          parts: [htmlPage(status)],
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

  private model(ex: Exchange): string {
    return typeof ex.body["model"] === "string" ? ex.body["model"] : "unknown"
  }

  private json(ex: Exchange, value: unknown): Reply {
    return {
      status: 200,
      headers: {
        "content-type": "application/json",
        "x-request-id": ex.requestId,
        "openai-processing-ms": String(this.plan.latencyMs ?? 0)
      },
      parts: [JSON.stringify(value)],
      stream: false
    }
  }

  private sse(ex: Exchange, chunks: ReadonlyArray<unknown>): Reply {
    return {
      status: 200,
      headers: {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-request-id": ex.requestId
      },
      parts: [...chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`), "data: [DONE]\n\n"],
      stream: true
    }
  }

  private ok(ex: Exchange): Reply {
    return ex.stream ? this.sse(ex, this.chunks(ex)) : this.json(ex, this.okBody(ex))
  }

  private usage(ex: Exchange) {
    const promptTokens = tokenCount(messageText(ex.body["messages"]))
    return {
      prompt_tokens: promptTokens,
      completion_tokens: replyPieces.length,
      total_tokens: promptTokens + replyPieces.length
    }
  }

  /** The success body of a non-streamed request: a chat completion or an embeddings list. */
  private okBody(ex: Exchange): unknown {
    if (ex.endpoint === "embeddings") {
      const inputs = embeddingInputs(ex.body["input"]) ?? []
      const requested = ex.body["dimensions"]
      const dimensions = typeof requested === "number" && Number.isInteger(requested) && requested > 0
        ? requested
        : defaultDimensions
      const base64 = ex.body["encoding_format"] === "base64"
      const promptTokens = inputs.reduce((sum, input) => sum + tokenCount(input), 0)
      return {
        object: "list",
        data: inputs.map((input, index) => {
          const vector = embedding(input, dimensions)
          return { object: "embedding", index, embedding: base64 ? toBase64(vector) : vector }
        }),
        model: this.model(ex),
        usage: { prompt_tokens: promptTokens, total_tokens: promptTokens }
      }
    }
    return {
      id: this.completionId(ex),
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: this.model(ex),
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: replyText, refusal: null },
          logprobs: null,
          finish_reason: "stop"
        }
      ],
      usage: this.usage(ex)
    }
  }

  private completionId(ex: Exchange): string {
    return `chatcmpl-${ex.requestId.slice(4)}`
  }

  /**
   * The chunks of a streamed reply, as OpenAI sends them: the role first, one content delta per
   * piece, an empty delta with `finish_reason: "stop"`, and with `stream_options.include_usage`
   * `usage: null` on each of those and a last chunk with empty `choices` carrying the usage.
   */
  private chunks(ex: Exchange): ReadonlyArray<unknown> {
    const options = ex.body["stream_options"]
    const includeUsage = typeof options === "object" && options !== null &&
      (options as { readonly include_usage?: unknown }).include_usage === true
    const base = {
      id: this.completionId(ex),
      object: "chat.completion.chunk",
      created: Math.floor(Date.now() / 1000),
      model: this.model(ex)
    }
    const chunk = (delta: Readonly<Record<string, unknown>>, finishReason: string | null) => ({
      ...base,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      ...(includeUsage ? { usage: null } : {})
    })
    return [
      chunk({ role: "assistant", content: "" }, null),
      ...replyPieces.map((piece) => chunk({ content: piece }, null)),
      chunk({}, "stop"),
      ...(includeUsage ? [{ ...base, choices: [], usage: this.usage(ex) }] : [])
    ]
  }

  private schemaBreak(ex: Exchange): Reply {
    const created = Math.floor(Date.now() / 1000)
    if (ex.endpoint === "embeddings") {
      return this.json(ex, { object: "list", model: this.model(ex), usage: { prompt_tokens: "3", total_tokens: 3 } })
    }
    const broken = {
      id: this.completionId(ex),
      object: ex.stream ? "chat.completion.chunk" : "chat.completion",
      created,
      model: this.model(ex),
      usage: { prompt_tokens: "12", completion_tokens: 4, total_tokens: 16 }
    }
    return ex.stream ? this.sse(ex, [broken]) : this.json(ex, broken)
  }

  private status(ex: Exchange, fault: Extract<FaultPlan.Fault, { readonly _tag: "Status" }>): Reply {
    const style = fault.style ?? "openai"
    const defaults = statusDefaults(fault.status, style)
    const headers: Record<string, string> = { "content-type": "application/json", "x-request-id": ex.requestId }
    if (fault.retryAfter !== undefined) headers["retry-after"] = fault.retryAfter
    if (fault.retryAfterMs !== undefined) headers["retry-after-ms"] = fault.retryAfterMs
    if (fault.shouldRetry !== undefined) headers["x-should-retry"] = String(fault.shouldRetry)
    return {
      status: fault.status,
      headers: { ...headers, ...fault.headers },
      parts: [errorBody(style, {
        message: fault.message ?? defaults.message,
        type: fault.type ?? defaults.type,
        code: fault.code ?? defaults.code
      })],
      stream: false
    }
  }
}

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

const listen = (plan: FaultPlan.Plan, port: number): Effect.Effect<Engine, ListenError> =>
  Effect.async<Engine, ListenError>((resume) => {
    const engine = new Engine(plan)
    const failed = (cause: Error) => resume(Effect.fail(new ListenError({ port, cause })))
    engine.server.once("error", failed)
    engine.server.listen(port, "127.0.0.1", () => {
      engine.server.off("error", failed)
      resume(Effect.succeed(engine))
    })
  })

/**
 * Starts a fault server on `127.0.0.1` at `port` (0: a free one). Closing the scope destroys every
 * open socket, clears every timer and closes the server, so no test leaks either.
 */
export const serve = (plan: FaultPlan.Plan, port: number): Effect.Effect<Service, ListenError, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(listen(plan, port), (engine) => engine.close),
    (engine): Service => ({
      url: `http://127.0.0.1:${engine.port}/v1`,
      port: engine.port,
      arrivals: Effect.sync(() => engine.arrivals()),
      setPlan: (plan) => Effect.sync(() => engine.setPlan(plan)),
      clearArrivals: Effect.sync(() => engine.clearArrivals()),
      inFlight: Effect.sync(() => engine.inFlight),
      openConnections: Effect.sync(() => engine.openConnections),
      connectionsAccepted: Effect.sync(() => engine.connectionsAccepted),
      elapsed: Effect.sync(() => engine.now())
    })
  )

/** Starts a fault server on `127.0.0.1` at a free port. */
export const make = (plan: FaultPlan.Plan = {}): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.orDie(serve(plan, 0))

/** A fault server for the layer's lifetime. */
export const layer = (plan: FaultPlan.Plan = {}): Layer.Layer<FaultServer> => Layer.scoped(FaultServer, make(plan))
