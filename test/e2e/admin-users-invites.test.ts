/**
 * Users and invitations, end to end (API.md §5 "users and invitations"): invite → the public link
 * → accept (user, memberships, workspace user keys that work on the data plane at once), cancel,
 * expiry, resend, concurrent accepts, role changes and removal (whose keys stop working at once),
 * admin-only access, and the control-plane error shape throughout.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashSecret } from '../../core/secrets.js'
import { Clock } from '../../core/service.js'
import { postChat, startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

interface Answer {
  readonly status: number
  readonly text: string
  readonly body: Json
}

const INVITE_TTL_MS = 3_600_000

/** Every response text seen, to check no token hash or key hash ever leaves the gateway. */
const responseTexts: string[] = []
/** Invite tokens and key secrets handed out, whose hashes must never appear in a response. */
const secrets = new Set<string>([TEST_ADMIN_KEY])

let gw: TestGateway
let mock: MockUpstream
let workspaceA: string
let workspaceB: string
/** Milliseconds added to the gateway's clock (expiry tests); 0 otherwise. */
let clockOffsetMs = 0

async function call(method: string, path: string, options: { body?: unknown; key?: string | null } = {}): Promise<Answer> {
  const headers: Record<string, string> = {}
  const key = options.key === undefined ? TEST_ADMIN_KEY : options.key
  if (key !== null) headers['x-gateway-api-key'] = key
  if (options.body !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(`${gw.url}${path}`, { method, headers, ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }) })
  const text = await response.text()
  responseTexts.push(text)
  let body: Json = {}
  try {
    body = text.length > 0 ? (JSON.parse(text) as Json) : {}
  } catch {
    body = { unparsable: text }
  }
  return { status: response.status, text, body }
}

const admin = (method: string, path: string, body?: unknown, key?: string | null): Promise<Answer> =>
  call(method, path, { ...(body === undefined ? {} : { body }), ...(key === undefined ? {} : { key }) })

/** Asserts the control-plane error envelope with `errorCode` and returns its message. */
function expectAdminError(answer: Answer, status: number, errorCode: string): string {
  expect(answer.status, answer.text).toBe(status)
  expect(answer.body).toEqual({ success: false, data: { message: expect.any(String), errorCode } })
  return answer.body.data.message as string
}

/** The token is the link's last path segment (the link's host is the configured public URL). */
function tokenOf(link: string): string {
  const token = new URL(link).pathname.split('/').pop() ?? ''
  secrets.add(token)
  return token
}

async function invite(body: Json): Promise<{ id: string; token: string }> {
  const created = await admin('POST', '/v1/admin/users/invites', body)
  expect(created.status, created.text).toBe(200)
  expect(created.body).toEqual({ id: expect.any(String), invite_link: expect.any(String), object: 'invite' })
  return { id: created.body.id, token: tokenOf(created.body.invite_link) }
}

const showLink = (token: string): Promise<Answer> => call('GET', `/v1/invites/${token}`, { key: null })

async function accept(token: string, body: Json = { first_name: 'Ada', last_name: 'Lovelace', password: 'correct horse battery' }): Promise<Answer> {
  const answer = await call('POST', `/v1/invites/${token}`, { body, key: null })
  for (const key of answer.body.api_keys ?? []) secrets.add(key.key)
  return answer
}

async function chat(key: string): Promise<Response> {
  return postChat(gw.url, key, mock.url)
}

async function createWorkspace(name: string): Promise<string> {
  const created = await admin('POST', '/v1/admin/workspaces', { name })
  expect(created.status, created.text).toBe(200)
  return created.body.id as string
}

let emailCounter = 0
function freshEmail(label: string): string {
  emailCounter += 1
  return `${label}-${emailCounter}@example.com`
}

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway({ overlay: { plugins: { 'admin-api': { config: { inviteTtlMs: INVITE_TTL_MS } } } } })
  // The admin plugin reads time only through the injected clock: shifting it makes invites expire
  // without waiting.
  const clock = gw.wiring.resolve(Clock)
  const realNow = clock.now.bind(clock)
  clock.now = () => realNow() + clockOffsetMs
  workspaceA = await createWorkspace('Invite team A')
  workspaceB = await createWorkspace('Invite team B')
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

