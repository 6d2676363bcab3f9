/**
 * The cache plugin with real `RequestContext` / `Attempt` objects and compiled routing plans, over
 * the real in-process store (wrapped to count calls) or a failing one. The forward side (who writes
 * `ctx.attempt`, how the reply is sent) is played by the test, as core/http and forward would.
 */
import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { InProcessResponseCache } from '../../../adapters/memory/in-process-response-cache.js'
import { Attempt, ClientAbort, RequestContext, type JsonObject, type Principal, type SseEvent } from '../../../core/context.js'
import type { Reply, StreamBody } from '../../../core/plugin.js'
import type { CachedResponse, ResponseCache } from '../../../core/ports.js'
import { checkDeclaredPhases } from '../../../core/registry.js'
import { checkRoutingConfig, compileRoutingConfig, type RoutingNode, type RoutingPlan, type RoutingTarget } from '../../../core/routing-config.js'
import { RouteTable, type RouteSpec } from '../../../core/routes.js'
import type { Logger } from '../../../core/service.js'
import defaults from '../../../config/default.json' with { type: 'json' }
import { cacheConfigSchema, type CacheConfig } from '../../../plugins/cache/config.js'
import { cache as cacheDefinition } from '../../../plugins/cache/index.js'
import { canonicalJson, responseCacheKey } from '../../../plugins/cache/key.js'
import { CachePlugin } from '../../../plugins/cache/plugin.js'

const ORG = '00000000-0000-4000-8000-000000000001'
const WORKSPACE_A = '11111111-1111-4111-8111-111111111111'
const WORKSPACE_B = '22222222-2222-4222-8222-222222222222'

const routes = new RouteTable()
function routeOf(method: string, path: string): RouteSpec {
  const found = routes.lookup(method, path, true)
  if (found.kind !== 'route') throw new Error(`no route ${method} ${path}`)
  return found.match.route
}
const CHAT = routeOf('POST', '/v1/chat/completions')
const MESSAGES = routeOf('POST', '/v1/messages')
const SPEECH = routeOf('POST', '/v1/audio/speech')

const CHAT_BODY: JsonObject = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }
const JSON_REPLY = '{"id":"chatcmpl-1","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"Hello"}}]}'

/** Counts calls; otherwise the real in-process store. */
class SpyStore implements ResponseCache {
  readonly inner = new InProcessResponseCache({ maxBytes: 16 * 1_048_576 })
  gets = 0
  sets: Array<{ key: string; value: CachedResponse; maxAgeSeconds: number }> = []
  start(): Promise<void> {
    return this.inner.start()
  }
  close(): Promise<void> {
    return this.inner.close()
  }
  health() {
    return this.inner.health()
  }
  get(key: string): Promise<CachedResponse | null> {
    this.gets++
    return this.inner.get(key)
  }
  set(key: string, value: CachedResponse, maxAgeSeconds: number): Promise<void> {
    this.sets.push({ key, value, maxAgeSeconds })
    return this.inner.set(key, value, maxAgeSeconds)
  }
}

class FailingStore extends SpyStore {
  override get(): Promise<CachedResponse | null> {
    this.gets++
    return Promise.reject(new Error('connect ECONNREFUSED'))
  }
  override set(key: string, value: CachedResponse, maxAgeSeconds: number): Promise<void> {
    this.sets.push({ key, value, maxAgeSeconds })
    return Promise.reject(new Error('connect ECONNREFUSED'))
  }
}

/** Never answers a write (a stalled Redis). */
class StalledStore extends SpyStore {
  override set(key: string, value: CachedResponse, maxAgeSeconds: number): Promise<void> {
    this.sets.push({ key, value, maxAgeSeconds })
    return new Promise(() => {})
  }
}

function recordingLogger(): Logger & { warnings: Array<{ fields: Record<string, unknown>; message: string | undefined }> } {
  const warnings: Array<{ fields: Record<string, unknown>; message: string | undefined }> = []
  return { debug() {}, info() {}, error() {}, warn: (fields, message) => void warnings.push({ fields: fields as Record<string, unknown>, message }), warnings }
}

