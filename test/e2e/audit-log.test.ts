/**
 * The audit log end to end (API.md §5 "audit logs"): state-changing Admin API requests are
 * recorded, successful ones with their change (admin-api) and refused ones by the audit plugin
 * (401, 403, 400); reads are not; secrets never reach an entry; `GET /v1/audit-logs` filters and
 * pages, and only Admin API keys may call it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { WORKSPACE_KEY_SCOPES } from '../../core/scopes.js'
import { hashSecret } from '../../core/secrets.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'

type Json = Record<string, any>

const BAD_KEY = 'gw-not-a-real-key-0123456789abcdef'

async function pause(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms))
}

describe('audit log', () => {
  let gw: TestGateway
  let organisationId: string
  let adminKeyId: string
  let workspaceSlug: string
  let createdKey: { id: string; secret: string }
  /** When the refused requests started (after the four successful ones). */
  let refusalsFrom: string
  let workspaceKey: { key: string; keyId: string; workspaceId: string }

  /** The audit log as the admin key sees it (`query` without `?`). */
  async function auditLogs(query = ''): Promise<{ status: number; body: Json; text: string }> {
    const response = await fetch(`${gw.url}/v1/audit-logs${query.length > 0 ? `?${query}` : ''}`, { headers: { 'x-gateway-api-key': gw.adminKey } })
    const text = await response.text()
    return { status: response.status, body: JSON.parse(text) as Json, text }
  }

  async function entries(query = ''): Promise<Json[]> {
    const answer = await auditLogs(query)
    expect(answer.status, answer.text).toBe(200)
    return answer.body.data as Json[]
  }

  /** Refused requests are stored after the reply (onLog): wait until `count` entries exist. */
  async function untilTotal(count: number): Promise<void> {
    const deadline = Date.now() + 5_000
    for (;;) {
      const answer = await auditLogs()
      if (answer.body.total >= count) return
      if (Date.now() > deadline) throw new Error(`expected ${count} audit entries, found ${answer.body.total}`)
      await pause(20)
    }
  }

  beforeAll(async () => {
    gw = await startTestGateway()
    const organisation = await gw.admin('GET', '/v1/admin/organisation')
    organisationId = organisation.body.id
    const keys = await gw.admin('GET', '/v1/api-keys')
    adminKeyId = (keys.body.data as Json[]).find((key) => key.type === 'organisation-service')?.id
    expect(adminKeyId).toEqual(expect.any(String))
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('records create, update, create key and delete key with method, uri, resource, action, status and user', async () => {
    const workspace = await gw.admin('POST', '/v1/admin/workspaces', { name: 'audited team' })
    expect(workspace.status).toBe(200)
    workspaceSlug = workspace.body.id
    expect((await gw.admin('PUT', `/v1/admin/workspaces/${workspaceSlug}`, { description: 'changed' })).status).toBe(200)
    const key = await gw.admin('POST', '/v1/api-keys/workspace/service', { name: 'to delete', workspace_id: workspaceSlug, scopes: ['completions.write'] })
    expect(key.status).toBe(200)
    createdKey = { id: key.body.id, secret: key.body.key }
    expect((await gw.admin('DELETE', `/v1/api-keys/${createdKey.id}`)).status).toBe(200)

    const answer = await auditLogs()
    expect(answer.status, answer.text).toBe(200)
    expect(answer.body.object).toBe('list')
    expect(answer.body.total).toBe(4)
    // Newest first.
    const [deleted, keyCreated, updated, created] = answer.body.data as [Json, Json, Json, Json]
    const common = { object: 'audit-log', user_id: adminKeyId, user_type: 'api_key', api_key_id: adminKeyId, organisation_id: organisationId, response_status_code: 200 }
    expect(created).toMatchObject({ ...common, method: 'POST', uri: '/v1/admin/workspaces', resource_type: 'workspace', action: 'create', workspace_id: workspaceSlug, resource_id: workspaceSlug })
    expect(updated).toMatchObject({ ...common, method: 'PUT', uri: `/v1/admin/workspaces/${workspaceSlug}`, resource_type: 'workspace', action: 'update', workspace_id: workspaceSlug })
    expect(keyCreated).toMatchObject({ ...common, method: 'POST', uri: '/v1/api-keys/workspace/service', resource_type: 'api_key', action: 'create', workspace_id: workspaceSlug })
    expect(deleted).toMatchObject({ ...common, method: 'DELETE', uri: `/v1/api-keys/${createdKey.id}`, resource_type: 'api_key', action: 'delete', resource_id: createdKey.id })
    for (const entry of answer.body.data as Json[]) {
      expect(Object.keys(entry).sort()).toEqual(
        [
          'action', 'api_key_id', 'client_ip', 'id', 'method', 'object', 'organisation_id', 'query_params', 'request_body', 'request_id', 'resource_id',
          'resource_type', 'response_status_code', 'timestamp', 'uri', 'user_id', 'user_type', 'workspace_id',
        ].sort(),
      )
      expect(Number.isNaN(Date.parse(entry.timestamp))).toBe(false)
      expect(entry.query_params).toBe('{}')
      expect(entry.client_ip).toEqual(expect.any(String))
    }
    // Bodies stay JSON text, as stored.
    expect(JSON.parse(created.request_body)).toEqual({ name: 'audited team' })
    expect(JSON.parse(updated.request_body)).toEqual({ description: 'changed' })
    expect(deleted.request_body).toBeNull()
  })

  it('never stores a created key’s secret (nor its hash) in any entry', async () => {
    const answer = await auditLogs('page_size=1000')
    expect(answer.text).not.toContain(createdKey.secret)
    expect(answer.text).not.toContain(hashSecret(createdKey.secret))
    expect(answer.text).not.toContain(gw.adminKey)
  })

  it('does not record reads', async () => {
    await gw.admin('GET', '/v1/admin/workspaces')
    await gw.admin('GET', `/v1/admin/workspaces/${workspaceSlug}`)
    await gw.admin('GET', '/v1/api-keys')
    await gw.admin('GET', '/v1/audit-logs')
    await fetch(`${gw.url}/v1/admin/workspaces`, { headers: { 'x-gateway-api-key': BAD_KEY } })
    const answer = await auditLogs()
    expect(answer.body.total).toBe(4)
    expect((answer.body.data as Json[]).every((entry) => entry.method !== 'GET')).toBe(true)
  })

  it('records refused requests: a missing scope (403), a bad body (400), a bad API key (401)', async () => {
    workspaceKey = await gw.workspaceKey(['completions.write'])
    await pause(10)
    refusalsFrom = new Date().toISOString()
    await pause(10)

    const forbidden = await gw.admin('PUT', `/v1/admin/workspaces/${workspaceKey.workspaceId}`, { name: 'renamed' }, workspaceKey.key)
    expect(forbidden.status).toBe(403)
    const invalid = await gw.admin('POST', '/v1/admin/workspaces', { name: 'ok', bogus: true })
    expect(invalid.status).toBe(400)
    const unauthenticated = await gw.admin('POST', '/v1/admin/workspaces', { name: 'intruder', password: 'hunter2-hunter2' }, BAD_KEY)
    expect(unauthenticated.status).toBe(401)
    await untilTotal(9)

    const refused = await entries(`start_time=${encodeURIComponent(refusalsFrom)}`)
    expect(refused).toHaveLength(3)
    const byStatus = new Map(refused.map((entry) => [entry.response_status_code as number, entry]))
    expect(byStatus.get(403)).toMatchObject({
      method: 'PUT',
      uri: `/v1/admin/workspaces/${workspaceKey.workspaceId}`,
      resource_type: 'workspace',
      action: 'update',
      user_id: workspaceKey.keyId,
      user_type: 'api_key',
      organisation_id: organisationId,
      workspace_id: workspaceKey.workspaceId,
    })
    expect(byStatus.get(400)).toMatchObject({ method: 'POST', uri: '/v1/admin/workspaces', action: 'create', user_id: adminKeyId, user_type: 'api_key' })
    expect(JSON.parse(byStatus.get(400)?.request_body)).toEqual({ name: 'ok', bogus: true })
    // An unknown key names no one; the entry is filed under the (single) organisation.
    expect(byStatus.get(401)).toMatchObject({ method: 'POST', uri: '/v1/admin/workspaces', action: 'create', user_id: null, organisation_id: organisationId })
    // Refused before the body was read (auth and scope checks run first): no body to keep.
    expect(byStatus.get(401)?.request_body).toBeNull()
    expect(byStatus.get(403)?.request_body).toBeNull()
    const all = await auditLogs('page_size=1000')
    expect(all.text).not.toContain(BAD_KEY)
    expect(all.text).not.toContain(workspaceKey.key)
  })

  it('filters by method, resource type, action, status, time, user and workspace', async () => {
    const deletes = await entries('method=DELETE')
    expect(deletes.map((entry) => entry.uri)).toEqual([`/v1/api-keys/${createdKey.id}`])

    const keyEntries = await entries('resource_type=api_key')
    expect(keyEntries.length).toBeGreaterThanOrEqual(3)
    expect(keyEntries.every((entry) => entry.resource_type === 'api_key')).toBe(true)

    const updates = await entries('action=update')
    expect(updates.map((entry) => entry.response_status_code).sort()).toEqual([200, 403])

    expect((await entries('response_status_code=401')).map((entry) => entry.user_id)).toEqual([null])
    expect((await entries('response_status_code=200&resource_type=workspace&action=create')).length).toBe(2)

    const before = await entries(`end_time=${encodeURIComponent(refusalsFrom)}`)
    expect(before).toHaveLength(6)
    expect(before.every((entry) => entry.response_status_code === 200)).toBe(true)
    const window = await entries(`start_time=${encodeURIComponent(refusalsFrom)}&end_time=${encodeURIComponent(new Date().toISOString())}`)
    expect(window).toHaveLength(3)

    const byWorkspaceKey = await entries(`user_id=${workspaceKey.keyId}`)
    expect(byWorkspaceKey.map((entry) => entry.response_status_code)).toEqual([403])
    expect((await entries(`user_id=${adminKeyId}`)).length).toBe(7)

    const inWorkspace = await entries(`workspace_id=${workspaceSlug}`)
    expect(inWorkspace.length).toBe(4)
    expect(inWorkspace.every((entry) => entry.workspace_id === workspaceSlug)).toBe(true)
    expect(await auditLogs('workspace_id=ws-does-not-exist')).toMatchObject({ status: 200, body: { object: 'list', total: 0, data: [] } })

    expect((await entries(`uri=${encodeURIComponent('/v1/api-keys/*')}`)).every((entry) => entry.uri.startsWith('/v1/api-keys/'))).toBe(true)
  })

  it('pages with current_page and page_size', async () => {
    const everything = await entries('page_size=1000')
    expect(everything).toHaveLength(9)
    const first = await auditLogs('page_size=4&current_page=0')
    const second = await auditLogs('page_size=4&current_page=1')
    const third = await auditLogs('page_size=4&current_page=2')
    for (const page of [first, second, third]) expect(page.body.total).toBe(9)
    expect([first, second, third].map((page) => page.body.data.length)).toEqual([4, 4, 1])
    const paged = [...first.body.data, ...second.body.data, ...third.body.data].map((entry: Json) => entry.id)
    expect(paged).toEqual(everything.map((entry) => entry.id))
    expect((await auditLogs('current_page=5')).body).toMatchObject({ total: 9, data: [] })
  })

  it('refuses invalid queries with 400 naming the field', async () => {
    for (const query of ['method=GET', 'response_status_code=abc', 'start_time=yesterday', 'page_size=0']) {
      const answer = await auditLogs(query)
      expect(answer.status, query).toBe(400)
      expect(answer.body).toEqual({ success: false, data: { message: expect.any(String), errorCode: 'AB01' } })
    }
    const field = await auditLogs('method=GET')
    expect(field.body.data.message).toContain('method')
  })

  it('shows the UUID of a workspace that no longer exists, and still finds its entries by it', async () => {
    const workspace = await gw.admin('POST', '/v1/admin/workspaces', { name: 'short lived' })
    const slug = workspace.body.id as string
    const [created] = await entries(`workspace_id=${slug}`)
    expect(created?.workspace_id).toBe(slug)
    expect((await gw.admin('DELETE', `/v1/admin/workspaces/${slug}`, { force_delete: true })).status).toBe(200)
    const afterDelete = (await entries('resource_type=workspace&action=delete'))[0] as Json
    expect(afterDelete.workspace_id).not.toBe(slug)
    expect(afterDelete.workspace_id).toMatch(/^[0-9a-f-]{36}$/)
    const history = await entries(`workspace_id=${afterDelete.workspace_id}`)
    expect(history.map((entry) => entry.action).sort()).toEqual(['create', 'delete'])
  })

  it('records refusals decided by the Admin API itself: unknown resource (404), dependants (409), malformed JSON (400)', async () => {
    await pause(10)
    const from = new Date().toISOString()
    await pause(10)
    expect((await gw.admin('PUT', '/v1/admin/workspaces/ws-missing-000000', { name: 'x' })).status).toBe(404)
    const busy = await gw.workspaceKey(['completions.write'])
    const blocked = await gw.admin('DELETE', `/v1/admin/workspaces/${busy.workspaceId}`)
    expect(blocked.status).toBe(409)
    const malformed = await fetch(`${gw.url}/v1/admin/workspaces`, {
      method: 'POST',
      headers: { 'x-gateway-api-key': gw.adminKey, 'content-type': 'application/json' },
      body: '{"name": ',
    })
    expect(malformed.status).toBe(400)
    const deadline = Date.now() + 5_000
    let refused: Json[] = []
    while (refused.length < 3 && Date.now() < deadline) {
      refused = (await entries(`start_time=${encodeURIComponent(from)}`)).filter((entry) => entry.response_status_code >= 400)
      if (refused.length < 3) await pause(20)
    }
    const byStatus = new Map(refused.map((entry) => [entry.response_status_code as number, entry]))
    expect(byStatus.get(404)).toMatchObject({ method: 'PUT', action: 'update', resource_id: 'ws-missing-000000', user_id: adminKeyId })
    expect(byStatus.get(409)).toMatchObject({ method: 'DELETE', action: 'delete', workspace_id: busy.workspaceId })
    expect(byStatus.get(400)).toMatchObject({ method: 'POST', action: 'create', request_body: JSON.stringify('(unparsed body)') })
  })

  it('refuses workspace keys (403): the audit log needs an Admin API key', async () => {
    // Every scope a workspace key may hold: still not enough.
    const scoped = await gw.workspaceKey(WORKSPACE_KEY_SCOPES)
    const answer = await gw.admin('GET', '/v1/audit-logs', undefined, scoped.key)
    expect(answer.status).toBe(403)
    expect(answer.body).toEqual({ success: false, data: { message: expect.any(String), errorCode: 'AB03' } })
    const unauthenticated = await fetch(`${gw.url}/v1/audit-logs`)
    expect(unauthenticated.status).toBe(401)
  })
})
