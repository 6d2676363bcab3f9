/**
 * The virtual-key plugin (plugins/virtual-key/plugin.ts) against a fake admin store: resolution,
 * workspace isolation, expiry, round robin, caching and eviction, failure policy, master key check.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { beforeEach, describe, expect, it } from 'vitest'
import { AesGcmSecretCipher } from '../../../adapters/crypto/aes-gcm-secret-cipher.js'
import { InProcessChangeNotifier } from '../../../adapters/memory/in-process-change-notifier.js'
import type { VirtualKeyRecord } from '../../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../../core/channels.js'
import { ClientAbort, RequestContext, type Principal } from '../../../core/context.js'
import { GatewayError } from '../../../core/errors.js'
import type { AdminStore } from '../../../core/ports.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../../core/routes.js'
import type { Logger } from '../../../core/service.js'
import { virtualKeyConfigSchema } from '../../../plugins/virtual-key/config.js'
import { VirtualKeyPlugin } from '../../../plugins/virtual-key/plugin.js'

const chatRoute = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec
const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} }
const ORG = randomUUID()
const WORKSPACE = randomUUID()

const cipher = new AesGcmSecretCipher(randomBytes(32))

function record(overrides: Partial<VirtualKeyRecord> & { keys?: string[] } = {}): VirtualKeyRecord {
  const { keys = ['sk-first'], ...rest } = overrides
  const now = new Date().toISOString()
  return {
    id: randomUUID(),
    slug: `main-${randomBytes(3).toString('hex')}`,
    organisationId: ORG,
    workspaceId: WORKSPACE,
    name: 'main',
    note: null,
    provider: 'openai',
    sealedKeys: keys.map((key) => cipher.seal(key)),
    maskedKey: null,
    customHost: null,
    sealedModelConfig: null,
    rateLimits: [{ type: 'requests', unit: 'rpm', value: 10 }],
    usageLimits: { type: 'cost', creditLimit: 5, alertThreshold: null, periodicReset: null, periodicResetDays: null },
    status: 'active',
    expiresAt: null,
    createdAt: now,
    lastUpdatedAt: now,
    ...rest,
  }
}

/** The two store methods the plugin uses; `down` makes them reject like an unreachable store. */
class FakeStore {
  readonly keys = new Map<string, VirtualKeyRecord>()
  lookups = 0
  down = false
  sample: string | null = null

  add(key: VirtualKeyRecord): VirtualKeyRecord {
    this.keys.set(key.id, key)
    return key
  }

  async findVirtualKey(organisationId: string, idOrSlug: string): Promise<VirtualKeyRecord | null> {
    this.lookups++
    if (this.down) throw new Error('connection refused')
    for (const key of this.keys.values()) {
      if (key.organisationId === organisationId && (key.id === idOrSlug || key.slug === idOrSlug)) return key
    }
    return null
  }

  async sampleSealedSecret(): Promise<string | null> {
    return this.sample
  }
}

function principal(workspaceId: string | null = WORKSPACE, organisationId = ORG): Principal {
  return {
    kind: 'api-key',
    keyId: randomUUID(),
    keyType: 'workspace-service',
    organisationId,
    workspaceId,
    userId: null,
    scopes: new Set(['completions.write']),
    credentialHeader: 'x-gateway-api-key',
    limitSubjects: [],
  }
}

function context(slug: string | undefined, who: Principal | null = principal()): RequestContext {
  const ctx = new RequestContext({
    requestId: randomUUID(),
    traceId: 't',
    receivedAt: Date.now(),
    startedAt: 0,
    method: 'POST',
    path: '/v1/chat/completions',
    query: '',
    headers: slug === undefined ? {} : { 'x-gateway-virtual-key': slug },
    clientIp: null,
    route: chatRoute,
    params: {},
    signal: new ClientAbort(),
  })
  ctx.principal = who
  return ctx
}

let store: FakeStore
let notifier: InProcessChangeNotifier
let now: number
let plugin: VirtualKeyPlugin

async function makePlugin(config: Record<string, unknown> = {}): Promise<VirtualKeyPlugin> {
  const made = new VirtualKeyPlugin(virtualKeyConfigSchema.parse(config), store as unknown as AdminStore, cipher, notifier, { now: () => now }, silent)
  await made.start()
  return made
}

async function run(slug: string | undefined, who?: Principal | null): Promise<{ ctx: RequestContext; result: GatewayError | undefined }> {
  const ctx = context(slug, who)
  const result = await plugin.onRequest(ctx)
  return { ctx, result }
}

function expectError(result: GatewayError | undefined, status: number, code: string): void {
  expect(result).toBeInstanceOf(GatewayError)
  expect(result?.status).toBe(status)
  expect(result?.code).toBe(code)
}