function plugin(store: ResponseCache = new SpyStore(), overrides: Partial<CacheConfig> = {}, logger: Logger = recordingLogger()): CachePlugin {
  const config = cacheConfigSchema.parse(overrides)
  return new CachePlugin(config, store, { now: () => Date.now() }, logger)
}

function plan(config: unknown, identity: { slug: string; version: number } | null = { slug: 'cfg', version: 1 }): RoutingPlan {
  const checked = checkRoutingConfig(config, identity === null ? 'inline' : 'saved')
  if (!checked.ok) throw new Error(JSON.stringify(checked.issues))
  return compileRoutingConfig(checked.config, identity)
}

function leaves(node: RoutingNode): RoutingTarget[] {
  return node.kind === 'target' ? [node.target] : node.children.flatMap(leaves)
}

const CACHED = { cache: { mode: 'simple', max_age: 120 }, virtual_key: 'vk-openai' }
const NOT_CACHED = { virtual_key: 'vk-openai' }
const TWO_TARGETS = {
  strategy: { mode: 'fallback' },
  cache: { mode: 'simple', max_age: 60 },
  targets: [{ virtual_key: 'vk-openai' }, { virtual_key: 'vk-openai' }],
}

interface RequestOptions {
  readonly workspaceId?: string
  readonly route?: RouteSpec
  readonly headers?: Record<string, string>
  readonly routing?: RoutingPlan
  readonly body?: JsonObject | null
  readonly rawBody?: Buffer | null
  readonly target?: number
}

function request(options: RequestOptions = {}): { ctx: RequestContext; attempt: Attempt } {
  const route = options.route ?? CHAT
  const ctx = new RequestContext({
    requestId: randomUUID(),
    traceId: randomUUID(),
    receivedAt: Date.now(),
    startedAt: performance.now(),
    method: 'POST',
    path: route.pattern,
    query: '',
    headers: options.headers ?? {},
    clientIp: null,
    route,
    params: {},
    signal: new ClientAbort(),
  })
  const principal: Principal = {
    kind: 'api-key',
    keyId: randomUUID(),
    keyType: 'workspace-service',
    organisationId: ORG,
    workspaceId: options.workspaceId ?? WORKSPACE_A,
    userId: null,
    scopes: new Set(['completions.write']),
    credentialHeader: 'x-gateway-api-key',
    limitSubjects: [],
  }
  ctx.principal = principal
  const body = options.body === undefined ? CHAT_BODY : options.body
  const rawBody = options.rawBody === undefined ? (body === null ? null : Buffer.from(JSON.stringify(body))) : options.rawBody
  ctx.body = body
  ctx.rawBody = rawBody
  ctx.routing = options.routing ?? plan(CACHED)
  ctx.attempts = []
  const target = leaves(ctx.routing.root)[options.target ?? 0] as RoutingTarget
  const attempt = new Attempt({ index: 0, target, retry: 0, body, rawBody, startedAt: performance.now() })
  ctx.attempts.push(attempt)
  return { ctx, attempt }
}

async function keyOf(options: RequestOptions = {}): Promise<string | null> {
  const { ctx, attempt } = request(options)
  await plugin().onAttempt(ctx, attempt)
  return attempt.cacheKey
}

const jsonReply = (text = JSON_REPLY, status = 200, headers: ReadonlyArray<readonly [string, string]> = [['content-type', 'application/json']]): Reply => ({
  status,
  headers,
  body: Buffer.from(text),
})

function sseReply(): Reply {
  const body: StreamBody = {
    source: { consume() {}, pause() {}, resume() {}, destroy() {} },
    sse: true,
    toError: () => {
      throw new Error('unused')
    },
  }
  return { status: 200, headers: [['content-type', 'text/event-stream']], body }
}

/** Plays forward and core/http for the served attempt: the reply goes out and ends `outcome`. */
function serve(p: CachePlugin, ctx: RequestContext, attempt: Attempt, reply: Reply, events: readonly SseEvent[] = [], outcome: 'completed' | 'errored' | 'aborted' = 'completed'): void {
  ctx.attempt = attempt
  expect(p.onResponse(ctx, reply)).toBeUndefined()
  ctx.status = reply.status
  for (const event of events) expect(p.onChunk(ctx, event)).toBe(event)
  ctx.outcome = outcome
  p.onLog(ctx)
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0))

