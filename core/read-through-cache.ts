/**
 * The read-through cache every in-process cache of store records uses (API keys, virtual keys, the
 * JWT verifier's organisations, workspaces and tokens; prompts and configs next), so each one has
 * the same shape and the same answers to the same races:
 *
 * - **Fresh hits are synchronous.** `get(key, now)` is one Map lookup and one comparison, allocates
 *   nothing, and answers the value only while it is fresh. A plugin returns a plain value on a hit
 *   and reaches for a promise only on a miss (core/pipeline.ts runs a plain value without `await`).
 * - **One load per key at a time.** `load(key, loader)` after a miss: concurrent misses of one key
 *   share one loader call, so a flood of one unknown key (or a cold cache under load) costs one
 *   store query, and then one per negative-cache window.
 * - **Freshness per entry.** `freshUntil(value, now)` says until when a value loaded at `now` is
 *   fresh: e.g. shorter for "not found" (`ttlFreshness`), or a token's `exp`. A value whose time is
 *   not after `now` is not kept (an error answer, a TTL of 0), and drops the key's older entry.
 * - **Bounded.** At most `maxEntries`; when full, the entry loaded longest ago goes first.
 * - **Stale on store error.** With `staleOnError` set, a load whose loader rejects answers with the
 *   key's kept entry past its freshness (the store is down: a key that worked a minute ago keeps
 *   working), and `staleOnError` is told why, once per failed load. Without a kept entry, or with
 *   `staleOnError` null, the rejection goes to every caller of that load. Nothing is kept either way.
 * - **Revocation races.** `evict(key)`, `evictWhere(pred)` and `clear()` drop entries and detach
 *   loads in flight (`evict(key)`: that key's; the others: every load, since which record a running
 *   load returns is unknown until it does). A detached load still answers the callers that joined
 *   it (they asked before the change), but its value is neither kept nor handed to callers that
 *   come later: they start a load of their own. Without this, a key revoked during a slow lookup
 *   was put back in the cache for its whole TTL. The guard is the load's identity in the table of
 *   loads in flight, a per-key generation that costs no counter.
 *
 * Values must not be `undefined` (`get` answers `undefined` for a miss): remember "not found" as
 * `null` or as a value of its own.
 */
import type { Clock } from './service.js'

export interface ReadThroughCacheOptions<V> {
  /** Most entries kept (at least 1); when full, the entry loaded longest ago is dropped. */
  readonly maxEntries: number
  /**
   * Until when (epoch ms) `value`, loaded at `now`, is fresh. At or before `now`: not kept (an
   * answer that must not be cached, or a TTL of 0).
   */
  readonly freshUntil: (value: V, now: number) => number
  /**
   * `null`: a failed load rejects. Else a failed load answers with the key's kept entry, past its
   * freshness, when there is one, and this is called with the loader's error (to log it).
   */
  readonly staleOnError: ((error: unknown) => void) | null
  /** Reads the time a load settles at (freshness starts then). */
  readonly clock: Clock
}

/** Freshness by TTL: `negativeTtlMs` for `null` ("not found"), `ttlMs` for anything else. */
export function ttlFreshness(ttlMs: number, negativeTtlMs: number): (value: unknown, now: number) => number {
  return (value, now) => now + (value === null ? negativeTtlMs : ttlMs)
}

interface Entry<V> {
  readonly value: V
  readonly freshUntil: number
}

export class ReadThroughCache<K, V> {
  readonly #entries = new Map<K, Entry<V>>()
  /** Loads in flight; a load is kept (and shared) only while it is still the one listed here. */
  readonly #loads = new Map<K, Promise<V>>()
  readonly #maxEntries: number
  readonly #freshUntil: (value: V, now: number) => number
  readonly #staleOnError: ((error: unknown) => void) | null
  readonly #clock: Clock

  constructor(options: ReadThroughCacheOptions<V>) {
    if (!(options.maxEntries >= 1)) throw new Error('ReadThroughCache: maxEntries must be at least 1')
    this.#maxEntries = options.maxEntries
    this.#freshUntil = options.freshUntil
    this.#staleOnError = options.staleOnError
    this.#clock = options.clock
  }

  /** The value of `key` while it is fresh at `now`, else `undefined`. Synchronous, no allocation. */
  get(key: K, now: number): V | undefined {
    const entry = this.#entries.get(key)
    return entry !== undefined && entry.freshUntil > now ? entry.value : undefined
  }

  /** The kept value of `key`, fresh or not (what an eviction is about to drop), else `undefined`. */
  peek(key: K): V | undefined {
    return this.#entries.get(key)?.value
  }

  /**
   * Loads `key` (call it after `get` missed): joins the load of `key` in flight, else calls
   * `loader(key)` and keeps what it answers, unless an eviction detached it meanwhile. When the
   * loader rejects: the stale entry (see `staleOnError`), else the rejection.
   */
  load(key: K, loader: (key: K) => Promise<V>): Promise<V> {
    const running = this.#loads.get(key)
    if (running !== undefined) return running
    let started: Promise<V>
    try {
      started = loader(key)
    } catch (error) {
      started = Promise.reject(error)
    }
    const load: Promise<V> = started.then(
      (value) => {
        if (this.#loads.get(key) === load) {
          this.#loads.delete(key)
          this.#keep(key, value)
        }
        return value
      },
      (error: unknown) => {
        if (this.#loads.get(key) === load) this.#loads.delete(key)
        return this.#staleOr(key, error)
      },
    )
    this.#loads.set(key, load)
    return load
  }

  /** Drops `key` and detaches its load in flight (a change notice for that one record). */
  evict(key: K): void {
    this.#loads.delete(key)
    this.#entries.delete(key)
  }

  /** Drops every entry `matches` and detaches every load in flight (their records are not known yet). */
  evictWhere(matches: (value: V, key: K) => boolean): void {
    this.#loads.clear()
    for (const [key, entry] of this.#entries) if (matches(entry.value, key)) this.#entries.delete(key)
  }

  /** Drops everything and detaches every load in flight. */
  clear(): void {
    this.#loads.clear()
    this.#entries.clear()
  }

  /** Entries kept (fresh or stale). */
  get size(): number {
    return this.#entries.size
  }

  #keep(key: K, value: V): void {
    const now = this.#clock.now()
    const freshUntil = this.#freshUntil(value, now)
    // Re-inserted rather than overwritten, so the bound drops the entry loaded longest ago; and an
    // answer that is not kept must not leave an older one behind to be served stale later.
    this.#entries.delete(key)
    if (!(freshUntil > now)) return
    if (this.#entries.size >= this.#maxEntries) {
      // Maps iterate in insertion order: the first key is the oldest.
      const oldest = this.#entries.keys().next()
      if (!oldest.done) this.#entries.delete(oldest.value)
    }
    this.#entries.set(key, { value, freshUntil })
  }

  #staleOr(key: K, error: unknown): V {
    const stale = this.#entries.get(key)
    if (stale === undefined || this.#staleOnError === null) throw error
    try {
      this.#staleOnError(error)
    } catch {
      // A broken logger must not turn a store outage the stale entry covers into refusals.
    }
    return stale.value
  }
}
