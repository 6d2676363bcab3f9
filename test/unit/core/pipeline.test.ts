import { describe, expect, it } from 'vitest'
import { Attempt, ClientAbort, RequestContext, type SseEvent } from '../../../core/context.js'
import { ERRORS, GatewayError, gatewayError } from '../../../core/errors.js'
import { Pipeline, type ClientExchange, type EventTransform } from '../../../core/pipeline.js'
import { jsonReply, type AttemptGate, type GatewayPlugin, type Reply } from '../../../core/plugin.js'
import { checkRoutingConfig, compileRoutingConfig, type RoutingNode } from '../../../core/routing-config.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../../core/routes.js'
import type { Logger } from '../../../core/service.js'

const chatRoute = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec
const modelsRoute = INFERENCE_ROUTES.find((route) => route.id === 'models.list') as RouteSpec

function makeCtx(route: RouteSpec = chatRoute, headers: Record<string, string> = {}): RequestContext {
  return new RequestContext({
    requestId: 'req-1',
    traceId: 'trace-1',
    receivedAt: Date.now(),
    startedAt: 0,
    method: route.method,
    path: route.pattern,
    query: '',
    headers,
    clientIp: '127.0.0.1',
    route,
    params: {},
    signal: new ClientAbort(),
  })
}

/** Records what the pipeline sends; replays stream bodies through the transform. */
class FakeExchange implements ClientExchange {
  sent: Reply | null = null
  transform: EventTransform | null = null
  readonly body: Buffer | GatewayError
  constructor(body: Buffer | GatewayError = Buffer.from('{"model":"m"}')) {
    this.body = body
  }
  async readBody(): Promise<Buffer | GatewayError> {
    return this.body
  }
  async send(ctx: RequestContext, reply: Reply, transform: EventTransform | null): Promise<void> {
    this.sent = reply
    this.transform = transform
    ctx.status = reply.status
    ctx.outcome = ctx.error === null ? 'completed' : 'errored'
  }
}

const silent: Logger & { errors: unknown[] } = {
  errors: [],
  debug() {},
  info() {},
  warn() {},
  error(fields: object) {
    silent.errors.push(fields)
  },
}

function recorder(name: string, calls: string[], overrides: Partial<GatewayPlugin> = {}): GatewayPlugin {
  return {
    onRequest: () => {
      calls.push(`${name}.onRequest`)
      return undefined
    },
    onAccess: () => {
      calls.push(`${name}.onAccess`)
      return undefined
    },
    onResponse: () => {
      calls.push(`${name}.onResponse`)
      return undefined
    },
    onLog: () => {
      calls.push(`${name}.onLog`)
    },
    ...overrides,
  }
}

function terminal(calls: string[], reply: Reply | GatewayError = jsonReply(200, { ok: true })): GatewayPlugin {
  return {
    onForward: async () => {
      calls.push('terminal.onForward')
      return reply
    },
    onLog: () => {
      calls.push('terminal.onLog')
    },
  }
}

