/**
 * budget: `usage_limits` (API.md §6) of the API key, its workspace and the virtual key.
 * Phases: onAccess (priority 600), onAttempt / onAttemptEnd (a config target's virtual key, per
 * upstream attempt: after virtual-key and rate-limit), onLog (settles with the real usage: forward's
 * onLog, the terminal plugin's, ran first and filled `ctx.usage`); start/close (usage pruning).
 * Reads `ctx.principal.limitSubjects`, `ctx.virtualKey`, `ctx.route`, `ctx.rawBody`/`ctx.body`,
 * `ctx.credential`, per attempt `attempt.virtualKey`, `attempt.credential`, `attempt.target`,
 * `attempt.body`/`attempt.rawBody`, and after the reply `ctx.usage`, `ctx.model`, `ctx.target`,
 * `ctx.status`, `ctx.attempt`, `ctx.attempts`; writes `ctx.budgetHold` (onAccess) and
 * `attempt.budgetHold` (onAttempt; cleared once settled or released).
 * Per attempt (a request routed by a config): the API key's and workspace's limits are reserved once,
 * in onAccess, as for any request; the target's virtual key's limits are reserved for each attempt
 * it serves, in onAttempt (its own ledger call; the worst case priced for the attempt's provider and
 * body, `override_params` included), exhausted → 412 for that attempt (the router counts it as a
 * failed attempt and may fall back to another target). onAttemptEnd releases the reservation (settled
 * at 0: the attempt is not the reply); the served attempt (`ctx.attempt`) is settled in onLog with the
 * real cost, as the request's own reservation is. An attempt still holding a reservation in onLog that
 * was not the reply (the router gave up on it without ending it) is released there. A served cache
 * hit (`cacheStatus` `HIT`) costs nothing: the request's and the attempt's reservations settle at 0.
 * I/O: one ledger call per request before forwarding (Redis: one Lua script, which also checks the
 * rate limits staged by the rate-limit plugin in `ctx.rateLimitClaim`), plus a seeding round
 * trip to the usage store the first time a counter is used after a restart or a Redis flush; after
 * the reply, one ledger call to settle, and batched usage-store writes (book.ts). Alerts go to the
 * admin store's audit log (`resource_type` `budget`, actions `alert` and `exhausted`). Off the
 * request path, at start and every `usagePruneIntervalMs` (an unref'd timer, stopped by close), the
 * persisted counters of periods that ended more than `usageRetentionDays` ago are deleted
 * (`BudgetBook.prune`); a failure there is logged and retried at the next tick.
 * Policy: before forwarding, the worst case (estimate.ts, priced with the price table) is reserved
 * on every counter at once; a counter whose usage plus in-flight reservations reached its limit
 * refuses with 412 `budget_exceeded_error` naming the entity. After the reply the reservation is
 * replaced by the real amount: the reported usage priced per model; 0 when the provider did not
 * answer successfully; the reservation itself when a successful reply reported no usage (a stream
 * without `stream_options.include_usage`), since the real use is unknown. Models without a price
 * cost 0 and are counted (`stats().unpricedRequests`). GET requests are not limited.
 * Failure policy: fails closed: 503 `GW_BUDGET_UNAVAILABLE` when the ledger (or, when seeding, the
 * usage store) cannot be reached. Settling never changes the reply; a failure there is logged.
 */
import { randomUUID } from 'node:crypto'
import { costNanoUsd, worstCaseNanoUsd, type BudgetHold, type BudgetHoldItem, type PriceTable } from '../../core/budgets.js'
import type { Attempt, JsonObject, Principal, RequestContext, Usage } from '../../core/context.js'
import { ERRORS, gatewayError, GatewayError } from '../../core/errors.js'
import { hasUsageLimits, type LimitSubject, type RateLimitClaim } from '../../core/limits.js'
import type { GatewayPlugin } from '../../core/plugin.js'
import type { AdminStore } from '../../core/ports.js'
import type { Clock, Logger } from '../../core/service.js'
import type { BudgetBook } from './book.js'
import type { BudgetConfig } from './config.js'
import { formatAmount, fromCounterUnit, toCounterUnit } from './cost.js'
import { estimateRequest, type RequestEstimate } from './estimate.js'
import { DAY_MS } from './periods.js'

