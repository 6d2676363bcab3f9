/**
 * `ResponseCache` on Redis (or Redis Cluster), shared by every gateway instance.
 *
 * - One string per entry under `gw:cache:<key>`, written with `SET … EX <max_age>`, so Redis expires
 *   it; eviction beyond that is Redis's own `maxmemory-policy` (an `allkeys-lru` server keeps the
 *   hottest replies). One key per command, so Redis Cluster needs no hash tags.
 * - The value is binary: a format byte (1), the metadata length (uint32, big-endian), the metadata
 *   as JSON (`{"s": status, "h": [[name, value], …]}`), then the body bytes unchanged. A value that
 *   does not decode (another format, a foreign key under the prefix) reads as a miss.
 * - Request-path client (adapters/redis/redis-connection.ts): a command fails at once while the
 *   connection is down and after `commandTimeoutMs` when Redis stalls, so a lookup never holds a
 *   request longer than that; the plugin then counts a miss. ioredis reconnects in the background.
 */
import type { CachedResponse, ResponseCache } from '../../core/ports.js'
import type { HealthStatus } from '../../core/service.js'
import { checkRedisUrl, clientHealth, quitRedis, recordErrors, requestPathClient, waitReady, type RedisClient } from './redis-connection.js'

/** Prefix of every key this adapter writes. */
export const RESPONSE_CACHE_PREFIX = 'gw:cache:'

const FORMAT = 1
const HEAD_BYTES = 5
const DEFAULT_COMMAND_TIMEOUT_MS = 1_000
const DEFAULT_START_TIMEOUT_MS = 10_000

export interface RedisResponseCacheOptions {
  /** `redis://` or `rediss://`; `?cluster=true` for Redis Cluster (the URL names a seed node). */
  readonly url: string
  /** A command not answered within this fails (the lookup is a miss). */
  readonly commandTimeoutMs?: number
  readonly startTimeoutMs?: number
  readonly connectionName?: string
}

/** The stored form of an entry (see the header). */
export function encodeCachedResponse(value: CachedResponse): Buffer {
  const meta = Buffer.from(JSON.stringify({ s: value.status, h: value.headers }), 'utf8')
  const out = Buffer.allocUnsafe(HEAD_BYTES + meta.length + value.body.byteLength)
  out[0] = FORMAT
  out.writeUInt32BE(meta.length, 1)
  meta.copy(out, HEAD_BYTES)
  out.set(value.body, HEAD_BYTES + meta.length)
  return out
}

/** The entry stored as `bytes`, or `null` when they are not one (another format, cut, foreign). */
export function decodeCachedResponse(bytes: Buffer): CachedResponse | null {
  if (bytes.length < HEAD_BYTES || bytes[0] !== FORMAT) return null
  const metaLength = bytes.readUInt32BE(1)
  if (HEAD_BYTES + metaLength > bytes.length) return null
  let meta: unknown
  try {
    meta = JSON.parse(bytes.toString('utf8', HEAD_BYTES, HEAD_BYTES + metaLength))
  } catch {
    return null
  }
  if (meta === null || typeof meta !== 'object') return null
  const { s: status, h: headers } = meta as { s?: unknown; h?: unknown }
  if (typeof status !== 'number' || !Number.isInteger(status) || !Array.isArray(headers)) return null
  const pairs: Array<readonly [string, string]> = []
  for (const pair of headers) {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') return null
    pairs.push([pair[0], pair[1]])
  }
  return { status, headers: pairs, body: bytes.subarray(HEAD_BYTES + metaLength) }
}

export class RedisResponseCache implements ResponseCache {
  readonly #url: string
  readonly #startTimeoutMs: number
  readonly #client: RedisClient
  #lastError: string | null = null
  #closed = false

  constructor(options: RedisResponseCacheOptions) {
    checkRedisUrl(options.url, 'RedisResponseCache')
    this.#url = options.url
    this.#startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS
    this.#client = requestPathClient(options.url, {
      connectionName: options.connectionName ?? 'gateway-response-cache',
      commandTimeoutMs: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
    })
    recordErrors(this.#client, (message) => {
      this.#lastError = message
    })
  }

  /** Connects, failing after `startTimeoutMs` with a message naming `REDIS_URL` (password masked). */
  async start(): Promise<void> {
    await waitReady(this.#client, { url: this.#url, timeoutMs: this.#startTimeoutMs, subject: 'response cache ', lastError: () => this.#lastError })
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

  async get(key: string): Promise<CachedResponse | null> {
    const bytes = await this.#client.getBuffer(RESPONSE_CACHE_PREFIX + key)
    return bytes === null ? null : decodeCachedResponse(bytes)
  }

  async set(key: string, value: CachedResponse, maxAgeSeconds: number): Promise<void> {
    if (!(maxAgeSeconds >= 1)) return
    await this.#client.set(RESPONSE_CACHE_PREFIX + key, encodeCachedResponse(value), 'EX', Math.floor(maxAgeSeconds))
  }
}