describe('invite and accept', () => {
  const email = 'Alice.Invited@Example.com'
  let inviteId: string
  let token: string
  let accepted: Answer

  it('creates an invite with a link whose token is 32 random bytes', async () => {
    ;({ id: inviteId, token } = await invite({
      email,
      role: 'member',
      workspaces: [
        { id: workspaceA, role: 'member' },
        { id: workspaceB, role: 'manager' },
      ],
      workspace_api_key_details: { scopes: ['completions.write', 'gateway.logs.view'] },
    }))
    expect(Buffer.from(token, 'base64url')).toHaveLength(32)
  })

  it('lists the invite as pending, lower-cased, with workspace slugs and no secret', async () => {
    const listed = await admin('GET', `/v1/admin/users/invites?email=${encodeURIComponent(email)}`)
    expect(listed.status, listed.text).toBe(200)
    expect(listed.body.object).toBe('list')
    expect(listed.body.total).toBe(1)
    const [entry] = listed.body.data
    expect(entry).toMatchObject({
      object: 'invite',
      id: inviteId,
      email: 'alice.invited@example.com',
      role: 'member',
      status: 'pending',
      accepted_at: null,
      workspaces: [
        { workspace_id: workspaceA, role: 'member' },
        { workspace_id: workspaceB, role: 'manager' },
      ],
      workspace_api_key_details: { scopes: ['completions.write', 'logs.view'] },
    })
    expect(Date.parse(entry.expires_at) - Date.parse(entry.created_at)).toBe(INVITE_TTL_MS)
    expect(listed.text).not.toContain(token)
    expect(listed.text).not.toContain(hashSecret(token))
    const pending = await admin('GET', '/v1/admin/users/invites?status=pending&pageSize=1000')
    expect(pending.body.data.map((item: Json) => item.id)).toContain(inviteId)
    const read = await admin('GET', `/v1/admin/users/invites/${inviteId}`)
    expect(read.status, read.text).toBe(200)
    expect(read.body).toEqual(entry)
  })

  it('shows the invite on its link without authentication', async () => {
    const shown = await showLink(token)
    expect(shown.status, shown.text).toBe(200)
    expect(shown.body).toMatchObject({
      object: 'invite',
      email: 'alice.invited@example.com',
      role: 'member',
      status: 'pending',
      expires_at: expect.any(String),
      workspaces: [
        { workspace_id: workspaceA, role: 'member' },
        { workspace_id: workspaceB, role: 'manager' },
      ],
    })
    expect(shown.text).not.toContain(hashSecret(token))
  })

  it('accepts once: 201 with the user, their memberships and one workspace user key per workspace', async () => {
    accepted = await accept(token)
    expect(accepted.status, accepted.text).toBe(201)
    expect(accepted.body.user).toMatchObject({
      object: 'user',
      id: expect.any(String),
      email: 'alice.invited@example.com',
      first_name: 'Ada',
      last_name: 'Lovelace',
      role: 'member',
      workspace_ids: [workspaceA, workspaceB],
    })
    expect(accepted.text).not.toContain('correct horse battery')
    expect(accepted.body.user.password_hash).toBeUndefined()
    const keys = accepted.body.api_keys as Json[]
    expect(keys.map((key) => key.workspace_id)).toEqual([workspaceA, workspaceB])
    for (const key of keys) {
      expect(key).toEqual({ workspace_id: expect.any(String), id: expect.any(String), key: expect.stringMatching(/^gw-/) })
    }
  })

  it('gives keys that work on the data plane immediately', async () => {
    const response = await chat(accepted.body.api_keys[0].key)
    const text = await response.text()
    expect(response.status, text).toBe(200)
    expect(JSON.parse(text).choices[0].message.content).toBe(MOCK_REPLY)
  })

  it('stores each key as a workspace user key of the new user with the invited scopes', async () => {
    const [first] = accepted.body.api_keys
    const read = await admin('GET', `/v1/api-keys/${first.id}`)
    expect(read.status, read.text).toBe(200)
    expect(read.body).toMatchObject({
      type: 'workspace-user',
      user_id: accepted.body.user.id,
      workspace_id: workspaceA,
      scopes: ['completions.write', 'logs.view'],
      creation_mode: 'auto',
      name: 'Invite key for alice.invited@example.com',
    })
    expect(read.body.key).not.toBe(first.key)
  })

  it('refuses a second accept with 410', async () => {
    const again = await accept(token)
    expect(expectAdminError(again, 410, 'AB08')).toMatch(/already used/)
    const shown = await showLink(token)
    expect(shown.status, shown.text).toBe(200)
    expect(shown.body.status).toBe('accepted')
    expect(shown.body.accepted_at).toEqual(expect.any(String))
  })

  it('lists the new user with their workspaces and as a member of each workspace', async () => {
    const users = await admin('GET', `/v1/admin/users?email=${encodeURIComponent('alice.invited@example.com')}`)
    expect(users.status, users.text).toBe(200)
    expect(users.body).toMatchObject({ object: 'list', total: 1 })
    expect(users.body.data[0]).toMatchObject({ id: accepted.body.user.id, role: 'member', workspace_ids: [workspaceA, workspaceB] })
    const membersA = await admin('GET', `/v1/admin/workspaces/${workspaceA}/users`)
    expect(membersA.status, membersA.text).toBe(200)
    expect(membersA.body.data.find((member: Json) => member.id === accepted.body.user.id)).toMatchObject({ role: 'member', workspace_id: workspaceA })
    const membersB = await admin('GET', `/v1/admin/workspaces/${workspaceB}/users/${accepted.body.user.id}`)
    expect(membersB.status, membersB.text).toBe(200)
    expect(membersB.body.role).toBe('manager')
    const invites = await admin('GET', `/v1/admin/users/invites/${inviteId}`)
    expect(invites.body.status).toBe('accepted')
    const acceptedOnly = await admin('GET', '/v1/admin/users/invites?status=accepted&pageSize=1000')
    expect(acceptedOnly.body.data.map((item: Json) => item.id)).toContain(inviteId)
  })

  it('records the acceptance in the audit log, attributed to the new user', async () => {
    const entries = await admin('GET', `/v1/audit-logs?resource_type=invite&action=accept&response_status_code=201`)
    expect(entries.status, entries.text).toBe(200)
    const entry = entries.body.data.find((item: Json) => item.user_id === accepted.body.user.id)
    expect(entry).toMatchObject({ user_type: 'user', response_status_code: 201 })
    expect(JSON.stringify(entries.body)).not.toContain(token)
    expect(JSON.stringify(entries.body)).not.toContain('correct horse battery')
  })

  it('refuses to invite an existing user (409 AB07)', async () => {
    const answer = await admin('POST', '/v1/admin/users/invites', { email: 'ALICE.invited@example.com', role: 'admin', workspaces: [] })
    expect(expectAdminError(answer, 409, 'AB07')).toContain('alice.invited@example.com')
  })

  it('refuses a second pending invite for the same email (409 AB07)', async () => {
    const email = freshEmail('twice')
    await invite({ email, role: 'member', workspaces: [] })
    expectAdminError(await admin('POST', '/v1/admin/users/invites', { email, role: 'admin', workspaces: [] }), 409, 'AB07')
  })

  it('invites without workspaces or keys: the user joins the organisation only', async () => {
    const { token } = await invite({ email: freshEmail('plain'), role: 'admin' })
    const answer = await accept(token, { first_name: 'Grace', password: 'another long password' })
    expect(answer.status, answer.text).toBe(201)
    expect(answer.body.user).toMatchObject({ role: 'admin', first_name: 'Grace', last_name: '', workspace_ids: [] })
    expect(answer.body.api_keys).toEqual([])
  })

  it('creates memberships but no keys without workspace_api_key_details', async () => {
    const { token } = await invite({ email: freshEmail('nokeys'), role: 'member', workspaces: [{ id: workspaceA, role: 'member' }] })
    const answer = await accept(token)
    expect(answer.status, answer.text).toBe(201)
    expect(answer.body.user.workspace_ids).toEqual([workspaceA])
    expect(answer.body.api_keys).toEqual([])
  })

  it('skips a workspace deleted after the invite was sent', async () => {
    const doomed = await createWorkspace('Doomed team')
    const { token } = await invite({
      email: freshEmail('deleted-ws'),
      role: 'member',
      workspaces: [
        { id: doomed, role: 'member' },
        { id: workspaceA, role: 'member' },
      ],
      workspace_api_key_details: { scopes: ['completions.write'] },
    })
    const deleted = await admin('DELETE', `/v1/admin/workspaces/${doomed}`)
    expect(deleted.status, deleted.text).toBe(200)
    const answer = await accept(token)
    expect(answer.status, answer.text).toBe(201)
    expect(answer.body.user.workspace_ids).toEqual([workspaceA])
    expect(answer.body.api_keys.map((key: Json) => key.workspace_id)).toEqual([workspaceA])
  })
})