export interface BudgetPluginDeps {
  readonly config: BudgetConfig
  readonly book: BudgetBook
  readonly prices: PriceTable
  /** Where alerts are recorded (the audit log). */
  readonly store: AdminStore
  readonly clock: Clock
  readonly logger: Logger
}

export interface BudgetStats {
  /** Requests whose model has no price (charged 0 on cost limits). */
  readonly unpricedRequests: number
}

/** An attempt reserves for its virtual key only (the request's own subjects reserved in onAccess). */
const NO_SUBJECTS: readonly LimitSubject[] = []

/** Distinct unpriced models logged at debug level before the log goes quiet. */
const LOGGED_UNPRICED_LIMIT = 1_000
/** Failures of one kind are logged at most once per interval, with how many happened since. */
const FAILURE_LOG_INTERVAL_MS = 10_000

function modelOf(body: JsonObject | null): string | null {
  return body !== null && typeof body.model === 'string' && body.model.length > 0 ? body.model : null
}

export class BudgetPlugin implements GatewayPlugin {
  readonly #config: BudgetConfig
  readonly #book: BudgetBook
  readonly #prices: PriceTable
  readonly #store: AdminStore
  readonly #clock: Clock
  readonly #logger: Logger
  readonly #inFlight = new Set<Promise<void>>()
  readonly #loggedUnpriced = new Set<string>()
  readonly #failures = new Map<string, { count: number; loggedAt: number }>()
  #unpricedRequests = 0
  #pruneTimer: NodeJS.Timeout | null = null
  #pruning: Promise<void> | null = null

  constructor(deps: BudgetPluginDeps) {
    this.#config = deps.config
    this.#book = deps.book
    this.#prices = deps.prices
    this.#store = deps.store
    this.#clock = deps.clock
    this.#logger = deps.logger
  }

  stats(): BudgetStats {
    return { unpricedRequests: this.#unpricedRequests }
  }

  async onAccess(ctx: RequestContext): Promise<GatewayError | undefined> {
    // The same test the rate-limit plugin uses to stage its claim for this call: they must agree.
    if (!hasUsageLimits(ctx)) return undefined
    const principal = ctx.principal as Principal
    const provider = ctx.credential?.provider ?? ctx.headers['x-gateway-provider'] ?? null
    const hold = await this.#reserve(principal, principal.limitSubjects, ctx.virtualKey, ctx, provider, ctx.rateLimitClaim)
    if (hold instanceof GatewayError) return hold
    ctx.budgetHold = hold
    return undefined
  }

  /** The target's virtual key's usage limits for one attempt of a config-routed request. */
  onAttempt(ctx: RequestContext, attempt: Attempt): GatewayError | undefined | Promise<GatewayError | undefined> {
    const virtualKey = attempt.virtualKey
    const principal = ctx.principal
    // As `hasUsageLimits`, for the attempt's one subject.
    if (virtualKey === null || virtualKey.usageLimits.length === 0 || principal === null || ctx.method === 'GET') return undefined
    return this.#reserveForAttempt(ctx, attempt, principal, virtualKey)
  }

  async #reserveForAttempt(ctx: RequestContext, attempt: Attempt, principal: Principal, virtualKey: LimitSubject): Promise<GatewayError | undefined> {
    // What this attempt sends: the request body with the target's override_params.
    const sent = { route: ctx.route, rawBody: attempt.rawBody ?? ctx.rawBody, body: attempt.body ?? ctx.body }
    const provider = attempt.credential?.provider ?? attempt.target.provider
    const hold = await this.#reserve(principal, NO_SUBJECTS, virtualKey, sent, provider, null)
    if (hold instanceof GatewayError) return hold
    attempt.budgetHold = hold
    return undefined
  }

