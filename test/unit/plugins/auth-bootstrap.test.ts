import { execFileSync } from 'node:child_process'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { DuckDbAdminStore } from '../../../adapters/embedded/duckdb-admin-store.js'
import { DuckDbDatabase } from '../../../adapters/embedded/duckdb-database.js'
import { InProcessChangeNotifier } from '../../../adapters/memory/in-process-change-notifier.js'
import type { OrganisationRecord } from '../../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../../core/channels.js'
import type { AdminStore } from '../../../core/ports.js'
import { ADMIN_KEY_SCOPES } from '../../../core/scopes.js'
import { hashSecret } from '../../../core/secrets.js'
import type { Logger } from '../../../core/service.js'
import { applyBootstrapJwt, bootstrapBanner, seedFirstStart } from '../../../plugins/auth/bootstrap.js'
import { authConfigSchema, type AuthConfig } from '../../../plugins/auth/config.js'

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} }
const ADMIN_KEY = 'gw-unit-admin-key-0123456789abcdef'
const JWKS = { keys: [{ kty: 'RSA', kid: 'k1', alg: 'RS256', use: 'sig', n: 'sXch', e: 'AQAB' }] }

function bootstrapSettings(overrides: Record<string, unknown> = {}): AuthConfig['bootstrap'] {
  const parsed = authConfigSchema.safeParse({ bootstrap: { adminKey: ADMIN_KEY, print: false, ...overrides } })
  if (!parsed.success) throw new Error(JSON.stringify(parsed.error.issues))
  return parsed.data.bootstrap
}

let database: DuckDbDatabase
let store: AdminStore
let notifier: InProcessChangeNotifier
let published: string[]

beforeEach(async () => {
  database = new DuckDbDatabase({ path: ':memory:' })
  store = new DuckDbAdminStore(database)
  await store.start()
  notifier = new InProcessChangeNotifier()
  published = []
  notifier.subscribe(CHANGE_CHANNELS.organisations, (message) => published.push(message))
})

afterEach(async () => {
  await store.close()
  await database.close()
})

describe('seedFirstStart', () => {
  it('creates the organisation, its owner (admin of the default workspace), the workspace and the admin key once', async () => {
    expect(await seedFirstStart(store, bootstrapSettings(), Date.now(), silent)).toBeNull()
    const organisation = (await store.findFirstOrganisation()) as OrganisationRecord
    expect(organisation.jwt).toBeNull()
    const key = await store.findApiKeyByHash(hashSecret(ADMIN_KEY))
    expect(key).toMatchObject({
      type: 'organisation-service',
      organisationId: organisation.id,
      workspaceId: null,
      scopes: ADMIN_KEY_SCOPES,
      rateLimits: [],
      usageLimits: null,
      defaults: null,
      alertEmails: [],
      previousKeyHash: null,
      previousKeyExpiresAt: null,
      lastRotatedAt: null,
    })
    const owner = await store.findUser(organisation.id, key?.userId as string)
    expect(owner).toMatchObject({ role: 'owner', email: 'owner@localhost', passwordHash: null })
    const workspaces = await store.listWorkspaces(organisation.id, {}, { offset: 0, limit: 10 })
    expect(workspaces.total).toBe(1)
    expect(workspaces.items[0]).toMatchObject({ defaults: null, usageLimits: [], rateLimits: [] })
    const memberships = await store.listMembershipsOfUser(organisation.id, owner?.id as string)
    expect(memberships).toMatchObject([{ workspaceId: workspaces.items[0]?.id, role: 'admin' }])

    // A second start leaves everything alone.
    expect(await seedFirstStart(store, bootstrapSettings({ adminKey: '' }), Date.now(), silent)).toBeNull()
    expect((await store.findFirstOrganisation())?.id).toBe(organisation.id)
  })

  it('returns a generated key when none is configured', async () => {
    const secret = await seedFirstStart(store, bootstrapSettings({ adminKey: '' }), Date.now(), silent)
    expect(secret).toMatch(/^gw-/)
    expect(await store.findApiKeyByHash(hashSecret(secret as string))).not.toBeNull()
  })
})

