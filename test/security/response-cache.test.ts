/**
 * The response cache against a hostile tenant: bodies and headers built to make two workspaces'
 * keys meet, one workspace trying to read or overwrite another's answers (in process and through the
 * shared Redis), and bodies or replies large enough to fill the store.
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { InProcessResponseCache } from '../../adapters/memory/in-process-response-cache.js'
import { RedisResponseCache } from '../../adapters/redis/redis-response-cache.js'
import { Attempt, ClientAbort, RequestContext, type JsonObject, type Principal } from '../../core/context.js'
import type { Reply } from '../../core/plugin.js'
import type { ResponseCache } from '../../core/ports.js'
import { checkRoutingConfig, compileRoutingConfig, type RoutingPlan, type RoutingTarget } from '../../core/routing-config.js'
import { RouteTable, type RouteSpec } from '../../core/routes.js'
import type { Logger } from '../../core/service.js'
import { cacheConfigSchema, type CacheConfig } from '../../plugins/cache/config.js'
import { canonicalJson, responseCacheKey } from '../../plugins/cache/key.js'
import { CachePlugin } from '../../plugins/cache/plugin.js'

const ORG_A = 'aaaaaaaa-0000-4000-8000-000000000001'
const ORG_B = 'bbbbbbbb-0000-4000-8000-000000000002'
const WS_A = 'aaaaaaaa-1111-4111-8111-111111111111'
const WS_B = 'bbbbbbbb-2222-4222-8222-222222222222'

const routes = new RouteTable()
const found = routes.lookup('POST', '/v1/chat/completions', true)
if (found.kind !== 'route') throw new Error('no chat route')
const CHAT: RouteSpec = found.match.route

const QUIET: Logger = { debug() {}, info() {}, warn() {}, error() {} }

function plan(config: unknown, identity: { slug: string; version: number } | null): RoutingPlan {
  const checked = checkRoutingConfig(config, identity === null ? 'inline' : 'saved')
  if (!checked.ok) throw new Error(JSON.stringify(checked.issues))
  return compileRoutingConfig(checked.config, identity)
}
// Two workspaces may well save configs with the same slug, version and virtual key slug.
const SAVED = plan({ cache: { mode: 'simple', max_age: 300 }, virtual_key: 'openai-main' }, { slug: 'prod', version: 1 })

function request(org: string, workspace: string, body: JsonObject, headers: Record<string, string> = {}, routing: RoutingPlan = SAVED): { ctx: RequestContext; attempt: Attempt } {
  const ctx = new RequestContext({
    requestId: randomUUID(),
    traceId: randomUUID(),
    receivedAt: Date.now(),
    startedAt: performance.now(),
    method: 'POST',
    path: CHAT.pattern,
    query: '',
    headers,
    clientIp: null,
    route: CHAT,
    params: {},
    signal: new ClientAbort(),
  })
  const principal: Principal = {
    kind: 'api-key',
    keyId: randomUUID(),
    keyType: 'workspace-service',
    organisationId: org,
    workspaceId: workspace,
    userId: null,
    scopes: new Set(['completions.write']),
    credentialHeader: 'x-gateway-api-key',
    limitSubjects: [],
  }
  ctx.principal = principal
  ctx.body = body
  ctx.rawBody = Buffer.from(JSON.stringify(body))
  ctx.routing = routing
  const target = (routing.root.kind === 'target' ? routing.root.target : null) as RoutingTarget
  const attempt = new Attempt({ index: 0, target, retry: 0, body, rawBody: ctx.rawBody, startedAt: performance.now() })
  ctx.attempts = [attempt]
  return { ctx, attempt }
}

function cachePlugin(store: ResponseCache, overrides: Partial<CacheConfig> = {}): CachePlugin {
  return new CachePlugin(cacheConfigSchema.parse(overrides), store, { now: () => Date.now() }, QUIET)
}

/** Serves `text` as the attempt's reply and lets the write reach the store. */
async function answer(p: CachePlugin, ctx: RequestContext, attempt: Attempt, text: string): Promise<void> {
  ctx.attempt = attempt
  const reply: Reply = { status: 200, headers: [['content-type', 'application/json']], body: Buffer.from(text) }
  p.onResponse(ctx, reply)
  ctx.status = 200
  ctx.outcome = 'completed'
  p.onLog(ctx)
  await p.close()
}

