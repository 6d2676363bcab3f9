/**
 * Admin API end to end, second part (API.md §1, §5): workspace list/update/delete with dependants,
 * members, the full API key lifecycle (list, get, update, delete, rotate with a transition), the
 * role and no-escalation rules, and the organisation's JWT settings. Real gateway, real sockets.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { postChat, startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

interface Answer {
  readonly status: number
  readonly text: string
  readonly body: Json
}

let gw: TestGateway
let mock: MockUpstream

async function call(method: string, path: string, body?: unknown, key: string | null = TEST_ADMIN_KEY): Promise<Answer> {
  const headers: Record<string, string> = {}
  if (key !== null) headers['x-gateway-api-key'] = key
  if (body !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(`${gw.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  const text = await response.text()
  return { status: response.status, text, body: text.length > 0 ? (JSON.parse(text) as Json) : {} }
}

function expectAdminError(answer: Answer, status: number, errorCode: string): string {
  expect(answer.status, answer.text).toBe(status)
  expect(answer.body).toEqual({ success: false, data: { message: expect.any(String), errorCode } })
  return answer.body.data.message as string
}

async function chat(key: string): Promise<number> {
  const response = await postChat(gw.url, key, mock.url)
  await response.arrayBuffer()
  return response.status
}

async function createWorkspace(name: string, extra: Json = {}): Promise<Json> {
  const created = await call('POST', '/v1/admin/workspaces', { name, ...extra })
  expect(created.status, created.text).toBe(200)
  return created.body
}

async function createKey(type: 'workspace/service' | 'workspace/user' | 'organisation/service', body: Json, key: string = TEST_ADMIN_KEY): Promise<Answer> {
  return call('POST', `/v1/api-keys/${type}`, { name: 'key', ...body }, key)
}

/** The bootstrap owner's user id (GET /v1/admin/users is served by the users handlers). */
async function ownerId(): Promise<string> {
  const users = await call('GET', '/v1/admin/users')
  expect(users.status, users.text).toBe(200)
  const owner = (users.body.data as Json[]).find((user) => user.role === 'owner')
  expect(owner).toBeDefined()
  return owner?.id as string
}

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

