/**
 * Real `redis-server` processes for the tests: the shared one the suite runs against, and private
 * ones a fault test can stop and start again.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { createServer, Socket } from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"

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
const freePort = (): Promise<number> =>
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

// How long a server may take to come up or go away: a bound for a hung one, not a measure of
// speed (a stress run on two loaded cores once saw a cluster node answer after more than 10 s).
const waitFor = async (check: () => Promise<boolean>, what: string, timeoutMillis = 60_000) => {
  const until = Date.now() + timeoutMillis
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** A `redis-server` of the test's own, on a free loopback port, with nothing persisted unless its `args` say so. */
export interface RedisServer {
  readonly port: number
  readonly url: string
  /** Stops the server and waits until it no longer answers. */
  readonly stop: () => Promise<void>
  /** Starts it again on the same port (empty, unless its `args` keep an append-only file) and waits until it answers commands. */
  readonly start: () => Promise<void>
  /** Freezes the process (SIGSTOP): connections stay open, commands get no answer, as a stalled server's. */
  readonly pause: () => void
  /** Lets a paused server go on (SIGCONT). */
  readonly resume: () => void
}

/**
 * Starts a private server, with `args` beyond the usual ones; `stop` it when done. A free port can
 * be taken between the look and the bind (by another test's server starting again on its own port),
 * so the server must answer with its own process id; if it cannot bind, another port is tried.
 */
export const startRedisServer = async (binary: string, args: ReadonlyArray<string> = []): Promise<RedisServer> => {
  // A directory of its own: started elsewhere, it would load whatever dump lies in the working
  // directory (and a cluster node claims the slots of the keys it finds there).
  const dir = mkdtempSync(Path.join(Os.tmpdir(), "resilient-ai-redis-"))
  let port = await freePort()
  let url = `redis://127.0.0.1:${port}`
  let child: ChildProcess | undefined
  /** Starts the server on `port`: whether it is the one answering there. */
  const startOn = async (): Promise<boolean> => {
    const started = spawn(
      binary,
      ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", ...args],
      { stdio: "ignore" }
    )
    child = started
    const exited = new Promise<false>((resolve) => started.once("exit", () => resolve(false)))
    const answering = (async () => {
      await waitFor(
        async () =>
          started.exitCode !== null ||
          // Its own process answers, and has read back any append-only file (until then, LOADING).
          ((await command(port, "INFO", "server").catch(() => "")).includes(`process_id:${started.pid}\r\n`) &&
            (await ping(url, 200))),
        `redis-server on port ${port}`
      )
      return started.exitCode === null
    })()
    return Promise.race([exited, answering])
  }
  const start = async () => {
    if (!(await startOn())) throw new Error(`redis-server could not start again on port ${port}`)
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
  for (let tries = 1; !(await startOn()); tries++) {
    if (tries === 5) throw new Error("redis-server found no free port to bind")
    port = await freePort()
    url = `redis://127.0.0.1:${port}`
  }
  return {
    port,
    url,
    start,
    stop,
    pause: () => void child?.kill("SIGSTOP"),
    resume: () => void child?.kill("SIGCONT")
  }
}

/** A Redis Cluster of the suite's own: its seed URLs, and a way to end it. */
export interface RedisCluster {
  /** Every node's URL, comma-separated, as `RedisConnection` takes a cluster's seeds. */
  readonly url: string
  readonly stop: () => Promise<void>
}

/**
 * Sends `words` as one command on a connection of its own to `port`, and answers Redis's reply (one
 * line of RESP, or the bulk it announces); "" if the server closed the connection without one, as
 * `SHUTDOWN` does.
 */
export const command = (port: number, ...words: ReadonlyArray<string>): Promise<string> =>
  new Promise((resolve, reject) => {
    const socket = new Socket()
    let received = ""
    socket.setTimeout(2_000, () => {
      socket.destroy()
      reject(new Error(`no answer from port ${port} to ${words[0]}`))
    })
    socket.once("error", reject)
    socket.once("close", () => resolve(received))
    socket.on("data", (data) => {
      received += data.toString()
      const bulk = /^\$(\d+)\r\n/.exec(received)
      if (bulk !== null ? received.length >= bulk[0].length + Number(bulk[1]) + 2 : received.endsWith("\r\n")) {
        socket.destroy()
        resolve(received)
      }
    })
    socket.connect(
      port,
      "127.0.0.1",
      () =>
        socket.write(
          `*${words.length}\r\n${words.map((word) => `$${Buffer.byteLength(word)}\r\n${word}\r\n`).join("")}`
        )
    )
  })

/**
 * Starts `size` cluster-enabled servers that split the 16,384 slots between them, and waits until
 * every node reports `cluster_state:ok`. Each node restarts by itself when it exits (as a
 * supervisor would restart it), keeping its data in an append-only file, so a test can restart a
 * node with `SHUTDOWN NOSAVE`. `.ci/run` starts the same with `redis-cli --cluster create`.
 */
export const startRedisCluster = async (binary: string, size = 3): Promise<RedisCluster> => {
  const root = mkdtempSync(Path.join(Os.tmpdir(), "resilient-ai-cluster-"))
  const ports = await Promise.all(Array.from({ length: size }, () => freePort()))
  let stopping = false
  const children = new Map<number, ChildProcess>()
  const run = (port: number) => {
    const dir = Path.join(root, String(port))
    mkdirSync(dir, { recursive: true })
    const child = spawn(binary, [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--dir",
      dir,
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      "nodes.conf",
      "--cluster-node-timeout",
      "5000",
      "--save",
      "",
      "--appendonly",
      "yes",
      "--appendfsync",
      "always"
    ], { stdio: "ignore" })
    children.set(port, child)
    child.once("exit", () => {
      if (!stopping) setTimeout(() => run(port), 100)
    })
  }
  ports.forEach(run)
  await Promise.all(ports.map((port) => waitFor(() => ping(`redis://127.0.0.1:${port}`, 200), `cluster node ${port}`)))
  const share = Math.ceil(16_384 / size)
  await Promise.all(
    ports.map((port, index) =>
      command(
        port,
        "CLUSTER",
        "ADDSLOTSRANGE",
        String(index * share),
        String(Math.min(16_383, (index + 1) * share - 1))
      )
    )
  )
  await Promise.all(ports.slice(1).map((port) => command(port, "CLUSTER", "MEET", "127.0.0.1", String(ports[0]))))
  await waitFor(
    async () =>
      (await Promise.all(ports.map((port) => command(port, "CLUSTER", "INFO").catch(() => "")))).every((info) =>
        info.includes("cluster_state:ok")
      ),
    "the cluster to reach cluster_state:ok",
    30_000
  )
  return {
    url: ports.map((port) => `redis://127.0.0.1:${port}`).join(","),
    stop: async () => {
      stopping = true
      await Promise.all([...children.values()].map((child) =>
        child.exitCode !== null || child.signalCode !== null
          ? Promise.resolve()
          : new Promise((resolve) => {
            child.once("exit", resolve)
            child.kill("SIGKILL")
          })
      ))
      rmSync(root, { recursive: true, force: true })
    }
  }
}
