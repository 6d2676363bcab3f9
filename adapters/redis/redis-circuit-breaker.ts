/**
 * `CircuitBreaker` on Redis: circuits shared by every gateway instance, each instance answering
 * `allow` from a local mirror so a closed circuit never costs a round trip.
 *
 * - State: one hash per circuit, `<prefix><key>` = `{f: failures in a row, o: epoch ms the
 *   cool-down ends (0 closed), p: epoch ms a probe claim ends}`; a closed circuit with no failures
 *   has no key. Times are the callers' clocks (`now`), so instances whose clocks differ slightly
 *   agree within that difference. A key expires `cooldownMs` + 1 h after its last write (failures
 *   far apart no longer count as "in a row"; an open circuit nobody probes is forgotten).
 * - `record` runs RECORD_SCRIPT (counts, opens, reopens, closes) fire-and-forget; the script
 *   publishes every state change on `<channelPrefix>circuit-breakers` as `<state>|<openUntil>|<key>`
 *   (`failing`: the count left 0, so a success anywhere must reset it; `open`; `closed`), and every
 *   instance, this one included, applies it to its mirror. Script replies update the mirror too.
 *   A success runs the script only when the mirror knows of failures (or an open circuit), so a
 *   healthy target costs no Redis traffic at all.
 * - `allow`: from the mirror while closed, open, or while a probe claim is known to be out; only
 *   a cooled-down circuit asks Redis (CLAIM_SCRIPT), which grants the probe to one caller.
 * - Redis down (a command fails at once while disconnected, or after `commandTimeoutMs`): the
 *   breaker never refuses because of it. A failed `record` is applied to the mirror as the
 *   in-process breaker would (local counting: the instance opens and probes on its own); a failed
 *   claim grants the probe locally. Errors are counted (`stats()`) and logged at most once per
 *   `errorLogIntervalMs`. Once Redis answers, replies and messages make Redis's state the mirror's
 *   again.
 * - Messages are lost while the subscriber connection is down (pub/sub has no history): when it
 *   comes back, the states of every mirrored circuit are read again. A circuit another instance
 *   opened meanwhile that this one does not mirror, or opened before this instance started, reads
 *   as closed here until the next failure recorded here, whose reply carries the open state (one
 *   attempt per such circuit reaches the target).
 * - The mirror keeps at most `maxCircuits` circuits (least recently changed dropped first; a
 *   dropped circuit reads as closed).
 * - Connections: one request-path client for the scripts (no offline queue, so a command fails at
 *   once while disconnected) and one RESP2 subscriber. Each script touches one key, so the scripts
 *   run on Redis Cluster too; the subscriber needs one server (as the change notifier).
 */
import type { Redis } from 'ioredis'
import type { CircuitBreaker, CircuitSetting } from '../../core/ports.js'
import type { HealthStatus, Logger } from '../../core/service.js'
import {
  checkRedisUrl,
  clientHealth,
  errorMessage,
  loadScripts,
  queueingClient,
  quitRedis,
  recordErrors,
  redisScript,
  requestPathClient,
  runScript,
  waitReady,
  type RedisClient,
} from './redis-connection.js'

/** How long a circuit's key outlives its cool-down (ms). */
const KEEP_MS = 3_600_000

/**
 * KEYS[1]: the circuit. ARGV: now, success (1/0), failure threshold, cool-down (ms), channel, the
 * circuit's key as published. Returns {o, p, f} after the outcome: open-until (0 closed), probe
 * claim end, failures in a row.
 */
export const RECORD_SCRIPT = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local threshold = tonumber(ARGV[3])
local cooldown = tonumber(ARGV[4])
local state = redis.call('HMGET', key, 'f', 'o', 'p')
local f = tonumber(state[1]) or 0
local o = tonumber(state[2]) or 0
local p = tonumber(state[3]) or 0
if o ~= 0 and now < o then return {o, p, 0} end
if ARGV[2] == '1' then
  if o ~= 0 or f > 0 then
    redis.call('DEL', key)
    redis.call('PUBLISH', ARGV[5], 'closed|0|' .. ARGV[6])
  end
  return {0, 0, 0}
end
if o ~= 0 or f + 1 >= threshold then
  o = now + cooldown
  redis.call('HSET', key, 'f', 0, 'o', o, 'p', 0)
  redis.call('PEXPIRE', key, cooldown + ${KEEP_MS})
  redis.call('PUBLISH', ARGV[5], 'open|' .. string.format('%.0f', o) .. '|' .. ARGV[6])
  return {o, 0, 0}
