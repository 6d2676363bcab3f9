/**
 * The role and isolation matrix of the Admin API (API.md §1): the same operations called by an
 * Admin API key, a workspace service key, and user keys of the owner, an organisation admin, a
 * workspace manager and a workspace member. Every workspace key holds the same broad scopes, so a
 * refusal here comes from the role rules, not from a missing scope. Then every workspace key tries
 * another workspace's resources and must get 404 (or the admin-only 403), never the resource.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { callAs, inviteUser, type Answer, type Json } from '../helpers/admin-calls.js'
import { startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'

const BROAD_SCOPES = [
  'workspaces.read',
  'workspaces.update',
  'workspaces.list',
  'workspace_users.create',
  'workspace_users.read',
  'workspace_users.update',
  'workspace_users.delete',
  'workspace_users.list',
  'workspace_service_api_keys.create',
  'workspace_service_api_keys.read',
  'workspace_service_api_keys.update',
  'workspace_service_api_keys.delete',
  'workspace_service_api_keys.list',
  'workspace_service_api_keys.rotate',
  'workspace_user_api_keys.list',
  'completions.write',
]

const CALLERS = ['admin', 'service', 'owner', 'orgAdmin', 'manager', 'member'] as const
type Caller = (typeof CALLERS)[number]

let gw: TestGateway
const keys = {} as Record<Caller, string>
let workspace: string
let otherWorkspace: string
let memberUserId: string
let otherKeyId: string

function call(method: string, path: string, key: string, body?: unknown): Promise<Answer> {
  return callAs(gw.url, key, method, path, body)
}

async function admin(method: string, path: string, body?: unknown): Promise<Json> {
  const answer = await call(method, path, TEST_ADMIN_KEY, body)
  expect(answer.status, `${method} ${path}: ${answer.text}`).toBeLessThan(300)
  return answer.body
}

/** A user with an organisation role and a role in `workspace`, and their user key with the broad scopes. */
async function invitedWithKey(role: 'admin' | 'member', workspaceRole: 'admin' | 'manager' | 'member'): Promise<{ id: string; key: string }> {
  const user = await inviteUser(gw.url, role, { id: workspace, role: workspaceRole }, BROAD_SCOPES)
  return { id: user.id, key: String(user.key) }
}

/** Asserts each caller's status for one operation; `workspace_id` is added to the body for the admin key. */
async function expectStatuses(expected: Record<Caller, number>, operation: (caller: Caller, key: string) => Promise<{ status: number; text: string }>): Promise<void> {
  const actual = {} as Record<Caller, number>
  for (const caller of CALLERS) actual[caller] = (await operation(caller, keys[caller])).status
  expect(actual).toEqual(expected)
}

beforeAll(async () => {
  gw = await startTestGateway()
  keys.admin = TEST_ADMIN_KEY
  workspace = (await admin('POST', '/v1/admin/workspaces', { name: 'Matrix' })).id
  otherWorkspace = (await admin('POST', '/v1/admin/workspaces', { name: 'Elsewhere' })).id
  otherKeyId = (await admin('POST', '/v1/api-keys/workspace/service', { name: 'theirs', workspace_id: otherWorkspace, scopes: ['completions.write'] })).id
  keys.service = (await admin('POST', '/v1/api-keys/workspace/service', { name: 'svc', workspace_id: workspace, scopes: BROAD_SCOPES })).key
  const users = await admin('GET', '/v1/admin/users')
  const owner = (users.data as Json[]).find((user) => user.role === 'owner')
  keys.owner = (await admin('POST', '/v1/api-keys/workspace/user', { name: 'owner', workspace_id: workspace, user_id: owner?.id, scopes: BROAD_SCOPES })).key
  keys.orgAdmin = (await invitedWithKey('admin', 'member')).key
  keys.manager = (await invitedWithKey('member', 'manager')).key
  const member = await invitedWithKey('member', 'member')
  keys.member = member.key
  memberUserId = member.id
})

afterAll(async () => {
  await gw?.close()
})

