/**
 * Rate limits (API.md §6): the limiter port and what the rate-limit plugin keeps per request.
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
import type { GatewayError } from './errors.js'
import type { Service, Token } from './ports.js'

/** One bucket: `key` is stable per (entity, rule) and carries the request's hash tag. */
export interface BucketSpec {
  readonly key: string
  /** The rule's `value`: most tokens the bucket holds. 0 refuses everything. */
  readonly capacity: number
  /** The rule's window (1 s for `rps`, 60 s for `rpm`, ...): an empty bucket is full again after it. */
  readonly windowMs: number
}

export interface BucketAcquire {
  readonly bucket: BucketSpec
  /** Taken now (1 for a `requests` rule, 0 for `tokens`). */
  readonly take: number
  /** Must be available now, on top of `take`, without being taken (the token estimate for a `tokens` rule). */
  readonly require: number
}

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
export const RateLimiter = Symbol.for('gateway:RateLimiter') as Token<RateLimiter>

/** Longest a bucket's state is kept however far below zero it went (400 days; it is then forgiven). */
export const MAX_BUCKET_TTL_MS = 400 * 86_400_000

/** What the rate-limit plugin took for one request (token buckets to charge after the reply). */
export interface RateLimitHold {
  readonly tokenBuckets: readonly BucketSpec[]
}

/**
 * Rate limits staged for the budget plugin's ledger call (see `LimitCoordination`): the buckets to
 * take, and how to answer a refusal (the rate-limit plugin's own 429, so the reply is the same
 * whichever plugin made the call). written by: rate-limit; read by: budget
 */
export interface RateLimitClaim {
  readonly acquires: readonly BucketAcquire[]
  /** The 429 for the first refusing entry of `acquires`. */
  refusal(index: number, retryAfterMs: number): GatewayError
}

/**
 * How the limit plugins share round trips, decided by the composition root. When
 * `rateLimitsRideWithBudget` is true (the budget plugin runs after rate-limit and its ledger lives
 * in the same Redis as the buckets), the rate-limit plugin does not call the limiter for a request
 * that also has usage limits (`hasUsageLimits`): it stages a `RateLimitClaim`, and the budget
 * plugin checks buckets and budgets in one ledger call (one Lua script, all or nothing).
 */
export interface LimitCoordination {
  readonly rateLimitsRideWithBudget: boolean
}
export const LimitCoordination = Symbol.for('gateway:LimitCoordination') as Token<LimitCoordination>
