/** With `CLICKHOUSE_URL` set, request logs go to ClickHouse (the run's throwaway server, a fresh database). */
import { randomBytes, randomUUID } from 'node:crypto'
import { createClient, type ClickHouseClient } from '@clickhouse/client'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { ClickHouseLogSink } from '../../adapters/clickhouse/clickhouse-log-sink.js'
import { postChat, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startFaultProxy } from '../helpers/tcp-fault-proxy.js'
import { MOCK_USAGE, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

/** The mock answers any chat; an empty conversation keeps the logged request small. */
const EMPTY_CHAT = { model: 'gpt-4o-mini', messages: [] }
const database = `gw_e2e_${randomBytes(6).toString('hex')}`
let clickhouse: ClickHouseClient
let mock: MockUpstream
let gw: TestGateway

beforeAll(async () => {
  clickhouse = createClient({ url: inject('clickhouseUrl') })
  mock = await startMockUpstream()
  gw = await startTestGateway({ env: { CLICKHOUSE_URL: `${inject('clickhouseUrl')}/${database}` } })
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
  await clickhouse?.command({ query: `DROP DATABASE IF EXISTS ${database}` })
  await clickhouse?.close()
})

describe('request log in ClickHouse', () => {
  it('runs the ClickHouse sink, reports it in /readyz and /metrics', async () => {
    expect(gw.wiring.logSink).toBeInstanceOf(ClickHouseLogSink)
    const ready = await fetch(`${gw.url}/readyz`)
    const body = await ready.json()
    expect(ready.status, JSON.stringify(body)).toBe(200)
    expect(JSON.stringify(body)).toContain('clickhouse-log-sink')
    const metrics = await (await fetch(`${gw.url}/metrics`)).text()
    expect(metrics).toContain('gw_log_journaled_records 0')
    expect(metrics).toContain('gw_log_dropped_records_total 0')
  })

  it('stores one row per request in the database named by the URL', async () => {
    const made = await gw.workspaceKey(['completions.write'])
    const traces = Array.from({ length: 5 }, () => `trace-ch-${randomUUID()}`)
    for (const traceId of traces) {
      const response = await postChat(gw.url, made.key, mock.url, { 'x-gateway-trace-id': traceId, 'x-gateway-metadata': JSON.stringify({ _user: 'carol' }) }, EMPTY_CHAT)
      expect(response.status, await response.text()).toBe(200)
    }
    const sink = gw.wiring.logSink as ClickHouseLogSink
    // The record is enqueued after the reply ends; flush until all five are stored.
    await expect
      .poll(
        async () => {
          await sink.flush()
          const result = await clickhouse.query({
            query: `SELECT count() AS n FROM ${database}.request_logs WHERE trace_id IN (${traces.map((trace) => `'${trace}'`).join(', ')})`,
            format: 'JSONEachRow',
          })
          return Number((await result.json<{ n: string }>())[0]?.n)
        },
        { timeout: 10_000 },
      )
      .toBe(5)
    const result = await clickhouse.query({
      query: `SELECT end_user, model, status, prompt_tokens, cost_nano_usd, api_key_id FROM ${database}.request_logs WHERE trace_id = '${traces[0]}'`,
      format: 'JSONEachRow',
    })
    expect(await result.json()).toEqual([
      {
        end_user: 'carol',
        model: 'gpt-4o-mini',
        status: 200,
        prompt_tokens: MOCK_USAGE.prompt_tokens,
        cost_nano_usd: String(MOCK_USAGE.prompt_tokens * 150 + MOCK_USAGE.completion_tokens * 600),
        api_key_id: made.keyId,
      },
    ])
  })
})

describe('config-routed requests in ClickHouse', () => {
  it('stores the attempts of an inline-config fallback and GET /v1/logs/{id} returns them', async () => {
    const made = await gw.workspaceKey(['completions.write'])
    const traceId = `trace-ch-cfg-${randomUUID()}`
    mock.next({ type: 'json', status: 500, body: { error: { message: 'boom' } } })
    const target = { provider: 'openai', api_key: 'sk-ch', custom_host: mock.url }
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': made.key, 'x-gateway-trace-id': traceId, 'x-gateway-config': JSON.stringify({ strategy: { mode: 'fallback' }, targets: [target, target] }) },
      body: JSON.stringify(EMPTY_CHAT),
    })
    expect(response.status, await response.text()).toBe(200)
    const read = await fetch(`${gw.url}/v1/logs/${traceId}`, { headers: { 'x-gateway-api-key': made.key } })
    const text = await read.text()
    expect(read.status, text).toBe(200)
    const metrics = JSON.parse(text).metrics
    expect(metrics).toMatchObject({ config: null, config_version: null, retry_count: 1, fallback_index: 1, response_status_code: 200 })
    expect(metrics.attempts.map((attempt: Record<string, unknown>) => [attempt.target, attempt.status])).toEqual([
      ['config.targets[0]', 500],
      ['config.targets[1]', 200],
    ])
    const stored = await clickhouse.query({ query: `SELECT attempts FROM ${database}.request_logs WHERE trace_id = '${traceId}'`, format: 'JSONEachRow' })
    expect(JSON.parse(String((await stored.json<{ attempts: string }>())[0]?.attempts))).toEqual(metrics.attempts)
  })
})

describe('ClickHouse unreachable', () => {
  it('boots and serves requests (logs go to the journal), stays ready, answers analytics with 503, and delivers the rows once ClickHouse is back', async () => {
    const proxy = await startFaultProxy(new URL(inject('clickhouseUrl')))
    proxy.mode = 'down'
    const outage = `gw_e2e_down_${randomBytes(6).toString('hex')}`
    const down = await startTestGateway({ env: { CLICKHOUSE_URL: `${proxy.url}/${outage}` } })
    try {
      const made = await down.workspaceKey(['completions.write', 'analytics.view'])
      const trace = `trace-down-${randomUUID()}`
      const chat = await postChat(down.url, made.key, mock.url, { 'x-gateway-trace-id': trace }, EMPTY_CHAT)
      expect(chat.status).toBe(200)
      const sink = down.wiring.logSink as ClickHouseLogSink
      await expect(sink.flush()).rejects.toThrow()
      expect(sink.stats().journaled).toBe(1)
      expect((await fetch(`${down.url}/readyz`)).status).toBe(200)

      const range = `time_of_generation_min=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}&time_of_generation_max=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`
      const analytics = await fetch(`${down.url}/v1/analytics/graphs/requests?${range}`, { headers: { 'x-gateway-api-key': made.key } })
      expect(analytics.status).toBe(503)
      expect(await analytics.json()).toEqual({ success: false, data: { message: expect.stringContaining('log store'), errorCode: 'AB04' } })

      proxy.mode = 'up'
      await sink.flush()
      const back = await fetch(`${down.url}/v1/analytics/graphs/requests?${range}`, { headers: { 'x-gateway-api-key': made.key } })
      expect(back.status).toBe(200)
      expect(((await back.json()) as { summary: { total: number } }).summary.total).toBe(1)
    } finally {
      await down.close()
      await proxy.close()
      await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${outage}` })
    }
  })
})
