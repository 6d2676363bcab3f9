import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { SignJWT, type JWTPayload } from 'jose'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'
import { newSigner, type Signer } from '../helpers/jwt-signer.js'

const nowSeconds = (): number => Math.floor(Date.now() / 1000)

function sign(signer: Signer, claims: JWTPayload): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: signer.kid }).sign(signer.privateKey)
}

interface Tenant {
  readonly organisationId: string
  readonly workspace: string
}

/** The organisation id (for `gateway_oid`) and a new workspace, learnt through the Admin API as an issuer would. */
async function tenantOf(gw: TestGateway): Promise<Tenant> {
  const organisation = await gw.admin('GET', '/v1/admin/organisation')
  expect(organisation.status).toBe(200)
  const workspace = await gw.admin('POST', '/v1/admin/workspaces', { name: `jwt-${Math.random().toString(36).slice(2, 8)}` })
  expect(workspace.status).toBe(200)
  return { organisationId: organisation.body.id, workspace: workspace.body.slug ?? workspace.body.id }
}

function claims(tenant: Tenant, extra: JWTPayload = {}): JWTPayload {
  return {
    gateway_oid: tenant.organisationId,
    gateway_workspace: tenant.workspace,
    scope: 'gateway.completions.write',
    email_id: 'ada@example.test',
    exp: nowSeconds() + 600,
    ...extra,
  }
}

async function chat(gw: TestGateway, mock: MockUpstream, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const response = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url, ...headers },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }),
  })
  return { status: response.status, body: await response.json() }
}

