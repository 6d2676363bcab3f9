/**
 * Virtual keys end to end: created through the Admin API, used by the official `openai` client with
 * `x-gateway-virtual-key`, rotated, isolated per workspace, expired, deleted; provider keys never
 * leave the gateway in clear (responses, audit log, store, database file); a wrong master key stops
 * the boot.
 */
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway } from '../../config/boot.js'
import { AdminStore } from '../../core/ports.js'
import { MOCK_REPLY, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'
import { startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'

type Json = Record<string, any>

const FIRST = 'sk-first-0123456789abcdef'
const SECOND = 'sk-second-0123456789abcdef'
const ROUND_ROBIN = ['sk-rr-a-0123456789', 'sk-rr-b-0123456789', 'sk-rr-c-0123456789']
const MODEL_SECRET = 'aws-secret-0123456789abcdef'
const ALL_SECRETS = [FIRST, SECOND, ...ROUND_ROBIN, MODEL_SECRET]

let mock: MockUpstream
let gw: TestGateway
let organisationId: string
/** Workspace A: a data-plane key that may also read its virtual keys. */
let keyA: string
let workspaceA: string
let workspaceB: string
let keyB: string
/** Every Admin API response body seen, checked at the end for secrets. */
const adminBodies: string[] = []

async function admin(method: string, path: string, body?: unknown, key?: string): Promise<{ status: number; body: any }> {
  const response = await gw.admin(method, path, body, key)
  adminBodies.push(JSON.stringify(response.body))
  return response
}

function clientFor(apiKey: string, virtualKey: string): OpenAI {
  return new OpenAI({
    // The openai client always sends Authorization; with a virtual key it must not reach the provider.
    apiKey: 'sk-client-side-not-forwarded',
    baseURL: `${gw.url}/v1`,
    maxRetries: 0,
    defaultHeaders: { 'x-gateway-api-key': apiKey, 'x-gateway-virtual-key': virtualKey },
  })
}

async function chat(apiKey: string, virtualKey: string): Promise<string | null | undefined> {
  const completion = await clientFor(apiKey, virtualKey).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] })
  return completion.choices[0]?.message.content
}

async function chatError(apiKey: string, virtualKey: string): Promise<InstanceType<typeof OpenAI.APIError>> {
  const failure = await chat(apiKey, virtualKey).then(
    () => null,
    (error: unknown) => error,
  )
  expect(failure).toBeInstanceOf(OpenAI.APIError)
  return failure as InstanceType<typeof OpenAI.APIError>
}

/** Creates a virtual key in `workspace` with the Admin API key; returns its slug. */
async function createVirtualKey(workspace: string, fields: Json = {}): Promise<{ id: string; slug: string }> {
  const created = await admin('POST', '/v1/virtual-keys', { name: 'Main OpenAI', provider: 'openai', custom_host: mock.url, key: FIRST, workspace_id: workspace, ...fields })
  expect(created.status, JSON.stringify(created.body)).toBe(200)
  return created.body
}

/** The Authorization header of the mock's last request. */
function lastAuthorization(): string | undefined {
  return mock.requests[mock.requests.length - 1]?.headers.authorization
}

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  organisationId = (await admin('GET', '/v1/admin/organisation')).body.id
  ;({ key: keyA, workspaceId: workspaceA } = await gw.workspaceKey(['completions.write', 'virtual_keys.list', 'virtual_keys.read']))
  ;({ key: keyB, workspaceId: workspaceB } = await gw.workspaceKey(['completions.write', 'virtual_keys.list', 'virtual_keys.read', 'virtual_keys.create', 'virtual_keys.update', 'virtual_keys.delete']))
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