describe('workspaces', () => {
  it('lists with paging, total and the name filter', async () => {
    const tag = `paging-${Date.now()}`
    for (const index of [1, 2, 3]) await createWorkspace(`${tag}-${index}`)
    const first = await call('GET', `/v1/admin/workspaces?name=${tag}&page_size=2&current_page=0`)
    expect(first.status, first.text).toBe(200)
    expect(first.body).toMatchObject({ object: 'list', total: 3 })
    expect(first.body.data.map((workspace: Json) => workspace.name)).toEqual([`${tag}-1`, `${tag}-2`])
    const second = await call('GET', `/v1/admin/workspaces?name=${tag}&page_size=2&current_page=1`)
    expect(second.body.data.map((workspace: Json) => workspace.name)).toEqual([`${tag}-3`])
    const exact = await call('GET', `/v1/admin/workspaces?exact_name=${tag}-2`)
    expect(exact.body.total).toBe(1)
    expectAdminError(await call('GET', '/v1/admin/workspaces?page_size=0'), 400, 'AB01')
  })

  it('shows a workspace key only its own workspace in the list', async () => {
    const made = await gw.workspaceKey(['workspaces.list'])
    const list = await call('GET', '/v1/admin/workspaces', undefined, made.key)
    expect(list.status, list.text).toBe(200)
    expect(list.body.total).toBe(1)
    expect(list.body.data[0].id).toBe(made.workspaceId)
  })

  it('updates name, description, defaults and limits and returns the workspace', async () => {
    const workspace = await createWorkspace('Before')
    const updated = await call('PUT', `/v1/admin/workspaces/${workspace.id}`, {
      name: 'After',
      description: 'changed',
      defaults: { metadata: { team: 'a' } },
      rate_limits: [{ type: 'requests', unit: 'rpm', value: 100 }],
      usage_limits: [{ type: 'cost', credit_limit: 10, alert_threshold: 8, periodic_reset: 'monthly' }],
    })
    expect(updated.status, updated.text).toBe(200)
    expect(updated.body).toMatchObject({
      object: 'workspace',
      id: workspace.id,
      name: 'After',
      description: 'changed',
      defaults: { metadata: { team: 'a' }, config_id: null },
      rate_limits: [{ type: 'requests', unit: 'rpm', value: 100 }],
      usage_limits: [{ type: 'cost', credit_limit: 10, alert_threshold: 8, periodic_reset: 'monthly', periodic_reset_days: null }],
    })
    const read = await call('GET', `/v1/admin/workspaces/${workspace.id}`)
    expect(read.body.name).toBe('After')
    expectAdminError(await call('PUT', `/v1/admin/workspaces/${workspace.id}`, { rate_limits: [{ type: 'requests', unit: 'rpx', value: 1 }] }), 400, 'AB01')
  })

  it('refuses to delete a workspace with keys (409 AB07) unless force_delete, which revokes them', async () => {
    const workspace = await createWorkspace('Doomed')
    const key = await createKey('workspace/service', { workspace_id: workspace.id, scopes: ['completions.write'] })
    expect(key.status, key.text).toBe(200)
    expect(await chat(key.body.key)).toBe(200)
    const message = expectAdminError(await call('DELETE', `/v1/admin/workspaces/${workspace.id}`), 409, 'AB07')
    expect(message).toContain('1 API keys')
    expectAdminError(await call('DELETE', `/v1/admin/workspaces/${workspace.id}`, { name: 'Wrong name', force_delete: true }), 400, 'AB01')
    const deleted = await call('DELETE', `/v1/admin/workspaces/${workspace.id}`, { name: 'Doomed', force_delete: true })
    expect(deleted.status, deleted.text).toBe(200)
    expect(deleted.body).toEqual({})
    expectAdminError(await call('GET', `/v1/admin/workspaces/${workspace.id}`), 404, 'AB08')
    expect(await chat(key.body.key)).toBe(401)
  })

  it('deletes an empty workspace without force', async () => {
    const workspace = await createWorkspace('Empty')
    expect((await call('DELETE', `/v1/admin/workspaces/${workspace.id}`)).status).toBe(200)
  })
})

describe('members', () => {
  it('adds the owner as a member, lists, reads, updates and removes the membership', async () => {
    const workspace = await createWorkspace('Members')
    const owner = await ownerId()
    const added = await call('POST', `/v1/admin/workspaces/${workspace.id}/users`, { users: [{ id: owner, role: 'manager' }] })
    expect(added.status, added.text).toBe(200)
    expectAdminError(await call('POST', `/v1/admin/workspaces/${workspace.id}/users`, { users: [{ id: owner, role: 'member' }] }), 409, 'AB07')

    const list = await call('GET', `/v1/admin/workspaces/${workspace.id}/users`)
    expect(list.body).toMatchObject({ object: 'list', total: 1 })
    expect(list.body.data[0]).toMatchObject({ object: 'workspace-user', id: owner, role: 'manager', org_role: 'owner', workspace_id: workspace.id })
    expect((await call('GET', `/v1/admin/workspaces/${workspace.id}/users?role=admin`)).body.total).toBe(0)

    const updated = await call('PUT', `/v1/admin/workspaces/${workspace.id}/users/${owner}`, { role: 'admin' })
    expect(updated.status, updated.text).toBe(200)
    expect((await call('GET', `/v1/admin/workspaces/${workspace.id}/users/${owner}`)).body.role).toBe('admin')
    const embedded = await call('GET', `/v1/admin/workspaces/${workspace.id}`)
    expect(embedded.body.users.map((user: Json) => user.id)).toEqual([owner])

    expect((await call('DELETE', `/v1/admin/workspaces/${workspace.id}/users/${owner}`)).status).toBe(200)
    expectAdminError(await call('GET', `/v1/admin/workspaces/${workspace.id}/users/${owner}`), 404, 'AB08')
  })

  it('refuses a user who is not in the organisation with 404', async () => {
    const workspace = await createWorkspace('Strangers')
    expectAdminError(await call('POST', `/v1/admin/workspaces/${workspace.id}/users`, { users: [{ id: '00000000-0000-4000-8000-000000000000', role: 'member' }] }), 404, 'AB08')
  })
})

