/**
 * Interruption is cancellation: wherever a call is when its caller is interrupted — connecting,
 * waiting for the headers, reading the body, sleeping between attempts, streaming — it stops at
 * once, leaves no fiber running and no socket open, and starts no other attempt.
 *
 * Each case is run twice: by `Fiber.interrupt` of the caller's fiber, and by aborting the
 * `AbortSignal` given to `Effect.runPromise`, as docs/policy.md promises. What is checked, and how:
 *
 * - No fiber left running: the call runs watched by a fiber tracker (#test-line: a `Supervisor.track`
 *   on Effect 3; on Effect 4, which has no supervisors, every fiber whose context names the tracker).
 *   The attempt runs in a fiber that is not the caller's child (the policy starts it as a root, so
 *   `Fiber.children` cannot see it), but it inherits the caller's fiber-local values, the tracker
 *   among them; so the tracker sees it start and end, with every fiber the HTTP client, the stream
 *   or the timers fork. Its set of live
 *   fibers must be empty as soon as the interrupt returns (the interrupted fiber has completed:
 *   `Fiber.interrupt` awaits it, the promise of `runPromise` settles only after it), and still be
 *   empty after waiting; no log line is written after the interrupt.
 * - No socket left open: the fault server sees the client go away mid-request (`aborted`), the
 *   connection is destroyed at once rather than returned to the pool (undici keeps an idle one for
 *   4 s, so `openConnections` reaching 0 within 2 s tells them apart), and none is open once the
 *   HTTP client's scope has closed.
 * - At once: the interrupt returns sooner after the call's start than anything it could wait for
 *   would end, and each of those is long enough that a busy machine's slowness does not come near
 *   it: a stalled attempt ends only at its attempt timeout (30 s here), the backoff sleep after 1 s,
 *   the connect at its 1 s timeout (which has not fired when the interrupt returns).
 * - No further attempt: after waiting past the moment the next attempt would have started, the
 *   server has no new arrival (nor a new connection, but for undici's one empty reconnect),
 *   `resilient_ai_attempts_total` has not moved, and no backoff sleep has completed
 *   (`resilient_ai_retry_delay_seconds` counts only sleeps that ended).
 */
import {
  type FiberTracker,
  isInterrupted,
  makeFiberTracker,
  printLogfmtInto,
  undiciWithConnectTimeout,
  withMinimumLogLevel
} from "#test-line"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { ModelClient, type Target } from "@resilient-ai/client"
import { EffectLine, Meters } from "@resilient-ai/policy/internal"
import { type FaultPlan, FaultServer } from "@resilient-ai/testing"
import { Effect, Exit, Fiber, Stream } from "effect"
import * as DiagnosticsChannel from "node:diagnostics_channel"
import * as Net from "node:net"
import { Worker } from "node:worker_threads"
import { eventually, hello, managedAt, patienceMillis } from "./support.js"

type Call = Effect.Effect<unknown, unknown>

/** How a test interrupts a running call: `start` runs it, the effect it returns interrupts it and gives its exit. */
interface Trigger {
  readonly name: string
  readonly start: (
    call: Call,
    tracker: FiberTracker
  ) => Effect.Effect<Effect.Effect<Exit.Exit<unknown, unknown>>>
}

const triggers: ReadonlyArray<Trigger> = [
  {
    name: "Fiber.interrupt",
    // Forked under the tracker, so the caller's fiber is tracked too; `Fiber.interrupt` awaits it.
    start: (call, tracker) =>
      Effect.map(
        tracker.tracked(EffectLine.fork(call)),
        (fiber) => Effect.andThen(Fiber.interrupt(fiber), Fiber.await(fiber))
      )
  },
  {
    name: "the AbortSignal of Effect.runPromise",
    start: (call, tracker) =>
      Effect.sync(() => {
        const controller = new AbortController()
        // The promise settles once the root fiber has completed, finalizers included.
        const settled = Effect.runPromiseExit(tracker.tracked(call), { signal: controller.signal })
        return Effect.andThen(Effect.sync(() => controller.abort()), Effect.promise(() => settled))
      })
  }
]

/** What undici reports about connections to `port` and requests to it, and every client socket Node opens to it. */
interface Observed {
  readonly counts: { beforeConnect: number; connected: number; connectError: number; headers: number }
  /** How many connects failed by their timeout (`UND_ERR_CONNECT_TIMEOUT`): an aborted connect is a `connectError` too on undici 8. */
  connectTimeouts: number
  readonly sockets: Array<Net.Socket>
}

