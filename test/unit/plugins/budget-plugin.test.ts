import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { InProcessBudgetLedger } from '../../../adapters/memory/in-process-budget-ledger.js'
import { InProcessChangeNotifier } from '../../../adapters/memory/in-process-change-notifier.js'
import { loadPriceTable } from '../../../config/pricing.js'
import type { AuditEntry, UsageLimitRule } from '../../../core/admin-records.js'
import type { BudgetLedger } from '../../../core/budgets.js'
import { ClientAbort, RequestContext, type Principal, type Usage } from '../../../core/context.js'
import { GatewayError } from '../../../core/errors.js'
import type { LimitSubject } from '../../../core/limits.js'
import type { AdminStore } from '../../../core/ports.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../../core/routes.js'
import type { Logger } from '../../../core/service.js'
import { BudgetBook } from '../../../plugins/budget/book.js'
import { budgetConfigSchema } from '../../../plugins/budget/config.js'
import { BudgetPlugin } from '../../../plugins/budget/plugin.js'
import { MemoryUsageStore } from '../../contract/budget-fixtures.js'

const NOW = Date.parse('2024-05-17T12:00:00.000Z')
const SILENT: Logger = { debug() {}, info() {}, warn() {}, error() {} }
const CHAT = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec

function rule(overrides: Partial<UsageLimitRule> = {}): UsageLimitRule {
  return { type: 'tokens', creditLimit: 1000, alertThreshold: null, periodicReset: null, periodicResetDays: null, ...overrides }
}

function subject(kind: LimitSubject['kind'], usageLimits: UsageLimitRule[], label = `${kind} te********xyz`): LimitSubject {
  return { kind, id: randomUUID(), label, rateLimits: [], usageLimits }
}

interface Harness {
  plugin: BudgetPlugin
  book: BudgetBook
  ledger: InProcessBudgetLedger
  store: MemoryUsageStore
  audits: AuditEntry[]
  workspaceId: string
}

const open: Harness[] = []

async function harness(options: { ledger?: BudgetLedger } = {}): Promise<Harness> {
  const ledger = new InProcessBudgetLedger({ now: () => NOW })
  const store = new MemoryUsageStore()
  const audits: AuditEntry[] = []
  const book = new BudgetBook({
    ledger: options.ledger ?? ledger,
    store,
    notifier: new InProcessChangeNotifier(),
    clock: { now: () => NOW },
    logger: SILENT,
    persistIntervalMs: 60_000,
  })
  await book.start()
  const adminStore = { recordAudit: async (entry: AuditEntry) => void audits.push(entry) } as unknown as AdminStore
  const plugin = new BudgetPlugin({
    config: budgetConfigSchema.parse({ defaultMaxOutputTokens: 100 }),
    book,
    prices: loadPriceTable(),
    store: adminStore,
    clock: { now: () => NOW },
    logger: SILENT,
  })
  const made = { plugin, book, ledger, store, audits, workspaceId: randomUUID() }
  open.push(made)
  return made
}

afterEach(async () => {
  for (const { plugin, book } of open.splice(0)) {
    await plugin.close()
    await book.close()
  }
})

function request(h: Harness, subjects: LimitSubject[], body: Record<string, unknown>, method: 'POST' | 'GET' = 'POST'): RequestContext {
  const ctx = new RequestContext({
    requestId: randomUUID(),
    traceId: 'trace',
    receivedAt: NOW,
    startedAt: 0,
    method,
    path: CHAT.pattern,
    query: '',
    headers: { 'x-gateway-provider': 'openai' },
    clientIp: null,
    route: CHAT,
    params: {},
    signal: new ClientAbort(),
  })
  ctx.rawBody = Buffer.from(JSON.stringify(body))
  ctx.body = body
  const principal: Principal = {
    kind: 'api-key',
    keyId: subjects.find((entry) => entry.kind === 'api-key')?.id ?? randomUUID(),
    keyType: 'workspace-service',
    organisationId: 'org',
    workspaceId: h.workspaceId,
    userId: null,
    scopes: new Set(['completions.write']),
    credentialHeader: 'x-gateway-api-key',
    limitSubjects: subjects.filter((entry) => entry.kind !== 'virtual-key'),
  }
  ctx.principal = principal
  ctx.virtualKey = subjects.find((entry) => entry.kind === 'virtual-key') ?? null
  return ctx
}

