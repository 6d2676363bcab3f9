/**
 * `BudgetLedger` on Redis (or Redis Cluster): every call is one Lua script, so a request's
 * counters are checked and changed atomically across gateway instances, in one round trip.
 *
 * - State: one hash per counter: `u` (settled usage) and `r:<slot>` (amounts reserved during lease
 *   slot `<slot>` = floor(ms / 60 s)). Reservations older than the lease (`leaseMs`) no longer count
 *   and are deleted when next seen, so an instance that crashed mid-request cannot hold a budget.
 * - `reserve`: if any key is missing → `unknown` (nothing reserved; the caller seeds and retries).
 *   Else refuses with the first counter where `u + live reservations >= limit`, or adds the amount
 *   to the current slot of every counter and returns that slot as the lease. It is the same script
 *   as `reserveWithBuckets`, without buckets.
 * - `seed`: `HSETNX u` (a counter created meanwhile by another instance wins). `settle`: releases
 *   up to the reserved amount from the lease's slot and adds the real amount to `u`; a missing key
 *   is left missing (never recreated without its history) and reported as `null`.
 * - `reserveWithBuckets` (`CombinedLimitLedger`): one script that checks the rate-limit buckets
 *   (the same hashes, and the same Lua, `BUCKET_FUNCTIONS`, as redis-rate-limiter.ts), then the counters, and writes both only
 *   when neither refuses: a request's rate limits and budgets cost one round trip together.
 * - `settle` does not call Redis itself: a settlement waits in a queue per hash tag and rides on
 *   the next reserve call of that tag (the script applies it first), or, when none comes within
 *   `settleBatchMs` (default 20 ms) or `settleBatchSize` settlements are waiting, goes in one
 *   settle-only call with the others. Under load a request costs one round trip in all. A
 *   reservation is released at most that much later, which can only refuse early, never overspend.
 * - Keys expire at the counter's `expiresAt` (the end of its period plus a grace day).
 * - Redis Cluster: a script may only touch keys of one slot, so every key of one call carries the
 *   same hash tag (the workspace, `{<uuid>}`). Select it with `?cluster=true` on the URL.
 * - Failures are fast, never queued (no offline queue, `commandTimeoutMs`): the budget plugin then
 *   fails closed.
 */
import type { BudgetCounter, CombinedLimitLedger, CombinedReserveDecision, ReserveDecision } from '../../core/budgets.js'
import type { BucketAcquire } from '../../core/limits.js'
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
  type RedisScript,
} from './redis-connection.js'
import { BUCKET_FUNCTIONS } from './redis-rate-limiter.js'

/** Length of a lease slot. */
export const LEASE_SLOT_MS = 60_000

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
 * Settlements that piggyback on a script call: applied first, whatever the rest of the call decides.
 * Expects `settleKeys` (KEYS[1..settleKeys]), `settlements` and `arg` (the first settlement's
 * ARGV index; per settlement: lease slot, number of counters, then reserved/actual per counter) and
 * leaves each counter's new usage (-1 for a missing counter) in `settled`.
 */
const SETTLE_SECTION = `
local settled = {}
local k = 0
for n = 1, settlements do
  local field = 'r:' .. ARGV[arg]
  local count = tonumber(ARGV[arg + 1])
  arg = arg + 2
  for i = 1, count do
    k = k + 1
    local key = KEYS[k]
    if redis.call('EXISTS', key) == 1 then
      local reserved = tonumber(ARGV[arg])
      local held = tonumber(redis.call('HGET', key, field) or '0')
      local release = math.min(held, reserved)
      if release > 0 then
        if held <= release then
          redis.call('HDEL', key, field)
        else
          redis.call('HINCRBY', key, field, string.format('%d', -release))
        end
      end
      settled[k] = redis.call('HINCRBY', key, 'u', ARGV[arg + 1])
    else
      settled[k] = -1
    end
    arg = arg + 2
  end
end
`