const STREAM_EVENTS: SseEvent[] = [
  { data: '{"choices":[{"delta":{"role":"assistant"}}]}', otherLines: [] },
  { data: '{"choices":[{"delta":{"content":"Hello"}}]}', otherLines: [] },
  { data: '[DONE]', otherLines: [] },
]

describe('cache plugin: definition', () => {
  it('implements the phases it declares and sits between budget and forward', () => {
    checkDeclaredPhases(cacheDefinition, plugin())
    const plugins = defaults.plugins as Record<string, { priority: number }>
    expect(plugins.cache?.priority).toBe(cacheDefinition.priority)
    expect(cacheDefinition.priority).toBeLessThan(plugins.budget?.priority as number)
    expect(cacheDefinition.priority).toBeGreaterThan(plugins.forward?.priority as number)
    expect(cacheDefinition.priority).toBeGreaterThan(plugins['admin-api']?.priority as number)
  })
})

describe('cache plugin: onAttempt', () => {
  it('a target without cache is DISABLED and the store is never asked', async () => {
    const store = new SpyStore()
    const { ctx, attempt } = request({ routing: plan(NOT_CACHED) })
    expect(await plugin(store).onAttempt(ctx, attempt)).toBeUndefined()
    expect(attempt.cacheStatus).toBe('DISABLED')
    expect(attempt.cacheKey).toBeNull()
    expect(store.gets).toBe(0)
  })

  it('a first request is a MISS with its key noted; the stored reply then answers the same request (HIT)', async () => {
    const store = new SpyStore()
    const p = plugin(store)
    const first = request()
    expect(await p.onAttempt(first.ctx, first.attempt)).toBeUndefined()
    expect(first.attempt.cacheStatus).toBe('MISS')
    expect(first.attempt.cacheKey).toMatch(/^[0-9a-f]{64}$/)
    serve(p, first.ctx, first.attempt, jsonReply(JSON_REPLY, 200, [['content-type', 'application/json'], ['x-request-id', 'req-1'], ['x-gateway-retry-attempt-count', '0']]))
    await settle()
    expect(store.sets).toHaveLength(1)
    expect(store.sets[0]?.maxAgeSeconds).toBe(120)

    const second = request()
    const hit = (await p.onAttempt(second.ctx, second.attempt)) as Reply
    expect(second.attempt.cacheStatus).toBe('HIT')
    // Nothing to store for a hit.
    expect(second.attempt.cacheKey).toBeNull()
    expect(hit.status).toBe(200)
    // Only the content type: the other headers belonged to the first request.
    expect(hit.headers).toEqual([['content-type', 'application/json']])
    expect(Buffer.from(hit.body as Uint8Array).toString()).toBe(JSON_REPLY)
    expect(p.stats()).toMatchObject({ hits: 1, misses: 1, stored: 1 })
    // A hit served again is not stored again.
    serve(p, second.ctx, second.attempt, hit)
    await settle()
    expect(store.sets).toHaveLength(1)
  })

  it('x-gateway-cache-force-refresh: true skips the lookup (REFRESH) and stores the new answer', async () => {
    const store = new SpyStore()
    const p = plugin(store)
    const first = request()
    await p.onAttempt(first.ctx, first.attempt)
    serve(p, first.ctx, first.attempt, jsonReply('{"v":1}'))
    await settle()
    const refresh = request({ headers: { 'x-gateway-cache-force-refresh': 'true' } })
    const gets = store.gets
    expect(await p.onAttempt(refresh.ctx, refresh.attempt)).toBeUndefined()
    expect(refresh.attempt.cacheStatus).toBe('REFRESH')
    expect(store.gets).toBe(gets)
    // Same key as without the header: the refreshed answer replaces the old one.
    expect(refresh.attempt.cacheKey).toBe(first.attempt.cacheKey)
    serve(p, refresh.ctx, refresh.attempt, jsonReply('{"v":2}'))
    await settle()
    const after = request()
    const hit = (await p.onAttempt(after.ctx, after.attempt)) as Reply
    expect(Buffer.from(hit.body as Uint8Array).toString()).toBe('{"v":2}')
    expect(p.stats().refreshes).toBe(1)
  })

  it('other values of x-gateway-cache-force-refresh look up as usual', async () => {
    for (const value of ['false', '1', 'yes', '']) {
      const store = new SpyStore()
      const { ctx, attempt } = request({ headers: { 'x-gateway-cache-force-refresh': value } })
      await plugin(store).onAttempt(ctx, attempt)
      expect(attempt.cacheStatus).toBe('MISS')
      expect(store.gets).toBe(1)
    }
    const { ctx, attempt } = request({ headers: { 'x-gateway-cache-force-refresh': ' TRUE ' } })
    await plugin().onAttempt(ctx, attempt)
    expect(attempt.cacheStatus).toBe('REFRESH')
  })

  it('a request body over maxRequestBytes is DISABLED: no key, no lookup', async () => {
    const store = new SpyStore()
    const big = { ...CHAT_BODY, messages: [{ role: 'user', content: 'x'.repeat(2_000) }] }
    const { ctx, attempt } = request({ body: big })
    await plugin(store, { maxRequestBytes: 1_000 }).onAttempt(ctx, attempt)
    expect(attempt.cacheStatus).toBe('DISABLED')
    expect(attempt.cacheKey).toBeNull()
    expect(store.gets).toBe(0)
  })

  it('an entry under the key that is not a 2xx reply is a MISS, never sent', async () => {
    const store = new SpyStore()
    const p = plugin(store)
    const { ctx, attempt } = request()
    const key = responseCacheKey({
      organisationId: ORG,
      workspaceId: WORKSPACE_A,
      routingId: (ctx.routing as RoutingPlan).id,
      target: attempt.target,
      routeId: CHAT.id,
      method: 'POST',
      path: CHAT.pattern,
      query: '',
      headers: {},
      body: CHAT_BODY,
      rawBody: null,
    })
    await store.inner.set(key, { status: 500, headers: [], body: Buffer.from('{"error":{}}') }, 60)
    expect(await p.onAttempt(ctx, attempt)).toBeUndefined()
    expect(attempt.cacheKey).toBe(key)
    expect(attempt.cacheStatus).toBe('MISS')
  })
})

