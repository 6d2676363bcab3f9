/**
 * Limits (API.md §6): what rate limits and budgets share, and the one-round-trip handshake between
 * the two plugins that enforce them.
 *
 * Every request is limited by its subjects: the API key, its workspace and the virtual key it
 * names (`LimitSubject`). Rate limits are token buckets (`BucketSpec`; the `RateLimiter` port in
 * core/rate-limits.ts); budgets are counters reserved before forwarding and settled after (the
 * `BudgetLedger` port in core/budgets.ts).
 *
 * The handshake, so that all limits of a request cost one round trip (one Lua script):
 * 1. The composition root decides `LimitCoordination.rateLimitsRideWithBudget`: true when the
 *    budget plugin runs after rate-limit and its ledger lives in the same Redis as the buckets (a
 *    `CombinedLimitLedger`).
 * 2. For a request that also has usage limits (`hasUsageLimits`), the rate-limit plugin then does
 *    not call the limiter: it stages a `RateLimitClaim` in `ctx.rateLimitClaim` (the buckets to take
 *    and the 429 to give), and records its `RateLimitHold` as usual.
 * 3. The budget plugin makes one ledger call, `reserveWithBuckets`, that checks and takes the
 *    buckets and reserves the budgets all or nothing; a refused bucket answers with the claim's 429,
 *    so the reply is the same whichever plugin made the call.
 * 4. After the reply, each plugin settles its own part in `onLog` (tokens buckets charged with the
 *    real usage, budgets settled), which the terminal plugin's `onLog` filled first.
 * Without the budget plugin, without usage limits, or with limits in process, rate-limit calls its
 * limiter itself and the budget plugin its ledger. The handshake covers the request-level check
 * only: the limits of a config target's virtual key, checked per upstream attempt (`onAttempt`),
 * cost each plugin its own call.
 */
import type { RateLimitRule, UsageLimitRule } from './admin-records.js'
import type { GatewayError } from './errors.js'
import { portToken } from './service.js'

/** An entity with limits (API.md §6): an API key, a workspace or a virtual key. */
export interface LimitSubject {
  readonly kind: 'api-key' | 'workspace' | 'virtual-key'
  /** UUID of the entity. */
  readonly id: string
  /** How error messages name it, never revealing a secret (e.g. `workspace ws-team-3f9a1c`, `API key gw********abc`). */
  readonly label: string
  readonly rateLimits: readonly RateLimitRule[]
  readonly usageLimits: readonly UsageLimitRule[]
}

/** One bucket: `key` is stable per (entity, rule) and carries the request's hash tag. */
export interface BucketSpec {
  readonly key: string
  /** The rule's `value`: most tokens the bucket holds. 0 refuses everything. */
  readonly capacity: number
  /** The rule's window (1 s for `rps`, 60 s for `rpm`, ...): an empty bucket is full again after it. */
  readonly windowMs: number
}

/** One bucket of a check: what to take now, and what must be available on top of it. */
export interface BucketAcquire {
  readonly bucket: BucketSpec
  /** Taken now (1 for a `requests` rule, 0 for `tokens`). */
  readonly take: number
  /** Must be available now, on top of `take`, without being taken (the token estimate for a `tokens` rule). */
  readonly require: number
}

/** What the rate-limit plugin took for one request (token buckets to charge after the reply). */
export interface RateLimitHold {
  readonly tokenBuckets: readonly BucketSpec[]
}

/**
 * Rate limits staged for the budget plugin's ledger call (step 2 of the handshake above): the
 * buckets to take, and how to answer a refusal (the rate-limit plugin's own 429, so the reply is
 * the same whichever plugin made the call). written by: rate-limit; read by: budget
 */
export interface RateLimitClaim {
  readonly acquires: readonly BucketAcquire[]
  /** The 429 for the first refusing entry of `acquires`. */
  refusal(index: number, retryAfterMs: number): GatewayError
}

/** Step 1 of the handshake above, decided once by the composition root. */
export interface LimitCoordination {
  readonly rateLimitsRideWithBudget: boolean
}
export const LimitCoordination = portToken<LimitCoordination>('LimitCoordination')

/** What `hasUsageLimits` reads of a request (a `RequestContext` is one). */
export interface LimitedRequest {
  readonly method: string
  readonly principal: { readonly limitSubjects: readonly LimitSubject[] } | null
  readonly virtualKey: LimitSubject | null
}

/**
 * Whether the budget plugin reserves for this request: an authenticated, non-GET request whose
 * API key, workspace or virtual key has usage limits. The rate-limit plugin asks it too (step 2 of
 * the handshake above).
 */
export function hasUsageLimits(request: LimitedRequest): boolean {
  const principal = request.principal
  if (principal === null || request.method === 'GET') return false
  if (request.virtualKey !== null && request.virtualKey.usageLimits.length > 0) return true
  for (const subject of principal.limitSubjects) if (subject.usageLimits.length > 0) return true
  return false
}
