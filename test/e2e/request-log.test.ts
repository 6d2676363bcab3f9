/**
 * Request logs, end to end: every data-plane request leaves one record in the embedded DuckDB sink.
 * The request id is not sent to the client, so each request carries a unique `x-gateway-trace-id`;
 * the record enqueued with that trace id gives the request id (the sink's port is watched with a
 * spy), and the test then reads the written row back with `findById` after `flush()`.
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest'
import { DuckDbLogSink } from '../../adapters/embedded/duckdb-log-sink.js'
import type { LogRecord } from '../../core/logs.js'
import { AdminStore } from '../../core/ports.js'
import { dataPlaneHeaders, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_EMBEDDING_TOKENS_PER_INPUT, MOCK_USAGE, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

const CHAT_USAGE = {
  promptTokens: MOCK_USAGE.prompt_tokens,
  completionTokens: MOCK_USAGE.completion_tokens,
  totalTokens: MOCK_USAGE.total_tokens,
  cachedTokens: 0,
}
/** gpt-4o-mini lists 0.15 / 0.60 USD per million input / output tokens (config/pricing.json): 1 token at P USD/1M is P × 1000 nano-USD. */
const CHAT_COST_NANO_USD = MOCK_USAGE.prompt_tokens * 150 + MOCK_USAGE.completion_tokens * 600

function tokensOf(record: LogRecord) {
  return { promptTokens: record.promptTokens, completionTokens: record.completionTokens, totalTokens: record.totalTokens, cachedTokens: record.cachedTokens }
}

let mock: MockUpstream
let gw: TestGateway
let sink: DuckDbLogSink
let enqueue: MockInstance<(record: LogRecord) => void>
let key: string
let keyId: string
let organisationId: string
let workspaceUuid: string
let workspaceSlug: string

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  const made = await gw.workspaceKey(['completions.write'])
  key = made.key
  keyId = made.keyId
  const organisation = await gw.admin('GET', '/v1/admin/organisation')
  organisationId = organisation.body.id
  // The Admin API shows a workspace by its slug; records carry the workspace's UUID.
  const workspace = await gw.wiring.resolve(AdminStore).findWorkspace(organisationId, made.workspaceId)
  if (workspace === null) throw new Error(`workspace ${made.workspaceId} not found in the admin store`)
  workspaceUuid = workspace.id
  workspaceSlug = made.workspaceId
  const logSink = gw.wiring.logSink
  if (!(logSink instanceof DuckDbLogSink)) throw new Error('expected the embedded DuckDB log sink')
  sink = logSink
  enqueue = vi.spyOn(sink, 'enqueue')
})

afterAll(async () => {
  enqueue?.mockRestore()
  await gw?.close()
  await mock?.close()
})

function headers(traceId: string, extra: Record<string, string> = {}): Record<string, string> {
  return dataPlaneHeaders(key, mock.url, { 'x-gateway-trace-id': traceId, ...extra })
}

async function post(path: string, traceId: string, body: unknown, extra: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const response = await fetch(`${gw.url}${path}`, { method: 'POST', headers: headers(traceId, extra), body: JSON.stringify(body) })
  return { status: response.status, text: await response.text() }
}

/** The records handed to the sink with this trace id. */
function enqueuedWith(traceId: string): LogRecord[] {
  return enqueue.mock.calls.map(([record]) => record).filter((record) => record.traceId === traceId)
}

/** Waits for the one record of `traceId` to be enqueued, flushes, and reads it back by request id. */
async function persisted(traceId: string): Promise<LogRecord> {
  const enqueued = await vi.waitFor(
    () => {
      const found = enqueuedWith(traceId)
      if (found.length === 0) throw new Error(`no record enqueued for trace ${traceId}`)
      return found
    },
    { timeout: 10_000, interval: 20 },
  )
  expect(enqueued).toHaveLength(1)
  const id = (enqueued[0] as LogRecord).id
  expect(id).toMatch(/^[0-9a-f-]{36}$/)
  await sink.flush()
  const record = await sink.findById(id)
  expect(record, `record ${id} of trace ${traceId}`).not.toBeNull()
  return record as LogRecord
}

function expectCaller(record: LogRecord): void {
  expect(record.organisationId).toBe(organisationId)
  expect(record.workspaceId).toBe(workspaceUuid)
  expect(record.apiKeyId).toBe(keyId)
}