/** Listens on undici's diagnostics channels (and Node's `net.client.socket`) while the scope is open. */
const observe = (port: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const observed: Observed = {
        counts: { beforeConnect: 0, connected: 0, connectError: 0, headers: 0 },
        connectTimeouts: 0,
        sockets: []
      }
      const toPort = (message: unknown) =>
        String((message as { readonly connectParams?: { readonly port?: unknown } }).connectParams?.port) ===
          String(port)
      const handlers: ReadonlyArray<readonly [string, (message: unknown) => void]> = [
        ["undici:client:beforeConnect", (m) => toPort(m) && observed.counts.beforeConnect++],
        ["undici:client:connected", (m) => toPort(m) && observed.counts.connected++],
        ["undici:client:connectError", (m) => {
          if (!toPort(m)) return
          observed.counts.connectError++
          const code = (m as { readonly error?: { readonly code?: unknown } }).error?.code
          if (code === "UND_ERR_CONNECT_TIMEOUT") observed.connectTimeouts++
        }],
        ["undici:request:headers", (m) => {
          const origin = (m as { readonly request?: { readonly origin?: unknown } }).request?.origin
          if (String(origin) === `http://127.0.0.1:${port}`) observed.counts.headers++
        }],
        // Only sockets to `port`: the worker runs other files' tests too, whose sockets are not this one's.
        ["net.client.socket", (m) => {
          const socket = (m as { readonly socket: Net.Socket }).socket
          socket.once("connectionAttempt", (_address: string, attemptPort: number) => {
            if (attemptPort === port) observed.sockets.push(socket)
          })
        }]
      ]
      for (const [name, handler] of handlers) DiagnosticsChannel.subscribe(name, handler)
      return { observed, handlers }
    }),
    ({ handlers }) =>
      Effect.sync(() => {
        for (const [name, handler] of handlers) DiagnosticsChannel.unsubscribe(name, handler)
      })
  ).pipe(Effect.map(({ observed }) => observed))

/** Log lines of the call, kept in memory instead of printed. */
const capturing = printLogfmtInto

/** Longer than any test waits: a stalled attempt that only its timeout could end never ends here. */
const attemptMillis = 30_000
const attemptTimeout = `${attemptMillis} millis`

/**
 * Interrupts the call; it must end interrupted, with no fiber of its still running, and sooner
 * after the call's start (`startedAt`, a `Date.now()`) than what it could wait for lasts.
 */
const interruptNow = (
  interrupt: Effect.Effect<Exit.Exit<unknown, unknown>>,
  tracker: FiberTracker,
  startedAt: number,
  waitMillis: number
) =>
  Effect.gen(function*() {
    const exit = yield* EffectLine.timeoutFail(interrupt, {
      duration: patienceMillis,
      onTimeout: () => new Error(`the interrupt did not return within ${patienceMillis} ms`)
    }).pipe(Effect.orDie)
    assert.isBelow(Date.now() - startedAt, waitMillis, "the interrupt returned before what it could wait for ended")
    assert.isTrue(isInterrupted(exit), `the call ends interrupted, not ${String(exit)}`)
    assert.deepStrictEqual(yield* tracker.live, [], "no fiber of the call is still running")
  })

interface Context {
  readonly server: FaultServer.Service
  readonly observed: Observed
  readonly metrics: Meters.TargetMetrics
  /** What a streaming call has delivered to its caller. */
  readonly received: ReadonlyArray<unknown>
  /** The call's log lines so far. */
  readonly lines: ReadonlyArray<string>
}

interface Case {
  readonly name: string
  readonly plan: FaultPlan.Plan
  readonly target?: Partial<Target.Options>
  readonly call: (client: ModelClient.Service, received: Array<unknown>) => Call
  /** Waits until the call is where the interrupt must land. */
  readonly until: (context: Context) => Effect.Effect<void>
  /** A request is in flight when the interrupt lands: the server must see the client go away. */
  readonly inFlight: boolean
  /** Past when a further attempt would have started, counted from the interrupt. */
  readonly settleMillis: number
  /** How long, from the call's start, before what the interrupt could wait for would end. */
  readonly waitMillis: number
  readonly after?: (context: Context) => Effect.Effect<void>
}

