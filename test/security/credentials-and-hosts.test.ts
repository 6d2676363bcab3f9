/**
 * Credentials and hosts (issue 12, items 3–6), attacker-style, end to end: the real gateway over real
 * sockets, a mock provider that records what reached it, and a second mock standing for a host an
 * attacker controls.
 * - a virtual key never follows a client's `x-gateway-custom-host` (400, nothing forwarded);
 * - whoever may edit a virtual key cannot repoint it (custom_host, provider) without sending the key;
 * - the gateway credential never leaves in any header, on any route;
 * - custom host names are normalised before they are checked, connected to and stored, and a
 *   `/v1` path with dot segments (raw, encoded, backslash, encoded slash) is refused before auth.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { CHAT_BODY, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, startMockUpstream, type MockUpstream, type RecordedRequest } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

const STORED_KEY = 'sk-stored-provider-key-0123456789'
const NEW_KEY = 'sk-new-provider-key-9876543210'

let mock: MockUpstream
/** A host the attacker controls: it must never receive a stored key. */
let attacker: MockUpstream
let gw: TestGateway
/** Workspace service key: data plane plus every virtual-key scope (an "editor"). */
let key: string
let workspaceId: string
let signer: { kid: string; privateKey: CryptoKey; publicJwk: JWK }
let organisationId: string
let workspaceSlug: string

beforeAll(async () => {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { modulusLength: 2048, extractable: true })
  signer = { kid: 'sec-key-1', privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid: 'sec-key-1', alg: 'RS256', use: 'sig' } }
  mock = await startMockUpstream()
  attacker = await startMockUpstream()
  gw = await startTestGateway({
    env: { GATEWAY_ALLOWED_CUSTOM_HOSTS: '127.0.0.1,localhost', GATEWAY_JWKS: JSON.stringify({ keys: [signer.publicJwk] }) },
  })
  ;({ key, workspaceId } = await gw.workspaceKey([
    'completions.write',
    'virtual_keys.create',
    'virtual_keys.read',
    'virtual_keys.list',
    'virtual_keys.update',
    'virtual_keys.delete',
  ]))
  organisationId = (await gw.admin('GET', '/v1/admin/organisation')).body.id
  workspaceSlug = (await gw.admin('GET', `/v1/admin/workspaces/${workspaceId}`)).body.slug ?? workspaceId
})

afterEach(() => {
  mock.reset()
  attacker.reset()
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
  await attacker?.close()
})

function jwt(): Promise<string> {
  return new SignJWT({
    gateway_oid: organisationId,
    gateway_workspace: workspaceSlug,
    scope: 'completions.write',
    sub: 'sec-test',
    exp: Math.floor(Date.now() / 1000) + 600,
  })
    .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: signer.kid })
    .sign(signer.privateKey)
}

