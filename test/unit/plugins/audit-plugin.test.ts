/**
 * The audit plugin against the real embedded admin store (DuckDB in memory): which requests it
 * records, how unauthenticated ones are filed, and what happens when the store refuses writes
 * (closing the store simulates an outage; starting it again ends it).
 */
import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { DuckDbAdminStore } from '../../../adapters/embedded/duckdb-admin-store.js'
import { DuckDbDatabase } from '../../../adapters/embedded/duckdb-database.js'
import type { AuditEntry } from '../../../core/admin-records.js'
import { ClientAbort, RequestContext, type AdminActionNote, type JsonObject, type Principal } from '../../../core/context.js'
import { ERRORS, gatewayError } from '../../../core/errors.js'
import type { AdminStore } from '../../../core/ports.js'
import { ADMIN_ROUTES } from '../../../core/routes.js'
import type { Logger } from '../../../core/service.js'
import { audit } from '../../../plugins/audit/index.js'
import { auditConfigSchema } from '../../../plugins/audit/config.js'
import { AuditPlugin } from '../../../plugins/audit/plugin.js'

interface LogLine {
  readonly level: 'debug' | 'info' | 'warn' | 'error'
  readonly fields: Record<string, any>
  readonly message: string | undefined
}

function recordingLogger(): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = []
  const at = (level: LogLine['level']) => (fields: object, message?: string) => {
    lines.push({ level, fields: fields as Record<string, any>, message })
  }
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}

const NOW = '2026-01-01T00:00:00.000Z'
const ORGANISATION_ID = randomUUID()
const WORKSPACE_ID = randomUUID()
const ADMIN_KEY_ID = randomUUID()

async function seed(store: AdminStore): Promise<void> {
  const ownerId = randomUUID()
  await store.bootstrap({
    organisation: { id: ORGANISATION_ID, name: 'Acme', createdAt: NOW, jwt: null },
    owner: { id: ownerId, organisationId: ORGANISATION_ID, email: 'owner@example.com', firstName: 'O', lastName: 'Wner', role: 'owner', passwordHash: null, createdAt: NOW, lastUpdatedAt: NOW },
    workspace: {
      id: WORKSPACE_ID,
      slug: 'ws-default-000001',
      organisationId: ORGANISATION_ID,
      name: 'Default',
      description: null,
      defaults: null,
      usageLimits: [],
      rateLimits: [],
      createdAt: NOW,
      lastUpdatedAt: NOW,
    },
    membership: { workspaceId: WORKSPACE_ID, userId: ownerId, organisationId: ORGANISATION_ID, role: 'admin', createdAt: NOW, lastUpdatedAt: NOW },
    adminKey: {
      id: ADMIN_KEY_ID,
      keyHash: 'a'.repeat(64),
      maskedKey: 'gw-a********aaaa',
      name: 'admin',
      description: null,
      type: 'organisation-service',
      organisationId: ORGANISATION_ID,
      workspaceId: null,
      userId: null,
      scopes: ['workspaces.create'],
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
      createdAt: NOW,
      lastUpdatedAt: NOW,
    },
  })
}

const ADMIN_PRINCIPAL: Principal = {
  kind: 'api-key',
  keyId: ADMIN_KEY_ID,
  keyType: 'organisation-service',
  organisationId: ORGANISATION_ID,
  workspaceId: null,
  userId: null,
  scopes: new Set(['workspaces.create']),
  credentialHeader: 'x-gateway-api-key',
  limitSubjects: [],
}

function routeOf(id: string) {
  const route = ADMIN_ROUTES.find((candidate) => candidate.id === id)
  if (route === undefined) throw new Error(`no route ${id}`)
  return route
}

interface Finished {
  readonly routeId?: string
  readonly path?: string
  readonly params?: Record<string, string>
  readonly status?: number
  readonly principal?: Principal | null
  readonly body?: JsonObject | null
  readonly note?: AdminActionNote | null
  readonly error?: ReturnType<typeof gatewayError> | null
  /** What auth kept of the presented credential (`ctx.gatewayCredential`). */
  readonly credential?: string | null
}