end
redis.call('HSET', key, 'f', f + 1, 'o', 0, 'p', 0)
redis.call('PEXPIRE', key, cooldown + ${KEEP_MS})
if f == 0 then redis.call('PUBLISH', ARGV[5], 'failing|0|' .. ARGV[6]) end
return {0, 0, f + 1}
`

/**
 * KEYS[1]: the circuit. ARGV: now, claim length (ms). Grants the probe of a cooled-down circuit to
 * the first caller. Returns {granted (1/0), o, p, f}.
 */
export const CLAIM_SCRIPT = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local state = redis.call('HMGET', key, 'f', 'o', 'p')
local f = tonumber(state[1]) or 0
local o = tonumber(state[2]) or 0
local p = tonumber(state[3]) or 0
if o == 0 then return {1, 0, 0, f} end
if now < o or now < p then return {0, o, p, 0} end
p = now + tonumber(ARGV[2])
redis.call('HSET', key, 'p', p)
return {1, o, p, 0}
`

const RECORD = redisScript(RECORD_SCRIPT)
const CLAIM = redisScript(CLAIM_SCRIPT)
const CHANNEL = 'circuit-breakers'
const DEFAULT_PREFIX = 'gateway:'
const DEFAULT_MAX_CIRCUITS = 10_000
const DEFAULT_COMMAND_TIMEOUT_MS = 1_000
const DEFAULT_START_TIMEOUT_MS = 10_000
const DEFAULT_ERROR_LOG_INTERVAL_MS = 10_000

/** A mirrored circuit (as `CircuitState` of the in-process breaker). `openUntil` 0: closed. */
interface Mirror {
  failures: number
  openUntil: number
  probeUntil: number
  /** Failures sent to Redis and not answered yet: a success must reset them even before the reply. */
  pending: number
}

export interface RedisCircuitBreakerOptions {
  /** `redis://[user:password@]host[:port][/db]` or `rediss://...` (TLS). */
  readonly url: string
  /** Prefix of the circuit keys (`cb:` added) and of the channel name; default `gateway:`. */
  readonly prefix?: string
  /** Most circuits mirrored in memory; default 10 000. */
  readonly maxCircuits?: number
  /** A script not answered within this counts as a Redis failure; default 1000 ms. */
  readonly commandTimeoutMs?: number
  /** How long `start()` waits for both connections; default 10 s. */
  readonly startTimeoutMs?: number
  /** Least time between two logged Redis errors (the others are counted); default 10 s. */
  readonly errorLogIntervalMs?: number
  /** Name shown in Redis `CLIENT LIST` (`-sub` appended for the subscriber); default `gateway-circuit-breaker`. */
  readonly connectionName?: string
  readonly logger?: Logger
}

export interface RedisCircuitBreakerStats {
  /** Scripts that failed (Redis unreachable, timing out, refusing); their outcome was applied locally. */
  readonly errors: number
  /** Circuits mirrored in memory. */
  readonly circuits: number
}

type Phase = 'idle' | 'starting' | 'running' | 'closed'

export class RedisCircuitBreaker implements CircuitBreaker {
  readonly #url: string
  readonly #keyPrefix: string
  readonly #channel: string
  readonly #maxCircuits: number
  readonly #startTimeoutMs: number
  readonly #errorLogIntervalMs: number
  readonly #logger: Logger | null
  readonly #client: RedisClient
  readonly #subscriber: Redis
  readonly #mirror = new Map<string, Mirror>()
  #phase: Phase = 'idle'
  #lastError: string | null = null
  #errors = 0
  #errorsLogged = 0
  #lastErrorLog = -Infinity
  /** Set once the subscriber was ready and then lost its connection: its next ready re-reads the mirror. */
  #subscriberLost = false
  #lastRecord: Promise<void> = Promise.resolve()