/** One request with node:http on a fresh connection: the path goes out exactly as written (no dot-segment folding). */
function send(path: string, method: string, headers: Record<string, string>, body?: string): Promise<{ status: number; headers: IncomingHttpHeaders; json: Json }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${gw.url}/`, { method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json: Json = {}
        try {
          json = text.length > 0 ? (JSON.parse(text) as Json) : {}
        } catch {
          json = { text }
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, json })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

function chat(headers: Record<string, string>, path = '/v1/chat/completions'): ReturnType<typeof send> {
  return send(path, 'POST', { 'content-type': 'application/json', ...headers }, JSON.stringify(CHAT_BODY))
}

/** Every header value a recorded request carried, as one string per value. */
function headerValues(request: RecordedRequest): string[] {
  return Object.values(request.headers).flatMap((value) => (value === undefined ? [] : Array.isArray(value) ? value : [value]))
}

function expectNoSecret(request: RecordedRequest, secret: string): void {
  for (const value of headerValues(request)) expect(value, JSON.stringify(request.headers)).not.toContain(secret)
  expect(request.path).not.toContain(secret)
}

async function createVirtualKey(fields: Json = {}): Promise<{ id: string; slug: string }> {
  const created = await gw.admin('POST', '/v1/virtual-keys', { name: 'sec', provider: 'openai', custom_host: mock.url, key: STORED_KEY, workspace_id: workspaceId, ...fields })
  expect(created.status, JSON.stringify(created.body)).toBe(200)
  return created.body
}

describe('a virtual key with x-gateway-custom-host (item 3)', () => {
  let slug: string

  beforeAll(async () => {
    slug = (await createVirtualKey()).slug
  })

  it.each([
    ['a first-class route', '/v1/chat/completions'],
    ['a pass-through route', '/v1/rerank'],
  ])('is refused with 400 naming the fix on %s, and nothing is forwarded anywhere', async (_, path) => {
    const response = await chat({ 'x-gateway-api-key': key, 'x-gateway-virtual-key': slug, 'x-gateway-custom-host': attacker.url }, path)
    expect(response.status, JSON.stringify(response.json)).toBe(400)
    expect(response.json.error).toMatchObject({ type: 'invalid_request_error', code: 'GW_REQ_INVALID', param: 'x-gateway-custom-host' })
    expect(response.json.error.message).toContain("set the virtual key's custom_host through the Admin API")
    expect(response.json.error.message).toContain('Drop the header')
    expect(attacker.requests).toHaveLength(0)
    expect(mock.requests).toHaveLength(0)
  })

  it('is refused even when the header names the key’s own host or is empty', async () => {
    for (const host of [mock.url, '']) {
      const response = await chat({ 'x-gateway-api-key': key, 'x-gateway-virtual-key': slug, 'x-gateway-custom-host': host })
      expect(response.status).toBe(400)
      expect(response.json.error.param).toBe('x-gateway-custom-host')
    }
    expect(mock.requests).toHaveLength(0)
  })

  it('refuses an inline config that points the virtual key at a host, alone or next to the virtual-key header', async () => {
    const inline = JSON.stringify({ virtual_key: slug, custom_host: attacker.url })
    const withHeader = await chat({ 'x-gateway-api-key': key, 'x-gateway-virtual-key': slug, 'x-gateway-config': inline })
    expect(withHeader.status).toBe(400)
    expect(withHeader.json.error.code).toBe('GW_CONFIG_INVALID')
    const alone = await chat({ 'x-gateway-api-key': key, 'x-gateway-config': inline })
    expect(alone.status).toBe(400)
    expect(alone.json.error.message).toContain('custom_host')
    // Inherited from a parent node, too.
    const nested = JSON.stringify({ strategy: { mode: 'fallback' }, custom_host: attacker.url, targets: [{ virtual_key: slug }] })
    expect((await chat({ 'x-gateway-api-key': key, 'x-gateway-config': nested })).status).toBe(400)
    expect(attacker.requests).toHaveLength(0)
    expect(mock.requests).toHaveLength(0)
  })

  it('still sends the stored key to the key’s own host without the header', async () => {
    const response = await chat({ 'x-gateway-api-key': key, 'x-gateway-virtual-key': slug })
    expect(response.status).toBe(200)
    expect(response.json.choices[0].message.content).toBe(MOCK_REPLY)
    expect(mock.requests[0]?.headers.authorization).toBe(`Bearer ${STORED_KEY}`)
  })
})

describe('repointing a virtual key (item 4)', () => {
  async function put(slug: string, body: Json): Promise<{ status: number; body: any }> {
    return gw.admin('PUT', `/v1/virtual-keys/${slug}`, body, key)
  }

  async function expectRefused(slug: string, body: Json, field: string): Promise<void> {
    const answer = await put(slug, body)
    expect(answer.status, JSON.stringify(answer.body)).toBe(400)
    expect(answer.body.data.errorCode).toBe('AB01')
    expect(answer.body.data.message).toContain(`${field}: changing it requires the provider key`)
  }

  it('refuses a new custom_host without the key: the stored key never reaches the new host', async () => {
    const vk = await createVirtualKey()
    await expectRefused(vk.slug, { custom_host: attacker.url }, 'custom_host')
    await expectRefused(vk.slug, { custom_host: attacker.url, note: 'looks harmless' }, 'custom_host')
    expect((await gw.admin('GET', `/v1/virtual-keys/${vk.slug}`)).body.custom_host).toBe(mock.url)
    const response = await chat({ 'x-gateway-api-key': key, 'x-gateway-virtual-key': vk.slug })
    expect(response.status).toBe(200)
    expect(attacker.requests).toHaveLength(0)
    expect(mock.requests[0]?.headers.authorization).toBe(`Bearer ${STORED_KEY}`)
  })

  it('refuses custom_host: null (back to the provider’s own endpoint) and a new provider without the key', async () => {
    const vk = await createVirtualKey()
    await expectRefused(vk.slug, { custom_host: null }, 'custom_host')
    await expectRefused(vk.slug, { provider: 'vllm' }, 'provider')
    const got = (await gw.admin('GET', `/v1/virtual-keys/${vk.slug}`)).body
    expect(got).toMatchObject({ provider: 'openai', custom_host: mock.url })
  })

  it('takes the same endpoint spelled differently as no change', async () => {
    const vk = await createVirtualKey()
    const port = new URL(mock.url).port
    for (const same of [`${mock.url}/`, `HTTP://127.0.0.1.:${port}/v1//`, `http://0x7f.1:${port}/v1`]) {
      const answer = await put(vk.slug, { custom_host: same, note: 'same place' })
      expect(answer.status, `${same}: ${JSON.stringify(answer.body)}`).toBe(200)
      expect(answer.body.custom_host).toBe(mock.url)
    }
    expect((await put(vk.slug, { provider: 'openai', note: 'same provider' })).status).toBe(200)
  })

  it('accepts a new custom_host with key or keys: only the new key goes to the new host', async () => {
    const vk = await createVirtualKey()
    const moved = await put(vk.slug, { custom_host: attacker.url, key: NEW_KEY })
    expect(moved.status, JSON.stringify(moved.body)).toBe(200)
    expect(moved.body.custom_host).toBe(attacker.url)
    expect((await chat({ 'x-gateway-api-key': key, 'x-gateway-virtual-key': vk.slug })).status).toBe(200)
    expect(attacker.requests).toHaveLength(1)
    expect(attacker.requests[0]?.headers.authorization).toBe(`Bearer ${NEW_KEY}`)
    expectNoSecret(attacker.requests[0]!, STORED_KEY)

    const back = await put(vk.slug, { custom_host: mock.url, keys: [STORED_KEY] })
    expect(back.status, JSON.stringify(back.body)).toBe(200)
    expect((await chat({ 'x-gateway-api-key': key, 'x-gateway-virtual-key': vk.slug })).status).toBe(200)
    expect(mock.requests[0]?.headers.authorization).toBe(`Bearer ${STORED_KEY}`)
    expect(attacker.requests).toHaveLength(1)
  })

  it('moves a key to another provider only with the key', async () => {
    const vk = await createVirtualKey()
    const moved = await put(vk.slug, { provider: 'vllm', key: NEW_KEY })
    expect(moved.status, JSON.stringify(moved.body)).toBe(200)
    expect(moved.body).toMatchObject({ provider: 'vllm', custom_host: mock.url })
    expect((await chat({ 'x-gateway-api-key': key, 'x-gateway-virtual-key': vk.slug })).status).toBe(200)
    expect(mock.requests[0]?.headers.authorization).toBe(`Bearer ${NEW_KEY}`)
    // A provider without a public endpoint still needs a custom host.
    const unknown = await put(vk.slug, { provider: 'no-such-provider', key: NEW_KEY })
    expect(unknown.status).toBe(400)
    expect(unknown.body.data.message).toContain('provider')
  })

  it('records the refused update in the audit log', async () => {
    const vk = await createVirtualKey()
    await expectRefused(vk.slug, { custom_host: attacker.url }, 'custom_host')
    // The audit plugin writes after the reply (onLog).
    const entries = await vi.waitFor(async () => {
      const audit = await gw.admin('GET', `/v1/audit-logs?resource_type=virtual_key&response_status_code=400&page_size=1000`)
      expect(audit.status, JSON.stringify(audit.body)).toBe(200)
      const found = (audit.body.data as Json[]).filter((entry) => entry.uri === `/v1/virtual-keys/${vk.slug}`)
      expect(found).toHaveLength(1)
      return found
    })
    expect(entries[0]).toMatchObject({ method: 'PUT', resource_type: 'virtual_key', action: 'update', response_status_code: 400 })
  })
})

