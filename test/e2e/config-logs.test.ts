/**
 * The request log and analytics of config-routed requests, end to end (issue 15): requests routed
 * by an inline or saved `x-gateway-config` across two loopback mock providers, then read back as a
 * user would, through `GET /v1/logs/{id}` (by trace id) and the analytics routes of the Admin API.
 */
import { randomUUID } from 'node:crypto'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { CHAT_BODY, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_USAGE, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

let a: MockUpstream
let b: MockUpstream
let gw: TestGateway
let key: string
let workspaceId: string
const startedAt = Date.now()

beforeAll(async () => {
  ;[a, b] = await Promise.all([startMockUpstream(), startMockUpstream()])
  // Short backoff so retries do not slow the suite.
  gw = await startTestGateway({ overlay: { plugins: { forward: { config: { retryBaseDelayMs: 10, retryMaxDelayMs: 50 } } } } })
  const made = await gw.workspaceKey(['completions.write', 'analytics.view'])
  key = made.key
  workspaceId = made.workspaceId
})

afterEach(() => {
  a.reset()
  b.reset()
})

afterAll(async () => {
  await gw?.close()
  await Promise.all([a?.close(), b?.close()])
})

/** A target at mock `m` with its own provider key (inline configs only). */
function target(m: MockUpstream, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { provider: 'openai', api_key: `sk-inline-secret-${m.port}`, custom_host: m.url, ...extra }
}

/** A chat completion routed by `config` (inline JSON, or a saved config's slug), under a fresh trace id. */
async function chat(config: unknown, body: unknown = CHAT_BODY): Promise<{ traceId: string; response: Response }> {
  const traceId = `cfg-log-${randomUUID()}`
  const response = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-gateway-api-key': key,
      'x-gateway-trace-id': traceId,
      'x-gateway-config': typeof config === 'string' ? config : JSON.stringify(config),
    },
    body: JSON.stringify(body),
  })
  await response.arrayBuffer()
  return { traceId, response }
}

/** The log of a trace, as `GET /v1/logs/{id}` shows it (the sink is flushed by the route when needed). */
async function logOf(traceId: string): Promise<{ text: string; metrics: Record<string, any> }> {
  const response = await fetch(`${gw.url}/v1/logs/${traceId}`, { headers: { 'x-gateway-api-key': key } })
  const text = await response.text()
  expect(response.status, text).toBe(200)
  return { text, metrics: JSON.parse(text).metrics }
}

const serverError = { type: 'json', status: 500, body: { error: { message: 'boom', type: 'server_error' } } } as const
const busy = { type: 'json', status: 503, body: { error: { message: 'busy' } } } as const

/** The fields of an attempt the test can predict (latency is measured). */
function predictable(attempt: Record<string, unknown>): Record<string, unknown> {
  expect(typeof attempt.latency_ms).toBe('number')
  expect(attempt.latency_ms as number).toBeGreaterThanOrEqual(0)
  const { latency_ms: _latency, ...rest } = attempt
  return rest
}

describe('request log of an inline config', () => {
  it('records a fallback: every attempt in order, the target that answered, no saved config, no provider key', async () => {
    a.next(serverError)
    const { traceId, response } = await chat({ strategy: { mode: 'fallback' }, targets: [target(a), target(b)] })
    expect(response.status).toBe(200)
    expect(response.headers.get('x-gateway-last-used-option-index')).toBe('config.targets[1]')
    const { text, metrics } = await logOf(traceId)
    expect(metrics).toMatchObject({
      trace_id: traceId,
      config: null,
      config_version: null,
      retry_count: 1,
      fallback_index: 1,
      ai_org: 'openai',
      ai_model: CHAT_BODY.model,
      response_status_code: 200,
      total_units: MOCK_USAGE.total_tokens,
      cache_status: 'disabled',
    })
    expect(metrics.attempts.map(predictable)).toEqual([
      { target: 'config.targets[0]', provider: 'openai', virtual_key: null, status: 500, retry: 0, error_code: null, cache_status: 'disabled' },
      { target: 'config.targets[1]', provider: 'openai', virtual_key: null, status: 200, retry: 0, error_code: null, cache_status: 'disabled' },
    ])
    // The provider keys of an inline config are never stored.
    expect(text).not.toContain('sk-inline-secret')
  })

  it('records retries of one target as retries, not as a fallback', async () => {
    a.next(busy)
    a.next(busy)
    const { traceId, response } = await chat(target(a, { retry: { attempts: 3 } }))
    expect(response.status).toBe(200)
    expect(response.headers.get('x-gateway-retry-attempt-count')).toBe('2')
    const { metrics } = await logOf(traceId)
    expect(metrics).toMatchObject({ retry_count: 2, fallback_index: 0, response_status_code: 200 })
    expect(metrics.attempts.map((attempt: Record<string, unknown>) => [attempt.target, attempt.retry, attempt.status])).toEqual([
      ['config', 0, 503],
      ['config', 1, 503],
      ['config', 2, 200],
    ])
  })

  it('records a request whose every target failed with the last failure as its answer', async () => {
    a.next(serverError)
    b.next(busy)
    const { traceId, response } = await chat({ strategy: { mode: 'fallback' }, targets: [target(a), target(b)] })
    expect(response.status).toBe(503)
    const { metrics } = await logOf(traceId)
    expect(metrics).toMatchObject({ response_status_code: 503, is_success: false, retry_count: 1, fallback_index: 1 })
    expect(metrics.attempts.map((attempt: Record<string, unknown>) => attempt.status)).toEqual([500, 503])
  })

  it('records a connection failure as an attempt without a status, naming the error', async () => {
    a.next({ type: 'reset' })
    const { traceId, response } = await chat({ strategy: { mode: 'fallback' }, targets: [target(a), target(b)] })
    expect(response.status).toBe(200)
    const { metrics } = await logOf(traceId)
    expect(metrics.attempts[0]).toMatchObject({ target: 'config.targets[0]', status: 0, error_code: 'GW_UPSTREAM_UNREACHABLE' })
    expect(metrics.attempts[1]).toMatchObject({ target: 'config.targets[1]', status: 200, error_code: null })
  })

  it('a request without a config has no attempts', async () => {
    const traceId = `cfg-log-${randomUUID()}`
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-trace-id': traceId, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': a.url, authorization: 'Bearer sk-x' },
      body: JSON.stringify(CHAT_BODY),
    })
    expect(response.status).toBe(200)
    const { metrics } = await logOf(traceId)
    expect(metrics).toMatchObject({ config: null, config_version: null, attempts: null, retry_count: 0, fallback_index: null })
  })
})

