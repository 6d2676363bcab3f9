/**
 * Rate limits (API.md §6): the limiter port. What rate limits share with budgets (buckets, holds, the
 * one-round-trip handshake) is in core/limits.ts.
 *
 * Token buckets: capacity `value`, refilled continuously at `value / window` (a bucket that is not
 * touched is full). `requests` rules take 1 before forwarding; `tokens` rules require the request's
 * estimate (`max_tokens`) to be available before forwarding without taking it, and are charged the
 * real usage after the reply, which may drive them below zero (later requests then wait). All
 * buckets of one request are checked in one call, all or nothing: when one bucket refuses, no
 * bucket changes.
 *
 * Redis Cluster runs a script only on keys of one hash slot, so every key of one `acquire` or
 * `charge` call carries the same hash tag: the plugin uses `{<workspace UUID>}` (every entity of
 * one request, API key, workspace and virtual key, belongs to one workspace).
 */
import type { BucketAcquire, BucketSpec } from './limits.js'
import { portToken, type Service } from './service.js'

/**
 * `index` is the first refusing entry of the `acquire` call; `retryAfterMs` is how long until that
 * bucket holds `take + require` again (a full window when it never can: the demand exceeds the
 * capacity).
 */
export type RateLimitDecision =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly index: number; readonly retryAfterMs: number }

/**
 * Where buckets live: Redis (one Lua script per call, so one round trip) or in process. `acquire`
 * is all or nothing: a bucket refuses when it holds fewer than `take + require` tokens, and then
 * none is changed. `nowMs` is the caller's clock (buckets never move back in time when instances
 * disagree slightly). Both methods reject when the store cannot be reached; the plugin applies its
 * fail-open or fail-closed policy. Bucket state may be dropped after two windows without use, or
 * once it would have refilled completely, whichever is later (at most `MAX_BUCKET_TTL_MS`).
 */
export interface RateLimiter extends Service {
  acquire(requests: readonly BucketAcquire[], nowMs: number): Promise<RateLimitDecision>
  /** Takes real usage after the reply; a bucket may go below zero (later requests wait). */
  charge(charges: ReadonlyArray<{ readonly bucket: BucketSpec; readonly amount: number }>, nowMs: number): Promise<void>
}
export const RateLimiter = portToken<RateLimiter>('RateLimiter')

/** Longest a bucket's state is kept however far below zero it went (400 days; it is then forgiven). */
export const MAX_BUCKET_TTL_MS = 400 * 86_400_000