  constructor(options: RedisCircuitBreakerOptions) {
    checkRedisUrl(options.url, 'RedisCircuitBreaker')
    const prefix = options.prefix ?? DEFAULT_PREFIX
    this.#url = options.url
    this.#keyPrefix = `${prefix}cb:`
    this.#channel = prefix + CHANNEL
    this.#maxCircuits = Math.max(1, options.maxCircuits ?? DEFAULT_MAX_CIRCUITS)
    this.#startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS
    this.#errorLogIntervalMs = options.errorLogIntervalMs ?? DEFAULT_ERROR_LOG_INTERVAL_MS
    this.#logger = options.logger ?? null
    const name = options.connectionName ?? 'gateway-circuit-breaker'
    this.#client = requestPathClient(options.url, { connectionName: name, commandTimeoutMs: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS })
    this.#subscriber = queueingClient(options.url, `${name}-sub`, { protocol: 2 })
    for (const client of [this.#client, this.#subscriber]) {
      recordErrors(client, (message) => {
        this.#lastError = message
      })
    }
    this.#subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.#channel) this.#onMessage(message)
    })
    let subscriberReady = false
    this.#subscriber.on('ready', () => {
      subscriberReady = true
      void this.#resync()
    })
    this.#subscriber.on('close', () => {
      if (subscriberReady && this.#phase === 'running') this.#subscriberLost = true
      subscriberReady = false
    })
    // The re-read needs both connections: whichever comes back last runs it.
    this.#client.on('ready', () => void this.#resync())
  }

  /** Connects both clients (failing after `startTimeoutMs` with a message naming `REDIS_URL`), loads the scripts, subscribes. */
  async start(): Promise<void> {
    if (this.#phase !== 'idle') return
    this.#phase = 'starting'
    const ready = (client: RedisClient): Promise<void> =>
      waitReady(client, { url: this.#url, timeoutMs: this.#startTimeoutMs, subject: 'circuit breaker ', lastError: () => this.#lastError })
    try {
      await Promise.all([ready(this.#client), ready(this.#subscriber)])
      await loadScripts(this.#client, [RECORD, CLAIM])
      await this.#subscriber.subscribe(this.#channel)
    } catch (error) {
      this.#phase = 'closed'
      this.#client.disconnect()
      this.#subscriber.disconnect()
      throw error
    }
    this.#phase = 'running'
  }

  async close(): Promise<void> {
    if (this.#phase === 'closed') return
    this.#phase = 'closed'
    this.#mirror.clear()
    await Promise.all([quitRedis(this.#client), quitRedis(this.#subscriber)])
  }

  async health(): Promise<HealthStatus> {
    if (this.#phase !== 'running') return { ok: false, detail: this.#phase === 'closed' ? 'closed' : 'not started' }
    const commands = clientHealth(this.#client, this.#lastError)
    if (!commands.ok) return commands
    if (this.#subscriber.status !== 'ready') return { ok: false, detail: `redis subscriber ${this.#subscriber.status}` }
    return { ok: true }
  }

  stats(): RedisCircuitBreakerStats {
    return { errors: this.#errors, circuits: this.#mirror.size }
  }

  /** A copy of a mirrored circuit, `undefined` when not mirrored (tests and diagnostics). */
  peek(key: string): { failures: number; openUntil: number; probeUntil: number } | undefined {
    const mirror = this.#mirror.get(key)
    return mirror === undefined ? undefined : { failures: mirror.failures, openUntil: mirror.openUntil, probeUntil: mirror.probeUntil }
  }

  allow(key: string, setting: CircuitSetting, now: number): boolean | Promise<boolean> {
    // No circuit failing at all (the usual case): not even the key's hash is computed.
    if (this.#mirror.size === 0) return true
    const mirror = this.#mirror.get(key)
    if (mirror === undefined || mirror.openUntil === 0) return true
    if (now < mirror.openUntil || now < mirror.probeUntil) return false
    // Taken before asking, so this instance's other callers answer false while the claim is out.
    mirror.probeUntil = now + setting.cooldownMs
    return this.#claim(key, setting, now)
  }

  record(key: string, setting: CircuitSetting, success: boolean, now: number): void {
    if (success && this.#mirror.size === 0) return
    let mirror = this.#mirror.get(key)
    // A success with no failures known anywhere changes nothing; while open, outcomes are stragglers'.
    if (mirror === undefined ? success : mirror.openUntil !== 0 && now < mirror.openUntil) return
    if (!success) {
      mirror ??= this.#insert(key, { failures: 0, openUntil: 0, probeUntil: 0, pending: 0 })
      mirror.pending += 1
    }
    // Whole ms: Lua writes numbers with 14 significant digits.
    const argv = [Math.floor(now), success ? 1 : 0, setting.failureThreshold, setting.cooldownMs, this.#channel, key]
    this.#lastRecord = runScript(this.#client, RECORD, [this.#keyPrefix + key], argv).then(
      (reply) => {
        if (!success) this.#settlePending(key)
        const [openUntil, probeUntil, failures] = reply as [number, number, number]
        this.#apply(key, openUntil, probeUntil, failures)
      },
      (error: unknown) => {
        if (!success) this.#settlePending(key)
        this.#failed('record', error)
        this.#recordLocally(key, setting, success, now)
      },
    )
  }

  /** Resolves once every `record` made so far has been answered (or failed) and applied (tests). */
  settled(): Promise<void> {
    return this.#lastRecord
  }

  async #claim(key: string, setting: CircuitSetting, now: number): Promise<boolean> {
    try {
      const [granted, openUntil, probeUntil, failures] = (await runScript(this.#client, CLAIM, [this.#keyPrefix + key], [Math.floor(now), setting.cooldownMs])) as [
        number,
        number,
        number,
        number,
      ]
      this.#apply(key, openUntil, probeUntil, failures)
      return granted === 1
    } catch (error) {
      // Redis cannot tell who probes: this instance's own claim (taken in `allow`) decides.
      this.#failed('claim', error)
      return true
    }
  }

  /** The in-process breaker's transitions, applied to the mirror while Redis cannot be reached. */
  #recordLocally(key: string, setting: CircuitSetting, success: boolean, now: number): void {
    const mirror = this.#mirror.get(key)
    if (mirror !== undefined && mirror.openUntil !== 0 && now < mirror.openUntil) return
    if (success) {
      this.#apply(key, 0, 0, 0)
    } else if (mirror === undefined || (mirror.openUntil === 0 && mirror.failures + 1 < setting.failureThreshold)) {
      this.#apply(key, 0, 0, (mirror?.failures ?? 0) + 1)
    } else {
      this.#apply(key, now + setting.cooldownMs, 0, 0)
    }
  }

  #settlePending(key: string): void {
    const mirror = this.#mirror.get(key)
    if (mirror !== undefined && mirror.pending > 0) mirror.pending -= 1
  }

  /**
   * Sets a mirrored circuit and makes it the newest, or drops it when it is closed with no failures
   * counted or pending.
   */
  #apply(key: string, openUntil: number, probeUntil: number, failures: number): void {
    const mirror = this.#mirror.get(key)
    if (mirror === undefined) {
      if (openUntil !== 0 || failures !== 0) this.#insert(key, { failures, openUntil, probeUntil, pending: 0 })
      return
    }
    mirror.failures = failures
    mirror.openUntil = openUntil
    mirror.probeUntil = probeUntil
    this.#mirror.delete(key)
    if (openUntil !== 0 || failures !== 0 || mirror.pending !== 0) this.#insert(key, mirror)
  }

  /** Adds a circuit as the newest, dropping the oldest beyond `maxCircuits`. */
  #insert(key: string, mirror: Mirror): Mirror {
    this.#mirror.set(key, mirror)
    if (this.#mirror.size > this.#maxCircuits) this.#mirror.delete(this.#mirror.keys().next().value as string)
    return mirror
  }

  /** `<state>|<openUntil>|<key>`; the key may itself contain `|`. */
  #onMessage(message: string): void {
    const first = message.indexOf('|')
    const second = message.indexOf('|', first + 1)
    if (first < 0 || second < 0) return
    const state = message.slice(0, first)
    const key = message.slice(second + 1)
    if (state === 'open') {
      const openUntil = Number(message.slice(first + 1, second))
      if (Number.isFinite(openUntil) && openUntil > 0) this.#apply(key, openUntil, 0, 0)
    } else if (state === 'closed') {
      this.#apply(key, 0, 0, 0)
    } else if (state === 'failing') {
      const mirror = this.#mirror.get(key)
      if (mirror === undefined || (mirror.openUntil === 0 && mirror.failures === 0)) this.#apply(key, 0, 0, 1)
    }
  }

  /**
   * Re-reads every mirrored circuit after the subscriber missed messages, once both connections are
   * ready; the subscription is confirmed first, so no change falls between the read and the
   * messages. A failed re-read is retried on the next ready.
   */
  async #resync(): Promise<void> {
    if (!this.#subscriberLost || this.#phase !== 'running' || this.#subscriber.status !== 'ready' || this.#client.status !== 'ready') return
    this.#subscriberLost = false
    try {
      await this.#subscriber.subscribe(this.#channel)
      const keys = [...this.#mirror.keys()]
      if (keys.length === 0) return
      // One command per circuit (not a pipeline, which Redis Cluster refuses across slots).
      const replies = await Promise.all(keys.map((key) => this.#client.hmget(this.#keyPrefix + key, 'f', 'o', 'p')))
      keys.forEach((key, index) => {
        const [f, o, p] = (replies[index] ?? []).map((value) => Number(value ?? 0)) as [number, number, number]
        this.#apply(key, o, p, f)
      })
      this.#log('info', { circuits: keys.length }, 'circuit breaker states re-read after the subscriber reconnected')
    } catch (error) {
      this.#subscriberLost = true
      this.#failed('resync', error)
    }
  }

  #failed(operation: string, error: unknown): void {
    this.#errors += 1
    const now = Date.now()
    if (now - this.#lastErrorLog < this.#errorLogIntervalMs) return
    this.#lastErrorLog = now
    const since = this.#errors - this.#errorsLogged
    this.#errorsLogged = this.#errors
    this.#log('warn', { operation, errors: this.#errors, since, error: errorMessage(error) }, 'circuit breaker cannot reach Redis; counting outcomes in this instance')
  }

  #log(level: 'info' | 'warn', fields: object, message: string): void {
    try {
      this.#logger?.[level](fields, message)
    } catch {
      // A broken logger must not break the breaker.
    }
  }
}
