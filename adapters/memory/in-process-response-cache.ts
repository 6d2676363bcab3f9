/**
 * `ResponseCache` for a single process (no Redis): an LRU bounded by the bytes it holds.
 *
 * - Every entry is charged its body, its headers, its key and a fixed overhead
 *   (`ENTRY_OVERHEAD_BYTES`); storing past `maxBytes` drops the least recently used entries (a `get`
 *   that finds an entry makes it the most recent). An entry larger than `maxBytes` on its own is
 *   not stored (and an older entry under its key is dropped, so a lookup never finds a stale one).
 * - Expiry is checked on `get` against the injected clock; expired entries found there are dropped,
 *   the others age out of the LRU as it fills.
 * - `set` copies the body into a buffer of its own: the bytes handed in may be a view on a larger
 *   socket read buffer, which would otherwise stay alive (and uncounted) as long as the entry.
 * - Nothing here waits: both calls settle at once. Never rejects.
 */
import type { CachedResponse, ResponseCache } from '../../core/ports.js'
import type { Clock, HealthStatus } from '../../core/service.js'

/** What an entry costs beyond its bytes (the map slot, the record, the header array). */
export const ENTRY_OVERHEAD_BYTES = 128

export interface InProcessResponseCacheOptions {
  /** Most bytes held (bodies, headers, keys and overhead together). */
  readonly maxBytes: number
  readonly clock?: Clock
}

interface Entry {
  readonly value: CachedResponse
  /** Epoch ms. */
  readonly expiresAt: number
  readonly size: number
}

const SYSTEM_CLOCK: Clock = { now: () => Date.now() }

export class InProcessResponseCache implements ResponseCache {
  readonly #maxBytes: number
  readonly #clock: Clock
  /** Insertion order is recency order: the first entry is the least recently used. */
  readonly #entries = new Map<string, Entry>()
  #bytes = 0
  #evicted = 0

  constructor(options: InProcessResponseCacheOptions) {
    if (!Number.isSafeInteger(options.maxBytes) || options.maxBytes < 1) throw new Error('InProcessResponseCache: maxBytes must be a positive integer')
    this.#maxBytes = options.maxBytes
    this.#clock = options.clock ?? SYSTEM_CLOCK
  }

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.#entries.clear()
    this.#bytes = 0
  }

  async health(): Promise<HealthStatus> {
    return { ok: true }
  }

  async get(key: string): Promise<CachedResponse | null> {
    const entry = this.#entries.get(key)
    if (entry === undefined) return null
    this.#entries.delete(key)
    if (entry.expiresAt <= this.#clock.now()) {
      this.#bytes -= entry.size
      return null
    }
    this.#entries.set(key, entry)
    return entry.value
  }

  async set(key: string, value: CachedResponse, maxAgeSeconds: number): Promise<void> {
    this.#drop(key)
    let size = ENTRY_OVERHEAD_BYTES + key.length * 2 + value.body.byteLength
    for (const [name, headerValue] of value.headers) size += (name.length + headerValue.length) * 2
    if (size > this.#maxBytes || !(maxAgeSeconds >= 1)) return
    const stored: CachedResponse = {
      status: value.status,
      headers: value.headers.map(([name, headerValue]) => [name, headerValue] as const),
      body: new Uint8Array(value.body),
    }
    this.#entries.set(key, { value: stored, expiresAt: this.#clock.now() + maxAgeSeconds * 1000, size })
    this.#bytes += size
    for (const [oldest, entry] of this.#entries) {
      if (this.#bytes <= this.#maxBytes) break
      this.#entries.delete(oldest)
      this.#bytes -= entry.size
      this.#evicted += 1
    }
  }

  /** What it holds now, and how many entries were dropped to stay within `maxBytes` (tests and diagnostics). */
  stats(): { readonly entries: number; readonly bytes: number; readonly evicted: number } {
    return { entries: this.#entries.size, bytes: this.#bytes, evicted: this.#evicted }
  }

  #drop(key: string): void {
    const entry = this.#entries.get(key)
    if (entry === undefined) return
    this.#entries.delete(key)
    this.#bytes -= entry.size
  }
}
