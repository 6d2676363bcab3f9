/**
 * The request log of config-routed requests against a hostile or curious client: what an inline
 * config carries (provider keys, strings shaped like JSON or SQL) is stored as plain data or not at
 * all, and another workspace neither reads such a log nor counts it by config.
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CHAT_BODY, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

let mock: MockUpstream
let gw: TestGateway
let key: string
let workspaceId: string
let outsider: string
const startedAt = Date.now()

const SECRET = 'sk-inline-provider-secret-9f8e7d'
/** A virtual key name written to break out of JSON text, SQL literals and log lines (ASCII: it travels in a header). */
const HOSTILE_KEY = `vk'); DROP TABLE request_logs; --"}],"status":200,"x":"\\u0000\n\\' OR '1'='1`

beforeAll(async () => {
  mock = await startMockUpstream()
  // Bodies are kept, so a secret that reached the request or response body would show.
  gw = await startTestGateway({ overlay: { plugins: { log: { config: { bodies: { enabled: true } } } } } })
  const made = await gw.workspaceKey(['completions.write', 'analytics.view'])
  key = made.key
  workspaceId = made.workspaceId
  outsider = (await gw.workspaceKey(['completions.write', 'analytics.view'])).key
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

async function chat(config: unknown, traceId: string): Promise<Response> {
  const response = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-gateway-api-key': key,
      'x-gateway-trace-id': traceId,
      'x-gateway-config': typeof config === 'string' ? config : JSON.stringify(config),
    },
    body: JSON.stringify(CHAT_BODY),
  })
  await response.arrayBuffer()
  return response
}

async function readLog(traceId: string, as: string): Promise<{ status: number; text: string }> {
  const response = await fetch(`${gw.url}/v1/logs/${traceId}`, { headers: { 'x-gateway-api-key': as } })
  return { status: response.status, text: await response.text() }
}

function range(): string {
  return `time_of_generation_min=${encodeURIComponent(new Date(startedAt - 60_000).toISOString())}&time_of_generation_max=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`
}

describe('config-routed request logs', () => {
  it('store a hostile virtual key name as plain data, and never an inline provider key', async () => {
    const traceId = `sec-${randomUUID()}`
    const config = {
      strategy: { mode: 'fallback' },
      targets: [{ virtual_key: HOSTILE_KEY }, { provider: 'openai', api_key: SECRET, custom_host: mock.url }],
    }
    const response = await chat(config, traceId)
    expect(response.status).toBe(200)
    expect(mock.requests[0]?.headers.authorization).toBe(`Bearer ${SECRET}`)
    const log = await readLog(traceId, key)
    expect(log.status).toBe(200)
    const metrics = JSON.parse(log.text).metrics
    // Unknown virtual key: the attempt is refused (404) and the fallback serves.
    expect(metrics.attempts).toHaveLength(2)
    expect(metrics.attempts[0]).toMatchObject({ virtual_key: HOSTILE_KEY, status: 404, error_code: 'GW_VIRTUAL_KEY_NOT_FOUND' })
    expect(metrics.attempts[1]).toMatchObject({ virtual_key: null, provider: 'openai', status: 200 })
    expect(metrics).toMatchObject({ fallback_index: 1, retry_count: 1, virtual_key: null })
    expect(log.text).not.toContain(SECRET)

    // The store still holds every row and answers the next request's log.
    const next = `sec-${randomUUID()}`
    expect((await chat({ provider: 'openai', api_key: SECRET, custom_host: mock.url }, next)).status).toBe(200)
    const again = await readLog(next, key)
    expect(again.status).toBe(200)
    expect(again.text).not.toContain(SECRET)
    const requests = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}`, undefined, key)
    expect(requests.body.summary.total).toBe(2)
  })

  it('are neither readable nor counted by config from another workspace', async () => {
    const made = await gw.admin('POST', '/v1/virtual-keys', { workspace_id: workspaceId, name: 'sec', provider: 'openai', key: 'sk-vk', custom_host: mock.url })
    expect(made.status, JSON.stringify(made.body)).toBe(200)
    const config = await gw.admin('POST', '/v1/configs', { workspace_id: workspaceId, name: 'private', config: { virtual_key: made.body.slug } })
    expect(config.status, JSON.stringify(config.body)).toBe(200)
    const slug: string = config.body.slug
    const traceId = `sec-${randomUUID()}`
    expect((await chat(slug, traceId)).status).toBe(200)
    expect((await readLog(traceId, key)).status).toBe(200)

    expect((await readLog(traceId, outsider)).status).toBe(404)
    const counted = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&configs=${slug}`, undefined, outsider)
    expect(counted.status).toBe(200)
    expect(counted.body.summary.total).toBe(0)
    const groups = await gw.admin('GET', `/v1/analytics/groups/configs?${range()}`, undefined, outsider)
    expect(groups.body.data).toEqual([])
    const own = await gw.admin('GET', `/v1/analytics/graphs/requests?${range()}&configs=${slug}`, undefined, key)
    expect(own.body.summary.total).toBe(1)
  })
})
