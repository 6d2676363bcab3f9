/**
 * Budgets (API.md §6): `usage_limits` in USD or tokens on API keys, workspaces and virtual keys,
 * reserved before forwarding and settled after, so concurrent requests overshoot a limit by at
 * most the reservations in flight when it was reached.
 *
 * Pieces:
 * - `BudgetLedger`: running usage per counter (Redis or in process); atomic reserve and settle.
 * - `UsageStore`: the persisted total of every counter and the manual resets (DuckDB or MongoDB),
 *   so a restart or a Redis flush loses no spend: a ledger that does not know a counter says so,
 *   and the counter is seeded from the store before it is used.
 * - `PriceTable`: USD per million tokens per (provider, model), from `config/pricing.json`.
 * - `BudgetAccounts`: what the Admin API shows and does (current usage, `reset_usage`).
 *
 * Counters: one per (entity, usage limit, period). Its key names the workspace as a hash tag
 * (`{<workspace UUID>}`, so every counter of one request lives in one Redis Cluster slot), the
 * entity, the limit's index and type, and the period start: a periodic reset, or `reset_usage`,
 * simply starts using a new key. Amounts are non-negative integers: tokens, or nano-USD
 * (USD × 10⁹) for cost limits, so sums are exact everywhere.
 */
import type { UsageLimitRule } from './admin-records.js'
import type { BucketAcquire, LimitSubject } from './limits.js'
import { portToken, type Service } from './service.js'

/** USD amounts are kept as integers in this unit (1 USD = 10⁹). */
export const NANO_USD_PER_USD = 1_000_000_000

/** A budget counter of one entity, limit and period (the period start is part of the key). */
export interface BudgetCounter {
  readonly key: string
  /** The limit in the counter's integer unit (tokens or nano-USD). */
  readonly limit: number
  /** Epoch ms after which the counter may be forgotten (its period is over); `null` for lifetime limits. */
  readonly expiresAt: number | null
}

export type ReserveDecision =
  /** Reserved on every counter; `lease` identifies the reservation for `settle`. */
  | { readonly kind: 'reserved'; readonly lease: number }
  /** Counter `index` is used up (usage plus reservations in flight reach its limit); nothing was reserved. */
  | { readonly kind: 'refused'; readonly index: number; readonly used: number }
  /** The ledger does not know these counters (never seen, flushed, restarted); nothing was reserved: seed them and retry. */
  | { readonly kind: 'unknown'; readonly indexes: readonly number[] }

/**
 * Where running usage lives (Redis or in process). Amounts are non-negative integers.
 *
 * `reserve` is all or nothing across counters. It admits a request while every counter has budget
 * left that no reservation claims yet (`used + reserved < limit`) and then reserves the request's
 * worst-case amount on each. So a counter never ends above its limit plus one worst-case
 * reservation, however many requests run at once, and once the limit is reached every request is
 * refused until the period ends. A counter the ledger does not hold yields `unknown` and nothing
 * changes. Rejects when the ledger cannot be reached (the budget plugin fails closed).
 *
 * Reservations of a request that never settles (a crashed instance) lapse after the ledger's lease
 * time, so they cannot hold a budget forever.
 */
export interface BudgetLedger extends Service {
  reserve(items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly amount: number }>, nowMs: number): Promise<ReserveDecision>
  /** Sets the usage of counters the ledger does not hold yet (a held counter is left alone). */
  seed(items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly used: number }>): Promise<void>
  /**
   * Replaces each reservation of `lease` by the real amount, atomically, and returns each
   * counter's new usage; `null` for a counter the ledger no longer holds (flushed or expired: it
   * is not recreated, the next `reserve` seeds it from the persisted total).
   */
  settle(
    items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly reserved: number; readonly actual: number }>,
    lease: number,
  ): Promise<ReadonlyArray<number | null>>
  /** Current usage (reservations excluded) of each key; `null` when the ledger does not hold it. */
  peek(keys: readonly string[]): Promise<ReadonlyArray<number | null>>
}
export const BudgetLedger = portToken<BudgetLedger>('BudgetLedger')

