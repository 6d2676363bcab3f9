/**
 * A state-changing Admin API request refused because its JWT is forged, expired or signed with an
 * unknown `kid` is audited (401) under the organisation the token claims, when that organisation
 * exists, as `user_type` `user` named by the token's subject; the token itself is never stored.
 * Before, such entries had no principal and always went to the deployment's first organisation as
 * an anonymous `api_key` caller: in a multi-organisation deployment the organisation under attack
 * never saw them (issue 13 item 4).
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { SignJWT, type JWTPayload } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AdminStore } from '../../core/ports.js'
import { ADMIN_KEY_SCOPES } from '../../core/scopes.js'
import { issueApiKey } from '../../core/secrets.js'
import { callAs, type Json } from '../helpers/admin-calls.js'
import { startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'
import { newSigner, type Signer } from '../helpers/jwt-signer.js'

let gw: TestGateway
let trusted: Signer
let firstOrganisation: string
/** A second organisation of the same deployment (not the first one), with its own Admin API key. */
let second: { id: string; adminKey: string }

const nowSeconds = (): number => Math.floor(Date.now() / 1000)

function sign(signer: Signer, claims: JWTPayload, kid = signer.kid): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid }).sign(signer.privateKey)
}

/** Creates another organisation in the store, as a second bootstrap would. */
async function secondOrganisation(): Promise<{ id: string; adminKey: string }> {
  const store = gw.wiring.resolve(AdminStore)
  const now = new Date().toISOString()
  const id = randomUUID()
  const ownerId = randomUUID()
  const workspaceId = randomUUID()
  const { secret, record } = issueApiKey({
    name: 'second admin',
    description: null,
    type: 'organisation-service',
    organisationId: id,
    workspaceId: null,
    userId: ownerId,
    scopes: ADMIN_KEY_SCOPES,
    expiresAt: null,
    creationMode: 'auto',
    createdAt: now,
  })
  await store.bootstrap({
    organisation: { id, name: 'Second', createdAt: now, jwt: null },
    owner: { id: ownerId, organisationId: id, email: 'owner@second.test', firstName: 'O', lastName: '', role: 'owner', passwordHash: null, createdAt: now, lastUpdatedAt: now },
    workspace: {
      id: workspaceId,
      slug: `ws-second-${randomBytes(3).toString('hex')}`,
      organisationId: id,
      name: 'Second',
      description: null,
      defaults: null,
      usageLimits: [],
      rateLimits: [],
      createdAt: now,
      lastUpdatedAt: now,
    },
    membership: { workspaceId, userId: ownerId, organisationId: id, role: 'admin', createdAt: now, lastUpdatedAt: now },
    adminKey: record,
  })
  return { id, adminKey: secret }
}

/** Sends a state-changing admin request with `token` and expects it refused with 401. */
async function refused(token: string, header: 'x-gateway-api-key' | 'authorization' = 'x-gateway-api-key'): Promise<void> {
  const response = await fetch(`${gw.url}/v1/admin/workspaces`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(header === 'authorization' ? { authorization: `Bearer ${token}` } : { 'x-gateway-api-key': token }) },
    body: JSON.stringify({ name: 'takeover' }),
  })
  expect(response.status, await response.text()).toBe(401)
}

/** The 401 entries of `POST /v1/admin/workspaces` that `adminKey`'s organisation sees, waiting for `count`. */
async function refusals(adminKey: string, count: number): Promise<Json[]> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const listed = await callAs(gw.url, adminKey, 'GET', '/v1/audit-logs?response_status_code=401&resource_type=workspace&page_size=100')
    expect(listed.status, listed.text).toBe(200)
    if ((listed.body.data as Json[]).length >= count) return listed.body.data as Json[]
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`fewer than ${count} refusals audited`)
}

beforeAll(async () => {
  trusted = await newSigner('audit-kid')
  gw = await startTestGateway({ env: { GATEWAY_JWKS: JSON.stringify({ keys: [trusted.publicJwk] }) } })
  firstOrganisation = (await callAs(gw.url, TEST_ADMIN_KEY, 'GET', '/v1/admin/organisation')).body.id
  second = await secondOrganisation()
})

afterAll(async () => {
  await gw?.close()
})

describe('audit log: refused JWTs', () => {
  it('files a forged, an expired and an unknown-kid JWT claiming the second organisation under it, as the token’s user; never the token', async () => {
    const forger = await newSigner('audit-kid')
    const claims = (subject: Record<string, string>): JWTPayload => ({ gateway_oid: second.id, gateway_workspace: 'any', scope: 'workspaces.create', exp: nowSeconds() + 600, ...subject })
    const tokens = [
      // Same kid as the trusted key, another private key: the signature does not verify.
      await sign(forger, claims({ sub: 'forger@example.test' })),
      // Signed by the trusted key, but expired.
      await sign(trusted, { ...claims({ email_id: 'late@example.test' }), exp: nowSeconds() - 3_600 }),
      // A kid the JWKS does not know.
      await sign(forger, claims({ uid: 'stranger-7' }), 'no-such-kid'),
    ]
    await refused(tokens[0] as string)
    await refused(tokens[1] as string, 'authorization')
    await refused(tokens[2] as string)

    const entries = await refusals(second.adminKey, 3)
    expect(entries.map((entry) => entry.user_id).sort()).toEqual(['forger@example.test', 'late@example.test', 'stranger-7'])
    for (const entry of entries) {
      expect(entry).toMatchObject({
        organisation_id: second.id,
        user_type: 'user',
        api_key_id: null,
        method: 'POST',
        uri: '/v1/admin/workspaces',
        response_status_code: 401,
        resource_type: 'workspace',
        action: 'create',
      })
    }
    const stored = JSON.stringify(entries)
    for (const token of tokens) for (const part of token.split('.')) expect(stored).not.toContain(part)
    // Filed where the token points, not (also) under the first organisation.
    expect((await refusals(TEST_ADMIN_KEY, 0)).filter((entry) => entry.organisation_id === second.id)).toEqual([])
  })

  it('files a refused JWT of a single-organisation token (no organisation claim) or of an unknown organisation under the first organisation', async () => {
    const before = (await refusals(TEST_ADMIN_KEY, 0)).length
    await refused(await sign(trusted, { gateway_workspace: 'none', exp: nowSeconds() - 3_600, sub: 'no-org-claim' }))
    await refused(await sign(trusted, { gateway_oid: randomUUID(), gateway_workspace: 'none', exp: nowSeconds() + 600, sub: 'unknown-org' }))
    const entries = await refusals(TEST_ADMIN_KEY, before + 2)
    const mine = entries.filter((entry) => entry.user_id === 'no-org-claim' || entry.user_id === 'unknown-org')
    expect(mine).toHaveLength(2)
    for (const entry of mine) expect(entry).toMatchObject({ organisation_id: firstOrganisation, user_type: 'user', response_status_code: 401 })
  })
})
