import { randomUUID } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { generateSecret, SignJWT, type JWTPayload } from 'jose'
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { UndiciOutboundFetch } from '../../../adapters/providers/undici-outbound-fetch.js'
import { DuckDbAdminStore } from '../../../adapters/embedded/duckdb-admin-store.js'
import { DuckDbDatabase } from '../../../adapters/embedded/duckdb-database.js'
import { InProcessChangeNotifier } from '../../../adapters/memory/in-process-change-notifier.js'
import type { AuditEntry, BootstrapSeed, JsonWebKeySet, JwtSettings, OrganisationRecord } from '../../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../../core/channels.js'
import { ClientAbort, RequestContext, type Principal } from '../../../core/context.js'
import { GatewayError } from '../../../core/errors.js'
import type { AdminStore, OutboundFetch } from '../../../core/ports.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../../core/routes.js'
import type { Logger } from '../../../core/service.js'
import { authConfigSchema } from '../../../plugins/auth/config.js'
import { parseJwtHeader } from '../../../plugins/auth/jwt-verifier.js'
import { AuthPlugin } from '../../../plugins/auth/plugin.js'
import { jwksOf, newSigner, type Signer } from '../../helpers/jwt-signer.js'

const chatRoute = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec
const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} }
const ADMIN_KEY = 'gw-unit-admin-key-0123456789abcdef'

const nowSeconds = (): number => Math.floor(Date.now() / 1000)

async function sign(signer: Signer, claims: JWTPayload, header: { kid?: string | null } = {}): Promise<string> {
  const kid = header.kid === undefined ? signer.kid : header.kid
  const jwt = new SignJWT(claims).setProtectedHeader(kid === null ? { alg: 'RS256', typ: 'JWT' } : { alg: 'RS256', typ: 'JWT', kid })
  return jwt.sign(signer.privateKey)
}

function encodePart(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url')
}

/** A JWKS served by a real HTTP server on loopback; `keys` can be swapped and fetches are counted. */
interface JwksServer {
  readonly url: string
  keys: JsonWebKeySet
  status: number
  fetches: number
  close(): Promise<void>
}