beforeEach(async () => {
  store = new FakeStore()
  notifier = new InProcessChangeNotifier()
  now = Date.parse('2030-01-01T00:00:00.000Z')
  plugin = await makePlugin()
})

describe('virtual-key plugin', () => {
  it('refuses x-gateway-custom-host next to a virtual key, without asking the store or setting a credential', async () => {
    const key = store.add(record({ customHost: 'http://127.0.0.1:9021/v1' }))
    for (const host of ['https://attacker.example/v1', 'http://127.0.0.1:9021/v1', '']) {
      const ctx = context(key.slug)
      ;(ctx.headers as Record<string, string>)['x-gateway-custom-host'] = host
      const result = await plugin.onRequest(ctx)
      expectError(result, 400, 'GW_REQ_INVALID')
      expect(result?.param).toBe('x-gateway-custom-host')
      expect(result?.message).toContain("set the virtual key's custom_host through the Admin API")
      expect(ctx.credential).toBeNull()
    }
    expect(store.lookups).toBe(0)
  })

  it('does nothing without the header', async () => {
    const { ctx, result } = await run(undefined)
    expect(result).toBeUndefined()
    expect(ctx.credential).toBeNull()
    expect(store.lookups).toBe(0)
  })

  it('writes the decrypted credential and the limit subject', async () => {
    const key = store.add(record({ customHost: 'http://127.0.0.1:9/v1', sealedModelConfig: cipher.seal('{"apiVersion":"2024-06-01"}') }))
    for (const name of [key.slug, key.id]) {
      const { ctx, result } = await run(name)
      expect(result).toBeUndefined()
      expect(ctx.credential).toEqual({ virtualKeySlug: key.slug, provider: 'openai', apiKey: 'sk-first', customHost: 'http://127.0.0.1:9/v1', modelConfig: { apiVersion: '2024-06-01' } })
      expect(ctx.virtualKey).toEqual({ kind: 'virtual-key', id: key.id, label: `virtual key ${key.slug}`, rateLimits: key.rateLimits, usageLimits: [key.usageLimits] })
    }
  })

  it('answers 404 for an unknown slug, another workspace and another organisation alike', async () => {
    const key = store.add(record())
    expectError((await run('nope-000000')).result, 404, 'GW_VIRTUAL_KEY_NOT_FOUND')
    const other = await run(key.slug, principal(randomUUID()))
    expectError(other.result, 404, 'GW_VIRTUAL_KEY_NOT_FOUND')
    expect(other.ctx.credential).toBeNull()
    expectError((await run(key.slug, principal(WORKSPACE, randomUUID()))).result, 404, 'GW_VIRTUAL_KEY_NOT_FOUND')
    expect((await run(key.slug, principal(randomUUID()))).result?.message).toBe((await run('nope-000000')).result?.message.replace('nope-000000', key.slug))
    expectError((await run('x'.repeat(201))).result, 404, 'GW_VIRTUAL_KEY_NOT_FOUND')
  })

  it('answers 401 once expires_at has passed, and for a stored expired status', async () => {
    const key = store.add(record({ expiresAt: new Date(now + 1000).toISOString() }))
    expect((await run(key.slug)).result).toBeUndefined()
    now += 1000
    expectError((await run(key.slug)).result, 401, 'GW_VIRTUAL_KEY_EXPIRED')
    const stored = store.add(record({ status: 'expired' }))
    expectError((await run(stored.slug)).result, 401, 'GW_VIRTUAL_KEY_EXPIRED')
  })

  it('uses several provider keys in turn', async () => {
    const key = store.add(record({ keys: ['sk-a', 'sk-b', 'sk-c'] }))
    const used: Array<string | null> = []
    for (let i = 0; i < 7; i++) used.push((await run(key.slug)).ctx.credential?.apiKey ?? null)
    expect(used).toEqual(['sk-a', 'sk-b', 'sk-c', 'sk-a', 'sk-b', 'sk-c', 'sk-a'])
  })

  it('gives a key with no provider key a null credential', async () => {
    const key = store.add(record({ keys: [] }))
    expect((await run(key.slug)).ctx.credential?.apiKey).toBeNull()
  })

  it('caches lookups, and shares one lookup among concurrent requests', async () => {
    const key = store.add(record())
    await Promise.all(Array.from({ length: 5 }, () => run(key.slug)))
    await run(key.slug)
    expect(store.lookups).toBe(1)
  })

  it('answers a cached key with a plain value (no promise: the pipeline runs it without await)', async () => {
    const key = store.add(record())
    expect(plugin.onRequest(context(key.slug))).toBeInstanceOf(Promise)
    await run(key.slug)
    const ctx = context(key.slug)
    expect(plugin.onRequest(ctx)).toBeUndefined()
    expect(ctx.credential?.apiKey).toBe('sk-first')
  })

  it('drops a changed key when its id is published, and everything on *', async () => {
    const key = store.add(record())
    await run(key.slug)
    store.add({ ...key, sealedKeys: [cipher.seal('sk-second')] })
    expect((await run(key.slug)).ctx.credential?.apiKey).toBe('sk-first')
    notifier.publish(CHANGE_CHANNELS.virtualKeys, key.id)
    expect((await run(key.slug)).ctx.credential?.apiKey).toBe('sk-second')
    store.add({ ...key, sealedKeys: [cipher.seal('sk-third')] })
    notifier.publish(CHANGE_CHANNELS.virtualKeys, '*')
    expect((await run(key.slug)).ctx.credential?.apiKey).toBe('sk-third')
    store.keys.delete(key.id)
    notifier.publish(CHANGE_CHANNELS.workspaces, WORKSPACE)
    expectError((await run(key.slug)).result, 404, 'GW_VIRTUAL_KEY_NOT_FOUND')
  })

  it('does not hand a lookup that started before a change to requests that arrive after it', async () => {
    const key = store.add(record())
    let release: () => void = () => {}
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    const find = store.findVirtualKey.bind(store)
    store.findVirtualKey = async (organisationId, idOrSlug) => {
      const found = await find(organisationId, idOrSlug)
      if (store.lookups === 1) await held
      return found
    }
    const before = run(key.slug)
    await new Promise((resolve) => setImmediate(resolve))
    // The key is rotated while the first lookup is in flight.
    store.add({ ...key, sealedKeys: [cipher.seal('sk-rotated')] })
    notifier.publish(CHANGE_CHANNELS.virtualKeys, key.id)
    const after = await run(key.slug)
    expect(after.ctx.credential?.apiKey).toBe('sk-rotated')
    release()
    // The request that started first keeps the answer it asked for; it is not cached.
    expect((await before).ctx.credential?.apiKey).toBe('sk-first')
    expect((await run(key.slug)).ctx.credential?.apiKey).toBe('sk-rotated')
    expect(store.lookups).toBe(2)
  })

  it('remembers unknown slugs briefly, and forgets them on any virtual key change', async () => {
    expectError((await run('later-abcdef')).result, 404, 'GW_VIRTUAL_KEY_NOT_FOUND')
    const key = store.add(record({ slug: 'later-abcdef' }))
    expectError((await run('later-abcdef')).result, 404, 'GW_VIRTUAL_KEY_NOT_FOUND')
    expect(store.lookups).toBe(1)
    notifier.publish(CHANGE_CHANNELS.virtualKeys, key.id)
    expect((await run('later-abcdef')).result).toBeUndefined()
    store.keys.delete(key.id)
    now += 60_001
    expectError((await run('later-abcdef')).result, 404, 'GW_VIRTUAL_KEY_NOT_FOUND')
  })

  it('stays bounded', async () => {
    plugin = await makePlugin({ maxCacheEntries: 2 })
    const keys = [store.add(record()), store.add(record()), store.add(record())]
    for (const key of keys) await run(key.slug)
    store.lookups = 0
    await run(keys[2]?.slug)
    await run(keys[0]?.slug)
    expect(store.lookups).toBe(1)
  })

  it('fails closed: 503 when the store is down and nothing is cached, a stale entry otherwise', async () => {
    const key = store.add(record())
    store.down = true
    expectError((await run(key.slug)).result, 503, 'GW_VIRTUAL_KEY_UNAVAILABLE')
    store.down = false
    await run(key.slug)
    store.down = true
    now += 60_001
    const { ctx, result } = await run(key.slug)
    expect(result).toBeUndefined()
    expect(ctx.credential?.apiKey).toBe('sk-first')
  })

  it('answers 500 for a credential the master key cannot open', async () => {
    const other = new AesGcmSecretCipher(randomBytes(32))
    const key = store.add(record({ sealedKeys: [other.seal('sk-x')] }))
    expectError((await run(key.slug)).result, 500, 'GW_INTERNAL')
  })

  it('refuses to start when a stored secret was sealed under another master key', async () => {
    store.sample = cipher.seal('fine')
    await expect(makePlugin()).resolves.toBeInstanceOf(VirtualKeyPlugin)
    store.sample = new AesGcmSecretCipher(randomBytes(32)).seal('sk-x')
    await expect(makePlugin()).rejects.toThrow(/GATEWAY_MASTER_KEY does not match the key that sealed the stored credentials/)
  })
})
