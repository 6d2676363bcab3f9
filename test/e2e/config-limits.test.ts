/**
 * Rate limits and budgets per attempt of a config-routed request (issue 15 item 4), end to end: virtual
 * keys made through the Admin API, an inline `x-gateway-config` whose targets name them, the real
 * gateway and a mock provider; once with the in-process limiter and ledger, once with Redis. Each
 * target's virtual key is checked and charged for the attempt it serves; our own 429 / 412 (and an
 * unknown or foreign key's 404) refuse that attempt without a provider call and fall back.
 */
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import { CHAT_BODY, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, MOCK_USAGE, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'
import { freePorts } from '../helpers/services.js'

type Json = Record<string, any>

const WAIT = { timeout: 5_000, interval: 25 }
const OPTION_INDEX = 'x-gateway-last-used-option-index'

let mock: MockUpstream

beforeAll(async () => {
  mock = await startMockUpstream()
})

afterAll(async () => {
  await mock?.close()
})

describe.each([
  { backend: 'in-process', env: (): Record<string, string> => ({}) },
  { backend: 'redis', env: (): Record<string, string> => ({ REDIS_URL: inject('redisUrl') }) },
])('limits per attempt of a config ($backend limiter and ledger)', ({ env }) => {
  let gw: TestGateway
  let apiKey: string
  let workspaceId: string

  beforeAll(async () => {
    gw = await startTestGateway({ env: env() })
    ;({ key: apiKey, workspaceId } = await gw.workspaceKey(['completions.write']))
  })

  afterAll(async () => {
    await gw?.close()
  })

  /** A virtual key of `workspace` on the mock, with its own provider key; returns its slug. */
  async function virtualKey(providerKey: string, fields: Json = {}, workspace = workspaceId): Promise<string> {
    const created = await gw.admin('POST', '/v1/virtual-keys', {
      name: `vk ${providerKey}`,
      provider: 'openai',
      custom_host: mock.url,
      key: providerKey,
      workspace_id: workspace,
      ...fields,
    })
    expect(created.status, JSON.stringify(created.body)).toBe(200)
    return created.body.slug as string
  }

  async function currentUsage(slug: string): Promise<number> {
    const read = await gw.admin('GET', `/v1/virtual-keys/${slug}`)
    expect(read.status, JSON.stringify(read.body)).toBe(200)
    return read.body.usage_limits.current_usage as number
  }

  function fallback(...slugs: string[]): string {
    return JSON.stringify({ strategy: { mode: 'fallback' }, targets: slugs.map((slug) => ({ virtual_key: slug })) })
  }

  function chat(config: string, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': apiKey, 'x-gateway-config': config, ...headers },
      body: JSON.stringify(CHAT_BODY),
    })
  }

  /** The provider keys the mock saw since `from`, in order. */
  function providerKeysSince(from: number): Array<string | undefined> {
    return mock.requests.slice(from).map((request) => request.headers.authorization)
  }

  it('falls back from a virtual key over its 1 request/min limit to the next target, and charges each budget to the key that served', async () => {
    const limited = await virtualKey('sk-limited-a', {
      rate_limits: [{ type: 'requests', unit: 'rpm', value: 1 }],
      usage_limits: { type: 'tokens', credit_limit: 1_000_000 },
    })
    const spare = await virtualKey('sk-spare-b', { usage_limits: { type: 'tokens', credit_limit: 1_000_000 } })
    const config = fallback(limited, spare)
    const client = new OpenAI({
      apiKey: 'sk-client-side-not-forwarded',
      baseURL: `${gw.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-gateway-api-key': apiKey, 'x-gateway-config': config },
    })
    const from = mock.requests.length

    const first = await client.chat.completions.create(CHAT_BODY as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse()
    expect(first.data.choices[0]?.message.content).toBe(MOCK_REPLY)
    expect(first.response.headers.get(OPTION_INDEX)).toBe('config.targets[0]')
    await vi.waitFor(async () => expect(await currentUsage(limited)).toBe(MOCK_USAGE.total_tokens), WAIT)

    const second = await client.chat.completions.create(CHAT_BODY as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse()
    expect(second.data.choices[0]?.message.content).toBe(MOCK_REPLY)
    expect(second.response.headers.get(OPTION_INDEX)).toBe('config.targets[1]')
    // The refused attempt never reached the provider: one call per request, each with its own key.
    expect(providerKeysSince(from)).toEqual(['Bearer sk-limited-a', 'Bearer sk-spare-b'])
    await vi.waitFor(async () => expect(await currentUsage(spare)).toBe(MOCK_USAGE.total_tokens), WAIT)
    expect(await currentUsage(limited)).toBe(MOCK_USAGE.total_tokens)
  })

  it("answers the virtual key's 429 with Retry-After when no other target is left", async () => {
    const limited = await virtualKey('sk-only-a', { rate_limits: [{ type: 'requests', unit: 'rpm', value: 1 }] })
    expect((await chat(fallback(limited))).status).toBe(200)
    const from = mock.requests.length
    const refused = await chat(fallback(limited))
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    const body = (await refused.json()) as Json
    expect(body.error).toMatchObject({ type: 'rate_limit_error', code: 'GW_RATE_LIMITED' })
    expect(body.error.message).toContain('1 request per minute')
    expect(mock.requests.length).toBe(from)
  })

  it('falls back from a virtual key whose budget is used up (our 412) to the next target', async () => {
    const exhausted = await virtualKey('sk-budget-c', { usage_limits: { type: 'tokens', credit_limit: 1 } })
    const spare = await virtualKey('sk-spare-d')
    const config = fallback(exhausted, spare)
    const first = await chat(config)
    expect(first.status).toBe(200)
    expect(first.headers.get(OPTION_INDEX)).toBe('config.targets[0]')
    await vi.waitFor(async () => expect(await currentUsage(exhausted)).toBe(MOCK_USAGE.total_tokens), WAIT)
    const from = mock.requests.length
    const second = await chat(config)
    expect(second.status).toBe(200)
    expect(second.headers.get(OPTION_INDEX)).toBe('config.targets[1]')
    expect(providerKeysSince(from)).toEqual(['Bearer sk-spare-d'])
    // The refused attempt reserved nothing and was charged nothing.
    expect(await currentUsage(exhausted)).toBe(MOCK_USAGE.total_tokens)
  })

  it("treats another workspace's virtual key in a target as unknown: 404 alone, skipped by a fallback", async () => {
    const other = await gw.workspaceKey(['completions.write'])
    const foreign = await virtualKey('sk-foreign-e', {}, other.workspaceId)
    const own = await virtualKey('sk-own-f')
    const from = mock.requests.length

    const alone = await chat(fallback(foreign))
    expect(alone.status).toBe(404)
    expect(((await alone.json()) as Json).error).toMatchObject({ type: 'not_found_error', code: 'GW_VIRTUAL_KEY_NOT_FOUND' })
    const skipped = await chat(fallback(foreign, own))
    expect(skipped.status).toBe(200)
    expect(skipped.headers.get(OPTION_INDEX)).toBe('config.targets[1]')
    expect(providerKeysSince(from)).toEqual(['Bearer sk-own-f'])
  })

  it("charges a reply from the response cache to no budget, the API key's nor the virtual key's, even after a failed attempt", async () => {
    const [closedPort] = await freePorts(1)
    const broken = await virtualKey('sk-broken-h', { custom_host: `http://127.0.0.1:${closedPort}/v1` })
    const cachedKey = await virtualKey('sk-cached-i', { usage_limits: { type: 'tokens', credit_limit: 1_000_000 } })
    const budgeted = await gw.admin('POST', '/v1/api-keys/workspace/service', {
      name: 'budgeted',
      workspace_id: workspaceId,
      scopes: ['completions.write'],
      usage_limits: { type: 'tokens', credit_limit: 1_000_000 },
    })
    expect(budgeted.status, JSON.stringify(budgeted.body)).toBe(200)
    const keyUsage = async (): Promise<number> => (await gw.admin('GET', `/v1/api-keys/${budgeted.body.id}`)).body.usage_limits.current_usage as number
    // The first target cannot be reached (an attempt that fails upstream), the second caches.
    const config = JSON.stringify({
      strategy: { mode: 'fallback' },
      targets: [{ virtual_key: broken }, { virtual_key: cachedKey, cache: { mode: 'simple', max_age: 60 } }],
    })
    const send = (content: string): Promise<Response> =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-gateway-api-key': budgeted.body.key, 'x-gateway-config': config },
        body: JSON.stringify({ ...CHAT_BODY, messages: [{ role: 'user', content }] }),
      })
    const from = mock.requests.length

    const miss = await send('Hi')
    expect(miss.status).toBe(200)
    expect(miss.headers.get(OPTION_INDEX)).toBe('config.targets[1]')
    expect(miss.headers.get('x-gateway-cache-status')).toBe('MISS')
    await miss.arrayBuffer()
    await vi.waitFor(async () => {
      expect(await currentUsage(cachedKey)).toBe(MOCK_USAGE.total_tokens)
      expect(await keyUsage()).toBe(MOCK_USAGE.total_tokens)
    }, WAIT)
    await vi.waitFor(async () => {
      const hit = await send('Hi')
      expect(hit.status).toBe(200)
      expect(hit.headers.get('x-gateway-cache-status')).toBe('HIT')
      expect(((await hit.json()) as Json).choices[0].message.content).toBe(MOCK_REPLY)
    }, WAIT)
    // A later provider call is charged to both; the hit before it to neither.
    const other = await send('Something else')
    expect(other.headers.get('x-gateway-cache-status')).toBe('MISS')
    await other.arrayBuffer()
    await vi.waitFor(async () => {
      expect(await currentUsage(cachedKey)).toBe(2 * MOCK_USAGE.total_tokens)
      expect(await keyUsage()).toBe(2 * MOCK_USAGE.total_tokens)
    }, WAIT)
    expect(mock.requests.length - from).toBe(2)
  })

  it('refuses x-gateway-virtual-key next to a config (400), calling no provider', async () => {
    const own = await virtualKey('sk-own-g')
    const from = mock.requests.length
    const refused = await chat(fallback(own), { 'x-gateway-virtual-key': own })
    expect(refused.status).toBe(400)
    expect(((await refused.json()) as Json).error).toMatchObject({ type: 'invalid_request_error', param: 'x-gateway-virtual-key' })
    expect(mock.requests.length).toBe(from)
  })
})