/** A JWS compact token with these claims and a signature nobody checks here. */
function unsignedJwt(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
  return `${part({ alg: 'RS256', kid: 'k1' })}.${part(claims)}.${Buffer.from('not a signature').toString('base64url')}`
}

/** The context of a finished admin request, as the pipeline hands it to onLog. */
function finished(options: Finished = {}): RequestContext {
  const route = routeOf(options.routeId ?? 'admin.workspaces.create')
  const ctx = new RequestContext({
    requestId: randomUUID(),
    traceId: randomUUID(),
    receivedAt: Date.now(),
    startedAt: performance.now(),
    method: route.method,
    path: options.path ?? route.pattern,
    query: '',
    headers: {},
    clientIp: '127.0.0.1',
    route,
    params: options.params ?? {},
    signal: new ClientAbort(),
  })
  ctx.principal = options.principal === undefined ? ADMIN_PRINCIPAL : options.principal
  ctx.body = options.body === undefined ? { name: 'team' } : options.body
  ctx.status = options.status ?? 403
  ctx.adminAction = options.note ?? null
  ctx.error = options.error ?? null
  ctx.gatewayCredential = options.credential ?? null
  return ctx
}

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 5_000
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

const ALL = { offset: 0, limit: 1000 }

describe('audit plugin', () => {
  let database: DuckDbDatabase
  let store: DuckDbAdminStore
  let logger: ReturnType<typeof recordingLogger>
  const plugins: AuditPlugin[] = []

  function plugin(config: Record<string, unknown> = {}): AuditPlugin {
    const made = audit.create(auditConfigSchema.parse(config), [store, logger]) as AuditPlugin
    plugins.push(made)
    return made
  }

  async function entries(): Promise<readonly AuditEntry[]> {
    return (await store.listAuditEntries(ORGANISATION_ID, {}, ALL)).items
  }

  beforeEach(async () => {
    database = new DuckDbDatabase({ path: ':memory:' })
    store = new DuckDbAdminStore(database)
    await store.start()
    await seed(store)
    logger = recordingLogger()
  })

  afterEach(async () => {
    for (const made of plugins.splice(0)) await made.close()
    await store.close()
    await database.close()
  })

  it('is an onLog plugin of the admin group that needs admin-api', () => {
    expect(audit.name).toBe('audit')
    expect(audit.phases).toEqual(['onLog'])
    expect(audit.groups).toEqual(['admin'])
    expect(audit.requires).toEqual(['admin-api'])
    expect(plugin()).toBeInstanceOf(AuditPlugin)
  })

  it('stores a refused audited request with its status, route facts and the caller', async () => {
    const auditPlugin = plugin()
    const ctx = finished({ status: 403, body: { name: 'team', key: 'gw-secret-secret-secret-secret-1234' } })
    expect(auditPlugin.onLog(ctx)).toBeUndefined()
    await until(async () => (await entries()).length === 1, 'the entry')
    const [entry] = await entries()
    expect(entry).toMatchObject({
      organisationId: ORGANISATION_ID,
      userId: ADMIN_KEY_ID,
      userType: 'api_key',
      method: 'POST',
      uri: '/v1/admin/workspaces',
      requestId: ctx.requestId,
      responseStatusCode: 403,
      resourceType: 'workspace',
      action: 'create',
      clientIp: '127.0.0.1',
    })
    expect(entry?.requestBody).not.toContain('gw-secret-secret-secret-secret-1234')
    expect(JSON.parse(entry?.requestBody ?? 'null').name).toBe('team')
  })

  it('uses what admin-api noted: workspace, resource, and skips requests it already audited', async () => {
    const auditPlugin = plugin()
    auditPlugin.onLog(
      finished({
        routeId: 'admin.workspaces.update',
        path: '/v1/admin/workspaces/ws-default-000001',
        params: { workspaceId: 'ws-default-000001' },
        status: 409,
        note: { audited: false, workspaceId: WORKSPACE_ID, resourceId: null, userId: null, organisationId: null },
      }),
    )
    auditPlugin.onLog(finished({ status: 200, note: { audited: true, workspaceId: WORKSPACE_ID, resourceId: 'ws-x', userId: null, organisationId: null } }))
    await until(async () => (await entries()).length === 1, 'the entry')
    await auditPlugin.close()
    const all = await entries()
    expect(all).toHaveLength(1)
    expect(all[0]).toMatchObject({ workspaceId: WORKSPACE_ID, resourceId: 'ws-default-000001', responseStatusCode: 409, action: 'update' })
  })

  it('ignores routes that change nothing (GET)', async () => {
    const auditPlugin = plugin()
    auditPlugin.onLog(finished({ routeId: 'admin.workspaces.list', status: 200, body: null }))
    auditPlugin.onLog(finished({ routeId: 'openapi.get', status: 200, body: null, principal: null }))
    await auditPlugin.close()
    expect(await entries()).toHaveLength(0)
  })

  it('files unauthenticated requests under the first organisation, looked up once', async () => {
    const lookups = vi.spyOn(store, 'findFirstOrganisation')
    const auditPlugin = plugin()
    auditPlugin.onLog(finished({ principal: null, status: 401 }))
    await until(async () => (await entries()).length === 1, 'the first entry')
    auditPlugin.onLog(finished({ principal: null, status: 401 }))
    await until(async () => (await entries()).length === 2, 'the second entry')
    expect(lookups).toHaveBeenCalledTimes(1)
    for (const entry of await entries()) expect(entry).toMatchObject({ organisationId: ORGANISATION_ID, userId: null, responseStatusCode: 401 })
  })

  it('files a refused JWT under the organisation it claims when that exists, as user_type user with its subject; never stores the token', async () => {
    const otherOrganisation = randomUUID()
    await store.bootstrap({
      organisation: { id: otherOrganisation, name: 'Other', createdAt: NOW, jwt: null },
      owner: { id: randomUUID(), organisationId: otherOrganisation, email: 'o@other.test', firstName: 'O', lastName: '', role: 'owner', passwordHash: null, createdAt: NOW, lastUpdatedAt: NOW },
      workspace: { id: randomUUID(), slug: 'ws-other', organisationId: otherOrganisation, name: 'Other', description: null, defaults: null, usageLimits: [], rateLimits: [], createdAt: NOW, lastUpdatedAt: NOW },
      membership: { workspaceId: randomUUID(), userId: randomUUID(), organisationId: otherOrganisation, role: 'admin', createdAt: NOW, lastUpdatedAt: NOW },
      adminKey: { ...(await store.findApiKey(ORGANISATION_ID, ADMIN_KEY_ID))!, id: randomUUID(), keyHash: 'b'.repeat(64), organisationId: otherOrganisation },
    })
    const lookups = vi.spyOn(store, 'findOrganisation')
    const auditPlugin = plugin()
    const token = unsignedJwt({ gateway_oid: otherOrganisation.toUpperCase(), sub: 'mallory@example.test', exp: 1 })
    const inOther = async () => (await store.listAuditEntries(otherOrganisation, {}, ALL)).items
    auditPlugin.onLog(finished({ principal: null, status: 401, credential: token }))
    await until(async () => (await inOther()).length === 1, 'the first entry in the claimed organisation')
    auditPlugin.onLog(finished({ principal: null, status: 401, credential: unsignedJwt({ organisation_id: otherOrganisation, uid: 'u-7' }) }))
    await until(async () => (await inOther()).length === 2, 'both entries in the claimed organisation')
    expect((await inOther()).map((entry) => [entry.userType, entry.userId, entry.apiKeyId, entry.responseStatusCode]).sort()).toEqual([
      ['user', 'mallory@example.test', null, 401],
      ['user', 'u-7', null, 401],
    ])
    expect(JSON.stringify(await inOther())).not.toContain(token.split('.')[1])
    expect(await entries()).toHaveLength(0)
    // An existing organisation is remembered: the second entry did not look it up again.
    expect(lookups).toHaveBeenCalledTimes(1)
  })

  it('files a refused JWT naming no existing organisation (or none) under the first organisation, still as its user', async () => {
    const auditPlugin = plugin()
    auditPlugin.onLog(finished({ principal: null, status: 401, credential: unsignedJwt({ gateway_oid: randomUUID(), email_id: 'eve@example.test' }) }))
    auditPlugin.onLog(finished({ principal: null, status: 401, credential: unsignedJwt({ gateway_oid: 'not-a-uuid' }) }))
    auditPlugin.onLog(finished({ principal: null, status: 401, credential: 'gw-not-a-jwt-just-a-bad-key' }))
    await until(async () => (await entries()).length === 3, 'three entries')
    const actors = (await entries()).map((entry) => [entry.organisationId, entry.userType, entry.userId])
    expect(actors).toHaveLength(3)
    expect(actors).toEqual(
      expect.arrayContaining([
        [ORGANISATION_ID, 'api_key', null],
        [ORGANISATION_ID, 'user', 'eve@example.test'],
        [ORGANISATION_ID, 'user', null],
      ]),
    )
  })

  it('ignores the credential of an authenticated request (its principal says who acted)', async () => {
    const auditPlugin = plugin()
    auditPlugin.onLog(finished({ status: 403, credential: unsignedJwt({ gateway_oid: randomUUID(), sub: 'someone-else' }) }))
    await until(async () => (await entries()).length === 1, 'the entry')
    expect((await entries())[0]).toMatchObject({ userType: 'api_key', userId: ADMIN_KEY_ID })
  })

  it('records a client abort before the reply as 499, or as the error it was about to get', async () => {
    const auditPlugin = plugin()
    auditPlugin.onLog(finished({ status: 0 }))
    auditPlugin.onLog(finished({ status: 0, error: gatewayError(ERRORS.GW_ADMIN_VALIDATION) }))
    await until(async () => (await entries()).length === 2, 'both entries')
    expect((await entries()).map((entry) => entry.responseStatusCode).sort()).toEqual([400, 499])
  })

  it('queues entries while the store is down and stores them, in order, once it is back', async () => {
    const auditPlugin = plugin({ retryInitialMs: 10, retryMaxMs: 40 })
    await store.close()
    const contexts = [finished({ status: 400 }), finished({ status: 401 }), finished({ status: 403 })]
    for (const ctx of contexts) {
      expect(() => auditPlugin.onLog(ctx)).not.toThrow()
    }
    await until(() => auditPlugin.queued === 3, 'three queued entries')
    expect(logger.lines.filter((line) => line.level === 'warn')).toHaveLength(1)
    // Let a few retries fail (backoff grows to the cap) before the store comes back.
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(auditPlugin.queued).toBe(3)
    await store.start()
    await until(() => auditPlugin.queued === 0, 'the queue to drain')
    const stored = await entries()
    expect(stored.map((entry) => entry.requestId).sort()).toEqual(contexts.map((ctx) => ctx.requestId).sort())
    expect(logger.lines.filter((line) => line.level === 'error')).toHaveLength(0)
  })

  it('logs entries that do not fit in the queue at error level, with their content', async () => {
    const auditPlugin = plugin({ maxQueue: 2, retryInitialMs: 60_000, retryMaxMs: 60_000 })
    await store.close()
    const contexts = [finished(), finished(), finished()]
    for (const ctx of contexts) auditPlugin.onLog(ctx)
    await until(() => logger.lines.some((line) => line.level === 'error'), 'the overflow to be logged')
    expect(auditPlugin.queued).toBe(2)
    const errors = logger.lines.filter((line) => line.level === 'error')
    expect(errors).toHaveLength(1)
    expect(errors[0]?.fields.auditEntry).toMatchObject({ method: 'POST', uri: '/v1/admin/workspaces', responseStatusCode: 403 })
    await store.start()
  })

  it('makes one last attempt on close(): stores what it can', async () => {
    const auditPlugin = plugin({ retryInitialMs: 60_000, retryMaxMs: 60_000 })
    await store.close()
    const ctx = finished({ status: 404 })
    auditPlugin.onLog(ctx)
    await until(() => auditPlugin.queued === 1, 'the queued entry')
    await store.start()
    await auditPlugin.close()
    expect((await entries()).map((entry) => entry.requestId)).toEqual([ctx.requestId])
    expect(logger.lines.filter((line) => line.level === 'error')).toHaveLength(0)
  })

  it('on close(), logs every entry the store still refuses at error level, with its content', async () => {
    const auditPlugin = plugin({ retryInitialMs: 60_000, retryMaxMs: 60_000 })
    await store.close()
    const contexts = [finished({ status: 400 }), finished({ status: 409 })]
    for (const ctx of contexts) auditPlugin.onLog(ctx)
    await auditPlugin.close()
    const lost = logger.lines.filter((line) => line.level === 'error').map((line) => line.fields.auditEntry?.requestId)
    expect(lost.sort()).toEqual(contexts.map((ctx) => ctx.requestId).sort())
    expect(auditPlugin.queued).toBe(0)
    await store.start()
    expect(await entries()).toHaveLength(0)
  })

  it('does not queue an entry the store rejects as invalid: it is logged at once', async () => {
    const auditPlugin = plugin({ retryInitialMs: 10 })
    // A fractional status is refused by the store itself (a GatewayError), not by an outage.
    auditPlugin.onLog(finished({ status: 400.5 }))
    await until(() => logger.lines.some((line) => line.level === 'error'), 'the rejection to be logged')
    expect(auditPlugin.queued).toBe(0)
    expect(logger.lines.find((line) => line.level === 'error')?.fields.auditEntry.responseStatusCode).toBe(400.5)
  })
})