describe('cache plugin: the key', () => {
  it('is the same for the same body with its keys in another order, at every depth', async () => {
    const a = { model: 'gpt-4o-mini', temperature: 0, messages: [{ role: 'user', content: 'Hi', name: 'n' }], response_format: { type: 'json_schema', json_schema: { b: 1, a: 2 } } }
    const b = { response_format: { json_schema: { a: 2, b: 1 }, type: 'json_schema' }, messages: [{ name: 'n', content: 'Hi', role: 'user' }], temperature: 0, model: 'gpt-4o-mini' }
    expect(await keyOf({ body: a })).toBe(await keyOf({ body: b }))
    expect(canonicalJson(b)).toBe(canonicalJson(a))
  })

  it('differs for another workspace, target, model, stream flag, message order, config or config version', async () => {
    const base = await keyOf()
    const others = [
      await keyOf({ workspaceId: WORKSPACE_B }),
      await keyOf({ body: { ...CHAT_BODY, model: 'gpt-4o' } }),
      await keyOf({ body: { ...CHAT_BODY, stream: true } }),
      await keyOf({ body: { ...CHAT_BODY, stream: false } }),
      await keyOf({ body: { ...CHAT_BODY, messages: [{ role: 'user', content: 'Hi!' }] } }),
      await keyOf({ routing: plan(CACHED, { slug: 'cfg', version: 2 }) }),
      await keyOf({ routing: plan(CACHED, { slug: 'other', version: 1 }) }),
      await keyOf({ routing: plan({ ...CACHED, virtual_key: 'vk-other' }) }),
      await keyOf({ route: MESSAGES }),
    ]
    expect(new Set([base, ...others]).size).toBe(others.length + 1)
    const two = plan(TWO_TARGETS)
    expect(await keyOf({ routing: two, target: 0 })).not.toBe(await keyOf({ routing: two, target: 1 }))
  })

  it('differs for inline targets with another provider key, custom host or provider', async () => {
    const inline = (extra: Record<string, unknown>) => plan({ cache: { mode: 'simple' }, provider: 'openai', api_key: 'sk-a', custom_host: 'http://127.0.0.1:9/v1', ...extra }, null)
    const keys = [
      await keyOf({ routing: inline({}) }),
      await keyOf({ routing: inline({ api_key: 'sk-b' }) }),
      await keyOf({ routing: inline({ custom_host: 'http://127.0.0.1:10/v1' }) }),
      await keyOf({ routing: inline({ provider: 'groq' }) }),
    ]
    expect(new Set(keys).size).toBe(4)
  })

  it('covers provider-option headers and forwarded headers, not tracing, metadata or the gateway key', async () => {
    const base = await keyOf()
    expect(await keyOf({ headers: { 'x-gateway-trace-id': 't-1', 'x-gateway-metadata': '{"_user":"u"}', 'x-gateway-api-key': 'gw-secret', 'x-gateway-request-timeout': '5000' } })).toBe(base)
    expect(await keyOf({ headers: { 'x-gateway-anthropic-beta': 'tools-2024' } })).not.toBe(base)
    expect(await keyOf({ headers: { 'x-gateway-azure-deployment-id': 'd1' } })).not.toBe(await keyOf({ headers: { 'x-gateway-azure-deployment-id': 'd2' } }))
    const forwarding = plan({ ...CACHED, forward_headers: ['x-tenant'] })
    expect(await keyOf({ routing: forwarding, headers: { 'x-tenant': 'a' } })).not.toBe(await keyOf({ routing: forwarding, headers: { 'x-tenant': 'b' } }))
    expect(await keyOf({ headers: { 'x-gateway-forward-headers': 'x-user', 'x-user': 'a' } })).not.toBe(
      await keyOf({ headers: { 'x-gateway-forward-headers': 'x-user', 'x-user': 'b' } }),
    )
    // A header that is not forwarded changes nothing.
    expect(await keyOf({ headers: { 'x-user': 'a' } })).toBe(base)
  })

  it('hashes the bytes sent on routes without a parsed body', async () => {
    const one = await keyOf({ route: SPEECH, body: null, rawBody: Buffer.from('{"input":"a"}') })
    const two = await keyOf({ route: SPEECH, body: null, rawBody: Buffer.from('{"input":"b"}') })
    expect(one).toMatch(/^[0-9a-f]{64}$/)
    expect(one).not.toBe(two)
  })
})