describe('request log', () => {
  it('writes one row per data-plane request', async () => {
    await sink.flush()
    const before = await sink.count()
    const traces = [`trace-count-${randomUUID()}`, `trace-count-${randomUUID()}`] as const
    const first = await post('/v1/chat/completions', traces[0], { model: 'gpt-4o-mini', messages: [] })
    const second = await post('/v1/embeddings', traces[1], { model: 'text-embedding-3-small', input: 'a' })
    expect(first.status, first.text).toBe(200)
    expect(second.status, second.text).toBe(200)
    await vi.waitFor(() => expect(traces.map((trace) => enqueuedWith(trace).length)).toEqual([1, 1]), { timeout: 10_000 })
    await sink.flush()
    expect(await sink.count()).toBe(before + 2)
  })

  it('records a non-streamed chat completion with caller, route, model, usage and metadata', async () => {
    const traceId = `trace-chat-${randomUUID()}`
    const sentAt = Date.now()
    const answer = await post(
      '/v1/chat/completions',
      traceId,
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] },
      { 'x-gateway-metadata': JSON.stringify({ _user: 'alice', team: 'blue' }) },
    )
    const answeredAt = Date.now()
    expect(answer.status, answer.text).toBe(200)
    const record = await persisted(traceId)
    expect(record.traceId).toBe(traceId)
    expect(record.id).not.toBe(traceId)
    expectCaller(record)
    expect(record).toMatchObject({
      method: 'POST',
      route: 'chat.completions',
      path: '/v1/chat/completions',
      provider: 'openai',
      model: 'gpt-4o-mini',
      status: 200,
      outcome: 'completed',
      streaming: false,
      errorCode: null,
    })
    expect(tokensOf(record)).toEqual(CHAT_USAGE)
    expect(record.costNanoUsd).toBe(CHAT_COST_NANO_USD)
    expect(record.metadata).toEqual({ _user: 'alice', team: 'blue' })
    expect(record.user).toBe('alice')
    expect(record).toMatchObject({ source: 'gateway', virtualKey: null, cacheStatus: 'disabled', retryCount: 0, fallbackIndex: null, errorType: null })
    // Bodies are not kept unless the log plugin is configured to.
    expect(record.requestBody).toBeNull()
    expect(record.responseBody).toBeNull()
    expect(record.createdAt).toBeGreaterThanOrEqual(sentAt)
    expect(record.createdAt).toBeLessThanOrEqual(answeredAt)
    expect(record.latencyMs).toBeGreaterThanOrEqual(0)
    expect(record.ttftMs).not.toBeNull()
    expect(record.ttftMs as number).toBeLessThanOrEqual(record.latencyMs)
  })

  it('finds the usage at the end of a non-streamed reply larger than the 16 KiB tail', async () => {
    const traceId = `trace-large-${randomUUID()}`
    const content = 'x'.repeat(40 * 1024)
    const usage = { prompt_tokens: 7, completion_tokens: 9000, total_tokens: 9007 }
    mock.next(
      {
        type: 'json',
        body: {
          id: 'chatcmpl-large',
          object: 'chat.completion',
          created: 1,
          model: 'gpt-4o-mini',
          choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
          usage,
        },
      },
      { path: '/v1/chat/completions' },
    )
    const answer = await post('/v1/chat/completions', traceId, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] })
    expect(answer.status).toBe(200)
    expect(answer.text.length).toBeGreaterThan(40 * 1024)
    const record = await persisted(traceId)
    expect(tokensOf(record)).toEqual({ promptTokens: 7, completionTokens: 9000, totalTokens: 9007, cachedTokens: 0 })
  })

  it('records a streamed chat completion with the usage of its last chunk', async () => {
    const traceId = `trace-stream-${randomUUID()}`
    const answer = await post('/v1/chat/completions', traceId, {
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
      stream_options: { include_usage: true },
    })
    expect(answer.status, answer.text).toBe(200)
    expect(answer.text).toContain('data: [DONE]')
    const record = await persisted(traceId)
    expect(record.traceId).toBe(traceId)
    expectCaller(record)
    expect(record).toMatchObject({
      route: 'chat.completions',
      provider: 'openai',
      model: 'gpt-4o-mini',
      status: 200,
      outcome: 'completed',
      streaming: true,
      errorCode: null,
      metadata: null,
      user: null,
      costNanoUsd: CHAT_COST_NANO_USD,
    })
    expect(tokensOf(record)).toEqual(CHAT_USAGE)
  })

  it('records an embeddings call with its usage', async () => {
    const traceId = `trace-embed-${randomUUID()}`
    const answer = await post('/v1/embeddings', traceId, { model: 'text-embedding-3-small', input: ['a', 'b'] })
    expect(answer.status, answer.text).toBe(200)
    const record = await persisted(traceId)
    expectCaller(record)
    expect(record).toMatchObject({
      route: 'embeddings',
      path: '/v1/embeddings',
      provider: 'openai',
      model: 'text-embedding-3-small',
      status: 200,
      outcome: 'completed',
      streaming: false,
      errorCode: null,
    })
    const tokens = 2 * MOCK_EMBEDDING_TOKENS_PER_INPUT
    expect(tokensOf(record)).toEqual({ promptTokens: tokens, completionTokens: 0, totalTokens: tokens, cachedTokens: 0 })
    // text-embedding-3-small: 0.02 USD per million input tokens.
    expect(record.costNanoUsd).toBe(tokens * 20)
  })

  it('records a pass-through call under the passthrough route with its own path', async () => {
    const traceId = `trace-pass-${randomUUID()}`
    const answer = await post('/v1/rerank', traceId, { model: 'rerank-1', query: 'q', documents: ['a', 'b'] })
    expect(answer.status, answer.text).toBe(200)
    const record = await persisted(traceId)
    expectCaller(record)
    expect(record).toMatchObject({
      method: 'POST',
      route: 'passthrough',
      path: '/v1/rerank',
      provider: 'openai',
      status: 200,
      outcome: 'completed',
      streaming: false,
      errorCode: null,
    })
  })

  it('records a refused request with its error code', async () => {
    const traceId = `trace-error-${randomUUID()}`
    const answer = await post('/v1/chat/completions', traceId, { model: 'gpt-4o-mini', messages: [] }, { 'x-gateway-provider': 'no-such-provider' })
    expect(answer.status, answer.text).toBe(400)
    expect(JSON.parse(answer.text).error.code).toBe('GW_REQ_PROVIDER_UNKNOWN')
    const record = await persisted(traceId)
    expectCaller(record)
    expect(record).toMatchObject({
      route: 'chat.completions',
      provider: null,
      status: 400,
      outcome: 'errored',
      errorCode: 'GW_REQ_PROVIDER_UNKNOWN',
      errorType: 'invalid_request_error',
      costNanoUsd: null,
    })
    expect(tokensOf(record)).toEqual({ promptTokens: null, completionTokens: null, totalTokens: null, cachedTokens: null })
  })

  it('records the generated trace id, the one echoed to the client, when none is sent', async () => {
    const { 'x-gateway-trace-id': _unused, ...withoutTrace } = headers('unused')
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: withoutTrace,
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }),
    })
    expect(response.status, await response.text()).toBe(200)
    const traceId = response.headers.get('x-gateway-trace-id')
    expect(traceId).toMatch(/^[0-9a-f-]{36}$/)
    const record = await persisted(traceId as string)
    expect(record.traceId).toBe(traceId)
    expect(record.route).toBe('chat.completions')
    expectCaller(record)
  })

  it('records the slug of the virtual key that supplied the provider credential', async () => {
    const created = await gw.admin('POST', '/v1/virtual-keys', { name: 'Logged key', provider: 'openai', custom_host: mock.url, key: 'sk-virtual', workspace_id: workspaceSlug })
    expect(created.status, JSON.stringify(created.body)).toBe(200)
    const traceId = `trace-vk-${randomUUID()}`
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-virtual-key': created.body.id, 'x-gateway-trace-id': traceId },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }),
    })
    expect(response.status, await response.text()).toBe(200)
    const record = await persisted(traceId)
    expect(record).toMatchObject({ virtualKey: created.body.slug, provider: 'openai', status: 200, costNanoUsd: CHAT_COST_NANO_USD })
  })

  it('logs the 400 to x-gateway-metadata that is not a JSON object, without metadata', async () => {
    const traceId = `trace-badmeta-${randomUUID()}`
    const answer = await post('/v1/chat/completions', traceId, { model: 'gpt-4o-mini', messages: [] }, { 'x-gateway-metadata': 'not json' })
    expect(answer.status, answer.text).toBe(400)
    const record = await persisted(traceId)
    expect(record.metadata).toBeNull()
    expect(record).toMatchObject({ status: 400, outcome: 'errored', errorCode: 'GW_REQ_INVALID' })
  })

  it('records a stream the client abandoned mid-way as aborted', async () => {
    mock.reset()
    mock.next({ type: 'stream', chunks: 50, intervalMs: 100 }, { path: '/v1/chat/completions' })
    const traceId = `trace-abort-${randomUUID()}`
    const controller = new AbortController()
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: headers(traceId),
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [], stream: true, stream_options: { include_usage: true } }),
      signal: controller.signal,
    })
    expect(response.status).toBe(200)
    const reader = (response.body as ReadableStream<Uint8Array>).getReader()
    const first = await reader.read()
    expect(new TextDecoder().decode(first.value)).toContain('chat.completion.chunk')
    controller.abort()
    await reader.read().catch(() => undefined)
    const [upstream] = await mock.waitForRequests(1)
    // The gateway gave up on the provider too.
    await mock.waitForClientClose(upstream!, 10_000)
    const record = await persisted(traceId)
    expectCaller(record)
    expect(record).toMatchObject({
      route: 'chat.completions',
      model: 'gpt-4o-mini',
      streaming: true,
      status: 200,
      outcome: 'aborted',
      costNanoUsd: null,
    })
    expect(tokensOf(record)).toEqual({ promptTokens: null, completionTokens: null, totalTokens: null, cachedTokens: null })
  })
})

