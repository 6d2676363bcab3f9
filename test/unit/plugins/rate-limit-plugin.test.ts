import { describe, expect, it } from 'vitest'
import { InProcessRateLimiter } from '../../../adapters/memory/in-process-rate-limiter.js'
import { ClientAbort, RequestContext, type Principal, type UpstreamTarget } from '../../../core/context.js'
import { isGatewayError, type GatewayError } from '../../../core/errors.js'
import type { BucketAcquire, BucketSpec, LimitSubject } from '../../../core/limits.js'
import type { RateLimitDecision, RateLimiter } from '../../../core/rate-limits.js'
import { RouteTable, type RouteSpec } from '../../../core/routes.js'
import type { Logger } from '../../../core/service.js'
import { rateLimitConfigSchema } from '../../../plugins/rate-limit/config.js'
import { rateLimit } from '../../../plugins/rate-limit/index.js'
import { RateLimitPlugin } from '../../../plugins/rate-limit/plugin.js'

const WORKSPACE = '11111111-1111-4111-8111-111111111111'
const KEY_ID = '22222222-2222-4222-8222-222222222222'
const VK_ID = '33333333-3333-4333-8333-333333333333'
const T0 = 1_800_000_000_000

const routes = new RouteTable()
function routeOf(method: string, path: string, provider = true): RouteSpec {
  const found = routes.lookup(method, path, provider)
  if (found.kind !== 'route') throw new Error(`no route ${method} ${path}`)
  return found.match.route
}
const CHAT = routeOf('POST', '/v1/chat/completions')
const PASSTHROUGH = routeOf('POST', '/v1/rerank')

const TARGET: UpstreamTarget = { provider: 'openai', origin: 'http://127.0.0.1', basePath: '/v1', authHeaders: [], authQuery: '' }

class FakeClock {
  now(): number {
    return this.at
  }
  constructor(public at = T0) {}
}

/** Wraps a limiter and records every call. */
class SpyLimiter implements RateLimiter {
  readonly acquires: BucketAcquire[][] = []
  readonly charges: Array<Array<{ bucket: BucketSpec; amount: number }>> = []
  constructor(readonly inner: RateLimiter = new InProcessRateLimiter()) {}
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
    return this.inner.charge(charges, nowMs)
  }
}

class FailingLimiter extends SpyLimiter {
  override acquire(): Promise<RateLimitDecision> {
    return Promise.reject(new Error('connection refused'))
  }
  override charge(): Promise<void> {
    return Promise.reject(new Error('connection refused'))
  }
}

function recordingLogger(): Logger & { warnings: Array<{ fields: Record<string, unknown>; message: string | undefined }> } {
  const warnings: Array<{ fields: Record<string, unknown>; message: string | undefined }> = []
  return { debug() {}, info() {}, error() {}, warn: (fields, message) => void warnings.push({ fields: fields as Record<string, unknown>, message }), warnings }
}

function apiKey(rateLimits: LimitSubject['rateLimits']): LimitSubject {
  return { kind: 'api-key', id: KEY_ID, label: 'API key gw********abc', rateLimits, usageLimits: [] }
}
function workspace(rateLimits: LimitSubject['rateLimits']): LimitSubject {
  return { kind: 'workspace', id: WORKSPACE, label: 'workspace ws-team-3f9a1c', rateLimits, usageLimits: [] }
}
function virtualKey(rateLimits: LimitSubject['rateLimits']): LimitSubject {
  return { kind: 'virtual-key', id: VK_ID, label: 'virtual key ma********4d', rateLimits, usageLimits: [] }
}

function request(
  subjects: readonly LimitSubject[],
  options: { body?: Record<string, unknown> | null; raw?: string; route?: RouteSpec; virtualKey?: LimitSubject; headers?: Record<string, string> } = {},
): RequestContext {
  const route = options.route ?? CHAT
  const ctx = new RequestContext({
    requestId: 'req',
    traceId: 'trace',
    receivedAt: T0,
    startedAt: 0,
    method: route.method,
    path: route.pattern,
    query: '',
    headers: options.headers ?? {},
    clientIp: null,
    route,
    params: {},
    signal: new ClientAbort(),
  })
  const principal: Principal = {
    kind: 'api-key',
    keyId: KEY_ID,
    keyType: 'workspace-service',
    organisationId: 'org',
    workspaceId: WORKSPACE,
    userId: null,
    scopes: new Set(['completions.write']),
    credentialHeader: 'x-gateway-api-key',
    limitSubjects: subjects,
  }
  ctx.principal = principal
  ctx.body = options.body === undefined ? { model: 'm', messages: [] } : options.body
  if (options.raw !== undefined) ctx.rawBody = Buffer.from(options.raw)
  if (options.virtualKey !== undefined) ctx.virtualKey = options.virtualKey
  return ctx
}