/** `ReserveDecision`, or a rate-limit bucket (`index` into the acquires) refused first: nothing was taken or reserved. */
export type CombinedReserveDecision = ReserveDecision | { readonly kind: 'rate-limited'; readonly index: number; readonly retryAfterMs: number }

/**
 * A ledger that also holds the rate limiter's token buckets (the same Redis), so a request's rate
 * limits and budgets are checked in one atomic call: buckets as `RateLimiter.acquire` does, then
 * counters as `reserve` does; when either refuses (or a counter is unknown) nothing changes.
 */
export interface CombinedLimitLedger extends BudgetLedger {
  reserveWithBuckets(
    items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly amount: number }>,
    acquires: readonly BucketAcquire[],
    nowMs: number,
  ): Promise<CombinedReserveDecision>
}

/** Whether a ledger implements `CombinedLimitLedger`. */
export function combinesRateLimits(ledger: BudgetLedger): ledger is CombinedLimitLedger {
  return typeof (ledger as Partial<CombinedLimitLedger>).reserveWithBuckets === 'function'
}

/** An entity that carries usage limits. */
export interface BudgetEntity {
  readonly kind: LimitSubject['kind']
  /** UUID of the entity. */
  readonly id: string
}

/** A manual reset (`reset_usage`) of every usage limit of an entity. */
export interface BudgetReset extends BudgetEntity {
  /** Epoch ms; usage counts from here. */
  readonly resetAt: number
}

/**
 * Persisted budget usage (the admin store's database: DuckDB or MongoDB). Writes come from the
 * budget plugin after replies, never on the request path; reads seed ledger counters and serve the
 * Admin API. Rejects when the store cannot be reached.
 */
export interface UsageStore extends Service {
  /**
   * Adds settled amounts to the persisted totals of counter keys (creating them), atomically per
   * counter key (a call that fails part way may have applied some keys: DuckDB runs it in one
   * transaction, MongoDB as one unordered bulk write), and keeps each counter's `expiresAt` (`BudgetCounter.expiresAt`: when its period is over;
   * absent or `null` for a counter that never ends, a lifetime limit's). A later write may move a
   * counter's end later or make it never end, never earlier. Counters stored before ends were kept
   * have none until they are written again.
   */
  add(entries: ReadonlyArray<{ readonly key: string; readonly amount: number; readonly expiresAt?: number | null }>): Promise<void>
  /**
   * Deletes the counters whose `expiresAt` is before `endedBefore` (epoch ms); counters without an
   * end are kept. Nothing reads a counter after its end (its period's requests use the next key), so
   * the budget plugin prunes those that ended longer ago than its retention. Returns how many were
   * deleted.
   */
  prune(endedBefore: number): Promise<number>
  /** The persisted total of each key (0 for a key never written). */
  totals(keys: readonly string[]): Promise<readonly number[]>
  /** Records a manual reset; a later reset of the same entity replaces an earlier one. */
  recordReset(reset: BudgetReset): Promise<void>
  /** The latest reset of every entity ever reset. */
  listResets(): Promise<readonly BudgetReset[]>
}
export const UsageStore = portToken<UsageStore>('UsageStore')

/** Prices of one model in USD per million tokens. */
export interface ModelPrice {
  readonly input: number
  readonly output: number
  /** Input tokens read from the provider's prompt cache; `null` → the input price. */
  readonly cachedInput: number | null
  /** Reasoning tokens, where a provider prices them apart from output; `null` → the output price. */
  readonly reasoning: number | null
}

/** The price table (`config/pricing.json`, overridable by config). */
export interface PriceTable {
  /**
   * The price of `model` at `provider`; with `provider` `null`, the highest price any provider
   * lists for that model (a worst case). A dated model id (`gpt-4o-2024-08-06`) matches its
   * longest listed prefix. `null` when the model is not listed.
   */
  find(provider: string | null, model: string): ModelPrice | null
}
export const PriceTable = portToken<PriceTable>('PriceTable')

