/**
 * rate-limit: `rate_limits` of the API key, its workspace and the virtual key (API.md §6).
 * Phases: onAccess (priority 700: after auth, scope-check and virtual-key, before budget; the body is
 * parsed, so `tokens` rules see `max_tokens`), onAttempt / onAttemptEnd (a config target's virtual
 * key, per upstream attempt: after virtual-key resolved it, before budget), onLog (charges the real
 * token usage; it runs after forward's onLog filled `ctx.usage`, the terminal plugin's onLog running
 * first).
 * Reads `ctx.principal.limitSubjects`, `ctx.virtualKey`, `ctx.body` (or `ctx.rawBody` on
 * pass-through), `ctx.usage`, `ctx.target`, `ctx.attempt`; per attempt `attempt.virtualKey`,
 * `attempt.body` (or `attempt.rawBody`); writes `ctx.rateLimitHold`, `ctx.rateLimitClaim` and
 * `attempt.rateLimitHold`.
 * Per attempt (a request routed by a config): the API key's and workspace's buckets are taken once,
 * in onAccess, as for any request; the target's virtual key's buckets are taken for each attempt it
 * serves, in onAttempt, with its own limiter call (the `LimitCoordination` handshake covers the
 * request-level call only), refused → 429 for that attempt (the router counts it as a failed attempt
 * and may fall back to another target). onAttemptEnd drops the attempt's hold: an attempt that is
 * not the reply used no tokens, so its `tokens` buckets are charged nothing (its `requests` take
 * stays: the attempt was made). The served attempt (`ctx.attempt`) is charged the real usage in
 * onLog with the request's buckets, in the same limiter call; a cache hit reports no usage and is
 * charged no tokens.
 * Without auth (no principal) there is nothing to limit and every request passes.
 * Rules: one token bucket per (entity, rule), capacity `value`, refilled over the unit's window.
 * `requests` rules take 1; `tokens` rules need `max_tokens` (or `max_completion_tokens`, default 1)
 * available, and are charged `usage.totalTokens` after the reply (only when the request reached a
 * provider, so cache hits are free). A rule with value 0 blocks. Refused → 429 `GW_RATE_LIMITED`
 * with `Retry-After` (seconds) and the entity named by its masked label.
 * I/O: at most one limiter call per request (one Redis round trip: a Lua script checks every bucket,
 * all or nothing), none when no subject has rules; the charge is one more call after the reply,
 * off the request path, only for `tokens` rules. When `LimitCoordination.rateLimitsRideWithBudget`
 * is set and the request also has usage limits, none at all: the buckets are staged in
 * `ctx.rateLimitClaim` and the budget plugin checks them in its own ledger call (then a ledger
 * failure answers 503 under the budget's fail-closed policy, whatever `failMode` says).
 * Failure policy: by config. When the limiter fails, `failMode: open` (default) lets the request
 * pass, `closed` answers 503 `GW_RATE_LIMIT_UNAVAILABLE`; a failed charge is dropped. Every failure
 * is counted (`stats()`) and logged at warn (at most one line per 10 s, with the count).
 */
import type { Attempt, JsonObject, RequestContext, Usage } from '../../core/context.js'
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import {
  hasUsageLimits,
  type BucketAcquire,
  type BucketSpec,
  type LimitCoordination,
  type LimitSubject,
  type RateLimitHold,
} from '../../core/limits.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import type { RateLimitDecision, RateLimiter } from '../../core/rate-limits.js'
import type { Clock, Logger } from '../../core/service.js'
import {
  compileRules,
  refusalMessage,
  retryAfterSeconds,
  tokenEstimate,
  tokenEstimateOfRaw,
  type CompiledRule,
} from './buckets.js'
import type { RateLimitConfig } from './config.js'

/** Counters since start (the plugin has no metrics registry of its own). */
export interface RateLimitStats {
  /** Requests refused with 429. */
  readonly refused: number
  /** Limiter calls that failed before forwarding (each passed or got 503 per `failMode`). */
  readonly acquireErrors: number
  /** Usage charges that failed after the reply (that usage was not counted). */
  readonly chargeErrors: number
}

const FAILURE_LOG_INTERVAL_MS = 10_000

interface Compiled {
  readonly tag: string
  readonly rules: readonly CompiledRule[]
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

export class RateLimitPlugin implements GatewayPlugin {
  readonly #failClosed: boolean
  readonly #limiter: RateLimiter
  readonly #clock: Clock
  readonly #logger: Logger
  readonly #rideWithBudget: boolean
  /** Subjects are cached with their principal (auth, virtual-key), so their buckets are built once. */
  readonly #compiled = new WeakMap<LimitSubject, Compiled>()
  #refused = 0
  #acquireErrors = 0
  #chargeErrors = 0
  #nextFailureLog = 0
  #unloggedFailures = 0

