import type { Client } from "../RedisConnection.js"

/**
 * How long a process counts as a member of a target's fleet after its last decision: the fleet
 * size it is learned from is what each process's in-process share is cut by.
 */
export const memberTtlMillis = 30_000

/**
 * What every script of the fleet starts with. KEYS[1] is the fleet's members (a sorted set scored
 * by when each was last heard of, on Redis's clock); ARGV[1] is the instant, on Redis's clock,
 * after which the caller no longer waits for the answer, ARGV[2] the caller's member id, ARGV[3]
 * how long a member counts. A command that arrives later than its caller waits changes nothing
 * and answers `{ -1, fleet size }` (`Void`): the caller has already decided in process, and a
 * permit taken or a retry counted now would be held by nobody. Otherwise the caller is recorded as
 * a member, `fleet` holds the members' count, and the script's own `keys` and `args` follow.
 */
const prologue = `
local clock = redis.call('TIME')
local redisNow = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local ttl = tonumber(ARGV[3])
if redisNow > tonumber(ARGV[1]) then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', redisNow - ttl)
  return { -1, redis.call('ZCARD', KEYS[1]) }
end
redis.call('ZADD', KEYS[1], redisNow, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', redisNow - ttl)
redis.call('PEXPIRE', KEYS[1], ttl * 2)
local fleet = redis.call('ZCARD', KEYS[1])
local keys = { unpack(KEYS, 2) }
local args = { unpack(ARGV, 4) }
`

/** What a script answers when its command arrived too late to take effect: only the fleet's size. */
export type Void = readonly [void: -1, fleet: number]

/** Whether a script's answer is `Void`. */
export const isVoid = (answer: ReadonlyArray<unknown>): answer is Void => answer[0] === -1

/** A voidAfter for commands that must take effect however late they arrive. */
export const never = Number.MAX_VALUE

/**
 * Registers `body` (which may read `keys`, `args`, `fleet` and `redisNow`) under `name` on `client`,
 * once per client, behind the shared prologue.
 */
export const register = (client: Client, name: string, keyCount: number, body: string): void => {
  if (typeof (client as unknown as Record<string, unknown>)[name] !== "function") {
    client.defineCommand(name, { numberOfKeys: keyCount + 1, lua: prologue + body })
  }
}

/** What `decide` needs of an answer nobody reads: whether the script took effect (null if void). */
export const answered = (answer: unknown): void | null => answer === null ? null : undefined
