import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { DuckDbAdminStore } from '../../../adapters/embedded/duckdb-admin-store.js'
import { DuckDbDatabase } from '../../../adapters/embedded/duckdb-database.js'
import { InProcessChangeNotifier } from '../../../adapters/memory/in-process-change-notifier.js'
import type { ApiKeyRecord, AuditEntry, OrganisationRecord, WorkspaceRecord } from '../../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../../core/channels.js'
import { ClientAbort, RequestContext, type Principal } from '../../../core/context.js'
import { GatewayError } from '../../../core/errors.js'
import type { AdminStore } from '../../../core/ports.js'
import { ADMIN_ROUTES, INFERENCE_ROUTES, type RouteSpec } from '../../../core/routes.js'
import { hashSecret, maskSecret, newApiKeySecret } from '../../../core/secrets.js'
import type { Logger } from '../../../core/service.js'
import { authConfigSchema } from '../../../plugins/auth/config.js'
import { admitKey, AuthPlugin, keyCacheEntry } from '../../../plugins/auth/plugin.js'

const chatRoute = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec
const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} }
const ADMIN_KEY = 'gw-unit-admin-key-0123456789abcdef'
const HOUR = 3_600_000

function keyRecord(secret: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  const now = new Date().toISOString()
  return {
    id: randomUUID(),
    keyHash: hashSecret(secret),
    maskedKey: maskSecret(secret),
    name: 'Workspace key',
    description: null,
    type: 'workspace-service',
    organisationId: randomUUID(),
    workspaceId: randomUUID(),
    userId: null,
    scopes: ['completions.write', 'gateway.logs.view'],
    status: 'active',
    expiresAt: null,
    creationMode: 'api',
    rateLimits: [],
    usageLimits: null,
    defaults: null,
    alertEmails: [],
    previousKeyHash: null,
    previousKeyExpiresAt: null,
    lastRotatedAt: null,
    createdAt: now,
    lastUpdatedAt: now,
    ...overrides,
  }
}

describe('keyCacheEntry and admitKey (rotation transition)', () => {
  const now = Date.parse('2030-01-01T00:00:00.000Z')
  const oldSecret = newApiKeySecret()
  const newSecret = newApiKeySecret()
  const rotated = keyRecord(newSecret, {
    previousKeyHash: hashSecret(oldSecret),
    previousKeyExpiresAt: new Date(now + HOUR).toISOString(),
    lastRotatedAt: new Date(now).toISOString(),
  })

  it('admits the current secret with no transition deadline', () => {
    const entry = keyCacheEntry(rotated, hashSecret(newSecret), now, 60_000, 2_000)
    expect(entry.acceptedUntilMs).toBe(Number.POSITIVE_INFINITY)
    expect(entry.freshUntil).toBe(now + 60_000)
    const principal = admitKey(entry, now + 2 * HOUR) as Principal
    expect(principal.keyId).toBe(rotated.id)
    expect([...principal.scopes]).toEqual(['completions.write', 'logs.view'])
  })

  it('admits the previous secret until the transition deadline, then calls it invalid', () => {
    const entry = keyCacheEntry(rotated, hashSecret(oldSecret), now, 60_000, 2_000)
    expect(entry.acceptedUntilMs).toBe(now + HOUR)
    expect(admitKey(entry, now + HOUR - 1)).not.toBeInstanceOf(GatewayError)
    expect((admitKey(entry, now + HOUR) as GatewayError).code).toBe('GW_AUTH_KEY_INVALID')
  })

  it('refuses the previous secret after the deadline, or without one, and remembers that briefly', () => {
    const late = keyCacheEntry(rotated, hashSecret(oldSecret), now + 2 * HOUR, 60_000, 2_000)
    expect(late.record).toBeNull()
    expect(late.freshUntil).toBe(now + 2 * HOUR + 2_000)
    expect((admitKey(late, now + 2 * HOUR) as GatewayError).code).toBe('GW_AUTH_KEY_INVALID')
    const noDeadline = keyCacheEntry({ ...rotated, previousKeyExpiresAt: null }, hashSecret(oldSecret), now, 60_000, 2_000)
    expect((admitKey(noDeadline, now) as GatewayError).code).toBe('GW_AUTH_KEY_INVALID')
  })

  it('refuses a hash that matches neither secret', () => {
    const entry = keyCacheEntry(rotated, hashSecret('gw-something-else'), now, 60_000, 2_000)
    expect((admitKey(entry, now) as GatewayError).code).toBe('GW_AUTH_KEY_INVALID')
  })

  it('reports an expired key as expired, whichever secret is used', () => {
    const expiring = { ...rotated, expiresAt: new Date(now + HOUR / 2).toISOString() }
    const current = keyCacheEntry(expiring, hashSecret(newSecret), now, 60_000, 2_000)
    const previous = keyCacheEntry(expiring, hashSecret(oldSecret), now, 60_000, 2_000)
    expect(admitKey(previous, now)).not.toBeInstanceOf(GatewayError)
    expect((admitKey(current, now + HOUR / 2) as GatewayError).code).toBe('GW_AUTH_KEY_EXPIRED')
    expect((admitKey(previous, now + HOUR / 2) as GatewayError).code).toBe('GW_AUTH_KEY_EXPIRED')
    // Past the transition deadline the old secret is invalid rather than expired.
    expect((admitKey(previous, now + HOUR) as GatewayError).code).toBe('GW_AUTH_KEY_INVALID')
  })
})