describe('request log and analytics of a saved config', () => {
  let slug: string
  let otherSlug: string
  let virtualKey: string

  beforeAll(async () => {
    const made = await gw.admin('POST', '/v1/virtual-keys', { workspace_id: workspaceId, name: 'cfg-logs', provider: 'openai', key: 'sk-vk-secret', custom_host: a.url })
    expect(made.status, JSON.stringify(made.body)).toBe(200)
    virtualKey = made.body.slug
    const config = await gw.admin('POST', '/v1/configs', { workspace_id: workspaceId, name: 'logged', config: { virtual_key: virtualKey, cache: { mode: 'simple', max_age: 60 } } })
    expect(config.status, JSON.stringify(config.body)).toBe(200)
    slug = config.body.slug
    const other = await gw.admin('POST', '/v1/configs', { workspace_id: workspaceId, name: 'unused', config: { virtual_key: virtualKey } })
    expect(other.status, JSON.stringify(other.body)).toBe(200)
    otherSlug = other.body.slug
  })

  function range(): string {
    return `time_of_generation_min=${encodeURIComponent(new Date(startedAt - 60_000).toISOString())}&time_of_generation_max=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`
  }

  it('logs the slug and version, the virtual key, a miss then a hit; analytics filter and group by the config and count the hit', async () => {
    const body = { ...CHAT_BODY, messages: [{ role: 'user', content: `cache me ${randomUUID()}` }] }
    const first = await chat(slug, body)
    expect(first.response.status).toBe(200)
    expect(first.response.headers.get('x-gateway-cache-status')).toBe('MISS')
    const second = await chat(slug, body)
    expect(second.response.status).toBe(200)
    expect(second.response.headers.get('x-gateway-cache-status')).toBe('HIT')
    expect(a.requests).toHaveLength(1)

    const miss = (await logOf(first.traceId)).metrics
    expect(miss).toMatchObject({ config: slug, config_version: 1, virtual_key: virtualKey, ai_org: 'openai', cache_status: 'miss', retry_count: 0, fallback_index: 0 })
    // One attempt at a config without targets: the record's own fields are that attempt.
    expect(miss.attempts).toBeNull()
    const hit = (await logOf(second.traceId)).metrics
    expect(hit).toMatchObject({ config: slug, config_version: 1, virtual_key: virtualKey, cache_status: 'hit', response_status_code: 200 })
    expect(hit.attempts).toBeNull()

    const requests = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&configs=${slug}`, undefined, key)
    expect(requests.status).toBe(200)
    expect(requests.body.summary.total).toBe(2)
    const none = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&configs=${otherSlug}`, undefined, key)
    expect(none.body.summary.total).toBe(0)

    const cache = await gw.admin('GET', `/v1/analytics/summary/cache?${range()}&configs=${slug}`, undefined, key)
    expect(cache.status).toBe(200)
    expect(cache.body.summary).toMatchObject({ hits: 1, total_requests: 2 })
    const hits = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&cache_status=hit`, undefined, key)
    expect(hits.body.summary.total).toBe(1)

    const groups = await gw.admin('GET', `/v1/analytics/groups/configs?${range()}`, undefined, key)
    expect(groups.status).toBe(200)
    expect(groups.body.data).toEqual([expect.objectContaining({ config: slug, requests: 2, object: 'analytics-group' })])
  })

  it('logs the version that routed each request after an update', async () => {
    const updated = await gw.admin('PUT', `/v1/configs/${otherSlug}`, { workspace_id: workspaceId, config: { virtual_key: virtualKey, retry: { attempts: 1 } } })
    expect(updated.status, JSON.stringify(updated.body)).toBe(200)
    const { traceId, response } = await chat(otherSlug)
    expect(response.status).toBe(200)
    expect((await logOf(traceId)).metrics).toMatchObject({ config: otherSlug, config_version: 2, virtual_key: virtualKey })
  })
})
