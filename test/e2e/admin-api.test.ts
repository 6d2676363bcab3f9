/**
 * The Admin API, end to end (API.md §1, §5): first-start bootstrap and restarts on the same data
 * directory, workspaces, API key creation, roles and workspace isolation, and secrets never leaving
 * the gateway. Every response body is recorded so the last test can check none leaked a secret.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, type GatewayHandle } from '../../config/boot.js'
import { hashSecret } from '../../core/secrets.js'
import { postChat, startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

interface Answer {
  readonly status: number
  readonly text: string
  readonly body: Json
}

/** Every Admin API response body seen by this file, raw. */
const responseTexts: string[] = []
/** Every secret this file knows (bootstrap keys and created keys), to look for their hashes. */
const secrets = new Set<string>([TEST_ADMIN_KEY])

const BOOT_KEY = 'gw-boot-key-e2e-admin-0123456789abcdef'
const OTHER_BOOT_KEY = 'gw-other-boot-key-e2e-0123456789abcdef'
secrets.add(BOOT_KEY)
secrets.add(OTHER_BOOT_KEY)

/** Sends one request to `url + path` and records the raw response text. */
async function call(url: string, method: string, path: string, options: { body?: unknown; raw?: string; key?: string | null; headers?: Record<string, string> } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers }
  const key = options.key === undefined ? TEST_ADMIN_KEY : options.key
  if (key !== null) headers['x-gateway-api-key'] = key
  let payload: string | undefined
  if (options.raw !== undefined) payload = options.raw
  else if (options.body !== undefined) payload = JSON.stringify(options.body)
  if (payload !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(`${url}${path}`, { method, headers, ...(payload === undefined ? {} : { body: payload }) })
  const text = await response.text()
  responseTexts.push(text)
  let body: Json = {}
  try {
    body = text.length > 0 ? (JSON.parse(text) as Json) : {}
  } catch {
    body = { unparsable: text }
  }
  if (typeof body.key === 'string') secrets.add(body.key)
  return { status: response.status, text, body }
}

/** Asserts the control-plane error envelope with `errorCode` and returns its message. */
function expectAdminError(answer: Answer, status: number, errorCode: string): string {
  expect(answer.status, answer.text).toBe(status)
  expect(answer.body).toEqual({ success: false, data: { message: expect.any(String), errorCode } })
  return answer.body.data.message as string
}

function bootEnv(dataDir: string, adminKey: string): Record<string, string> {
  return {
    PORT: '0',
    GATEWAY_DATA_DIR: dataDir,
    GATEWAY_BOOTSTRAP_ADMIN_KEY: adminKey,
    GATEWAY_ALLOWED_CUSTOM_HOSTS: '127.0.0.1',
    GATEWAY_LOG_LEVEL: 'silent',
  }
}

describe('Admin API bootstrap', () => {
  let dataDir: string
  let handle: GatewayHandle | null = null
  let firstOrganisationId: string

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'gw-e2e-boot-'))
  })

  afterAll(async () => {
    await handle?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  async function boot(adminKey: string): Promise<GatewayHandle> {
    await handle?.stop()
    handle = await startGateway({ env: bootEnv(dataDir, adminKey), overlay: { server: { host: '127.0.0.1' } } })
    return handle
  }

  it('accepts GATEWAY_BOOTSTRAP_ADMIN_KEY on a fresh data directory and returns the organisation', async () => {
    const gw = await boot(BOOT_KEY)
    const organisation = await call(gw.url, 'GET', '/v1/admin/organisation', { key: BOOT_KEY })
    expect(organisation.status, organisation.text).toBe(200)
    expect(organisation.body.object).toBe('organisation')
    expect(organisation.body.id).toEqual(expect.any(String))
    expect(organisation.body.id.length).toBeGreaterThan(0)
    firstOrganisationId = organisation.body.id
    // Only the configured key was created: another string of the right shape is refused.
    expectAdminError(await call(gw.url, 'GET', '/v1/admin/organisation', { key: TEST_ADMIN_KEY }), 401, 'AB05')
  })

  it('keeps the same organisation and key when restarted on the same data directory', async () => {
    const gw = await boot(BOOT_KEY)
    const organisation = await call(gw.url, 'GET', '/v1/admin/organisation', { key: BOOT_KEY })
    expect(organisation.status, organisation.text).toBe(200)
    expect(organisation.body.id).toBe(firstOrganisationId)
  })

  it('does not bootstrap again when restarted with a different bootstrap key', async () => {
    const gw = await boot(OTHER_BOOT_KEY)
    expectAdminError(await call(gw.url, 'GET', '/v1/admin/organisation', { key: OTHER_BOOT_KEY }), 401, 'AB05')
    const organisation = await call(gw.url, 'GET', '/v1/admin/organisation', { key: BOOT_KEY })
    expect(organisation.status, organisation.text).toBe(200)
    expect(organisation.body.id).toBe(firstOrganisationId)
  })
})