describe('cache plugin: capturing and storing', () => {
  async function missed(store: SpyStore, overrides: Partial<CacheConfig> = {}, options: RequestOptions = {}) {
    const p = plugin(store, overrides)
    const { ctx, attempt } = request(options)
    await p.onAttempt(ctx, attempt)
    expect(attempt.cacheStatus).toBe('MISS')
    return { p, ctx, attempt }
  }

  it('stores a stream as the client got it, event lines included, and answers a streamed request with those bytes', async () => {
    const store = new SpyStore()
    const body = { ...CHAT_BODY, stream: true }
    const { p, ctx, attempt } = await missed(store, {}, { body })
    const events: SseEvent[] = [{ data: 'line one\nline two', otherLines: ['event: note', 'id: 7'] }, ...STREAM_EVENTS]
    serve(p, ctx, attempt, sseReply(), events)
    await settle()
    const expected =
      'event: note\nid: 7\ndata: line one\ndata: line two\n\n' +
      'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n' +
      'data: {"choices":[{"delta":{"content":"Hello"}}]}\n\n' +
      'data: [DONE]\n\n'
    const next = request({ body })
    const hit = (await p.onAttempt(next.ctx, next.attempt)) as Reply
    expect(next.attempt.cacheStatus).toBe('HIT')
    expect(hit.headers).toEqual([['content-type', 'text/event-stream']])
    expect(Buffer.from(hit.body as Uint8Array).toString()).toBe(expected)
    // The same request without stream gets nothing from the streamed entry.
    const whole = request()
    expect(await p.onAttempt(whole.ctx, whole.attempt)).toBeUndefined()
    expect(whole.attempt.cacheStatus).toBe('MISS')
  })

  it('does not store a reply over maxEntryBytes, whole or streamed (the stream capture stops at the bound)', async () => {
    const store = new SpyStore()
    const whole = await missed(store, { maxEntryBytes: 100 })
    serve(whole.p, whole.ctx, whole.attempt, jsonReply(`{"text":"${'x'.repeat(200)}"}`))
    const stream = await missed(store, { maxEntryBytes: 100 }, { body: { ...CHAT_BODY, stream: true } })
    serve(stream.p, stream.ctx, stream.attempt, sseReply(), [
      { data: `{"a":"${'y'.repeat(60)}"}`, otherLines: [] },
      { data: `{"b":"${'z'.repeat(60)}"}`, otherLines: [] },
      { data: '[DONE]', otherLines: [] },
    ])
    await settle()
    expect(store.sets).toHaveLength(0)
    // Exactly at the bound is fine.
    const exact = await missed(store, { maxEntryBytes: 100 })
    serve(exact.p, exact.ctx, exact.attempt, jsonReply('x'.repeat(100)))
    await settle()
    expect(store.sets).toHaveLength(1)
  })

  it('stores nothing for error replies, errored or aborted exchanges, a reply replaced by an error, or a cut OpenAI stream', async () => {
    const store = new SpyStore()
    const cases: Array<(p: CachePlugin, ctx: RequestContext, attempt: Attempt) => void> = [
      (p, ctx, attempt) => serve(p, ctx, attempt, jsonReply('{"error":{"message":"overloaded"}}', 503)),
      (p, ctx, attempt) => serve(p, ctx, attempt, jsonReply('{"error":{}}', 429)),
      (p, ctx, attempt) => serve(p, ctx, attempt, jsonReply(), [], 'aborted'),
      (p, ctx, attempt) => serve(p, ctx, attempt, sseReply(), STREAM_EVENTS.slice(0, 2), 'errored'),
      (p, ctx, attempt) => serve(p, ctx, attempt, sseReply(), STREAM_EVENTS, 'aborted'),
      // Ended "completed" but without [DONE]: an OpenAI stream cut short is not kept.
      (p, ctx, attempt) => serve(p, ctx, attempt, sseReply(), STREAM_EVENTS.slice(0, 2)),
      (p, ctx, attempt) => {
        // A later onResponse hook swapped in an error: core records it and sends that status.
        ctx.attempt = attempt
        p.onResponse(ctx, jsonReply())
        ctx.status = 502
        ctx.error = null
        ctx.outcome = 'completed'
        p.onLog(ctx)
      },
      (p, ctx, attempt) => {
        ctx.attempt = attempt
        p.onResponse(ctx, jsonReply())
        ctx.status = 200
        ctx.error = { status: 500 } as RequestContext['error']
        ctx.outcome = 'errored'
        p.onLog(ctx)
      },
      // A compressed body would reach clients that did not ask for that encoding.
      (p, ctx, attempt) => serve(p, ctx, attempt, jsonReply(JSON_REPLY, 200, [['content-type', 'application/json'], ['Content-Encoding', 'gzip']])),
      // A non-SSE body forward relays as a stream (no content-length upstream) cannot be captured.
      (p, ctx, attempt) => serve(p, ctx, attempt, { ...sseReply(), body: { ...(sseReply().body as StreamBody), sse: false } }),
      // An empty reply (204) has nothing to keep.
      (p, ctx, attempt) => serve(p, ctx, attempt, { status: 204, headers: [], body: null }),
    ]
    for (const run of cases) {
      const { p, ctx, attempt } = await missed(store)
      run(p, ctx, attempt)
    }
    await settle()
    expect(store.sets).toEqual([])
  })

  it('keeps a Messages-format stream that ends without [DONE] (its last event is message_stop)', async () => {
    const store = new SpyStore()
    const body = { model: 'claude-3-5-haiku', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'Hi' }] }
    const { p, ctx, attempt } = await missed(store, {}, { route: MESSAGES, body })
    serve(p, ctx, attempt, sseReply(), [
      { data: '{"type":"message_start"}', otherLines: ['event: message_start'] },
      { data: '{"type":"message_stop"}', otherLines: ['event: message_stop'] },
    ])
    await settle()
    expect(store.sets).toHaveLength(1)
    expect(Buffer.from(store.sets[0]?.value.body ?? []).toString()).toBe(
      'event: message_start\ndata: {"type":"message_start"}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n',
    )
  })

  it('captures only the served attempt: a failed earlier attempt with a key is never stored', async () => {
    const store = new SpyStore()
    const p = plugin(store)
    const routing = plan(TWO_TARGETS)
    const { ctx, attempt: first } = request({ routing })
    await p.onAttempt(ctx, first)
    const second = new Attempt({ index: 1, target: leaves(routing.root)[1] as RoutingTarget, retry: 0, body: CHAT_BODY, rawBody: ctx.rawBody, startedAt: performance.now() })
    ctx.attempts?.push(second)
    await p.onAttempt(ctx, second)
    serve(p, ctx, second, jsonReply())
    await settle()
    expect(store.sets.map((set) => set.key)).toEqual([second.cacheKey])
    expect(second.cacheKey).not.toBe(first.cacheKey)
  })

  it('does nothing on a request without a config (no attempt): one read of ctx.attempt', async () => {
    const store = new SpyStore()
    const p = plugin(store)
    const { ctx } = request()
    ctx.routing = null
    ctx.attempts = null
    expect(p.onResponse(ctx, jsonReply())).toBeUndefined()
    const event = { data: 'x' }
    expect(p.onChunk(ctx, event)).toBe(event)
    ctx.status = 200
    ctx.outcome = 'completed'
    p.onLog(ctx)
    await settle()
    expect(store.sets).toEqual([])
    expect(store.gets).toBe(0)
  })
})

