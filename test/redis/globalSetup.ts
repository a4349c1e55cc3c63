/**
 * Finds the Redis the Redis tests run against: `RESILIENT_AI_REDIS_URL` when set (`.ci/run` sets
 * it), else a `redis-server` of the suite's own when the binary is installed. With neither, the
 * Redis tests are skipped, and this says so loudly rather than letting them pass unnoticed.
 * Likewise the three-node Redis Cluster: `RESILIENT_AI_REDIS_CLUSTER_URL` (its nodes' URLs,
 * comma-separated), else one of the suite's own.
 */
import type { TestProject } from "vitest/node"
import {
  ping,
  type RedisCluster,
  type RedisServer,
  redisServerBinary,
  startRedisCluster,
  startRedisServer
} from "./server.js"

declare module "vitest" {
  export interface ProvidedContext {
    /** The shared Redis's URL; empty when there is none and the Redis tests are skipped. */
    readonly redisUrl: string
    /** The three-node cluster's URLs, comma-separated; empty when there is none. */
    readonly redisClusterUrl: string
    /** The `redis-server` binary for tests that stop and start servers of their own; empty when none. */
    readonly redisServerBinary: string
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const binary = redisServerBinary()
  let url = process.env["RESILIENT_AI_REDIS_URL"] ?? ""
  let own: RedisServer | undefined
  if (url !== "" && !(await ping(url))) {
    throw new Error(`RESILIENT_AI_REDIS_URL is set to ${new URL(url).host} but no Redis answers there`)
  }
  if (url === "" && binary !== undefined) {
    own = await startRedisServer(binary)
    url = own.url
  }
  if (url === "") {
    process.stderr.write(
      "\n*** Redis tests SKIPPED: no Redis server. Set RESILIENT_AI_REDIS_URL=redis://127.0.0.1:PORT or put\n" +
        "*** redis-server on the PATH (.ci/run installs and starts one).\n\n"
    )
  }
  let clusterUrl = process.env["RESILIENT_AI_REDIS_CLUSTER_URL"] ?? ""
  let ownCluster: RedisCluster | undefined
  for (const node of clusterUrl === "" ? [] : clusterUrl.split(",")) {
    if (!(await ping(node))) {
      throw new Error(`RESILIENT_AI_REDIS_CLUSTER_URL names ${new URL(node).host} but no Redis answers there`)
    }
  }
  if (clusterUrl === "" && binary !== undefined) {
    ownCluster = await startRedisCluster(binary)
    clusterUrl = ownCluster.url
  }
  project.provide("redisUrl", url)
  project.provide("redisClusterUrl", clusterUrl)
  project.provide("redisServerBinary", binary ?? "")
  return async () => {
    await Promise.all([own?.stop(), ownCluster?.stop()])
  }
}