const streamed = (client: ModelClient.Service, received: Array<unknown>): Call =>
  Stream.runForEach(client.chatStream(hello), (chunk) => Effect.sync(() => received.push(chunk)))

const cases: ReadonlyArray<Case> = [
  {
    name: "before the response headers",
    plan: { otherwise: { _tag: "StallHeaders", ms: FaultServer.never } },
    // Replay-safe, so nothing but the interrupt keeps the policy from retrying.
    call: (client) => client.chat(hello, { replaySafe: true }),
    until: ({ server }) =>
      eventually(
        Effect.map(server.arrivals, (arrivals) => arrivals.length === 1),
        patienceMillis,
        "the request arrived"
      ),
    inFlight: true,
    settleMillis: 100,
    waitMillis: attemptMillis
  },
  {
    name: "during the response body",
    plan: { otherwise: { _tag: "StallBody", ms: FaultServer.never } },
    call: (client) => client.chat(hello, { replaySafe: true }),
    // The headers and half the body arrived; the transport is reading the rest.
    until: ({ observed }) =>
      eventually(Effect.sync(() => observed.counts.headers === 1), patienceMillis, "the headers arrived"),
    inFlight: true,
    settleMillis: 100,
    waitMillis: attemptMillis
  },
  {
    name: "during the backoff sleep between attempts",
    // The hint makes the sleep 1 s (full jitter alone could make it a few ms): the interrupt lands
    // 50 ms into it, with time to spare on a busy machine, and the retry would have arrived 950 ms
    // later.
    plan: { steps: [{ _tag: "Status", status: 503, retryAfterMs: "1000" }] },
    target: { hintSpread: "1 millis" },
    call: (client) => client.chat(hello),
    until: ({ lines, metrics, server }) =>
      Effect.gen(function*() {
        yield* eventually(
          Effect.sync(() => EffectLine.counted(metrics.retries) === 1),
          patienceMillis,
          "the retry is decided"
        )
        yield* Effect.sleep("50 millis")
        assert.strictEqual((yield* server.arrivals).length, 1, "the interrupt lands in the sleep")
        // The capture sees the call's lines: that it has none from after the interrupt is no accident.
        assert.strictEqual(lines.filter((line) => line.includes("attempt failed, retrying")).length, 1)
      }),
    inFlight: false,
    settleMillis: 1_200,
    waitMillis: 1_000,
    after: ({ server }) =>
      Effect.map(server.arrivals, (arrivals) => {
        assert.strictEqual(arrivals.length, 1, "exactly the first attempt happened")
        assert.isFalse(arrivals[0]!.aborted, "the first attempt's response was complete")
      })
  },
  {
    name: "in a stream, after its headers and before its first chunk",
    // The headers are sent alone; the transport waits for the first event, the point up to which a
    // stream may still be retried.
    plan: { otherwise: { _tag: "StallBody", ms: FaultServer.never, afterChunks: 0 } },
    call: streamed,
    until: ({ observed }) =>
      eventually(Effect.sync(() => observed.counts.headers === 1), patienceMillis, "the headers arrived"),
    inFlight: true,
    settleMillis: 100,
    waitMillis: attemptMillis,
    after: ({ received }) => Effect.sync(() => assert.strictEqual(received.length, 0))
  },
  {
    name: "in a stream, after its first chunk reached the caller",
    // The first event (the role chunk) is written with the headers, then the body stalls.
    plan: { otherwise: { _tag: "StallBody", ms: FaultServer.never } },
    call: streamed,
    until: ({ received }) =>
      eventually(Effect.sync(() => received.length === 1), patienceMillis, "the first chunk arrived"),
    inFlight: true,
    settleMillis: 100,
    waitMillis: attemptMillis,
    after: ({ received }) => Effect.sync(() => assert.strictEqual(received.length, 1))
  }
]

