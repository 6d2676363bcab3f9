import { describe, expect, it } from 'vitest'
import type { ModelPrice, PriceTable } from '../../../core/budgets.js'
import { Attempt, ClientAbort, RequestContext, type CacheHeaderStatus, type Principal, type ProviderCredential } from '../../../core/context.js'
import { ERRORS, gatewayError, type GatewayError } from '../../../core/errors.js'
import { MAX_LOG_ATTEMPTS } from '../../../core/logs.js'
import { checkRoutingConfig, compileRoutingConfig, type RoutingNode, type RoutingPlan, type RoutingTarget } from '../../../core/routing-config.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../../core/routes.js'
import { cappedBody, recordCost, recordMetadata, toLogRecord, type RecordOptions } from '../../../plugins/log/record.js'

const PRICES: PriceTable = {
  find: (_provider: string | null, model: string): ModelPrice | null =>
    model === 'listed' ? { input: 1, output: 2, cachedInput: null, reasoning: null } : null,
}

describe('log record helpers', () => {
  it('prices usage: null without usage, 0 for an unlisted or unnamed model', () => {
    const usage = { promptTokens: 10, completionTokens: 5, totalTokens: 15, cachedTokens: 0 }
    expect(recordCost(PRICES, 'openai', 'listed', usage)).toBe(10 * 1000 + 5 * 2000)
    expect(recordCost(PRICES, 'openai', 'unlisted', usage)).toBe(0)
    expect(recordCost(PRICES, 'openai', null, usage)).toBe(0)
    expect(recordCost(PRICES, 'openai', 'listed', null)).toBeNull()
  })

  it('keeps bodies up to the limit and marks a cut one', () => {
    expect(cappedBody(null, 4)).toBeNull()
    expect(cappedBody(Buffer.from('abcd'), 4)).toBe('abcd')
    expect(cappedBody(Buffer.from('abcdef'), 4)).toBe('abcd[truncated]')
  })

  it('marks at the start a tail that is only the end of the body', () => {
    expect(cappedBody(Buffer.from('wxyz'), 4, true)).toBe('[truncated]wxyz')
    expect(cappedBody(Buffer.from('uvwxyz'), 4, true)).toBe('[truncated]uvwx[truncated]')
  })

  it('stores the metadata core checked, unless the header is longer than the configured cap', () => {
    const header = '{"_user":"alice"}'
    const checked = { _user: 'alice' }
    expect(recordMetadata({ metadata: checked, headers: { 'x-gateway-metadata': header } }, 8192)).toBe(checked)
    expect(recordMetadata({ metadata: checked, headers: { 'x-gateway-metadata': header } }, header.length)).toBe(checked)
    expect(recordMetadata({ metadata: checked, headers: { 'x-gateway-metadata': header } }, header.length - 1)).toBeNull()
    // The record never parses the header itself: without core's slot there is nothing to store.
    expect(recordMetadata({ metadata: null, headers: { 'x-gateway-metadata': header } }, 8192)).toBeNull()
  })
})

const CHAT = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec
const OPTIONS: RecordOptions = { maxMetadataBytes: 8192, prices: PRICES, maxBodyBytes: null }
const PRINCIPAL: Principal = {
  kind: 'api-key',
  keyId: 'key-1',
  keyType: 'workspace-service',
  organisationId: 'org-1',
  workspaceId: 'ws-1',
  userId: null,
  scopes: new Set(['completions.write']),
  credentialHeader: 'x-gateway-api-key',
  limitSubjects: [],
}
const USAGE = { promptTokens: 10, completionTokens: 5, totalTokens: 15, cachedTokens: 0 }

/** A finished request as forward and core leave it (started at 1000 ms, ended at 1250 ms). */
function finished(body: Record<string, unknown> = { model: 'unlisted', messages: [] }): RequestContext {
  const ctx = new RequestContext({
    requestId: 'req-1',
    traceId: 'trace-1',
    receivedAt: 1_717_000_000_000,
    startedAt: 1000,
    method: 'POST',
    path: '/v1/chat/completions',
    query: '',
    headers: {},
    clientIp: null,
    route: CHAT,
    params: {},
    signal: new ClientAbort(),
  })
  ctx.principal = PRINCIPAL
  ctx.body = body
  ctx.model = typeof body.model === 'string' ? body.model : null
  ctx.status = 200
  ctx.outcome = 'completed'
  ctx.endedAt = 1250
  ctx.firstByteAt = 1200
  ctx.usage = USAGE
  return ctx
}

