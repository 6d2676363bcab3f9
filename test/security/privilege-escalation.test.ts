/**
 * No privilege gained through another key or user (API.md §1), tried as an attacker would against
 * the real gateway: a caller may create, update, rotate or delete an API key only when its own
 * rights cover every scope of that key and, for a user key, that user's rank is no higher than its
 * own; the same for roles granted to members and for the keys an invite hands out. Refusals are
 * 403 AB03, nothing changes, no secret comes back, and the audit log names the key that acted.
 *
 * Ranks in a workspace, highest first: organisation owner (and every Admin API key), organisation
 * admin, workspace admin, workspace manager (also every workspace service key), workspace member.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { callAs, inviteUser, type Answer, type Json } from '../helpers/admin-calls.js'
import { startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'

/** What every user key and service key of the role matrix holds, so refusals there come from roles. */
const BROAD_SCOPES = [
  'workspaces.read',
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
  'workspace_user_api_keys.create',
  'workspace_user_api_keys.read',
  'workspace_user_api_keys.update',
  'workspace_user_api_keys.delete',
  'workspace_user_api_keys.list',
  'workspace_user_api_keys.rotate',
  'completions.write',
]

/** Users whose keys are targets, by rank, highest first. */
const TARGETS = ['owner', 'orgAdmin', 'wsAdmin', 'manager', 'member'] as const
type Target = (typeof TARGETS)[number]
/** Callers: the Admin API key, a workspace service key and each user's own key. */
const CALLERS = ['adminKey', 'service', ...TARGETS] as const
type Caller = (typeof CALLERS)[number]

const RANK: Record<Caller, number> = { adminKey: 5, owner: 5, orgAdmin: 4, wsAdmin: 3, manager: 2, service: 2, member: 1 }

let gw: TestGateway
let workspace: string
const userIds = {} as Record<Target, string>
const callerKeys = {} as Record<Caller, { key: string; id: string }>

function call(method: string, path: string, key: string, body?: unknown): Promise<Answer> {
  return callAs(gw.url, key, method, path, body)
}

async function admin(method: string, path: string, body?: unknown): Promise<Json> {
  const answer = await call(method, path, TEST_ADMIN_KEY, body)
  expect(answer.status, `${method} ${path}: ${answer.text}`).toBeLessThan(300)
  return answer.body
}

/** A key made by the Admin API key: `{ key, id }`. */
async function adminMadeKey(kind: 'organisation/service' | 'workspace/service' | 'workspace/user', scopes: readonly string[], userId?: string): Promise<{ key: string; id: string }> {
  const body: Json = { name: `made-${kind}`, scopes }
  if (kind !== 'organisation/service') body.workspace_id = workspace
  if (userId !== undefined) body.user_id = userId
  const made = await admin('POST', `/v1/api-keys/${kind}`, body)
  return { key: made.key, id: made.id }
}

/** A user with an organisation role and a role in the workspace; returns the user id. */
async function invitedUser(role: 'admin' | 'member', workspaceRole: 'admin' | 'manager' | 'member'): Promise<string> {
  return (await inviteUser(gw.url, role, { id: workspace, role: workspaceRole })).id
}

/** The body that creates a key in the matrix's workspace, as `caller` must send it. */
function inWorkspace(caller: Caller, body: Json): Json {
  return caller === 'adminKey' ? { ...body, workspace_id: workspace } : body
}

function expectRefused(answer: Answer, label: string): void {
  expect(answer.status, `${label}: ${answer.text}`).toBe(403)
  expect(answer.body).toEqual({ success: false, data: { message: expect.any(String), errorCode: 'AB03' } })
  expect(answer.text).not.toMatch(/gw-[A-Za-z0-9_-]{20,}/)
}

async function auditEntries(query: string): Promise<Json[]> {
  return (await admin('GET', `/v1/audit-logs?${query}`)).data as Json[]
}

/** Refusals are audited after the reply (the audit plugin's onLog): waits for the entry whose body names `marker`. */
async function auditEntryNaming(query: string, marker: string): Promise<Json | undefined> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const entry = (await auditEntries(query)).find((candidate) => String(candidate.request_body).includes(marker))
    if (entry !== undefined) return entry
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return undefined
}

beforeAll(async () => {
  gw = await startTestGateway()
  workspace = (await admin('POST', '/v1/admin/workspaces', { name: 'Escalation' })).id
  const users = await admin('GET', '/v1/admin/users')
  userIds.owner = (users.data as Json[]).find((user) => user.role === 'owner')?.id
  userIds.orgAdmin = await invitedUser('admin', 'member')
  userIds.wsAdmin = await invitedUser('member', 'admin')
  userIds.manager = await invitedUser('member', 'manager')
  userIds.member = await invitedUser('member', 'member')
  callerKeys.adminKey = { key: TEST_ADMIN_KEY, id: '' }
  callerKeys.service = await adminMadeKey('workspace/service', BROAD_SCOPES)
  for (const target of TARGETS) callerKeys[target] = await adminMadeKey('workspace/user', BROAD_SCOPES, userIds[target])
})