describe('API keys', () => {
  let workspace: Json

  beforeAll(async () => {
    workspace = await createWorkspace('Keys')
  })

  it('lists keys with masked secrets, reads one, and filters by workspace', async () => {
    const created = await createKey('workspace/service', { workspace_id: workspace.id, scopes: ['completions.write'], description: 'svc' })
    expect(created.status, created.text).toBe(200)
    const list = await call('GET', `/v1/api-keys?workspace_id=${workspace.id}`)
    expect(list.status, list.text).toBe(200)
    expect(list.body.object).toBe('list')
    const listed = (list.body.data as Json[]).find((key) => key.id === created.body.id)
    expect(listed).toMatchObject({ object: 'api-key', type: 'workspace-service', workspace_id: workspace.id, status: 'active', description: 'svc' })
    expect(listed?.key).toMatch(/^gw\*{8}.{3}$/)
    expect(list.text).not.toContain(created.body.key)
    const one = await call('GET', `/v1/api-keys/${created.body.id}`)
    expect(one.body).toMatchObject({ id: created.body.id, key: listed?.key, scopes: ['completions.write'] })
    expect(one.text).not.toContain(created.body.key)
  })

  it('updates scopes and limits; the new scopes apply at once', async () => {
    const created = await createKey('workspace/service', { workspace_id: workspace.id, scopes: ['completions.write'] })
    expect(await chat(created.body.key)).toBe(200)
    const updated = await call('PUT', `/v1/api-keys/${created.body.id}`, { scopes: ['workspaces.read'], rate_limits: [{ type: 'requests', unit: 'rps', value: 5 }] })
    expect(updated.status, updated.text).toBe(200)
    expect(updated.body).toMatchObject({ scopes: ['workspaces.read'], rate_limits: [{ type: 'requests', unit: 'rps', value: 5 }] })
    expect(await chat(created.body.key)).toBe(403)
    expectAdminError(await call('PUT', `/v1/api-keys/${created.body.id}`, { type: 'organisation-service' }), 400, 'AB01')
  })

  it('deletes a key: it stops working on the next request', async () => {
    const created = await createKey('workspace/service', { workspace_id: workspace.id, scopes: ['completions.write'] })
    expect(await chat(created.body.key)).toBe(200)
    const deleted = await call('DELETE', `/v1/api-keys/${created.body.id}`)
    expect(deleted.status, deleted.text).toBe(200)
    expect(deleted.body).toEqual({})
    expect(await chat(created.body.key)).toBe(401)
    expectAdminError(await call('GET', `/v1/api-keys/${created.body.id}`), 404, 'AB08')
  })

  it('rotates: same id, new secret works, old secret works during the transition, second rotation refused meanwhile', async () => {
    const created = await createKey('workspace/service', { workspace_id: workspace.id, scopes: ['completions.write'] })
    expect(await chat(created.body.key)).toBe(200)
    const rotated = await call('POST', `/v1/api-keys/${created.body.id}/rotate`, {})
    expect(rotated.status, rotated.text).toBe(200)
    expect(rotated.body.id).toBe(created.body.id)
    expect(rotated.body.key).toMatch(/^gw-/)
    expect(rotated.body.key).not.toBe(created.body.key)
    const transition = Date.parse(rotated.body.key_transition_expires_at) - Date.now()
    expect(transition).toBeGreaterThan(29 * 60_000)
    expect(transition).toBeLessThanOrEqual(30 * 60_000)
    expect(await chat(rotated.body.key)).toBe(200)
    expect(await chat(created.body.key)).toBe(200)
    expectAdminError(await call('POST', `/v1/api-keys/${created.body.id}/rotate`), 409, 'AB07')
    expectAdminError(await call('POST', `/v1/api-keys/${created.body.id}/rotate`, { key_transition_period_ms: 1000 }), 400, 'AB01')
    const read = await call('GET', `/v1/api-keys/${created.body.id}`)
    expect(read.body.key_transition_expires_at).toBe(rotated.body.key_transition_expires_at)
    // Deleting revokes both secrets.
    expect((await call('DELETE', `/v1/api-keys/${created.body.id}`)).status).toBe(200)
    expect(await chat(rotated.body.key)).toBe(401)
    expect(await chat(created.body.key)).toBe(401)
  })

  it('hides keys of other workspaces from a workspace key (404) and lists only its own', async () => {
    const manager = await createKey('workspace/service', {
      workspace_id: workspace.id,
      scopes: ['workspace_service_api_keys.list', 'workspace_service_api_keys.read', 'workspace_service_api_keys.delete'],
    })
    const other = await createWorkspace('Elsewhere')
    const foreign = await createKey('workspace/service', { workspace_id: other.id, scopes: ['completions.write'] })
    expectAdminError(await call('GET', `/v1/api-keys/${foreign.body.id}`, undefined, manager.body.key), 404, 'AB08')
    expectAdminError(await call('DELETE', `/v1/api-keys/${foreign.body.id}`, undefined, manager.body.key), 404, 'AB08')
    expectAdminError(await call('GET', `/v1/api-keys?workspace_id=${other.id}`, undefined, manager.body.key), 404, 'AB08')
    const own = await call('GET', '/v1/api-keys', undefined, manager.body.key)
    expect(own.status, own.text).toBe(200)
    expect((own.body.data as Json[]).every((key) => key.workspace_id === workspace.id)).toBe(true)
    expect(await chat(foreign.body.key)).toBe(200)
  })

  it('needs the scope of the key type acted on', async () => {
    const serviceOnly = await createKey('workspace/service', { workspace_id: workspace.id, scopes: ['workspace_service_api_keys.read', 'workspace_user_api_keys.list'] })
    const target = await createKey('workspace/service', { workspace_id: workspace.id, scopes: ['completions.write'] })
    expect((await call('GET', `/v1/api-keys/${target.body.id}`, undefined, serviceOnly.body.key)).status).toBe(200)
    // Listing with only the user-key list scope shows no service keys.
    const list = await call('GET', '/v1/api-keys', undefined, serviceOnly.body.key)
    expect((list.body.data as Json[]).filter((key) => key.type === 'workspace-service')).toEqual([])
    expectAdminError(await call('DELETE', `/v1/api-keys/${target.body.id}`, undefined, serviceOnly.body.key), 403, 'AB03')
  })

  it('never lets a key grant a scope it does not hold', async () => {
    const creator = await createKey('workspace/service', { workspace_id: workspace.id, scopes: ['workspace_service_api_keys.create', 'completions.write'] })
    expect((await createKey('workspace/service', { scopes: ['completions.write'] }, creator.body.key)).status).toBe(200)
    const message = expectAdminError(await createKey('workspace/service', { scopes: ['completions.write', 'virtual_keys.delete'] }, creator.body.key), 403, 'AB03')
    expect(message).toContain('virtual_keys.delete')
    const editor = await createKey('workspace/service', { workspace_id: workspace.id, scopes: ['workspace_service_api_keys.update'] })
    expectAdminError(await call('PUT', `/v1/api-keys/${editor.body.id}`, { scopes: ['workspace_service_api_keys.update', 'completions.write'] }, editor.body.key), 403, 'AB03')
  })

  it('lets a user key act with its user role: the owner is admin of every workspace', async () => {
    const owner = await ownerId()
    const team = await createWorkspace('Roles')
    // The owner is admin of every workspace, so a user key of the owner may create keys.
    const ownerKey = await createKey('workspace/user', { workspace_id: team.id, user_id: owner, scopes: ['workspace_service_api_keys.create', 'completions.write'] })
    expect(ownerKey.status, ownerKey.text).toBe(200)
    expect(ownerKey.body.key).toMatch(/^gw-/)
    expect((await createKey('workspace/service', { scopes: ['completions.write'] }, ownerKey.body.key)).status).toBe(200)
  })
})

