/**
 * Config routing end to end (issue 15, API.md §4): inline configs in `x-gateway-config` drive
 * fallback, retries, timeouts, load balancing, conditions, nesting, overrides and circuit breakers
 * across three loopback mock providers that are told to fail, stall, rate-limit or die mid-stream.
 * Real gateway over real sockets, driven by the official `openai` client (its own retries off, so
 * every retry seen is the gateway's) and by raw fetch where headers matter.
 */
import OpenAI, { APIError } from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { CHAT_BODY, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, MOCK_STREAM_DELTAS, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

let a: MockUpstream
let b: MockUpstream
let c: MockUpstream
let gw: TestGateway
let key: string

beforeAll(async () => {
  ;[a, b, c] = await Promise.all([startMockUpstream(), startMockUpstream(), startMockUpstream()])
  // Short backoff so retries do not slow the suite; the bounds themselves are unit-tested.
  gw = await startTestGateway({ overlay: { plugins: { forward: { config: { retryBaseDelayMs: 10, retryMaxDelayMs: 50 } } } } })
  key = (await gw.workspaceKey(['completions.write'])).key
})

afterEach(() => {
  a.reset()
  b.reset()
  c.reset()
})

afterAll(async () => {
  await gw?.close()
  await Promise.all([a?.close(), b?.close(), c?.close()])
})

/** A target at mock `m` with its own provider key. */
function target(m: MockUpstream, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { provider: 'openai', api_key: `sk-${m.port}`, custom_host: m.url, ...extra }
}

function post(config: unknown, body: unknown = CHAT_BODY, extra: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-config': JSON.stringify(config), ...extra },
    body: JSON.stringify(body),
  })
}

function client(config: unknown, extra: Record<string, string> = {}): OpenAI {
  return new OpenAI({
    baseURL: `${gw.url}/v1`,
    apiKey: 'unused',
    maxRetries: 0,
    defaultHeaders: { 'x-gateway-api-key': key, 'x-gateway-config': JSON.stringify(config), ...extra },
  })
}

const serverError = { type: 'json', status: 500, body: { error: { message: 'boom', type: 'server_error' } } } as const

describe('fallback', () => {
  it('moves to the next target on a failure and names the target that answered', async () => {
    a.next(serverError)
    const config = { strategy: { mode: 'fallback' }, targets: [target(a), target(b)] }
    const { data, response } = await client(config).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }).withResponse()
    expect(data.choices[0]?.message.content).toBe(MOCK_REPLY)
    expect(response.headers.get('x-gateway-last-used-option-index')).toBe('config.targets[1]')
    expect(response.headers.get('x-gateway-retry-attempt-count')).toBe('0')
    expect(a.requests).toHaveLength(1)
    expect(b.requests).toHaveLength(1)
    // Each target gets its own credential, never another's.
    expect(a.requests[0]?.headers.authorization).toBe(`Bearer sk-${a.port}`)
    expect(b.requests[0]?.headers.authorization).toBe(`Bearer sk-${b.port}`)
  })

  it('with on_status_codes, falls back only on those statuses; another failure is the answer', async () => {
    a.next(serverError)
    const config = { strategy: { mode: 'fallback', on_status_codes: [429] }, targets: [target(a), target(b)] }
    const response = await post(config)
    expect(response.status).toBe(500)
    expect(((await response.json()) as any).error.message).toContain('boom')
    expect(b.requests).toHaveLength(0)

    a.next({ type: 'json', status: 429, body: { error: { message: 'slow down' } } })
    const second = await post(config)
    expect(second.status).toBe(200)
    expect(second.headers.get('x-gateway-last-used-option-index')).toBe('config.targets[1]')
  })

  it('falls back on a connection failure', async () => {
    a.next({ type: 'reset' })
    const response = await post({ strategy: { mode: 'fallback', on_status_codes: [429] }, targets: [target(a), target(b)] })
    expect(response.status).toBe(200)
    expect(b.requests).toHaveLength(1)
  })

  it('when every target fails, the client gets the last failure', async () => {
    a.next(serverError)
    b.next({ type: 'json', status: 503, body: { error: { message: 'down too' } } })
    const response = await post({ strategy: { mode: 'fallback' }, targets: [target(a), target(b)] })
    expect(response.status).toBe(503)
    expect(((await response.json()) as any).error.message).toContain('down too')
    expect(response.headers.get('x-gateway-last-used-option-index')).toBe('config.targets[1]')
  })
})

