/**
 * Revocation against reads in flight (issue 12, item 13): a key revoked, a JWKS replaced or a
 * workspace deleted while a store read for it is running must not be put back in the auth caches,
 * on this instance or on another one (change notifications over real Redis pub/sub). Concurrent
 * misses of one key share one store query.
 *
 * The store is the real DuckDB admin store; `HeldStore` only controls timing: a held read runs its
 * real query, then waits for `release()` before answering, so every ordering below is deterministic
 * (no sleeps, no timing thresholds).
 */
import { randomUUID } from 'node:crypto'
import { SignJWT, type JWTPayload } from 'jose'
import { afterEach, beforeAll, beforeEach, describe, expect, inject, it, vi } from 'vitest'
import { DuckDbAdminStore } from '../../adapters/embedded/duckdb-admin-store.js'
import { DuckDbDatabase } from '../../adapters/embedded/duckdb-database.js'
import { InProcessChangeNotifier } from '../../adapters/memory/in-process-change-notifier.js'
import { RedisChangeNotifier } from '../../adapters/redis/redis-change-notifier.js'
import type { ApiKeyRecord, AuditEntry, JsonWebKeySet, OrganisationRecord, WorkspaceRecord } from '../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import { ClientAbort, RequestContext, type Principal } from '../../core/context.js'
import { GatewayError } from '../../core/errors.js'
import type { AdminStore, ChangeNotifier } from '../../core/ports.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../core/routes.js'
import { issueApiKey, newApiKeySecret } from '../../core/secrets.js'
import type { Logger } from '../../core/service.js'
import { authConfigSchema } from '../../plugins/auth/config.js'
import { AuthPlugin } from '../../plugins/auth/plugin.js'
import { jwksOf, newSigner, type Signer } from '../helpers/jwt-signer.js'

const chatRoute = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec
const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} }
const ADMIN_KEY = 'gw-race-admin-key-0123456789abcdef'

type HeldMethod = 'findApiKeyByHash' | 'findWorkspace' | 'findOrganisation' | 'findFirstOrganisation'
const HELD_METHODS: ReadonlySet<string> = new Set<HeldMethod>(['findApiKeyByHash', 'findWorkspace', 'findOrganisation', 'findFirstOrganisation'])

interface Hold {
  /** Resolves once the held call's real query has answered (the answer is not delivered yet). */
  readonly reached: Promise<void>
  /** Lets the held call deliver its answer. */
  release(): void
}

/** The real store with its reads counted, and the next read of a method held on demand. */
class HeldStore {
  readonly calls: Record<HeldMethod, number> = { findApiKeyByHash: 0, findWorkspace: 0, findOrganisation: 0, findFirstOrganisation: 0 }
  readonly store: AdminStore
  readonly #holds = new Map<string, { reached: () => void; released: Promise<void> }>()

  constructor(real: AdminStore) {
    const gate = this
    this.store = new Proxy(real, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property, target)
        if (typeof value !== 'function') return value
        if (typeof property !== 'string' || !HELD_METHODS.has(property)) return value.bind(target)
        return async (...args: unknown[]) => {
          gate.calls[property as HeldMethod] += 1
          const answer: unknown = await value.apply(target, args)
          const hold = gate.#holds.get(property)
          if (hold !== undefined) {
            gate.#holds.delete(property)
            hold.reached()
            await hold.released
          }
          return answer
        }
      },
    })
  }

  /** Holds the next call of `method` after its real query answered. */
  hold(method: HeldMethod): Hold {
    let reached!: () => void
    let release!: () => void
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve))
    const released = new Promise<void>((resolve) => (release = resolve))
    this.#holds.set(method, { reached, released })
    return { reached: reachedPromise, release }
  }
}

function audit(organisationId: string, resourceType: string, action: string): AuditEntry {
  return {
    id: randomUUID(),
    timestamp: new Date().toISOString(),
    organisationId,
    workspaceId: null,
    userId: null,
    userType: 'api_key',
    apiKeyId: null,
    method: 'POST',
    uri: '/v1/test',
    requestId: randomUUID(),
    requestBody: null,
    queryParams: '{}',
    responseStatusCode: 200,
    resourceType,
    action,
    resourceId: null,
    clientIp: null,
  }
}

