/**
 * Analytics, feedback, custom logs and log exports end to end: the real gateway (embedded DuckDB
 * log store) and a mock upstream. Requests go through the data plane, the log sink is flushed until
 * the analytics see them (it writes on an interval), then the Admin API reads them back. Two
 * workspaces check isolation: neither sees, rates, reads or exports the other's logs.
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { postChat, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

const SCOPES = ['completions.write', 'analytics.view', 'logs.write', 'logs.read', 'logs.export', 'feedbacks.write']

let mock: MockUpstream
let gw: TestGateway
let a: { key: string; keyId: string; workspaceId: string }
let b: { key: string; keyId: string; workspaceId: string }
const run = randomUUID().slice(0, 8)
const tracesA = [`a1-${run}`, `a2-${run}`, `a3-${run}`]
const traceB = `b1-${run}`

/** A range around now, as the analytics query needs it. */
function range(): string {
  const now = Date.now()
  return `time_of_generation_min=${encodeURIComponent(new Date(now - 3_600_000).toISOString())}&time_of_generation_max=${encodeURIComponent(new Date(now + 3_600_000).toISOString())}`
}

function rangeObject(): Record<string, string> {
  const now = Date.now()
  return { time_of_generation_min: new Date(now - 3_600_000).toISOString(), time_of_generation_max: new Date(now + 3_600_000).toISOString() }
}

async function chat(key: string, traceId: string, user: string): Promise<void> {
  const response = await postChat(gw.url, key, mock.url, { 'x-gateway-trace-id': traceId, 'x-gateway-metadata': JSON.stringify({ _user: user, run }) })
  expect(response.status, await response.text()).toBe(200)
}

/** Flushes the sink until `check` passes (records are enqueued after the reply and written in batches). */
async function eventually<T>(check: () => Promise<T>): Promise<T> {
  return vi.waitFor(
    async () => {
      await gw.wiring.logSink?.flush()
      return check()
    },
    { timeout: 15_000, interval: 50 },
  )
}

function expectError(response: { status: number; body: any }, status: number, code: string, field?: string): void {
  expect(response.status, JSON.stringify(response.body)).toBe(status)
  expect(response.body).toEqual({ success: false, data: { message: expect.any(String), errorCode: code } })
  if (field !== undefined) expect(response.body.data.message).toContain(field)
}

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  a = await gw.workspaceKey(SCOPES)
  b = await gw.workspaceKey(SCOPES)
  await chat(a.key, tracesA[0] as string, 'alice')
  await chat(a.key, tracesA[1] as string, 'alice')
  await chat(a.key, tracesA[2] as string, 'bob')
  await chat(b.key, traceB, 'carol')
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