describe('retry', () => {
  it('retries a target on a listed status and reports the retry that succeeded', async () => {
    a.next({ type: 'json', status: 503, body: { error: { message: 'busy' } } })
    a.next({ type: 'json', status: 502, body: { error: { message: 'busy' } } })
    const response = await post(target(a, { retry: { attempts: 3 } }))
    expect(response.status).toBe(200)
    expect(response.headers.get('x-gateway-retry-attempt-count')).toBe('2')
    expect(response.headers.get('x-gateway-last-used-option-index')).toBe('config')
    expect(a.requests).toHaveLength(3)
  })

  it('gives up after attempts retries with -1, and does not retry a status outside on_status_codes', async () => {
    a.on('/v1/chat/completions', { type: 'json', status: 503, body: { error: { message: 'busy' } } })
    const exhausted = await post(target(a, { retry: { attempts: 2 } }))
    expect(exhausted.status).toBe(503)
    expect(exhausted.headers.get('x-gateway-retry-attempt-count')).toBe('-1')
    expect(a.requests).toHaveLength(3)

    a.reset()
    a.on('/v1/chat/completions', { type: 'json', status: 400, body: { error: { message: 'bad' } } })
    const notRetried = await post(target(a, { retry: { attempts: 2 } }))
    expect(notRetried.status).toBe(400)
    expect(a.requests).toHaveLength(1)
  })

  it("waits what a 429's retry-after-ms asks when use_retry_after_headers is set", async () => {
    a.next({ type: 'json', status: 429, body: { error: { message: 'later' } }, headers: { 'retry-after-ms': '30' } })
    const response = await post(target(a, { retry: { attempts: 1, use_retry_after_headers: true } }))
    expect(response.status).toBe(200)
    expect(a.requests).toHaveLength(2)
  })

  it('retries, then falls back: retries run inside each target first', async () => {
    a.on('/v1/chat/completions', serverError)
    const response = await post({ strategy: { mode: 'fallback' }, retry: { attempts: 1 }, targets: [target(a), target(b)] })
    expect(response.status).toBe(200)
    expect(a.requests).toHaveLength(2)
    expect(b.requests).toHaveLength(1)
  })
})

describe('timeouts', () => {
  it("request_timeout answers 408 and counts as a failure for fallback", async () => {
    a.next({ type: 'hang' })
    const single = await post(target(a, { request_timeout: 150 }))
    expect(single.status).toBe(408)
    expect(((await single.json()) as any).error.type).toBe('timeout_error')

    a.next({ type: 'hang' })
    const fallback = await post({ strategy: { mode: 'fallback' }, request_timeout: 150, targets: [target(a), target(b)] })
    expect(fallback.status).toBe(200)
    expect(fallback.headers.get('x-gateway-last-used-option-index')).toBe('config.targets[1]')
  })
})

describe('load balancing', () => {
  it('shares requests by weight (3:1 over 1 000 requests, within 5 points)', async () => {
    const config = { strategy: { mode: 'loadbalance' }, targets: [target(a, { weight: 3 }), target(b, { weight: 1 }), target(c, { weight: 0 })] }
    const batches = 10
    for (let batch = 0; batch < batches; batch++) {
      const replies = await Promise.all(Array.from({ length: 100 }, () => post(config)))
      for (const reply of replies) {
        expect(reply.status).toBe(200)
        await reply.arrayBuffer()
      }
    }
    const share = a.requests.length / (a.requests.length + b.requests.length)
    expect(a.requests.length + b.requests.length).toBe(1000)
    expect(c.requests).toHaveLength(0)
    expect(Math.abs(share - 0.75)).toBeLessThan(0.05)
  })
})

