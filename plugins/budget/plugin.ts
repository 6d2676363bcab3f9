/**
 * budget: `usage_limits` (API.md §6) of the API key, its workspace and the virtual key.
 * Phases: onAccess (priority 600), onLog (settles with the real usage: forward's onLog, the terminal
 * plugin's, ran first and filled `ctx.usage`); start/close (usage pruning).
 * Reads `ctx.principal.limitSubjects`, `ctx.virtualKey`, `ctx.route`, `ctx.rawBody`/`ctx.body`,
 * `ctx.credential`, and after the reply `ctx.usage`, `ctx.model`, `ctx.target`, `ctx.status`;
 * writes `ctx.budgetHold` (onAccess).
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
import type { JsonObject, Principal, RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
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
    const virtualKey = ctx.virtualKey

    const now = this.#clock.now()
    const workspaceId = principal.workspaceId ?? principal.organisationId
    const estimate = estimateRequest(ctx, this.#config.defaultMaxOutputTokens)
    let worstCost: number | null = null
    const items: BudgetHoldItem[] = []
    const add = (subject: LimitSubject): void => {
      subject.usageLimits.forEach((rule, index) => {
        const plan = this.#book.plan(subject, workspaceId, index, rule, now)
        const amount = rule.type === 'tokens' ? estimate.promptTokens + estimate.maxOutputTokens : (worstCost ??= this.#worstCost(ctx, estimate))
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
    for (const subject of principal.limitSubjects) add(subject)
    if (virtualKey !== null) add(virtualKey)

    const claim = ctx.rateLimitClaim
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
    ctx.budgetHold = { items, lease: decision.lease, workspaceId }
    return undefined
  }

  /** `ctx.usage` is final here: the terminal plugin's onLog (forward's) ran first (core/plugin.ts). */
  onLog(ctx: RequestContext): void {
    if (ctx.budgetHold === null) return
    try {
      this.#afterReply(ctx)
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

  #worstCost(ctx: RequestContext, estimate: RequestEstimate): number {
    if (estimate.model === null) return 0
    const provider = ctx.credential?.provider ?? ctx.headers['x-gateway-provider'] ?? null
    const price = this.#prices.find(provider, estimate.model)
    return price === null ? 0 : worstCaseNanoUsd(price, estimate.promptTokens, estimate.maxOutputTokens)
  }

  #afterReply(ctx: RequestContext): void {
    const hold = ctx.budgetHold
    if (hold === null) return
    const usage = ctx.usage
    const target = ctx.target
    let cost: number | null = null
    if (usage !== null && target !== null) {
      const model = ctx.model ?? modelOf(ctx.body)
      const price = model === null ? null : this.#prices.find(target.provider, model)
      if (price === null) this.#countUnpriced(target.provider, model)
      else cost = costNanoUsd(price, usage)
    }
    const answered = target !== null && ctx.status >= 200 && ctx.status < 300
    const actuals = hold.items.map((item) => {
      if (!answered) return 0
      if (usage === null) return item.amount
      return item.unit === 'tokens' ? usage.totalTokens : (cost ?? 0)
    })
    this.#track(this.#settle(ctx, hold, actuals))
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