afterAll(async () => {
  await gw?.close()
})

describe('user keys: nobody acts as a user of a higher rank', () => {
  /** Allowed when the caller can manage keys at all (manager or above) and the target's rank is no higher. */
  function allowed(caller: Caller, target: Target): boolean {
    return RANK[caller] >= RANK.manager && RANK[caller] >= RANK[target]
  }

  it('minting a key for a user: only for users of the caller’s rank or below', async () => {
    for (const caller of CALLERS) {
      for (const target of TARGETS) {
        const answer = await call('POST', '/v1/api-keys/workspace/user', callerKeys[caller].key, inWorkspace(caller, { name: 'minted', user_id: userIds[target], scopes: ['completions.write'] }))
        const label = `${caller} mints for ${target}`
        if (allowed(caller, target)) expect(answer.status, `${label}: ${answer.text}`).toBe(200)
        else expectRefused(answer, label)
      }
    }
  })

  it.each(['update', 'rotate', 'delete'] as const)('%s of a user key: only of users of the caller’s rank or below, and nothing changes when refused', async (operation) => {
    for (const caller of CALLERS) {
      for (const target of TARGETS) {
        const victim = await adminMadeKey('workspace/user', ['completions.write'], userIds[target])
        const label = `${caller} ${operation}s ${target}'s key`
        const answer =
          operation === 'update'
            ? await call('PUT', `/v1/api-keys/${victim.id}`, callerKeys[caller].key, { name: 'taken over' })
            : operation === 'rotate'
              ? await call('POST', `/v1/api-keys/${victim.id}/rotate`, callerKeys[caller].key, {})
              : await call('DELETE', `/v1/api-keys/${victim.id}`, callerKeys[caller].key)
        if (allowed(caller, target)) {
          expect(answer.status, `${label}: ${answer.text}`).toBe(200)
          continue
        }
        expectRefused(answer, label)
        const after = await admin('GET', `/v1/api-keys/${victim.id}`)
        expect(after.name, label).toBe('made-workspace/user')
        expect(after.last_rotated_at, label).toBeNull()
      }
    }
  })

  it('the reported escalation: a manager cannot rotate a workspace admin’s key, so cannot promote itself with it', async () => {
    const adminsKey = await adminMadeKey('workspace/user', BROAD_SCOPES, userIds.wsAdmin)
    expectRefused(await call('POST', `/v1/api-keys/${adminsKey.id}/rotate`, callerKeys.manager.key, {}), 'rotate')
    expectRefused(await call('PUT', `/v1/admin/workspaces/${workspace}/users/${userIds.manager}`, callerKeys.manager.key, { role: 'admin' }), 'self-promotion')
    // The admin's secret still works and the manager is still a manager.
    expect((await call('GET', `/v1/admin/workspaces/${workspace}`, adminsKey.key)).status).toBe(200)
    expect((await admin('GET', `/v1/admin/workspaces/${workspace}/users/${userIds.manager}`)).role).toBe('manager')
  })

  it('the reported escalation: a manager cannot mint a key for the owner, and the audit log names the key that tried', async () => {
    const answer = await call('POST', '/v1/api-keys/workspace/user', callerKeys.manager.key, { name: 'be the owner', user_id: userIds.owner, scopes: ['completions.write'] })
    expectRefused(answer, 'mint for owner')
    const entry = await auditEntryNaming(`api_key_id=${callerKeys.manager.id}&response_status_code=403&resource_type=api_key`, 'be the owner')
    expect(entry).toMatchObject({ user_id: userIds.manager, user_type: 'user', api_key_id: callerKeys.manager.id, action: 'create' })
  })

  it('an allowed action in a user’s name names both the user and the key it came through', async () => {
    const made = await call('POST', '/v1/api-keys/workspace/user', callerKeys.manager.key, { name: 'own', user_id: userIds.manager, scopes: ['completions.write'] })
    expect(made.status, made.text).toBe(200)
    const entries = await auditEntries(`api_key_id=${callerKeys.manager.id}&response_status_code=200&resource_type=api_key`)
    const entry = entries.find((candidate) => candidate.resource_id === made.body.id)
    expect(entry).toMatchObject({ user_id: userIds.manager, user_type: 'user', api_key_id: callerKeys.manager.id, action: 'create' })
    const service = await call('POST', '/v1/api-keys/workspace/service', callerKeys.service.key, { name: 'svc', scopes: ['completions.write'] })
    const [serviceEntry] = (await auditEntries(`api_key_id=${callerKeys.service.id}`)).filter((candidate) => candidate.resource_id === service.body.id)
    expect(serviceEntry).toMatchObject({ user_id: callerKeys.service.id, user_type: 'api_key', api_key_id: callerKeys.service.id })
  })
})

