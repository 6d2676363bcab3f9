/**
 * Saved configs on the data plane (issue 15): a config made through the Admin API routes requests
 * that name its slug or id in `x-gateway-config`, or that carry no selection at all when it is their
 * API key's default; an edit is routed by its new version on the next request (the `configs`
 * notification drops the compiled plan); another workspace's config is 404; a saved config may
 * point a virtual key at a custom host, and the key's credential goes there. Real gateway, real
 * sockets, the `openai` client, loopback mock providers.
 */
import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { CHAT_BODY, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

let a: MockUpstream
let b: MockUpstream
let gw: TestGateway
let key: string
let workspaceId: string
let otherKey: string
let vkA: Json
let vkB: Json

const serverError = { type: 'json', status: 500, body: { error: { message: 'boom' } } } as const

async function ok(method: string, path: string, body?: unknown, as?: string): Promise<Json> {
  const answer = await gw.admin(method, path, body, as)
  expect(answer.status, `${method} ${path}: ${JSON.stringify(answer.body)}`).toBe(200)
  return answer.body
}

function chat(apiKey: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gateway-api-key': apiKey, ...headers },
    body: JSON.stringify(CHAT_BODY),
  })
}

beforeAll(async () => {
  ;[a, b] = await Promise.all([startMockUpstream(), startMockUpstream()])
  gw = await startTestGateway()
  ;({ key, workspaceId } = await gw.workspaceKey(['completions.write']))
  otherKey = (await gw.workspaceKey(['completions.write'])).key
  vkA = await ok('POST', '/v1/virtual-keys', { workspace_id: workspaceId, name: 'a', provider: 'openai', key: 'sk-stored-a-0123456789', custom_host: a.url })
  vkB = await ok('POST', '/v1/virtual-keys', { workspace_id: workspaceId, name: 'b', provider: 'openai', key: 'sk-stored-b-0123456789', custom_host: b.url })
})

afterEach(() => {
  a.reset()
  b.reset()
})

afterAll(async () => {
  await gw?.close()
  await Promise.all([a?.close(), b?.close()])
})

describe('saved configs', () => {
  it('route requests that name them by slug or id; an edit is routed by its new version at once', async () => {
    const config = await ok('POST', '/v1/configs', {
      workspace_id: workspaceId,
      name: 'fallback a to b',
      config: { strategy: { mode: 'fallback' }, targets: [{ virtual_key: vkA.slug }, { virtual_key: vkB.slug }] },
    })
    a.next(serverError)
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { 'x-gateway-api-key': key, 'x-gateway-config': config.slug } })
    const { data, response } = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }).withResponse()
    expect(data.choices[0]?.message.content).toBe(MOCK_REPLY)
    expect(response.headers.get('x-gateway-last-used-option-index')).toBe('config.targets[1]')
    expect(a.requests[0]?.headers.authorization).toBe('Bearer sk-stored-a-0123456789')
    expect(b.requests[0]?.headers.authorization).toBe('Bearer sk-stored-b-0123456789')

    expect((await chat(key, { 'x-gateway-config': config.id })).status).toBe(200)

    await ok('PUT', `/v1/configs/${config.slug}`, { config: { virtual_key: vkB.slug, override_params: { model: 'gpt-4o' } } })
    a.reset()
    b.reset()
    const edited = await chat(key, { 'x-gateway-config': config.slug })
    expect(edited.status).toBe(200)
    expect(edited.headers.get('x-gateway-last-used-option-index')).toBe('config')
    expect(a.requests).toHaveLength(0)
    expect(b.requests[0]?.json()).toMatchObject({ model: 'gpt-4o' })
  })

  it("another workspace's config, a deleted one and an unknown one are 404", async () => {
    const config = await ok('POST', '/v1/configs', { workspace_id: workspaceId, name: 'mine', config: { virtual_key: vkA.slug } })
    const foreign = await chat(otherKey, { 'x-gateway-config': config.slug })
    expect(foreign.status).toBe(404)
    expect(((await foreign.json()) as Json).error.code).toBe('GW_CONFIG_NOT_FOUND')
    await ok('DELETE', `/v1/configs/${config.slug}`)
    expect((await chat(key, { 'x-gateway-config': config.slug })).status).toBe(404)
    expect(a.requests).toHaveLength(0)
  })

  it("a key's default config routes requests that name no provider; an explicit selection wins", async () => {
    const config = await ok('POST', '/v1/configs', { workspace_id: workspaceId, name: 'default', config: { virtual_key: vkB.slug } })
    const created = await ok('POST', '/v1/api-keys/workspace/service', {
      name: 'with default',
      workspace_id: workspaceId,
      scopes: ['completions.write'],
      defaults: { config_id: config.slug },
    })
    const routed = await chat(created.key)
    expect(routed.status).toBe(200)
    expect(routed.headers.get('x-gateway-last-used-option-index')).toBe('config')
    expect(b.requests).toHaveLength(1)

    const explicit = await chat(created.key, { 'x-gateway-provider': 'openai', 'x-gateway-custom-host': a.url, authorization: 'Bearer sk-own' })
    expect(explicit.status).toBe(200)
    expect(explicit.headers.get('x-gateway-last-used-option-index')).toBeNull()
    expect(a.requests[0]?.headers.authorization).toBe('Bearer sk-own')
    expect(b.requests).toHaveLength(1)
  })

  it("a saved config may send a virtual key's credential to a custom host it names", async () => {
    const config = await ok('POST', '/v1/configs', { workspace_id: workspaceId, name: 'moved', config: { virtual_key: vkA.slug, custom_host: b.url } })
    const response = await chat(key, { 'x-gateway-config': config.slug })
    expect(response.status).toBe(200)
    expect(a.requests).toHaveLength(0)
    expect(b.requests[0]?.headers.authorization).toBe('Bearer sk-stored-a-0123456789')
  })
})