describe('Admin API', () => {
  let gw: TestGateway
  let mock: MockUpstream
  let organisationId: string

  const admin = (method: string, path: string, body?: unknown, key?: string | null): Promise<Answer> =>
    call(gw.url, method, path, { ...(body === undefined ? {} : { body }), ...(key === undefined ? {} : { key }) })

  async function createWorkspace(name: string): Promise<string> {
    const created = await admin('POST', '/v1/admin/workspaces', { name })
    expect(created.status, created.text).toBe(200)
    return created.body.id as string
  }

  async function createWorkspaceKey(workspaceId: string, scopes: readonly string[], key?: string): Promise<Answer> {
    return admin('POST', '/v1/api-keys/workspace/service', { name: 'svc', workspace_id: workspaceId, scopes }, key)
  }

  async function chat(key: string, headers: Record<string, string> = {}): Promise<Response> {
    return postChat(gw.url, key, mock.url, headers)
  }

  beforeAll(async () => {
    mock = await startMockUpstream()
    gw = await startTestGateway()
    const organisation = await admin('GET', '/v1/admin/organisation')
    expect(organisation.status, organisation.text).toBe(200)
    organisationId = organisation.body.id
  })

  afterAll(async () => {
    await gw?.close()
    await mock?.close()
  })

  describe('workspaces', () => {
    it('creates a workspace whose id is its ws- slug', async () => {
      const created = await admin('POST', '/v1/admin/workspaces', { name: 'Team Alpha', description: 'first team' })
      expect(created.status, created.text).toBe(200)
      expect(created.body.object).toBe('workspace')
      expect(created.body.id).toBe(created.body.slug)
      expect(created.body.slug).toMatch(/^ws-/)
      expect(created.body.name).toBe('Team Alpha')
      expect(created.body.description).toBe('first team')
    })

    it('gives every new workspace its own slug', async () => {
      const first = await createWorkspace('Same Name')
      const second = await createWorkspace('Same Name')
      expect(first).not.toBe(second)
    })

    it('reads a workspace by its slug with an empty member list', async () => {
      const id = await createWorkspace('Readable')
      const read = await admin('GET', `/v1/admin/workspaces/${id}`)
      expect(read.status, read.text).toBe(200)
      expect(read.body.object).toBe('workspace')
      expect(read.body.id).toBe(id)
      expect(read.body.name).toBe('Readable')
      expect(read.body.users).toEqual([])
    })

    it('answers 404 AB08 for an unknown workspace', async () => {
      expectAdminError(await admin('GET', '/v1/admin/workspaces/ws-does-not-exist-000000'), 404, 'AB08')
    })

    it('refuses a workspace without name with 400 AB01 naming the field', async () => {
      const message = expectAdminError(await admin('POST', '/v1/admin/workspaces', { description: 'no name' }), 400, 'AB01')
      expect(message).toContain('name')
    })

    it('refuses an unknown field with 400 AB01 naming it', async () => {
      const message = expectAdminError(await admin('POST', '/v1/admin/workspaces', { name: 'x', colour: 'red' }), 400, 'AB01')
      expect(message).toContain('colour')
    })

    it('refuses malformed JSON with 400 in the control-plane shape', async () => {
      const answer = await call(gw.url, 'POST', '/v1/admin/workspaces', { raw: '{"name":' })
      expectAdminError(answer, 400, 'AB01')
    })
  })

  describe('API keys', () => {
    let workspaceId: string

    beforeAll(async () => {
      workspaceId = await createWorkspace('Keys')
    })

    it('creates a workspace service key and returns its gw- secret once', async () => {
      const created = await createWorkspaceKey(workspaceId, ['completions.write'])
      expect(created.status, created.text).toBe(200)
      expect(created.body.object).toBe('api-key')
      expect(created.body.id).toEqual(expect.any(String))
      expect(created.body.key).toMatch(/^gw-/)
      expect(created.body.key).not.toBe(TEST_ADMIN_KEY)
    })

    it('lets a new key call the data plane immediately', async () => {
      const created = await createWorkspaceKey(workspaceId, ['completions.write'])
      expect(created.status, created.text).toBe(200)
      const response = await chat(created.body.key)
      const text = await response.text()
      expect(response.status, text).toBe(200)
      expect(JSON.parse(text).choices[0].message.content).toBe(MOCK_REPLY)
    })

    it('requires user_id for a workspace user key', async () => {
      const answer = await admin('POST', '/v1/api-keys/workspace/user', { name: 'user key', workspace_id: workspaceId, scopes: ['completions.write'] })
      expect(expectAdminError(answer, 400, 'AB01')).toContain('user_id')
    })

    it('answers 404 AB08 for a workspace user key of an unknown user', async () => {
      const answer = await admin('POST', '/v1/api-keys/workspace/user', {
        name: 'user key',
        workspace_id: workspaceId,
        user_id: '00000000-0000-4000-8000-000000000000',
        scopes: ['completions.write'],
      })
      expectAdminError(answer, 404, 'AB08')
    })

    it('creates an Admin API key that can itself read the organisation', async () => {
      const created = await admin('POST', '/v1/api-keys/organisation/service', { name: 'second admin', scopes: ['organisation_settings.read'] })
      expect(created.status, created.text).toBe(200)
      expect(created.body.object).toBe('api-key')
      expect(created.body.key).toMatch(/^gw-/)
      const organisation = await admin('GET', '/v1/admin/organisation', undefined, created.body.key)
      expect(organisation.status, organisation.text).toBe(200)
      expect(organisation.body.id).toBe(organisationId)
    })

    it('refuses an unknown scope with 400 AB01 naming it', async () => {
      const answer = await createWorkspaceKey(workspaceId, ['completions.write', 'not.a.scope'])
      expect(expectAdminError(answer, 400, 'AB01')).toContain('not.a.scope')
    })

    it('refuses an admin-only scope on a workspace key, naming it', async () => {
      const answer = await createWorkspaceKey(workspaceId, ['audit_logs.list'])
      expect(expectAdminError(answer, 400, 'AB01')).toContain('audit_logs.list')
    })

    it('refuses a data-plane scope on an Admin API key, naming it', async () => {
      const answer = await admin('POST', '/v1/api-keys/organisation/service', { name: 'bad', scopes: ['completions.write'] })
      expect(expectAdminError(answer, 400, 'AB01')).toContain('completions.write')
    })

    it('refuses expires_at in the past with 400 AB01 naming the field', async () => {
      const answer = await admin('POST', '/v1/api-keys/workspace/service', {
        name: 'expired',
        workspace_id: workspaceId,
        scopes: ['completions.write'],
        expires_at: '2000-01-01T00:00:00Z',
      })
      expect(expectAdminError(answer, 400, 'AB01')).toContain('expires_at')
    })

    it('accepts expires_at in the future', async () => {
      const answer = await admin('POST', '/v1/api-keys/workspace/service', {
        name: 'expiring',
        workspace_id: workspaceId,
        scopes: ['completions.write'],
        expires_at: new Date(Date.now() + 86_400_000).toISOString(),
      })
      expect(answer.status, answer.text).toBe(200)
      expect(answer.body.key).toMatch(/^gw-/)
    })

    it('does not serve organisation/user keys: without a provider the path is pass-through and asks for one', async () => {
      const created = await createWorkspaceKey(workspaceId, ['completions.write'])
      expect(created.status, created.text).toBe(200)
      const answer = await call(gw.url, 'POST', '/v1/api-keys/organisation/user', { body: { name: 'x', scopes: ['completions.write'] }, key: created.body.key })
      expect(answer.status, answer.text).toBe(400)
      expect(answer.body.success).toBeUndefined()
      expect(answer.body.error).toEqual({ message: expect.any(String), type: 'invalid_request_error', param: null, code: 'GW_REQ_PROVIDER_MISSING' })
      // With an Admin API key it is not served as an admin route either: the reply is data-plane shaped.
      const withAdminKey = await call(gw.url, 'POST', '/v1/api-keys/organisation/user', { body: { name: 'x', scopes: ['workspaces.read'] } })
      expect(withAdminKey.status, withAdminKey.text).toBeGreaterThanOrEqual(400)
      expect(withAdminKey.body.success).toBeUndefined()
      expect(withAdminKey.body.error?.code).toEqual(expect.any(String))
    })
  })

  describe('roles and workspace isolation', () => {
    let ownWorkspace: string
    let otherWorkspace: string
    let workspaceKey: string

    beforeAll(async () => {
      // A key grants only scopes it holds itself, so the parent holds completions.write too.
      const made = await gw.workspaceKey(['workspaces.read', 'workspace_service_api_keys.create', 'completions.write'])
      ownWorkspace = made.workspaceId
      workspaceKey = made.key
      secrets.add(made.key)
      otherWorkspace = await createWorkspace('Other team')
    })

    it('lets a workspace key read its own workspace', async () => {
      const read = await admin('GET', `/v1/admin/workspaces/${ownWorkspace}`, undefined, workspaceKey)
      expect(read.status, read.text).toBe(200)
      expect(read.body.id).toBe(ownWorkspace)
    })

    it('reports another workspace as not found to a workspace key', async () => {
      expectAdminError(await admin('GET', `/v1/admin/workspaces/${otherWorkspace}`, undefined, workspaceKey), 404, 'AB08')
      // The admin key sees it, so the 404 above is isolation, not a missing workspace.
      expect((await admin('GET', `/v1/admin/workspaces/${otherWorkspace}`)).status).toBe(200)
    })

    it('lets a workspace key create a key in its own workspace', async () => {
      const implicit = await admin('POST', '/v1/api-keys/workspace/service', { name: 'child', scopes: ['completions.write'] }, workspaceKey)
      expect(implicit.status, implicit.text).toBe(200)
      expect(implicit.body.key).toMatch(/^gw-/)
      const explicit = await createWorkspaceKey(ownWorkspace, ['completions.write'], workspaceKey)
      expect(explicit.status, explicit.text).toBe(200)
      const response = await chat(explicit.body.key)
      expect(response.status, await response.text()).toBe(200)
    })

    it('answers 404 AB08 when a workspace key names another workspace for a new key', async () => {
      expectAdminError(await createWorkspaceKey(otherWorkspace, ['completions.write'], workspaceKey), 404, 'AB08')
    })

    it('refuses admin-only operations to a workspace key with 403 AB03', async () => {
      expectAdminError(await admin('POST', '/v1/admin/workspaces', { name: 'sneaky' }, workspaceKey), 403, 'AB03')
      expectAdminError(await admin('POST', '/v1/api-keys/organisation/service', { name: 'sneaky', scopes: ['workspaces.read'] }, workspaceKey), 403, 'AB03')
      expectAdminError(await admin('GET', '/v1/admin/organisation', undefined, workspaceKey), 403, 'AB03')
    })

    it('refuses a key without the route scope with 403 AB03', async () => {
      const dataOnly = await createWorkspaceKey(ownWorkspace, ['completions.write'])
      expect(dataOnly.status, dataOnly.text).toBe(200)
      expectAdminError(await admin('GET', `/v1/admin/workspaces/${ownWorkspace}`, undefined, dataOnly.body.key), 403, 'AB03')
      // workspaces.read admits reads only: it does not create keys.
      const readOnly = await createWorkspaceKey(ownWorkspace, ['workspaces.read'])
      expect(readOnly.status, readOnly.text).toBe(200)
      expectAdminError(await createWorkspaceKey(ownWorkspace, ['completions.write'], readOnly.body.key), 403, 'AB03')
      expectAdminError(
        await admin('POST', '/v1/api-keys/workspace/user', { name: 'u', workspace_id: ownWorkspace, user_id: 'x', scopes: ['completions.write'] }, workspaceKey),
        403,
        'AB03',
      )
    })

    it('does not treat list as read', async () => {
      const lister = await createWorkspaceKey(ownWorkspace, ['workspaces.list'])
      expect(lister.status, lister.text).toBe(200)
      expectAdminError(await admin('GET', `/v1/admin/workspaces/${ownWorkspace}`, undefined, lister.body.key), 403, 'AB03')
    })

    it('answers 401 AB05 without a key', async () => {
      expectAdminError(await admin('GET', '/v1/admin/organisation', undefined, null), 401, 'AB05')
      expectAdminError(await admin('POST', '/v1/admin/workspaces', { name: 'anonymous' }, null), 401, 'AB05')
    })

    it('answers 401 AB05 for an invalid key', async () => {
      expectAdminError(await admin('GET', '/v1/admin/organisation', undefined, 'gw-not-a-real-key-0123456789'), 401, 'AB05')
      expectAdminError(await admin('GET', `/v1/admin/workspaces/${ownWorkspace}`, undefined, `${workspaceKey}x`), 401, 'AB05')
    })
  })

  describe('secrets', () => {
    it('never returns a stored key hash or the bootstrap key in any Admin API response', () => {
      expect(responseTexts.length).toBeGreaterThan(20)
      expect(secrets.size).toBeGreaterThan(5)
      for (const text of responseTexts) {
        expect(text).not.toMatch(/[0-9a-fA-F]{64}/)
        expect(text).not.toContain(TEST_ADMIN_KEY)
        expect(text).not.toContain(BOOT_KEY)
        expect(text).not.toContain(OTHER_BOOT_KEY)
        for (const secret of secrets) expect(text).not.toContain(hashSecret(secret))
      }
    })
  })
})