function newPlugin(store: AdminStore, notifier: ChangeNotifier): AuthPlugin {
  const parsed = authConfigSchema.safeParse({ bootstrap: { adminKey: ADMIN_KEY, print: false } })
  if (!parsed.success) throw new Error(JSON.stringify(parsed.error.issues))
  return new AuthPlugin(parsed.data, store, notifier, { now: () => Date.now() }, silent)
}

async function authenticate(plugin: AuthPlugin, credential: string): Promise<Principal | GatewayError> {
  const ctx = new RequestContext({
    requestId: randomUUID(),
    traceId: 'trace',
    receivedAt: Date.now(),
    startedAt: 0,
    method: chatRoute.method,
    path: chatRoute.pattern,
    query: '',
    headers: { 'x-gateway-api-key': credential },
    clientIp: null,
    route: chatRoute,
    params: {},
    signal: new ClientAbort(),
  })
  const result = await plugin.onRequest(ctx)
  return result ?? (ctx.principal as Principal)
}

function expectAdmitted(result: Principal | GatewayError): Principal {
  expect(result).not.toBeInstanceOf(GatewayError)
  return result as Principal
}

function expectRefused(result: Principal | GatewayError, code: string): GatewayError {
  expect(result).toBeInstanceOf(GatewayError)
  expect((result as GatewayError).code).toBe(code)
  return result as GatewayError
}

interface Fixture {
  readonly database: DuckDbDatabase
  readonly real: DuckDbAdminStore
  readonly held: HeldStore
  readonly organisation: OrganisationRecord
  readonly workspace: WorkspaceRecord
}

/** A seeded in-memory DuckDB store (first start through a throwaway plugin). */
async function fixture(): Promise<Fixture> {
  const database = new DuckDbDatabase({ path: ':memory:' })
  const real = new DuckDbAdminStore(database)
  await real.start()
  const seeder = newPlugin(real, new InProcessChangeNotifier())
  await seeder.start()
  await seeder.close()
  const organisation = (await real.findFirstOrganisation()) as OrganisationRecord
  const workspace = (await real.listWorkspaces(organisation.id, {}, { offset: 0, limit: 1 })).items[0] as WorkspaceRecord
  return { database, real, held: new HeldStore(real), organisation, workspace }
}

async function insertKey(f: Fixture): Promise<{ secret: string; key: ApiKeyRecord }> {
  const secret = newApiKeySecret()
  const { record } = issueApiKey(
    {
      name: 'race',
      description: null,
      type: 'workspace-service',
      organisationId: f.organisation.id,
      workspaceId: f.workspace.id,
      userId: null,
      scopes: ['completions.write'],
      expiresAt: null,
      creationMode: 'api',
      createdAt: new Date().toISOString(),
    },
    secret,
  )
  await f.real.write(audit(f.organisation.id, 'api_key', 'create'), (writer) => writer.insertApiKey(record))
  return { secret, key: record }
}

/** What the Admin API's delete does: remove the key, then tell every instance. */
async function revoke(f: Fixture, key: ApiKeyRecord, notifier: ChangeNotifier): Promise<void> {
  await f.real.write(audit(f.organisation.id, 'api_key', 'delete'), (writer) => writer.deleteApiKey(f.organisation.id, key.id))
  notifier.publish(CHANGE_CHANNELS.apiKeys, key.keyHash)
}