async function startJwksServer(keys: JsonWebKeySet): Promise<JwksServer> {
  let server: Server
  const state: JwksServer = {
    url: '',
    keys,
    status: 200,
    fetches: 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
  server = createServer((_req, res) => {
    state.fetches += 1
    res.writeHead(state.status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(state.status === 200 ? state.keys : { error: 'down' }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return Object.assign(state, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json` })
}

/** `createdAt` orders organisations: the oldest is the one a token without an organisation claim names. */
function seed(name: string, createdAt: string): BootstrapSeed {
  const organisationId = randomUUID()
  const ownerId = randomUUID()
  const workspaceId = randomUUID()
  const now = createdAt
  return {
    organisation: { id: organisationId, name, createdAt: now, jwt: null },
    owner: {
      id: ownerId,
      organisationId,
      email: `owner-${organisationId.slice(0, 8)}@example.test`,
      firstName: 'Owner',
      lastName: '',
      role: 'owner',
      passwordHash: null,
      createdAt: now,
      lastUpdatedAt: now,
    },
    workspace: {
      id: workspaceId,
      slug: `ws-${organisationId.slice(0, 8)}`,
      organisationId,
      name: 'Default',
      description: null,
      defaults: null,
      usageLimits: [],
      rateLimits: [],
      createdAt: now,
      lastUpdatedAt: now,
    },
    membership: { workspaceId, userId: ownerId, organisationId, role: 'admin', createdAt: now, lastUpdatedAt: now },
    adminKey: {
      id: randomUUID(),
      keyHash: randomUUID().replaceAll('-', '').padEnd(64, '0'),
      maskedKey: 'gw********abc',
      name: 'Admin',
      description: null,
      type: 'organisation-service',
      organisationId,
      workspaceId: null,
      userId: ownerId,
      scopes: ['workspaces.read'],
      status: 'active',
      expiresAt: null,
      creationMode: 'auto',
      rateLimits: [],
      usageLimits: null,
      defaults: null,
      alertEmails: [],
      previousKeyHash: null,
      previousKeyExpiresAt: null,
      lastRotatedAt: null,
      createdAt: now,
      lastUpdatedAt: now,
    },
  }
}

function audit(organisationId: string): AuditEntry {
  return {
    id: randomUUID(),
    timestamp: new Date().toISOString(),
    organisationId,
    workspaceId: null,
    userId: null,
    userType: 'api_key',
    apiKeyId: null,
    method: 'PUT',
    uri: '/v1/admin/organisation/jwt',
    requestId: randomUUID(),
    requestBody: null,
    queryParams: '{}',
    responseStatusCode: 200,
    resourceType: 'organisation',
    action: 'update',
    resourceId: organisationId,
    clientIp: null,
  }
}

let database: DuckDbDatabase
let store: AdminStore
let notifier: InProcessChangeNotifier
let plugin: AuthPlugin
const clock = { offsetMs: 0, now: () => Date.now() + clock.offsetMs }
let first: BootstrapSeed
let second: BootstrapSeed
let signer: Signer
let otherSigner: Signer

/** JWT settings to store; issuer and audience default to not set. */
type JwtSettingsInput = Omit<JwtSettings, 'updatedAt' | 'issuer' | 'audience'> & Partial<Pick<JwtSettings, 'issuer' | 'audience'>>

async function setJwt(organisationId: string, settings: JwtSettingsInput | null): Promise<void> {
  const organisation = (await store.findOrganisation(organisationId)) as OrganisationRecord
  const jwt = settings === null ? null : { issuer: null, audience: null, ...settings, updatedAt: new Date().toISOString() }
  await store.write(audit(organisationId), (writer) => writer.updateOrganisation({ ...organisation, jwt }))
  notifier.publish(CHANGE_CHANNELS.organisations, organisationId)
}

function newPlugin(overrides: Record<string, unknown> = {}, outbound: OutboundFetch | null = null): AuthPlugin {
  const parsed = authConfigSchema.safeParse({ bootstrap: { adminKey: ADMIN_KEY, print: false }, ...overrides })
  if (!parsed.success) throw new Error(JSON.stringify(parsed.error.issues))
  return new AuthPlugin(parsed.data, store, notifier, clock, silent, outbound)
}

function makeCtx(headers: Record<string, string>): RequestContext {
  return new RequestContext({
    requestId: randomUUID(),
    traceId: 'trace',
    receivedAt: Date.now(),
    startedAt: 0,
    method: chatRoute.method,
    path: chatRoute.pattern,
    query: '',
    headers,
    clientIp: null,
    route: chatRoute,
    params: {},
    signal: new ClientAbort(),
  })
}

async function authenticate(token: string, using: 'x-gateway-api-key' | 'authorization' = 'x-gateway-api-key', on = plugin): Promise<Principal | GatewayError> {
  const ctx = makeCtx(using === 'authorization' ? { authorization: `Bearer ${token}` } : { 'x-gateway-api-key': token })
  const result = await on.onRequest(ctx)
  if (result !== undefined) return result
  return ctx.principal as Principal
}

async function refusal(token: string, on = plugin): Promise<GatewayError> {
  const result = await authenticate(token, 'x-gateway-api-key', on)
  expect(result).toBeInstanceOf(GatewayError)
  return result as GatewayError
}

function claims(extra: JWTPayload = {}): JWTPayload {
  return {
    gateway_oid: first.organisation.id,
    gateway_workspace: first.workspace.slug,
    scope: 'completions.write',
    sub: 'user-123',
    exp: nowSeconds() + 600,
    ...extra,
  }
}

beforeAll(async () => {
  signer = await newSigner('key-1')
  otherSigner = await newSigner('key-other')
})

beforeEach(async () => {
  clock.offsetMs = 0
  database = new DuckDbDatabase({ path: ':memory:' })
  store = new DuckDbAdminStore(database)
  await store.start()
  notifier = new InProcessChangeNotifier()
  first = seed('First', '2024-01-01T00:00:00.000Z')
  second = seed('Second', '2024-01-02T00:00:00.000Z')
  await store.bootstrap(first)
  await store.bootstrap(second)
  plugin = newPlugin()
  await plugin.start()
  await setJwt(first.organisation.id, { jwksUrl: null, jwks: jwksOf(signer) })
})

afterEach(async () => {
  await plugin.close()
  await store.close()
  await database.close()
})

describe('parseJwtHeader', () => {
  it('recognises a JWS compact token and nothing else', async () => {
    expect(parseJwtHeader(await sign(signer, claims()))).toEqual({ alg: 'RS256', kid: 'key-1' })
    expect(parseJwtHeader('gw-abc_DEF-123')).toBeNull()
    expect(parseJwtHeader('a.b')).toBeNull()
    expect(parseJwtHeader('a.b.c.d')).toBeNull()
    expect(parseJwtHeader(`${encodePart({ kid: 'x' })}.${encodePart({})}.sig`)).toBeNull()
    expect(parseJwtHeader(`${encodePart({ alg: 'RS256' })}.${encodePart({})}.s+g`)).toBeNull()
    expect(parseJwtHeader('bm90IGpzb24.e30.c2ln')).toBeNull()
    expect(parseJwtHeader(`${encodePart({ alg: 'none' })}.${encodePart({})}.`)).toEqual({ alg: 'none', kid: undefined })
  })
})

describe('JWT authentication (static JWKS)', () => {
  it('admits a valid token as a workspace-user principal with its scopes', async () => {
    const principal = await authenticate(await sign(signer, claims({ email_id: 'ada@example.test', scope: 'completions.write logs.view' })))
    expect(principal).toEqual({
      kind: 'jwt',
      keyId: 'ada@example.test',
      keyType: 'workspace-user',
      organisationId: first.organisation.id,
      workspaceId: first.workspace.id,
      userId: null,
      scopes: new Set(['completions.write', 'logs.view']),
      credentialHeader: 'x-gateway-api-key',
      // A JWT has no API key: only its workspace's limits apply.
      limitSubjects: [{ kind: 'workspace', id: first.workspace.id, label: `workspace ${first.workspace.slug}`, rateLimits: [], usageLimits: [] }],
      // Requests without x-gateway-config take the workspace's default config (none here).
      defaultConfig: null,
    })
  })

  it('accepts the token as Authorization: Bearer and records that header', async () => {
    const token = await sign(signer, claims())
    const principal = (await authenticate(token, 'authorization')) as Principal
    expect(principal.credentialHeader).toBe('authorization')
    // The cached principal is reused with the header of the new request.
    expect(((await authenticate(token)) as Principal).credentialHeader).toBe('x-gateway-api-key')
  })

  it('gives concurrent first uses of one token under both headers one shared verification, each with its own header', async () => {
    const token = await sign(signer, claims())
    const [viaKey, viaBearer] = await Promise.all([authenticate(token), authenticate(token, 'authorization')])
    expect((viaKey as Principal).credentialHeader).toBe('x-gateway-api-key')
    expect((viaBearer as Principal).credentialHeader).toBe('authorization')
  })

  it('answers a verified token from the cache with a plain value, no promise', async () => {
    const token = await sign(signer, claims())
    expect(await authenticate(token)).not.toBeInstanceOf(GatewayError)
    const ctx = makeCtx({ 'x-gateway-api-key': token })
    expect(plugin.onRequest(ctx)).toBeUndefined()
    expect((ctx.principal as Principal).kind).toBe('jwt')
  })

  it('strips the gateway. prefix and reads scope as a string or an array, and scopes as an array', async () => {
    const fromString = (await authenticate(await sign(signer, claims({ scope: 'gateway.completions.write  gateway.logs.view' })))) as Principal
    expect([...fromString.scopes]).toEqual(['completions.write', 'logs.view'])
    const fromArray = (await authenticate(await sign(signer, claims({ scope: ['gateway.completions.write', 'prompts.render'] })))) as Principal
    expect([...fromArray.scopes]).toEqual(['completions.write', 'prompts.render'])
    const fromScopes = (await authenticate(await sign(signer, claims({ scope: undefined, scopes: ['gateway.analytics.view'] })))) as Principal
    expect([...fromScopes.scopes]).toEqual(['analytics.view'])
    const none = (await authenticate(await sign(signer, claims({ scope: undefined })))) as Principal
    expect(none.scopes.size).toBe(0)
  })

  it('refuses a malformed scope claim', async () => {
    const error = await refusal(await sign(signer, claims({ scope: 42 })))
    expect(error.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(error.message).toContain('scope')
    expect((await refusal(await sign(signer, claims({ scopes: ['ok', 7] })))).code).toBe('GW_AUTH_TOKEN_INVALID')
  })

  it('takes the identity from email_id, then sub, then uid', async () => {
    const identity = async (extra: JWTPayload) => ((await authenticate(await sign(signer, claims({ sub: undefined, ...extra })))) as Principal).keyId
    expect(await identity({ email_id: 'e@x.test', sub: 's', uid: 'u' })).toBe('e@x.test')
    expect(await identity({ sub: 's', uid: 'u' })).toBe('s')
    expect(await identity({ uid: 'u' })).toBe('u')
    expect(await identity({})).toBe('jwt')
  })

  it('reads organisation_id and workspace_slug, letting gateway_oid and gateway_workspace win', async () => {
    const fallback = (await authenticate(
      await sign(signer, claims({ gateway_oid: undefined, gateway_workspace: undefined, organisation_id: first.organisation.id, workspace_slug: first.workspace.slug })),
    )) as Principal
    expect(fallback.organisationId).toBe(first.organisation.id)
    expect(fallback.workspaceId).toBe(first.workspace.id)
    const winning = (await authenticate(await sign(signer, claims({ organisation_id: second.organisation.id, workspace_slug: 'nope' })))) as Principal
    expect(winning.organisationId).toBe(first.organisation.id)
    expect(winning.workspaceId).toBe(first.workspace.id)
    // A workspace may also be named by its UUID.
    const byId = (await authenticate(await sign(signer, claims({ gateway_workspace: first.workspace.id })))) as Principal
    expect(byId.workspaceId).toBe(first.workspace.id)
  })

  it('uses the first organisation when the token names none', async () => {
    const principal = (await authenticate(await sign(signer, claims({ gateway_oid: undefined })))) as Principal
    expect(principal.organisationId).toBe(first.organisation.id)
  })

  it('refuses an expired token with GW_AUTH_TOKEN_EXPIRED, tolerating 5 s of clock skew', async () => {
    const expired = await refusal(await sign(signer, claims({ exp: nowSeconds() - 60 })))
    expect(expired.status).toBe(401)
    expect(expired.code).toBe('GW_AUTH_TOKEN_EXPIRED')
    const skewed = await authenticate(await sign(signer, claims({ exp: nowSeconds() - 2 })))
    expect(skewed).not.toBeInstanceOf(GatewayError)
  })

  it('stops admitting a cached token once it expired', async () => {
    const token = await sign(signer, claims({ exp: nowSeconds() + 30 }))
    expect(await authenticate(token)).not.toBeInstanceOf(GatewayError)
    clock.offsetMs = 60_000
    expect((await refusal(token)).code).toBe('GW_AUTH_TOKEN_EXPIRED')
  })

  it('refuses a token whose nbf is in the future, and admits it once nbf passed', async () => {
    const token = await sign(signer, claims({ nbf: nowSeconds() + 120 }))
    const error = await refusal(token)
    expect(error.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(error.message).toContain('nbf')
    clock.offsetMs = 180_000
    expect(await authenticate(token)).not.toBeInstanceOf(GatewayError)
  })

  it('refuses a token without exp', async () => {
    const error = await refusal(await sign(signer, claims({ exp: undefined })))
    expect(error.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(error.message).toContain('exp')
  })

  it('refuses a token without kid, even when the JWKS has a single key', async () => {
    const error = await refusal(await sign(signer, claims(), { kid: null }))
    expect(error.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(error.message).toContain('kid')
  })

  it('refuses a token whose kid is not in the JWKS', async () => {
    const error = await refusal(await sign(otherSigner, claims()))
    expect(error.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(error.message).toContain('kid')
    // Same kid, other key: the signature does not verify.
    const impostor = await sign({ ...otherSigner, kid: signer.kid }, claims())
    expect((await refusal(impostor)).message).toContain('signature')
  })

  it('refuses an HS256 token signed with a secret', async () => {
    const secret = await generateSecret('HS256')
    const token = await new SignJWT(claims()).setProtectedHeader({ alg: 'HS256', kid: signer.kid }).sign(secret)
    const error = await refusal(token)
    expect(error.status).toBe(401)
    expect(error.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(error.message).toContain('RS256')
  })

  it('refuses an unsigned (alg none) token', async () => {
    const token = `${encodePart({ alg: 'none', kid: signer.kid })}.${encodePart(claims())}.`
    const error = await refusal(token)
    expect(error.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(error.message).toContain('RS256')
  })

  it('refuses a token whose payload was changed after signing', async () => {
    const [header, , signature] = (await sign(signer, claims())).split('.')
    const tampered = `${header}.${encodePart(claims({ scope: 'completions.write workspaces.delete' }))}.${signature}`
    const error = await refusal(tampered)
    expect(error.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(error.message).toContain('signature')
    expect(error.message).not.toContain(tampered)
  })

  it('refuses a malformed token that still looks like a JWT', async () => {
    const error = await refusal(`${encodePart({ alg: 'RS256', kid: 'key-1' })}.bm90IGpzb24.c2ln`)
    expect(error.code).toBe('GW_AUTH_TOKEN_INVALID')
  })

  it('refuses a token of another organisation', async () => {
    // Unknown organisation id, and a non-UUID one.
    expect((await refusal(await sign(signer, claims({ gateway_oid: randomUUID() })))).message).toContain('unknown organisation')
    expect((await refusal(await sign(signer, claims({ gateway_oid: 'not-a-uuid' })))).message).toContain('unknown organisation')
    // The second organisation trusts another key: the first one's key does not admit into it.
    await setJwt(second.organisation.id, { jwksUrl: null, jwks: jwksOf(otherSigner) })
    const crossed = await refusal(await sign(signer, claims({ gateway_oid: second.organisation.id, gateway_workspace: second.workspace.slug })))
    expect(crossed.code).toBe('GW_AUTH_TOKEN_INVALID')
    // And its own key admits into its own workspace only.
    const own = (await authenticate(await sign(otherSigner, claims({ gateway_oid: second.organisation.id, gateway_workspace: second.workspace.slug })))) as Principal
    expect(own.organisationId).toBe(second.organisation.id)
    const foreignWorkspace = await refusal(await sign(otherSigner, claims({ gateway_oid: second.organisation.id, gateway_workspace: first.workspace.slug })))
    expect(foreignWorkspace.message).toContain('unknown workspace')
  })

  it('refuses an unknown or missing workspace', async () => {
    expect((await refusal(await sign(signer, claims({ gateway_workspace: 'ws-nope' })))).message).toContain('unknown workspace')
    expect((await refusal(await sign(signer, claims({ gateway_workspace: undefined })))).message).toContain('no workspace')
  })

  it('refuses tokens of an organisation without JWT settings', async () => {
    const error = await refusal(await sign(signer, claims({ gateway_oid: second.organisation.id, gateway_workspace: second.workspace.slug })))
    expect(error.status).toBe(401)
    expect(error.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(error.message).toBe('JWT authentication is not configured for this organisation')
  })

  it('drops cached tokens when the organisation JWT settings change (change notification)', async () => {
    const token = await sign(signer, claims())
    expect(await authenticate(token)).not.toBeInstanceOf(GatewayError)
    await setJwt(first.organisation.id, null)
    expect((await refusal(token)).message).toBe('JWT authentication is not configured for this organisation')
    await setJwt(first.organisation.id, { jwksUrl: null, jwks: jwksOf(otherSigner) })
    expect((await refusal(token)).code).toBe('GW_AUTH_TOKEN_INVALID')
  })

  it('drops cached tokens of a deleted workspace (change notification)', async () => {
    const token = await sign(signer, claims())
    expect(await authenticate(token)).not.toBeInstanceOf(GatewayError)
    await store.write({ ...audit(first.organisation.id), resourceType: 'workspace', action: 'delete' }, (writer) =>
      writer.deleteWorkspace(first.organisation.id, first.workspace.id))
    notifier.publish(CHANGE_CHANNELS.workspaces, first.workspace.id)
    expect((await refusal(token)).message).toContain('unknown workspace')
  })

  it('keeps admitting a verified token while the store is down, and fails closed (503) for others', async () => {
    const token = await sign(signer, claims())
    expect(await authenticate(token)).not.toBeInstanceOf(GatewayError)
    const fresh = newPlugin()
    await store.close()
    expect(await authenticate(token)).not.toBeInstanceOf(GatewayError)
    const error = await refusal(await sign(signer, claims({ sub: 'someone-else' })), fresh)
    expect(error.status).toBe(503)
    expect(error.code).toBe('GW_AUTH_UNAVAILABLE')
    await store.start()
  })
})

describe('JWT issuer and audience (organisation JWT settings)', () => {
  const ISSUER = 'https://idp.example.test/'

  it('ignores iss and aud when the settings name neither', async () => {
    expect(await authenticate(await sign(signer, claims({ iss: 'anyone', aud: 'anything' })))).not.toBeInstanceOf(GatewayError)
  })

  it('admits a token whose iss equals the issuer, and refuses one without iss or with another', async () => {
    await setJwt(first.organisation.id, { jwksUrl: null, jwks: jwksOf(signer), issuer: ISSUER })
    expect(await authenticate(await sign(signer, claims({ iss: ISSUER })))).not.toBeInstanceOf(GatewayError)
    const missing = await refusal(await sign(signer, claims()))
    expect(missing.status).toBe(401)
    expect(missing.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(missing.message).toBe('Invalid token: the JWT has no iss claim, and this organisation requires an issuer')
    for (const iss of ['https://idp.example.test', 'https://IDP.example.test/', 'https://evil.example/']) {
      const wrong = await refusal(await sign(signer, claims({ iss })))
      expect(wrong.code, iss).toBe('GW_AUTH_TOKEN_INVALID')
      expect(wrong.message, iss).toBe('Invalid token: iss is not the issuer this organisation accepts')
      // The expected issuer is not revealed.
      expect(wrong.message).not.toContain(ISSUER)
    }
  })

  it('admits a token whose aud (a string or an array) contains one of the audiences, and refuses the others', async () => {
    await setJwt(first.organisation.id, { jwksUrl: null, jwks: jwksOf(signer), audience: ['gateway', 'gateway-staging'] })
    expect(await authenticate(await sign(signer, claims({ aud: 'gateway' })))).not.toBeInstanceOf(GatewayError)
    expect(await authenticate(await sign(signer, claims({ aud: ['other-api', 'gateway-staging'] })))).not.toBeInstanceOf(GatewayError)
    const missing = await refusal(await sign(signer, claims()))
    expect(missing.code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(missing.message).toBe('Invalid token: the JWT has no aud claim, and this organisation requires an audience')
    for (const aud of ['other-api', ['other-api'], [], 'Gateway']) {
      const wrong = await refusal(await sign(signer, claims({ aud })))
      expect(wrong.code).toBe('GW_AUTH_TOKEN_INVALID')
      expect(wrong.message).toBe('Invalid token: aud does not name an audience this organisation accepts')
    }
  })

  it('enforces both together', async () => {
    await setJwt(first.organisation.id, { jwksUrl: null, jwks: jwksOf(signer), issuer: ISSUER, audience: ['gateway'] })
    expect(await authenticate(await sign(signer, claims({ iss: ISSUER, aud: 'gateway' })))).not.toBeInstanceOf(GatewayError)
    expect((await refusal(await sign(signer, claims({ iss: ISSUER })))).message).toContain('aud')
    expect((await refusal(await sign(signer, claims({ aud: 'gateway' })))).message).toContain('iss')
  })

  it('refuses a cached token once the settings start requiring an issuer (change notification)', async () => {
    const token = await sign(signer, claims())
    expect(await authenticate(token)).not.toBeInstanceOf(GatewayError)
    await setJwt(first.organisation.id, { jwksUrl: null, jwks: jwksOf(signer), issuer: ISSUER })
    expect((await refusal(token)).message).toContain('iss')
    // And admits tokens without iss again once the issuer is dropped.
    await setJwt(first.organisation.id, { jwksUrl: null, jwks: jwksOf(signer) })
    expect(await authenticate(token)).not.toBeInstanceOf(GatewayError)
  })
})

describe('JWT authentication (JWKS URL)', () => {
  let jwks: JwksServer

  beforeEach(async () => {
    jwks = await startJwksServer(jwksOf(signer))
  })

  afterEach(async () => {
    await jwks.close()
  })

  it('fetches the JWKS once and verifies tokens against it', async () => {
    await setJwt(first.organisation.id, { jwksUrl: jwks.url, jwks: null })
    expect(await authenticate(await sign(signer, claims({ sub: 'a' })))).not.toBeInstanceOf(GatewayError)
    expect(await authenticate(await sign(signer, claims({ sub: 'b' })))).not.toBeInstanceOf(GatewayError)
    expect(jwks.fetches).toBe(1)
  })

  it('picks up a key added by rotation: an unknown kid refetches the JWKS', async () => {
    await plugin.close()
    plugin = newPlugin({ jwt: { jwksCooldownMs: 0 } })
    await plugin.start()
    await setJwt(first.organisation.id, { jwksUrl: jwks.url, jwks: null })
    expect(await authenticate(await sign(signer, claims()))).not.toBeInstanceOf(GatewayError)
    expect(jwks.fetches).toBe(1)
    jwks.keys = jwksOf(signer, otherSigner)
    const rotated = (await authenticate(await sign(otherSigner, claims({ sub: 'after-rotation' })))) as Principal
    expect(rotated.keyId).toBe('after-rotation')
    expect(jwks.fetches).toBe(2)
    // A kid the issuer never published stays refused after the refetch.
    const unknown = await newSigner('key-never-published')
    expect((await refusal(await sign(unknown, claims()))).message).toContain('kid')
  })

  it('does not refetch for unknown kids during the cooldown', async () => {
    await setJwt(first.organisation.id, { jwksUrl: jwks.url, jwks: null })
    expect(await authenticate(await sign(signer, claims()))).not.toBeInstanceOf(GatewayError)
    jwks.keys = jwksOf(signer, otherSigner)
    expect((await refusal(await sign(otherSigner, claims()))).code).toBe('GW_AUTH_TOKEN_INVALID')
    expect(jwks.fetches).toBe(1)
  })

  it('fetches the JWKS through the outbound fetch, whose connect policy judges the address the name resolves to then', async () => {
    // The URL names a host, as a saved jwks_url would; loopback stands for an address the policy refuses
    // (what a name that re-resolves after it was checked, DNS rebinding, would lead to).
    const byName = jwks.url.replace('127.0.0.1', 'localhost')
    const seen: string[] = []
    const refusing = new UndiciOutboundFetch({
      isAddressAllowed: (address) => {
        seen.push(address)
        return false
      },
    })
    await plugin.close()
    plugin = newPlugin({}, refusing)
    await plugin.start()
    await setJwt(first.organisation.id, { jwksUrl: byName, jwks: null })
    expect((await refusal(await sign(signer, claims()))).code).toBe('GW_AUTH_UNAVAILABLE')
    expect(jwks.fetches).toBe(0)
    expect(seen).toContain('127.0.0.1')
    await refusing.close()

    const allowing = new UndiciOutboundFetch({ isAddressAllowed: () => true })
    await plugin.close()
    plugin = newPlugin({}, allowing)
    await plugin.start()
    await setJwt(first.organisation.id, { jwksUrl: byName, jwks: null })
    expect(await authenticate(await sign(signer, claims()))).not.toBeInstanceOf(GatewayError)
    expect(jwks.fetches).toBe(1)
    await allowing.close()
  })

  it('answers 503 when the JWKS cannot be fetched', async () => {
    jwks.status = 500
    await setJwt(first.organisation.id, { jwksUrl: jwks.url, jwks: null })
    const error = await refusal(await sign(signer, claims()))
    expect(error.status).toBe(503)
    expect(error.code).toBe('GW_AUTH_UNAVAILABLE')
  })
})
