/**
 * What the audit log keeps of hostile or secret-bearing requests (API.md §5 "audit logs"): a
 * password or token is replaced whole by `[redacted]`, never shown in part, and a huge refused body
 * is cut to 16 KiB with a marker instead of being stored whole.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'

type Json = Record<string, any>

let gw: TestGateway

beforeAll(async () => {
  gw = await startTestGateway()
})

afterAll(async () => {
  await gw?.close()
})

/** Refusals are audited after the reply: waits for the entry matching `query` whose body passes `match`. */
async function auditEntry(query: string, match: (entry: Json) => boolean): Promise<Json> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const listed = await gw.admin('GET', `/v1/audit-logs?${query}`)
    const entry = (listed.body.data as Json[]).find(match)
    if (entry !== undefined) return entry
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`no audit entry for ${query}`)
}

describe('audit log: secrets and sizes', () => {
  it('stores an accepted invite’s password as [redacted], keeping no character of it', async () => {
    const password = 'Zq9-very-secret-X7w'
    const workspace = await gw.admin('POST', '/v1/admin/workspaces', { name: 'audited' })
    const invite = await gw.admin('POST', '/v1/admin/users/invites', { email: 'new@example.test', role: 'member', workspaces: [{ id: workspace.body.id, role: 'member' }] })
    const token = String(invite.body.invite_link).split('/').pop()
    const accepted = await fetch(`${gw.url}/v1/invites/${token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ first_name: 'New', last_name: 'User', password }),
    })
    expect(accepted.status).toBe(201)
    const entry = await auditEntry('resource_type=invite&action=accept', () => true)
    expect(JSON.parse(entry.request_body)).toEqual({ first_name: 'New', last_name: 'User', password: '[redacted]' })
    // Not even the masked form's first and last characters.
    for (const piece of [password.slice(0, 2), password.slice(-3)]) expect(entry.request_body).not.toContain(piece)
    expect(entry.uri).not.toContain(token)
  })

  it('cuts a refused 9 MB body to 16 KiB with a marker', async () => {
    const name = 'n'.repeat(9 * 1024 * 1024)
    const refused = await gw.admin('POST', '/v1/admin/workspaces', { name, description: 'huge' })
    expect(refused.status).toBe(400)
    const entry = await auditEntry('resource_type=workspace&response_status_code=400', (candidate) => String(candidate.request_body).includes('[truncated:'))
    expect(entry.request_body.length).toBeLessThanOrEqual(16 * 1024)
    const stored = JSON.parse(entry.request_body) as string
    expect(stored).toMatch(/^\[truncated: \d+ characters\] \{"name":"nnnn/)
  })
})
