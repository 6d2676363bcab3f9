/**
 * Limits per upstream attempt of a config-routed request (issue 15 item 4): the virtual-key,
 * rate-limit and budget plugins' onAttempt / onAttemptEnd / onLog, run in the gate's order
 * (virtual-key 800, rate-limit 700, budget 600) on real RequestContext and Attempt objects, with the
 * real limiters and ledgers: in process, and in Redis (the test services' server).
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest'
import { AesGcmSecretCipher } from '../../../adapters/crypto/aes-gcm-secret-cipher.js'
import { InProcessBudgetLedger } from '../../../adapters/memory/in-process-budget-ledger.js'
import { InProcessChangeNotifier } from '../../../adapters/memory/in-process-change-notifier.js'
import { InProcessRateLimiter } from '../../../adapters/memory/in-process-rate-limiter.js'
import { RedisBudgetLedger } from '../../../adapters/redis/redis-budget-ledger.js'
import { RedisRateLimiter } from '../../../adapters/redis/redis-rate-limiter.js'
import { loadPriceTable } from '../../../config/pricing.js'
import type { RateLimitRule, UsageLimitRule, VirtualKeyRecord } from '../../../core/admin-records.js'
import type { BudgetLedger } from '../../../core/budgets.js'
import { Attempt, ClientAbort, RequestContext, type Principal, type Usage } from '../../../core/context.js'
import { GatewayError } from '../../../core/errors.js'
import type { BucketAcquire, BucketSpec, LimitSubject } from '../../../core/limits.js'
import type { HookResult } from '../../../core/plugin.js'
import type { AdminStore } from '../../../core/ports.js'
import type { RateLimitDecision, RateLimiter } from '../../../core/rate-limits.js'
import { compileRoutingConfig, type ConfigNodeInput, type RoutingNode, type RoutingTarget } from '../../../core/routing-config.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../../core/routes.js'
import type { Logger } from '../../../core/service.js'
import { BudgetBook } from '../../../plugins/budget/book.js'
import { budgetConfigSchema } from '../../../plugins/budget/config.js'
import { budget as budgetDefinition } from '../../../plugins/budget/index.js'
import { BudgetPlugin } from '../../../plugins/budget/plugin.js'
import { rateLimit as rateLimitDefinition } from '../../../plugins/rate-limit/index.js'
import { RateLimitPlugin } from '../../../plugins/rate-limit/plugin.js'
import { virtualKeyConfigSchema } from '../../../plugins/virtual-key/config.js'
import { virtualKey as virtualKeyDefinition } from '../../../plugins/virtual-key/index.js'
import { VirtualKeyPlugin } from '../../../plugins/virtual-key/plugin.js'
import { MemoryUsageStore } from '../../contract/budget-fixtures.js'

const CHAT = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec
const SILENT: Logger = { debug() {}, info() {}, warn() {}, error() {} }
const NOW = Date.parse('2030-01-01T00:00:00.000Z')
const ORG = randomUUID()
const cipher = new AesGcmSecretCipher(randomBytes(32))
const BODY = { model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 50 }
/** A token budget's reservation for BODY: prompt bytes / 4 plus max_tokens. */
const WORST_CASE = Math.ceil(Buffer.byteLength(JSON.stringify(BODY)) / 4) + BODY.max_tokens
const USAGE: Usage = { promptTokens: 60, completionTokens: 30, totalTokens: 90, cachedTokens: 0 }
const UPSTREAM = { provider: 'openai', origin: 'http://127.0.0.1', basePath: '/v1', authHeaders: [], authQuery: '' } as const

function tokensBudget(creditLimit: number): UsageLimitRule {
  return { type: 'tokens', creditLimit, alertThreshold: null, periodicReset: null, periodicResetDays: null }
}

/** The two store methods virtual-key uses. */
class FakeStore {
  readonly keys = new Map<string, VirtualKeyRecord>()
  down = false
  async findVirtualKey(organisationId: string, idOrSlug: string): Promise<VirtualKeyRecord | null> {
    if (this.down) throw new Error('connection refused')
    for (const key of this.keys.values()) {
      if (key.organisationId === organisationId && (key.id === idOrSlug || key.slug === idOrSlug)) return key
    }
    return null
  }
  async sampleSealedSecret(): Promise<string | null> {
    return null
  }
}