function setup(failMode: 'open' | 'closed' = 'open', limiter: SpyLimiter = new SpyLimiter()) {
  const clock = new FakeClock()
  const logger = recordingLogger()
  const plugin = new RateLimitPlugin({ failMode }, limiter, clock, logger)
  return { plugin, limiter, clock, logger }
}

/** Runs onLog the way the pipeline does: forward's onLog (the terminal's, first) fills the usage, then rate-limit's. */
async function finish(plugin: RateLimitPlugin, ctx: RequestContext, totalTokens: number | null, target: UpstreamTarget | null = TARGET): Promise<void> {
  ctx.target = target
  ctx.usage = totalTokens === null ? null : { promptTokens: 0, completionTokens: totalTokens, totalTokens, cachedTokens: 0 }
  plugin.onLog(ctx)
  await new Promise((resolve) => setImmediate(resolve))
}

describe('rate-limit plugin definition', () => {
  it('runs at 700 on the data plane, onAccess, onAttempt, onAttemptEnd and onLog, with failMode open by default', () => {
    expect(rateLimit).toMatchObject({
      name: 'rate-limit',
      priority: 700,
      groups: ['inference', 'passthrough'],
      phases: ['onAccess', 'onAttempt', 'onAttemptEnd', 'onLog'],
    })
    expect(rateLimitConfigSchema.parse({})).toEqual({ failMode: 'open' })
    expect(rateLimitConfigSchema.safeParse({ failMode: 'maybe' }).success).toBe(false)
    expect(rateLimitConfigSchema.safeParse({ other: 1 }).success).toBe(false)
  })
})

describe('rate-limit plugin: the hot path', () => {
  it('never calls the limiter when no subject has rules', async () => {
    const { plugin, limiter } = setup()
    expect(await plugin.onAccess(request([apiKey([]), workspace([])]))).toBeUndefined()
    expect(await plugin.onAccess(request([apiKey([])], { virtualKey: virtualKey([]) }))).toBeUndefined()
    expect(limiter.acquires).toHaveLength(0)
  })

  it('passes requests without a principal (public routes) untouched', async () => {
    const { plugin, limiter } = setup()
    const ctx = request([apiKey([{ type: 'requests', unit: 'rpm', value: 1 }])])
    ctx.principal = null
    expect(await plugin.onAccess(ctx)).toBeUndefined()
    expect(limiter.acquires).toHaveLength(0)
  })
})

