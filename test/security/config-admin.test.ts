/**
 * The config Admin API against hostile callers (issue 15 item 1): another workspace's config named
 * by slug or id (and slugs written as SQL or regular expressions) is answered exactly like an
 * unknown one and nothing changes; hostile bodies (non-object configs, unknown fields, prototype
 * names) are refused or kept as inert data; oversized and deep configs are refused with 400, never
 * stored and never a 500; a provider key (`api_key`) in a saved config is refused and never lands
 * in the audit log in clear; custom hosts outside the allow-list are refused wherever they sit in
 * the tree; another workspace's virtual key is refused; read-only members change nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, MAX_CONFIG_TARGETS } from '../../core/routing-config.js'
import { callAs, inviteUser, type Answer, type Json } from '../helpers/admin-calls.js'
import { startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'

const CONFIG_SCOPES = ['configs.create', 'configs.read', 'configs.list', 'configs.update', 'configs.delete', 'virtual_keys.update']

let gw: TestGateway
let keyA: string
let wsA: string
let keyB: string
let wsB: string
let memberKey: string
let configA: Json
let virtualKeyB: Json

function call(method: string, path: string, body?: unknown, key: string = keyA): Promise<Answer> {
  return callAs(gw.url, key, method, path, body)
}

async function ok(method: string, path: string, body?: unknown, key?: string): Promise<Json> {
  const answer = await call(method, path, body, key)
  expect(answer.status, `${method} ${path}: ${answer.text.slice(0, 500)}`).toBe(200)
  return answer.body
}

function expectRefused(answer: Answer, status: number, message: RegExp): void {
  expect(answer.status, answer.text.slice(0, 500)).toBe(status)
  expect(answer.body.success).toBe(false)
  expect(answer.body.data.message).toMatch(message)
}

/** How many configs workspace A has (to show a refused create stored nothing). */
async function configCount(): Promise<number> {
  return (await ok('GET', '/v1/configs', undefined, keyA)).total
}

/** `levels` nested targets, each a single-mode strategy, around one provider target. */
function nestedTargets(levels: number): Json {
  let node: Json = { provider: 'openai' }
  for (let i = 0; i < levels; i++) node = { strategy: { mode: 'single' }, targets: [node] }
  return node
}

beforeAll(async () => {
  gw = await startTestGateway()
  ;({ key: keyA, workspaceId: wsA } = await gw.workspaceKey(CONFIG_SCOPES))
  ;({ key: keyB, workspaceId: wsB } = await gw.workspaceKey(CONFIG_SCOPES))
  virtualKeyB = await ok('POST', '/v1/virtual-keys', { workspace_id: wsB, name: 'b', provider: 'openai', key: 'sk-b-0123456789abcdef' }, TEST_ADMIN_KEY)
  configA = await ok('POST', '/v1/configs', { name: 'A', config: { retry: { attempts: 1 } } }, keyA)
  const member = await inviteUser(gw.url, 'member', { id: wsA, role: 'member' }, CONFIG_SCOPES)
  memberKey = member.key as string
})

afterAll(async () => {
  await gw?.close()
})

describe('another workspace', () => {
  it('answers 404 for another workspace’s config by slug or id exactly as for an unknown one, and changes nothing', async () => {
    const unknown = await call('GET', '/v1/configs/pc-unknown-000000', undefined, keyB)
    expectRefused(unknown, 404, /^Config not found$/)
    for (const ref of [configA.slug, configA.id]) {
      for (const [method, path, body] of [
        ['GET', `/v1/configs/${ref}`, undefined],
        ['GET', `/v1/configs/${ref}/versions`, undefined],
        ['PUT', `/v1/configs/${ref}`, { config: { retry: { attempts: 3 } } }],
        ['PUT', `/v1/configs/${ref}`, { is_default: 1 }],
        ['DELETE', `/v1/configs/${ref}?force=true`, undefined],
      ] as const) {
        const answer = await call(method, path, body, keyB)
        expect(answer.status, `${method} ${path}`).toBe(404)
        expect(answer.body).toEqual(unknown.body)
      }
    }
    expect(await ok('GET', `/v1/configs/${configA.id}`, undefined, keyA)).toMatchObject({ version: 1, is_default: 0, name: 'A' })
  })

  it('matches slugs literally: SQL and regular-expression text finds nothing', async () => {
    for (const ref of ["pc-a' OR '1'='1", '.*', 'pc-%25', '%', '["x","y"]', `${configA.slug.slice(0, -2)}.*`]) {
      expectRefused(await call('GET', `/v1/configs/${encodeURIComponent(ref)}`, undefined, keyA), 404, /^Config not found$/)
    }
  })

  it('refuses another workspace’s virtual key anywhere in the tree, and an Admin API key placing a config in B with A’s virtual key', async () => {
    const nested = { strategy: { mode: 'fallback' }, targets: [{ provider: 'openai' }, { strategy: { mode: 'single' }, targets: [{ virtual_key: virtualKeyB.id }] }] }
    expectRefused(await call('POST', '/v1/configs', { name: 'x', config: nested }, keyA), 400, /^config\.targets\[1\]\.targets\[0\]\.virtual_key: no virtual key/)
    const vkA = await ok('POST', '/v1/virtual-keys', { workspace_id: wsA, name: 'a', provider: 'openai', key: 'sk-a-0123456789abcdef' }, TEST_ADMIN_KEY)
    expectRefused(await call('POST', '/v1/configs', { name: 'x', workspace_id: wsB, config: { virtual_key: vkA.slug } }, TEST_ADMIN_KEY), 400, /^config\.virtual_key: /)
    expect((await ok('GET', '/v1/configs', undefined, keyB)).total).toBe(0)
  })
})