describe('audit plugin backoff', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('doubles the retry delay after each failure up to retryMaxMs, and resets it after a success', async () => {
    vi.useFakeTimers()
    let down = true
    const attempts: number[] = []
    const stored: AuditEntry[] = []
    const start = Date.now()
    const fakeStore = {
      async recordAudit(entry: AuditEntry) {
        attempts.push(Date.now() - start)
        if (down) throw new Error('connection refused')
        stored.push(entry)
      },
      async findFirstOrganisation() {
        return { id: ORGANISATION_ID, name: 'Acme', createdAt: NOW, jwt: null }
      },
    } as unknown as AdminStore
    const logger = recordingLogger()
    const auditPlugin = new AuditPlugin(auditConfigSchema.parse({ retryInitialMs: 100, retryMaxMs: 400 }), fakeStore, logger)
    auditPlugin.onLog(finished())
    await vi.advanceTimersByTimeAsync(100 + 200 + 400 + 400 + 1)
    expect(attempts).toEqual([0, 100, 300, 700, 1100])
    down = false
    await vi.advanceTimersByTimeAsync(400)
    expect(stored).toHaveLength(1)
    expect(auditPlugin.queued).toBe(0)
    // After a success the next outage starts again from the initial delay.
    down = true
    attempts.length = 0
    const restart = Date.now() - start
    auditPlugin.onLog(finished())
    await vi.advanceTimersByTimeAsync(101)
    expect(attempts.map((at) => at - restart)).toEqual([0, 100])
    down = false
    await auditPlugin.close()
    expect(stored).toHaveLength(2)
  })
})
