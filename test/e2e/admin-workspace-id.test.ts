/**
 * `workspace_id` on the Admin API routes whose path names a resource of a workspace (API.md §1: an
 * Admin API key names the workspace, in the query on reads, in the body on writes, in either on
 * DELETE). There it is a check, not a selector: it must name the resource's workspace (slug or
 * UUID), else 404 and nothing changes, exactly as for a resource of another workspace; a workspace
 * key may name only its own workspace. Issue 13 item 1: `PUT /v1/virtual-keys/{id}` with
 * `workspace_id` in the body was refused with 400 "Unrecognized key", so an Admin API key could not
 * rotate a virtual key or `reset_usage` the way API.md says.
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { LogServices } from '../../core/log-exports.js'
import { callAs, inviteUser, type Answer } from '../helpers/admin-calls.js'
import { postChat, startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

interface Workspace {
  readonly id: string
  readonly slug: string
}

let gw: TestGateway
let mock: MockUpstream
let a: Workspace
let b: Workspace
/** A workspace service key of `a` holding every scope the routes below need. */
let keyA: string

const WORKSPACE_KEY_SCOPES = [
  'completions.write',
  'virtual_keys.read',
  'virtual_keys.update',
  'virtual_keys.delete',
  'workspace_service_api_keys.read',
  'workspace_service_api_keys.update',
  'workspace_service_api_keys.rotate',
  'workspace_service_api_keys.delete',
  'workspaces.read',
  'workspaces.update',
  'workspace_users.create',
  'workspace_users.read',
  'workspace_users.update',
  'workspace_users.delete',
  'logs.export',
  'logs.write',
  'feedbacks.write',
]

async function newWorkspace(): Promise<Workspace> {
  const created = await callAs(gw.url, TEST_ADMIN_KEY, 'POST', '/v1/admin/workspaces', { name: `wsid-${randomUUID().slice(0, 6)}` })
  expect(created.status, created.text).toBe(200)
  return { id: created.body.id, slug: created.body.slug }
}

function admin(method: string, path: string, body?: unknown): Promise<Answer> {
  return callAs(gw.url, TEST_ADMIN_KEY, method, path, body)
}

function expectOk(answer: Answer): void {
  expect(answer.status, answer.text).toBe(200)
}

function expectNotFound(answer: Answer): void {
  expect(answer.status, answer.text).toBe(404)
  expect(answer.body.data.errorCode).toBe('AB08')
}

/** Where a call puts `workspace_id`. */
type Place = 'body' | 'query'

/** One route acting on a resource of workspace `a`. */
interface RouteCase {
  readonly name: string
  /** Where the route takes `workspace_id` (writes: the body; DELETE: either). */
  readonly places: readonly Place[]
  /** Whether the Admin API key may call it (feedback needs `logs.write`, which no Admin API key holds). */
  readonly adminKey?: boolean
  /** Whether a workspace key of `a` may call it (false for Admin API key only routes). */
  readonly workspaceKey: boolean
  /**
   * A fresh resource: the path the call goes to, and whatever the case needs; it lives in workspace
   * `a` unless it names its own (`home`, `homeSlug`: a workspace acted on as a whole).
   */
  make(): Promise<Record<string, string>>
  /** The call, naming `workspaceId` (or not) at `place`, with `key`. */
  call(resource: Record<string, string>, workspaceId: string | undefined, place: Place, key: string): Promise<Answer>
  /** What must not change when the call is refused (read with the Admin API key). */
  snapshot(resource: Record<string, string>): Promise<unknown>
}

function withWorkspace(body: Record<string, unknown>, workspaceId: string | undefined, place: Place): Record<string, unknown> {
  return workspaceId === undefined || place === 'query' ? body : { ...body, workspace_id: workspaceId }
}

function queryOf(workspaceId: string | undefined, place: Place): string {
  return workspaceId === undefined || place === 'body' ? '' : `?workspace_id=${encodeURIComponent(workspaceId)}`
}