describe('roles of user keys', () => {
  it('a member user key cannot create keys or change members; promoted to manager it can', async () => {
    const team = await createWorkspace('Member rights')
    const invite = await call('POST', '/v1/admin/users/invites', {
      email: `member-${Date.now()}@example.test`,
      role: 'member',
      workspaces: [{ id: team.id, role: 'member' }],
      workspace_api_key_details: { scopes: ['workspace_service_api_keys.create', 'workspace_users.update', 'completions.write'] },
    })
    expect(invite.status, invite.text).toBe(200)
    const token = String(invite.body.invite_link).split('/').pop()
    const accepted = await call('POST', `/v1/invites/${token}`, { first_name: 'Mia', last_name: 'Member', password: 'correct horse battery' }, null)
    expect(accepted.status, accepted.text).toBe(201)
    const userId = accepted.body.user.id as string
    const userKey = accepted.body.api_keys[0].key as string
    expect(await chat(userKey)).toBe(200)

    expectAdminError(await createKey('workspace/service', { scopes: ['completions.write'] }, userKey), 403, 'AB03')
    expectAdminError(await call('PUT', `/v1/admin/workspaces/${team.id}/users/${userId}`, { role: 'manager' }, userKey), 403, 'AB03')

    expect((await call('PUT', `/v1/admin/workspaces/${team.id}/users/${userId}`, { role: 'manager' })).status).toBe(200)
    expect((await createKey('workspace/service', { scopes: ['completions.write'] }, userKey)).status).toBe(200)
    // A manager still cannot make itself admin.
    expectAdminError(await call('PUT', `/v1/admin/workspaces/${team.id}/users/${userId}`, { role: 'admin' }, userKey), 403, 'AB03')

    // Removing the membership revokes the user's key in that workspace.
    expect((await call('DELETE', `/v1/admin/workspaces/${team.id}/users/${userId}`)).status).toBe(200)
    expect(await chat(userKey)).toBe(401)
  })
})