describe('AuthPlugin API keys', () => {
  let database: DuckDbDatabase
  let store: AdminStore
  let notifier: InProcessChangeNotifier
  let plugin: AuthPlugin
  let organisation: OrganisationRecord
  let workspace: WorkspaceRecord
  const clock = { offsetMs: 0, now: () => Date.now() + clock.offsetMs }

  function audit(action: string): AuditEntry {
    return {
      id: randomUUID(),
      timestamp: new Date().toISOString(),
      organisationId: organisation.id,
      workspaceId: workspace.id,
      userId: null,
      apiKeyId: null,
      userType: 'api_key',
      method: 'POST',
      uri: '/v1/api-keys',
      requestId: randomUUID(),
      requestBody: null,
      queryParams: '{}',
      responseStatusCode: 200,
      resourceType: 'api_key',
      action,
      resourceId: null,
      clientIp: null,
    }
  }

  async function authenticate(secret: string, headers?: Record<string, string>, route: RouteSpec = chatRoute): Promise<Principal | GatewayError> {
    const ctx = new RequestContext({
      requestId: randomUUID(),
      traceId: 'trace',
      receivedAt: Date.now(),
      startedAt: 0,
      method: route.method,
      path: route.pattern,
      query: '',
      headers: headers ?? { 'x-gateway-api-key': secret },
      clientIp: null,
      route,
      params: {},
      signal: new ClientAbort(),
    })
    const result = await plugin.onRequest(ctx)
    if (result !== undefined) return result
    return ctx.principal as Principal
  }

  async function insertKey(secret: string, overrides: Partial<ApiKeyRecord> = {}): Promise<ApiKeyRecord> {
    const key = keyRecord(secret, { organisationId: organisation.id, workspaceId: workspace.id, ...overrides })
    await store.write(audit('create'), (writer) => writer.insertApiKey(key))
    return key
  }

  /** What the Admin API's rotate does: new secret, old one kept until the deadline, caches told. */
  async function rotate(key: ApiKeyRecord, newSecret: string, transitionMs: number): Promise<ApiKeyRecord> {
    const now = new Date().toISOString()
    const rotated: ApiKeyRecord = {
      ...key,
      keyHash: hashSecret(newSecret),
      maskedKey: maskSecret(newSecret),
      previousKeyHash: key.keyHash,
      previousKeyExpiresAt: new Date(Date.now() + transitionMs).toISOString(),
      lastRotatedAt: now,
      lastUpdatedAt: now,
    }
    expect(await store.write(audit('rotate'), (writer) => writer.updateApiKey(rotated, key.lastUpdatedAt))).toBe(true)
    notifier.publish(CHANGE_CHANNELS.apiKeys, key.keyHash)
    return rotated
  }

  beforeEach(async () => {
    clock.offsetMs = 0
    database = new DuckDbDatabase({ path: ':memory:' })
    store = new DuckDbAdminStore(database)
    await store.start()
    notifier = new InProcessChangeNotifier()
    const parsed = authConfigSchema.safeParse({ bootstrap: { adminKey: ADMIN_KEY, print: false } })
    if (!parsed.success) throw new Error('bad config')
    plugin = new AuthPlugin(parsed.data, store, notifier, clock, silent)
    await plugin.start()
    organisation = (await store.findFirstOrganisation()) as OrganisationRecord
    const workspaces = await store.listWorkspaces(organisation.id, {}, { offset: 0, limit: 10 })
    workspace = workspaces.items[0] as WorkspaceRecord
  })

  afterEach(async () => {
    await plugin.close()
    await store.close()
    await database.close()
  })

  it('admits the bootstrap admin key from either header, and refuses a missing or unknown key', async () => {
    const viaHeader = (await authenticate(ADMIN_KEY)) as Principal
    expect(viaHeader.kind).toBe('api-key')
    expect(viaHeader.keyType).toBe('organisation-service')
    expect(viaHeader.credentialHeader).toBe('x-gateway-api-key')
    const viaBearer = (await authenticate('', { authorization: `Bearer ${ADMIN_KEY}` })) as Principal
    expect(viaBearer.credentialHeader).toBe('authorization')
    expect(((await authenticate('', {})) as GatewayError).code).toBe('GW_AUTH_KEY_MISSING')
    expect(((await authenticate('gw-not-a-key-at-all')) as GatewayError).code).toBe('GW_AUTH_KEY_INVALID')
  })

  it('lets public routes through without a credential', async () => {
    const publicRoute = ADMIN_ROUTES.find((route) => route.public) as RouteSpec
    expect(await authenticate('', {}, publicRoute)).toBeNull()
  })

  it('accepts the old secret during the transition period and refuses it afterwards', async () => {
    const oldSecret = newApiKeySecret()
    const newSecret = newApiKeySecret()
    const key = await insertKey(oldSecret)
    expect(((await authenticate(oldSecret)) as Principal).keyId).toBe(key.id)
    await rotate(key, newSecret, HOUR)
    expect(((await authenticate(newSecret)) as Principal).keyId).toBe(key.id)
    expect(((await authenticate(oldSecret)) as Principal).keyId).toBe(key.id)
    // The cached entry for the old secret stops at the deadline, even though it is still fresh.
    clock.offsetMs = HOUR + 1
    expect(((await authenticate(oldSecret)) as GatewayError).code).toBe('GW_AUTH_KEY_INVALID')
    expect(((await authenticate(newSecret)) as Principal).keyId).toBe(key.id)
  })

  it('refuses the old secret at once when the transition period already ended', async () => {
    const oldSecret = newApiKeySecret()
    const newSecret = newApiKeySecret()
    const key = await insertKey(oldSecret)
    await rotate(key, newSecret, -1)
    expect(((await authenticate(oldSecret)) as GatewayError).code).toBe('GW_AUTH_KEY_INVALID')
    expect(((await authenticate(newSecret)) as Principal).keyId).toBe(key.id)
  })

  it('drops a cached key on its change notification and on *', async () => {
    const secret = newApiKeySecret()
    const key = await insertKey(secret)
    expect(await authenticate(secret)).not.toBeInstanceOf(GatewayError)
    await store.write(audit('delete'), (writer) => writer.deleteApiKey(organisation.id, key.id))
    // Still cached until told.
    expect(await authenticate(secret)).not.toBeInstanceOf(GatewayError)
    notifier.publish(CHANGE_CHANNELS.apiKeys, key.keyHash)
    expect(((await authenticate(secret)) as GatewayError).code).toBe('GW_AUTH_KEY_INVALID')

    const other = newApiKeySecret()
    const otherKey = await insertKey(other)
    expect(await authenticate(other)).not.toBeInstanceOf(GatewayError)
    await store.write(audit('delete'), (writer) => writer.deleteApiKey(organisation.id, otherKey.id))
    notifier.publish(CHANGE_CHANNELS.apiKeys, '*')
    expect(((await authenticate(other)) as GatewayError).code).toBe('GW_AUTH_KEY_INVALID')
  })

  it('answers a cached key with a plain value (no promise: the pipeline runs it without await), a miss with a promise', async () => {
    const secret = newApiKeySecret()
    const key = await insertKey(secret)
    const context = (): RequestContext =>
      new RequestContext({
        requestId: randomUUID(),
        traceId: 'trace',
        receivedAt: Date.now(),
        startedAt: 0,
        method: chatRoute.method,
        path: chatRoute.pattern,
        query: '',
        headers: { 'x-gateway-api-key': secret },
        clientIp: null,
        route: chatRoute,
        params: {},
        signal: new ClientAbort(),
      })
    const miss = context()
    const first = plugin.onRequest(miss)
    expect(first).toBeInstanceOf(Promise)
    expect(await first).toBeUndefined()
    const hit = context()
    expect(plugin.onRequest(hit)).toBeUndefined()
    expect((hit.principal as Principal).keyId).toBe(key.id)
  })

  it('refuses an expired key', async () => {
    const secret = newApiKeySecret()
    await insertKey(secret, { expiresAt: new Date(Date.now() - 1000).toISOString() })
    expect(((await authenticate(secret)) as GatewayError).code).toBe('GW_AUTH_KEY_EXPIRED')
  })

  it('uses a cached key while the store is down and fails closed (503) otherwise', async () => {
    const secret = newApiKeySecret()
    await insertKey(secret)
    expect(await authenticate(secret)).not.toBeInstanceOf(GatewayError)
    await store.close()
    clock.offsetMs = 10 * 60_000
    expect(await authenticate(secret)).not.toBeInstanceOf(GatewayError)
    const unknown = (await authenticate(newApiKeySecret())) as GatewayError
    expect(unknown.status).toBe(503)
    expect(unknown.code).toBe('GW_AUTH_UNAVAILABLE')
    await store.start()
  })
})