describe('API key cache: revocation during a lookup (one instance)', () => {
  let f: Fixture
  let notifier: InProcessChangeNotifier
  let plugin: AuthPlugin

  beforeEach(async () => {
    f = await fixture()
    notifier = new InProcessChangeNotifier()
    plugin = newPlugin(f.held.store, notifier)
    await plugin.start()
  })

  afterEach(async () => {
    await plugin.close()
    await f.real.close()
    await f.database.close()
  })

  it('does not cache a key revoked while its lookup was in flight: the next request asks the store and gets 401', async () => {
    const { secret, key } = await insertKey(f)
    const hold = f.held.hold('findApiKeyByHash')
    const inFlight = authenticate(plugin, secret)
    await hold.reached // the store answered "active"; the answer is not delivered yet
    await revoke(f, key, notifier)
    hold.release()
    // It started before the revocation: admitting it is fine. Caching what it read is not.
    expectAdmitted(await inFlight)
    const before = f.held.calls.findApiKeyByHash
    expectRefused(await authenticate(plugin, secret), 'GW_AUTH_KEY_INVALID')
    expect(f.held.calls.findApiKeyByHash).toBe(before + 1)
  })

  it('does not let a request made after the revocation join the lookup started before it', async () => {
    const { secret, key } = await insertKey(f)
    const hold = f.held.hold('findApiKeyByHash')
    const inFlight = authenticate(plugin, secret)
    await hold.reached
    await revoke(f, key, notifier)
    // The held lookup is still running; a new request must ask the store again.
    expectRefused(await authenticate(plugin, secret), 'GW_AUTH_KEY_INVALID')
    hold.release()
    expectAdmitted(await inFlight)
    expectRefused(await authenticate(plugin, secret), 'GW_AUTH_KEY_INVALID')
  })

  it('does not cache a key whose workspace changed while its lookup was in flight', async () => {
    const { secret } = await insertKey(f)
    const hold = f.held.hold('findWorkspace')
    const inFlight = authenticate(plugin, secret)
    await hold.reached
    const limited: WorkspaceRecord = { ...f.workspace, rateLimits: [{ type: 'requests', unit: 'rpm', value: 1 }], lastUpdatedAt: new Date().toISOString() }
    await f.real.write(audit(f.organisation.id, 'workspace', 'update'), async (writer) => {
      expect(await writer.updateWorkspace(limited, f.workspace.lastUpdatedAt)).toBe(true)
    })
    notifier.publish(CHANGE_CHANNELS.workspaces, f.workspace.id)
    hold.release()
    expect(expectAdmitted(await inFlight).limitSubjects.find((subject) => subject.kind === 'workspace')?.rateLimits).toEqual([])
    // The next request reads the key again and carries the workspace's new limit.
    const next = expectAdmitted(await authenticate(plugin, secret))
    expect(next.limitSubjects.find((subject) => subject.kind === 'workspace')?.rateLimits).toEqual(limited.rateLimits)
  })

  it('makes one store query for many concurrent requests with one unknown key, and none more within the negative-cache window', async () => {
    const unknown = newApiKeySecret()
    const hold = f.held.hold('findApiKeyByHash')
    const flood = Array.from({ length: 25 }, () => authenticate(plugin, unknown))
    await hold.reached
    hold.release()
    for (const result of await Promise.all(flood)) expectRefused(result, 'GW_AUTH_KEY_INVALID')
    expect(f.held.calls.findApiKeyByHash).toBe(1)
    expectRefused(await authenticate(plugin, unknown), 'GW_AUTH_KEY_INVALID')
    expect(f.held.calls.findApiKeyByHash).toBe(1)
  })

  it('makes one store query (and one workspace read) for many concurrent requests with one valid uncached key', async () => {
    const { secret, key } = await insertKey(f)
    const results = await Promise.all(Array.from({ length: 25 }, () => authenticate(plugin, secret)))
    for (const result of results) expect(expectAdmitted(result).keyId).toBe(key.id)
    expect(f.held.calls.findApiKeyByHash).toBe(1)
    expect(f.held.calls.findWorkspace).toBe(1)
  })

  it('shares the store error of one failed query with its waiters, and caches nothing', async () => {
    const unknown = newApiKeySecret()
    await f.real.close()
    const results = await Promise.all(Array.from({ length: 5 }, () => authenticate(plugin, unknown)))
    for (const result of results) expectRefused(result, 'GW_AUTH_UNAVAILABLE')
    expect(f.held.calls.findApiKeyByHash).toBe(1)
    await f.real.start()
    expectRefused(await authenticate(plugin, unknown), 'GW_AUTH_KEY_INVALID')
    expect(f.held.calls.findApiKeyByHash).toBe(2)
  })
})