describe('Pipeline', () => {
  it('runs request phases by priority, the terminal, onResponse in reverse, then onLog: the terminal first, the rest by priority', async () => {
    const calls: string[] = []
    const pipeline = new Pipeline('inference', 'data', [
      { name: 'a', plugin: recorder('a', calls) },
      { name: 'b', plugin: recorder('b', calls) },
      { name: 't', plugin: terminal(calls) },
    ], silent)
    const exchange = new FakeExchange()
    const ctx = makeCtx()
    await pipeline.handle(ctx, exchange)
    expect(calls).toEqual([
      'a.onRequest', 'b.onRequest', 'a.onAccess', 'b.onAccess', 'terminal.onForward',
      'b.onResponse', 'a.onResponse', 'terminal.onLog', 'a.onLog', 'b.onLog',
    ])
    expect(ctx.body).toEqual({ model: 'm' })
    expect(exchange.sent?.status).toBe(200)
  })

  it('stops at a returned error: later hooks and the terminal do not run, onResponse only for plugins that ran, onLog for all', async () => {
    const calls: string[] = []
    const pipeline = new Pipeline('inference', 'data', [
      { name: 'a', plugin: recorder('a', calls) },
      { name: 'b', plugin: recorder('b', calls, { onRequest: () => { calls.push('b.onRequest'); return gatewayError(ERRORS.GW_AUTH_KEY_INVALID) } }) },
      { name: 'c', plugin: recorder('c', calls) },
      { name: 't', plugin: terminal(calls) },
    ], silent)
    const exchange = new FakeExchange()
    const ctx = makeCtx()
    await pipeline.handle(ctx, exchange)
    expect(calls).toEqual(['a.onRequest', 'b.onRequest', 'b.onResponse', 'a.onResponse', 'terminal.onLog', 'a.onLog', 'b.onLog', 'c.onLog'])
    expect(exchange.sent?.status).toBe(401)
    expect(JSON.parse(String(exchange.sent?.body))).toEqual({
      error: { message: 'Invalid API key', type: 'authentication_error', param: null, code: 'GW_AUTH_KEY_INVALID' },
    })
    expect(ctx.error?.code).toBe('GW_AUTH_KEY_INVALID')
    expect(ctx.rawBody).toBeNull()
  })

  it('sends a ready reply returned by a hook (short circuit) without calling the terminal', async () => {
    const calls: string[] = []
    const pipeline = new Pipeline('inference', 'data', [
      { name: 'cache', plugin: { onAccess: async () => jsonReply(200, { cached: true }) } },
      { name: 't', plugin: terminal(calls) },
    ], silent)
    const exchange = new FakeExchange()
    await pipeline.handle(makeCtx(), exchange)
    expect(calls).toEqual(['terminal.onLog'])
    expect(exchange.sent?.body).toBe('{"cached":true}')
  })

  it('lets onResponse replace the reply with an error', async () => {
    const calls: string[] = []
    const pipeline = new Pipeline('inference', 'data', [
      { name: 'guard', plugin: { onResponse: () => gatewayError(ERRORS.GW_SCOPE_MISSING) } },
      { name: 't', plugin: terminal(calls) },
    ], silent)
    const exchange = new FakeExchange()
    await pipeline.handle(makeCtx(), exchange)
    expect(exchange.sent?.status).toBe(403)
  })

  it('turns a thrown hook into a generic 500 and logs the plugin and phase', async () => {
    const calls: string[] = []
    silent.errors.length = 0
    const pipeline = new Pipeline('admin', 'control', [
      { name: 'buggy', plugin: { onAccess: () => { throw new Error('secret detail') } } },
      { name: 't', plugin: terminal(calls) },
    ], silent)
    const exchange = new FakeExchange()
    await pipeline.handle(makeCtx(), exchange)
    expect(exchange.sent?.status).toBe(500)
    expect(JSON.parse(String(exchange.sent?.body))).toEqual({ success: false, data: { message: 'Internal gateway error', errorCode: 'AB04' } })
    expect(String(exchange.sent?.body)).not.toContain('secret detail')
    expect(silent.errors[0]).toMatchObject({ plugin: 'buggy', phase: 'onAccess' })
    expect(calls).toEqual(['terminal.onLog'])
  })

  it('answers malformed JSON with 400 before onAccess hooks run', async () => {
    const calls: string[] = []
    const pipeline = new Pipeline('inference', 'data', [
      { name: 'a', plugin: recorder('a', calls) },
      { name: 't', plugin: terminal(calls) },
    ], silent)
    for (const body of ['{not json', '[1,2]', '"text"', '']) {
      const exchange = new FakeExchange(Buffer.from(body))
      await pipeline.handle(makeCtx(), exchange)
      expect(exchange.sent?.status).toBe(400)
      expect(String(exchange.sent?.body)).toContain('GW_REQ_MALFORMED_JSON')
    }
    expect(calls.filter((call) => call === 'a.onAccess')).toEqual([])
  })

  it('refuses JSON nested deeper than 64 levels with 400 before onAccess hooks run, in the group shape', async () => {
    const calls: string[] = []
    const deep = `{"model":"m","messages":${'['.repeat(100_000)}${']'.repeat(100_000)}}`
    for (const [group, shape] of [['inference', 'data'], ['admin', 'control']] as const) {
      const pipeline = new Pipeline(group, shape, [
        { name: 'a', plugin: recorder('a', calls) },
        { name: 't', plugin: terminal(calls) },
      ], silent)
      const exchange = new FakeExchange(Buffer.from(deep))
      const ctx = makeCtx()
      await pipeline.handle(ctx, exchange)
      expect(exchange.sent?.status).toBe(400)
      const body = JSON.parse(String(exchange.sent?.body))
      const message = 'The JSON body nests objects and arrays deeper than 64 levels'
      expect(body).toEqual(shape === 'data'
        ? { error: { message, type: 'invalid_request_error', param: null, code: 'GW_REQ_INVALID' } }
        : { success: false, data: { message, errorCode: 'AB01' } })
      expect(ctx.body).toBeNull()
    }
    expect(calls.filter((call) => call === 'a.onAccess' || call === 'terminal.onForward')).toEqual([])
    const shallow = new FakeExchange(Buffer.from(`{"a":${'['.repeat(63)}${']'.repeat(63)}}`))
    await new Pipeline('inference', 'data', [{ name: 't', plugin: terminal([]) }], silent).handle(makeCtx(), shallow)
    expect(shallow.sent?.status).toBe(200)
  })

  it('checks x-gateway-metadata on data-plane groups after onRequest, before the body and onAccess', async () => {
    const calls: string[] = []
    const members = [
      { name: 'a', plugin: recorder('a', calls) },
      { name: 't', plugin: terminal(calls) },
    ]
    const pipeline = new Pipeline('passthrough', 'data', members, silent)
    const bad = makeCtx(chatRoute, { 'x-gateway-metadata': '{"n":1}' })
    const refused = new FakeExchange()
    await pipeline.handle(bad, refused)
    expect(refused.sent?.status).toBe(400)
    expect(JSON.parse(String(refused.sent?.body))).toEqual({
      error: { message: 'Invalid x-gateway-metadata header: the value of "n" must be a string', type: 'invalid_request_error', param: 'x-gateway-metadata', code: 'GW_REQ_INVALID' },
    })
    expect(calls).toEqual(['a.onRequest', 'a.onResponse', 'terminal.onLog', 'a.onLog'])
    expect(bad.rawBody).toBeNull()
    expect(bad.metadata).toBeNull()

    const good = makeCtx(chatRoute, { 'x-gateway-metadata': '{"_user":"alice"}' })
    await new Pipeline('inference', 'data', members, silent).handle(good, new FakeExchange())
    expect(good.metadata).toEqual({ _user: 'alice' })
    const none = makeCtx()
    await pipeline.handle(none, new FakeExchange())
    expect(none.metadata).toBeNull()
  })

  it('leaves x-gateway-metadata alone on the Admin API, which has no use for it', async () => {
    const ctx = makeCtx(chatRoute, { 'x-gateway-metadata': 'not json' })
    const exchange = new FakeExchange()
    await new Pipeline('admin', 'control', [{ name: 't', plugin: terminal([]) }], silent).handle(ctx, exchange)
    expect(exchange.sent?.status).toBe(200)
    expect(ctx.metadata).toBeNull()
  })

  it('does not read a body on routes without one', async () => {
    const calls: string[] = []
    const pipeline = new Pipeline('inference', 'data', [{ name: 't', plugin: terminal(calls) }], silent)
    const exchange = new FakeExchange(gatewayError(ERRORS.GW_REQ_BODY_TOO_LARGE))
    const ctx = makeCtx(modelsRoute)
    await pipeline.handle(ctx, exchange)
    expect(exchange.sent?.status).toBe(200)
    expect(ctx.rawBody).toBeNull()
  })

  it('passes the body-limit error through as 413', async () => {
    const pipeline = new Pipeline('inference', 'data', [{ name: 't', plugin: terminal([]) }], silent)
    const exchange = new FakeExchange(gatewayError(ERRORS.GW_REQ_BODY_TOO_LARGE))
    await pipeline.handle(makeCtx(), exchange)
    expect(exchange.sent?.status).toBe(413)
  })

  it('compiles onChunk hooks in reverse priority into one transform, and none when no plugin has them', async () => {
    const order: string[] = []
    const upper = { onChunk: (_ctx: RequestContext, event: SseEvent) => { order.push('upper'); return { data: event.data.toUpperCase() } } }
    const dropper = { onChunk: (_ctx: RequestContext, event: SseEvent) => { order.push('dropper'); return event.data === 'drop' ? null : event } }
    const pipeline = new Pipeline('inference', 'data', [
      { name: 'upper', plugin: upper },
      { name: 'dropper', plugin: dropper },
      { name: 't', plugin: terminal([]) },
    ], silent)
    const exchange = new FakeExchange()
    const ctx = makeCtx()
    await pipeline.handle(ctx, exchange)
    expect(exchange.transform?.(ctx, { data: 'hello' })).toEqual({ data: 'HELLO' })
    expect(order).toEqual(['dropper', 'upper'])
    expect(exchange.transform?.(ctx, { data: 'drop' })).toBeNull()

    const plain = new Pipeline('inference', 'data', [{ name: 't', plugin: terminal([]) }], silent)
    const second = new FakeExchange()
    await plain.handle(makeCtx(), second)
    expect(second.transform).toBeNull()
  })

  it('hands the terminal a gate that runs onAttempt hooks by priority (sync while they are), stops at the first answer, and ends only the hooks that ran', async () => {
    const check = checkRoutingConfig({ provider: 'openai', api_key: 'sk' }, 'inline')
    if (!check.ok) throw new Error('config')
    const target = (compileRoutingConfig(check.config, null).root as Extract<RoutingNode, { kind: 'target' }>).target
    const calls: string[] = []
    let refuse = false
    const first: GatewayPlugin = { onAttempt: () => { calls.push('first'); return undefined }, onAttemptEnd: () => { calls.push('end first') } }
    const second: GatewayPlugin = {
      onAttempt: async () => { calls.push('second'); return refuse ? gatewayError(ERRORS.GW_RATE_LIMITED) : undefined },
      onAttemptEnd: () => { calls.push('end second') },
    }
    const third: GatewayPlugin = { onAttempt: () => { calls.push('third'); throw new Error('bug') }, onAttemptEnd: () => { calls.push('end third') } }
    let gate: AttemptGate | null = null
    const results: unknown[] = []
    const pipeline = new Pipeline('inference', 'data', [
      { name: 'first', plugin: first },
      { name: 'second', plugin: second },
      { name: 'third', plugin: third },
      {
        name: 't',
        plugin: {
          onForward: async (ctx: RequestContext, given: AttemptGate) => {
            gate = given
            const attempt = new Attempt({ index: 0, target, retry: 0, body: null, rawBody: null, startedAt: 0 })
            results.push(await given.admit(ctx, attempt))
            given.end(ctx, attempt)
            return jsonReply(200, {})
          },
        },
      },
    ], silent)
    refuse = true
    await pipeline.handle(makeCtx(), new FakeExchange())
    expect(calls).toEqual(['first', 'second', 'end first', 'end second'])
    expect((results[0] as GatewayError).code).toBe('GW_RATE_LIMITED')
    calls.length = 0
    refuse = false
    await pipeline.handle(makeCtx(), new FakeExchange())
    // A hook that throws refuses the attempt with a generic 500; every hook that ran is ended.
    expect(calls).toEqual(['first', 'second', 'third', 'end first', 'end second', 'end third'])
    expect((results[1] as GatewayError).code).toBe('GW_INTERNAL')
    expect(gate!.empty).toBe(false)
    // Synchronous hooks answer synchronously.
    const syncOnly = new Pipeline('inference', 'data', [
      { name: 'first', plugin: first },
      { name: 't', plugin: { onForward: async (ctx: RequestContext, given: AttemptGate) => {
        results.push(given.admit(ctx, new Attempt({ index: 0, target, retry: 0, body: null, rawBody: null, startedAt: 0 })))
        return jsonReply(200, {})
      } } },
    ], silent)
    await syncOnly.handle(makeCtx(), new FakeExchange())
    expect(results[2]).toBeUndefined()
  })

  it('passes no transform when every onChunk plugin declines the reply (wantsChunks), and one when any wants it', async () => {
    const streamReply = (): Reply => ({
      status: 200,
      headers: [['content-type', 'text/event-stream']],
      body: { source: { consume: () => {}, pause: () => {}, resume: () => {}, destroy: () => {} }, sse: true, toError: () => gatewayError(ERRORS.GW_INTERNAL) },
    })
    let wanted = false
    const picky: GatewayPlugin = { onChunk: (_ctx, event) => event, wantsChunks: () => wanted }
    const pipeline = new Pipeline('inference', 'data', [
      { name: 'picky', plugin: picky },
      { name: 't', plugin: { onForward: async () => streamReply() } },
    ], silent)
    const declined = new FakeExchange()
    await pipeline.handle(makeCtx(), declined)
    expect(declined.transform).toBeNull()
    wanted = true
    const accepted = new FakeExchange()
    await pipeline.handle(makeCtx(), accepted)
    expect(accepted.transform).not.toBeNull()
    // A plugin without wantsChunks always wants the events, whatever the others say.
    wanted = false
    const always = new Pipeline('inference', 'data', [
      { name: 'picky', plugin: picky },
      { name: 'plain', plugin: { onChunk: (_ctx: RequestContext, event: SseEvent) => event } },
      { name: 't', plugin: { onForward: async () => streamReply() } },
    ], silent)
    const mixed = new FakeExchange()
    await always.handle(makeCtx(), mixed)
    expect(mixed.transform).not.toBeNull()
  })

  it("runs the terminal's onLog before every other onLog, so a slot it fills there is final for plugins ranked above and below it", async () => {
    const usage = { promptTokens: 3, completionTokens: 4, totalTokens: 7, cachedTokens: 0 }
    const seen: Array<[string, number | null]> = []
    const reader = (name: string): GatewayPlugin => ({
      onLog: (ctx) => {
        seen.push([name, ctx.usage?.totalTokens ?? null])
      },
    })
    const pipeline = new Pipeline('inference', 'data', [
      { name: 'rate-limit', plugin: reader('rate-limit') },
      { name: 'budget', plugin: reader('budget') },
      {
        name: 'forward',
        plugin: {
          onForward: async () => jsonReply(200, { ok: true }),
          onLog: (ctx) => {
            ctx.usage = usage
          },
        },
      },
      { name: 'log', plugin: reader('log') },
    ], silent)
    const ctx = makeCtx()
    await pipeline.handle(ctx, new FakeExchange())
    // Read synchronously, in the hooks themselves: no deferral needed to see the terminal's write.
    expect(seen).toEqual([['rate-limit', 7], ['budget', 7], ['log', 7]])

    // Also when the request stopped before the terminal: its onLog still runs, and still first.
    seen.length = 0
    const refused = new Pipeline('inference', 'data', [
      { name: 'auth', plugin: { onRequest: () => gatewayError(ERRORS.GW_AUTH_KEY_INVALID), onLog: (c) => void seen.push(['auth', c.usage?.totalTokens ?? null]) } },
      { name: 'forward', plugin: { onForward: async () => jsonReply(200, {}), onLog: () => void seen.push(['forward', null]) } },
      { name: 'log', plugin: reader('log') },
    ], silent)
    await refused.handle(makeCtx(), new FakeExchange())
    expect(seen).toEqual([['forward', null], ['auth', null], ['log', null]])
  })

  it('keeps running onLog hooks when one throws', async () => {
    const calls: string[] = []
    const pipeline = new Pipeline('inference', 'data', [
      { name: 'bad', plugin: { onLog: () => { throw new Error('boom') } } },
      { name: 'after', plugin: { onLog: () => void calls.push('after.onLog') } },
      { name: 't', plugin: terminal(calls) },
    ], silent)
    await pipeline.handle(makeCtx(), new FakeExchange())
    expect(calls).toEqual(['terminal.onForward', 'terminal.onLog', 'after.onLog'])
  })

  it('refuses to compile a group without exactly one terminal', () => {
    expect(() => new Pipeline('inference', 'data', [{ name: 'a', plugin: {} }], silent)).toThrow(/exactly one terminal/)
  })

  it('maps the terminal returning an error into the group shape', async () => {
    const pipeline = new Pipeline('admin', 'control', [{ name: 't', plugin: terminal([], gatewayError(ERRORS.GW_ADMIN_NOT_FOUND)) }], silent)
    const exchange = new FakeExchange()
    await pipeline.handle(makeCtx(), exchange)
    expect(exchange.sent?.status).toBe(404)
    expect(JSON.parse(String(exchange.sent?.body))).toEqual({ success: false, data: { message: 'Resource not found', errorCode: 'AB08' } })
    expect(exchange.sent?.status).toBe(ERRORS.GW_ADMIN_NOT_FOUND.status)
    expect(new GatewayError(ERRORS.GW_ADMIN_NOT_FOUND)).toBeInstanceOf(Error)
  })
})
