/**
 * Pruning of persisted budget usage (issue 13 item 4): the budget plugin deletes the usage store's
 * counters of periods that ended more than `usageRetentionDays` ago, at start and on a timer; the
 * counter of the current period and those of lifetime limits are never deleted.
 */
import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { InProcessBudgetLedger } from '../../../adapters/memory/in-process-budget-ledger.js'
import { InProcessChangeNotifier } from '../../../adapters/memory/in-process-change-notifier.js'
import { loadPriceTable } from '../../../config/pricing.js'
import type { UsageLimitRule } from '../../../core/admin-records.js'
import { ClientAbort, RequestContext, type Principal } from '../../../core/context.js'
import type { LimitSubject } from '../../../core/limits.js'
import type { AdminStore } from '../../../core/ports.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../../core/routes.js'
import type { Logger } from '../../../core/service.js'
import { BudgetBook } from '../../../plugins/budget/book.js'
import { budgetConfigSchema } from '../../../plugins/budget/config.js'
import { DAY_MS } from '../../../plugins/budget/periods.js'
import { BudgetPlugin } from '../../../plugins/budget/plugin.js'
import { MemoryUsageStore } from '../../contract/budget-fixtures.js'

const NOW = Date.parse('2024-05-17T12:00:00.000Z')
const CHAT = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec

interface Logged {
  readonly level: string
  readonly message: string | undefined
}

function recordingLogger(): Logger & { lines: Logged[] } {
  const lines: Logged[] = []
  const at = (level: string) => (_fields: object, message?: string) => void lines.push({ level, message })
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}

function rule(overrides: Partial<UsageLimitRule> = {}): UsageLimitRule {
  return { type: 'tokens', creditLimit: 1_000_000, alertThreshold: null, periodicReset: null, periodicResetDays: null, ...overrides }
}

const made: Array<{ plugin: BudgetPlugin; book: BudgetBook }> = []

async function setup(config: Record<string, unknown> = {}) {
  const store = new MemoryUsageStore()
  const ledger = new InProcessBudgetLedger({ now: () => NOW })
  const logger = recordingLogger()
  const book = new BudgetBook({ ledger, store, notifier: new InProcessChangeNotifier(), clock: { now: () => NOW }, logger, persistIntervalMs: 60_000 })
  await book.start()
  const plugin = new BudgetPlugin({
    config: budgetConfigSchema.parse(config),
    book,
    prices: loadPriceTable(),
    store: { recordAudit: async () => {} } as unknown as AdminStore,
    clock: { now: () => NOW },
    logger,
  })
  made.push({ plugin, book })
  return { store, book, plugin, logger }
}

afterEach(async () => {
  vi.useRealTimers()
  for (const { plugin, book } of made.splice(0)) {
    await plugin.close()
    await book.close()
  }
})

/** Runs one request charged on `usageLimits` of an API key through onAccess and onLog; returns its counter keys. */
async function charge(plugin: BudgetPlugin, book: BudgetBook, store: MemoryUsageStore, usageLimits: UsageLimitRule[]): Promise<string[]> {
  const workspaceId = randomUUID()
  const subject: LimitSubject = { kind: 'api-key', id: randomUUID(), label: 'api-key te****xyz', rateLimits: [], usageLimits }
  const ctx = new RequestContext({
    requestId: randomUUID(),
    traceId: 'trace',
    receivedAt: NOW,
    startedAt: 0,
    method: 'POST',
    path: CHAT.pattern,
    query: '',
    headers: { 'x-gateway-provider': 'openai' },
    clientIp: null,
    route: CHAT,
    params: {},
    signal: new ClientAbort(),
  })
  ctx.body = { model: 'gpt-4o', messages: [], max_tokens: 10 }
  ctx.rawBody = Buffer.from(JSON.stringify(ctx.body))
  const principal: Principal = {
    kind: 'api-key',
    keyId: subject.id,
    keyType: 'workspace-service',
    organisationId: 'org',
    workspaceId,
    userId: null,
    scopes: new Set(['completions.write']),
    credentialHeader: 'x-gateway-api-key',
    limitSubjects: [subject],
  }
  ctx.principal = principal
  expect(await plugin.onAccess(ctx)).toBeUndefined()
  ctx.target = { provider: 'openai', origin: 'http://127.0.0.1', basePath: '/v1', authHeaders: [], authQuery: '' }
  ctx.model = 'gpt-4o'
  ctx.status = 200
  ctx.outcome = 'completed'
  ctx.usage = { promptTokens: 10, completionTokens: 5, totalTokens: 15, cachedTokens: 0 }
  plugin.onLog(ctx)
  const keys = (ctx.budgetHold?.items ?? []).map((item) => item.counter.key)
  expect(keys).toHaveLength(usageLimits.length)
  // Settling runs after onLog returns; the book then hands the spend to the store on flush.
  await vi.waitFor(async () => {
    await book.flush()
    expect(keys.every((key) => store.totalsByKey.has(key))).toBe(true)
  })
  return keys
}