async function read(path: string): Promise<unknown> {
  const answer = await admin('GET', path)
  return { status: answer.status, body: answer.body }
}

async function virtualKey(extra: Record<string, unknown> = {}): Promise<Record<string, string>> {
  const created = await admin('POST', '/v1/virtual-keys', { name: 'wsid', provider: 'openai', key: 'sk-original-0123456789abcdef', workspace_id: a.id, ...extra })
  expectOk(created)
  return { path: `/v1/virtual-keys/${created.body.slug}` }
}

async function apiKey(extra: Record<string, unknown> = {}): Promise<Record<string, string>> {
  const created = await admin('POST', '/v1/api-keys/workspace/service', { name: 'wsid', workspace_id: a.id, scopes: ['completions.write'], ...extra })
  expectOk(created)
  return { path: `/v1/api-keys/${created.body.id}` }
}

/** A user of the organisation who is not (yet) a member of `a`. */
async function outsider(): Promise<string> {
  return (await inviteUser(gw.url, 'member', { id: b.id, role: 'member' })).id
}

async function member(): Promise<Record<string, string>> {
  const user = await outsider()
  expectOk(await admin('POST', `/v1/admin/workspaces/${a.id}/users`, { users: [{ id: user, role: 'member' }] }))
  return { path: `/v1/admin/workspaces/${a.id}/users/${user}` }
}

function range(): Record<string, string> {
  const now = Date.now()
  return { time_of_generation_min: new Date(now - 3_600_000).toISOString(), time_of_generation_max: new Date(now + 3_600_000).toISOString() }
}

async function logExport(): Promise<Record<string, string>> {
  const created = await admin('POST', '/v1/logs/exports', { workspace_id: a.id, filters: range(), requested_data: ['id'] })
  expectOk(created)
  return { path: `/v1/logs/exports/${created.body.id}` }
}

/** A feedback entry on a request of `a` (the request goes through the data plane first). */
async function feedback(): Promise<Record<string, string>> {
  const trace = `wsid-${randomUUID()}`
  const reply = await postChat(gw.url, keyA, mock.url, { 'x-gateway-trace-id': trace })
  expect(reply.status, await reply.text()).toBe(200)
  const created = await vi.waitFor(
    async () => {
      await gw.wiring.logSink?.flush()
      const answer = await callAs(gw.url, keyA, 'POST', '/v1/feedback', { trace_id: trace, value: 3 })
      expectOk(answer)
      return answer
    },
    { timeout: 15_000, interval: 50 },
  )
  return { id: created.body.feedback_ids[0] as string, path: `/v1/feedback/${created.body.feedback_ids[0]}` }
}

async function feedbackValue(id: string): Promise<number | undefined> {
  await gw.wiring.logSink?.flush()
  const logs = gw.wiring.resolve(LogServices)
  if (logs === null) throw new Error('the log plugin is off')
  const found = await logs.analytics.findFeedback({ organisationId: (await admin('GET', '/v1/admin/organisation')).body.id, workspaceId: a.id }, id)
  return found?.value
}

