/**
 * The budget book: counters of usage limits over the ledger and the usage store, shared by the
 * budget plugin (reserve before forwarding, settle after) and the Admin API (`BudgetAccounts`:
 * current usage, `reset_usage`). Built by config/wiring.ts only when the budget plugin is enabled.
 *
 * - Counter keys: `gw:budget:{<workspace>}:<kind>:<entity>:<limit index>:<type>:<window start>`;
 *   the window start is the calendar period's start or a later manual reset (see periods.ts), so a
 *   reset simply moves to a new key and in-flight requests settle on the old one.
 * - Seeding: a counter the ledger does not hold (first use, Redis flushed or restarted, in-process
 *   ledger after a restart) is seeded from the persisted total plus what this instance has not
 *   written yet, then the reservation is retried: one ledger round trip in the common case.
 * - Persistence: settled amounts are summed per counter and written to the usage store every
 *   `persistIntervalMs`, off the request path, with the counter's end (`BudgetCounter.expiresAt`);
 *   a failed write is kept and retried, and `close()` writes what is left. `prune` deletes the
 *   persisted counters that ended long ago (the budget plugin calls it on a timer).
 * - Manual resets are stored in the usage store, kept in memory (loaded at start) and announced on
 *   `CHANGE_CHANNELS.budgetResets`, so every instance moves to the new counters within the notifier's delay.
 */
import type { UsageLimitRule } from '../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import {
  combinesRateLimits,
  type BudgetAccounts,
  type BudgetCounter,
  type BudgetEntity,
  type BudgetLedger,
  type BudgetUsage,
  type CombinedReserveDecision,
  type UsageStore,
} from '../../core/budgets.js'
import type { BucketAcquire } from '../../core/limits.js'
import type { ChangeNotifier } from '../../core/ports.js'
import type { Clock, HealthStatus, Logger, Service } from '../../core/service.js'
import { fromCounterUnit, toCounterUnit } from './cost.js'
import { DAY_MS, usageWindow } from './periods.js'

export interface BudgetBookOptions {
  readonly ledger: BudgetLedger
  readonly store: UsageStore
  readonly notifier: ChangeNotifier
  readonly clock: Clock
  readonly logger: Logger
  /** How often settled amounts are written to the usage store. */
  readonly persistIntervalMs: number
}

/** A counter with the window it counts. */
export interface CounterPlan {
  readonly counter: BudgetCounter
  /** Window start (epoch ms); 0 for a lifetime limit never reset. */
  readonly start: number
  /** When the window ends (the next periodic reset), or `null`. */
  readonly end: number | null
}

/** Counters outlive their period this long, so requests in flight at the boundary still settle on them. */
const COUNTER_GRACE_MS = DAY_MS
const SEED_ATTEMPTS = 3
const WARN_INTERVAL_MS = 10_000

/** Settled spend of one counter not yet in the usage store. */
interface Unpersisted {
  amount: number
  expiresAt: number | null
}

function entityKey(kind: string, id: string): string {
  return `${kind}:${id}`
}

export class BudgetBook implements BudgetAccounts, Service {
  readonly #ledger: BudgetLedger
  readonly #store: UsageStore
  readonly #notifier: ChangeNotifier
  readonly #clock: Clock
  readonly #logger: Logger
  readonly #persistIntervalMs: number
  /** Latest manual reset per entity (`<kind>:<id>` → epoch ms). */
  readonly #resets = new Map<string, number>()
  /** Settled amounts not yet handed to the store, per counter key, with the counter's end. */
  #pending = new Map<string, Unpersisted>()
  /** The batch being written, per counter key. */
  #writing: Map<string, Unpersisted> | null = null
  #flushing: Promise<void> | null = null
  #timer: NodeJS.Timeout | null = null
  #unsubscribe: (() => void) | null = null
  #lastWarning = 0

  constructor(options: BudgetBookOptions) {
    this.#ledger = options.ledger
    this.#store = options.store
    this.#notifier = options.notifier
    this.#clock = options.clock
    this.#logger = options.logger
    this.#persistIntervalMs = options.persistIntervalMs
  }

