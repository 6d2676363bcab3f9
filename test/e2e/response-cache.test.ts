/**
 * The response cache end to end (issue 15 item 5, API.md §2 and §4): inline configs with
 * `cache: {mode: "simple", max_age}` in `x-gateway-config`, a real gateway over real sockets and a
 * loopback mock provider that counts what reaches it; driven with raw fetch (headers, bytes) and the
 * official `openai` client (whole and streamed answers). Then Redis: an answer stored before a
 * restart is a hit after it.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest'
import { startGateway } from '../../config/boot.js'
import { CHAT_BODY, startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, MOCK_STREAM_DELTAS, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

let mock: MockUpstream
let gw: TestGateway
let key: string

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  key = (await gw.workspaceKey(['completions.write'])).key
})

afterEach(() => {
  mock.reset()
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

function cachedConfig(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { cache: { mode: 'simple', max_age: 60 }, provider: 'openai', api_key: 'sk-x', custom_host: mock.url, ...extra }
}

function post(url: string, gatewayKey: string, config: unknown, body: unknown = CHAT_BODY, extra: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gateway-api-key': gatewayKey, 'x-gateway-config': JSON.stringify(config), ...extra },
    body: JSON.stringify(body),
  })
}

function client(config: unknown, extra: Record<string, string> = {}): OpenAI {
  return new OpenAI({
    baseURL: `${gw.url}/v1`,
    apiKey: 'unused',
    maxRetries: 0,
    defaultHeaders: { 'x-gateway-api-key': key, 'x-gateway-config': JSON.stringify(config), ...extra },
  })
}

/** A body no other test sends, so entries of earlier tests never answer it. */
function freshBody(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...CHAT_BODY, messages: [{ role: 'user', content: `Hi ${Math.random().toString(36).slice(2)}` }], ...extra }
}

/** Lets the gateway's enqueued cache write land (it happens after the reply ended). */
async function stored(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error('the answer was never stored')
}

describe('response cache (in process)', () => {
  it('answers the second identical request from the cache: MISS then HIT, the provider called once, the same bytes', async () => {
    const body = freshBody()
    const first = await post(gw.url, key, cachedConfig(), body)
    expect(first.status).toBe(200)
    expect(first.headers.get('x-gateway-cache-status')).toBe('MISS')
    const firstText = await first.text()
    expect(mock.requests).toHaveLength(1)

    let second: Response | null = null
    await stored(async () => {
      second = await post(gw.url, key, cachedConfig(), body)
      return second.headers.get('x-gateway-cache-status') === 'HIT'
    })
    const hit = second as unknown as Response
    expect(hit.status).toBe(200)
    expect(hit.headers.get('content-type')).toContain('application/json')
    expect(await hit.text()).toBe(firstText)
    // Every later lookup was a miss until the write landed, then nothing more reached the provider.
    const calls = mock.requests.length
    const third = await post(gw.url, key, cachedConfig(), body)
    expect(third.headers.get('x-gateway-cache-status')).toBe('HIT')
    expect(await third.text()).toBe(firstText)
    expect(mock.requests).toHaveLength(calls)
    // The routing headers are this request's own, never the stored request's.
    expect(third.headers.get('x-gateway-trace-id')).not.toBe(first.headers.get('x-gateway-trace-id'))
    expect(third.headers.get('x-gateway-last-used-option-index')).toBe('config')
  })

  it('the same body with its keys in another order is the same entry', async () => {
    const content = `order ${Math.random()}`
    const first = await post(gw.url, key, cachedConfig(), { model: 'gpt-4o-mini', temperature: 0, messages: [{ role: 'user', content }] })
    expect(first.headers.get('x-gateway-cache-status')).toBe('MISS')
    await first.text()
    await stored(async () => {
      const again = await post(gw.url, key, cachedConfig(), { messages: [{ content, role: 'user' }], temperature: 0, model: 'gpt-4o-mini' })
      await again.text()
      return again.headers.get('x-gateway-cache-status') === 'HIT'
    })
  })

  it('x-gateway-cache-force-refresh: true goes to the provider (REFRESH) and the new answer is stored', async () => {
    const body = freshBody()
    await (await post(gw.url, key, cachedConfig(), body)).text()
    await stored(async () => (await post(gw.url, key, cachedConfig(), body)).headers.get('x-gateway-cache-status') === 'HIT')
    const calls = mock.requests.length
    mock.next({ type: 'json', body: { id: 'refreshed', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'new' }, finish_reason: 'stop' }] } })
    const refreshed = await post(gw.url, key, cachedConfig(), body, { 'x-gateway-cache-force-refresh': 'true' })
    expect(refreshed.headers.get('x-gateway-cache-status')).toBe('REFRESH')
    expect(((await refreshed.json()) as { id: string }).id).toBe('refreshed')
    expect(mock.requests).toHaveLength(calls + 1)
    await stored(async () => {
      const after = await post(gw.url, key, cachedConfig(), body)
      return after.headers.get('x-gateway-cache-status') === 'HIT' && ((await after.json()) as { id: string }).id === 'refreshed'
    })
  })

  it('a config without cache says DISABLED and always reaches the provider', async () => {
    const config = { provider: 'openai', api_key: 'sk-x', custom_host: mock.url }
    const body = freshBody()
    for (let i = 0; i < 2; i++) {
      const response = await post(gw.url, key, config, body)
      expect(response.headers.get('x-gateway-cache-status')).toBe('DISABLED')
      await response.text()
    }
    expect(mock.requests).toHaveLength(2)
  })

  it('an error answer is never stored', async () => {
    const body = freshBody()
    mock.next({ type: 'json', status: 500, body: { error: { message: 'boom', type: 'server_error' } } })
    const failed = await post(gw.url, key, cachedConfig(), body)
    expect(failed.status).toBe(500)
    await failed.text()
    const next = await post(gw.url, key, cachedConfig(), body)
    expect(next.status).toBe(200)
    expect(next.headers.get('x-gateway-cache-status')).toBe('MISS')
    await next.text()
    expect(mock.requests).toHaveLength(2)
  })

  it('another workspace sending the same config and body gets its own answer from the provider', async () => {
    const other = (await gw.workspaceKey(['completions.write'])).key
    const body = freshBody()
    await (await post(gw.url, key, cachedConfig(), body)).text()
    await stored(async () => (await post(gw.url, key, cachedConfig(), body)).headers.get('x-gateway-cache-status') === 'HIT')
    const calls = mock.requests.length
    const theirs = await post(gw.url, other, cachedConfig(), body)
    expect(theirs.headers.get('x-gateway-cache-status')).toBe('MISS')
    await theirs.text()
    expect(mock.requests).toHaveLength(calls + 1)
  })

  it('the openai client: a whole answer, then a streamed one answered from the cache as a proper stream', async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: `stream ${Math.random()}` }]
    const whole = await client(cachedConfig()).chat.completions.create({ model: 'gpt-4o-mini', messages }).withResponse()
    expect(whole.data.choices[0]?.message.content).toBe(MOCK_REPLY)
    expect(whole.response.headers.get('x-gateway-cache-status')).toBe('MISS')

    // A streamed request is another entry (the stream flag is part of the key).
    const read = async (): Promise<{ status: string | null; deltas: string[] }> => {
      const { data: stream, response } = await client(cachedConfig()).chat.completions.create({ model: 'gpt-4o-mini', messages, stream: true }).withResponse()
      const deltas: string[] = []
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta.content
        if (delta) deltas.push(delta)
      }
      return { status: response.headers.get('x-gateway-cache-status'), deltas }
    }
    const miss = await read()
    expect(miss.status).toBe('MISS')
    expect(miss.deltas).toEqual([...MOCK_STREAM_DELTAS])
    const calls = mock.requests.length
    let hit: { status: string | null; deltas: string[] } | null = null
    await stored(async () => {
      hit = await read()
      return hit.status === 'HIT'
    })
    // The client iterated to the end: the cached bytes end with data: [DONE].
    expect(hit!.deltas).toEqual([...MOCK_STREAM_DELTAS])
    const raw = await post(gw.url, key, cachedConfig(), { model: 'gpt-4o-mini', messages, stream: true })
    expect(raw.headers.get('x-gateway-cache-status')).toBe('HIT')
    expect(raw.headers.get('content-type')).toContain('text/event-stream')
    expect((await raw.text()).endsWith('data: [DONE]\n\n')).toBe(true)
    expect(mock.requests.length).toBeLessThanOrEqual(calls + 1)
  })
})