  /** Not the reply: the reservation is released (settled at 0). */
  onAttemptEnd(ctx: RequestContext, attempt: Attempt): void {
    const hold = attempt.budgetHold
    if (hold === null) return
    attempt.budgetHold = null
    this.#track(this.#settle(ctx, hold, hold.items.map(() => 0)))
  }

  /**
   * Reserves the worst case of `request` on every usage limit of `subjects` and `virtualKey` at once
   * (with the rate-limit buckets staged in `claim`, when given), or the refusal.
   */
  async #reserve(
    principal: Principal,
    subjects: readonly LimitSubject[],
    virtualKey: LimitSubject | null,
    request: Pick<RequestContext, 'route' | 'rawBody' | 'body'>,
    provider: string | null,
    claim: RateLimitClaim | null,
  ): Promise<BudgetHold | GatewayError> {
    const now = this.#clock.now()
    const workspaceId = principal.workspaceId ?? principal.organisationId
    const estimate = estimateRequest(request, this.#config.defaultMaxOutputTokens)
    let worstCost: number | null = null
    const items: BudgetHoldItem[] = []
    const add = (subject: LimitSubject): void => {
      subject.usageLimits.forEach((rule, index) => {
        const plan = this.#book.plan(subject, workspaceId, index, rule, now)
        const amount = rule.type === 'tokens' ? estimate.promptTokens + estimate.maxOutputTokens : (worstCost ??= this.#worstCost(provider, estimate))
        items.push({
          counter: plan.counter,
          amount,
          unit: rule.type,
          subject,
          alertAt: rule.alertThreshold === null ? null : toCounterUnit(rule.type, rule.alertThreshold),
          resetsAt: plan.end,
        })
      })
    }
    for (const subject of subjects) add(subject)
    if (virtualKey !== null) add(virtualKey)

    let decision
    try {
      decision = await this.#book.reserve(items, now, claim === null ? [] : claim.acquires)
    } catch (error) {
      this.#failure('budget ledger or usage store unreachable: requests refused (503)', error)
      return gatewayError(ERRORS.GW_BUDGET_UNAVAILABLE)
    }
    if (decision.kind === 'rate-limited') return (claim as RateLimitClaim).refusal(decision.index, decision.retryAfterMs)
    if (decision.kind === 'refused') return exhaustedError(items[decision.index] as BudgetHoldItem, decision.used)
    if (decision.kind !== 'reserved') return gatewayError(ERRORS.GW_BUDGET_UNAVAILABLE)
    return { items, lease: decision.lease, workspaceId }
  }

  /** `ctx.usage` is final here: the terminal plugin's onLog (forward's) ran first (core/plugin.ts). */
  onLog(ctx: RequestContext): void {
    const hold = ctx.budgetHold
    const attempts = ctx.attempts
    if (hold === null && attempts === null) return
    try {
      let served: BudgetHold | null = null
      if (attempts !== null) {
        for (const attempt of attempts) {
          const attemptHold = attempt.budgetHold
          if (attemptHold === null) continue
          attempt.budgetHold = null
          if (attempt === ctx.attempt) served = attemptHold
          else this.#track(this.#settle(ctx, attemptHold, attemptHold.items.map(() => 0)))
        }
      }
      if (hold !== null || served !== null) this.#afterReply(ctx, hold, served)
    } catch (error) {
      this.#logger.error({ err: error, requestId: ctx.requestId }, 'budget settlement failed')
    }
  }

  /** Prunes dead usage counters now and then every `usagePruneIntervalMs`, in the background. */
  async start(): Promise<void> {
    void this.pruneUsage()
    this.#pruneTimer = setInterval(() => void this.pruneUsage(), this.#config.usagePruneIntervalMs)
    // Pruning never keeps the process alive.
    this.#pruneTimer.unref()
  }

  /**
   * Deletes persisted counters whose period ended more than `usageRetentionDays` ago; one run at a
   * time. Never rejects: a failure is logged and the next tick tries again.
   */
  pruneUsage(): Promise<void> {
    this.#pruning ??= this.#book
      .prune(this.#config.usageRetentionDays * DAY_MS)
      .then(
        (deleted) => {
          if (deleted > 0) this.#logger.info({ deleted }, 'pruned budget usage of periods that ended before the retention')
        },
        (error: unknown) => this.#failure('pruning old budget usage failed (retried at the next tick)', error),
      )
      .finally(() => {
        this.#pruning = null
      })
    return this.#pruning
  }

  /** Stops pruning and waits for settlements still running (their ledger and store calls). */
  async close(): Promise<void> {
    if (this.#pruneTimer !== null) clearInterval(this.#pruneTimer)
    this.#pruneTimer = null
    await this.#pruning
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight])
  }

  #worstCost(provider: string | null, estimate: RequestEstimate): number {
    if (estimate.model === null) return 0
    const price = this.#prices.find(provider, estimate.model)
    return price === null ? 0 : worstCaseNanoUsd(price, estimate.promptTokens, estimate.maxOutputTokens)
  }

  /** Settles the request's hold and the served attempt's (either may be `null`) with the real amounts of the reply. */
  #afterReply(ctx: RequestContext, requestHold: BudgetHold | null, attemptHold: BudgetHold | null): void {
    // A reply from the response cache reached no provider: it costs nothing.
    const hit = ctx.attempt !== null && ctx.attempt.cacheStatus === 'HIT'
    const usage = hit ? null : ctx.usage
    const target = hit ? null : ctx.target
    let cost: number | null = null
    if (usage !== null && target !== null) {
      const model = ctx.model ?? modelOf(ctx.attempt?.body ?? ctx.body)
      const price = model === null ? null : this.#prices.find(target.provider, model)
      if (price === null) this.#countUnpriced(target.provider, model)
      else cost = costNanoUsd(price, usage)
    }
    const answered = target !== null && ctx.status >= 200 && ctx.status < 300
    if (requestHold !== null) this.#track(this.#settle(ctx, requestHold, actualsOf(requestHold, answered, usage, cost)))
    if (attemptHold !== null) this.#track(this.#settle(ctx, attemptHold, actualsOf(attemptHold, answered, usage, cost)))
  }

  async #settle(ctx: RequestContext, hold: BudgetHold, actuals: readonly number[]): Promise<void> {
    let after: ReadonlyArray<number | null>
    try {
      after = await this.#book.settle(
        hold.items.map((item, index) => ({ counter: item.counter, reserved: item.amount, actual: actuals[index] ?? 0 })),
        hold.lease,
      )
    } catch (error) {
      this.#failure('settling budget reservations failed (the spend is still persisted; reservations lapse after their lease)', error)
      return
    }
    hold.items.forEach((item, index) => {
      const used = after[index]
      const actual = actuals[index] ?? 0
      if (used === null || used === undefined || actual <= 0) return
      const before = used - actual
      // Usage only grows by atomic increments, so exactly one settlement crosses each mark.
      if (item.alertAt !== null && before < item.alertAt && used >= item.alertAt) this.#record(ctx, hold, item, used, 'alert')
      if (before < item.counter.limit && used >= item.counter.limit) this.#record(ctx, hold, item, used, 'exhausted')
    })
  }

  #record(ctx: RequestContext, hold: BudgetHold, item: BudgetHoldItem, used: number, action: 'alert' | 'exhausted'): void {
    const principal = ctx.principal
    if (principal === null) return
    const { subject, unit } = item
    const details = {
      entity: subject.label,
      entity_type: subject.kind,
      entity_id: subject.id,
      type: unit,
      credit_limit: fromCounterUnit(unit, item.counter.limit),
      alert_threshold: item.alertAt === null ? null : fromCounterUnit(unit, item.alertAt),
      current_usage: fromCounterUnit(unit, used),
    }
    const entry = {
      id: randomUUID(),
      timestamp: new Date(this.#clock.now()).toISOString(),
      organisationId: principal.organisationId,
      workspaceId: hold.workspaceId,
      userId: principal.kind === 'jwt' || principal.keyType === 'workspace-user' ? (principal.userId ?? principal.keyId) : principal.keyId,
      userType: principal.kind === 'jwt' || principal.keyType === 'workspace-user' ? ('user' as const) : ('api_key' as const),
      apiKeyId: principal.kind === 'api-key' ? principal.keyId : null,
      method: ctx.method,
      uri: ctx.query.length === 0 ? ctx.path : `${ctx.path}?${ctx.query}`,
      requestId: ctx.requestId,
      requestBody: JSON.stringify(details),
      queryParams: '{}',
      responseStatusCode: ctx.status,
      resourceType: 'budget',
      action,
      resourceId: subject.id,
      clientIp: ctx.clientIp,
    }
    this.#logger.info({ ...details, action, requestId: ctx.requestId }, action === 'alert' ? 'budget alert threshold crossed' : 'budget exhausted')
    this.#track(
      this.#store.recordAudit(entry).catch((error: unknown) => {
        this.#logger.error({ err: error, action, entity: subject.label }, 'recording a budget alert failed')
      }),
    )
  }

  #countUnpriced(provider: string, model: string | null): void {
    this.#unpricedRequests++
    const name = `${provider}/${model ?? '(no model)'}`
    if (this.#loggedUnpriced.size >= LOGGED_UNPRICED_LIMIT || this.#loggedUnpriced.has(name)) return
    this.#loggedUnpriced.add(name)
    this.#logger.debug({ provider, model }, 'no price for this model: it costs 0 on cost budgets')
  }

  /** Logs a failure of this kind at most once per interval, with the count since the last line. */
  #failure(message: string, error: unknown): void {
    const now = this.#clock.now()
    const entry = this.#failures.get(message) ?? { count: 0, loggedAt: Number.NEGATIVE_INFINITY }
    entry.count++
    this.#failures.set(message, entry)
    if (now - entry.loggedAt < FAILURE_LOG_INTERVAL_MS) return
    this.#logger.error({ err: error, failures: entry.count }, message)
    entry.count = 0
    entry.loggedAt = now
  }

  #track(work: Promise<void>): void {
    this.#inFlight.add(work)
    const done = (): void => void this.#inFlight.delete(work)
    work.then(done, done)
  }
}

/**
 * What each counter of `hold` is charged for the reply: nothing when no provider answered
 * successfully; the reservation itself when the reply reported no usage (the real use is unknown).
 */
function actualsOf(hold: BudgetHold, answered: boolean, usage: Usage | null, cost: number | null): number[] {
  return hold.items.map((item) => {
    if (!answered) return 0
    if (usage === null) return item.amount
    return item.unit === 'tokens' ? usage.totalTokens : (cost ?? 0)
  })
}

/** 412 naming the entity (its label is already masked). */
function exhaustedError(item: BudgetHoldItem, used: number): GatewayError {
  const { subject, unit } = item
  const limit = item.counter.limit
  const resets = item.resetsAt === null ? '' : `; it resets at ${new Date(item.resetsAt).toISOString()}`
  const message =
    used >= limit
      ? `Usage limit exceeded: ${subject.label} has used ${formatAmount(unit, used, false)} of its ${formatAmount(unit, limit)}${resets}`
      : `Usage limit exceeded: requests in flight hold the rest of the budget of ${subject.label} (${formatAmount(unit, used, false)} of ${formatAmount(unit, limit)} used); retry shortly`
  return gatewayError(ERRORS.GW_BUDGET_EXHAUSTED, message)
}