/**
 * Settles the queued settlements of this hash tag, then checks the rate-limit buckets, then the
 * counters, and takes/reserves only when nothing refuses.
 * KEYS: the settled counters (`ARGV[5]` of them), the counters to reserve (`ARGV[4]`), then the
 * buckets. ARGV[1]: now (ms), ARGV[2]: slot length (ms), ARGV[3]: lease in slots, ARGV[4]: number
 * of counters, ARGV[5]: number of settled counters, ARGV[6]: number of settlements; then the
 * settlements (see SETTLE_SECTION); then per counter: limit, amount, expire-at; then per bucket:
 * capacity, window (ms), take, require.
 * Returns the settled usages followed by the decision: {2, refusing bucket index, wait ms} |
 * {-1, unknown counter indexes...} | {0, refusing counter index, used} | {1, slot}; only {1, slot}
 * takes or reserves anything.
 */
export const RESERVE_SCRIPT = `
${BUCKET_FUNCTIONS}
local now = tonumber(ARGV[1])
local slot = math.floor(now / tonumber(ARGV[2]))
local oldest = slot - tonumber(ARGV[3])
local counters = tonumber(ARGV[4])
local settleKeys = tonumber(ARGV[5])
local settlements = tonumber(ARGV[6])
local arg = 7
${SETTLE_SECTION}
local function answer(decision)
  for i = 1, #decision do settled[settleKeys + i] = decision[i] end
  return settled
end
local counterBase = arg
local bucketBase = counterBase + counters * 3
local last = settleKeys + counters
local refused = check_buckets(last + 1, #KEYS, bucketBase, now)
if refused then return answer({2, refused[1], refused[2]}) end
local unknown = {-1}
for i = 1, counters do
  if redis.call('EXISTS', KEYS[settleKeys + i]) == 0 then unknown[#unknown + 1] = i - 1 end
end
if #unknown > 1 then return answer(unknown) end
for i = 1, counters do
  local key = KEYS[settleKeys + i]
  local limit = tonumber(ARGV[counterBase + (i - 1) * 3])
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
  if used + reserved >= limit then return answer({0, i - 1, used}) end
end
commit_buckets()
local field = 'r:' .. slot
for i = 1, counters do
  local base = counterBase + (i - 1) * 3
  local key = KEYS[settleKeys + i]
  if tonumber(ARGV[base + 1]) > 0 then redis.call('HINCRBY', key, field, ARGV[base + 1]) end
  if tonumber(ARGV[base + 2]) > 0 then redis.call('PEXPIREAT', key, ARGV[base + 2]) end
end
return answer({1, slot})
`