/**
 * A gateway restarted on the same data directory (same workspace and key, empty process state):
 * with `REDIS_URL` the first request after the restart is a hit, as on any other instance sharing
 * the Redis; without it the in-process store started empty (the control).
 */
describe('response cache shared through Redis', () => {
  async function restartedHit(env: Record<string, string>): Promise<{ before: string | null; after: string | null; calls: number }> {
    const dataDir = mkdtempSync(join(tmpdir(), 'gw-e2e-cache-'))
    const start = () =>
      startGateway({
        env: { PORT: '0', GATEWAY_DATA_DIR: dataDir, GATEWAY_BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY, GATEWAY_ALLOWED_CUSTOM_HOSTS: '127.0.0.1', GATEWAY_LOG_LEVEL: 'silent', ...env },
        overlay: { server: { host: '127.0.0.1' } },
      })
    const body = freshBody()
    let handle = await start()
    try {
      const admin = (method: string, path: string, payload: unknown) =>
        fetch(`${handle.url}${path}`, { method, headers: { 'x-gateway-api-key': TEST_ADMIN_KEY, 'content-type': 'application/json' }, body: JSON.stringify(payload) }).then(
          (response) => response.json() as Promise<{ id: string; key: string }>,
        )
      const workspace = await admin('POST', '/v1/admin/workspaces', { name: `ws-${Math.random().toString(36).slice(2, 8)}` })
      const apiKey = (await admin('POST', '/v1/api-keys/workspace/service', { name: 'cache', workspace_id: workspace.id, scopes: ['completions.write'] })).key
      const first = await post(handle.url, apiKey, cachedConfig(), body)
      const before = first.headers.get('x-gateway-cache-status')
      await first.text()
      await stored(async () => (await post(handle.url, apiKey, cachedConfig(), body)).headers.get('x-gateway-cache-status') === 'HIT')
      await handle.stop()
      const calls = mock.requests.length
      handle = await start()
      const again = await post(handle.url, apiKey, cachedConfig(), body)
      await again.text()
      return { before, after: again.headers.get('x-gateway-cache-status'), calls: mock.requests.length - calls }
    } finally {
      await handle.stop()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }

  it('with REDIS_URL an answer stored before a restart is a hit after it, without reaching the provider', async () => {
    expect(await restartedHit({ REDIS_URL: inject('redisUrl') })).toEqual({ before: 'MISS', after: 'HIT', calls: 0 })
  })

  it('without it the in-process store starts empty (control)', async () => {
    expect(await restartedHit({})).toEqual({ before: 'MISS', after: 'MISS', calls: 1 })
  })
})