  constructor(config: RateLimitConfig, limiter: RateLimiter, clock: Clock, logger: Logger, coordination: LimitCoordination = { rateLimitsRideWithBudget: false }) {
    this.#failClosed = config.failMode === 'closed'
    this.#limiter = limiter
    this.#clock = clock
    this.#logger = logger
    this.#rideWithBudget = coordination.rateLimitsRideWithBudget
  }

  stats(): RateLimitStats {
    return { refused: this.#refused, acquireErrors: this.#acquireErrors, chargeErrors: this.#chargeErrors }
  }

  async onAccess(ctx: RequestContext): Promise<GatewayError | undefined> {
    const principal = ctx.principal
    if (principal === null) return undefined
    const subjects = principal.limitSubjects
    const virtualKey = ctx.virtualKey
    // Hot path: most requests carry no rules at all and must not reach the limiter.
    let any = virtualKey !== null && virtualKey.rateLimits.length > 0
    for (let i = 0; !any && i < subjects.length; i++) any = (subjects[i] as LimitSubject).rateLimits.length > 0
    if (!any) return undefined

    // Every subject of a request belongs to the caller's workspace, so its UUID is the one hash tag
    // of the request. An Admin API key gets here only on a pass-through path without a provider
    // selection (forward then answers 400); it has no workspace, so its key id is the tag.
    const tag = principal.workspaceId ?? principal.keyId
    const rules: CompiledRule[] = []
    for (const subject of subjects) if (subject.rateLimits.length > 0) rules.push(...this.#rulesOf(subject, tag))
    if (virtualKey !== null && virtualKey.rateLimits.length > 0) rules.push(...this.#rulesOf(virtualKey, tag))

    let estimate = 0
    const requests: BucketAcquire[] = new Array(rules.length)
    let tokenBuckets: BucketSpec[] | null = null
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i] as CompiledRule
      if (rule.type === 'requests') {
        requests[i] = { bucket: rule.bucket, take: 1, require: 0 }
      } else {
        if (estimate === 0) estimate = ctx.body !== null ? tokenEstimate(ctx.body) : tokenEstimateOfRaw(ctx.rawBody, ctx.headers['content-type'])
        requests[i] = { bucket: rule.bucket, take: 0, require: estimate }
        ;(tokenBuckets ??= []).push(rule.bucket)
      }
    }

    // Only with a workspace: the budget counters' hash tag is then the buckets' tag (one Cluster slot).
    if (this.#rideWithBudget && principal.workspaceId !== null && hasUsageLimits(ctx)) {
      ctx.rateLimitClaim = {
        acquires: requests,
        refusal: (index, retryAfterMs) => this.#refuse(rules[index] as CompiledRule, estimate, retryAfterMs),
      }
      if (tokenBuckets !== null) ctx.rateLimitHold = { tokenBuckets }
      return undefined
    }

    let decision: RateLimitDecision
    try {
      decision = await this.#limiter.acquire(requests, this.#clock.now())
    } catch (error) {
      this.#acquireErrors++
      this.#noteFailure('acquire', error)
      return this.#failClosed ? gatewayError(ERRORS.GW_RATE_LIMIT_UNAVAILABLE) : undefined
    }
    if (!decision.allowed) return this.#refuse(rules[decision.index] as CompiledRule, estimate, decision.retryAfterMs)
    if (tokenBuckets !== null) ctx.rateLimitHold = { tokenBuckets }
    return undefined
  }

  #refuse(rule: CompiledRule, estimate: number, retryAfterMs: number): GatewayError {
    this.#refused++
    return gatewayError(ERRORS.GW_RATE_LIMITED, refusalMessage(rule, estimate), {
      headers: [['retry-after', String(retryAfterSeconds(retryAfterMs))]],
    })
  }