describe('rate-limit plugin: requests limits', () => {
  it('lets `value` requests through per window, then answers 429 with Retry-After naming the entity', async () => {
    const { plugin, clock } = setup()
    const subjects = [apiKey([{ type: 'requests', unit: 'rpm', value: 3 }])]
    for (let i = 0; i < 3; i++) expect(await plugin.onAccess(request(subjects))).toBeUndefined()
    const refused = (await plugin.onAccess(request(subjects))) as GatewayError
    expect(isGatewayError(refused)).toBe(true)
    expect(refused).toMatchObject({ status: 429, type: 'rate_limit_error', code: 'GW_RATE_LIMITED', adminCode: 'AB06' })
    expect(refused.message).toBe('Rate limit exceeded for API key gw********abc: 3 requests per minute')
    expect(refused.headers).toEqual([['retry-after', '20']])
    clock.at += 19_001
    expect(((await plugin.onAccess(request(subjects))) as GatewayError).headers).toEqual([['retry-after', '1']])
    clock.at += 999
    expect(await plugin.onAccess(request(subjects))).toBeUndefined()
    expect(plugin.stats()).toEqual({ refused: 2, acquireErrors: 0, chargeErrors: 0 })
  })

  it('checks the key, its workspace and the virtual key in one call, keyed by the workspace hash tag', async () => {
    const { plugin, limiter } = setup()
    const ctx = request([apiKey([{ type: 'requests', unit: 'rps', value: 10 }]), workspace([{ type: 'requests', unit: 'rph', value: 100 }])], {
      virtualKey: virtualKey([{ type: 'requests', unit: 'rpd', value: 1000 }, { type: 'tokens', unit: 'rpw', value: 5000 }]),
    })
    expect(await plugin.onAccess(ctx)).toBeUndefined()
    expect(limiter.acquires).toHaveLength(1)
    expect(limiter.acquires[0]).toEqual([
      { bucket: { key: `rl:{${WORKSPACE}}:api-key:${KEY_ID}:requests:rps`, capacity: 10, windowMs: 1_000 }, take: 1, require: 0 },
      { bucket: { key: `rl:{${WORKSPACE}}:workspace:${WORKSPACE}:requests:rph`, capacity: 100, windowMs: 3_600_000 }, take: 1, require: 0 },
      { bucket: { key: `rl:{${WORKSPACE}}:virtual-key:${VK_ID}:requests:rpd`, capacity: 1000, windowMs: 86_400_000 }, take: 1, require: 0 },
      { bucket: { key: `rl:{${WORKSPACE}}:virtual-key:${VK_ID}:tokens:rpw`, capacity: 5000, windowMs: 604_800_000 }, take: 0, require: 1 },
    ])
  })

  it('names the entity whose limit refused: a workspace limit applies across its keys', async () => {
    const { plugin } = setup()
    const shared = workspace([{ type: 'requests', unit: 'rpm', value: 2 }])
    const otherKey: LimitSubject = { ...apiKey([]), id: 'another-key', label: 'API key gw********xyz' }
    expect(await plugin.onAccess(request([apiKey([]), shared]))).toBeUndefined()
    expect(await plugin.onAccess(request([otherKey, shared]))).toBeUndefined()
    const refused = (await plugin.onAccess(request([otherKey, shared]))) as GatewayError
    expect(refused.message).toBe('Rate limit exceeded for workspace ws-team-3f9a1c: 2 requests per minute')
  })

  it('blocks every request with a rule of value 0', async () => {
    const { plugin } = setup()
    const refused = (await plugin.onAccess(request([apiKey([{ type: 'requests', unit: 'rph', value: 0 }])]))) as GatewayError
    expect(refused.status).toBe(429)
    expect(refused.message).toContain('this limit blocks every request')
    expect(refused.headers).toEqual([['retry-after', '3600']])
  })

  it('merges two rules of the same type and unit into the stricter one', async () => {
    const { plugin, limiter } = setup()
    const subjects = [apiKey([{ type: 'requests', unit: 'rpm', value: 5 }, { type: 'requests', unit: 'rpm', value: 2 }])]
    await plugin.onAccess(request(subjects))
    expect(limiter.acquires[0]?.map((entry) => entry.bucket.capacity)).toEqual([2])
  })

  it('sets no hold when only requests limits apply', async () => {
    const { plugin } = setup()
    const ctx = request([apiKey([{ type: 'requests', unit: 'rpm', value: 5 }])])
    await plugin.onAccess(ctx)
    expect(ctx.rateLimitHold).toBeNull()
  })
})