async function ask(p: CachePlugin, org: string, workspace: string, body: JsonObject, headers: Record<string, string> = {}) {
  const { ctx, attempt } = request(org, workspace, body, headers)
  const result = await p.onAttempt(ctx, attempt)
  return { ctx, attempt, text: result === undefined ? null : Buffer.from((result as Reply).body as Uint8Array).toString() }
}

describe('response cache keys under hostile input', () => {
  const key = (org: string, workspace: string, body: JsonObject, headers: Record<string, string> = {}, routing = SAVED): string => {
    const { ctx, attempt } = request(org, workspace, body, headers, routing)
    return responseCacheKey({
      organisationId: org,
      workspaceId: workspace,
      routingId: routing.id,
      target: attempt.target,
      routeId: CHAT.id,
      method: 'POST',
      path: ctx.path,
      query: '',
      headers,
      body,
      rawBody: null,
    })
  }

  it('bodies that embed the other workspace, separators, newlines or JSON fragments never give another workspace’s key', () => {
    const hostile: JsonObject[] = [
      { model: 'm', messages: [] },
      { model: 'm', messages: [], workspace: WS_A },
      { model: `m","${WS_A}`, messages: [] },
      { model: 'm\n', messages: [] },
      { model: `m\n${WS_A}`, messages: [] },
      { model: 'm', messages: [], '': '' },
      { [`"${WS_A}"`]: 1 },
      { model: 'm]', messages: ['[', ']', '\\', '"'] },
      { model: 'm', messages: [{ role: 'user', content: `${ORG_A}\n${WS_A}\nprod@1` }] },
      { __proto__: { polluted: true }, model: 'm' } as unknown as JsonObject,
    ]
    const seen = new Map<string, string>()
    for (const [org, ws] of [
      [ORG_A, WS_A],
      [ORG_B, WS_B],
      [ORG_A, WS_B],
      [ORG_B, WS_A],
    ] as const) {
      for (const [index, body] of hostile.entries()) {
        const k = key(org, ws, body)
        const where = `${org}/${ws}/#${index}`
        expect(seen.get(k), `${where} collides with ${seen.get(k)}`).toBeUndefined()
        seen.set(k, where)
      }
    }
    expect(seen.size).toBe(hostile.length * 4)
  })

  it('the normal form tells apart bodies whose naive concatenations would match', () => {
    const pairs: Array<[unknown, unknown]> = [
      [{ a: 'b', c: 'd' }, { a: 'b","c":"d' }],
      [{ 'a"': 1 }, { a: '":1' }],
      [{ a: [1, 2] }, { a: '[1,2]' }],
      [{ a: 1 }, { a: '1' }],
      [{ a: null }, {}],
      [{ a: { b: 1 } }, { 'a.b': 1 }],
      [['a', 'b'], ['a,b']],
    ]
    for (const [one, two] of pairs) expect(canonicalJson(one)).not.toBe(canonicalJson(two))
  })

  it('header values shaped like the key’s structure cannot move a field into another one', () => {
    const body = { model: 'm', messages: [] }
    const one = key(ORG_A, WS_A, body, { 'x-gateway-azure-api-version': 'v","x-gateway-azure-deployment-id":"d' })
    const two = key(ORG_A, WS_A, body, { 'x-gateway-azure-api-version': 'v', 'x-gateway-azure-deployment-id': 'd' })
    const three = key(ORG_A, WS_A, body, { 'x-gateway-azure-api-version': 'v"]', 'x-gateway-azure-deployment-id': 'd' })
    expect(new Set([one, two, three]).size).toBe(3)
    expect(one).not.toBe(two)
    // Naming the gateway key as a forwarded header does not make it part of the key (nor split it).
    expect(key(ORG_A, WS_A, body, { 'x-gateway-forward-headers': 'x-gateway-api-key', 'x-gateway-api-key': 'gw-a' })).toBe(
      key(ORG_A, WS_A, body, { 'x-gateway-forward-headers': 'x-gateway-api-key', 'x-gateway-api-key': 'gw-b' }),
    )
  })
})