describe('budget usage pruning', () => {
  it('persists each counter with its end: the period end plus a day of grace, none for a lifetime limit', async () => {
    const { store, book, plugin } = await setup()
    const [monthly, lifetime] = await charge(plugin, book, store, [rule({ periodicReset: 'monthly' }), rule()])
    expect(store.totalsByKey.get(monthly as string)).toBe(15)
    expect(store.endsByKey.get(monthly as string)).toBe(Date.UTC(2024, 5, 1) + DAY_MS)
    expect(store.endsByKey.get(lifetime as string)).toBeNull()
  })

  it('at start, deletes counters that ended more than usageRetentionDays ago and keeps the rest', async () => {
    const { store, book, plugin } = await setup({ usageRetentionDays: 90 })
    const [current, lifetime] = await charge(plugin, book, store, [rule({ periodicResetDays: 7 }), rule()])
    await store.add([
      { key: 'ended-91-days-ago', amount: 1, expiresAt: NOW - 91 * DAY_MS },
      { key: 'ended-89-days-ago', amount: 1, expiresAt: NOW - 89 * DAY_MS },
    ])
    await plugin.start()
    // start() does not wait for the run (it must not hold up boot).
    await vi.waitFor(() => expect([...store.totalsByKey.keys()].sort()).toEqual([current, lifetime, 'ended-89-days-ago'].sort()))
  })

  it('never deletes the current period’s counter, even with the shortest retention', async () => {
    const { store, book, plugin } = await setup({ usageRetentionDays: 1 })
    const keys = await charge(plugin, book, store, [rule({ periodicResetDays: 1 }), rule({ periodicReset: 'weekly' }), rule({ periodicReset: 'monthly' }), rule()])
    await plugin.start()
    await plugin.pruneUsage()
    expect(keys.map((key) => store.totalsByKey.get(key))).toEqual([15, 15, 15, 15])
  })

  it('runs again every usagePruneIntervalMs, one run at a time, and stops at close', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] })
    const { store, plugin } = await setup({ usagePruneIntervalMs: 1_000 })
    const prune = vi.spyOn(store, 'prune')
    await plugin.start()
    expect(prune).toHaveBeenCalledTimes(1)
    expect(prune).toHaveBeenLastCalledWith(NOW - 90 * DAY_MS)
    await plugin.pruneUsage()
    for (let tick = 0; tick < 3; tick++) {
      vi.advanceTimersByTime(1_000)
      // Joins the run the tick started.
      await plugin.pruneUsage()
    }
    expect(prune).toHaveBeenCalledTimes(4)
    // Ticks while a run is under way join it instead of starting another.
    vi.advanceTimersByTime(3_000)
    await plugin.pruneUsage()
    expect(prune).toHaveBeenCalledTimes(5)
    await plugin.close()
    vi.advanceTimersByTime(10_000)
    expect(prune).toHaveBeenCalledTimes(5)
  })

  it('logs a failed run and never rejects (the next tick tries again)', async () => {
    const { store, plugin, logger } = await setup()
    store.failing = true
    await expect(plugin.pruneUsage()).resolves.toBeUndefined()
    expect(logger.lines.filter((line) => line.level === 'error').map((line) => line.message)).toEqual([expect.stringContaining('pruning old budget usage failed')])
  })

  it('validates its settings', () => {
    expect(budgetConfigSchema.parse({})).toMatchObject({ usageRetentionDays: 90, usagePruneIntervalMs: 21_600_000 })
    expect(budgetConfigSchema.safeParse({ usageRetentionDays: 0 }).success).toBe(false)
    expect(budgetConfigSchema.safeParse({ usagePruneIntervalMs: 10 }).success).toBe(false)
  })
})
