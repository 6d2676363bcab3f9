/**
 * `RateLimiter` on Redis (or Redis Cluster): token buckets checked and updated by one Lua script per
 * call, so all limits of a request cost one round trip and hold exactly across gateway instances.
 *
 * - State: one hash per bucket, `{tokens, ts}` (tokens at epoch ms `ts`). The math is the same as
 *   the in-process adapter's (`refillBucket` in adapters/memory/in-process-rate-limiter.ts): refill
 *   at `capacity / window`, never above capacity, time never runs backwards. A key expires once the
 *   bucket would be full again and at least two windows passed without use.
 * - `acquire` reads every bucket, refuses with the first one short of `take + require` (and writes
 *   nothing), or takes from all. `charge` subtracts real usage (a bucket may go below zero).
 * - Scripts are loaded with SCRIPT LOAD at start and run with EVALSHA; a NOSCRIPT reply (a restarted
 *   or failed-over server, a new cluster node) falls back to EVAL, which caches the script again.
 * - Redis Cluster: a script may only touch keys of one slot, so every key of one call must carry the
 *   same hash tag (the plugin uses `{<workspace UUID>}`). Select it with `?cluster=true` on the URL,
 *   e.g. `redis://10.0.0.1:6379?cluster=true`: the node named is the seed, the others are discovered.
 * - Failures are fast, never queued: commands fail at once while the connection is down (no offline
 *   queue) and after `commandTimeoutMs` when Redis stalls, so the plugin's fail-open or fail-closed
 *   policy applies within that time; ioredis reconnects in the background.
 */
import type { BucketAcquire, BucketSpec } from '../../core/limits.js'
import { MAX_BUCKET_TTL_MS, type RateLimitDecision, type RateLimiter } from '../../core/rate-limits.js'
import type { HealthStatus } from '../../core/service.js'
import {
  checkRedisUrl,
  clientHealth,
  loadScripts,
  quitRedis,
  recordErrors,
  redisScript,
  requestPathClient,
  runScript,
  waitReady,
  type RedisClient,
} from './redis-connection.js'

export { isClusterUrl } from './redis-connection.js'


/**
 * Lua functions shared by ACQUIRE_SCRIPT, CHARGE_SCRIPT and the budget ledger's reserve script
 * (which checks a request's buckets together with its budgets).
 * - `read_bucket(key)` → tokens, ts as stored (nil when unknown); `refill(t, ts, capacity, window,
 *   now)` → the bucket at `now` (full when unknown, refilled at capacity/window, capped);
 *   `bucket_ttl(t, capacity, window)` → how long its key must live; `write_bucket(key, t, ts, ttl)`.
 * - `check_buckets(first, last, base, now)` reads the buckets KEYS[first..last], whose arguments
 *   start at ARGV[base] (per bucket: capacity, window (ms), take, require), and returns nil when
 *   every one holds take + require, else {index of the first refusing bucket (0-based from first),
 *   wait ms}; it writes nothing. `commit_buckets()` then stores what the last successful check took.
 */
export const BUCKET_FUNCTIONS = `
local MAX_TTL = ${MAX_BUCKET_TTL_MS}
local bucket_tokens, bucket_stamps, bucket_ttls = {}, {}, {}
local function read_bucket(key)
  local state = redis.call('HMGET', key, 'tokens', 'ts')
  return tonumber(state[1]), tonumber(state[2])
end
local function refill(t, ts, capacity, window, now)
  if t == nil or ts == nil then t, ts = capacity, now end
  if now > ts then
    if capacity > 0 then t = t + (now - ts) * capacity / window end
    ts = now
  end
  if t > capacity then t = capacity end
  return t, ts
end
local function bucket_ttl(t, capacity, window)
  local ttl = 2 * window
  if capacity > 0 then
    local full = math.ceil((capacity - t) * window / capacity)
    if full > ttl then ttl = full end
  end
  if ttl > MAX_TTL then ttl = MAX_TTL end
  return ttl
end
local function write_bucket(key, t, ts, ttl)
  redis.call('HSET', key, 'tokens', string.format('%.17g', t), 'ts', string.format('%.17g', ts))
  redis.call('PEXPIRE', key, string.format('%d', ttl))
end
local function check_buckets(first, last, base, now)
  for i = first, last do
    local key = KEYS[i]
    local b = base + (i - first) * 4
    local capacity = tonumber(ARGV[b])
    local window = tonumber(ARGV[b + 1])
    local take = tonumber(ARGV[b + 2])
    local need = take + tonumber(ARGV[b + 3])
    local t, ts = bucket_tokens[key], bucket_stamps[key]
    if t == nil then t, ts = read_bucket(key) end
    t, ts = refill(t, ts, capacity, window, now)
    if t < need then
      local wait = window
      if need <= capacity and capacity > 0 then wait = math.ceil((need - t) * window / capacity) end
      return {i - first, wait}
    end
    t = t - take
    bucket_tokens[key], bucket_stamps[key] = t, ts
    bucket_ttls[key] = bucket_ttl(t, capacity, window)
  end
  return nil
end
local function commit_buckets()
  for key, t in pairs(bucket_tokens) do
    write_bucket(key, t, bucket_stamps[key], bucket_ttls[key])
  end
end
`