describe('virtual keys', () => {
  let main: { id: string; slug: string }

  it('creates a virtual key: {id, slug, object}, the slug made from the name', async () => {
    main = await createVirtualKey(workspaceA, { model_config: { region: 'us-east-1', awsSecretAccessKey: MODEL_SECRET } })
    expect(Object.keys(main).sort()).toEqual(['id', 'object', 'slug'])
    expect((main as Json).object).toBe('virtual-key')
    expect(main.slug).toMatch(/^main-openai-[0-9a-f]{6}$/)
  })

  it('sends the stored key upstream through the openai client, never the client Authorization or gateway headers', async () => {
    mock.reset()
    expect(await chat(keyA, main.slug)).toBe(MOCK_REPLY)
    const [seen] = await mock.waitForRequests(1)
    expect(seen?.pathname).toBe('/v1/chat/completions')
    expect(seen?.headers.authorization).toBe(`Bearer ${FIRST}`)
    expect(JSON.stringify(seen?.headers)).not.toContain('sk-client-side-not-forwarded')
    expect(JSON.stringify(seen?.headers)).not.toContain(keyA)
    expect(Object.keys(seen?.headers ?? {}).filter((name) => name.startsWith('x-gateway-'))).toEqual([])
  })

  it('uses the stored key on pass-through routes too', async () => {
    mock.reset()
    const response = await fetch(`${gw.url}/v1/rerank`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': keyA, 'x-gateway-virtual-key': main.slug, authorization: 'Bearer sk-client-side-not-forwarded' },
      body: JSON.stringify({ model: 'rerank-1', query: 'q', documents: ['a'] }),
    })
    await response.arrayBuffer()
    const [seen] = await mock.waitForRequests(1)
    expect(seen?.pathname).toBe('/v1/rerank')
    expect(seen?.headers.authorization).toBe(`Bearer ${FIRST}`)
  })

  it('shows the key masked on get and list, never in clear; model_config secrets masked', async () => {
    const got = await admin('GET', `/v1/virtual-keys/${main.slug}`)
    expect(got.status).toBe(200)
    expect(got.body).toMatchObject({
      object: 'virtual-key',
      id: main.id,
      slug: main.slug,
      name: 'Main OpenAI',
      provider: 'openai',
      ai_provider_name: 'openai',
      masked_api_key: 'sk********def',
      keys_count: 1,
      custom_host: mock.url,
      status: 'active',
      expires_at: null,
      workspace_id: workspaceA,
      usage_limits: null,
      rate_limits: [],
    })
    expect(got.body.model_config.region).toBe('us-east-1')
    expect(got.body.model_config.awsSecretAccessKey).not.toBe(MODEL_SECRET)
    expect(Object.keys(got.body)).not.toContain('key')
    const byId = await admin('GET', `/v1/virtual-keys/${main.id}`)
    expect(byId.body.slug).toBe(main.slug)
    const listed = await admin('GET', `/v1/virtual-keys?workspace_id=${workspaceA}`)
    expect(listed.status).toBe(200)
    expect(listed.body.object).toBe('list')
    expect(listed.body.data.map((entry: Json) => entry.slug)).toContain(main.slug)
    const asWorkspace = await admin('GET', '/v1/virtual-keys', undefined, keyA)
    expect(asWorkspace.body.data.map((entry: Json) => entry.slug)).toEqual([main.slug])
  })

  it('rotates the credential with PUT key: the next request uses the new key', async () => {
    const updated = await admin('PUT', `/v1/virtual-keys/${main.slug}`, { key: SECOND, note: 'rotated' })
    expect(updated.status, JSON.stringify(updated.body)).toBe(200)
    expect(updated.body).toMatchObject({ object: 'virtual-key', slug: main.slug, note: 'rotated', masked_api_key: 'sk********def' })
    mock.reset()
    await chat(keyA, main.slug)
    expect(lastAuthorization()).toBe(`Bearer ${SECOND}`)
  })

  it('keeps provider keys out of the store in clear and out of the database files', async () => {
    const store = gw.wiring.resolve(AdminStore)
    const record = await store.findVirtualKey(organisationId, main.slug)
    expect(record?.sealedKeys).toHaveLength(1)
    const raw = JSON.stringify(record)
    for (const secret of ALL_SECRETS) expect(raw).not.toContain(secret)
    expect(record?.sealedKeys[0]).toMatch(/^v1\.[0-9a-f]{8}\./)
    expect(record?.maskedKey).toBe('sk********def')
    for (const file of ['gateway.duckdb', 'gateway.duckdb.wal']) {
      const path = join(gw.dataDir, file)
      if (!existsSync(path)) continue
      const bytes = readFileSync(path)
      for (const secret of ALL_SECRETS) expect(bytes.includes(Buffer.from(secret)), `${secret} in ${file}`).toBe(false)
    }
  })

  it('uses several keys in turn (round robin)', async () => {
    const rr = await createVirtualKey(workspaceA, { name: 'pool', key: undefined, keys: ROUND_ROBIN })
    const got = await admin('GET', `/v1/virtual-keys/${rr.slug}`)
    expect(got.body.keys_count).toBe(3)
    mock.reset()
    for (let i = 0; i < 4; i++) await chat(keyA, rr.slug)
    expect(mock.requests.map((request) => request.headers.authorization)).toEqual([...ROUND_ROBIN, ROUND_ROBIN[0]].map((key) => `Bearer ${key}`))
  })

  it('answers 404 to an unknown slug', async () => {
    mock.reset()
    const failure = await chatError(keyA, 'nothing-000000')
    expect(failure).toBeInstanceOf(OpenAI.NotFoundError)
    expect(failure.code).toBe('GW_VIRTUAL_KEY_NOT_FOUND')
    expect(mock.requests).toHaveLength(0)
  })

  it("answers 404 to another workspace's virtual key, on the data plane and the Admin API", async () => {
    const other = await createVirtualKey(workspaceB, { name: 'team b' })
    mock.reset()
    const failure = await chatError(keyA, other.slug)
    expect(failure).toBeInstanceOf(OpenAI.NotFoundError)
    expect(failure.code).toBe('GW_VIRTUAL_KEY_NOT_FOUND')
    expect(mock.requests).toHaveLength(0)
    expect(await chat(keyB, other.slug)).toBe(MOCK_REPLY)

    for (const path of [`/v1/virtual-keys/${other.slug}`, `/v1/virtual-keys/${other.id}`]) {
      const got = await admin('GET', path, undefined, keyA)
      expect(got.status).toBe(404)
      expect(got.body.data.errorCode).toBe('AB08')
    }
    expect((await admin('GET', `/v1/virtual-keys?workspace_id=${workspaceB}`, undefined, keyA)).status).toBe(404)
    expect((await admin('PUT', `/v1/virtual-keys/${main.slug}`, { note: 'x' }, keyB)).status).toBe(404)
    expect((await admin('DELETE', `/v1/virtual-keys/${main.slug}`, undefined, keyB)).status).toBe(404)
    // A workspace service key creates in its own workspace only.
    expect((await admin('POST', '/v1/virtual-keys', { name: 'x', provider: 'openai', key: FIRST, workspace_id: workspaceA }, keyB)).status).toBe(404)
    const own = await admin('POST', '/v1/virtual-keys', { name: 'own', provider: 'openai', key: FIRST, custom_host: mock.url }, keyB)
    expect(own.status).toBe(200)
  })

  it('answers 401 once the virtual key has expired, and shows it as expired', async () => {
    const expiring = await createVirtualKey(workspaceA, { name: 'short', expires_at: new Date(Date.now() + 1500).toISOString() })
    expect(await chat(keyA, expiring.slug)).toBe(MOCK_REPLY)
    await new Promise((resolve) => setTimeout(resolve, 1600))
    const failure = await chatError(keyA, expiring.slug)
    expect(failure).toBeInstanceOf(OpenAI.AuthenticationError)
    expect(failure.status).toBe(401)
    expect(failure.code).toBe('GW_VIRTUAL_KEY_EXPIRED')
    expect((await admin('GET', `/v1/virtual-keys/${expiring.slug}`)).body.status).toBe('expired')
  })

  it('validates input: provider, custom host, key or keys, rate limit units, workspace', async () => {
    const cases: Array<[Json, string]> = [
      [{ provider: 'no-such-provider' }, 'provider'],
      [{ custom_host: 'http://169.254.169.254/latest' }, 'custom_host'],
      [{ keys: [SECOND] }, 'keys'],
      [{ rate_limits: [{ type: 'requests', unit: 'rps', value: 1 }] }, 'rate_limits'],
      [{ provider: 'vllm', custom_host: undefined }, 'custom_host'],
      [{ expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
    ]
    for (const [fields, field] of cases) {
      const created = await admin('POST', '/v1/virtual-keys', { name: 'bad', provider: 'openai', key: FIRST, custom_host: mock.url, workspace_id: workspaceA, ...fields })
      expect(created.status, JSON.stringify(fields)).toBe(400)
      expect(created.body.data.errorCode).toBe('AB01')
      expect(created.body.data.message).toContain(field)
    }
    const noWorkspace = await admin('POST', '/v1/virtual-keys', { name: 'bad', provider: 'openai', key: FIRST })
    expect(noWorkspace.status).toBe(400)
    expect(noWorkspace.body.data.message).toContain('workspace_id')
    const readOnly = await admin('POST', '/v1/virtual-keys', { name: 'bad', provider: 'openai', key: FIRST }, keyA)
    expect(readOnly.status).toBe(403)
  })

  it('tracks its token budget: usage shown, exhausted → 412, reset_usage puts it back to work', async () => {
    const budgeted = await createVirtualKey(workspaceA, { name: 'Budgeted', usage_limits: { type: 'tokens', credit_limit: 1 } })
    expect(await chat(keyA, budgeted.slug)).toBe(MOCK_REPLY)
    const spent = await admin('GET', `/v1/virtual-keys/${budgeted.slug}`)
    expect(spent.body.usage_limits.current_usage).toBeGreaterThan(0)
    expect(spent.body.status).toBe('exhausted')
    const refused = await chatError(keyA, budgeted.slug)
    expect(refused.status).toBe(412)
    expect(refused.message).toContain(budgeted.slug)
    const reset = await admin('PUT', `/v1/virtual-keys/${budgeted.slug}`, { reset_usage: true })
    expect(reset.status, JSON.stringify(reset.body)).toBe(200)
    expect(reset.body.usage_limits.current_usage).toBe(0)
    expect(reset.body.status).toBe('active')
    expect(await chat(keyA, budgeted.slug)).toBe(MOCK_REPLY)
  })

  it('deletes a virtual key: its next use answers 404', async () => {
    const doomed = await createVirtualKey(workspaceA, { name: 'doomed' })
    expect(await chat(keyA, doomed.slug)).toBe(MOCK_REPLY)
    expect((await admin('DELETE', `/v1/virtual-keys/${doomed.slug}`)).body).toEqual({})
    const failure = await chatError(keyA, doomed.slug)
    expect(failure.status).toBe(404)
    expect(failure.code).toBe('GW_VIRTUAL_KEY_NOT_FOUND')
    expect((await admin('GET', `/v1/virtual-keys/${doomed.slug}`)).status).toBe(404)
  })

  it('never shows a provider key in any Admin API response or audit entry', async () => {
    const audit = await admin('GET', '/v1/audit-logs?resource_type=virtual_key&page_size=1000')
    expect(audit.status).toBe(200)
    expect(audit.body.total).toBeGreaterThan(0)
    const openapi = await fetch(`${gw.url}/v1/openapi.json`)
    adminBodies.push(await openapi.text())
    for (const body of adminBodies) for (const secret of ALL_SECRETS) expect(body).not.toContain(secret)
  })
})

describe('master key', () => {
  let dataDir: string

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'gw-e2e-master-key-'))
  })

  afterAll(() => {
    rmSync(dataDir, { recursive: true, force: true })
  })

  function boot(env: Record<string, string> = {}) {
    return startGateway({
      env: {
        PORT: '0',
        GATEWAY_DATA_DIR: dataDir,
        GATEWAY_BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY,
        GATEWAY_ALLOWED_CUSTOM_HOSTS: '127.0.0.1',
        GATEWAY_LOG_LEVEL: 'silent',
        ...env,
      },
      overlay: { server: { host: '127.0.0.1' } },
    })
  }

  it('refuses to boot with a master key that cannot open the stored credentials, and boots with the right one', async () => {
    const first = await boot()
    const workspace = await fetch(`${first.url}/v1/admin/workspaces`, {
      method: 'POST',
      headers: { 'x-gateway-api-key': TEST_ADMIN_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'mk' }),
    }).then((response) => response.json() as Promise<Json>)
    const created = await fetch(`${first.url}/v1/virtual-keys`, {
      method: 'POST',
      headers: { 'x-gateway-api-key': TEST_ADMIN_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'mk', provider: 'openai', key: FIRST, workspace_id: workspace.id }),
    })
    expect(created.status).toBe(200)
    await first.stop()

    const keyFile = readFileSync(join(dataDir, 'master.key'), 'utf8').trim()
    expect(keyFile).toMatch(/^[0-9a-f]{64}$/)

    await expect(boot({ GATEWAY_MASTER_KEY: randomBytes(32).toString('hex') })).rejects.toThrow(
      'GATEWAY_MASTER_KEY does not match the key that sealed the stored credentials',
    )
    await expect(boot({ GATEWAY_MASTER_KEY: 'too-short' })).rejects.toThrow(/GATEWAY_MASTER_KEY: must be 64 hex characters/)

    const right = await boot({ GATEWAY_MASTER_KEY: Buffer.from(keyFile, 'hex').toString('base64') })
    await right.stop()
    const again = await boot()
    await again.stop()
  })
})

describe('virtual-key plugin switched off', () => {
  let off: TestGateway

  beforeAll(async () => {
    off = await startTestGateway({ overlay: { plugins: { 'virtual-key': { enabled: false } } } })
  })

  afterAll(async () => {
    await off?.close()
  })

  it('answers a clear 400 to x-gateway-virtual-key instead of ignoring it', async () => {
    const { key } = await off.workspaceKey(['completions.write'])
    const response = await fetch(`${off.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-virtual-key': 'main-000000' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }),
    })
    const body = (await response.json()) as Json
    expect(response.status).toBe(400)
    expect(body.error.code).toBe('GW_REQ_PROVIDER_MISSING')
    expect(body.error.message).toContain('Virtual keys are not enabled')
  })
})