describe('rate-limit plugin: tokens limits', () => {
  const tpm1000 = (): LimitSubject[] => [apiKey([{ type: 'tokens', unit: 'rpm', value: 1_000 }])]

  it('requires max_tokens (or max_completion_tokens, default 1) to be available, taking nothing', async () => {
    const { plugin, limiter } = setup()
    await plugin.onAccess(request(tpm1000(), { body: { max_tokens: 700 } }))
    await plugin.onAccess(request(tpm1000(), { body: { max_completion_tokens: 300 } }))
    await plugin.onAccess(request(tpm1000(), { body: { messages: [] } }))
    await plugin.onAccess(request(tpm1000(), { body: { max_tokens: 'lots' } }))
    expect(limiter.acquires.map(([entry]) => [entry?.take, entry?.require])).toEqual([
      [0, 700],
      [0, 300],
      [0, 1],
      [0, 1],
    ])
  })

  it('charges the real usage after the reply, so a later request that needs more than is left gets 429', async () => {
    const { plugin, limiter } = setup()
    const first = request(tpm1000(), { body: { max_tokens: 500 } })
    expect(await plugin.onAccess(first)).toBeUndefined()
    expect(first.rateLimitHold?.tokenBuckets.map((bucket) => bucket.key)).toEqual([`rl:{${WORKSPACE}}:api-key:${KEY_ID}:tokens:rpm`])
    await finish(plugin, first, 800)
    expect(limiter.charges).toEqual([[{ bucket: first.rateLimitHold?.tokenBuckets[0], amount: 800 }]])
    expect(await plugin.onAccess(request(tpm1000(), { body: { max_tokens: 200 } }))).toBeUndefined()
    const refused = (await plugin.onAccess(request(tpm1000(), { body: { max_tokens: 201 } }))) as GatewayError
    expect(refused.message).toBe('Rate limit exceeded for API key gw********abc: 1000 tokens per minute')
    // 1 token short at 1000 per minute: 60 ms, rounded up to a second.
    expect(refused.headers).toEqual([['retry-after', '1']])
  })

  it("charges in onLog itself the usage forward's onLog (the terminal's, run first) filled: no deferral", async () => {
    const { plugin, limiter } = setup()
    const ctx = request(tpm1000(), { body: { max_tokens: 10 } })
    expect(await plugin.onAccess(ctx)).toBeUndefined()
    ctx.target = TARGET
    ctx.usage = { promptTokens: 5, completionTokens: 7, totalTokens: 12, cachedTokens: 0 }
    plugin.onLog(ctx)
    expect(limiter.charges).toEqual([[{ bucket: ctx.rateLimitHold?.tokenBuckets[0], amount: 12 }]])
  })

  it('says so when max_tokens alone exceeds the limit', async () => {
    const { plugin } = setup()
    const refused = (await plugin.onAccess(request(tpm1000(), { body: { max_tokens: 4_000 } }))) as GatewayError
    expect(refused.message).toContain('asks for up to 4000 tokens')
    expect(refused.headers).toEqual([['retry-after', '60']])
  })

  it('does not charge replies that never reached a provider (cache hits, early errors) or carry no usage', async () => {
    const { plugin, limiter } = setup()
    const cached = request(tpm1000())
    await plugin.onAccess(cached)
    await finish(plugin, cached, 500, null)
    const noUsage = request(tpm1000())
    await plugin.onAccess(noUsage)
    await finish(plugin, noUsage, null)
    const unlimited = request([apiKey([])])
    await plugin.onAccess(unlimited)
    await finish(plugin, unlimited, 500)
    expect(limiter.charges).toEqual([])
  })

  it('reads the estimate from a pass-through JSON body', async () => {
    const { plugin, limiter } = setup()
    const headers = { 'content-type': 'application/json' }
    await plugin.onAccess(request(tpm1000(), { route: PASSTHROUGH, body: null, raw: '{"max_tokens": 42, "query": "q"}', headers }))
    await plugin.onAccess(request(tpm1000(), { route: PASSTHROUGH, body: null, raw: '{"query": "q"}', headers }))
    await plugin.onAccess(request(tpm1000(), { route: PASSTHROUGH, body: null, raw: '{"max_tokens": 42', headers }))
    await plugin.onAccess(request(tpm1000(), { route: PASSTHROUGH, body: null, raw: 'max_tokens=42', headers: { 'content-type': 'text/plain' } }))
    expect(limiter.acquires.map(([entry]) => entry?.require)).toEqual([42, 1, 1, 1])
  })
})