  async start(): Promise<void> {
    this.#unsubscribe = this.#notifier.subscribe(CHANGE_CHANNELS.budgetResets, (message) => this.#onResetMessage(message))
    await this.#loadResets()
    this.#timer = setInterval(() => void this.flush(), this.#persistIntervalMs)
    this.#timer.unref()
  }

  /** Writes what is pending; what still fails is logged as lost. */
  async close(): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    this.#unsubscribe?.()
    this.#unsubscribe = null
    for (let attempt = 0; attempt < 3 && (this.#pending.size > 0 || this.#flushing !== null); attempt++) await this.flush()
    if (this.#pending.size > 0) {
      this.#logger.error({ counters: this.#pending.size }, 'budget usage could not be persisted at shutdown; it stays in the ledger only')
    }
  }

  async health(): Promise<HealthStatus> {
    return { ok: true }
  }

  /** The counter of limit `index` (`rule`) of `entity` at `nowMs`. */
  plan(entity: BudgetEntity, workspaceId: string, index: number, rule: UsageLimitRule, nowMs: number): CounterPlan {
    const window = usageWindow(rule, nowMs, this.#resets.get(entityKey(entity.kind, entity.id)) ?? null)
    return {
      counter: {
        key: `gw:budget:{${workspaceId}}:${entity.kind}:${entity.id}:${index}:${rule.type}:${window.start}`,
        limit: toCounterUnit(rule.type, rule.creditLimit),
        expiresAt: window.end === null ? null : window.end + COUNTER_GRACE_MS,
      },
      start: window.start,
      end: window.end,
    }
  }

  /**
   * Reserves on every counter (all or nothing), seeding counters the ledger does not hold. With
   * `acquires` (only when `combinesRateLimits`), the rate-limit buckets are checked and taken in the
   * same call, all or nothing with the counters. Rejects when the ledger or, for seeding, the usage
   * store cannot be reached.
   */
  async reserve(
    items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly amount: number }>,
    nowMs: number,
    acquires: readonly BucketAcquire[] = [],
  ): Promise<CombinedReserveDecision> {
    const ledger = this.#ledger
    let call: () => Promise<CombinedReserveDecision>
    if (acquires.length === 0) call = () => ledger.reserve(items, nowMs)
    else if (combinesRateLimits(ledger)) call = () => ledger.reserveWithBuckets(items, acquires, nowMs)
    else throw new Error('this budget ledger cannot check rate-limit buckets')
    let decision = await call()
    for (let attempt = 0; decision.kind === 'unknown' && attempt < SEED_ATTEMPTS; attempt++) {
      await this.#seed(decision.indexes.map((index) => (items[index] as { counter: BudgetCounter }).counter))
      decision = await call()
    }
    if (decision.kind === 'unknown') throw new Error('budget counters stay unknown to the ledger after seeding')
    return decision
  }

  /**
   * Settles a reservation with the real amounts and queues them for the usage store (even when the
   * ledger fails: the spend is persisted either way). Returns each counter's new usage (`null`
   * when the ledger no longer holds it).
   */
  async settle(
    items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly reserved: number; readonly actual: number }>,
    lease: number,
  ): Promise<ReadonlyArray<number | null>> {
    for (const item of items) if (item.actual > 0) this.#addPending(item.counter.key, item.actual, item.counter.expiresAt)
    return this.#ledger.settle(items, lease)
  }

