/**
 * Rate limits end to end: limits set through the Admin API, enforced on the data plane of the real
 * gateway (mock upstream), once with the embedded in-process limiter and once with Redis.
 */
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

let mock: MockUpstream

beforeAll(async () => {
  mock = await startMockUpstream()
})

afterAll(async () => {
  await mock?.close()
})

function completionWithUsage(totalTokens: number): Json {
  return {
    id: 'chatcmpl-usage',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content: 'long answer' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 10, completion_tokens: totalTokens - 10, total_tokens: totalTokens },
  }
}

describe.each([
  { limiter: 'in-process', env: (): Record<string, string> => ({}) },
  { limiter: 'redis', env: (): Record<string, string> => ({ REDIS_URL: inject('redisUrl') }) },
])('rate limits with the $limiter limiter', ({ limiter, env }) => {
  let gw: TestGateway

  beforeAll(async () => {
    gw = await startTestGateway({ env: env() })
  })

  afterAll(async () => {
    await gw?.close()
  })

  function chat(key: string, body: Json = {}): Promise<Response> {
    return fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url, authorization: 'Bearer sk-provider' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }], ...body }),
    })
  }

  async function workspace(body: Json = {}): Promise<string> {
    const created = await gw.admin('POST', '/v1/admin/workspaces', { name: `rl-${Math.random().toString(36).slice(2, 8)}`, ...body })
    expect(created.status, JSON.stringify(created.body)).toBe(200)
    return created.body.id as string
  }

  async function key(workspaceId: string, rateLimits?: Json[]): Promise<{ key: string; id: string }> {
    const created = await gw.admin('POST', '/v1/api-keys/workspace/service', {
      name: 'limited',
      workspace_id: workspaceId,
      scopes: ['completions.write'],
      ...(rateLimits === undefined ? {} : { rate_limits: rateLimits }),
    })
    expect(created.status, JSON.stringify(created.body)).toBe(200)
    return { key: created.body.key as string, id: created.body.id as string }
  }

  it(`runs the ${limiter} limiter`, async () => {
    const ready = (await (await fetch(`${gw.url}/readyz`)).json()) as Json
    expect(ready.checks[`${limiter}-rate-limiter`]).toMatchObject({ ok: true })
  })

  it('lets 3 requests per minute through on a key limited to 3 rpm; the 4th gets 429 with Retry-After', async () => {
    const { key: secret } = await key(await workspace(), [{ type: 'requests', unit: 'rpm', value: 3 }])
    for (let i = 0; i < 3; i++) expect((await chat(secret)).status).toBe(200)
    const refused = await chat(secret)
    expect(refused.status).toBe(429)
    const retryAfter = Number(refused.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(20)
    const body = (await refused.json()) as Json
    expect(body).toEqual({
      error: { message: expect.stringContaining('3 requests per minute'), type: 'rate_limit_error', param: null, code: 'GW_RATE_LIMITED' },
    })
    // The entity is named masked: never the secret.
    expect(body.error.message).toMatch(/^Rate limit exceeded for API key \S+\*{8}\S+: /)
    expect(body.error.message).not.toContain(secret)
  })

  it('raises the openai client RateLimitError with the Retry-After header', async () => {
    const { key: secret } = await key(await workspace(), [{ type: 'requests', unit: 'rph', value: 1 }])
    const client = new OpenAI({
      apiKey: 'sk-provider',
      baseURL: `${gw.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-gateway-api-key': secret, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
    })
    await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] })
    const failure = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(OpenAI.RateLimitError)
    const error = failure as InstanceType<typeof OpenAI.RateLimitError>
    expect(error.status).toBe(429)
    expect(Number(error.headers?.get('retry-after'))).toBeGreaterThan(3_000)
    expect(error.message).toContain('1 request per hour')
  })

  it('applies a workspace rate limit to all of its keys together', async () => {
    const workspaceId = await workspace()
    const updated = await gw.admin('PUT', `/v1/admin/workspaces/${workspaceId}`, { rate_limits: [{ type: 'requests', unit: 'rpm', value: 2 }] })
    expect(updated.status, JSON.stringify(updated.body)).toBe(200)
    const first = await key(workspaceId)
    const second = await key(workspaceId)
    expect((await chat(first.key)).status).toBe(200)
    expect((await chat(second.key)).status).toBe(200)
    for (const secret of [first.key, second.key]) {
      const refused = await chat(secret)
      expect(refused.status).toBe(429)
      expect(((await refused.json()) as Json).error.message).toMatch(/^Rate limit exceeded for workspace .+: 2 requests per minute$/)
    }
    // Another workspace's keys are not affected.
    const elsewhere = await key(await workspace())
    expect((await chat(elsewhere.key)).status).toBe(200)
  })

  it('applies a virtual key rate limit, naming the virtual key', async () => {
    const workspaceId = await workspace()
    const { key: secret } = await key(workspaceId)
    const created = await gw.admin('POST', '/v1/virtual-keys', {
      name: 'limited',
      provider: 'openai',
      key: 'sk-provider-from-vk',
      custom_host: mock.url,
      workspace_id: workspaceId,
      rate_limits: [{ type: 'requests', unit: 'rpm', value: 2 }],
    })
    expect(created.status, JSON.stringify(created.body)).toBe(200)
    const viaVirtualKey = (): Promise<Response> =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-gateway-api-key': secret, 'x-gateway-virtual-key': created.body.slug },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }),
      })
    expect((await viaVirtualKey()).status).toBe(200)
    expect((await viaVirtualKey()).status).toBe(200)
    const refused = await viaVirtualKey()
    expect(refused.status).toBe(429)
    expect(((await refused.json()) as Json).error.message).toBe(`Rate limit exceeded for virtual key ${created.body.slug}: 2 requests per minute`)
    // The same API key without the virtual key is not limited.
    expect((await chat(secret)).status).toBe(200)
  })

  it('refuses a request whose max_tokens exceeds the tokens left, after real usage was charged', async () => {
    const { key: secret } = await key(await workspace(), [{ type: 'tokens', unit: 'rpm', value: 1_000 }])
    const tooBig = await chat(secret, { max_tokens: 2_000 })
    expect(tooBig.status).toBe(429)
    expect(((await tooBig.json()) as Json).error.message).toContain('asks for up to 2000 tokens')

    mock.next({ type: 'json', body: completionWithUsage(900) })
    expect((await chat(secret, { max_tokens: 500 })).status).toBe(200)
    // The 900 tokens are charged after the reply ended: about 100 are left, refilling at ~17/s.
    let refused: Response | undefined
    await vi.waitFor(
      async () => {
        const attempt = await chat(secret, { max_tokens: 400 })
        expect(attempt.status).toBe(429)
        refused = attempt
      },
      { timeout: 5_000, interval: 50 },
    )
    expect(Number(refused?.headers.get('retry-after'))).toBeGreaterThanOrEqual(10)
    expect(((await refused?.json()) as Json).error).toMatchObject({ type: 'rate_limit_error', code: 'GW_RATE_LIMITED', message: expect.stringContaining('1000 tokens per minute') })
    expect((await chat(secret, { max_tokens: 50 })).status).toBe(200)
  })
})