describe('rate-limit plugin: limiter failures', () => {
  const limited = (): LimitSubject[] => [apiKey([{ type: 'requests', unit: 'rpm', value: 5 }, { type: 'tokens', unit: 'rpm', value: 100 }])]

  it('fails open: passes, counts, logs once per interval with the count', async () => {
    const { plugin, clock, logger } = setup('open', new FailingLimiter())
    const ctx = request(limited())
    expect(await plugin.onAccess(ctx)).toBeUndefined()
    expect(ctx.rateLimitHold).toBeNull()
    expect(await plugin.onAccess(request(limited()))).toBeUndefined()
    expect(await plugin.onAccess(request(limited()))).toBeUndefined()
    expect(plugin.stats()).toEqual({ refused: 0, acquireErrors: 3, chargeErrors: 0 })
    expect(logger.warnings).toHaveLength(1)
    expect(logger.warnings[0]).toMatchObject({ fields: { operation: 'acquire', error: 'connection refused', acquireErrors: 1, suppressed: 0 } })
    clock.at += 10_000
    await plugin.onAccess(request(limited()))
    expect(logger.warnings).toHaveLength(2)
    expect(logger.warnings[1]?.fields).toMatchObject({ acquireErrors: 4, suppressed: 2 })
  })

  it('fails closed: 503 GW_RATE_LIMIT_UNAVAILABLE', async () => {
    const { plugin, logger } = setup('closed', new FailingLimiter())
    const refused = (await plugin.onAccess(request(limited()))) as GatewayError
    expect(refused).toMatchObject({ status: 503, code: 'GW_RATE_LIMIT_UNAVAILABLE', type: 'service_unavailable_error' })
    expect(logger.warnings[0]?.message).toContain('failMode closed')
  })

  it('counts and logs a failed charge without throwing', async () => {
    const inner = new SpyLimiter()
    const limiter = new (class extends SpyLimiter {
      override charge(): Promise<void> {
        return Promise.reject(new Error('gone'))
      }
    })(inner)
    const { plugin, logger } = setup('open', limiter)
    const ctx = request(limited())
    expect(await plugin.onAccess(ctx)).toBeUndefined()
    await finish(plugin, ctx, 50)
    await new Promise((resolve) => setImmediate(resolve))
    expect(plugin.stats().chargeErrors).toBe(1)
    expect(logger.warnings[0]).toMatchObject({ fields: { operation: 'charge', error: 'gone' }, message: 'rate limiter unavailable: token usage not charged' })
  })

  it('survives a throwing logger', async () => {
    const limiter = new FailingLimiter()
    const logger: Logger = {
      debug() {},
      info() {},
      error() {},
      warn() {
        throw new Error('logger broke')
      },
    }
    const plugin = new RateLimitPlugin({ failMode: 'open' }, limiter, new FakeClock(), logger)
    expect(await plugin.onAccess(request(limited()))).toBeUndefined()
  })
})

describe('rate-limit plugin with LimitCoordination (limits ride with the budget ledger call)', () => {
  const budgetRule = { type: 'cost' as const, creditLimit: 10, alertThreshold: null, periodicReset: null, periodicResetDays: null }
  const coordinated = (limiter: SpyLimiter) =>
    new RateLimitPlugin({ failMode: 'open' }, limiter, new FakeClock(), recordingLogger(), { rateLimitsRideWithBudget: true })

  it('stages the buckets for the budget plugin instead of calling the limiter when the request has usage limits', async () => {
    const limiter = new SpyLimiter()
    const plugin = coordinated(limiter)
    const key: LimitSubject = { ...apiKey([{ type: 'requests', unit: 'rpm', value: 1 }]), usageLimits: [budgetRule] }
    const ctx = request([key])
    expect(await plugin.onAccess(ctx)).toBeUndefined()
    expect(limiter.acquires).toHaveLength(0)
    expect(ctx.rateLimitClaim?.acquires).toHaveLength(1)
    expect(ctx.rateLimitClaim?.acquires[0]).toMatchObject({ take: 1, require: 0 })
    // The claim answers a refusal with the plugin's own 429.
    const refusal = ctx.rateLimitClaim?.refusal(0, 2_500) as GatewayError
    expect(refusal.code).toBe('GW_RATE_LIMITED')
    expect(refusal.headers).toContainEqual(['retry-after', '3'])
    expect(plugin.stats().refused).toBe(1)
  })

  it('calls the limiter itself when no usage limit applies (the budget plugin will not run a ledger call)', async () => {
    const limiter = new SpyLimiter()
    const plugin = coordinated(limiter)
    const ctx = request([apiKey([{ type: 'requests', unit: 'rpm', value: 1 }])])
    expect(await plugin.onAccess(ctx)).toBeUndefined()
    expect(limiter.acquires).toHaveLength(1)
    expect(ctx.rateLimitClaim).toBeNull()
  })
})