/** What forward and core write once the provider answered. */
function replied(ctx: RequestContext, status: number, usage: Usage | null): void {
  ctx.target = { provider: 'openai', origin: 'http://127.0.0.1', basePath: '/v1', authHeaders: [], authQuery: '' }
  ctx.model = typeof ctx.body?.model === 'string' ? ctx.body.model : null
  ctx.status = status
  ctx.outcome = 'completed'
  ctx.usage = usage
}

async function finish(h: Harness, ctx: RequestContext): Promise<void> {
  h.plugin.onLog(ctx)
  await new Promise((resolve) => setImmediate(resolve))
  await h.plugin.close()
}

async function used(h: Harness, ctx: RequestContext, index = 0): Promise<number | null> {
  const item = ctx.budgetHold?.items[index]
  if (item === undefined) throw new Error('no hold')
  return (await h.ledger.peek([item.counter.key]))[0] ?? null
}

const USAGE: Usage = { promptTokens: 1000, completionTokens: 500, totalTokens: 1500, cachedTokens: 200 }

describe('budget plugin', () => {
  it('reserves the worst case on every subject and settles the real token usage', async () => {
    const h = await harness()
    const key = subject('api-key', [rule({ creditLimit: 100_000 })])
    const workspace = subject('workspace', [rule({ creditLimit: 100_000 }), rule({ type: 'cost', creditLimit: 10 })])
    const virtualKey = subject('virtual-key', [rule({ creditLimit: 100_000 })])
    const body = { model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 50 }
    const ctx = request(h, [key, workspace, virtualKey], body)
    expect(await h.plugin.onAccess(ctx)).toBeUndefined()
    const hold = ctx.budgetHold
    expect(hold?.items.map((item) => item.subject.kind)).toEqual(['api-key', 'workspace', 'workspace', 'virtual-key'])
    const tokens = Math.ceil(JSON.stringify(body).length / 4) + 50
    expect(hold?.items[0]?.amount).toBe(tokens)
    // Worst case of gpt-4o: every prompt token at $2.50/M, 50 output tokens at $10/M, in nano-USD.
    expect(hold?.items[2]?.amount).toBe(Math.ceil((tokens - 50) * 2.5 * 1000 + 50 * 10 * 1000))
    expect(new Set(hold?.items.map((item) => item.counter.key)).size).toBe(4)
    expect(hold?.items.every((item) => item.counter.key.includes(`{${h.workspaceId}}`))).toBe(true)

    replied(ctx, 200, USAGE)
    await finish(h, ctx)
    expect(await used(h, ctx, 0)).toBe(1500)
    expect(await used(h, ctx, 3)).toBe(1500)
    expect(await used(h, ctx, 2)).toBe(7_250_000)
    await h.book.flush()
    expect(h.store.totalsByKey.get(hold?.items[0]?.counter.key as string)).toBe(1500)
  })

  it('charges 0 for a model without a price, counts it, and still charges tokens', async () => {
    const h = await harness()
    const ctx = request(h, [subject('api-key', [rule({ type: 'cost', creditLimit: 1 }), rule({ creditLimit: 100_000 })])], {
      model: 'my-private-finetune',
      messages: [],
      max_tokens: 10,
    })
    expect(await h.plugin.onAccess(ctx)).toBeUndefined()
    expect(ctx.budgetHold?.items[0]?.amount).toBe(0)
    replied(ctx, 200, USAGE)
    await finish(h, ctx)
    expect(h.plugin.stats().unpricedRequests).toBe(1)
    expect(await used(h, ctx, 0)).toBe(0)
    expect(await used(h, ctx, 1)).toBe(1500)
  })

  it('charges nothing when the provider did not answer successfully, and releases the reservation', async () => {
    const h = await harness()
    const keySubject = subject('api-key', [rule({ creditLimit: 200 })])
    const ctx = request(h, [keySubject], { model: 'gpt-4o', messages: [], max_tokens: 150 })
    expect(await h.plugin.onAccess(ctx)).toBeUndefined()
    replied(ctx, 502, null)
    await finish(h, ctx)
    expect(await used(h, ctx)).toBe(0)
    // The reservation is gone: another large request fits.
    const again = request(h, [keySubject], { model: 'gpt-4o', messages: [], max_tokens: 150 })
    expect(await h.plugin.onAccess(again)).toBeUndefined()
  })

  it('charges the reservation when a successful reply reported no usage', async () => {
    const h = await harness()
    const ctx = request(h, [subject('api-key', [rule({ creditLimit: 10_000 })])], { model: 'gpt-4o', messages: [], max_tokens: 40, stream: true })
    await h.plugin.onAccess(ctx)
    replied(ctx, 200, null)
    await finish(h, ctx)
    expect(await used(h, ctx)).toBe(ctx.budgetHold?.items[0]?.amount)
  })

  it("settles in onLog itself, with the usage forward's onLog (the terminal's, run first) filled: no deferral", async () => {
    const inner = new InProcessBudgetLedger({ now: () => NOW })
    const settled: number[][] = []
    const spy = new Proxy(inner, {
      get(target, property) {
        if (property === 'settle') {
          return (items: ReadonlyArray<{ actual: number }>, lease: number) => {
            settled.push(items.map((item) => item.actual))
            return target.settle(items as Parameters<BudgetLedger['settle']>[0], lease)
          }
        }
        const value: unknown = Reflect.get(target, property, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const h = await harness({ ledger: spy })
    const ctx = request(h, [subject('api-key', [rule({ creditLimit: 100_000 })])], { model: 'gpt-4o', messages: [], max_tokens: 50 })
    expect(await h.plugin.onAccess(ctx)).toBeUndefined()
    replied(ctx, 200, USAGE)
    h.plugin.onLog(ctx)
    // Synchronously: the pipeline clears the reply tail right after onLog, and nothing waits for a later turn.
    expect(settled).toEqual([[1500]])
    await h.plugin.close()
  })

  it('answers 412 budget_exceeded_error naming the entity once usage reached the limit', async () => {
    const h = await harness()
    const keySubject = subject('api-key', [rule({ creditLimit: 1500, periodicReset: 'monthly' })], 'API key gw********abc')
    const first = request(h, [keySubject], { model: 'gpt-4o', messages: [], max_tokens: 10 })
    expect(await h.plugin.onAccess(first)).toBeUndefined()
    replied(first, 200, USAGE)
    await finish(h, first)

    const refused = await h.plugin.onAccess(request(h, [keySubject], { model: 'gpt-4o', messages: [], max_tokens: 10 }))
    expect(refused).toBeInstanceOf(GatewayError)
    const error = refused as GatewayError
    expect(error.status).toBe(412)
    expect(error.type).toBe('budget_exceeded_error')
    expect(error.code).toBe('GW_BUDGET_EXHAUSTED')
    expect(error.message).toContain('API key gw********abc')
    expect(error.message).toContain('1500 of its 1500 tokens')
    expect(error.message).toContain('2024-06-01T00:00:00.000Z')
  })

  it('reserves nothing when one subject is used up (all or nothing), and names that one', async () => {
    const h = await harness()
    const roomy = subject('api-key', [rule({ creditLimit: 1_000_000 })])
    const tight = subject('workspace', [rule({ creditLimit: 0 })], 'workspace ws-team-3f9a1c')
    const refused = (await h.plugin.onAccess(request(h, [roomy, tight], { model: 'gpt-4o', messages: [] }))) as GatewayError
    expect(refused.status).toBe(412)
    expect(refused.message).toContain('workspace ws-team-3f9a1c')
    const probe = request(h, [roomy], { model: 'gpt-4o', messages: [] })
    await h.plugin.onAccess(probe)
    const key = probe.budgetHold?.items[0]?.counter.key as string
    // Only the probe's reservation is there; the refused request left nothing behind.
    replied(probe, 502, null)
    await finish(h, probe)
    expect((await h.ledger.peek([key]))[0]).toBe(0)
  })

  it('fails closed with 503 when the ledger cannot be reached', async () => {
    const broken: BudgetLedger = Object.assign(new InProcessBudgetLedger(), {
      reserve: async () => {
        throw new Error('connection refused')
      },
    })
    const h = await harness({ ledger: broken })
    const error = (await h.plugin.onAccess(request(h, [subject('api-key', [rule()])], { model: 'gpt-4o', messages: [] }))) as GatewayError
    expect(error.status).toBe(503)
    expect(error.code).toBe('GW_BUDGET_UNAVAILABLE')
  })

  it('fails closed when a counter must be seeded and the usage store is down', async () => {
    const h = await harness()
    h.store.failing = true
    const error = (await h.plugin.onAccess(request(h, [subject('api-key', [rule()])], { model: 'gpt-4o', messages: [] }))) as GatewayError
    expect(error.code).toBe('GW_BUDGET_UNAVAILABLE')
  })

  it('records one alert when usage crosses alert_threshold, and one when it is exhausted', async () => {
    const h = await harness()
    const keySubject = subject('api-key', [rule({ creditLimit: 4000, alertThreshold: 2000 })])
    for (let index = 0; index < 3; index++) {
      const ctx = request(h, [keySubject], { model: 'gpt-4o', messages: [], max_tokens: 10 })
      expect(await h.plugin.onAccess(ctx)).toBeUndefined()
      replied(ctx, 200, USAGE)
      await finish(h, ctx)
    }
    expect(h.audits.map((entry) => [entry.resourceType, entry.action])).toEqual([
      ['budget', 'alert'],
      ['budget', 'exhausted'],
    ])
    const alert = h.audits[0] as AuditEntry
    expect(alert.workspaceId).toBe(h.workspaceId)
    expect(alert.resourceId).toBe(keySubject.id)
    expect(JSON.parse(alert.requestBody as string)).toMatchObject({ entity: keySubject.label, alert_threshold: 2000, current_usage: 3000, credit_limit: 4000 })
  })

  it('does not limit GET requests or callers without usage limits', async () => {
    const h = await harness()
    const get = request(h, [subject('api-key', [rule({ creditLimit: 0 })])], {}, 'GET')
    expect(await h.plugin.onAccess(get)).toBeUndefined()
    const unlimited = request(h, [subject('api-key', [])], { model: 'gpt-4o', messages: [] })
    expect(await h.plugin.onAccess(unlimited)).toBeUndefined()
    expect(unlimited.budgetHold).toBeNull()
  })

  it('seeds a counter from the persisted total after a restart (fresh ledger)', async () => {
    const h = await harness()
    const keySubject = subject('api-key', [rule({ creditLimit: 2000 })])
    const first = request(h, [keySubject], { model: 'gpt-4o', messages: [], max_tokens: 10 })
    await h.plugin.onAccess(first)
    replied(first, 200, USAGE)
    await finish(h, first)
    await h.book.close()

    // A new process: new ledger, same store.
    const ledger = new InProcessBudgetLedger({ now: () => NOW })
    const book = new BudgetBook({ ledger, store: h.store, notifier: new InProcessChangeNotifier(), clock: { now: () => NOW }, logger: SILENT, persistIntervalMs: 60_000 })
    await book.start()
    const usage = await book.usage(keySubject, h.workspaceId, keySubject.usageLimits)
    expect(usage).toEqual([{ currentUsage: 1500, lastResetAt: null, exhausted: false }])
    const plugin = new BudgetPlugin({
      config: budgetConfigSchema.parse({}),
      book,
      prices: loadPriceTable(),
      store: {} as AdminStore,
      clock: { now: () => NOW },
      logger: SILENT,
    })
    const second = request(h, [keySubject], { model: 'gpt-4o', messages: [], max_tokens: 10 })
    expect(await plugin.onAccess(second)).toBeUndefined()
    expect((await ledger.peek([second.budgetHold?.items[0]?.counter.key as string]))[0]).toBe(1500)
    await book.close()
  })

  it('reset_usage starts new counters on every instance', async () => {
    const h = await harness()
    const keySubject = subject('api-key', [rule({ creditLimit: 1500, periodicReset: 'weekly' })])
    const ctx = request(h, [keySubject], { model: 'gpt-4o', messages: [], max_tokens: 10 })
    await h.plugin.onAccess(ctx)
    replied(ctx, 200, USAGE)
    await finish(h, ctx)
    expect((await h.book.usage(keySubject, h.workspaceId, keySubject.usageLimits))[0]).toMatchObject({ currentUsage: 1500, exhausted: true })
    expect(((await h.plugin.onAccess(request(h, [keySubject], { model: 'gpt-4o', messages: [] }))) as GatewayError).status).toBe(412)

    await h.book.reset(keySubject)
    expect((await h.book.usage(keySubject, h.workspaceId, keySubject.usageLimits))[0]).toEqual({
      currentUsage: 0,
      lastResetAt: new Date(NOW).toISOString(),
      exhausted: false,
    })
    expect(await h.plugin.onAccess(request(h, [keySubject], { model: 'gpt-4o', messages: [] }))).toBeUndefined()
    expect([...h.store.resets.values()]).toEqual([{ kind: 'api-key', id: keySubject.id, resetAt: NOW }])
  })
})