/**
 * KEYS: bucket keys. ARGV[1]: now (ms); then per key: capacity, window (ms), take, require.
 * Returns {-1, 0} when allowed, else {refusing index (0-based), wait ms}.
 */
export const ACQUIRE_SCRIPT = `
${BUCKET_FUNCTIONS}
local refused = check_buckets(1, #KEYS, 2, tonumber(ARGV[1]))
if refused then return refused end
commit_buckets()
return {-1, 0}
`

/** KEYS: bucket keys. ARGV[1]: now (ms); then per key: capacity, window (ms), amount (may take a bucket below zero). */
export const CHARGE_SCRIPT = `
${BUCKET_FUNCTIONS}
local now = tonumber(ARGV[1])
for i = 1, #KEYS do
  local key = KEYS[i]
  local base = 2 + (i - 1) * 3
  local capacity = tonumber(ARGV[base])
  local window = tonumber(ARGV[base + 1])
  local t, ts = read_bucket(key)
  t, ts = refill(t, ts, capacity, window, now)
  t = t - tonumber(ARGV[base + 2])
  write_bucket(key, t, ts, bucket_ttl(t, capacity, window))
end
return 0
`

export interface RedisRateLimiterOptions {
  /**
   * `redis://[user:password@]host[:port][/db]` or `rediss://...` (TLS); append `?cluster=true` for
   * Redis Cluster (the host is the seed node).
   */
  readonly url: string
  /** A command not answered within this fails (and the plugin's failure policy applies); default 1000 ms. */
  readonly commandTimeoutMs?: number
  /** How long `start()` waits for the connection; default 10 s. */
  readonly startTimeoutMs?: number
  /** Name shown in Redis `CLIENT LIST`; default `gateway-rate-limiter`. */
  readonly connectionName?: string
}

const ACQUIRE = redisScript(ACQUIRE_SCRIPT)
const CHARGE = redisScript(CHARGE_SCRIPT)
const ALLOWED: RateLimitDecision = Object.freeze({ allowed: true })
const DEFAULT_COMMAND_TIMEOUT_MS = 1_000
const DEFAULT_START_TIMEOUT_MS = 10_000

export class RedisRateLimiter implements RateLimiter {
  readonly #url: string
  readonly #startTimeoutMs: number
  readonly #client: RedisClient
  #lastError: string | null = null
  #closed = false

  constructor(options: RedisRateLimiterOptions) {
    checkRedisUrl(options.url, 'RedisRateLimiter')
    this.#url = options.url
    this.#startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS
    this.#client = requestPathClient(options.url, {
      connectionName: options.connectionName ?? 'gateway-rate-limiter',
      commandTimeoutMs: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
    })
    recordErrors(this.#client, (message) => {
      this.#lastError = message
    })
  }

  /** Connects (failing after `startTimeoutMs` with a message naming `REDIS_URL`) and loads the scripts. */
  async start(): Promise<void> {
    await waitReady(this.#client, { url: this.#url, timeoutMs: this.#startTimeoutMs, subject: 'rate limiter ', lastError: () => this.#lastError })
    await loadScripts(this.#client, [ACQUIRE, CHARGE])
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await quitRedis(this.#client)
  }

  async health(): Promise<HealthStatus> {
    if (this.#closed) return { ok: false, detail: 'closed' }
    return clientHealth(this.#client, this.#lastError)
  }

  async acquire(requests: readonly BucketAcquire[], nowMs: number): Promise<RateLimitDecision> {
    if (requests.length === 0) return ALLOWED
    const argv: Array<string | number> = [Math.floor(nowMs)]
    for (const { bucket, take, require } of requests) argv.push(bucket.capacity, bucket.windowMs, take, require)
    const keys = requests.map((request) => request.bucket.key)
    const [index, wait] = (await runScript(this.#client, ACQUIRE, keys, argv)) as [number, number]
    if (index < 0) return ALLOWED
    return { allowed: false, index, retryAfterMs: wait }
  }

  async charge(charges: ReadonlyArray<{ readonly bucket: BucketSpec; readonly amount: number }>, nowMs: number): Promise<void> {
    if (charges.length === 0) return
    const argv: Array<string | number> = [Math.floor(nowMs)]
    for (const { bucket, amount } of charges) argv.push(bucket.capacity, bucket.windowMs, amount)
    await runScript(this.#client, CHARGE, charges.map((entry) => entry.bucket.key), argv)
  }
}