const interrupting = (scenario: Case, trigger: Trigger) =>
  Effect.gen(function*() {
    const server = yield* FaultServer.make(scenario.plan)
    const observed = yield* observe(server.port)
    // One permit: if the interrupted call kept it, the call after it could not run.
    const target = managedAt(server.url, { concurrency: 1, attemptTimeout, ...scenario.target })
    const metrics = Meters.forTarget(target.name, target.model)
    const attempts = () => EffectLine.counted(metrics.attempts)
    const slept = () => EffectLine.histogramState(metrics.retryDelay).count
    const tracker = yield* makeFiberTracker
    const lines: Array<string> = []
    const received: Array<unknown> = []
    const context: Context = { server, observed, metrics, received, lines }

    yield* Effect.gen(function*() {
      const client = yield* ModelClient.make(target)
      const call = scenario.call(client, received).pipe(
        Effect.provide(capturing(lines)),
        withMinimumLogLevel("Debug")
      )
      const started = Date.now()
      const interrupt = yield* trigger.start(call, tracker)
      yield* scenario.until(context)
      const before = {
        arrivals: (yield* server.arrivals).length,
        accepted: yield* server.connectionsAccepted,
        attempts: attempts(),
        slept: slept(),
        lines: lines.length
      }
      assert.strictEqual(before.attempts, before.arrivals)
      // The tracker sees the running attempt's fibers: that it is empty later is no accident.
      if (scenario.inFlight) assert.isNotEmpty(yield* tracker.live)

      yield* interruptNow(interrupt, tracker, started, scenario.waitMillis)

      if (scenario.inFlight) {
        yield* eventually(
          Effect.map(server.arrivals, (arrivals) => arrivals.at(-1)!.aborted),
          patienceMillis,
          "the server saw the client go away mid-request"
        )
        // An idle connection would stay in undici's pool for 4 s: this one was destroyed.
        yield* eventually(Effect.map(server.openConnections, (open) => open === 0), 2_000, "the connection was closed")
      }

      yield* Effect.sleep(scenario.settleMillis)
      assert.strictEqual((yield* server.arrivals).length, before.arrivals, "no further attempt arrived")
      // undici (7.30) reconnects once when a connection closes under an aborted request, then drops
      // that connection unused: nothing is sent on it, and it does not stay open (on a machine loaded
      // to 18 it was still open when the settling time ended, and closed after).
      assert.isAtMost((yield* server.connectionsAccepted) - before.accepted, scenario.inFlight ? 1 : 0)
      if (scenario.inFlight) {
        yield* eventually(
          Effect.map(server.openConnections, (open) => open === 0),
          patienceMillis,
          "no connection stays open"
        )
      }
      assert.strictEqual(attempts(), before.attempts, "resilient_ai_attempts_total did not move")
      assert.strictEqual(slept(), before.slept, "no backoff sleep completed")
      assert.deepStrictEqual(lines.slice(before.lines), [], "nothing was logged after the interrupt")
      assert.deepStrictEqual(yield* tracker.live, [])
      if (scenario.after !== undefined) yield* scenario.after(context)

      // The permit came back: the target's only one serves the next call.
      yield* server.setPlan({})
      yield* client.chat(hello, { timeout: "1 second" })
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))

    yield* eventually(
      Effect.map(server.openConnections, (open) => open === 0),
      patienceMillis,
      "no connection is open once the HTTP client's scope has closed"
    )
  })

/**
 * A TCP peer that never completes a handshake, on loopback. It listens with a backlog of 1 in a
 * worker thread whose event loop is then blocked, so nothing ever accepts; its accept queue is
 * filled with idle connections of ours until one cannot connect. From then on Linux drops every
 * SYN to it (the accept queue is full), so a client stays in connect (SYN_SENT) — undici's
 * `beforeConnect` without `connected` or `connectError` — deterministically, unlike a
 * non-routable address, which a sandbox may refuse or route. A server that accepts and never reads
 * would not do: the connection would be made, and the request written.
 */
const unresponsivePeer = Effect.acquireRelease(
  Effect.promise(async () => {
    const release = new Int32Array(new SharedArrayBuffer(4))
    const worker = new Worker(
      `const { parentPort, workerData } = require("node:worker_threads")
      const server = require("node:net").createServer()
      server.listen({ port: 0, host: "127.0.0.1", backlog: 1 }, () => {
        parentPort.postMessage(server.address().port)
        Atomics.wait(workerData, 0, 0)
        server.close()
      })`,
      { eval: true, workerData: release }
    )
    const port = await new Promise<number>((resolve) => worker.once("message", resolve))
    const connectsWithin = (millis: number) =>
      new Promise<{ readonly socket: Net.Socket; readonly connected: boolean }>((resolve) => {
        const socket = Net.connect(port, "127.0.0.1").on("error", () => {})
        const timer = setTimeout(() => resolve({ socket, connected: false }), millis)
        socket.once("connect", () => {
          clearTimeout(timer)
          resolve({ socket, connected: true })
        })
      })
    const fillers: Array<Net.Socket> = []
    let full = false
    while (!full && fillers.length < 16) {
      const { connected, socket } = await connectsWithin(100)
      if (connected) fillers.push(socket)
      else {
        socket.destroy()
        full = true
      }
    }
    return { port, worker, release, fillers, full }
  }),
  ({ fillers, release, worker }) =>
    Effect.promise(async () => {
      for (const socket of fillers) socket.destroy()
      const exited = new Promise((resolve) => worker.once("exit", resolve))
      Atomics.store(release, 0, 1)
      Atomics.notify(release, 0)
      await exited
    })
)