describe('hostile bodies', () => {
  it('refuses a config that is not a JSON object, unknown body fields and unknown config fields, storing nothing', async () => {
    const before = await configCount()
    for (const config of ['{"retry":{}}', 42, null, [], [{ provider: 'openai' }], true]) {
      expectRefused(await call('POST', '/v1/configs', { name: 'x', config }), 400, /^config: /)
    }
    expectRefused(await call('POST', '/v1/configs', { name: 'x', config: {}, owner_id: 'someone' }), 400, /owner_id|Unrecognized/i)
    // Sent as text: a `__proto__` key in a JS object literal would set its prototype instead.
    const proto = await fetch(`${gw.url}/v1/configs`, {
      method: 'POST',
      headers: { 'x-gateway-api-key': keyA, 'content-type': 'application/json' },
      body: '{"name":"x","config":{"__proto__":{"provider":"openai"}}}',
    })
    expectRefused({ status: proto.status, text: '', body: (await proto.json()) as Json }, 400, /^config\.__proto__: unknown field/)
    expectRefused(await call('POST', '/v1/configs', { name: 'x', config: { constructor: { name: 'x' } } }), 400, /^config\.constructor: unknown field/)
    expectRefused(await call('PUT', `/v1/configs/${configA.id}`, { version: 7 }), 400, /version/)
    expect(await configCount()).toBe(before)
  })

  it('keeps prototype-looking names inside override_params as data, as sent', async () => {
    const text = '{"name":"proto","config":{"override_params":{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}}}'
    const response = await fetch(`${gw.url}/v1/configs`, { method: 'POST', headers: { 'x-gateway-api-key': keyA, 'content-type': 'application/json' }, body: text })
    const created = (await response.json()) as Json
    expect(response.status, JSON.stringify(created)).toBe(200)
    const raw = await (await fetch(`${gw.url}/v1/configs/${created.id}`, { headers: { 'x-gateway-api-key': keyA } })).text()
    expect(raw).toContain('"override_params":{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}')
    expect(({} as Json).polluted).toBeUndefined()
    await ok('DELETE', `/v1/configs/${created.id}`)
  })
})

describe('oversized and deep configs', () => {
  it(`refuses a config over ${MAX_CONFIG_BYTES} bytes of JSON (characters or UTF-8) with 400, and takes one at the limit`, async () => {
    const before = await configCount()
    const frame = JSON.stringify({ override_params: { x: '' } }).length
    expectRefused(await call('POST', '/v1/configs', { name: 'big', config: { override_params: { x: 'a'.repeat(MAX_CONFIG_BYTES - frame + 1) } } }), 400, /^config: must be at most 65536 bytes/)
    expectRefused(await call('POST', '/v1/configs', { name: 'wide', config: { override_params: { x: '€'.repeat(Math.ceil(MAX_CONFIG_BYTES / 3)) } } }), 400, /^config: must be at most/)
    expectRefused(await call('PUT', `/v1/configs/${configA.id}`, { config: { override_params: { x: 'a'.repeat(MAX_CONFIG_BYTES) } } }), 400, /^config: must be at most/)
    expect(await configCount()).toBe(before)
    const fits = await ok('POST', '/v1/configs', { name: 'fits', config: { override_params: { x: 'a'.repeat(MAX_CONFIG_BYTES - frame) } } })
    await ok('DELETE', `/v1/configs/${fits.id}`)
    // Past the JSON body limit the server answers 413 before any handler.
    const response = await fetch(`${gw.url}/v1/configs`, {
      method: 'POST',
      headers: { 'x-gateway-api-key': keyA, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'huge', config: { override_params: { x: 'z'.repeat(11 * 1024 * 1024) } } }),
    })
    expect(response.status).toBe(413)
    await response.arrayBuffer()
  })

  it(`refuses targets nested deeper than ${MAX_CONFIG_DEPTH} levels, more than ${MAX_CONFIG_TARGETS} targets, and deep queries, naming the path`, async () => {
    const before = await configCount()
    const deep = await call('POST', '/v1/configs', { name: 'deep', config: nestedTargets(MAX_CONFIG_DEPTH + 2) })
    expectRefused(deep, 400, /^config\.targets\[0\](\.targets\[0\])+: targets may nest at most/)
    const wide = { strategy: { mode: 'loadbalance' }, targets: Array.from({ length: MAX_CONFIG_TARGETS + 1 }, () => ({ provider: 'openai' })) }
    expectRefused(await call('POST', '/v1/configs', { name: 'wide', config: wide }), 400, /^config\.targets: /)
    let query: Json = { 'metadata.tier': 'a' }
    for (let i = 0; i < 12; i++) query = { $and: [query] }
    const conditional = { strategy: { mode: 'conditional', conditions: [{ query, then: 't' }] }, targets: [{ name: 't', provider: 'openai' }] }
    expectRefused(await call('POST', '/v1/configs', { name: 'query', config: conditional }), 400, /^config\.strategy\.conditions\[0\]\.query(\.\$and\[0\])+: a query may nest/)
    expect(await configCount()).toBe(before)
    // At the limit it is taken.
    const fits = await ok('POST', '/v1/configs', { name: 'deep enough', config: nestedTargets(MAX_CONFIG_DEPTH) })
    await ok('DELETE', `/v1/configs/${fits.id}`)
  })

  it('refuses JSON nested past the body depth limit with 400, never a 500', async () => {
    const before = await configCount()
    let value: unknown = 1
    for (let i = 0; i < 100; i++) value = { a: value }
    const answer = await call('POST', '/v1/configs', { name: 'nested', config: { override_params: value } })
    expect(answer.status, answer.text.slice(0, 300)).toBe(400)
    expect(await configCount()).toBe(before)
  })
})