const ROUTES: readonly RouteCase[] = [
  {
    name: 'PUT /v1/virtual-keys/{id}: rotating the provider key',
    places: ['body', 'query'],
    workspaceKey: true,
    make: () => virtualKey(),
    call: (resource, workspaceId, place, key) =>
      callAs(gw.url, key, 'PUT', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({ key: `sk-rotated-${randomUUID()}`, note: 'rotated' }, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'PUT /v1/virtual-keys/{id}: reset_usage',
    places: ['body'],
    workspaceKey: true,
    make: () => virtualKey({ usage_limits: { type: 'tokens', credit_limit: 1000 } }),
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'PUT', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({ reset_usage: true }, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'DELETE /v1/virtual-keys/{id}',
    places: ['body', 'query'],
    workspaceKey: true,
    make: () => virtualKey(),
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'DELETE', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({}, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'PUT /v1/api-keys/{id}',
    places: ['body'],
    workspaceKey: true,
    make: () => apiKey(),
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'PUT', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({ name: 'renamed' }, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'PUT /v1/api-keys/{id}: reset_usage',
    places: ['body'],
    workspaceKey: true,
    make: () => apiKey({ usage_limits: { type: 'tokens', credit_limit: 1000 } }),
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'PUT', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({ reset_usage: true }, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'POST /v1/api-keys/{id}/rotate',
    places: ['body'],
    workspaceKey: true,
    make: () => apiKey(),
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'POST', `${resource.path}/rotate${queryOf(workspaceId, place)}`, withWorkspace({}, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'DELETE /v1/api-keys/{id}',
    places: ['body', 'query'],
    workspaceKey: true,
    make: () => apiKey(),
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'DELETE', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({}, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'PUT /v1/admin/workspaces/{id}',
    places: ['body'],
    workspaceKey: true,
    make: async () => ({ path: `/v1/admin/workspaces/${a.id}` }),
    call: (resource, workspaceId, place, key) =>
      callAs(gw.url, key, 'PUT', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({ description: `changed ${randomUUID()}` }, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'DELETE /v1/admin/workspaces/{id}',
    places: ['body', 'query'],
    workspaceKey: false,
    make: async () => {
      const home = await newWorkspace()
      return { path: `/v1/admin/workspaces/${home.id}`, home: home.id, homeSlug: home.slug }
    },
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'DELETE', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({}, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'POST /v1/admin/workspaces/{id}/users',
    places: ['body'],
    workspaceKey: true,
    make: async () => ({ user: await outsider() }),
    call: (resource, workspaceId, place, key) =>
      callAs(gw.url, key, 'POST', `/v1/admin/workspaces/${a.id}/users${queryOf(workspaceId, place)}`, withWorkspace({ users: [{ id: resource.user, role: 'member' }] }, workspaceId, place)),
    snapshot: (resource) => read(`/v1/admin/workspaces/${a.id}/users/${resource.user}`),
  },
  {
    name: 'PUT /v1/admin/workspaces/{id}/users/{userId}',
    places: ['body'],
    workspaceKey: true,
    make: () => member(),
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'PUT', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({ role: 'manager' }, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'DELETE /v1/admin/workspaces/{id}/users/{userId}',
    places: ['body', 'query'],
    workspaceKey: true,
    make: () => member(),
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'DELETE', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({}, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
  {
    name: 'PUT /v1/feedback/{id}',
    places: ['body'],
    adminKey: false,
    workspaceKey: true,
    make: () => feedback(),
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'PUT', `${resource.path}${queryOf(workspaceId, place)}`, withWorkspace({ value: -7 }, workspaceId, place)),
    snapshot: (resource) => feedbackValue(resource.id as string),
  },
  {
    name: 'POST /v1/logs/exports/{id}/start',
    places: ['body'],
    workspaceKey: true,
    make: () => logExport(),
    call: (resource, workspaceId, place, key) => callAs(gw.url, key, 'POST', `${resource.path}/start${queryOf(workspaceId, place)}`, withWorkspace({}, workspaceId, place)),
    snapshot: (resource) => read(resource.path as string),
  },
]

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  a = await newWorkspace()
  b = await newWorkspace()
  const key = await admin('POST', '/v1/api-keys/workspace/service', { name: 'wsid-a', workspace_id: a.id, scopes: WORKSPACE_KEY_SCOPES })
  expectOk(key)
  keyA = key.body.key
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

describe.each(ROUTES)('$name', (route) => {
  const admins = route.adminKey === false ? [] : route.places

  it.each(admins)('Admin API key: workspace_id in the %s naming the resource’s workspace (UUID, then slug) → 200', async (place) => {
    const byId = await route.make()
    expectOk(await route.call(byId, byId.home ?? a.id, place, TEST_ADMIN_KEY))
    const bySlug = await route.make()
    expectOk(await route.call(bySlug, bySlug.homeSlug ?? a.slug, place, TEST_ADMIN_KEY))
  })

  it.each(admins)('Admin API key: workspace_id in the %s naming another workspace or none → 404, nothing changed', async (place) => {
    const resource = await route.make()
    const before = await route.snapshot(resource)
    for (const named of [b.id, b.slug, randomUUID(), 'no-such-workspace']) {
      expectNotFound(await route.call(resource, named, place, TEST_ADMIN_KEY))
      expect(await route.snapshot(resource)).toEqual(before)
    }
  })

  it.runIf(route.workspaceKey)('workspace key: naming its own workspace → 200; another or none → 404, nothing changed', async () => {
    const place = route.places[0] as Place
    expectOk(await route.call(await route.make(), a.slug, place, keyA))
    expectOk(await route.call(await route.make(), a.id, place, keyA))
    const resource = await route.make()
    const before = await route.snapshot(resource)
    for (const named of [b.id, b.slug, randomUUID(), 'no-such-workspace']) {
      expectNotFound(await route.call(resource, named, place, keyA))
      expect(await route.snapshot(resource)).toEqual(before)
    }
  })
})

describe('the issue’s case: an Admin API key rotates a virtual key and resets its usage naming workspace_id in the body', () => {
  it('PUT {key, workspace_id} rotates the provider key; PUT {reset_usage, workspace_id} starts a new budget period', async () => {
    const { path } = await virtualKey({ usage_limits: { type: 'tokens', credit_limit: 1000 } })
    const before = await admin('GET', path as string)
    const rotated = await admin('PUT', path as string, { key: 'sk-rotated-fedcba9876543210', workspace_id: a.id })
    expectOk(rotated)
    expect(rotated.body.masked_api_key).not.toBe(before.body.masked_api_key)
    expect(before.body.usage_limits.last_reset_at).toBeNull()
    const reset = await admin('PUT', path as string, { reset_usage: true, workspace_id: a.slug })
    expectOk(reset)
    expect(reset.body.usage_limits.last_reset_at).toEqual(expect.any(String))
  })
})

describe('routes where workspace_id is not a check of the path alone', () => {
  it('POST /v1/logs/exports/{id}/cancel checks workspace_id before anything else (a draft export: 409 when named right, 404 when not)', async () => {
    const { path } = await logExport()
    expect((await admin('POST', `${path}/cancel`, { workspace_id: a.id })).status).toBe(409)
    expectNotFound(await admin('POST', `${path}/cancel`, { workspace_id: b.id }))
    expectNotFound(await callAs(gw.url, keyA, 'POST', `${path}/cancel`, { workspace_id: b.slug }))
  })

  it('GET routes take workspace_id in the query and answer 404 for another workspace', async () => {
    const vk = await virtualKey()
    const key = await apiKey()
    const exported = await logExport()
    const joined = await member()
    for (const path of [vk.path, key.path, exported.path, `${exported.path}/download`, `/v1/admin/workspaces/${a.id}`, joined.path] as string[]) {
      const separator = path.includes('?') ? '&' : '?'
      for (const named of [b.id, 'no-such-workspace']) expectNotFound(await admin('GET', `${path}${separator}workspace_id=${named}`))
      expect((await admin('GET', `${path}${separator}workspace_id=${a.slug}`)).status, path).not.toBe(404)
    }
  })

  it('an Admin API key (organisation service key) lives in no workspace: naming one finds nothing', async () => {
    const created = await admin('POST', '/v1/api-keys/organisation/service', { name: 'org', scopes: ['workspaces.read'] })
    expectOk(created)
    expectNotFound(await admin('PUT', `/v1/api-keys/${created.body.id}`, { name: 'renamed', workspace_id: a.id }))
    expectOk(await admin('PUT', `/v1/api-keys/${created.body.id}`, { name: 'renamed' }))
  })

  it('a workspace_id that is not a string is refused with 400 naming it', async () => {
    const { path } = await virtualKey()
    const refused = await admin('PUT', path as string, { note: 'x', workspace_id: 42 })
    expect(refused.status).toBe(400)
    expect(refused.body.data.message).toContain('workspace_id')
  })
})