/** Records every limiter call, so a test can tell a call that was made from one that was not. */
class SpyLimiter implements RateLimiter {
  readonly acquires: BucketAcquire[][] = []
  readonly charges: Array<Array<{ bucket: BucketSpec; amount: number }>> = []
  /** Charges still running (the plugin does not wait for them). */
  readonly pending = new Set<Promise<void>>()
  constructor(readonly inner: RateLimiter) {}
  start(): Promise<void> {
    return this.inner.start()
  }
  close(): Promise<void> {
    return this.inner.close()
  }
  health() {
    return this.inner.health()
  }
  acquire(requests: readonly BucketAcquire[], nowMs: number): Promise<RateLimitDecision> {
    this.acquires.push([...requests])
    return this.inner.acquire(requests, nowMs)
  }
  charge(charges: ReadonlyArray<{ bucket: BucketSpec; amount: number }>, nowMs: number): Promise<void> {
    this.charges.push(charges.map((entry) => ({ ...entry })))
    const charging = this.inner.charge(charges, nowMs)
    this.pending.add(charging)
    const done = (): void => void this.pending.delete(charging)
    charging.then(done, done)
    return charging
  }
}

interface Backend {
  readonly name: string
  limiter(): Promise<RateLimiter>
  ledger(): Promise<BudgetLedger>
}

const BACKENDS: Backend[] = [
  {
    name: 'in process',
    limiter: async () => new InProcessRateLimiter(),
    ledger: async () => new InProcessBudgetLedger({ now: () => NOW }),
  },
  {
    name: 'Redis',
    limiter: async () => {
      const limiter = new RedisRateLimiter({ url: inject('redisUrl') })
      await limiter.start()
      return limiter
    },
    ledger: async () => {
      const ledger = new RedisBudgetLedger({ url: inject('redisUrl') })
      await ledger.start()
      return ledger
    },
  },
]

describe('limit plugins declare the attempt phases', () => {
  it('virtual-key onRequest and onAttempt; rate-limit and budget onAccess, onAttempt, onAttemptEnd, onLog', () => {
    expect(virtualKeyDefinition.phases).toEqual(['onRequest', 'onAttempt'])
    expect(rateLimitDefinition.phases).toEqual(['onAccess', 'onAttempt', 'onAttemptEnd', 'onLog'])
    expect(budgetDefinition.phases).toEqual(['onAccess', 'onAttempt', 'onAttemptEnd', 'onLog'])
  })
})

