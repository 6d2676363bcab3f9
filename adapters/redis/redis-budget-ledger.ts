/**
 * `BudgetLedger` on Redis (or Redis Cluster): every call is one Lua script, so a request's
 * counters are checked and changed atomically across gateway instances, in one round trip.
 *
 * - State: one hash per counter: `u` (settled usage) and `r:<slot>` (amounts reserved during lease
 *   slot `<slot>` = floor(ms / 60 s)). Reservations older than the lease (`leaseMs`) no longer count
 *   and are deleted when next seen, so an instance that crashed mid-request cannot hold a budget.
 * - `reserve`: if any key is missing → `unknown` (nothing written; the caller seeds and retries).
 *   Else refuses with the first counter where `u + live reservations >= limit`, or adds the amount
 *   to the current slot of every counter and returns that slot as the lease.
 * - `seed`: `HSETNX u` (a counter created meanwhile by another instance wins). `settle`: releases
 *   up to the reserved amount from the lease's slot and adds the real amount to `u`; a missing key
 *   is left missing (never recreated without its history) and reported as `null`.
 * - Keys expire at the counter's `expiresAt` (the end of its period plus a grace day).
 * - Redis Cluster: a script may only touch keys of one slot, so every key of one call carries the
 *   same hash tag (the workspace, `{<uuid>}`). Select it with `?cluster=true` on the URL.
 * - Failures are fast, never queued (no offline queue, `commandTimeoutMs`): the budget plugin then
 *   fails closed.
 */
import { createHash } from 'node:crypto'
import { Cluster, Redis } from 'ioredis'
import type { BudgetCounter, BudgetLedger, ReserveDecision } from '../../core/budgets.js'
import type { HealthStatus } from '../../core/ports.js'
import { maskRedisUrl } from './redis-change-notifier.js'

/** Length of a lease slot. */
export const LEASE_SLOT_MS = 60_000

/**
 * KEYS: counters. ARGV[1]: now (ms), ARGV[2]: slot length (ms), ARGV[3]: lease in slots; then per
 * key: limit, amount, expire-at (epoch ms, 0 = never).
 * Returns {-1, unknown indexes...} | {0, refusing index, used} | {1, slot} (indexes 0-based).
 */
export const RESERVE_SCRIPT = `
local now = tonumber(ARGV[1])
local slot = math.floor(now / tonumber(ARGV[2]))
local oldest = slot - tonumber(ARGV[3])
local unknown = {-1}
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then unknown[#unknown + 1] = i - 1 end
end
if #unknown > 1 then return unknown end
for i = 1, #KEYS do
  local key = KEYS[i]
  local limit = tonumber(ARGV[4 + (i - 1) * 3])
  local fields = redis.call('HGETALL', key)
  local used, reserved = 0, 0
  for j = 1, #fields, 2 do
    local name = fields[j]
    if name == 'u' then
      used = tonumber(fields[j + 1])
    elseif string.sub(name, 1, 2) == 'r:' then
      local s = tonumber(string.sub(name, 3))
      if s == nil or s <= oldest then
        redis.call('HDEL', key, name)
      else
        reserved = reserved + tonumber(fields[j + 1])
      end
    end
  end
  if used + reserved >= limit then return {0, i - 1, used} end
end
local field = 'r:' .. slot
for i = 1, #KEYS do
  local base = 4 + (i - 1) * 3
  if tonumber(ARGV[base + 1]) > 0 then redis.call('HINCRBY', KEYS[i], field, ARGV[base + 1]) end
  if tonumber(ARGV[base + 2]) > 0 then redis.call('PEXPIREAT', KEYS[i], ARGV[base + 2]) end
end
return {1, slot}
`

/** KEYS: counters. ARGV per key: used, expire-at (0 = never). Creates only missing counters. */
export const SEED_SCRIPT = `
for i = 1, #KEYS do
  if redis.call('HSETNX', KEYS[i], 'u', ARGV[i * 2 - 1]) == 1 and tonumber(ARGV[i * 2]) > 0 then
    redis.call('PEXPIREAT', KEYS[i], ARGV[i * 2])
  end
end
return 0
`

/**
 * KEYS: counters. ARGV[1]: the lease slot; then per key: reserved, actual.
 * Returns each counter's new usage, -1 for a missing counter.
 */