describe('load balancing with a seed', () => {
  it('picks the same sequence of targets on two gateways started with the same loadbalanceSeed', async () => {
    const config = { strategy: { mode: 'loadbalance' }, targets: [target(a, { weight: 1 }), target(b, { weight: 1 }), target(c, { weight: 1 })] }
    const sequence = async (seed: number): Promise<string[]> => {
      const seeded = await startTestGateway({ overlay: { plugins: { forward: { config: { loadbalanceSeed: seed } } } } })
      try {
        const seededKey = (await seeded.workspaceKey(['completions.write'])).key
        const picks: string[] = []
        for (let i = 0; i < 24; i++) {
          const response = await fetch(`${seeded.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-gateway-api-key': seededKey, 'x-gateway-config': JSON.stringify(config) },
            body: JSON.stringify(CHAT_BODY),
          })
          await response.arrayBuffer()
          picks.push(response.headers.get('x-gateway-last-used-option-index') ?? '')
        }
        return picks
      } finally {
        await seeded.close()
      }
    }
    const first = await sequence(42)
    expect(await sequence(42)).toEqual(first)
    // Every target is picked, and another seed gives another order.
    expect(new Set(first).size).toBe(3)
    expect(await sequence(7)).not.toEqual(first)
  })
})

describe('conditional routing', () => {
  const conditional = () => ({
    strategy: {
      mode: 'conditional',
      conditions: [
        { query: { 'metadata.tier': 'gold' }, then: 'fast' },
        { query: { $and: [{ 'params.max_tokens': { $gte: 1000 } }, { 'metadata.region': { $in: ['eu', 'us'] } }] }, then: 'long' },
      ],
      default: 'cheap',
    },
    targets: [{ name: 'fast', ...target(a) }, { name: 'long', ...target(b) }, { name: 'cheap', ...target(c) }],
  })

  it('routes on metadata and body params, with a default', async () => {
    const config = conditional()
    expect((await post(config, CHAT_BODY, { 'x-gateway-metadata': JSON.stringify({ tier: 'gold' }) })).status).toBe(200)
    expect((await post(config, { ...CHAT_BODY, max_tokens: 2000 }, { 'x-gateway-metadata': JSON.stringify({ region: 'eu' }) })).status).toBe(200)
    expect((await post(config, { ...CHAT_BODY, max_tokens: 10 }, { 'x-gateway-metadata': JSON.stringify({ region: 'eu' }) })).status).toBe(200)
    expect(a.requests).toHaveLength(1)
    expect(b.requests).toHaveLength(1)
    expect(c.requests).toHaveLength(1)
  })

  it('without a match or a default: 400 naming the problem', async () => {
    const config = conditional()
    const noDefault = { ...config, strategy: { ...config.strategy, default: undefined } }
    const response = await post(noDefault)
    expect(response.status).toBe(400)
    expect(((await response.json()) as any).error.code).toBe('GW_CONFIG_NO_TARGET')
  })
})

describe('nesting, overrides and headers', () => {
  it('falls back from a nested load balancer to a plain target, applying override_params down the tree', async () => {
    a.next(serverError)
    const config = {
      strategy: { mode: 'fallback' },
      override_params: { temperature: 0.1, model: 'gpt-4o' },
      targets: [{ strategy: { mode: 'loadbalance' }, targets: [target(a)] }, target(b, { override_params: { model: 'gpt-4o-mini', top_p: 0.5 } })],
    }
    const response = await post(config, { ...CHAT_BODY, temperature: 0.9 })
    expect(response.status).toBe(200)
    expect(response.headers.get('x-gateway-last-used-option-index')).toBe('config.targets[1]')
    expect(a.requests[0]?.json()).toMatchObject({ model: 'gpt-4o', temperature: 0.1 })
    expect(b.requests[0]?.json()).toMatchObject({ model: 'gpt-4o-mini', temperature: 0.1, top_p: 0.5 })
  })

  it('forward_headers sends the named client headers, never the gateway key', async () => {
    const response = await post(target(a, { forward_headers: ['x-trace-me', 'x-copy-of-key'] }), CHAT_BODY, { 'x-trace-me': 'yes', 'x-copy-of-key': key })
    expect(response.status).toBe(200)
    expect(a.requests[0]?.headers['x-trace-me']).toBe('yes')
    expect(a.requests[0]?.headers['x-copy-of-key']).toBeUndefined()
  })

  it('a config without targets applies its settings to the request’s own provider selection', async () => {
    a.next({ type: 'json', status: 503, body: { error: { message: 'busy' } } })
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-gateway-api-key': key,
        'x-gateway-provider': 'openai',
        'x-gateway-custom-host': a.url,
        authorization: 'Bearer sk-own',
        'x-gateway-config': JSON.stringify({ retry: { attempts: 1 } }),
      },
      body: JSON.stringify(CHAT_BODY),
    })
    expect(response.status).toBe(200)
    expect(a.requests).toHaveLength(2)
    expect(a.requests[1]?.headers.authorization).toBe('Bearer sk-own')
  })
})

describe('streams', () => {
  it('a stream that fails before its first chunk falls back; the client sees one clean stream', async () => {
    a.next({ type: 'stream', destroyAfter: 0 })
    const stream = await client({ strategy: { mode: 'fallback' }, targets: [target(a), target(b)] }).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
    })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
    expect(text).toBe(MOCK_STREAM_DELTAS.join(''))
    expect(a.requests).toHaveLength(1)
    expect(b.requests).toHaveLength(1)
  })

  it('a stream that breaks after it started is an error event, with no fallback', async () => {
    a.next({ type: 'stream', destroyAfter: 2 })
    const stream = await client({ strategy: { mode: 'fallback' }, targets: [target(a), target(b)] }).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
    })
    let text = ''
    await expect(
      (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
      })(),
    ).rejects.toBeInstanceOf(APIError)
    expect(text.length).toBeGreaterThan(0)
    expect(b.requests).toHaveLength(0)
  })

  it('an error status before the stream falls back to a streaming target', async () => {
    a.next({ type: 'json', status: 429, body: { error: { message: 'later' } } })
    const response = await post({ strategy: { mode: 'fallback' }, targets: [target(a), target(b)] }, { ...CHAT_BODY, stream: true })
    expect(response.status).toBe(200)
    const text = await response.text()
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
  })
})

describe('circuit breaker', () => {
  it('opens after failure_threshold failures, skips the target while cooling down, then probes it', async () => {
    a.on('/v1/chat/completions', serverError)
    const config = { strategy: { mode: 'fallback', cb_config: { failure_threshold: 2, cooldown_interval: 1000 } }, targets: [target(a), target(b)] }
    for (let i = 0; i < 2; i++) expect((await post(config)).status).toBe(200)
    expect(a.requests).toHaveLength(2)
    // Open: the next requests go straight to b.
    for (let i = 0; i < 3; i++) expect((await post(config)).status).toBe(200)
    expect(a.requests).toHaveLength(2)
    expect(b.requests).toHaveLength(5)
    // After the cool-down one probe reaches a; a is healthy again, so the circuit closes.
    a.reset()
    await new Promise((resolve) => setTimeout(resolve, 1100))
    const probe = await post(config)
    expect(probe.status).toBe(200)
    expect(probe.headers.get('x-gateway-last-used-option-index')).toBe('config.targets[0]')
    expect((await post(config)).headers.get('x-gateway-last-used-option-index')).toBe('config.targets[0]')
    expect(a.requests).toHaveLength(2)
  })

  it('every circuit open: 503 GW_CIRCUIT_OPEN without a provider call', async () => {
    a.on('/v1/chat/completions', serverError)
    const config = { strategy: { mode: 'single', cb_config: { failure_threshold: 1, cooldown_interval: 60000 } }, targets: [target(a, { name: 'only' })] }
    expect((await post(config)).status).toBe(500)
    const refused = await post(config)
    expect(refused.status).toBe(503)
    expect(((await refused.json()) as any).error.code).toBe('GW_CIRCUIT_OPEN')
    expect(a.requests).toHaveLength(1)
  })
})

describe('bad configs', () => {
  it('a schema error names the offending path', async () => {
    const response = await post({ strategy: { mode: 'fallback' }, targets: [target(a), target(b, { retry: { attempts: 9 } })] })
    expect(response.status).toBe(400)
    const body = (await response.json()) as any
    expect(body.error.code).toBe('GW_CONFIG_INVALID')
    expect(body.error.message).toContain('targets[1].retry.attempts')
    expect(a.requests).toHaveLength(0)
  })

  it('an unknown field is refused, not ignored', async () => {
    const response = await post({ ...target(a), retyr: { attempts: 2 } })
    expect(response.status).toBe(400)
    expect(((await response.json()) as any).error.message).toContain('retyr')
  })

  it('malformed JSON, a virtual key next to the config, and provider headers next to targets are 400', async () => {
    const malformed = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-config': '{"strategy":' },
      body: JSON.stringify(CHAT_BODY),
    })
    expect(malformed.status).toBe(400)
    expect((await post(target(a), CHAT_BODY, { 'x-gateway-virtual-key': 'vk-x' })).status).toBe(400)
    expect((await post(target(a), CHAT_BODY, { 'x-gateway-provider': 'openai' })).status).toBe(400)
    expect(a.requests).toHaveLength(0)
  })

  it('an unknown saved config is 404', async () => {
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-config': 'pc-nope-000000' },
      body: JSON.stringify(CHAT_BODY),
    })
    expect(response.status).toBe(404)
    expect(((await response.json()) as any).error.code).toBe('GW_CONFIG_NOT_FOUND')
  })
})