describe('organisation JWT settings', () => {
  const publicKey = { kty: 'RSA', kid: 'k1', n: 'sXch', e: 'AQAB', alg: 'RS256', use: 'sig' }

  it('stores a static JWKS, shows it, and removes it', async () => {
    const put = await call('PUT', '/v1/admin/organisation/jwt', { jwks: { keys: [publicKey] } })
    expect(put.status, put.text).toBe(200)
    expect(put.body).toMatchObject({ object: 'jwt-settings', jwks_url: null, jwks: { keys: [publicKey] } })
    expect((await call('GET', '/v1/admin/organisation/jwt')).body.jwks).toEqual({ keys: [publicKey] })
    expect((await call('GET', '/v1/admin/organisation')).body.jwt_configured).toBe(true)
    expect((await call('DELETE', '/v1/admin/organisation/jwt')).status).toBe(200)
    expect((await call('GET', '/v1/admin/organisation/jwt')).body.jwks).toBeNull()
  })

  it('accepts a JWKS URL on an allowed host and refuses metadata addresses', async () => {
    const put = await call('PUT', '/v1/admin/organisation/jwt', { jwks_url: `${mock.url}/.well-known/jwks.json` })
    expect(put.status, put.text).toBe(200)
    expect(put.body.jwks_url).toBe(`${mock.url}/.well-known/jwks.json`)
    expectAdminError(await call('PUT', '/v1/admin/organisation/jwt', { jwks_url: 'http://169.254.169.254/keys' }), 400, 'AB01')
    expect((await call('DELETE', '/v1/admin/organisation/jwt')).status).toBe(200)
  })

  it('refuses private keys, non-RSA keys, keys without kid, and both or neither source', async () => {
    expect(expectAdminError(await call('PUT', '/v1/admin/organisation/jwt', { jwks: { keys: [{ ...publicKey, d: 'secret' }] } }), 400, 'AB01')).toContain('public key')
    expectAdminError(await call('PUT', '/v1/admin/organisation/jwt', { jwks: { keys: [{ ...publicKey, kty: 'oct' }] } }), 400, 'AB01')
    expectAdminError(await call('PUT', '/v1/admin/organisation/jwt', { jwks: { keys: [{ kty: 'RSA', n: 'x', e: 'AQAB' }] } }), 400, 'AB01')
    expectAdminError(await call('PUT', '/v1/admin/organisation/jwt', {}), 400, 'AB01')
    expectAdminError(await call('PUT', '/v1/admin/organisation/jwt', { jwks_url: `${mock.url}/k`, jwks: { keys: [publicKey] } }), 400, 'AB01')
  })

  it('is admin-key only', async () => {
    const made = await gw.workspaceKey(['workspaces.read'])
    expectAdminError(await call('GET', '/v1/admin/organisation/jwt', undefined, made.key), 403, 'AB03')
  })
})