function plan(config: unknown, identity: { slug: string; version: number } | null): RoutingPlan {
  const checked = checkRoutingConfig(config, identity === null ? 'inline' : 'saved')
  if (!checked.ok) throw new Error(JSON.stringify(checked.issues))
  return compileRoutingConfig(checked.config, identity)
}

/** The leaves of a plan, in order. */
function leaves(node: RoutingNode): RoutingTarget[] {
  return node.kind === 'target' ? [node.target] : node.children.flatMap(leaves)
}

function credential(slug: string, provider: string): ProviderCredential {
  return { virtualKeySlug: slug, provider, apiKey: 'secret', customHost: null, modelConfig: null }
}

interface Try {
  readonly target: RoutingTarget
  readonly retry?: number
  readonly status: number
  readonly error?: GatewayError
  readonly credential?: ProviderCredential
  readonly cache?: CacheHeaderStatus
  readonly body?: Record<string, unknown>
  /** Milliseconds until the status was known; absent: it never ended. */
  readonly took?: number
}

/** Real `Attempt`s, written as forward and the attempt hooks write them. */
function attempts(ctx: RequestContext, tries: readonly Try[]): Attempt[] {
  let clock = 1010
  return tries.map((t, index) => {
    const attempt = new Attempt({ index, target: t.target, retry: t.retry ?? 0, body: t.body ?? ctx.body, rawBody: null, startedAt: clock })
    attempt.status = t.status
    attempt.error = t.error ?? null
    attempt.credential = t.credential ?? null
    attempt.cacheStatus = t.cache ?? null
    if (t.took !== undefined) attempt.endedAt = clock + t.took
    clock += 20
    return attempt
  })
}

const FALLBACK = {
  strategy: { mode: 'fallback' },
  targets: [
    { virtual_key: 'vk-anthropic', retry: { attempts: 1 } },
    { virtual_key: 'vk-limited' },
    { provider: 'openai', custom_host: 'http://127.0.0.1:9/v1', override_params: { model: 'listed' } },
  ],
}