describe('cancel, expiry and resend', () => {
  it('cancels a pending invite: accept then answers 410, a second cancel 410', async () => {
    const { id, token } = await invite({ email: freshEmail('cancelled'), role: 'member', workspaces: [{ id: workspaceA, role: 'member' }] })
    const cancelled = await admin('DELETE', `/v1/admin/users/invites/${id}`)
    expect(cancelled.status, cancelled.text).toBe(200)
    expect(cancelled.body).toEqual({})
    expect((await admin('GET', `/v1/admin/users/invites/${id}`)).body.status).toBe('cancelled')
    expect((await showLink(token)).body.status).toBe('cancelled')
    expect(expectAdminError(await accept(token), 410, 'AB08')).toMatch(/cancelled/)
    expectAdminError(await admin('DELETE', `/v1/admin/users/invites/${id}`), 410, 'AB08')
    expectAdminError(await admin('POST', `/v1/admin/users/invites/${id}/resend`), 410, 'AB08')
  })

  it('a cancelled invite no longer blocks a new invite for the same email', async () => {
    const email = freshEmail('reinvite')
    const first = await invite({ email, role: 'member', workspaces: [] })
    expect((await admin('DELETE', `/v1/admin/users/invites/${first.id}`)).status).toBe(200)
    const second = await invite({ email, role: 'member', workspaces: [] })
    expect(second.id).not.toBe(first.id)
  })

  it('expires an invite after inviteTtlMs: listed as expired, accept answers 410, resend revives it', async () => {
    const email = freshEmail('expiring')
    const { id, token } = await invite({ email, role: 'member', workspaces: [{ id: workspaceA, role: 'member' }] })
    clockOffsetMs = INVITE_TTL_MS + 1_000
    try {
      expect((await admin('GET', `/v1/admin/users/invites/${id}`)).body.status).toBe('expired')
      const expired = await admin('GET', `/v1/admin/users/invites?status=expired&email=${encodeURIComponent(email)}`)
      expect(expired.body.total).toBe(1)
      const pending = await admin('GET', `/v1/admin/users/invites?status=pending&email=${encodeURIComponent(email)}`)
      expect(pending.body.total).toBe(0)
      expect((await showLink(token)).body.status).toBe('expired')
      expect(expectAdminError(await accept(token), 410, 'AB08')).toMatch(/expired/)
      // An expired invite does not block inviting the address again.
      const replacement = await admin('POST', '/v1/admin/users/invites', { email, role: 'member', workspaces: [] })
      expect(replacement.status, replacement.text).toBe(200)
      tokenOf(replacement.body.invite_link)
      expect((await admin('DELETE', `/v1/admin/users/invites/${replacement.body.id}`)).status).toBe(200)

      const resent = await admin('POST', `/v1/admin/users/invites/${id}/resend`)
      expect(resent.status, resent.text).toBe(200)
      const renewed = tokenOf(resent.body.inviteLink)
      const shown = await showLink(renewed)
      expect(shown.body.status).toBe('pending')
      expect(Date.parse(shown.body.expires_at)).toBeGreaterThan(Date.now() + INVITE_TTL_MS)
      const answer = await accept(renewed)
      expect(answer.status, answer.text).toBe(201)
    } finally {
      clockOffsetMs = 0
    }
  })

  it('resends a pending invite: the old link stops working, the new one works', async () => {
    const { id, token } = await invite({ email: freshEmail('resent'), role: 'member', workspaces: [{ id: workspaceA, role: 'member' }] })
    const resent = await admin('POST', `/v1/admin/users/invites/${id}/resend`)
    expect(resent.status, resent.text).toBe(200)
    expect(Object.keys(resent.body)).toEqual(['inviteLink'])
    const renewed = tokenOf(resent.body.inviteLink)
    expect(renewed).not.toBe(token)
    expectAdminError(await showLink(token), 404, 'AB08')
    expectAdminError(await accept(token), 404, 'AB08')
    const shown = await showLink(renewed)
    expect(shown.status, shown.text).toBe(200)
    expect(shown.body.id).toBe(id)
    const answer = await accept(renewed)
    expect(answer.status, answer.text).toBe(201)
    expect(expectAdminError(await admin('POST', `/v1/admin/users/invites/${id}/resend`), 410, 'AB08')).toMatch(/accepted/)
    expectAdminError(await admin('DELETE', `/v1/admin/users/invites/${id}`), 410, 'AB08')
  })

  it('lets exactly one of two concurrent accepts win', async () => {
    const email = freshEmail('race')
    const { token } = await invite({
      email,
      role: 'member',
      workspaces: [{ id: workspaceA, role: 'member' }],
      workspace_api_key_details: { scopes: ['completions.write'] },
    })
    const answers = await Promise.all([accept(token), accept(token)])
    expect(answers.map((answer) => answer.status).sort()).toEqual([201, 410])
    const loser = answers.find((answer) => answer.status === 410)
    if (loser !== undefined) expectAdminError(loser, 410, 'AB08')
    const users = await admin('GET', `/v1/admin/users?email=${encodeURIComponent(email)}`)
    expect(users.body.total).toBe(1)
    const winner = answers.find((answer) => answer.status === 201)
    expect(users.body.data[0].id).toBe(winner?.body.user.id)
  })
})