describe('the gateway credential is never forwarded (item 5)', () => {
  const PROVIDER = 'sk-provider-real-0123456789'

  function passHeaders(extra: Record<string, string>): Record<string, string> {
    return { 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url, ...extra }
  }

  it('drops x-api-key, api-key and any header carrying the key on pass-through routes', async () => {
    const response = await send('/v1/rerank', 'POST', passHeaders({
      'content-type': 'application/json',
      'x-gateway-api-key': key,
      authorization: `Bearer ${PROVIDER}`,
      'x-api-key': key,
      'api-key': key,
      'x-other-auth': `  bEaReR ${key}  `,
      cookie: `session=${key}`,
      'x-harmless': 'kept',
    }), '{}')
    expect(response.status).toBe(200)
    const [seen] = await mock.waitForRequests(1)
    expect(seen!.headers['x-api-key']).toBeUndefined()
    expect(seen!.headers['api-key']).toBeUndefined()
    expect(seen!.headers['x-other-auth']).toBeUndefined()
    expect(seen!.headers.cookie).toBeUndefined()
    expect(seen!.headers['x-harmless']).toBe('kept')
    expect(seen!.headers.authorization).toBe(`Bearer ${PROVIDER}`)
    expectNoSecret(seen!, key)
  })

  it('drops the key repeated in x-api-key when it authenticated through Authorization', async () => {
    const response = await send('/v1/files', 'GET', passHeaders({ authorization: `Bearer ${key}`, 'x-api-key': key }))
    expect(response.status).toBe(200)
    const [seen] = await mock.waitForRequests(1)
    expect(seen!.headers.authorization).toBeUndefined()
    expect(seen!.headers['x-api-key']).toBeUndefined()
    expectNoSecret(seen!, key)
  })

  it.each([['Bearer '], ['bearer '], ['BEARER  '], ['']])(
    'never sends Authorization: %s<gateway key> as the provider key on first-class routes (key in x-gateway-api-key)',
    async (scheme) => {
      const response = await chat(passHeaders({ 'x-gateway-api-key': key, authorization: `${scheme}${key}` }))
      expect(response.status).toBe(200)
      const [seen] = await mock.waitForRequests(1)
      expect(seen!.headers.authorization).toBeUndefined()
      expectNoSecret(seen!, key)
    },
  )

  it('drops headers named in x-gateway-forward-headers that carry the key, keeps the others', async () => {
    const response = await chat(passHeaders({
      'x-gateway-api-key': key,
      authorization: `Bearer ${PROVIDER}`,
      'x-gateway-forward-headers': 'x-api-key, api-key, x-custom, x-trace',
      'x-api-key': key,
      'api-key': ` ${key} `,
      'x-custom': `Bearer ${key}`,
      'x-trace': 'abc',
    }))
    expect(response.status).toBe(200)
    const [seen] = await mock.waitForRequests(1)
    expect(seen!.headers['x-trace']).toBe('abc')
    for (const name of ['x-api-key', 'api-key', 'x-custom']) expect(seen!.headers[name], name).toBeUndefined()
    expect(seen!.headers.authorization).toBe(`Bearer ${PROVIDER}`)
    expectNoSecret(seen!, key)
  })

  it('drops a JWT credential wherever it is repeated, on both kinds of route', async () => {
    const token = await jwt()
    const pass = await send('/v1/files', 'GET', passHeaders({ 'x-gateway-api-key': token, 'x-api-key': token, authorization: `Bearer ${PROVIDER}` }))
    expect(pass.status, JSON.stringify(pass.json)).toBe(200)
    const first = await chat(passHeaders({ 'x-gateway-api-key': token, authorization: `Bearer ${token}`, 'x-gateway-forward-headers': 'x-api-key', 'x-api-key': token }))
    expect(first.status, JSON.stringify(first.json)).toBe(200)
    const seen = await mock.waitForRequests(2)
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${PROVIDER}`)
    expect(seen[1]!.headers.authorization).toBeUndefined()
    for (const request of seen) expectNoSecret(request, token)
  })

  it('drops the key repeated in x-api-key next to a virtual key', async () => {
    const vk = await createVirtualKey()
    const response = await send('/v1/rerank', 'POST', { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-virtual-key': vk.slug, 'x-api-key': key }, '{}')
    expect(response.status).toBe(200)
    const [seen] = await mock.waitForRequests(1)
    expect(seen!.headers.authorization).toBe(`Bearer ${STORED_KEY}`)
    expectNoSecret(seen!, key)
  })
})

describe('custom host names are normalised (item 6)', () => {
  it("stores a virtual key's LOCALHOST. as localhost and connects to the name it checked", async () => {
    const port = new URL(mock.url).port
    const vk = await createVirtualKey({ custom_host: `http://LOCALHOST.:${port}/v1/` })
    const got = await gw.admin('GET', `/v1/virtual-keys/${vk.slug}`)
    expect(got.body.custom_host).toBe(`http://localhost:${port}/v1`)
    const response = await chat({ 'x-gateway-api-key': key, 'x-gateway-virtual-key': vk.slug })
    expect(response.status, JSON.stringify(response.json)).toBe(200)
    const [seen] = await mock.waitForRequests(1)
    expect(seen!.headers.host).toBe(`localhost:${port}`)
    expect(seen!.path).toBe('/v1/chat/completions')
  })

  it('sends x-gateway-custom-host: http://localhost..:port to localhost', async () => {
    const port = new URL(mock.url).port
    const response = await chat({ 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': `http://localhost..:${port}/v1` })
    expect(response.status, JSON.stringify(response.json)).toBe(200)
    expect((await mock.waitForRequests(1))[0]!.headers.host).toBe(`localhost:${port}`)
  })

  it.each(['0x7f.1', '127.1', '2130706433', '0177.0.0.1', '127.0.0.1.'])('sends the IPv4 spelling %s to 127.0.0.1', async (host) => {
    const port = new URL(mock.url).port
    const response = await chat({ 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': `http://${host}:${port}/v1` })
    expect(response.status, JSON.stringify(response.json)).toBe(200)
    expect((await mock.waitForRequests(1))[0]!.headers.host).toBe(`127.0.0.1:${port}`)
  })

  it.each(['0', '0.0.0.0', '[::]', '127.0.0.2', '[::ffff:127.0.0.2]'])('refuses %s, which is not allow-listed in any spelling', async (host) => {
    const port = new URL(mock.url).port
    const response = await chat({ 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': `http://${host}:${port}/v1` })
    expect(response.status).toBe(400)
    expect(response.json.error.code).toBe('GW_REQ_CUSTOM_HOST_REFUSED')
    expect(mock.requests).toHaveLength(0)
  })
})

describe('dot segments in the path (item 6)', () => {
  const BAD_PATHS = [
    '/v1/../../x',
    '/v1/..',
    '/v1/.',
    '/v1/./files',
    '/v1/files/../../admin',
    '/v1/%2e%2e/x',
    '/v1/%2E%2E/x',
    '/v1/%2e./x',
    '/v1/.%2E/x',
    '/v1/%2e/x',
    '/v1/files/%2e%2e',
    '/v1/a\\..\\..\\x',
    '/v1/a%5c..%5cx',
    '/v1/a%2f..%2f..%2fx',
    '/v1/a%2F%2e%2e%2Fx',
    '/v1/%252e%252e/x',
    '/v1/%25252e%25252e/x',
    '/v1/..;/x',
    '/v1/chat/../chat/completions',
    '/v1/files/..?purpose=x',
  ]

  it.each(BAD_PATHS)('refuses %s with 400 before anything is forwarded', async (path) => {
    const response = await send(path, 'GET', { 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': `${mock.origin}/base/v1` })
    expect(response.status, JSON.stringify(response.json)).toBe(400)
    expect(response.json.error).toMatchObject({ code: 'GW_REQ_INVALID', type: 'invalid_request_error' })
    expect(response.json.error.message).toContain('segments')
    expect(mock.requests).toHaveLength(0)
  })

  it('refuses them before authentication, for POST too, and on admin-looking paths', async () => {
    for (const [method, path] of [['POST', '/v1/../x'], ['GET', '/v1/admin/workspaces/..'], ['DELETE', '/v1/virtual-keys/%2e%2e']] as const) {
      const response = await send(path, method, {})
      expect(response.status, `${method} ${path}`).toBe(400)
      expect(response.json.error.code).toBe('GW_REQ_INVALID')
    }
  })

  it.each([
    ['/v1/files/a%2Fb', '/base/v1/files/a%2Fb'],
    ['/v1/files/v1.2/x..y/...', '/base/v1/files/v1.2/x..y/...'],
    ['/v1/files/.hidden', '/base/v1/files/.hidden'],
    ['/v1/files/100%25', '/base/v1/files/100%25'],
    ['/v1/files/%2e%2ex', '/base/v1/files/%2e%2ex'],
  ])('forwards the harmless path %s unchanged, inside the base path', async (path, expected) => {
    const response = await send(path, 'GET', { 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': `${mock.origin}/base/v1` })
    expect(response.status).not.toBe(400)
    const [seen] = await mock.waitForRequests(1)
    expect(seen!.path).toBe(expected)
  })
})
