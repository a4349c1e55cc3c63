/**
 * The chat-completions server of the end-to-end bench (`e2e.ts`), in a process of its own so that
 * its CPU is not counted as the client's. Every `POST /v1/chat/completions` gets the same
 * completion, as OpenAI sends one (JSON with a `content-length`, the connection kept alive); any
 * other request gets a 404 and is counted, so a client asking the wrong path cannot look fast.
 *
 * Started by `e2e.ts` with an IPC channel: it reports its port, answers `"stats"` with its request
 * count, CPU time and event-loop time (for the check that it is not the bottleneck), and exits when
 * the channel closes, so it never outlives the bench, however the bench ends.
 */
import { FaultServerBody } from "@resilient-ai/testing/internal"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { performance } from "node:perf_hooks"

/** What the server tells the bench. */
export type ServerMessage =
  | {
    readonly _tag: "Listening"
    /** The base URL to give the clients: they add `/chat/completions`. */
    readonly baseUrl: string
    /** The content of every answer, which the clients check. */
    readonly answer: string
  }
  | {
    readonly _tag: "Stats"
    readonly requests: number
    readonly unexpected: number
    /** Connections accepted since the start. */
    readonly connections: number
    /** User + system CPU time since the start, in microseconds. */
    readonly cpuMicros: number
    /** Event-loop time since the start, in milliseconds: busy, and waiting for I/O. */
    readonly loopActive: number
    readonly loopIdle: number
  }

const answer = "Hello! How can I help you today?"
const chatPath = "/v1/chat/completions"

const completion = Buffer.from(JSON.stringify(FaultServerBody.openAiChatCompletion(
  { id: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", created: 1764460800, model: "gpt-4o-mini-2024-07-18" },
  answer,
  FaultServerBody.usage(11, 9),
  "fp_e2e0bench"
)))
const completionHeaders = {
  "content-type": "application/json",
  "content-length": completion.length,
  "x-request-id": "req_e2e0bench0000000000000000000000"
}
const notFound = Buffer.from(JSON.stringify({
  error: { message: "Unknown request URL", type: "invalid_request_error", param: null, code: "unknown_url" }
}))

let requests = 0
let unexpected = 0
let connections = 0

const server = createServer((request, response) => {
  requests++
  const expected = request.method === "POST" && request.url === chatPath
  if (!expected) unexpected++
  // The answer waits for the whole request body, as a real server's would.
  request.resume()
  request.on("end", () => {
    if (expected) {
      response.writeHead(200, completionHeaders).end(completion)
    } else {
      response.writeHead(404, { "content-type": "application/json", "content-length": notFound.length }).end(notFound)
    }
  })
})
server.on("connection", () => connections++)
// Idle connections stay open for the whole run (Node then advertises `Keep-Alive: timeout=600`,
// which undici honours): every segment measures calls on warm connections, not reconnects.
server.keepAliveTimeout = 600_000
server.headersTimeout = 60_000

const send = (message: ServerMessage) => process.send?.(message)

process.on("message", (message) => {
  if (message !== "stats") return
  const cpu = process.cpuUsage()
  const loop = performance.eventLoopUtilization()
  send({
    _tag: "Stats",
    requests,
    unexpected,
    connections,
    cpuMicros: cpu.user + cpu.system,
    loopActive: loop.active,
    loopIdle: loop.idle
  })
})
process.on("disconnect", () => process.exit(0))

// A backlog of 4096, so 1024 clients connecting at once are not dropped and retried a second later.
server.listen(0, "127.0.0.1", 4096, () => {
  const { port } = server.address() as AddressInfo
  send({ _tag: "Listening", baseUrl: `http://127.0.0.1:${port}/v1`, answer })
})