describe('analytics', () => {
  it('counts the requests of the caller’s workspace in the requests graph', async () => {
    const graph = await eventually(async () => {
      const response = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&metadata=${encodeURIComponent(JSON.stringify({ run }))}`, undefined, a.key)
      expect(response.status, JSON.stringify(response.body)).toBe(200)
      expect(response.body.summary.total).toBe(3)
      return response.body
    })
    expect(graph.object).toBe('analytics-graph')
    expect(Array.isArray(graph.data_points)).toBe(true)
    const points = graph.data_points as Array<{ timestamp: string; total: number }>
    expect(points.reduce((sum, point) => sum + point.total, 0)).toBe(3)
    for (const point of points) expect(Number.isNaN(Date.parse(point.timestamp))).toBe(false)

    const other = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&metadata=${encodeURIComponent(JSON.stringify({ run }))}`, undefined, b.key)
    expect(other.body.summary.total).toBe(1)
  })

  it('lets an organisation key read the whole organisation or one workspace (workspace_slug)', async () => {
    const meta = `metadata=${encodeURIComponent(JSON.stringify({ run }))}`
    await eventually(async () => {
      const all = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&${meta}`)
      expect(all.body.summary.total).toBe(4)
    })
    const one = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&${meta}&workspace_slug=${a.workspaceId}`)
    expect(one.status).toBe(200)
    expect(one.body.summary.total).toBe(3)
    // A workspace key's workspace_slug is ignored: it always reads its own workspace.
    const ignored = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&${meta}&workspace_slug=${b.workspaceId}`, undefined, a.key)
    expect(ignored.body.summary.total).toBe(3)
    expectError(await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&workspace_slug=ws-no-such-workspace`), 404, 'AB08', 'workspace_slug')
  })

  it('answers every graph with the analytics-graph shape', async () => {
    for (const name of ['cost', 'latency', 'tokens', 'users', 'errors', 'errors/rate', 'errors/status-codes', 'cache/hit-rate', 'feedbacks/scores']) {
      const response = await gw.admin('GET', `/v1/analytics/graphs/${name}?${range()}`, undefined, a.key)
      expect(response.status, `${name}: ${JSON.stringify(response.body)}`).toBe(200)
      expect(response.body).toEqual({ object: 'analytics-graph', summary: expect.any(Object), data_points: expect.any(Array) })
    }
  })

  it('groups by user, model and metadata value, paged', async () => {
    const meta = `metadata=${encodeURIComponent(JSON.stringify({ run }))}`
    const users = await eventually(async () => {
      const response = await gw.admin('GET', `/v1/analytics/groups/users?${range()}&${meta}`, undefined, a.key)
      expect(response.status, JSON.stringify(response.body)).toBe(200)
      expect(response.body.total).toBe(2)
      return response.body
    })
    expect(users.object).toBe('list')
    expect(users.data.map((row: { user: string }) => row.user).sort()).toEqual(['alice', 'bob'])
    for (const row of users.data) expect(row.object).toBe('analytics-group')
    const paged = await gw.admin('GET', `/v1/analytics/groups/users?${range()}&${meta}&page_size=1&current_page=1`, undefined, a.key)
    expect(paged.body.total).toBe(2)
    expect(paged.body.data).toHaveLength(1)

    const models = await gw.admin('GET', `/v1/analytics/groups/ai-models?${range()}&${meta}`, undefined, a.key)
    expect(models.status).toBe(200)
    expect(models.body.data.map((row: { object: string }) => row.object)).toEqual(models.body.data.map(() => 'analytics-group'))

    for (const name of ['providers', 'api-keys', 'virtual-keys', 'configs', 'status-codes']) {
      const response = await gw.admin('GET', `/v1/analytics/groups/${name}?${range()}&${meta}`, undefined, a.key)
      expect(response.status, `${name}: ${JSON.stringify(response.body)}`).toBe(200)
      expect(response.body).toEqual({ object: 'list', total: expect.any(Number), data: expect.any(Array) })
    }
    const statuses = await gw.admin('GET', `/v1/analytics/groups/status-codes?${range()}&${meta}`, undefined, a.key)
    expect(statuses.body.total).toBe(1)

    const byRun = await gw.admin('GET', `/v1/analytics/groups/metadata/run?${range()}&${meta}`, undefined, a.key)
    expect(byRun.status, JSON.stringify(byRun.body)).toBe(200)
    expect(byRun.body.data).toHaveLength(1)
    expect(byRun.body.data[0]).toMatchObject({ metadata_value: run, object: 'analytics-group' })
  })

  it('summarises the cache', async () => {
    const response = await gw.admin('GET', `/v1/analytics/summary/cache?${range()}`, undefined, a.key)
    expect(response.status).toBe(200)
    expect(response.body).toEqual({
      object: 'analytics-summary',
      summary: { hits: expect.any(Number), avg_latency: expect.any(Number), total_requests: expect.any(Number), cache_speedup: expect.any(Number) },
    })
  })

  it('refuses bad filters with a 400 naming the field', async () => {
    expectError(await gw.admin('GET', '/v1/analytics/graphs/requests', undefined, a.key), 400, 'AB01', 'time_of_generation_min')
    expectError(await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&colour=red`, undefined, a.key), 400, 'AB01', 'colour')
    expectError(await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&status_code=200,abc`, undefined, a.key), 400, 'AB01', 'status_code')
    expectError(await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&virtual_keys=${encodeURIComponent("x' OR '1'='1")}`, undefined, a.key), 400, 'AB01', 'virtual_keys')
    expectError(await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&metadata=${encodeURIComponent('{"a":{"$gt":""}}')}`, undefined, a.key), 400, 'AB01', 'metadata')
    expectError(
      await gw.admin('GET', '/v1/analytics/graphs/requests?time_of_generation_min=2020-01-01T00:00:00Z&time_of_generation_max=2026-01-01T00:00:00Z', undefined, a.key),
      400,
      'AB01',
      '366 days',
    )
    expectError(await gw.admin('GET', `/v1/analytics/groups/metadata/${encodeURIComponent("a' --")}?${range()}`, undefined, a.key), 400, 'AB01', 'metadataKey')
  })

  it('needs analytics.view', async () => {
    const other = await gw.workspaceKey(['completions.write'])
    expectError(await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}`, undefined, other.key), 403, 'AB03')
  })
})

describe('feedback', () => {
  let feedbackId: string

  it('rates a request of the caller’s workspace and shows up in the feedback graphs', async () => {
    const created = await gw.admin('POST', '/v1/feedback', { trace_id: tracesA[0], value: 8, weight: 0.5, metadata: { source: 'test' } }, a.key)
    expect(created.status, JSON.stringify(created.body)).toBe(200)
    expect(created.body).toEqual({ status: 'success', message: expect.any(String), feedback_ids: [expect.stringMatching(/^[0-9a-f-]{36}$/)] })
    feedbackId = created.body.feedback_ids[0]

    const batch = await gw.admin('POST', '/v1/feedback', [{ trace_id: tracesA[1], value: -2 }, { trace_id: tracesA[2], value: 4 }], a.key)
    expect(batch.status, JSON.stringify(batch.body)).toBe(200)
    expect(batch.body.feedback_ids).toHaveLength(2)

    const graph = await gw.admin('GET', `/v1/analytics/graphs/feedbacks?${range()}`, undefined, a.key)
    expect(graph.status).toBe(200)
    expect(graph.body.summary.total).toBe(3)
    const otherGraph = await gw.admin('GET', `/v1/analytics/graphs/feedbacks?${range()}`, undefined, b.key)
    expect(otherGraph.body.summary.total).toBe(0)
  })

  it('updates an entry (a new version), only in its workspace', async () => {
    const updated = await gw.admin('PUT', `/v1/feedback/${feedbackId}`, { value: -10 }, a.key)
    expect(updated.status, JSON.stringify(updated.body)).toBe(200)
    expect(updated.body).toEqual({ status: 'success', message: expect.any(String), feedback_ids: [feedbackId] })
    const graph = await gw.admin('GET', `/v1/analytics/graphs/feedbacks?${range()}`, undefined, a.key)
    expect(graph.body.summary.total).toBe(3)
    const scores = await gw.admin('GET', `/v1/analytics/graphs/feedbacks/scores?${range()}`, undefined, a.key)
    const scoreValues = (scores.body.data_points as Array<{ score: number; total: number }>).filter((point) => point.total > 0).map((point) => Number(point.score))
    expect(scoreValues).toContain(-10)
    expect(scoreValues).not.toContain(8)

    expectError(await gw.admin('PUT', `/v1/feedback/${feedbackId}`, { value: 1 }, b.key), 404, 'AB08')
    expectError(await gw.admin('PUT', `/v1/feedback/${randomUUID()}`, { value: 1 }, a.key), 404, 'AB08')
    expectError(await gw.admin('PUT', '/v1/feedback/not-a-uuid', { value: 1 }, a.key), 404, 'AB08')
  })

  it('refuses another workspace’s trace, unknown traces and bad values', async () => {
    expectError(await gw.admin('POST', '/v1/feedback', { trace_id: traceB, value: 1 }, a.key), 404, 'AB08', 'trace_id')
    expectError(await gw.admin('POST', '/v1/feedback', { trace_id: `nope-${run}`, value: 1 }, a.key), 404, 'AB08', 'trace_id')
    expectError(await gw.admin('POST', '/v1/feedback', [{ trace_id: tracesA[0], value: 1 }, { trace_id: traceB, value: 1 }], a.key), 404, 'AB08', '1.trace_id')
    expectError(await gw.admin('POST', '/v1/feedback', { trace_id: tracesA[0], value: 11 }, a.key), 400, 'AB01', 'value')
    expectError(await gw.admin('POST', '/v1/feedback', { trace_id: tracesA[0], value: 1, weight: 1.5 }, a.key), 400, 'AB01', 'weight')
    expectError(await gw.admin('POST', '/v1/feedback', { value: 1 }, a.key), 400, 'AB01', 'trace_id')
    const malformed = await fetch(`${gw.url}/v1/feedback`, { method: 'POST', headers: { 'x-gateway-api-key': a.key, 'content-type': 'application/json' }, body: '{"trace_id":' })
    expect(malformed.status).toBe(400)
    expect(((await malformed.json()) as { data: { errorCode: string } }).data.errorCode).toBe('AB01')
  })

  it('is recorded in the audit log', async () => {
    await vi.waitFor(
      async () => {
        const logs = await gw.admin('GET', '/v1/audit-logs?resource_type=feedback')
        expect(logs.status).toBe(200)
        expect(logs.body.data.some((entry: { action: string; response_status_code: number }) => entry.action === 'create' && entry.response_status_code === 200)).toBe(true)
        expect(logs.body.data.some((entry: { action: string }) => entry.action === 'update')).toBe(true)
      },
      { timeout: 10_000, interval: 50 },
    )
  })
})

describe('custom logs', () => {
  const customTrace = `custom-${run}`
  let logId: string

  it('inserts a custom log and reads it back by id and by trace id, without secrets', async () => {
    const inserted = await gw.admin(
      'POST',
      '/v1/logs',
      {
        request: {
          url: 'https://api.openai.com/v1/chat/completions?key=sk-in-query',
          method: 'post',
          headers: { authorization: 'Bearer sk-should-not-be-stored' },
          body: { model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }] },
        },
        response: { status: 200, body: { id: 'x', usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }, response_time: 120 },
        metadata: { trace_id: customTrace, _user: 'dave', run },
      },
      a.key,
    )
    expect(inserted.status, JSON.stringify(inserted.body)).toBe(200)
    expect(inserted.body).toMatchObject({ success: true, log_ids: [expect.any(String)] })
    logId = inserted.body.log_ids[0]

    const read = await gw.admin('GET', `/v1/logs/${logId}`, undefined, a.key)
    expect(read.status, JSON.stringify(read.body)).toBe(200)
    expect(read.body).toMatchObject({
      _id: logId,
      request: { url: 'https://api.openai.com/v1/chat/completions', method: 'POST', body: { model: 'gpt-4o' } },
      response: { status: 200, responseTime: 120 },
      metrics: { ai_org: 'openai', ai_model: 'gpt-4o', req_units: 3, res_units: 2, total_units: 5, trace_id: customTrace, source: 'custom', workspace_slug: a.workspaceId },
      created_at: expect.any(String),
    })
    const text = JSON.stringify(read.body)
    expect(text).not.toContain('sk-should-not-be-stored')
    expect(text).not.toContain('sk-in-query')

    const byTrace = await gw.admin('GET', `/v1/logs/${customTrace}`, undefined, a.key)
    expect(byTrace.status).toBe(200)
    expect(byTrace.body._id).toBe(logId)
  })

  it('counts custom logs in analytics and accepts feedback on them', async () => {
    await eventually(async () => {
      const graph = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&metadata=${encodeURIComponent(JSON.stringify({ run }))}`, undefined, a.key)
      expect(graph.body.summary.total).toBe(4)
    })
    const rated = await gw.admin('POST', '/v1/feedback', { trace_id: customTrace, value: 5 }, a.key)
    expect(rated.status).toBe(200)
  })

  it('keeps logs in their workspace', async () => {
    expectError(await gw.admin('GET', `/v1/logs/${logId}`, undefined, b.key), 404, 'AB08')
    expectError(await gw.admin('GET', `/v1/logs/${tracesA[0]}`, undefined, b.key), 404, 'AB08')
    const mine = await gw.admin('GET', `/v1/logs/${traceB}`, undefined, b.key)
    expect(mine.status).toBe(200)
  })

  it('refuses bad custom logs and keys without both scopes', async () => {
    expectError(await gw.admin('POST', '/v1/logs', { request: { url: 'https://x.test/v1' }, response: { body: {} } }, a.key), 400, 'AB01', 'request.body')
    expectError(await gw.admin('POST', '/v1/logs', { request: { url: 'ftp://x.test', body: {} }, response: { body: {} } }, a.key), 400, 'AB01', 'request.url')
    expectError(await gw.admin('POST', '/v1/logs', [], a.key), 400, 'AB01')
    const writer = await gw.workspaceKey(['logs.write'])
    expectError(await gw.admin('POST', '/v1/logs', { request: { url: 'https://x.test', body: {} }, response: { body: {} } }, writer.key), 403, 'AB03')
  })
})