describe('API key cache: revocation during a lookup reaches another instance (Redis pub/sub)', () => {
  const WAIT = { timeout: 10_000, interval: 10 }
  let f: Fixture
  let notifiers: RedisChangeNotifier[]
  let plugins: AuthPlugin[]

  beforeEach(async () => {
    f = await fixture()
    // A channel prefix of its own: the Redis server is shared with test files running in parallel.
    const channelPrefix = `gw-race-${randomUUID()}:`
    notifiers = [new RedisChangeNotifier({ url: inject('redisUrl'), channelPrefix }), new RedisChangeNotifier({ url: inject('redisUrl'), channelPrefix })]
    for (const notifier of notifiers) await notifier.start()
    plugins = notifiers.map((notifier) => newPlugin(f.held.store, notifier))
    for (const plugin of plugins) await plugin.start()
  })

  afterEach(async () => {
    for (const plugin of plugins) await plugin.close()
    for (const notifier of notifiers) await notifier.close()
    await f.real.close()
    await f.database.close()
  })

  /** Resolves when `notifier` delivered `message` on `channel` (after the plugin's own handler: subscription order). */
  function delivered(notifier: ChangeNotifier, channel: string, message: string): Promise<void> {
    return new Promise((resolve) => {
      const unsubscribe = notifier.subscribe(channel, (received) => {
        if (received !== message) return
        unsubscribe()
        resolve()
      })
    })
  }

  /** Resolves once a message published on `from` reaches `to`: `to`'s subscription is live in Redis. */
  async function linked(from: ChangeNotifier, to: ChangeNotifier): Promise<void> {
    let seen = false
    const unsubscribe = to.subscribe(CHANGE_CHANNELS.apiKeys, (message) => {
      if (message === '__probe__') seen = true
    })
    try {
      await vi.waitFor(() => {
        if (!seen) from.publish(CHANGE_CHANNELS.apiKeys, '__probe__')
        expect(seen).toBe(true)
      }, WAIT)
    } finally {
      unsubscribe()
    }
  }

  it('a key revoked on instance A while B is looking it up stops working on B (and on A) once the notice arrives', async () => {
    const [notifierA, notifierB] = notifiers as [RedisChangeNotifier, RedisChangeNotifier]
    const [pluginA, pluginB] = plugins as [AuthPlugin, AuthPlugin]
    await linked(notifierA, notifierB)
    await linked(notifierB, notifierA)
    const { secret, key } = await insertKey(f)
    expectAdmitted(await authenticate(pluginA, secret)) // cached on A
    const hold = f.held.hold('findApiKeyByHash')
    const inFlightOnB = authenticate(pluginB, secret)
    await hold.reached
    const reachedB = delivered(notifierB, CHANGE_CHANNELS.apiKeys, key.keyHash)
    const reachedA = delivered(notifierA, CHANGE_CHANNELS.apiKeys, key.keyHash)
    await revoke(f, key, notifierA)
    await Promise.all([reachedA, reachedB])
    hold.release()
    expectAdmitted(await inFlightOnB)
    const before = f.held.calls.findApiKeyByHash
    expectRefused(await authenticate(pluginB, secret), 'GW_AUTH_KEY_INVALID')
    expectRefused(await authenticate(pluginA, secret), 'GW_AUTH_KEY_INVALID')
    // Neither instance answered from a cache: each asked the store.
    expect(f.held.calls.findApiKeyByHash).toBe(before + 2)
  })
})

// ---------------------------------------------------------------------------------------------
// JWT verifier caches: organisation (JWKS settings), first organisation, workspace, verified tokens