export const SETTLE_SCRIPT = `
local field = 'r:' .. ARGV[1]
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  if redis.call('EXISTS', key) == 1 then
    local reserved = tonumber(ARGV[i * 2])
    local held = tonumber(redis.call('HGET', key, field) or '0')
    local release = math.min(held, reserved)
    if release > 0 then
      if held <= release then
        redis.call('HDEL', key, field)
      else
        redis.call('HINCRBY', key, field, string.format('%d', -release))
      end
    end
    out[i] = redis.call('HINCRBY', key, 'u', ARGV[i * 2 + 1])
  else
    out[i] = -1
  end
end
return out
`

/** KEYS: counters. Returns each counter's usage, -1 for a missing counter. */
export const PEEK_SCRIPT = `
local out = {}
for i = 1, #KEYS do
  local used = redis.call('HGET', KEYS[i], 'u')
  if used then out[i] = tonumber(used) else out[i] = -1 end
end
return out
`

export interface RedisBudgetLedgerOptions {
  /**
   * `redis://[user:password@]host[:port][/db]` or `rediss://...` (TLS); append `?cluster=true` for
   * Redis Cluster (the host is the seed node).
   */
  readonly url: string
  /** How long an unsettled reservation counts; default 15 minutes. */
  readonly leaseMs?: number
  /** A command not answered within this fails (the plugin then fails closed); default 1000 ms. */
  readonly commandTimeoutMs?: number
  /** How long `start()` waits for the connection; default 10 s. */
  readonly startTimeoutMs?: number
  /** Name shown in Redis `CLIENT LIST`; default `gateway-budget-ledger`. */
  readonly connectionName?: string
}

interface Script {
  readonly source: string
  readonly sha: string
}

function script(source: string): Script {
  return { source, sha: createHash('sha1').update(source).digest('hex') }
}

const SCRIPTS = { reserve: script(RESERVE_SCRIPT), seed: script(SEED_SCRIPT), settle: script(SETTLE_SCRIPT), peek: script(PEEK_SCRIPT) }
const DEFAULT_LEASE_MS = 900_000
const DEFAULT_COMMAND_TIMEOUT_MS = 1_000
const DEFAULT_START_TIMEOUT_MS = 10_000
const QUIT_TIMEOUT_MS = 2_000
const MAX_RETRY_DELAY_MS = 1_000

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

function retryStrategy(attempt: number): number {
  return Math.min(50 * 2 ** (attempt - 1), MAX_RETRY_DELAY_MS) + Math.floor(Math.random() * 100)
}

/** An integer amount as a Redis argument. */
function integer(value: number): string {
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`budget amounts must be non-negative numbers, got ${value}`)
  return Math.round(value).toString()
}

function expiry(counter: BudgetCounter): string {
  return counter.expiresAt === null ? '0' : Math.ceil(counter.expiresAt).toString()
}

export class RedisBudgetLedger implements BudgetLedger {
  readonly #url: string
  readonly #leaseSlots: number
  readonly #startTimeoutMs: number
  readonly #client: Redis | Cluster
  #lastError: string | null = null
  #closed = false