describe('cache plugin: failure policy', () => {
  it('a store that cannot be reached is a miss, then a dropped write: counted, logged once per interval, never thrown', async () => {
    const store = new FailingStore()
    const logger = recordingLogger()
    const p = plugin(store, {}, logger)
    for (let i = 0; i < 3; i++) {
      const { ctx, attempt } = request()
      expect(await p.onAttempt(ctx, attempt)).toBeUndefined()
      expect(attempt.cacheStatus).toBe('MISS')
      serve(p, ctx, attempt, jsonReply())
    }
    await settle()
    expect(p.stats()).toMatchObject({ lookupErrors: 3, writeErrors: 3, misses: 3, hits: 0 })
    expect(logger.warnings).toHaveLength(1)
    expect(logger.warnings[0]?.message).toContain('served as a miss')
    expect(logger.warnings[0]?.fields).toMatchObject({ operation: 'lookup', error: 'connect ECONNREFUSED' })
  })

  it('a logger that throws does not reach the request', async () => {
    const throwing: Logger = { debug() {}, info() {}, error() {}, warn: () => { throw new Error('logger down') } }
    const p = plugin(new FailingStore(), {}, throwing)
    const { ctx, attempt } = request()
    expect(await p.onAttempt(ctx, attempt)).toBeUndefined()
    expect(attempt.cacheStatus).toBe('MISS')
  })

  it('writes waiting on a stalled store are bounded: past maxPendingWrites they are dropped and counted', async () => {
    const store = new StalledStore()
    const p = plugin(store, { maxPendingWrites: 2 })
    for (let i = 0; i < 5; i++) {
      const { ctx, attempt } = request({ body: { ...CHAT_BODY, n: i } })
      await p.onAttempt(ctx, attempt)
      serve(p, ctx, attempt, jsonReply())
    }
    expect(store.sets).toHaveLength(2)
    expect(p.stats()).toMatchObject({ stored: 2, writesDropped: 3 })
  })
})