  /** The target's virtual key's buckets for one attempt of a config-routed request. */
  onAttempt(ctx: RequestContext, attempt: Attempt): GatewayError | undefined | Promise<GatewayError | undefined> {
    const virtualKey = attempt.virtualKey
    const principal = ctx.principal
    if (virtualKey === null || virtualKey.rateLimits.length === 0 || principal === null) return undefined
    // The virtual key belongs to the caller's workspace (virtual-key checked it): the request's hash tag.
    const rules = this.#rulesOf(virtualKey, principal.workspaceId ?? principal.keyId)
    const body: JsonObject | null = attempt.body ?? ctx.body
    let estimate = 0
    const requests: BucketAcquire[] = new Array(rules.length)
    let tokenBuckets: BucketSpec[] | null = null
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i] as CompiledRule
      if (rule.type === 'requests') {
        requests[i] = { bucket: rule.bucket, take: 1, require: 0 }
      } else {
        if (estimate === 0) estimate = body !== null ? tokenEstimate(body) : tokenEstimateOfRaw(attempt.rawBody ?? ctx.rawBody, ctx.headers['content-type'])
        requests[i] = { bucket: rule.bucket, take: 0, require: estimate }
        ;(tokenBuckets ??= []).push(rule.bucket)
      }
    }
    return this.#acquireForAttempt(attempt, rules, requests, tokenBuckets, estimate)
  }

  async #acquireForAttempt(
    attempt: Attempt,
    rules: readonly CompiledRule[],
    requests: readonly BucketAcquire[],
    tokenBuckets: BucketSpec[] | null,
    estimate: number,
  ): Promise<GatewayError | undefined> {
    let decision: RateLimitDecision
    try {
      decision = await this.#limiter.acquire(requests, this.#clock.now())
    } catch (error) {
      this.#acquireErrors++
      this.#noteFailure('acquire', error)
      return this.#failClosed ? gatewayError(ERRORS.GW_RATE_LIMIT_UNAVAILABLE) : undefined
    }
    if (!decision.allowed) return this.#refuse(rules[decision.index] as CompiledRule, estimate, decision.retryAfterMs)
    if (tokenBuckets !== null) attempt.rateLimitHold = { tokenBuckets }
    return undefined
  }

  /** Not the reply: no tokens were used, so the `tokens` buckets are charged nothing. */
  onAttemptEnd(_ctx: RequestContext, attempt: Attempt): void {
    attempt.rateLimitHold = null
  }

  /** `ctx.usage` is final here: the terminal plugin's onLog (forward's) ran first (core/plugin.ts). */
  onLog(ctx: RequestContext): void {
    const hold = ctx.rateLimitHold
    const attempt = ctx.attempt
    const attemptHold = attempt === null ? null : attempt.rateLimitHold
    if (hold === null && attemptHold === null) return
    const usage = ctx.usage
    // No provider call (a cache hit, an error before forwarding) or no reported usage: nothing to charge.
    if (usage === null || ctx.target === null || !(usage.totalTokens > 0) || attempt?.cacheStatus === 'HIT') return
    this.#charge(hold === null ? (attemptHold as RateLimitHold).tokenBuckets : attemptHold === null ? hold.tokenBuckets : [...hold.tokenBuckets, ...attemptHold.tokenBuckets], usage)
  }

  /** One limiter call for every bucket of the request (one hash tag: the caller's workspace). */
  #charge(buckets: readonly BucketSpec[], usage: Usage): void {
    const amount = usage.totalTokens
    this.#limiter
      .charge(buckets.map((bucket) => ({ bucket, amount })), this.#clock.now())
      .catch((error: unknown) => {
        this.#chargeErrors++
        this.#noteFailure('charge', error)
      })
  }

  #rulesOf(subject: LimitSubject, tag: string): readonly CompiledRule[] {
    const cached = this.#compiled.get(subject)
    if (cached !== undefined && cached.tag === tag) return cached.rules
    const rules = compileRules(subject, tag)
    this.#compiled.set(subject, { tag, rules })
    return rules
  }

  /** Logs a limiter failure, at most once per interval (an outage would otherwise log every request). */
  #noteFailure(operation: 'acquire' | 'charge', error: unknown): void {
    const now = this.#clock.now()
    if (now < this.#nextFailureLog) {
      this.#unloggedFailures++
      return
    }
    this.#nextFailureLog = now + FAILURE_LOG_INTERVAL_MS
    const suppressed = this.#unloggedFailures
    this.#unloggedFailures = 0
    const effect =
      operation === 'charge' ? 'token usage not charged' : this.#failClosed ? 'requests refused with 503 (failMode closed)' : 'requests pass unlimited (failMode open)'
    try {
      this.#logger.warn(
        { operation, error: errorMessage(error), acquireErrors: this.#acquireErrors, chargeErrors: this.#chargeErrors, suppressed },
        `rate limiter unavailable: ${effect}`,
      )
    } catch {
      // A broken logger must not turn a limiter outage into failed requests.
    }
  }
}