  constructor(options: RedisBudgetLedgerOptions) {
    if (!/^rediss?:\/\//.test(options.url)) throw new Error('RedisBudgetLedger: the URL must start with redis:// or rediss://')
    this.#url = options.url
    this.#leaseSlots = Math.max(1, Math.ceil((options.leaseMs ?? DEFAULT_LEASE_MS) / LEASE_SLOT_MS))
    this.#startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS
    const commandTimeout = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS
    const connectionName = options.connectionName ?? 'gateway-budget-ledger'
    const parsed = new URL(options.url)
    if (parsed.searchParams.get('cluster') === 'true') {
      this.#client = new Cluster([{ host: parsed.hostname.replace(/^\[|\]$/g, ''), port: Number(parsed.port || 6379) }], {
        lazyConnect: true,
        enableOfflineQueue: false,
        clusterRetryStrategy: retryStrategy,
        redisOptions: {
          connectionName,
          commandTimeout,
          maxRetriesPerRequest: 0,
          ...(parsed.username === '' ? {} : { username: decodeURIComponent(parsed.username) }),
          ...(parsed.password === '' ? {} : { password: decodeURIComponent(parsed.password) }),
          ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
        },
      })
    } else {
      this.#client = new Redis(options.url, {
        lazyConnect: true,
        // A request must not wait for a reconnect: fail at once and let the plugin fail closed.
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        commandTimeout,
        connectionName,
        retryStrategy,
      })
    }
    // Without an 'error' listener ioredis prints every failed reconnect attempt itself.
    this.#client.on('error', (error: unknown) => {
      this.#lastError = errorMessage(error)
    })
  }

  /** Connects (failing after `startTimeoutMs` with a message naming `REDIS_URL`) and loads the scripts. */
  async start(): Promise<void> {
    await this.#waitReady()
    const nodes = this.#client instanceof Cluster ? this.#client.nodes('master') : [this.#client]
    await Promise.all(nodes.flatMap((node) => Object.values(SCRIPTS).map((entry) => node.script('LOAD', entry.source))))
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    const client = this.#client
    if (client.status === 'end' || client.status === 'wait') {
      client.disconnect()
      return
    }
    let timer: NodeJS.Timeout | undefined
    const timedOut = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, QUIT_TIMEOUT_MS)
    })
    try {
      await Promise.race([client.quit().then(() => undefined), timedOut])
    } catch {
      // Already closing: disconnect below settles it either way.
    } finally {
      clearTimeout(timer)
      client.disconnect()
    }
  }

  async health(): Promise<HealthStatus> {
    if (this.#closed) return { ok: false, detail: 'closed' }
    if (this.#client.status === 'ready') return { ok: true }
    return { ok: false, detail: `redis ${this.#client.status}${this.#lastError === null ? '' : `: ${this.#lastError}`}` }
  }

  async reserve(items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly amount: number }>, nowMs: number): Promise<ReserveDecision> {
    if (items.length === 0) return { kind: 'reserved', lease: Math.floor(nowMs / LEASE_SLOT_MS) }
    const argv: string[] = [Math.floor(nowMs).toString(), LEASE_SLOT_MS.toString(), this.#leaseSlots.toString()]
    for (const { counter, amount } of items) argv.push(String(counter.limit), integer(amount), expiry(counter))
    const reply = (await this.#run(SCRIPTS.reserve, items.map((item) => item.counter.key), argv)) as number[]
    const [status, first, second] = reply
    if (status === 1) return { kind: 'reserved', lease: first as number }
    if (status === 0) return { kind: 'refused', index: first as number, used: second as number }
    return { kind: 'unknown', indexes: reply.slice(1) }
  }

  async seed(items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly used: number }>): Promise<void> {
    if (items.length === 0) return
    const argv: string[] = []
    for (const { counter, used } of items) argv.push(integer(used), expiry(counter))
    await this.#run(SCRIPTS.seed, items.map((item) => item.counter.key), argv)
  }

  async settle(
    items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly reserved: number; readonly actual: number }>,
    lease: number,
  ): Promise<ReadonlyArray<number | null>> {
    if (items.length === 0) return []
    const argv: string[] = [Math.floor(lease).toString()]
    for (const { reserved, actual } of items) argv.push(integer(reserved), integer(actual))
    const reply = (await this.#run(SCRIPTS.settle, items.map((item) => item.counter.key), argv)) as number[]
    return reply.map((used) => (used < 0 ? null : used))
  }

  async peek(keys: readonly string[]): Promise<ReadonlyArray<number | null>> {
    if (keys.length === 0) return []
    const reply = (await this.#run(SCRIPTS.peek, keys, [])) as number[]
    return reply.map((used) => (used < 0 ? null : used))
  }

  async #run(entry: Script, keys: readonly string[], argv: readonly string[]): Promise<unknown> {
    try {
      return await this.#client.evalsha(entry.sha, keys.length, ...keys, ...argv)
    } catch (error) {
      if (!errorMessage(error).startsWith('NOSCRIPT')) throw error
      return this.#client.eval(entry.source, keys.length, ...keys, ...argv)
    }
  }

  #waitReady(): Promise<void> {
    const client = this.#client
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        client.off('ready', onReady)
        client.disconnect()
        const cause = this.#lastError === null ? '' : ` (last error: ${this.#lastError})`
        reject(new Error(`budget ledger cannot reach Redis at REDIS_URL=${maskRedisUrl(this.#url)} within ${this.#startTimeoutMs} ms${cause}`))
      }, this.#startTimeoutMs)
      const onReady = (): void => {
        clearTimeout(timer)
        resolve()
      }
      if (client.status === 'ready') return onReady()
      client.once('ready', onReady)
      // The first failed attempt rejects connect(); ioredis keeps retrying, and the timer decides.
      client.connect().catch(() => {})
    })
  }
}