describe('credentials and hosts', () => {
  it('refuses a provider key (api_key) anywhere in a saved config, naming the path, and never stores it in clear in the audit log', async () => {
    const secret = 'sk-live-0123456789abcdefSECRET'
    const before = await configCount()
    expectRefused(await call('POST', '/v1/configs', { name: 'k', config: { provider: 'openai', api_key: secret } }), 400, /^config\.api_key: a saved config may not hold provider keys/)
    const nested = { strategy: { mode: 'fallback' }, targets: [{ provider: 'openai' }, { provider: 'groq', api_key: secret }] }
    expectRefused(await call('POST', '/v1/configs', { name: 'k', config: nested }), 400, /^config\.targets\[1\]\.api_key: /)
    expectRefused(await call('PUT', `/v1/configs/${configA.id}`, { config: nested }), 400, /^config\.targets\[1\]\.api_key: /)
    expect(await configCount()).toBe(before)
    expect((await ok('GET', `/v1/configs/${configA.id}`)).version).toBe(1)
    const audit = await ok('GET', `/v1/audit-logs?resource_type=config&response_status_code=400`, undefined, TEST_ADMIN_KEY)
    expect(audit.total).toBeGreaterThanOrEqual(3)
    expect(JSON.stringify(audit.data)).not.toContain(secret)
  })

  it('refuses custom hosts outside the allow-list, wherever they sit in the tree', async () => {
    const before = await configCount()
    for (const host of [
      'http://169.254.169.254/latest/meta-data',
      'http://[fe80::1]/v1',
      'http://10.0.0.1/v1',
      'http://metadata.google.internal/computeMetadata',
      'file:///etc/passwd',
      'http://user:pass@127.0.0.1:9/v1',
      'gopher://127.0.0.1:9/',
    ]) {
      expectRefused(await call('POST', '/v1/configs', { name: 'h', config: { provider: 'openai', custom_host: host } }), 400, /^config\.custom_host: not allowed/)
      const nested = { strategy: { mode: 'fallback' }, targets: [{ provider: 'openai' }, { provider: 'openai', custom_host: host }] }
      expectRefused(await call('POST', '/v1/configs', { name: 'h', config: nested }), 400, /^config\.targets\[1\]\.custom_host: not allowed/)
    }
    // A host set on a strategy is checked there too (its targets inherit it).
    const inherited = { strategy: { mode: 'single' }, custom_host: 'http://169.254.169.254/', targets: [{ provider: 'openai' }] }
    expectRefused(await call('POST', '/v1/configs', { name: 'h', config: inherited }), 400, /^config\.custom_host: not allowed/)
    expect(await configCount()).toBe(before)
  })
})

describe('read-only members', () => {
  it('cannot create, change, mark as default or delete a config, whatever scopes their key holds', async () => {
    expectRefused(await call('POST', '/v1/configs', { name: 'm', config: {} }, memberKey), 403, /admins and managers/)
    expectRefused(await call('PUT', `/v1/configs/${configA.id}`, { config: { retry: { attempts: 5 } } }, memberKey), 403, /admins and managers/)
    expectRefused(await call('PUT', `/v1/configs/${configA.id}`, { is_default: 1 }, memberKey), 403, /admins and managers/)
    expectRefused(await call('DELETE', `/v1/configs/${configA.id}?force=true`, undefined, memberKey), 403, /admins and managers/)
    expect(await ok('GET', `/v1/configs/${configA.id}`, undefined, memberKey)).toMatchObject({ version: 1, is_default: 0 })
  })
})