describe.each(BACKENDS)('limits per attempt ($name)', (backend) => {
  let store: FakeStore
  let workspaceId: string
  let limiter: SpyLimiter
  let ledger: BudgetLedger
  let book: BudgetBook
  let virtualKeys: VirtualKeyPlugin
  let rateLimits: RateLimitPlugin
  let budgets: BudgetPlugin

  beforeEach(async () => {
    store = new FakeStore()
    workspaceId = randomUUID()
    limiter = new SpyLimiter(await backend.limiter())
    ledger = await backend.ledger()
    const notifier = new InProcessChangeNotifier()
    const clock = { now: () => NOW }
    book = new BudgetBook({ ledger, store: new MemoryUsageStore(), notifier, clock, logger: SILENT, persistIntervalMs: 60_000 })
    await book.start()
    virtualKeys = new VirtualKeyPlugin(virtualKeyConfigSchema.parse({}), store as unknown as AdminStore, cipher, notifier, clock, SILENT)
    await virtualKeys.start()
    rateLimits = new RateLimitPlugin({ failMode: 'closed' }, limiter, clock, SILENT)
    budgets = new BudgetPlugin({
      config: budgetConfigSchema.parse({ defaultMaxOutputTokens: 100 }),
      book,
      prices: loadPriceTable(),
      store: { recordAudit: async () => {} } as unknown as AdminStore,
      clock,
      logger: SILENT,
    })
  })

  afterEach(async () => {
    await budgets.close()
    await virtualKeys.close()
    await book.close()
    await limiter.close()
    await ledger.close()
  })

  function addKey(options: { rateLimits?: RateLimitRule[]; usageLimits?: UsageLimitRule | null; keys?: string[]; workspace?: string; expiresAt?: string | null } = {}): VirtualKeyRecord {
    const stamp = new Date(NOW).toISOString()
    const record: VirtualKeyRecord = {
      id: randomUUID(),
      slug: `vk-${randomBytes(4).toString('hex')}`,
      organisationId: ORG,
      workspaceId: options.workspace ?? workspaceId,
      name: 'vk',
      note: null,
      provider: 'openai',
      sealedKeys: (options.keys ?? ['sk-vk']).map((key) => cipher.seal(key)),
      maskedKey: null,
      customHost: null,
      sealedModelConfig: null,
      rateLimits: options.rateLimits ?? [],
      usageLimits: options.usageLimits ?? null,
      status: 'active',
      expiresAt: options.expiresAt ?? null,
      createdAt: stamp,
      lastUpdatedAt: stamp,
    }
    store.keys.set(record.id, record)
    return record
  }

  /** The leaves of a compiled config, in order. */
  function targetsOf(config: ConfigNodeInput): RoutingTarget[] {
    const leaves: RoutingTarget[] = []
    const walk = (node: RoutingNode): void => {
      if (node.kind === 'target') leaves.push(node.target)
      else node.children.forEach(walk)
    }
    walk(compileRoutingConfig(config, null).root)
    return leaves
  }

  function fallback(...slugs: string[]): RoutingTarget[] {
    return targetsOf({ strategy: { mode: 'fallback' }, targets: slugs.map((slug) => ({ virtual_key: slug })) })
  }

  function request(options: { subjects?: LimitSubject[]; headers?: Record<string, string>; body?: Record<string, unknown> } = {}): RequestContext {
    const ctx = new RequestContext({
      requestId: randomUUID(),
      traceId: 'trace',
      receivedAt: NOW,
      startedAt: 0,
      method: 'POST',
      path: CHAT.pattern,
      query: '',
      headers: options.headers ?? {},
      clientIp: null,
      route: CHAT,
      params: {},
      signal: new ClientAbort(),
    })
    const body = options.body ?? BODY
    ctx.body = body
    ctx.rawBody = Buffer.from(JSON.stringify(body))
    const principal: Principal = {
      kind: 'api-key',
      keyId: randomUUID(),
      keyType: 'workspace-service',
      organisationId: ORG,
      workspaceId,
      userId: null,
      scopes: new Set(['completions.write']),
      credentialHeader: 'x-gateway-api-key',
      limitSubjects: options.subjects ?? [],
    }
    ctx.principal = principal
    ctx.attempts = []
    return ctx
  }

  /** A new attempt of `target`, recorded in `ctx.attempts` as forward does. */
  function attemptOf(ctx: RequestContext, target: RoutingTarget, body: Record<string, unknown> | null = ctx.body): Attempt {
    const attempts = ctx.attempts as Attempt[]
    const attempt = new Attempt({
      index: attempts.length,
      target,
      retry: 0,
      body,
      rawBody: body === null ? null : Buffer.from(JSON.stringify(body)),
      startedAt: 0,
    })
    attempts.push(attempt)
    return attempt
  }

  /** The gate's `admit`: the onAttempt hooks by priority until one answers. */
  async function admit(ctx: RequestContext, attempt: Attempt): Promise<HookResult> {
    for (const hook of [virtualKeys, rateLimits, budgets]) {
      attempt.hooksRan += 1
      const result = await hook.onAttempt(ctx, attempt)
      if (result !== undefined) return result
    }
    return undefined
  }

  /** The gate's `end`: onAttemptEnd of the plugins whose onAttempt ran (virtual-key has none). */
  function end(ctx: RequestContext, attempt: Attempt): void {
    if (attempt.hooksRan >= 2) rateLimits.onAttemptEnd(ctx, attempt)
    if (attempt.hooksRan >= 3) budgets.onAttemptEnd(ctx, attempt)
  }

  /** Forward served `attempt` with `usage`; then onLog as the pipeline runs it (forward's first). */
  async function serve(ctx: RequestContext, attempt: Attempt, usage: Usage | null, status = 200): Promise<void> {
    attempt.status = status
    ctx.attempt = attempt
    ctx.target = UPSTREAM
    ctx.model = 'gpt-4o'
    ctx.status = status
    ctx.outcome = 'completed'
    ctx.usage = usage
    await log(ctx)
  }

  async function log(ctx: RequestContext): Promise<void> {
    rateLimits.onLog(ctx)
    budgets.onLog(ctx)
    await settled()
  }

  /** Budget settlements and limiter charges run after the hook returns. */
  async function settled(): Promise<void> {
    await budgets.close()
    await Promise.allSettled([...limiter.pending])
  }

  async function used(subject: LimitSubject): Promise<number | null> {
    const counter = book.plan(subject, workspaceId, 0, subject.usageLimits[0] as UsageLimitRule, NOW).counter
    return (await ledger.peek([counter.key]))[0] ?? null
  }

  function subjectOf(record: VirtualKeyRecord): LimitSubject {
    return {
      kind: 'virtual-key',
      id: record.id,
      label: `virtual key ${record.slug}`,
      rateLimits: record.rateLimits,
      usageLimits: record.usageLimits === null ? [] : [record.usageLimits],
    }
  }

  function expectError(result: HookResult, status: number, code: string): GatewayError {
    expect(result).toBeInstanceOf(GatewayError)
    const error = result as GatewayError
    expect(error.status).toBe(status)
    expect(error.code).toBe(code)
    return error
  }

  it("resolves the target's virtual key into the attempt only: a 1 request/min key admits one attempt, refuses the next with 429, and the fallback key serves", async () => {
    const a = addKey({ rateLimits: [{ type: 'requests', unit: 'rpm', value: 1 }] })
    const b = addKey({ keys: ['sk-b'] })
    const [first, second] = fallback(a.slug, b.slug) as [RoutingTarget, RoutingTarget]

    const one = request()
    const served = attemptOf(one, first)
    expect(await admit(one, served)).toBeUndefined()
    expect(served.credential).toMatchObject({ virtualKeySlug: a.slug, provider: 'openai', apiKey: 'sk-vk' })
    expect(served.virtualKey?.id).toBe(a.id)
    // The request's own slots stay untouched: the attempt carries its key.
    expect(one.credential).toBeNull()
    expect(one.virtualKey).toBeNull()
    await serve(one, served, USAGE)

    const two = request()
    const refused = attemptOf(two, first)
    const error = expectError(await admit(two, refused), 429, 'GW_RATE_LIMITED')
    expect(error.message).toContain(`virtual key ${a.slug}`)
    expect(Number(error.headers?.find(([name]) => name === 'retry-after')?.[1])).toBeGreaterThanOrEqual(1)
    // Refused by rate-limit: budget's onAttempt did not run.
    expect(refused.hooksRan).toBe(2)
    end(two, refused)
    const next = attemptOf(two, second)
    expect(await admit(two, next)).toBeUndefined()
    expect(next.credential?.apiKey).toBe('sk-b')
    expect(next.virtualKey?.id).toBe(b.id)
    await serve(two, next, USAGE)
  })

  it('makes no limiter or ledger call for a target whose virtual key has no limits, and answers synchronously once the key is cached', async () => {
    const plain = addKey()
    const [target] = fallback(plain.slug) as [RoutingTarget]
    const warm = request()
    expect(await admit(warm, attemptOf(warm, target))).toBeUndefined()
    const ctx = request()
    const attempt = attemptOf(ctx, target)
    expect(virtualKeys.onAttempt(ctx, attempt)).toBeUndefined()
    expect(rateLimits.onAttempt(ctx, attempt)).toBeUndefined()
    expect(budgets.onAttempt(ctx, attempt)).toBeUndefined()
    expect(limiter.acquires).toEqual([])
    expect(attempt.rateLimitHold).toBeNull()
    expect(attempt.budgetHold).toBeNull()
  })

  it('releases the budget of an attempt that is not the reply at once: repeated released attempts never exhaust a key that fits one request', async () => {
    const a = addKey({ usageLimits: tokensBudget(WORST_CASE) })
    const [target] = fallback(a.slug) as [RoutingTarget]
    const subject = subjectOf(a)

    const held = request()
    const holding = attemptOf(held, target)
    expect(await admit(held, holding)).toBeUndefined()
    expect(holding.budgetHold?.items.map((item) => [item.subject.id, item.amount])).toEqual([[a.id, WORST_CASE]])
    // The reservation holds the whole budget: a concurrent attempt is refused with 412.
    const concurrent = request()
    const refused = attemptOf(concurrent, target)
    const error = expectError(await admit(concurrent, refused), 412, 'GW_BUDGET_EXHAUSTED')
    expect(error.message).toContain(`virtual key ${a.slug}`)
    end(concurrent, refused)
    end(held, holding)
    expect(holding.budgetHold).toBeNull()

    for (let i = 0; i < 5; i++) {
      const ctx = request()
      const attempt = attemptOf(ctx, target)
      expect(await admit(ctx, attempt)).toBeUndefined()
      // Failed upstream (a 500): the router ends it, then another target serves or the request fails.
      attempt.status = 500
      end(ctx, attempt)
      await settled()
    }
    expect(await used(subject)).toBe(0)
    const last = request()
    expect(await admit(last, attemptOf(last, target))).toBeUndefined()
  })

  it('settles the served attempt with the real usage on the key that served, and charges the failed one nothing', async () => {
    const a = addKey({ usageLimits: tokensBudget(100_000) })
    const b = addKey({ usageLimits: tokensBudget(100_000), rateLimits: [{ type: 'tokens', unit: 'rpm', value: 100 }] })
    const workspace: LimitSubject = { kind: 'workspace', id: workspaceId, label: 'workspace ws', rateLimits: [], usageLimits: [tokensBudget(100_000)] }
    const [first, second] = fallback(a.slug, b.slug) as [RoutingTarget, RoutingTarget]

    const ctx = request({ subjects: [workspace] })
    // The request-level reservation (the workspace's), as onAccess makes it.
    expect(await budgets.onAccess(ctx)).toBeUndefined()
    const failed = attemptOf(ctx, first)
    expect(await admit(ctx, failed)).toBeUndefined()
    failed.status = 503
    end(ctx, failed)
    const winner = attemptOf(ctx, second)
    expect(await admit(ctx, winner)).toBeUndefined()
    expect(winner.rateLimitHold?.tokenBuckets).toHaveLength(1)
    await serve(ctx, winner, USAGE)

    expect(await used(subjectOf(a))).toBe(0)
    expect(await used(subjectOf(b))).toBe(USAGE.totalTokens)
    expect(await used(workspace)).toBe(USAGE.totalTokens)
    expect(winner.budgetHold).toBeNull()
    // The served key's tokens bucket was charged the usage (one call with the request's buckets).
    expect(limiter.charges.flat().map((charge) => [charge.bucket.key.includes(b.id), charge.amount])).toEqual([[true, USAGE.totalTokens]])
    // 90 of its 100 tokens per minute used: an attempt asking for max_tokens 50 is refused.
    const again = request()
    expectError(await admit(again, attemptOf(again, second)), 429, 'GW_RATE_LIMITED')
  })

  it('charges nothing for a served cache hit: no budget on the attempt or the request, no tokens', async () => {
    const a = addKey({ usageLimits: tokensBudget(100_000), rateLimits: [{ type: 'tokens', unit: 'rpm', value: 1000 }] })
    const workspace: LimitSubject = { kind: 'workspace', id: workspaceId, label: 'workspace ws', rateLimits: [], usageLimits: [tokensBudget(100_000)] }
    const [target] = fallback(a.slug) as [RoutingTarget]
    const ctx = request({ subjects: [workspace] })
    expect(await budgets.onAccess(ctx)).toBeUndefined()
    const hit = attemptOf(ctx, target)
    expect(await admit(ctx, hit)).toBeUndefined()
    // The cache plugin answers it (after budget); forward serves it without a provider call.
    hit.cacheStatus = 'HIT'
    await serve(ctx, hit, null)
    expect(await used(subjectOf(a))).toBe(0)
    expect(await used(workspace)).toBe(0)
    expect(limiter.charges).toEqual([])
  })

  it('releases, in onLog, an attempt the router left neither ended nor served', async () => {
    const a = addKey({ usageLimits: tokensBudget(WORST_CASE) })
    const b = addKey()
    const [first, second] = fallback(a.slug, b.slug) as [RoutingTarget, RoutingTarget]
    const ctx = request()
    const abandoned = attemptOf(ctx, first)
    expect(await admit(ctx, abandoned)).toBeUndefined()
    const winner = attemptOf(ctx, second)
    expect(await admit(ctx, winner)).toBeUndefined()
    await serve(ctx, winner, USAGE)
    expect(abandoned.budgetHold).toBeNull()
    expect(await used(subjectOf(a))).toBe(0)
    // The reservation (the whole budget) is gone, not merely uncharged: the next attempt fits.
    const next = request()
    expect(await admit(next, attemptOf(next, first))).toBeUndefined()
  })

  it("answers another workspace's or an unknown virtual key in a target with 404 naming the target, expired with 401, a store outage with 503", async () => {
    const foreign = addKey({ workspace: randomUUID(), rateLimits: [{ type: 'requests', unit: 'rpm', value: 1 }] })
    const expired = addKey({ expiresAt: new Date(NOW - 1).toISOString() })
    const targets = fallback(addKey().slug, foreign.slug, 'no-such-key', expired.slug)

    const ctx = request()
    const other = attemptOf(ctx, targets[1] as RoutingTarget)
    const error = expectError(await admit(ctx, other), 404, 'GW_VIRTUAL_KEY_NOT_FOUND')
    expect(error.param).toBe('config.targets[1].virtual_key')
    expect(other.credential).toBeNull()
    expect(other.virtualKey).toBeNull()
    // Reported exactly like an unknown key.
    const unknown = expectError(await admit(ctx, attemptOf(ctx, targets[2] as RoutingTarget)), 404, 'GW_VIRTUAL_KEY_NOT_FOUND')
    expect(unknown.message).toBe(error.message.replace(foreign.slug, 'no-such-key'))
    expect(unknown.param).toBe('config.targets[2].virtual_key')
    expectError(await admit(ctx, attemptOf(ctx, targets[3] as RoutingTarget)), 401, 'GW_VIRTUAL_KEY_EXPIRED')
    expect(limiter.acquires).toEqual([])

    store.down = true
    expectError(await admit(ctx, attemptOf(ctx, targets[0] as RoutingTarget)), 503, 'GW_VIRTUAL_KEY_UNAVAILABLE')
  })

  it('refuses an attempt with 400 when the request already holds a virtual key of its own (x-gateway-virtual-key next to a config)', async () => {
    const own = addKey({ rateLimits: [{ type: 'requests', unit: 'rpm', value: 5 }] })
    const target = addKey({ rateLimits: [{ type: 'requests', unit: 'rpm', value: 5 }] })
    const ctx = request({ headers: { 'x-gateway-virtual-key': own.slug } })
    expect(await virtualKeys.onRequest(ctx)).toBeUndefined()
    const attempt = attemptOf(ctx, fallback(target.slug)[0] as RoutingTarget)
    const error = expectError(await admit(ctx, attempt), 400, 'GW_REQ_INVALID')
    expect(error.param).toBe('x-gateway-virtual-key')
    expect(error.message).toContain("Put the virtual key in the config's target")
    expect(attempt.credential).toBeNull()
    expect(limiter.acquires).toEqual([])
  })

  it("uses a target's provider keys in turn across attempts, sharing the turn with the header", async () => {
    const key = addKey({ keys: ['sk-1', 'sk-2', 'sk-3'] })
    const [target] = fallback(key.slug) as [RoutingTarget]
    const ctx = request()
    const seen: Array<string | null> = []
    for (let i = 0; i < 2; i++) {
      const attempt = attemptOf(ctx, target)
      await admit(ctx, attempt)
      seen.push(attempt.credential?.apiKey ?? null)
    }
    const header = request({ headers: { 'x-gateway-virtual-key': key.slug } })
    await virtualKeys.onRequest(header)
    seen.push(header.credential?.apiKey ?? null)
    const attempt = attemptOf(ctx, target)
    await admit(ctx, attempt)
    seen.push(attempt.credential?.apiKey ?? null)
    expect(seen).toEqual(['sk-1', 'sk-2', 'sk-3', 'sk-1'])
  })

  it("estimates an attempt's worst case from the body it sends (override_params included)", async () => {
    const a = addKey({ usageLimits: tokensBudget(1_000_000), rateLimits: [{ type: 'tokens', unit: 'rpm', value: 1000 }] })
    const [target] = targetsOf({ strategy: { mode: 'fallback' }, targets: [{ virtual_key: a.slug, override_params: { max_tokens: 700 } }] }) as [RoutingTarget]
    const ctx = request()
    const sent = { ...BODY, ...target.overrideParams }
    const attempt = attemptOf(ctx, target, sent)
    expect(await admit(ctx, attempt)).toBeUndefined()
    expect(attempt.budgetHold?.items[0]?.amount).toBe(Math.ceil(Buffer.byteLength(JSON.stringify(sent)) / 4) + 700)
    expect(limiter.acquires.at(-1)?.[0]?.require).toBe(700)
    end(ctx, attempt)
  })
})