describe('scopes: nobody acts on a key holding scopes beyond its own', () => {
  const NARROW = ['workspace_service_api_keys.create', 'workspace_service_api_keys.read', 'workspace_service_api_keys.update', 'workspace_service_api_keys.list']

  it('the reported escalation: a narrow workspace key cannot rotate, update or delete a broader key of its workspace', async () => {
    const narrow = await adminMadeKey('workspace/service', [...NARROW, 'workspace_service_api_keys.rotate', 'workspace_service_api_keys.delete'])
    const broad = await adminMadeKey('workspace/service', [...BROAD_SCOPES, 'virtual_keys.create', 'virtual_keys.update'])
    expectRefused(await call('POST', `/v1/api-keys/${broad.id}/rotate`, narrow.key, {}), 'rotate')
    expectRefused(await call('PUT', `/v1/api-keys/${broad.id}`, narrow.key, { name: 'mine now' }), 'update')
    expectRefused(await call('DELETE', `/v1/api-keys/${broad.id}`, narrow.key), 'delete')
    // The broad key's secret still works: it was not rotated.
    expect((await call('GET', `/v1/admin/workspaces/${workspace}`, broad.key)).status).toBe(200)
    // A key within the narrow key's own scopes it may still manage.
    const smaller = await adminMadeKey('workspace/service', ['workspace_service_api_keys.read'])
    expect((await call('POST', `/v1/api-keys/${smaller.id}/rotate`, narrow.key, {})).status).toBe(200)
    expect((await call('PUT', `/v1/api-keys/${smaller.id}`, narrow.key, { name: 'renamed' })).status).toBe(200)
    // Nor may it widen a key it manages beyond its own scopes.
    expectRefused(await call('PUT', `/v1/api-keys/${smaller.id}`, narrow.key, { scopes: ['virtual_keys.update'] }), 'widen')
  })

  it('the reported escalation: an Admin API key with only organisation_service_api_keys.update cannot rotate a full Admin API key', async () => {
    const full = await adminMadeKey('organisation/service', ['organisation_users.list', 'organisation_service_api_keys.read', 'workspaces.list'])
    const limited = await adminMadeKey('organisation/service', ['organisation_service_api_keys.update', 'organisation_service_api_keys.rotate', 'organisation_service_api_keys.delete'])
    expectRefused(await call('POST', `/v1/api-keys/${full.id}/rotate`, limited.key, {}), 'rotate')
    expectRefused(await call('PUT', `/v1/api-keys/${full.id}`, limited.key, { name: 'mine' }), 'update')
    expectRefused(await call('DELETE', `/v1/api-keys/${full.id}`, limited.key), 'delete')
    expect((await call('GET', '/v1/admin/users', full.key)).status).toBe(200)
    expect((await call('GET', '/v1/admin/users', limited.key)).status).toBe(403)
    // Its own rotation is fine: no scope beyond its own.
    const rotated = await call('POST', `/v1/api-keys/${limited.id}/rotate`, limited.key, {})
    expect(rotated.status, rotated.text).toBe(200)
  })

  it('an Admin API key grants workspace-only scopes it cannot hold, but not shared scopes it lacks', async () => {
    const limited = await adminMadeKey('organisation/service', ['workspace_service_api_keys.create'])
    const dataPlane = await call('POST', '/v1/api-keys/workspace/service', limited.key, { name: 'app', workspace_id: workspace, scopes: ['completions.write', 'logs.write'] })
    expect(dataPlane.status, dataPlane.text).toBe(200)
    expectRefused(await call('POST', '/v1/api-keys/workspace/service', limited.key, { name: 'vk', workspace_id: workspace, scopes: ['virtual_keys.update'] }), 'shared scope')
    expectRefused(await call('POST', '/v1/api-keys/organisation/service', limited.key, { name: 'org', scopes: ['organisation_users.list'] }), 'org scope')
  })

  it('operating on keys is matrixed by type: organisation and workspace callers, service and user targets', async () => {
    const orgCaller = await adminMadeKey('organisation/service', [
      'organisation_service_api_keys.update',
      'workspace_service_api_keys.update',
      'workspace_user_api_keys.update',
      'workspaces.read',
    ])
    const wsCaller = await adminMadeKey('workspace/service', ['workspace_service_api_keys.update', 'workspace_user_api_keys.update', 'workspaces.read', 'completions.write'])
    const targets = {
      orgWithin: await adminMadeKey('organisation/service', ['workspaces.read']),
      orgBeyond: await adminMadeKey('organisation/service', ['workspaces.read', 'organisation_users.list']),
      serviceWithin: await adminMadeKey('workspace/service', ['workspaces.read', 'completions.write']),
      serviceBeyond: await adminMadeKey('workspace/service', ['workspaces.read', 'virtual_keys.update']),
      userWithin: await adminMadeKey('workspace/user', ['completions.write'], userIds.member),
      userBeyond: await adminMadeKey('workspace/user', ['configs.update'], userIds.member),
    }
    const expected: Record<string, Record<keyof typeof targets, number>> = {
      // completions.write is workspace-only, so an Admin API key covers it; workspaces.read it holds.
      org: { orgWithin: 200, orgBeyond: 403, serviceWithin: 200, serviceBeyond: 403, userWithin: 200, userBeyond: 403 },
      // A workspace key never reaches organisation keys (404, not revealed).
      ws: { orgWithin: 404, orgBeyond: 404, serviceWithin: 200, serviceBeyond: 403, userWithin: 200, userBeyond: 403 },
    }
    const actual: Record<string, Record<string, number>> = { org: {}, ws: {} }
    for (const [name, target] of Object.entries(targets)) {
      actual.org![name] = (await call('PUT', `/v1/api-keys/${target.id}`, orgCaller.key, { name: 'x' })).status
      actual.ws![name] = (await call('PUT', `/v1/api-keys/${target.id}`, wsCaller.key, { name: 'x' })).status
    }
    expect(actual).toEqual(expected)
  })
})