describe('request log with bodies kept', () => {
  let bodies: TestGateway

  beforeAll(async () => {
    bodies = await startTestGateway({ overlay: { plugins: { log: { enabled: true, config: { bodies: { enabled: true, maxBytes: 40 } } } } } })
  })

  afterAll(async () => {
    await bodies?.close()
  })

  it('keeps the request and response bodies, cut at maxBytes and marked', async () => {
    const made = await bodies.workspaceKey(['completions.write'])
    const sink = bodies.wiring.logSink as DuckDbLogSink
    const spy = vi.spyOn(sink, 'enqueue')
    const traceId = `trace-bodies-${randomUUID()}`
    const response = await fetch(`${bodies.url}/v1/embeddings`, {
      method: 'POST',
      headers: { ...headers(traceId), 'x-gateway-api-key': made.key },
      body: JSON.stringify({ model: 'text-embedding-3-small', input: 'a much longer input that does not fit in forty bytes' }),
    })
    const answer = await response.text()
    expect(response.status, answer).toBe(200)
    const record = await vi.waitFor(() => {
      const found = spy.mock.calls.map(([item]) => item).find((item) => item.traceId === traceId)
      if (found === undefined) throw new Error('not enqueued yet')
      return found
    })
    spy.mockRestore()
    await sink.flush()
    const stored = await sink.findById(record.id)
    expect(stored?.requestBody).toBe(`${JSON.stringify({ model: 'text-embedding-3-small', input: 'a much longer input that does not fit in forty bytes' }).slice(0, 40)}[truncated]`)
    expect(stored?.responseBody).toBe(`${answer.slice(0, 40)}[truncated]`)
  })

  it('marks a logged response longer than the 16 KiB the gateway holds as cut at its start', async () => {
    const made = await bodies.workspaceKey(['completions.write'])
    const sink = bodies.wiring.logSink as DuckDbLogSink
    const spy = vi.spyOn(sink, 'enqueue')
    const traceId = `trace-bodies-large-${randomUUID()}`
    mock.next({ type: 'raw', body: `{"pad":"${'p'.repeat(20 * 1024)}","end":"last-bytes"}`, headers: { 'content-type': 'application/json' } }, { path: '/v1/embeddings' })
    const response = await fetch(`${bodies.url}/v1/embeddings`, {
      method: 'POST',
      headers: { ...headers(traceId), 'x-gateway-api-key': made.key },
      body: JSON.stringify({ model: 'text-embedding-3-small', input: 'a' }),
    })
    expect(response.status).toBe(200)
    expect((await response.text()).length).toBeGreaterThan(20 * 1024)
    const record = await vi.waitFor(() => {
      const found = spy.mock.calls.map(([item]) => item).find((item) => item.traceId === traceId)
      if (found === undefined) throw new Error('not enqueued yet')
      return found
    })
    spy.mockRestore()
    // The held tail is 16 KiB of padding and the end; the first 40 bytes of it are padding.
    expect(record.responseBody).toBe(`[truncated]${'p'.repeat(40)}[truncated]`)
  })
})