describe('log exports', () => {
  let exportId: string

  it('lets an organisation key move a draft export to another workspace with filters.workspace_slug alone', async () => {
    const created = await gw.admin('POST', '/v1/logs/exports', { workspace_id: a.workspaceId, filters: rangeObject(), requested_data: ['id'] })
    expect(created.status, JSON.stringify(created.body)).toBe(200)
    const id = created.body.id as string
    expect((await gw.admin('GET', `/v1/logs/exports/${id}`)).body.workspace_id).toBe(a.workspaceId)
    const moved = await gw.admin('PUT', `/v1/logs/exports/${id}`, { filters: { ...rangeObject(), workspace_slug: b.workspaceId } })
    expect(moved.status, JSON.stringify(moved.body)).toBe(200)
    expect((await gw.admin('GET', `/v1/logs/exports/${id}`)).body.workspace_id).toBe(b.workspaceId)
    // Changing other filters keeps the workspace.
    expect((await gw.admin('PUT', `/v1/logs/exports/${id}`, { filters: rangeObject() })).status).toBe(200)
    expect((await gw.admin('GET', `/v1/logs/exports/${id}`)).body.workspace_id).toBe(b.workspaceId)
  })

  it('creates, runs and downloads an export of the workspace’s logs with only the requested fields', async () => {
    const created = await gw.admin('POST', '/v1/logs/exports', { filters: { ...rangeObject(), metadata: { run } }, requested_data: ['id', 'trace_id', 'ai_model', 'cost'], description: 'test' }, a.key)
    expect(created.status, JSON.stringify(created.body)).toBe(200)
    expect(created.body).toEqual({ id: expect.any(String), total: 0, object: 'export' })
    exportId = created.body.id

    const draft = await gw.admin('GET', `/v1/logs/exports/${exportId}`, undefined, a.key)
    expect(draft.body).toMatchObject({ object: 'export', id: exportId, status: 'draft', requested_data: ['id', 'trace_id', 'ai_model', 'cost'], workspace_id: a.workspaceId })
    expectError(await gw.admin('GET', `/v1/logs/exports/${exportId}/download`, undefined, a.key), 409, 'AB07')

    await gw.wiring.logSink?.flush()
    const started = await gw.admin('POST', `/v1/logs/exports/${exportId}/start`, undefined, a.key)
    expect(started.status, JSON.stringify(started.body)).toBe(200)
    expect(started.body).toEqual({ message: expect.any(String), object: 'export' })

    const done = await vi.waitFor(
      async () => {
        const current = await gw.admin('GET', `/v1/logs/exports/${exportId}`, undefined, a.key)
        expect(['in_progress', 'success']).toContain(current.body.status)
        expect(current.body.status).toBe('success')
        return current.body
      },
      { timeout: 15_000, interval: 50 },
    )
    expect(done.total).toBe(4)

    const download = await gw.admin('GET', `/v1/logs/exports/${exportId}/download`, undefined, a.key)
    expect(download.status).toBe(200)
    const signed = new URL(download.body.signed_url)
    const file = await fetch(`${gw.url}${signed.pathname}${signed.search}`)
    expect(file.status).toBe(200)
    expect(file.headers.get('content-type')).toContain('application/x-ndjson')
    const lines = (await file.text()).trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(lines).toHaveLength(4)
    for (const line of lines) expect(Object.keys(line).sort()).toEqual(['ai_model', 'cost', 'id', 'trace_id'])
    expect(lines.map((line) => line.trace_id).sort()).toEqual([...tracesA, `custom-${run}`].sort())

    // The signature is the credential: a changed one, another export's id, or no signature → 404.
    const tampered = new URLSearchParams(signed.search)
    tampered.set('signature', 'A'.repeat(43))
    expect((await fetch(`${gw.url}${signed.pathname}?${tampered}`)).status).toBe(404)
    expect((await fetch(`${gw.url}${signed.pathname}`)).status).toBe(404)
    expect((await fetch(`${gw.url}/v1/logs/exports/${randomUUID()}/file${signed.search}`)).status).toBe(404)
  })

  it('isolates exports by workspace', async () => {
    expectError(await gw.admin('GET', `/v1/logs/exports/${exportId}`, undefined, b.key), 404, 'AB08')
    expectError(await gw.admin('GET', `/v1/logs/exports/${exportId}/download`, undefined, b.key), 404, 'AB08')
    expectError(await gw.admin('POST', `/v1/logs/exports/${exportId}/start`, undefined, b.key), 404, 'AB08')
    expectError(await gw.admin('PUT', `/v1/logs/exports/${exportId}`, { description: 'mine' }, b.key), 404, 'AB08')
    const listB = await gw.admin('GET', '/v1/logs/exports', undefined, b.key)
    expect(listB.status).toBe(200)
    expect(listB.body.data.map((item: { id: string }) => item.id)).not.toContain(exportId)
    const listA = await gw.admin('GET', '/v1/logs/exports', undefined, a.key)
    expect(listA.body).toMatchObject({ object: 'list', total: 1 })
    const listOrg = await gw.admin('GET', `/v1/logs/exports?workspace_id=${a.workspaceId}`)
    expect(listOrg.body.data.map((item: { id: string }) => item.id)).toContain(exportId)
    // Another workspace's export of everything still holds only that workspace's logs.
    const createdB = await gw.admin('POST', '/v1/logs/exports', { filters: { ...rangeObject(), metadata: { run } }, requested_data: ['trace_id'] }, b.key)
    await gw.admin('POST', `/v1/logs/exports/${createdB.body.id}/start`, undefined, b.key)
    const doneB = await vi.waitFor(
      async () => {
        const current = await gw.admin('GET', `/v1/logs/exports/${createdB.body.id}`, undefined, b.key)
        expect(current.body.status).toBe('success')
        return current.body
      },
      { timeout: 15_000, interval: 50 },
    )
    expect(doneB.total).toBe(1)
  })

  it('updates a finished export back to draft; cancel needs a running one', async () => {
    const updated = await gw.admin('PUT', `/v1/logs/exports/${exportId}`, { requested_data: ['id'] }, a.key)
    expect(updated.status, JSON.stringify(updated.body)).toBe(200)
    const current = await gw.admin('GET', `/v1/logs/exports/${exportId}`, undefined, a.key)
    expect(current.body).toMatchObject({ status: 'draft', requested_data: ['id'] })
    expectError(await gw.admin('POST', `/v1/logs/exports/${exportId}/cancel`, undefined, a.key), 409, 'AB07')
  })

  it('refuses bad export input with a 400 naming the field', async () => {
    expectError(await gw.admin('POST', '/v1/logs/exports', { filters: rangeObject(), requested_data: ['password'] }, a.key), 400, 'AB01', 'requested_data')
    expectError(await gw.admin('POST', '/v1/logs/exports', { filters: {}, requested_data: ['id'] }, a.key), 400, 'AB01', 'filters.time_of_generation_min')
    expectError(await gw.admin('POST', '/v1/logs/exports', { filters: { ...rangeObject(), drop: 'table' }, requested_data: ['id'] }, a.key), 400, 'AB01', 'filters.drop')
    expectError(await gw.admin('POST', '/v1/logs/exports', { filters: { ...rangeObject(), page_size: 50_001 }, requested_data: ['id'] }, a.key), 400, 'AB01', 'filters.page_size')
    expectError(await gw.admin('POST', '/v1/logs/exports', { filters: rangeObject(), requested_data: ['id'], workspace_id: b.workspaceId }, a.key), 404, 'AB08')
    expectError(await gw.admin('GET', '/v1/logs/exports/not-a-uuid', undefined, a.key), 404, 'AB08')
  })

  it('is recorded in the audit log', async () => {
    // The audit plugin stores entries after the reply (never awaited by the request): poll.
    await vi.waitFor(
      async () => {
        const logs = await gw.admin('GET', '/v1/audit-logs?resource_type=log_export')
        const actions = new Set(logs.body.data.map((entry: { action: string }) => entry.action))
        expect([...actions].sort()).toEqual(expect.arrayContaining(['cancel', 'create', 'start', 'update']))
      },
      { timeout: 10_000, interval: 50 },
    )
  })
})

describe('with the log plugin disabled', () => {
  let off: TestGateway

  beforeAll(async () => {
    off = await startTestGateway({ overlay: { plugins: { log: { enabled: false } } } })
  })

  afterAll(async () => {
    await off?.close()
  })

  it('boots without a log store and answers 503 GW_LOGS_DISABLED on analytics, feedback, logs and exports', async () => {
    const names = off.wiring.services.map((entry) => entry.name)
    for (const name of names) expect(name).not.toMatch(/log-sink|log-analytics|export-store/)
    const key = await off.workspaceKey(SCOPES)
    for (const [method, path, body] of [
      ['GET', `/v1/analytics/graphs/requests?${range()}`, undefined],
      ['POST', '/v1/feedback', { trace_id: 't', value: 1 }],
      ['GET', '/v1/logs/some-id', undefined],
      ['POST', '/v1/logs/exports', { filters: rangeObject(), requested_data: ['id'] }],
    ] as const) {
      const response = await off.admin(method, path, body, key.key)
      expectError(response, 503, 'AB04', 'log plugin is disabled')
    }
  })
})
