/**
 * Real `redis-server` processes for the tests: the shared one the suite runs against, and private
 * ones a fault test can stop and start again.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { createServer, Socket } from "node:net"

/** The `redis-server` binary, or `undefined` when the machine has none. */
export const redisServerBinary = (): string | undefined => {
  const named = process.env["RESILIENT_AI_REDIS_SERVER"] ?? "redis-server"
  try {
    execFileSync(named, ["--version"], { stdio: "ignore" })
    return named
  } catch {
    return undefined
  }
}

/** A loopback port nothing listens on right now. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/** Whether a Redis answers at `url` (a NOAUTH answer counts: a server is there). */
export const ping = (url: string, timeoutMillis = 1_000): Promise<boolean> =>
  new Promise((resolve) => {
    const { hostname, port } = new URL(url)
    const socket = new Socket()
    const done = (answer: boolean) => {
      socket.destroy()
      resolve(answer)
    }
    socket.setTimeout(timeoutMillis, () => done(false))
    socket.once("error", () => done(false))
    socket.once("data", (data) => done(/^(\+PONG|-NOAUTH)/.test(data.toString())))
    socket.connect(Number(port || 6379), hostname.replace(/^\[|\]$/g, ""), () => socket.write("PING\r\n"))
  })

const waitFor = async (check: () => Promise<boolean>, what: string, timeoutMillis = 10_000) => {
  const until = Date.now() + timeoutMillis
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** A `redis-server` of the test's own, on a free loopback port, with nothing persisted. */
export interface RedisServer {
  readonly port: number
  readonly url: string
  /** Stops the server and waits until it no longer answers. */
  readonly stop: () => Promise<void>
  /** Starts it again on the same port, empty, and waits until it answers. */
  readonly start: () => Promise<void>
  /** Freezes the process (SIGSTOP): connections stay open, commands get no answer, as a stalled server's. */
  readonly pause: () => void
  /** Lets a paused server go on (SIGCONT). */
  readonly resume: () => void
}

/** Starts a private server, with `args` beyond the usual ones; `stop` it when done. */
export const startRedisServer = async (binary: string, args: ReadonlyArray<string> = []): Promise<RedisServer> => {
  const port = await freePort()
  const url = `redis://127.0.0.1:${port}`
  let child: ChildProcess | undefined
  const start = async () => {
    const started = spawn(
      binary,
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...args],
      { stdio: "ignore" }
    )
    child = started
    await waitFor(() => ping(url, 200), `redis-server on port ${port}`)
  }
  const stop = async () => {
    const running = child
    child = undefined
    if (running === undefined || running.exitCode !== null) return
    const exited = new Promise((resolve) => running.once("exit", resolve))
    running.kill("SIGCONT")
    running.kill("SIGKILL")
    await exited
    await waitFor(async () => !(await ping(url, 200)), `redis-server on port ${port} to stop`)
  }
  await start()
  return {
    port,
    url,
    start,
    stop,
    pause: () => void child?.kill("SIGSTOP"),
    resume: () => void child?.kill("SIGCONT")
  }
}