  /** Hands pending amounts to the usage store (one call); on failure they stay pending. */
  flush(): Promise<void> {
    if (this.#flushing !== null) return this.#flushing
    if (this.#pending.size === 0) return Promise.resolve()
    const batch = this.#pending
    this.#pending = new Map()
    this.#writing = batch
    this.#flushing = this.#store
      .add([...batch].map(([key, { amount, expiresAt }]) => ({ key, amount, expiresAt })))
      .catch((error: unknown) => {
        for (const [key, { amount, expiresAt }] of batch) this.#addPending(key, amount, expiresAt)
        this.#warn(error, batch.size)
      })
      .finally(() => {
        this.#writing = null
        this.#flushing = null
      })
    return this.#flushing
  }

  /**
   * Deletes the persisted counters whose end (period end plus the grace) is more than `retentionMs`
   * ago; counters of lifetime limits never end and are kept. Nothing reads a counter after its end,
   * so this frees only dead rows. Returns how many were deleted; rejects when the store fails.
   */
  prune(retentionMs: number): Promise<number> {
    return this.#store.prune(this.#clock.now() - retentionMs)
  }

  async usage(entity: BudgetEntity, workspaceId: string, rules: readonly UsageLimitRule[]): Promise<readonly BudgetUsage[]> {
    if (rules.length === 0) return []
    const now = this.#clock.now()
    const plans = rules.map((rule, index) => this.plan(entity, workspaceId, index, rule, now))
    const used = await this.#currentUsage(plans.map((plan) => plan.counter.key))
    return rules.map((rule, index) => {
      const plan = plans[index] as CounterPlan
      const amount = used[index] ?? 0
      return {
        currentUsage: fromCounterUnit(rule.type, amount),
        lastResetAt: plan.start > 0 ? new Date(plan.start).toISOString() : null,
        exhausted: amount >= plan.counter.limit,
      }
    })
  }

  async reset(entity: BudgetEntity): Promise<void> {
    const key = entityKey(entity.kind, entity.id)
    const resetAt = Math.max(this.#clock.now(), (this.#resets.get(key) ?? 0) + 1)
    await this.#store.recordReset({ kind: entity.kind, id: entity.id, resetAt })
    this.#applyReset(key, resetAt)
    this.#notifier.publish(CHANGE_CHANNELS.budgetResets, `${key}:${resetAt}`)
  }

  /** Used amounts: the ledger's where it holds the counter, else the persisted total plus what is pending here. */
  async #currentUsage(keys: readonly string[]): Promise<number[]> {
    const held = await this.#ledger.peek(keys)
    const missing = keys.filter((_, index) => held[index] === null)
    const persisted = missing.length === 0 ? [] : await this.#store.totals(missing)
    let next = 0
    return keys.map((key, index) => held[index] ?? (persisted[next++] ?? 0) + this.#unpersisted(key))
  }

  async #seed(counters: readonly BudgetCounter[]): Promise<void> {
    const totals = await this.#store.totals(counters.map((counter) => counter.key))
    await this.#ledger.seed(counters.map((counter, index) => ({ counter, used: (totals[index] ?? 0) + this.#unpersisted(counter.key) })))
  }

  #unpersisted(key: string): number {
    return (this.#pending.get(key)?.amount ?? 0) + (this.#writing?.get(key)?.amount ?? 0)
  }

  #addPending(key: string, amount: number, expiresAt: number | null): void {
    const known = this.#pending.get(key)
    if (known === undefined) {
      this.#pending.set(key, { amount, expiresAt })
      return
    }
    known.amount += amount
    // As the store merges ends: never ending wins, else the later one (a limit's rule may change).
    known.expiresAt = known.expiresAt === null || expiresAt === null ? null : Math.max(known.expiresAt, expiresAt)
  }

  #applyReset(key: string, resetAt: number): void {
    if ((this.#resets.get(key) ?? 0) < resetAt) this.#resets.set(key, resetAt)
  }

  async #loadResets(): Promise<void> {
    for (const reset of await this.#store.listResets()) this.#applyReset(entityKey(reset.kind, reset.id), reset.resetAt)
  }

  #onResetMessage(message: string): void {
    if (message === '*') {
      // Messages may have been missed: read every reset again.
      this.#loadResets().catch((error: unknown) => this.#logger.error({ err: error }, 'reloading budget resets failed'))
      return
    }
    const at = message.lastIndexOf(':')
    const resetAt = Number(message.slice(at + 1))
    if (at <= 0 || !Number.isFinite(resetAt)) return
    this.#applyReset(message.slice(0, at), resetAt)
  }

  #warn(error: unknown, counters: number): void {
    const now = this.#clock.now()
    if (now - this.#lastWarning < WARN_INTERVAL_MS) return
    this.#lastWarning = now
    this.#logger.warn({ err: error, counters }, 'writing budget usage to the usage store failed; retrying')
  }
}