/**
 * The connect timeout of the dispatcher in the connect case: short, so the test sees it fire, and
 * long enough that on a busy machine the interrupt still lands while the connect is pending.
 */
const connectTimeoutMillis = 1_000

/** The HTTP client on a dispatcher with a connect timeout, built as docs/calling-a-model.md says an application does. */
const HttpWithConnectTimeout = undiciWithConnectTimeout(connectTimeoutMillis)

const interruptingConnect = (trigger: Trigger) =>
  Effect.gen(function*() {
    const peer = yield* unresponsivePeer
    assert.isTrue(peer.full, "the peer's accept queue is full, so a connect to it hangs")
    const observed = yield* observe(peer.port)
    const target = managedAt(`http://127.0.0.1:${peer.port}/v1`, {
      connectTimeout: `${connectTimeoutMillis} millis`,
      attemptTimeout
    })
    const metrics = Meters.forTarget(target.name, target.model)
    const tracker = yield* makeFiberTracker
    const lines: Array<string> = []

    yield* Effect.gen(function*() {
      const client = yield* ModelClient.make(target)
      const call = client.chat(hello, { replaySafe: true }).pipe(
        Effect.provide(capturing(lines)),
        withMinimumLogLevel("Debug")
      )
      const started = Date.now()
      const interrupt = yield* trigger.start(call, tracker)
      yield* eventually(
        Effect.sync(() => observed.counts.beforeConnect === 1),
        patienceMillis,
        "undici started connecting"
      )
      yield* Effect.sleep("50 millis")
      // Still connecting: no connection, no connect error, one socket that is connecting.
      assert.deepStrictEqual(observed.counts, { beforeConnect: 1, connected: 0, connectError: 0, headers: 0 })
      assert.strictEqual(observed.sockets.length, 1)
      assert.isTrue(observed.sockets[0]!.connecting)
      assert.strictEqual(EffectLine.counted(metrics.attempts), 1)
      assert.isNotEmpty(yield* tracker.live)

      yield* interruptNow(interrupt, tracker, started, connectTimeoutMillis)
      assert.strictEqual(observed.connectTimeouts, 0, "the connect timeout has not fired")

      yield* Effect.sleep("100 millis")
      assert.strictEqual(observed.counts.beforeConnect, 1, "no further connect was started")
      assert.strictEqual(observed.sockets.length, 1)
      assert.strictEqual(EffectLine.counted(metrics.attempts), 1, "resilient_ai_attempts_total did not move")
      assert.deepStrictEqual(lines, [], "nothing was logged")
      assert.deepStrictEqual(yield* tracker.live, [])
    }).pipe(Effect.provide(HttpWithConnectTimeout))

    // On undici 7 (Effect 3's platform) an aborted request does not cancel the connect: the socket it
    // was opening goes on connecting, and ends at the dispatcher's connect timeout (undici's timers
    // tick every half second) or, the dispatcher being destroyed, as soon as it connects; undici 8
    // (Effect 4's) ends the connect with the request. Either way it never carries a request.
    yield* eventually(
      Effect.sync(() => observed.sockets[0]!.destroyed),
      connectTimeoutMillis + patienceMillis,
      "the connecting socket was destroyed"
    )
    assert.strictEqual(observed.counts.connected, 0)
    assert.strictEqual(observed.sockets.length, 1)
    assert.strictEqual(EffectLine.counted(metrics.attempts), 1)
  })

describe("interrupting a call", () => {
  for (const trigger of triggers) {
    describe(`by ${trigger.name}`, () => {
      it.scopedLive("during connect: stops at once, the socket never carries a request, no further attempt", () =>
        interruptingConnect(trigger))

      for (const scenario of cases) {
        it.scopedLive(`${scenario.name}: no fiber, no socket, no further attempt`, () =>
          interrupting(scenario, trigger))
      }
    })
  }
})