/** Settlements alone (the batch timer's call). KEYS: their counters; ARGV[1]: number of settlements, then as SETTLE_SECTION. Returns the new usages. */
export const SETTLE_SCRIPT = `
local settlements = tonumber(ARGV[1])
local arg = 2
${SETTLE_SECTION}
return settled
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
  /** How long a settlement waits for others to share its script call; default 20 ms (0: next tick). */
  readonly settleBatchMs?: number
  /** Most settlements in one call; default 64. */
  readonly settleBatchSize?: number
}

/** A settlement waiting for its batch. */
interface QueuedSettlement {
  readonly keys: readonly string[]
  /** lease, number of counters, then reserved/actual pairs. */
  readonly argv: readonly string[]
  resolve(usage: ReadonlyArray<number | null>): void
  reject(error: unknown): void
}

/** Hands each settlement its counters' new usage from the front of a script reply. */
function resolveSettlements(settlements: readonly QueuedSettlement[], reply: readonly number[]): void {
  let offset = 0
  for (const entry of settlements) {
    entry.resolve(reply.slice(offset, offset + entry.keys.length).map((used) => (used < 0 ? null : used)))
    offset += entry.keys.length
  }
}

/** The hash tag of a key (`{...}`), or the whole key: Redis Cluster routes by it. */
function hashTagOf(key: string): string {
  const open = key.indexOf('{')
  if (open < 0) return key
  const close = key.indexOf('}', open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : key
}

const SCRIPTS = {
  reserve: redisScript(RESERVE_SCRIPT),
  seed: redisScript(SEED_SCRIPT),
  settle: redisScript(SETTLE_SCRIPT),
  peek: redisScript(PEEK_SCRIPT),
}
const DEFAULT_SETTLE_BATCH_MS = 20
const DEFAULT_SETTLE_BATCH_SIZE = 64
const DEFAULT_LEASE_MS = 900_000
const DEFAULT_COMMAND_TIMEOUT_MS = 1_000
const DEFAULT_START_TIMEOUT_MS = 10_000

/** An integer amount as a Redis argument. */
function integer(value: number): string {
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`budget amounts must be non-negative numbers, got ${value}`)
  return Math.round(value).toString()
}

function expiry(counter: BudgetCounter): string {
  return counter.expiresAt === null ? '0' : Math.ceil(counter.expiresAt).toString()
}

export class RedisBudgetLedger implements CombinedLimitLedger {
  readonly #url: string
  readonly #settleBatchMs: number
  readonly #settleBatchSize: number
  /** Settlements waiting for their call, per hash tag. */
  #settleQueue = new Map<string, QueuedSettlement[]>()
  #settleTimer: NodeJS.Timeout | null = null
  readonly #settling = new Set<Promise<void>>()
  readonly #leaseSlots: number
  readonly #startTimeoutMs: number
  readonly #client: RedisClient
  #lastError: string | null = null
  #closed = false

  constructor(options: RedisBudgetLedgerOptions) {
    checkRedisUrl(options.url, 'RedisBudgetLedger')
    this.#url = options.url
    this.#leaseSlots = Math.max(1, Math.ceil((options.leaseMs ?? DEFAULT_LEASE_MS) / LEASE_SLOT_MS))
    this.#startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS
    this.#settleBatchMs = options.settleBatchMs ?? DEFAULT_SETTLE_BATCH_MS
    this.#settleBatchSize = Math.max(1, options.settleBatchSize ?? DEFAULT_SETTLE_BATCH_SIZE)
    // A request must not wait for a reconnect: commands fail at once and the plugin fails closed.
    this.#client = requestPathClient(options.url, {
      connectionName: options.connectionName ?? 'gateway-budget-ledger',
      commandTimeoutMs: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
    })
    recordErrors(this.#client, (message) => {
      this.#lastError = message
    })
  }

  /** Connects (failing after `startTimeoutMs` with a message naming `REDIS_URL`) and loads the scripts. */
  async start(): Promise<void> {
    await waitReady(this.#client, { url: this.#url, timeoutMs: this.#startTimeoutMs, subject: 'budget ledger ', lastError: () => this.#lastError })
    await loadScripts(this.#client, Object.values(SCRIPTS))
  }

  /** Sends the settlements still queued, then disconnects. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#flushSettlements()
    while (this.#settling.size > 0) await Promise.allSettled([...this.#settling])
    this.#closed = true
    await quitRedis(this.#client)
  }

  async health(): Promise<HealthStatus> {
    if (this.#closed) return { ok: false, detail: 'closed' }
    return clientHealth(this.#client, this.#lastError)
  }

  reserve(items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly amount: number }>, nowMs: number): Promise<ReserveDecision> {
    if (items.length === 0) return Promise.resolve({ kind: 'reserved', lease: Math.floor(nowMs / LEASE_SLOT_MS) })
    return this.#reserve(items, [], nowMs) as Promise<ReserveDecision>
  }

  reserveWithBuckets(
    items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly amount: number }>,
    acquires: readonly BucketAcquire[],
    nowMs: number,
  ): Promise<CombinedReserveDecision> {
    if (items.length === 0 && acquires.length === 0) return this.reserve(items, nowMs)
    return this.#reserve(items, acquires, nowMs)
  }

  async seed(items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly used: number }>): Promise<void> {
    if (items.length === 0) return
    const argv: string[] = []
    for (const { counter, used } of items) argv.push(integer(used), expiry(counter))
    await this.#run(SCRIPTS.seed, items.map((item) => item.counter.key), argv)
  }

  /** One RESERVE_SCRIPT call, carrying the settlements queued under the same hash tag. */
  async #reserve(
    items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly amount: number }>,
    acquires: readonly BucketAcquire[],
    nowMs: number,
  ): Promise<CombinedReserveDecision> {
    const tag = hashTagOf(items[0]?.counter.key ?? (acquires[0] as BucketAcquire).bucket.key)
    const riders = this.#settleQueue.get(tag) ?? []
    this.#settleQueue.delete(tag)
    const keys: string[] = []
    const settleArgv: string[] = []
    for (const rider of riders) {
      keys.push(...rider.keys)
      settleArgv.push(...rider.argv)
    }
    const settleKeys = keys.length
    const argv: string[] = [Math.floor(nowMs).toString(), LEASE_SLOT_MS.toString(), this.#leaseSlots.toString(), String(items.length), String(settleKeys), String(riders.length)]
    argv.push(...settleArgv)
    for (const { counter, amount } of items) {
      keys.push(counter.key)
      argv.push(String(counter.limit), integer(amount), expiry(counter))
    }
    for (const { bucket, take, require } of acquires) {
      keys.push(bucket.key)
      argv.push(String(bucket.capacity), String(bucket.windowMs), String(take), String(require))
    }
    let reply: number[]
    try {
      reply = (await this.#run(SCRIPTS.reserve, keys, argv)) as number[]
    } catch (error) {
      for (const rider of riders) rider.reject(error)
      throw error
    }
    resolveSettlements(riders, reply)
    const [status, first, second] = reply.slice(settleKeys)
    if (status === 1) return { kind: 'reserved', lease: first as number }
    if (status === 2) return { kind: 'rate-limited', index: first as number, retryAfterMs: second as number }
    if (status === 0) return { kind: 'refused', index: first as number, used: second as number }
    return { kind: 'unknown', indexes: reply.slice(settleKeys + 1) }
  }

  /** Queued for the next batched call of its hash tag (see the header). */
  settle(
    items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly reserved: number; readonly actual: number }>,
    lease: number,
  ): Promise<ReadonlyArray<number | null>> {
    if (items.length === 0) return Promise.resolve([])
    if (this.#closed) return Promise.reject(new Error('budget ledger closed'))
    const argv: string[] = [Math.floor(lease).toString(), String(items.length)]
    for (const { reserved, actual } of items) argv.push(integer(reserved), integer(actual))
    const keys = items.map((item) => item.counter.key)
    return new Promise((resolve, reject) => {
      const tag = hashTagOf(keys[0] as string)
      let queue = this.#settleQueue.get(tag)
      if (queue === undefined) this.#settleQueue.set(tag, (queue = []))
      queue.push({ keys, argv, resolve, reject })
      if (queue.length >= this.#settleBatchSize) this.#sendSettlements(tag)
      // The flush waits one more turn of the event loop (setImmediate runs after I/O polling), so a
      // request read in that turn can still take the settlements along in its reserve call.
      else this.#settleTimer ??= setTimeout(() => setImmediate(() => this.#flushSettlements()), this.#settleBatchMs)
    })
  }

  #flushSettlements(): void {
    if (this.#settleTimer !== null) clearTimeout(this.#settleTimer)
    this.#settleTimer = null
    for (const tag of [...this.#settleQueue.keys()]) this.#sendSettlements(tag)
  }

  /** One script call for the settlements queued under `tag`. */
  #sendSettlements(tag: string): void {
    const batch = this.#settleQueue.get(tag)
    this.#settleQueue.delete(tag)
    if (batch === undefined || batch.length === 0) return
    const keys: string[] = []
    const argv: string[] = [String(batch.length)]
    for (const entry of batch) {
      keys.push(...entry.keys)
      argv.push(...entry.argv)
    }
    const call = this.#run(SCRIPTS.settle, keys, argv).then(
      (reply) => resolveSettlements(batch, reply as number[]),
      (error: unknown) => {
        for (const entry of batch) entry.reject(error)
      },
    )
    this.#settling.add(call)
    void call.finally(() => this.#settling.delete(call))
  }

  async peek(keys: readonly string[]): Promise<ReadonlyArray<number | null>> {
    if (keys.length === 0) return []
    const reply = (await this.#run(SCRIPTS.peek, keys, [])) as number[]
    return reply.map((used) => (used < 0 ? null : used))
  }

  #run(entry: RedisScript, keys: readonly string[], argv: readonly string[]): Promise<unknown> {
    return runScript(this.#client, entry, keys, argv)
  }
}
