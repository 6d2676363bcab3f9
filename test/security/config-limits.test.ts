/**
 * Limits per attempt against a hostile tenant (issue 15 item 4): a config cannot spend or burn another
 * workspace's virtual key, cannot multiply a key's rate limit or budget by naming it in many targets
 * or retrying it, and hostile `virtual_key` values are answered as unknown keys. Real gateway (in-process
 * limiter and ledger), mock provider.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { CHAT_BODY, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_USAGE, openAiErrorBody, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

const WAIT = { timeout: 5_000, interval: 25 }

let mock: MockUpstream
let gw: TestGateway
let attacker: { key: string; workspaceId: string }
let victim: { key: string; workspaceId: string }

beforeAll(async () => {
  mock = await startMockUpstream()
  // Retries wait no backoff here: the tests count attempts, not time.
  gw = await startTestGateway({ overlay: { plugins: { forward: { config: { retryBaseDelayMs: 0, retryMaxDelayMs: 0 } } } } })
  attacker = await gw.workspaceKey(['completions.write'])
  victim = await gw.workspaceKey(['completions.write'])
})

afterEach(() => {
  mock.reset()
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

async function virtualKey(workspaceId: string, providerKey: string, fields: Json = {}): Promise<{ id: string; slug: string }> {
  const created = await gw.admin('POST', '/v1/virtual-keys', {
    name: 'tenant key',
    provider: 'openai',
    custom_host: mock.url,
    key: providerKey,
    workspace_id: workspaceId,
    ...fields,
  })
  expect(created.status, JSON.stringify(created.body)).toBe(200)
  return created.body
}

async function currentUsage(slug: string): Promise<number> {
  const read = await gw.admin('GET', `/v1/virtual-keys/${slug}`)
  expect(read.status, JSON.stringify(read.body)).toBe(200)
  return read.body.usage_limits.current_usage as number
}

function chat(apiKey: string, headers: Record<string, string>): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gateway-api-key': apiKey, ...headers },
    body: JSON.stringify(CHAT_BODY),
  })
}

function withConfig(config: unknown): Record<string, string> {
  return { 'x-gateway-config': JSON.stringify(config) }
}

describe('limits per attempt against a hostile tenant', () => {
  it("never spends nor burns another workspace's virtual key named in a config, by slug or by id", async () => {
    const theirs = await virtualKey(victim.workspaceId, 'sk-victim', {
      rate_limits: [{ type: 'requests', unit: 'rpm', value: 1 }],
      usage_limits: { type: 'tokens', credit_limit: 1_000_000 },
    })
    for (const name of [theirs.slug, theirs.id, theirs.slug]) {
      const refused = await chat(attacker.key, withConfig({ strategy: { mode: 'fallback' }, targets: [{ virtual_key: name }] }))
      expect(refused.status).toBe(404)
      const body = (await refused.json()) as Json
      expect(body.error.code).toBe('GW_VIRTUAL_KEY_NOT_FOUND')
      expect(JSON.stringify(body)).not.toContain('sk-victim')
    }
    expect(mock.requests).toHaveLength(0)
    // The owner's one request per minute is still there, and its budget untouched until it is used.
    expect(await currentUsage(theirs.slug)).toBe(0)
    const own = await chat(victim.key, { 'x-gateway-virtual-key': theirs.slug })
    expect(own.status).toBe(200)
    expect(mock.requests.map((request) => request.headers.authorization)).toEqual(['Bearer sk-victim'])
    await vi.waitFor(async () => expect(await currentUsage(theirs.slug)).toBe(MOCK_USAGE.total_tokens), WAIT)
  })

  it("does not multiply a key's rate limit by naming it in many targets and retrying it", async () => {
    const limited = await virtualKey(attacker.workspaceId, 'sk-limited', { rate_limits: [{ type: 'requests', unit: 'rpm', value: 2 }] })
    mock.on('/v1/chat/completions', { type: 'json', status: 500, body: openAiErrorBody('upstream broke', 'server_error') })
    const target = { virtual_key: limited.slug, retry: { attempts: 5, on_status_codes: [500] } }
    const config = { strategy: { mode: 'fallback' }, targets: Array.from({ length: 10 }, () => target) }

    const first = await chat(attacker.key, withConfig(config))
    // Two attempts reached the provider (its 500s retried); every later one was refused by the key's limit.
    expect(mock.requests).toHaveLength(2)
    expect(first.status).toBe(429)
    expect(first.headers.get('retry-after')).not.toBeNull()
    const again = await chat(attacker.key, withConfig(config))
    expect(again.status).toBe(429)
    expect(mock.requests).toHaveLength(2)
  })

  it("does not overshoot a used-up budget by naming the key in many targets", async () => {
    const budgeted = await virtualKey(attacker.workspaceId, 'sk-budgeted', { usage_limits: { type: 'tokens', credit_limit: 1 } })
    const config = { strategy: { mode: 'fallback' }, targets: Array.from({ length: 8 }, () => ({ virtual_key: budgeted.slug })) }
    expect((await chat(attacker.key, withConfig(config))).status).toBe(200)
    await vi.waitFor(async () => expect(await currentUsage(budgeted.slug)).toBe(MOCK_USAGE.total_tokens), WAIT)
    const refused = await chat(attacker.key, withConfig(config))
    expect(refused.status).toBe(412)
    expect(((await refused.json()) as Json).error.type).toBe('budget_exceeded_error')
    expect(mock.requests).toHaveLength(1)
    expect(await currentUsage(budgeted.slug)).toBe(MOCK_USAGE.total_tokens)
  })

  it('answers hostile virtual_key values as unknown keys (404), never an error of ours or a provider call', async () => {
    const other = await virtualKey(victim.workspaceId, 'sk-other')
    const hostile = ['../../virtual-keys', '*', '%', "' OR 1=1 --", '{"$ne":null}', `${other.slug}\n`, ` ${other.slug}`, other.slug.toUpperCase(), 'x'.repeat(200), '\u0000']
    for (const name of hostile) {
      const reply = await chat(attacker.key, withConfig({ strategy: { mode: 'fallback' }, targets: [{ virtual_key: name }] }))
      expect(reply.status, name).toBe(404)
      expect(((await reply.json()) as Json).error.code).toBe('GW_VIRTUAL_KEY_NOT_FOUND')
    }
    expect(mock.requests).toHaveLength(0)
  })
})