describe('role matrix inside one workspace', () => {
  it('reads: everyone with the scope', async () => {
    await expectStatuses({ admin: 200, service: 200, owner: 200, orgAdmin: 200, manager: 200, member: 200 }, (_caller, key) => call('GET', `/v1/admin/workspaces/${workspace}`, key))
    await expectStatuses({ admin: 200, service: 200, owner: 200, orgAdmin: 200, manager: 200, member: 200 }, (_caller, key) => call('GET', `/v1/admin/workspaces/${workspace}/users`, key))
  })

  it('updating the workspace: admins and managers, not members', async () => {
    await expectStatuses({ admin: 200, service: 200, owner: 200, orgAdmin: 200, manager: 200, member: 403 }, (_caller, key) =>
      call('PUT', `/v1/admin/workspaces/${workspace}`, key, { description: 'edited' }),
    )
  })

  it('creating workspace keys: admins and managers, not members', async () => {
    await expectStatuses({ admin: 200, service: 200, owner: 200, orgAdmin: 200, manager: 200, member: 403 }, (caller, key) =>
      call('POST', '/v1/api-keys/workspace/service', key, { name: 'made', scopes: ['completions.write'], ...(caller === 'admin' ? { workspace_id: workspace } : {}) }),
    )
  })

  it('changing a member role: admins and managers; granting admin: workspace admins only', async () => {
    await expectStatuses({ admin: 200, service: 200, owner: 200, orgAdmin: 200, manager: 200, member: 403 }, (_caller, key) =>
      call('PUT', `/v1/admin/workspaces/${workspace}/users/${memberUserId}`, key, { role: 'member' }),
    )
    const grantAndReset = async (key: string) => {
      const granted = await call('PUT', `/v1/admin/workspaces/${workspace}/users/${memberUserId}`, key, { role: 'admin' })
      if (granted.status === 200) await call('PUT', `/v1/admin/workspaces/${workspace}/users/${memberUserId}`, TEST_ADMIN_KEY, { role: 'member' })
      return granted
    }
    await expectStatuses({ admin: 200, service: 403, owner: 200, orgAdmin: 200, manager: 403, member: 403 }, (_caller, key) => grantAndReset(key))
  })

  it('organisation-level operations: the Admin API key only', async () => {
    const adminOnly = { admin: 200, service: 403, owner: 403, orgAdmin: 403, manager: 403, member: 403 }
    await expectStatuses(adminOnly, (_caller, key) => call('GET', '/v1/admin/users', key))
    await expectStatuses(adminOnly, (_caller, key) => call('GET', '/v1/audit-logs', key))
    await expectStatuses(adminOnly, (_caller, key) => call('GET', '/v1/admin/users/invites', key))
    await expectStatuses(adminOnly, (_caller, key) => call('POST', '/v1/admin/workspaces', key, { name: 'Another' }))
    await expectStatuses({ ...adminOnly, admin: 409 }, (_caller, key) =>
      // The admin key reaches the delete and is refused for the workspace's keys; the others never get that far.
      call('DELETE', `/v1/admin/workspaces/${workspace}`, key),
    )
  })
})

describe('isolation: another workspace is never revealed', () => {
  const workspaceCallers = CALLERS.filter((caller) => caller !== 'admin')

  it.each<[string, () => string, unknown]>([
    ['GET', () => `/v1/admin/workspaces/${otherWorkspace}`, undefined],
    ['PUT', () => `/v1/admin/workspaces/${otherWorkspace}`, { description: 'x' }],
    ['GET', () => `/v1/admin/workspaces/${otherWorkspace}/users`, undefined],
    ['POST', () => `/v1/admin/workspaces/${otherWorkspace}/users`, () => ({ users: [{ id: memberUserId, role: 'member' }] })],
    ['PUT', () => `/v1/admin/workspaces/${otherWorkspace}/users/${memberUserId}`, { role: 'member' }],
    ['DELETE', () => `/v1/admin/workspaces/${otherWorkspace}/users/${memberUserId}`, undefined],
    ['GET', () => `/v1/api-keys/${otherKeyId}`, undefined],
    ['PUT', () => `/v1/api-keys/${otherKeyId}`, { name: 'stolen' }],
    ['DELETE', () => `/v1/api-keys/${otherKeyId}`, undefined],
    ['POST', () => `/v1/api-keys/${otherKeyId}/rotate`, {}],
    ['GET', () => `/v1/api-keys?workspace_id=${otherWorkspace}`, undefined],
    ['POST', () => '/v1/api-keys/workspace/service', () => ({ name: 'x', workspace_id: otherWorkspace, scopes: ['completions.write'] })],
  ])('%s %s → 404 for every workspace key', async (method, path, body) => {
    for (const caller of workspaceCallers) {
      // Paths and bodies are built lazily: the ids exist only once beforeAll ran.
      const answer = await call(method, path(), keys[caller], typeof body === 'function' ? body() : body)
      expect(answer.status, `${caller}: ${answer.text}`).toBe(404)
      expect(answer.body).toEqual({ success: false, data: { message: expect.any(String), errorCode: 'AB08' } })
      expect(answer.text).not.toContain('Elsewhere')
    }
  })

  it('the other workspace and its key are untouched', async () => {
    const read = await admin('GET', `/v1/admin/workspaces/${otherWorkspace}`)
    expect(read.description).toBeNull()
    const key = await admin('GET', `/v1/api-keys/${otherKeyId}`)
    expect(key.name).toBe('theirs')
    expect(key.last_rotated_at).toBeNull()
  })

  it('lists show only the caller’s own workspace and keys', async () => {
    for (const caller of workspaceCallers) {
      const workspaces = await call('GET', '/v1/admin/workspaces', keys[caller])
      expect(workspaces.body.data.map((entry: Json) => entry.id), caller).toEqual([workspace])
      const listed = await call('GET', '/v1/api-keys', keys[caller])
      expect(listed.status, listed.text).toBe(200)
      expect((listed.body.data as Json[]).every((entry) => entry.workspace_id === workspace), caller).toBe(true)
    }
  })
})