describe('applyBootstrapJwt', () => {
  it('does nothing when no JWKS is configured (settings made through the Admin API survive)', async () => {
    await seedFirstStart(store, bootstrapSettings(), Date.now(), silent)
    expect(await applyBootstrapJwt(store, notifier, bootstrapSettings(), Date.now(), silent)).toBe(false)
    expect((await store.findFirstOrganisation())?.jwt).toBeNull()
    expect(published).toEqual([])
  })

  it('writes a JWKS URL with an audit entry, tells the other instances, and writes only when it changed', async () => {
    await seedFirstStart(store, bootstrapSettings(), Date.now(), silent)
    const url = 'https://issuer.example/.well-known/jwks.json'
    const settings = bootstrapSettings({ jwksUrl: url })
    const at = Date.parse('2030-02-03T04:05:06.789Z')
    expect(await applyBootstrapJwt(store, notifier, settings, at, silent)).toBe(true)
    const organisation = (await store.findFirstOrganisation()) as OrganisationRecord
    expect(organisation.jwt).toEqual({ jwksUrl: url, jwks: null, issuer: null, audience: null, updatedAt: '2030-02-03T04:05:06.789Z' })
    expect(published).toEqual([organisation.id])
    const entries = await store.listAuditEntries(organisation.id, { uri: '/v1/admin/organisation/jwt' }, { offset: 0, limit: 10 })
    expect(entries.total).toBe(1)
    expect(entries.items[0]).toMatchObject({
      method: 'PUT',
      resourceType: 'organisation',
      action: 'update',
      userType: 'api_key',
      userId: null,
      organisationId: organisation.id,
      resourceId: organisation.id,
      responseStatusCode: 200,
      requestBody: JSON.stringify({ jwks_url: url }),
    })

    // The same settings at the next start: no write, no notification.
    expect(await applyBootstrapJwt(store, notifier, settings, at + 1000, silent)).toBe(false)
    expect(published).toHaveLength(1)

    // A static JWKS replaces the URL.
    expect(await applyBootstrapJwt(store, notifier, bootstrapSettings({ jwks: JWKS }), at + 2000, silent)).toBe(true)
    const replaced = (await store.findFirstOrganisation()) as OrganisationRecord
    expect(replaced.jwt?.jwksUrl).toBeNull()
    expect(replaced.jwt?.jwks).toEqual(JWKS)
    expect(published).toHaveLength(2)
    const all = await store.listAuditEntries(organisation.id, { uri: '/v1/admin/organisation/jwt' }, { offset: 0, limit: 10 })
    expect(all.items.map((entry) => entry.requestBody)).toContain('{"jwks":"(from GATEWAY_JWKS)"}')

    // Key order does not count as a change.
    const reordered = { keys: [{ e: 'AQAB', n: 'sXch', use: 'sig', alg: 'RS256', kid: 'k1', kty: 'RSA' }] }
    expect(await applyBootstrapJwt(store, notifier, bootstrapSettings({ jwks: reordered }), at + 3000, silent)).toBe(false)
  })

  it('writes the issuer and audiences (GATEWAY_JWT_ISSUER / GATEWAY_JWT_AUDIENCE) with the JWKS, and again when only they change', async () => {
    await seedFirstStart(store, bootstrapSettings(), Date.now(), silent)
    const url = 'https://issuer.example/.well-known/jwks.json'
    const at = Date.parse('2030-02-03T04:05:06.789Z')
    const full = bootstrapSettings({ jwksUrl: url, jwtIssuer: 'https://issuer.example/', jwtAudience: ['gateway', 'gateway-eu'] })
    expect(await applyBootstrapJwt(store, notifier, full, at, silent)).toBe(true)
    const organisation = (await store.findFirstOrganisation()) as OrganisationRecord
    expect(organisation.jwt).toEqual({
      jwksUrl: url,
      jwks: null,
      issuer: 'https://issuer.example/',
      audience: ['gateway', 'gateway-eu'],
      updatedAt: '2030-02-03T04:05:06.789Z',
    })
    const entries = await store.listAuditEntries(organisation.id, { uri: '/v1/admin/organisation/jwt' }, { offset: 0, limit: 10 })
    expect(JSON.parse(entries.items[0]?.requestBody ?? '')).toEqual({ jwks_url: url, issuer: 'https://issuer.example/', audience: ['gateway', 'gateway-eu'] })
    expect(await applyBootstrapJwt(store, notifier, full, at + 1000, silent)).toBe(false)
    expect(published).toHaveLength(1)

    // The same JWKS with another audience list, then without an issuer: each is a change.
    expect(await applyBootstrapJwt(store, notifier, bootstrapSettings({ jwksUrl: url, jwtIssuer: 'https://issuer.example/', jwtAudience: ['gateway'] }), at + 2000, silent)).toBe(true)
    expect((await store.findFirstOrganisation())?.jwt?.audience).toEqual(['gateway'])
    expect(await applyBootstrapJwt(store, notifier, bootstrapSettings({ jwksUrl: url, jwtAudience: ['gateway'] }), at + 3000, silent)).toBe(true)
    expect((await store.findFirstOrganisation())?.jwt).toMatchObject({ issuer: null, audience: ['gateway'] })
    expect(published).toHaveLength(3)
  })
})

describe('bootstrapBanner', () => {
  /** The arguments each curl command of the banner passes when pasted into bash (curl replaced by a printer). */
  function pastedCurlArguments(banner: string): string[][] {
    const commands = banner.split('\n').filter((line) => line.startsWith('   ') || line.startsWith('     ')).join('\n')
    const script = `curl() { printf '%s\\n' "$@"; printf -- '----\\n'; }\n${commands}\n`
    const output = execFileSync('bash', ['-c', script], { env: { PATH: process.env.PATH ?? '', OPENAI_API_KEY: 'sk-from-env' }, encoding: 'utf8' })
    return output.split('----\n').filter((block) => block.length > 0).map((block) => block.trimEnd().split('\n'))
  }

  it('prints copy-paste commands that bash runs as intended, the provider key taken from $OPENAI_API_KEY', () => {
    const banner = bootstrapBanner('gw-secret-123', 'http://localhost:8787')
    const [workspace, key, chat] = pastedCurlArguments(banner)
    expect(workspace).toEqual(expect.arrayContaining(['http://localhost:8787/v1/admin/workspaces', 'x-gateway-api-key: gw-secret-123', '{"name":"my-workspace"}']))
    expect(key).toEqual(expect.arrayContaining(['http://localhost:8787/v1/api-keys/workspace/service', 'x-gateway-api-key: gw-secret-123']))
    expect(JSON.parse(key?.at(-1) ?? '')).toMatchObject({ name: 'my-app', scopes: ['completions.write'] })
    expect(chat).toEqual(expect.arrayContaining(['http://localhost:8787/v1/chat/completions', 'x-gateway-provider: openai', 'authorization: Bearer sk-from-env']))
    expect(JSON.parse(chat?.at(-1) ?? '')).toMatchObject({ model: 'gpt-4o-mini' })
  })
})
