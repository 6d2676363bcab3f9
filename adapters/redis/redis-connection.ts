/**
 * What the Redis adapters share about reaching Redis: checking and masking the URL, building a
 * client (one server, or Redis Cluster with `?cluster=true`), waiting for it at start with a
 * timeout, a health status from its state, and closing it.
 *
 * - Request-path clients (rate limiter, budget ledger) fail a command at once while disconnected
 *   (no offline queue, no retry per request) and after `commandTimeoutMs`: a request must not wait
 *   for a reconnect, its plugin applies its failure policy instead.
 * - Queueing clients (change notifier, one server only) keep commands across a reconnect.
 * - Both connect in `start()`, not on construction (boot decides when services come up), and
 *   reconnect by themselves, quickly once Redis is back (50 ms doubling to 1 s, plus jitter).
 * - Every message that names the URL masks its password.
 * - Lua scripts are loaded with SCRIPT LOAD on every primary at start and run with EVALSHA; a
 *   NOSCRIPT reply (a restarted or failed-over server, a new cluster node) falls back to EVAL,
 *   which caches the script again.
 */
import { createHash } from 'node:crypto'
import { Cluster, Redis, type RedisOptions } from 'ioredis'
import type { HealthStatus } from '../../core/service.js'

export type RedisClient = Redis | Cluster

const QUIT_TIMEOUT_MS = 2_000
const MAX_RETRY_DELAY_MS = 1_000

/** The URL with its password replaced, for messages and logs. */
export function maskRedisUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.toString()
  } catch {
    return '(unparseable URL)'
  }
}

/** Whether the URL asks for Redis Cluster (`?cluster=true`). */
export function isClusterUrl(url: string): boolean {
  try {
    return new URL(url).searchParams.get('cluster') === 'true'
  } catch {
    return false
  }
}

/** Throws (naming `owner`) unless the URL is `redis://` or `rediss://`. */
export function checkRedisUrl(url: string, owner: string): void {
  if (!/^rediss?:\/\//.test(url)) throw new Error(`${owner}: the URL must start with redis:// or rediss://`)
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/** Delay before reconnect attempt `attempt` (1-based). */
export function reconnectDelay(attempt: number): number {
  return Math.min(50 * 2 ** (attempt - 1), MAX_RETRY_DELAY_MS) + Math.floor(Math.random() * 100)
}

export interface RequestPathClientOptions {
  /** Name shown in Redis `CLIENT LIST`. */
  readonly connectionName: string
  /** A command not answered within this fails. */
  readonly commandTimeoutMs: number
}

/** A client for the request path (see the header): a `Cluster` for `?cluster=true`, else one server. */
export function requestPathClient(url: string, options: RequestPathClientOptions): RedisClient {
  const { connectionName, commandTimeoutMs: commandTimeout } = options
  if (isClusterUrl(url)) {
    const parsed = new URL(url)
    return new Cluster([{ host: parsed.hostname.replace(/^\[|\]$/g, ''), port: Number(parsed.port || 6379) }], {
      lazyConnect: true,
      enableOfflineQueue: false,
      clusterRetryStrategy: reconnectDelay,
      redisOptions: {
        connectionName,
        commandTimeout,
        maxRetriesPerRequest: 0,
        ...(parsed.username === '' ? {} : { username: decodeURIComponent(parsed.username) }),
        ...(parsed.password === '' ? {} : { password: decodeURIComponent(parsed.password) }),
        ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
      },
    })
  }
  return new Redis(url, {
    lazyConnect: true,
    // Fail at once while disconnected: a request must not wait for a reconnect.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout,
    connectionName,
    retryStrategy: reconnectDelay,
  })
}

/**
 * A one-server client whose commands wait for the reconnect instead of failing after N attempts
 * (see the header). `options` adds to (or overrides) those defaults.
 */
export function queueingClient(url: string, connectionName: string, options: RedisOptions = {}): Redis {
  return new Redis(url, { lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: reconnectDelay, connectionName, ...options })
}

/**
 * Hands every error of the client to `record`. Also keeps ioredis quiet: without an 'error'
 * listener it prints every failed reconnect attempt itself.
 */
export function recordErrors(client: RedisClient, record: (message: string) => void): void {
  client.on('error', (error: unknown) => record(errorMessage(error)))
}

export interface WaitReadyOptions {
  /** The URL, named (masked) in the error. */
  readonly url: string
  readonly timeoutMs: number
  /** Starts the error message, e.g. `rate limiter ` (`''` for none). */
  readonly subject: string
  /** The latest connection error, added to the message. */
  readonly lastError: () => string | null
}

/**
 * Connects and resolves once the client is ready. After `timeoutMs` it disconnects the client and
 * rejects with `<subject>cannot reach Redis at REDIS_URL=<masked url> within <n> ms (last error: …)`.
 */
export function waitReady(client: RedisClient, options: WaitReadyOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', onReady)
      client.disconnect()
      const lastError = options.lastError()
      const cause = lastError === null ? '' : ` (last error: ${lastError})`
      reject(new Error(`${options.subject}cannot reach Redis at REDIS_URL=${maskRedisUrl(options.url)} within ${options.timeoutMs} ms${cause}`))
    }, options.timeoutMs)
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

export interface RedisScript {
  readonly source: string
  readonly sha: string
}

export function redisScript(source: string): RedisScript {
  return { source, sha: createHash('sha1').update(source).digest('hex') }
}

/** SCRIPT LOAD of every script on every primary (the one server, or each cluster primary). */
export async function loadScripts(client: RedisClient, scripts: readonly RedisScript[]): Promise<void> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client]
  await Promise.all(nodes.flatMap((node) => scripts.map((entry) => node.script('LOAD', entry.source))))
}

/** EVALSHA, or EVAL when the server does not hold the script (see the header). */
export async function runScript(client: RedisClient, script: RedisScript, keys: readonly string[], argv: ReadonlyArray<string | number>): Promise<unknown> {
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...argv)
  } catch (error) {
    if (!errorMessage(error).startsWith('NOSCRIPT')) throw error
    return client.eval(script.source, keys.length, ...keys, ...argv)
  }
}

/** Ok while the client is ready; otherwise its state and the latest error. */
export function clientHealth(client: RedisClient, lastError: string | null): HealthStatus {
  if (client.status === 'ready') return { ok: true }
  return { ok: false, detail: `redis ${client.status}${lastError === null ? '' : `: ${lastError}`}` }
}

/** QUIT, or drop the socket when the server does not answer in time. */
export async function quitRedis(client: RedisClient): Promise<void> {
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
    // Already closing or closed: disconnect below settles it either way.
  } finally {
    clearTimeout(timer)
    client.disconnect()
  }
}