describe('the log record of a config-routed request', () => {
  it('without a config is the request-level record: no config, attempts, retries or fallback', () => {
    const ctx = finished({ model: 'listed' })
    ctx.credential = credential('vk-plain', 'groq')
    ctx.target = { provider: 'groq', origin: 'https://api.groq.com', basePath: '/openai/v1', authHeaders: [], authQuery: '' }
    const record = toLogRecord(ctx, OPTIONS)
    expect(record).toMatchObject({
      config: null, configVersion: null, attempts: null, retryCount: 0, fallbackIndex: null, cacheStatus: 'disabled',
      virtualKey: 'vk-plain', provider: 'groq', model: 'listed', costNanoUsd: 10 * 1000 + 5 * 2000, latencyMs: 250, ttftMs: 200,
    })
  })

  it('records the saved config, every attempt in order, and the served attempt as the request\'s target', () => {
    const ctx = finished({ model: 'unlisted', messages: [] })
    ctx.routing = plan(FALLBACK, { slug: 'cfg-main', version: 7 })
    const [first, limited, direct] = leaves(ctx.routing.root) as [RoutingTarget, RoutingTarget, RoutingTarget]
    ctx.attempts = attempts(ctx, [
      { target: first, status: 503, credential: credential('vk-anthropic', 'anthropic'), took: 40 },
      { target: first, retry: 1, status: 0, error: gatewayError(ERRORS.GW_UPSTREAM_UNREACHABLE), credential: credential('vk-anthropic', 'anthropic'), took: 5 },
      { target: limited, status: 429, error: gatewayError(ERRORS.GW_RATE_LIMITED), credential: credential('vk-limited', 'mistral-ai'), took: 0 },
      { target: direct, status: 200, cache: 'MISS', body: { model: 'listed', messages: [] }, took: 120 },
    ])
    ctx.attempt = ctx.attempts[3] as Attempt
    const record = toLogRecord(ctx, OPTIONS)
    expect(record).toMatchObject({
      config: 'cfg-main',
      configVersion: 7,
      retryCount: 3,
      fallbackIndex: 2,
      cacheStatus: 'miss',
      // The served attempt's: no virtual key on a direct target, its provider, and the model its
      // override_params sent (priced as such).
      virtualKey: null,
      provider: 'openai',
      model: 'listed',
      costNanoUsd: 10 * 1000 + 5 * 2000,
    })
    expect(record.attempts).toEqual([
      { target: 'config.targets[0]', provider: 'anthropic', virtual_key: 'vk-anthropic', status: 503, latency_ms: 40, retry: 0, error_code: null, cache_status: null },
      { target: 'config.targets[0]', provider: 'anthropic', virtual_key: 'vk-anthropic', status: 0, latency_ms: 5, retry: 1, error_code: 'GW_UPSTREAM_UNREACHABLE', cache_status: null },
      { target: 'config.targets[1]', provider: 'mistral-ai', virtual_key: 'vk-limited', status: 429, latency_ms: 0, retry: 0, error_code: 'GW_RATE_LIMITED', cache_status: null },
      { target: 'config.targets[2]', provider: 'openai', virtual_key: null, status: 200, latency_ms: 120, retry: 0, error_code: null, cache_status: 'miss' },
    ])
    // The secret of a credential never reaches the record.
    expect(JSON.stringify(record)).not.toContain('secret')
  })

  it('takes the virtual key and provider from the served attempt\'s credential, and counts retries of the first target as no fallback', () => {
    const ctx = finished()
    ctx.routing = plan(FALLBACK, { slug: 'cfg-main', version: 1 })
    const [first] = leaves(ctx.routing.root) as [RoutingTarget]
    ctx.attempts = attempts(ctx, [
      { target: first, status: 500, credential: credential('vk-anthropic', 'anthropic'), took: 3 },
      { target: first, retry: 1, status: 200, credential: credential('vk-anthropic', 'anthropic'), took: 4 },
    ])
    ctx.attempt = ctx.attempts[1] as Attempt
    expect(toLogRecord(ctx, OPTIONS)).toMatchObject({ virtualKey: 'vk-anthropic', provider: 'anthropic', retryCount: 1, fallbackIndex: 0, model: 'unlisted', costNanoUsd: 0 })
  })

  it('names a refused virtual key that never resolved, with no provider, and an attempt that never ended has no latency', () => {
    const ctx = finished()
    ctx.routing = plan(FALLBACK, { slug: 'cfg-main', version: 1 })
    const [first] = leaves(ctx.routing.root) as [RoutingTarget]
    ctx.attempts = attempts(ctx, [{ target: first, status: 404, error: gatewayError(ERRORS.GW_VIRTUAL_KEY_NOT_FOUND) }])
    ctx.attempt = ctx.attempts[0] as Attempt
    ctx.status = 404
    ctx.usage = null
    const record = toLogRecord(ctx, OPTIONS)
    expect(record).toMatchObject({ virtualKey: 'vk-anthropic', provider: null, retryCount: 0, fallbackIndex: 0, costNanoUsd: null })
    expect(record.attempts).toEqual([
      { target: 'config.targets[0]', provider: null, virtual_key: 'vk-anthropic', status: 404, latency_ms: null, retry: 0, error_code: 'GW_VIRTUAL_KEY_NOT_FOUND', cache_status: null },
    ])
  })

  it('takes the last attempt as the answer when none was served (every target failed or was refused)', () => {
    const ctx = finished()
    ctx.routing = plan(FALLBACK, { slug: 'cfg-main', version: 2 })
    const [first, limited] = leaves(ctx.routing.root) as [RoutingTarget, RoutingTarget]
    // An earlier attempt's upstream is still in ctx.target: the record must not take its provider.
    ctx.target = { provider: 'anthropic', origin: 'https://api.anthropic.com', basePath: '/v1', authHeaders: [], authQuery: '' }
    ctx.attempts = attempts(ctx, [
      { target: first, status: 502, credential: credential('vk-anthropic', 'anthropic'), cache: 'MISS', took: 3 },
      { target: first, retry: 1, status: 502, credential: credential('vk-anthropic', 'anthropic'), cache: 'MISS', took: 3 },
      { target: limited, status: 412, error: gatewayError(ERRORS.GW_BUDGET_EXHAUSTED), credential: credential('vk-limited', 'mistral-ai'), took: 0 },
    ])
    ctx.attempt = null
    ctx.status = 412
    ctx.error = gatewayError(ERRORS.GW_BUDGET_EXHAUSTED)
    ctx.usage = null
    expect(toLogRecord(ctx, OPTIONS)).toMatchObject({
      config: 'cfg-main', virtualKey: 'vk-limited', provider: 'mistral-ai', retryCount: 2, fallbackIndex: 1, cacheStatus: 'disabled', status: 412, errorCode: 'GW_BUDGET_EXHAUSTED', costNanoUsd: null,
    })
  })

  it.each([
    ['HIT', 'hit'],
    ['MISS', 'miss'],
    ['REFRESH', 'refresh'],
    ['DISABLED', 'disabled'],
  ] as const)('logs the served attempt\'s cache status %s as %s', (header, logged) => {
    const ctx = finished()
    ctx.routing = plan({ provider: 'openai', custom_host: 'http://127.0.0.1:9/v1', cache: { mode: 'simple', max_age: 60 } }, { slug: 'cfg-cached', version: 2 })
    ctx.attempts = attempts(ctx, [{ target: leaves(ctx.routing.root)[0] as RoutingTarget, status: 200, cache: header, took: 1 }])
    ctx.attempt = ctx.attempts[0] as Attempt
    const record = toLogRecord(ctx, OPTIONS)
    expect(record.cacheStatus).toBe(logged)
    // The only attempt at a config without targets is the record itself: no attempts array.
    expect(record.attempts).toBeNull()
    expect(record).toMatchObject({ config: 'cfg-cached', configVersion: 2, retryCount: 0, fallbackIndex: 0, provider: 'openai' })
    // A retry of the same target is a second attempt: then every attempt is logged.
    const target = leaves(ctx.routing.root)[0] as RoutingTarget
    ctx.attempts = attempts(ctx, [{ target, status: 503, took: 1 }, { target, retry: 1, status: 200, cache: header, took: 1 }])
    ctx.attempt = ctx.attempts[1] as Attempt
    expect(toLogRecord(ctx, OPTIONS).attempts?.map((attempt) => attempt.cache_status)).toEqual([null, logged])
  })

  it('records an inline config as no saved config, with its attempts; a target without provider keeps the request\'s upstream', () => {
    const ctx = finished()
    ctx.routing = plan({ retry: { attempts: 2 } }, null)
    ctx.target = { provider: 'groq', origin: 'https://api.groq.com', basePath: '/openai/v1', authHeaders: [], authQuery: '' }
    const [only] = leaves(ctx.routing.root) as [RoutingTarget]
    ctx.attempts = attempts(ctx, [
      { target: only, status: 429, took: 2 },
      { target: only, retry: 1, status: 200, took: 2 },
    ])
    ctx.attempt = ctx.attempts[1] as Attempt
    const record = toLogRecord(ctx, OPTIONS)
    expect(ctx.routing.id).toBe('inline')
    expect(record).toMatchObject({ config: null, configVersion: null, retryCount: 1, fallbackIndex: 0, provider: 'groq' })
    expect(record.attempts?.map((attempt) => [attempt.target, attempt.provider, attempt.retry, attempt.status])).toEqual([
      ['config', 'groq', 0, 429],
      ['config', 'groq', 1, 200],
    ])
  })

  it('records the config of a request refused before any attempt, with no attempts', () => {
    const ctx = finished()
    ctx.routing = plan(FALLBACK, { slug: 'cfg-main', version: 4 })
    ctx.status = 429
    ctx.error = gatewayError(ERRORS.GW_RATE_LIMITED)
    ctx.usage = null
    expect(toLogRecord(ctx, OPTIONS)).toMatchObject({ config: 'cfg-main', configVersion: 4, attempts: null, retryCount: 0, fallbackIndex: null, errorCode: 'GW_RATE_LIMITED', cacheStatus: 'disabled' })
  })

  it('keeps at most MAX_LOG_ATTEMPTS attempts: the first ones and the one that answered', () => {
    const config = { strategy: { mode: 'fallback' }, targets: Array.from({ length: 40 }, (_, index) => ({ virtual_key: `vk-${index}` })) }
    const ctx = finished()
    ctx.routing = plan(config, { slug: 'cfg-long', version: 1 })
    const targets = leaves(ctx.routing.root)
    ctx.attempts = attempts(ctx, targets.map((target, index) => ({ target, status: index === 39 ? 200 : 503, took: 1 })))
    ctx.attempt = ctx.attempts[39] as Attempt
    const record = toLogRecord(ctx, OPTIONS)
    expect(record.retryCount).toBe(39)
    expect(record.fallbackIndex).toBe(39)
    expect(record.attempts).toHaveLength(MAX_LOG_ATTEMPTS)
    expect(record.attempts?.slice(0, MAX_LOG_ATTEMPTS - 1).map((attempt) => attempt.virtual_key)).toEqual(targets.slice(0, MAX_LOG_ATTEMPTS - 1).map((target) => target.virtualKey))
    expect(record.attempts?.at(-1)).toMatchObject({ target: 'config.targets[39]', virtual_key: 'vk-39', status: 200 })
  })
})