describe('members: no role granted or taken above the caller’s own', () => {
  it('managers grant up to manager; workspace admins cannot change or remove an organisation admin’s membership', async () => {
    expectRefused(await call('PUT', `/v1/admin/workspaces/${workspace}/users/${userIds.member}`, callerKeys.manager.key, { role: 'admin' }), 'grant admin')
    expectRefused(await call('PUT', `/v1/admin/workspaces/${workspace}/users/${userIds.orgAdmin}`, callerKeys.wsAdmin.key, { role: 'member' }), 'change org admin')
    expectRefused(await call('DELETE', `/v1/admin/workspaces/${workspace}/users/${userIds.orgAdmin}`, callerKeys.wsAdmin.key), 'remove org admin')
    expectRefused(await call('DELETE', `/v1/admin/workspaces/${workspace}/users/${userIds.wsAdmin}`, callerKeys.manager.key), 'remove ws admin')
    // The organisation admin's key in the workspace survived (removing the membership would have revoked it).
    expect((await call('GET', `/v1/admin/workspaces/${workspace}`, callerKeys.orgAdmin.key)).status).toBe(200)
    // What stays allowed: a manager makes a member a manager, an organisation admin changes a workspace admin.
    expect((await call('PUT', `/v1/admin/workspaces/${workspace}/users/${userIds.member}`, callerKeys.manager.key, { role: 'manager' })).status).toBe(200)
    expect((await call('PUT', `/v1/admin/workspaces/${workspace}/users/${userIds.member}`, callerKeys.orgAdmin.key, { role: 'member' })).status).toBe(200)
  })
})

describe('invites: an invite hands out no scope its maker lacks', () => {
  it('an Admin API key that may only invite cannot invite a user whose keys hold shared scopes it lacks, nor resend such an invite', async () => {
    const inviter = await adminMadeKey('organisation/service', ['organisation_users.create'])
    const beyond = await call('POST', '/v1/admin/users/invites', inviter.key, {
      email: `x-${Math.random().toString(36).slice(2)}@example.test`,
      role: 'member',
      workspaces: [{ id: workspace, role: 'manager' }],
      workspace_api_key_details: { scopes: ['virtual_keys.update'] },
    })
    expectRefused(beyond, 'invite')
    const within = await call('POST', '/v1/admin/users/invites', inviter.key, {
      email: `y-${Math.random().toString(36).slice(2)}@example.test`,
      role: 'member',
      workspaces: [{ id: workspace, role: 'member' }],
      workspace_api_key_details: { scopes: ['completions.write'] },
    })
    expect(within.status, within.text).toBe(200)
    // An invite made by the full Admin API key: the weak key must not get a fresh link to it.
    const strong = await admin('POST', '/v1/admin/users/invites', {
      email: `z-${Math.random().toString(36).slice(2)}@example.test`,
      role: 'member',
      workspaces: [{ id: workspace, role: 'manager' }],
      workspace_api_key_details: { scopes: ['virtual_keys.update', 'completions.write'] },
    })
    const resent = await call('POST', `/v1/admin/users/invites/${strong.id}/resend`, inviter.key, {})
    // The route needs organisation_users.create, which the inviter holds: the refusal is the scope rule.
    expectRefused(resent, 'resend')
  })
})