describe('JWT verifier caches: changes during a read', () => {
  let f: Fixture
  let notifier: InProcessChangeNotifier
  let plugin: AuthPlugin
  let signer: Signer
  let otherSigner: Signer

  beforeAll(async () => {
    signer = await newSigner('race-key-1')
    otherSigner = await newSigner('race-key-2')
  })

  beforeEach(async () => {
    f = await fixture()
    notifier = new InProcessChangeNotifier()
    await setJwks(jwksOf(signer))
    plugin = newPlugin(f.held.store, notifier)
    await plugin.start()
  })

  afterEach(async () => {
    await plugin.close()
    await f.real.close()
    await f.database.close()
  })

  /** What `PUT /v1/admin/organisation/jwt` does: store the settings, then tell every instance. */
  async function setJwks(jwks: JsonWebKeySet): Promise<void> {
    const organisation = (await f.real.findOrganisation(f.organisation.id)) as OrganisationRecord
    const updated: OrganisationRecord = { ...organisation, jwt: { jwksUrl: null, jwks, issuer: null, audience: null, updatedAt: new Date().toISOString() } }
    await f.real.write(audit(f.organisation.id, 'organisation', 'update'), (writer) => writer.updateOrganisation(updated))
    notifier.publish(CHANGE_CHANNELS.organisations, f.organisation.id)
  }

  function token(by: Signer, extra: JWTPayload = {}): Promise<string> {
    const claims: JWTPayload = {
      gateway_oid: f.organisation.id,
      gateway_workspace: f.workspace.slug,
      scope: 'completions.write',
      sub: randomUUID(),
      exp: Math.floor(Date.now() / 1000) + 600,
      ...extra,
    }
    return new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: by.kid }).sign(by.privateKey)
  }

  it('does not cache JWT settings replaced while the organisation was being read', async () => {
    const hold = f.held.hold('findOrganisation')
    const inFlight = authenticate(plugin, await token(signer))
    await hold.reached
    await setJwks(jwksOf(otherSigner)) // the old signing key is withdrawn
    hold.release()
    expectAdmitted(await inFlight)
    // A new token from the withdrawn key is checked against the new settings.
    expectRefused(await authenticate(plugin, await token(signer)), 'GW_AUTH_TOKEN_INVALID')
    expectAdmitted(await authenticate(plugin, await token(otherSigner)))
  })

  it('does not cache the first organisation read while its settings changed (tokens without an organisation claim)', async () => {
    const hold = f.held.hold('findFirstOrganisation')
    const inFlight = authenticate(plugin, await token(signer, { gateway_oid: undefined }))
    await hold.reached
    await setJwks(jwksOf(otherSigner))
    hold.release()
    expectAdmitted(await inFlight)
    expectRefused(await authenticate(plugin, await token(signer, { gateway_oid: undefined })), 'GW_AUTH_TOKEN_INVALID')
  })

  it('does not cache a token verified while its settings changed: its next use is checked again', async () => {
    const racing = await token(signer)
    // The organisation is read first (not held); the workspace read is held, mid-verification.
    const hold = f.held.hold('findWorkspace')
    const inFlight = authenticate(plugin, racing)
    await hold.reached
    await setJwks(jwksOf(otherSigner))
    hold.release()
    expectAdmitted(await inFlight)
    expectRefused(await authenticate(plugin, racing), 'GW_AUTH_TOKEN_INVALID')
  })

  it('does not cache a workspace deleted while it was being read', async () => {
    const hold = f.held.hold('findWorkspace')
    const inFlight = authenticate(plugin, await token(signer))
    await hold.reached
    await f.real.write(audit(f.organisation.id, 'workspace', 'delete'), (writer) => writer.deleteWorkspace(f.organisation.id, f.workspace.id))
    notifier.publish(CHANGE_CHANNELS.workspaces, f.workspace.id)
    hold.release()
    expectAdmitted(await inFlight)
    expect(expectRefused(await authenticate(plugin, await token(signer)), 'GW_AUTH_TOKEN_INVALID').message).toContain('unknown workspace')
  })

  it('makes one organisation read and one workspace read for many concurrent tokens of a cold cache', async () => {
    const tokens = await Promise.all(Array.from({ length: 10 }, () => token(signer)))
    const results = await Promise.all(tokens.map((each) => authenticate(plugin, each)))
    for (const result of results) expectAdmitted(result)
    expect(f.held.calls.findOrganisation).toBe(1)
    expect(f.held.calls.findWorkspace).toBe(1)
  })
})