describe('JWT authentication with a static JWKS (GATEWAY_JWKS)', () => {
  let mock: MockUpstream
  let gw: TestGateway
  let signer: Signer
  let tenant: Tenant

  beforeAll(async () => {
    signer = await newSigner('e2e-key-1')
    mock = await startMockUpstream()
    gw = await startTestGateway({ env: { GATEWAY_JWKS: JSON.stringify({ keys: [signer.publicJwk] }) } })
    tenant = await tenantOf(gw)
  })

  afterAll(async () => {
    await gw?.close()
    await mock?.close()
  })

  it('shows the JWKS applied at start in the organisation JWT settings', async () => {
    const settings = await gw.admin('GET', '/v1/admin/organisation/jwt')
    expect(settings.status).toBe(200)
    expect(JSON.stringify(settings.body)).toContain(signer.kid)
  })

  it('admits a valid JWT with completions.write (x-gateway-api-key) and forwards the provider key only', async () => {
    mock.reset()
    const token = await sign(signer, claims(tenant))
    const reply = await chat(gw, mock, { 'x-gateway-api-key': token, authorization: 'Bearer sk-provider-secret' })
    expect(reply.status).toBe(200)
    expect(reply.body.choices[0].message.content).toBe(MOCK_REPLY)
    const [seen] = await mock.waitForRequests(1)
    expect(seen?.headers.authorization).toBe('Bearer sk-provider-secret')
    expect(JSON.stringify(seen?.headers)).not.toContain(token)
  })

  it('admits a JWT sent as Authorization: Bearer and never forwards it', async () => {
    mock.reset()
    const token = await sign(signer, claims(tenant, { sub: 'bearer-user' }))
    const reply = await chat(gw, mock, { authorization: `Bearer ${token}` })
    expect(reply.status).toBe(200)
    const [seen] = await mock.waitForRequests(1)
    expect(JSON.stringify(seen?.headers)).not.toContain(token)
  })

  it('works with the openai client', async () => {
    const client = new OpenAI({
      apiKey: 'sk-provider-secret',
      baseURL: `${gw.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-gateway-api-key': await sign(signer, claims(tenant)), 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
    })
    const completion = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] })
    expect(completion.choices[0]?.message.content).toBe(MOCK_REPLY)
  })

  it('refuses a JWT without completions.write with 403', async () => {
    const reply = await chat(gw, mock, { 'x-gateway-api-key': await sign(signer, claims(tenant, { scope: 'logs.view' })) })
    expect(reply.status).toBe(403)
    expect(reply.body.error.type).toBe('permission_error')
  })

  it('refuses an expired JWT with 401', async () => {
    const reply = await chat(gw, mock, { 'x-gateway-api-key': await sign(signer, claims(tenant, { exp: nowSeconds() - 120 })) })
    expect(reply.status).toBe(401)
    expect(reply.body.error).toMatchObject({ type: 'authentication_error', code: 'GW_AUTH_TOKEN_EXPIRED' })
  })

  it('refuses a JWT signed by an unknown key, and one naming an unknown workspace, with 401', async () => {
    const stranger = await newSigner('e2e-stranger')
    const unknownKey = await chat(gw, mock, { 'x-gateway-api-key': await sign(stranger, claims(tenant)) })
    expect(unknownKey.status).toBe(401)
    expect(unknownKey.body.error.code).toBe('GW_AUTH_TOKEN_INVALID')
    const unknownWorkspace = await chat(gw, mock, { 'x-gateway-api-key': await sign(signer, claims(tenant, { gateway_workspace: 'ws-nope' })) })
    expect(unknownWorkspace.status).toBe(401)
  })

  it('never lets a JWT act as an Admin API key', async () => {
    const token = await sign(signer, claims(tenant, { scope: 'audit_logs.list organisation_settings.read' }))
    const response = await fetch(`${gw.url}/v1/audit-logs`, { headers: { 'x-gateway-api-key': token } })
    expect(response.status).toBe(403)
  })
})

describe('JWT issuer and audience from GATEWAY_JWT_ISSUER / GATEWAY_JWT_AUDIENCE', () => {
  const ISSUER = 'https://idp.example.test/'
  let mock: MockUpstream
  let gw: TestGateway
  let signer: Signer
  let tenant: Tenant

  beforeAll(async () => {
    signer = await newSigner('e2e-iss-key')
    mock = await startMockUpstream()
    gw = await startTestGateway({
      env: { GATEWAY_JWKS: JSON.stringify({ keys: [signer.publicJwk] }), GATEWAY_JWT_ISSUER: ISSUER, GATEWAY_JWT_AUDIENCE: 'gateway,gateway-eu' },
    })
    tenant = await tenantOf(gw)
  })

  afterAll(async () => {
    await gw?.close()
    await mock?.close()
  })

  it('shows them in the organisation JWT settings', async () => {
    const settings = await gw.admin('GET', '/v1/admin/organisation/jwt')
    expect(settings.body).toMatchObject({ issuer: ISSUER, audience: ['gateway', 'gateway-eu'] })
  })

  it('admits a token carrying the issuer and one of the audiences, and refuses one missing either', async () => {
    expect((await chat(gw, mock, { 'x-gateway-api-key': await sign(signer, claims(tenant, { iss: ISSUER, aud: 'gateway-eu' })) })).status).toBe(200)
    const noAudience = await chat(gw, mock, { 'x-gateway-api-key': await sign(signer, claims(tenant, { iss: ISSUER })) })
    expect(noAudience.status).toBe(401)
    expect(noAudience.body.error).toMatchObject({ type: 'authentication_error', code: 'GW_AUTH_TOKEN_INVALID' })
    expect(noAudience.body.error.message).toContain('aud')
    const noIssuer = await chat(gw, mock, { 'x-gateway-api-key': await sign(signer, claims(tenant, { aud: 'gateway' })) })
    expect(noIssuer.status).toBe(401)
    expect(noIssuer.body.error.message).toContain('iss')
  })
})

describe('JWT authentication with a JWKS URL (GATEWAY_JWKS_URL)', () => {
  let mock: MockUpstream
  let gw: TestGateway
  let jwksServer: Server
  let signer: Signer
  let tenant: Tenant

  beforeAll(async () => {
    signer = await newSigner('e2e-url-key')
    jwksServer = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ keys: [signer.publicJwk] }))
    })
    await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks.json`
    mock = await startMockUpstream()
    gw = await startTestGateway({ env: { GATEWAY_JWKS_URL: url } })
    tenant = await tenantOf(gw)
  })

  afterAll(async () => {
    await gw?.close()
    await mock?.close()
    await new Promise<void>((resolve) => (jwksServer ? jwksServer.close(() => resolve()) : resolve()))
  })

  it('verifies tokens against the fetched JWKS', async () => {
    const reply = await chat(gw, mock, { 'x-gateway-api-key': await sign(signer, claims(tenant)) })
    expect(reply.status).toBe(200)
  })
})