/** One usage limit of an entity as the Admin API shows it. */
export interface BudgetUsage {
  /** In the limit's unit: USD or tokens. */
  readonly currentUsage: number
  /** ISO 8601 start of the current period (periodic reset or `reset_usage`); `null` for a lifetime limit never reset. */
  readonly lastResetAt: string | null
  /** Current usage reached the limit. */
  readonly exhausted: boolean
}

/** Budget state for the Admin API. */
export interface BudgetAccounts {
  /** The current-period usage of each of the entity's limits, in order; `null` when budgets are not tracked. */
  usage(entity: BudgetEntity, workspaceId: string, rules: readonly UsageLimitRule[]): Promise<readonly BudgetUsage[] | null>
  /** `reset_usage`: every limit of the entity starts a new period now, on every instance. */
  reset(entity: BudgetEntity): Promise<void>
}
export const BudgetAccounts = portToken<BudgetAccounts>('BudgetAccounts')

/** What the Admin API sees when the budget plugin is disabled: nothing is counted, nothing to reset. */
export const UNTRACKED_BUDGETS: BudgetAccounts = Object.freeze({
  usage: async () => null,
  reset: async () => {},
})


/** One counter a request reserved on. */
export interface BudgetHoldItem {
  readonly counter: BudgetCounter
  /** Reserved amount (counter unit). */
  readonly amount: number
  readonly unit: 'cost' | 'tokens'
  readonly subject: LimitSubject
  /** Crossing it records an alert (counter unit); `null` without a threshold. */
  readonly alertAt: number | null
  /** When the counter's period ends (epoch ms), or `null` for a lifetime limit. */
  readonly resetsAt: number | null
}

/** What the budget plugin reserved for one request. */
export interface BudgetHold {
  readonly items: readonly BudgetHoldItem[]
  readonly lease: number
  /** Workspace UUID of the counters (their hash tag). */
  readonly workspaceId: string
}

// ---------------------------------------------------------------------------------------------
// Cost of a reply (budget plugin and log plugin)

/** Prices are USD per million tokens: one token at P USD/1M costs P × 1000 nano-USD. */
const COST_NANO_PER_TOKEN_PER_PRICE = 1_000

export interface TokenCounts {
  readonly promptTokens: number
  readonly completionTokens: number
  /** Of the prompt tokens, those read from the provider's cache. */
  readonly cachedTokens: number
  /** Of the completion tokens, those spent reasoning (when the provider reports them). */
  readonly reasoningTokens?: number
}

function tokenCount(value: number | undefined): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : 0
}

/**
 * The cost of a reply's token usage, in nano-USD (rounded to the nearest integer): uncached prompt
 * tokens at the input price, cached prompt tokens at the cached-input price (else input),
 * reasoning tokens at the reasoning price (else output), the remaining completion tokens at the
 * output price.
 */
export function costNanoUsd(price: ModelPrice, usage: TokenCounts): number {
  const prompt = tokenCount(usage.promptTokens)
  const completion = tokenCount(usage.completionTokens)
  const cached = Math.min(tokenCount(usage.cachedTokens), prompt)
  const reasoning = Math.min(tokenCount(usage.reasoningTokens), completion)
  const perMillion =
    (prompt - cached) * price.input +
    cached * (price.cachedInput ?? price.input) +
    (completion - reasoning) * price.output +
    reasoning * (price.reasoning ?? price.output)
  return Math.round(perMillion * COST_NANO_PER_TOKEN_PER_PRICE)
}

/**
 * The most a request can cost, in nano-USD (rounded up): the budget's reservation. Every prompt
 * token at the input price and every possible output token at the higher of the output and
 * reasoning prices.
 */
export function worstCaseNanoUsd(price: ModelPrice, promptTokens: number, maxOutputTokens: number): number {
  const output = Math.max(price.output, price.reasoning ?? price.output)
  return Math.ceil((tokenCount(promptTokens) * price.input + tokenCount(maxOutputTokens) * output) * COST_NANO_PER_TOKEN_PER_PRICE)
}