function describeIsolation(name: string, makeStore: () => Promise<ResponseCache>): void {
  describe(`one workspace never gets another's answer: ${name}`, () => {
    let store: ResponseCache
    beforeAll(async () => {
      store = await makeStore()
    })
    afterAll(async () => {
      await store?.close()
    })

    it('the same config slug, version, virtual key slug and body in two workspaces are two entries', async () => {
      const p = cachePlugin(store)
      const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `secret question ${randomUUID()}` }] }
      const a = await ask(p, ORG_A, WS_A, body)
      expect(a.attempt.cacheStatus).toBe('MISS')
      await answer(p, a.ctx, a.attempt, '{"answer":"for A only"}')
      expect((await ask(p, ORG_A, WS_A, body)).text).toBe('{"answer":"for A only"}')

      // Another organisation's workspace, and another workspace of the same organisation.
      for (const [org, ws] of [
        [ORG_B, WS_B],
        [ORG_A, WS_B],
      ] as const) {
        const other = await ask(p, org, ws, body)
        expect(other.attempt.cacheStatus).toBe('MISS')
        expect(other.text).toBeNull()
      }
    })

    it('another workspace forcing a refresh or answering the same body does not touch the first one’s entry', async () => {
      const p = cachePlugin(store)
      const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `q ${randomUUID()}` }] }
      const a = await ask(p, ORG_A, WS_A, body)
      await answer(p, a.ctx, a.attempt, '{"answer":"A"}')
      const b = await ask(p, ORG_B, WS_B, body, { 'x-gateway-cache-force-refresh': 'true' })
      expect(b.attempt.cacheStatus).toBe('REFRESH')
      await answer(p, b.ctx, b.attempt, '{"answer":"poisoned by B"}')
      expect((await ask(p, ORG_A, WS_A, body)).text).toBe('{"answer":"A"}')
      expect((await ask(p, ORG_B, WS_B, body)).text).toBe('{"answer":"poisoned by B"}')
    })
  })
}

describeIsolation('in process', async () => new InProcessResponseCache({ maxBytes: 16 * 1_048_576 }))
describeIsolation('Redis', async () => {
  const store = new RedisResponseCache({ url: inject('redisUrl') })
  await store.start()
  return store
})

describe('large bodies and replies', () => {
  it('a huge request body is not keyed or looked up (DISABLED), with the default bound of 1 MiB', async () => {
    const store = new InProcessResponseCache({ maxBytes: 16 * 1_048_576 })
    const p = cachePlugin(store)
    const body = { model: 'm', messages: [{ role: 'user', content: 'x'.repeat(1_100_000) }] }
    const { ctx, attempt } = request(ORG_A, WS_A, body)
    expect(await p.onAttempt(ctx, attempt)).toBeUndefined()
    expect(attempt.cacheStatus).toBe('DISABLED')
    expect(attempt.cacheKey).toBeNull()
  })

  it('a reply over the default maxEntryBytes (1 MiB) is not stored', async () => {
    const store = new InProcessResponseCache({ maxBytes: 64 * 1_048_576 })
    const p = cachePlugin(store)
    const body = { model: 'm', messages: [{ role: 'user', content: 'big answer please' }] }
    const first = await ask(p, ORG_A, WS_A, body)
    await answer(p, first.ctx, first.attempt, `{"a":"${'x'.repeat(1_048_576)}"}`)
    expect((await ask(p, ORG_A, WS_A, body)).attempt.cacheStatus).toBe('MISS')
    expect(store.stats().entries).toBe(0)
  })

  it('a flood of distinct answers never holds more than maxBytes in process', async () => {
    const maxBytes = 1_048_576
    const store = new InProcessResponseCache({ maxBytes })
    const p = cachePlugin(store, { maxEntryBytes: 100_000 })
    for (let i = 0; i < 60; i++) {
      const { ctx, attempt } = request(ORG_A, WS_A, { model: 'm', n: i })
      await p.onAttempt(ctx, attempt)
      await answer(p, ctx, attempt, `{"a":"${'y'.repeat(90_000)}"}`)
      expect(store.stats().bytes).toBeLessThanOrEqual(maxBytes)
    }
    expect(store.stats().evicted).toBeGreaterThan(0)
  })
})