describe('users', () => {
  let userId: string
  let userKey: string

  beforeAll(async () => {
    const { token } = await invite({
      email: freshEmail('managed'),
      role: 'member',
      workspaces: [{ id: workspaceA, role: 'member' }],
      workspace_api_key_details: { scopes: ['completions.write', 'workspaces.read'] },
    })
    const answer = await accept(token)
    expect(answer.status, answer.text).toBe(201)
    userId = answer.body.user.id
    userKey = answer.body.api_keys[0].key
  })

  it('reads a user with their workspace slugs', async () => {
    const read = await admin('GET', `/v1/admin/users/${userId}`)
    expect(read.status, read.text).toBe(200)
    expect(read.body).toMatchObject({ object: 'user', id: userId, role: 'member', workspace_ids: [workspaceA] })
    expect(read.body).toHaveProperty('created_at')
    expect(read.body).toHaveProperty('last_updated_at')
  })

  it('pages and filters the user list', async () => {
    const owners = await admin('GET', '/v1/admin/users?role=owner')
    expect(owners.status, owners.text).toBe(200)
    expect(owners.body.total).toBe(1)
    expect(owners.body.data[0].role).toBe('owner')
    const all = await admin('GET', '/v1/admin/users?pageSize=1000')
    const firstPage = await admin('GET', '/v1/admin/users?pageSize=2&currentPage=0')
    const secondPage = await admin('GET', '/v1/admin/users?pageSize=2&currentPage=1')
    expect(firstPage.body.total).toBe(all.body.total)
    expect(firstPage.body.data).toHaveLength(2)
    expect([...firstPage.body.data, ...secondPage.body.data].map((user: Json) => user.id)).toEqual(all.body.data.slice(0, 4).map((user: Json) => user.id))
  })

  it("changes a user's role and returns the updated user", async () => {
    const updated = await admin('PUT', `/v1/admin/users/${userId}`, { role: 'admin' })
    expect(updated.status, updated.text).toBe(200)
    expect(updated.body).toMatchObject({ object: 'user', id: userId, role: 'admin', workspace_ids: [workspaceA] })
    expect((await admin('GET', `/v1/admin/users/${userId}`)).body.role).toBe('admin')
    expect((await admin('GET', '/v1/admin/users?role=admin&pageSize=1000')).body.data.map((user: Json) => user.id)).toContain(userId)
    expect((await admin('PUT', `/v1/admin/users/${userId}`, { role: 'member' })).body.role).toBe('member')
  })

  it("refuses to change the owner's role or remove the owner (403 AB03)", async () => {
    const owner = (await admin('GET', '/v1/admin/users?role=owner')).body.data[0]
    expectAdminError(await admin('PUT', `/v1/admin/users/${owner.id}`, { role: 'member' }), 403, 'AB03')
    expectAdminError(await admin('DELETE', `/v1/admin/users/${owner.id}`), 403, 'AB03')
    expect((await admin('GET', `/v1/admin/users/${owner.id}`)).body.role).toBe('owner')
  })

  it('refuses the user list and invites to a workspace key (403 AB03), even a user key', async () => {
    const service = await gw.workspaceKey(['completions.write', 'workspace_users.list', 'workspace_users.read'])
    secrets.add(service.key)
    expectAdminError(await admin('GET', '/v1/admin/users', undefined, service.key), 403, 'AB03')
    expectAdminError(await admin('GET', `/v1/admin/users/${userId}`, undefined, service.key), 403, 'AB03')
    expectAdminError(await admin('GET', '/v1/admin/users/invites', undefined, service.key), 403, 'AB03')
    expectAdminError(await admin('POST', '/v1/admin/users/invites', { email: freshEmail('sneaky'), role: 'admin', workspaces: [] }, service.key), 403, 'AB03')
    expectAdminError(await admin('GET', '/v1/admin/users', undefined, userKey), 403, 'AB03')
    expectAdminError(await admin('DELETE', `/v1/admin/users/${userId}`, undefined, userKey), 403, 'AB03')
  })

  it('answers 401 AB05 without a key', async () => {
    expectAdminError(await admin('GET', '/v1/admin/users', undefined, null), 401, 'AB05')
    expectAdminError(await admin('POST', '/v1/admin/users/invites', { email: freshEmail('anon'), role: 'admin', workspaces: [] }, null), 401, 'AB05')
  })

  it("removes a user: their memberships go and their keys stop working at once", async () => {
    const before = await chat(userKey)
    expect(before.status, await before.text()).toBe(200)
    const removed = await admin('DELETE', `/v1/admin/users/${userId}`)
    expect(removed.status, removed.text).toBe(200)
    expect(removed.body).toEqual({})
    const after = await chat(userKey)
    const text = await after.text()
    expect(after.status, text).toBe(401)
    expectAdminError(await admin('GET', `/v1/admin/users/${userId}`), 404, 'AB08')
    expectAdminError(await admin('GET', `/v1/admin/workspaces/${workspaceA}/users/${userId}`), 404, 'AB08')
    expectAdminError(await admin('DELETE', `/v1/admin/users/${userId}`), 404, 'AB08')
  })
})

