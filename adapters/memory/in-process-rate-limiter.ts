/**
 * `RateLimiter` in process: the embedded default when no `REDIS_URL` is set. Same token-bucket
 * semantics as the Redis adapter (see core/rate-limits.ts), in one synchronous `Map`, so every call
 * is atomic by construction. Limits hold per process only: several gateway processes need Redis.
 *
 * Memory: a bucket is dropped once it would have refilled completely and two windows passed without
 * use (an absent bucket reads as full, so dropping it changes nothing); a sweep runs at most once a
 * minute, from the calls themselves (no timer keeps the process alive).
 */
import type { BucketAcquire, BucketSpec } from '../../core/limits.js'
import { MAX_BUCKET_TTL_MS, type RateLimitDecision, type RateLimiter } from '../../core/rate-limits.js'
import type { HealthStatus } from '../../core/service.js'

/** A bucket's stored state: `tokens` at time `ts` (epoch ms). */
export interface BucketState {
  readonly tokens: number
  readonly ts: number
}

/**
 * The bucket at `nowMs`: refilled at `capacity / windowMs` per ms since `ts`, never above capacity
 * (also when the capacity was lowered); a missing bucket is full. Time never runs backwards: a
 * `nowMs` before `ts` (another instance's clock) refills nothing.
 */
export function refillBucket(state: BucketState | undefined, bucket: BucketSpec, nowMs: number): BucketState {
  if (state === undefined) return { tokens: bucket.capacity, ts: nowMs }
  if (nowMs <= state.ts) return { tokens: Math.min(state.tokens, bucket.capacity), ts: state.ts }
  const refilled = bucket.capacity > 0 ? state.tokens + ((nowMs - state.ts) * bucket.capacity) / bucket.windowMs : state.tokens
  return { tokens: Math.min(refilled, bucket.capacity), ts: nowMs }
}

/**
 * How long until a bucket holding `tokens` holds `need`: 0 when it already does, a full window
 * when it never can (`need` above the capacity, or a zero capacity).
 */
export function bucketWaitMs(tokens: number, need: number, bucket: BucketSpec): number {
  if (tokens >= need) return 0
  if (need > bucket.capacity || bucket.capacity <= 0) return bucket.windowMs
  return Math.ceil(((need - tokens) * bucket.windowMs) / bucket.capacity)
}

/** How long a bucket must be kept: until it is full again, and at least two windows (at most `MAX_BUCKET_TTL_MS`). */
export function bucketTtlMs(tokens: number, bucket: BucketSpec): number {
  const untilFull = bucket.capacity > 0 ? Math.ceil(((bucket.capacity - tokens) * bucket.windowMs) / bucket.capacity) : 0
  return Math.min(Math.max(2 * bucket.windowMs, untilFull), MAX_BUCKET_TTL_MS)
}

interface Entry extends BucketState {
  readonly expiresAt: number
}

const SWEEP_EVERY_MS = 60_000
const ALLOWED: RateLimitDecision = Object.freeze({ allowed: true })

export class InProcessRateLimiter implements RateLimiter {
  readonly #buckets = new Map<string, Entry>()
  #nextSweep = 0

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.#buckets.clear()
  }

  async health(): Promise<HealthStatus> {
    return { ok: true }
  }

  /** Number of buckets held (tests and diagnostics). */
  get size(): number {
    return this.#buckets.size
  }

  acquire(requests: readonly BucketAcquire[], nowMs: number): Promise<RateLimitDecision> {
    return Promise.resolve(this.acquireNow(requests, nowMs))
  }

  charge(charges: ReadonlyArray<{ readonly bucket: BucketSpec; readonly amount: number }>, nowMs: number): Promise<void> {
    this.chargeNow(charges, nowMs)
    return Promise.resolve()
  }

  /** `acquire`, synchronously. */
  acquireNow(requests: readonly BucketAcquire[], nowMs: number): RateLimitDecision {
    this.#sweep(nowMs)
    // Pending states, so a bucket named twice in one call sees its own first take.
    let pending: Map<string, BucketState> | null = null
    for (let index = 0; index < requests.length; index++) {
      const { bucket, take, require } = requests[index] as BucketAcquire
      const state = refillBucket(pending?.get(bucket.key) ?? this.#buckets.get(bucket.key), bucket, nowMs)
      const need = take + require
      if (state.tokens < need) return { allowed: false, index, retryAfterMs: bucketWaitMs(state.tokens, need, bucket) }
      pending ??= new Map()
      pending.set(bucket.key, { tokens: state.tokens - take, ts: state.ts })
    }
    for (const { bucket } of requests) this.#store(bucket, pending?.get(bucket.key) as BucketState)
    return ALLOWED
  }

  /** `charge`, synchronously. */
  chargeNow(charges: ReadonlyArray<{ readonly bucket: BucketSpec; readonly amount: number }>, nowMs: number): void {
    this.#sweep(nowMs)
    for (const { bucket, amount } of charges) {
      const state = refillBucket(this.#buckets.get(bucket.key), bucket, nowMs)
      this.#store(bucket, { tokens: state.tokens - amount, ts: state.ts })
    }
  }

  /** The stored state of a bucket (tests). */
  peek(key: string): BucketState | undefined {
    const entry = this.#buckets.get(key)
    return entry === undefined ? undefined : { tokens: entry.tokens, ts: entry.ts }
  }

  #store(bucket: BucketSpec, state: BucketState): void {
    this.#buckets.set(bucket.key, { tokens: state.tokens, ts: state.ts, expiresAt: state.ts + bucketTtlMs(state.tokens, bucket) })
  }

  #sweep(nowMs: number): void {
    if (nowMs < this.#nextSweep) return
    this.#nextSweep = nowMs + SWEEP_EVERY_MS
    for (const [key, entry] of this.#buckets) if (entry.expiresAt <= nowMs) this.#buckets.delete(key)
  }
}
