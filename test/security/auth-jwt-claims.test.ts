/**
 * JWT issuer and audience (issue 12, item 12), on the real gateway: an organisation that trusts an
 * identity provider's keys for this gateway only (`issuer`, `audience` in its JWT settings) refuses
 * tokens the same provider minted for another service, or another tenant of a shared JWKS minted.
 */
import { SignJWT, type JWTPayload } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'
import { newSigner, type Signer } from '../helpers/jwt-signer.js'

const ISSUER = 'https://login.idp.example/tenant-a/'

describe('JWT issuer and audience set through PUT /v1/admin/organisation/jwt', () => {
  let gw: TestGateway
  let mock: MockUpstream
  let signer: Signer
  let organisationId: string
  let workspace: string

  function sign(claims: JWTPayload): Promise<string> {
    return new SignJWT({
      gateway_oid: organisationId,
      gateway_workspace: workspace,
      scope: 'completions.write',
      sub: 'ada',
      exp: Math.floor(Date.now() / 1000) + 600,
      ...claims,
    })
      .setProtectedHeader({ alg: 'RS256', kid: signer.kid })
      .sign(signer.privateKey)
  }

  async function chat(token: string): Promise<{ status: number; body: any }> {
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': token, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }),
    })
    return { status: response.status, body: await response.json() }
  }

  beforeAll(async () => {
    signer = await newSigner('idp-key-1')
    mock = await startMockUpstream()
    gw = await startTestGateway()
    organisationId = (await gw.admin('GET', '/v1/admin/organisation')).body.id
    const created = await gw.admin('POST', '/v1/admin/workspaces', { name: 'jwt-claims' })
    workspace = created.body.slug
  })

  afterAll(async () => {
    await gw?.close()
    await mock?.close()
  })

  it('stores, shows and enforces the issuer and audience; a string audience is kept as a one-item list', async () => {
    const put = await gw.admin('PUT', '/v1/admin/organisation/jwt', { jwks: { keys: [signer.publicJwk] }, issuer: ISSUER, audience: 'llm-gateway' })
    expect(put.status).toBe(200)
    expect(put.body).toMatchObject({ object: 'jwt-settings', organisation_id: organisationId, issuer: ISSUER, audience: ['llm-gateway'] })
    const shown = await gw.admin('GET', '/v1/admin/organisation/jwt')
    expect(shown.body).toMatchObject({ issuer: ISSUER, audience: ['llm-gateway'], jwks_url: null })

    expect((await chat(await sign({ iss: ISSUER, aud: 'llm-gateway' }))).status).toBe(200)
    expect((await chat(await sign({ iss: ISSUER, aud: ['billing-api', 'llm-gateway'] }))).status).toBe(200)
  })

  it('refuses a token the same provider minted for another service (aud), or without aud', async () => {
    for (const claims of [{ iss: ISSUER, aud: 'billing-api' }, { iss: ISSUER, aud: ['billing-api'] }, { iss: ISSUER }]) {
      const reply = await chat(await sign(claims))
      expect(reply.status, JSON.stringify(claims)).toBe(401)
      expect(reply.body.error).toMatchObject({ type: 'authentication_error', code: 'GW_AUTH_TOKEN_INVALID' })
      expect(reply.body.error.message).toContain('aud')
    }
  })

  it('refuses a token of another issuer sharing the key set, or without iss, and never echoes the expected issuer', async () => {
    for (const claims of [{ iss: 'https://login.idp.example/tenant-b/', aud: 'llm-gateway' }, { aud: 'llm-gateway' }]) {
      const reply = await chat(await sign(claims))
      expect(reply.status, JSON.stringify(claims)).toBe(401)
      expect(reply.body.error.code).toBe('GW_AUTH_TOKEN_INVALID')
      expect(reply.body.error.message).toContain('iss')
      expect(reply.body.error.message).not.toContain(ISSUER)
    }
  })

  it('applies a change at once: a token admitted (and cached) before is refused after the audience changed', async () => {
    const token = await sign({ iss: ISSUER, aud: 'llm-gateway' })
    expect((await chat(token)).status).toBe(200)
    const put = await gw.admin('PUT', '/v1/admin/organisation/jwt', { jwks: { keys: [signer.publicJwk] }, issuer: ISSUER, audience: ['llm-gateway-v2'] })
    expect(put.status).toBe(200)
    expect((await chat(token)).status).toBe(401)
    // A PUT without issuer and audience requires neither any more.
    expect((await gw.admin('PUT', '/v1/admin/organisation/jwt', { jwks: { keys: [signer.publicJwk] } })).body).toMatchObject({ issuer: null, audience: null })
    expect((await chat(await sign({}))).status).toBe(200)
  })

  it('refuses malformed issuer and audience values with 400 and keeps the stored settings', async () => {
    await gw.admin('PUT', '/v1/admin/organisation/jwt', { jwks: { keys: [signer.publicJwk] }, issuer: ISSUER })
    for (const bad of [{ issuer: '' }, { issuer: 42 }, { audience: '' }, { audience: [] }, { audience: ['ok', 7] }, { audience: { aud: 'x' } }, { issuer: 'x'.repeat(2049) }]) {
      const reply = await gw.admin('PUT', '/v1/admin/organisation/jwt', { jwks: { keys: [signer.publicJwk] }, ...bad })
      expect(reply.status, JSON.stringify(bad)).toBe(400)
    }
    expect((await gw.admin('GET', '/v1/admin/organisation/jwt')).body).toMatchObject({ issuer: ISSUER, audience: null })
  })
})