describe('validation and unknown resources', () => {
  it('names the field of an invalid invite (400 AB01)', async () => {
    expect(expectAdminError(await admin('POST', '/v1/admin/users/invites', { role: 'member', workspaces: [] }), 400, 'AB01')).toContain('email')
    expect(expectAdminError(await admin('POST', '/v1/admin/users/invites', { email: 'not-an-email', role: 'member' }), 400, 'AB01')).toContain('email')
    expect(expectAdminError(await admin('POST', '/v1/admin/users/invites', { email: freshEmail('v'), role: 'owner' }), 400, 'AB01')).toContain('role')
    expect(
      expectAdminError(await admin('POST', '/v1/admin/users/invites', { email: freshEmail('v'), role: 'member', workspaces: [{ id: workspaceA, role: 'boss' }] }), 400, 'AB01'),
    ).toContain('workspaces.0.role')
    expect(expectAdminError(await admin('POST', '/v1/admin/users/invites', { email: freshEmail('v'), role: 'member', extra: 1 }), 400, 'AB01')).toContain('extra')
  })

  it('names an unknown or admin-only key scope (400 AB01)', async () => {
    const unknown = await admin('POST', '/v1/admin/users/invites', {
      email: freshEmail('scope'),
      role: 'member',
      workspaces: [{ id: workspaceA, role: 'member' }],
      workspace_api_key_details: { scopes: ['completions.write', 'not.a.scope'] },
    })
    expect(expectAdminError(unknown, 400, 'AB01')).toContain('not.a.scope')
    const adminOnly = await admin('POST', '/v1/admin/users/invites', {
      email: freshEmail('scope'),
      role: 'member',
      workspaces: [{ id: workspaceA, role: 'member' }],
      workspace_api_key_details: { scopes: ['audit_logs.list'] },
    })
    expect(expectAdminError(adminOnly, 400, 'AB01')).toContain('audit_logs.list')
  })

  it('refuses a workspace listed twice (400) and an unknown workspace (404 naming it)', async () => {
    const twice = await admin('POST', '/v1/admin/users/invites', {
      email: freshEmail('twice-ws'),
      role: 'member',
      workspaces: [
        { id: workspaceA, role: 'member' },
        { id: workspaceA, role: 'admin' },
      ],
    })
    expect(expectAdminError(twice, 400, 'AB01')).toContain('workspaces')
    const unknown = await admin('POST', '/v1/admin/users/invites', { email: freshEmail('ghost-ws'), role: 'member', workspaces: [{ id: 'ws-ghost-000000', role: 'member' }] })
    expect(expectAdminError(unknown, 404, 'AB08')).toContain('ws-ghost-000000')
  })

  it('names the field of an invalid acceptance (400 AB01) and leaves the invite usable', async () => {
    const { token } = await invite({ email: freshEmail('badaccept'), role: 'member', workspaces: [] })
    expect(expectAdminError(await accept(token, { first_name: 'Ada', password: 'short' }), 400, 'AB01')).toContain('password')
    expect(expectAdminError(await accept(token, { password: 'long enough password' }), 400, 'AB01')).toContain('first_name')
    expect((await showLink(token)).body.status).toBe('pending')
    expect((await accept(token)).status).toBe(201)
  })

  it('names invalid query parameters and user updates (400 AB01)', async () => {
    expect(expectAdminError(await admin('GET', '/v1/admin/users?pageSize=0'), 400, 'AB01')).toContain('pageSize')
    expect(expectAdminError(await admin('GET', '/v1/admin/users?role=boss'), 400, 'AB01')).toContain('role')
    expect(expectAdminError(await admin('GET', '/v1/admin/users/invites?status=lost'), 400, 'AB01')).toContain('status')
    const someone = (await admin('GET', '/v1/admin/users?role=member')).body.data[0]
    expect(someone).toBeDefined()
    expect(expectAdminError(await admin('PUT', `/v1/admin/users/${someone.id}`, { role: 'owner' }), 400, 'AB01')).toContain('role')
    expect(expectAdminError(await admin('PUT', `/v1/admin/users/${someone.id}`, {}), 400, 'AB01')).toContain('role')
  })

  it('answers 404 AB08 for unknown invites, users and links', async () => {
    const unknownId = '00000000-0000-4000-8000-000000000000'
    expectAdminError(await admin('GET', `/v1/admin/users/invites/${unknownId}`), 404, 'AB08')
    expectAdminError(await admin('DELETE', `/v1/admin/users/invites/${unknownId}`), 404, 'AB08')
    expectAdminError(await admin('POST', `/v1/admin/users/invites/${unknownId}/resend`), 404, 'AB08')
    expectAdminError(await admin('GET', '/v1/admin/users/invites/not-a-uuid'), 404, 'AB08')
    expectAdminError(await admin('GET', `/v1/admin/users/${unknownId}`), 404, 'AB08')
    expectAdminError(await admin('PUT', `/v1/admin/users/${unknownId}`, { role: 'admin' }), 404, 'AB08')
    expectAdminError(await admin('DELETE', `/v1/admin/users/${unknownId}`), 404, 'AB08')
    const madeUp = Buffer.alloc(32, 1).toString('base64url')
    expectAdminError(await showLink(madeUp), 404, 'AB08')
    expectAdminError(await accept(madeUp), 404, 'AB08')
  })
})

describe('secrets', () => {
  it('never returns an invite token hash or a key hash', () => {
    expect(responseTexts.length).toBeGreaterThan(50)
    for (const text of responseTexts) {
      expect(text).not.toMatch(/[0-9a-fA-F]{64}/)
      expect(text).not.toContain(TEST_ADMIN_KEY)
      for (const secret of secrets) expect(text).not.toContain(hashSecret(secret))
    }
  })
})
