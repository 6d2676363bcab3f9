/**
 * Hostile input against the real gateway on real sockets (issue 12, items 9–11; API.md §2 "Bad
 * requests are refused before anything is forwarded or stored"):
 * - JSON nested 100 000 levels in any body the gateway parses → 400, never a 500;
 * - `x-gateway-metadata` that is not a JSON object of strings → 400 naming the problem, whether or
 *   not the log plugin runs, and nothing reaches the provider;
 * - oversized header blocks → 431; what uWebSockets.js 20.30 refuses before the gateway sees it is
 *   pinned down as measured (no reply and the connection held, or a prompt close), so a library
 *   upgrade that changes it shows up here. Raw sockets with short waits: no case can hang the test.
 */
import { connect } from 'node:net'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { dataPlaneHeaders, postChat, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

const DEEP = 100_000
const TOO_DEEP_MESSAGE = 'The JSON body nests objects and arrays deeper than 64 levels'

let mock: MockUpstream
let gw: TestGateway
let key: string
let port: number

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  key = (await gw.workspaceKey(['completions.write', 'logs.write', 'logs.read', 'feedbacks.write'])).key
  port = gw.port
})

afterEach(() => {
  mock.reset()
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

function nestedArrays(levels: number): string {
  return `${'['.repeat(levels)}${']'.repeat(levels)}`
}

function nestedObjects(levels: number): string {
  return `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`
}

/** A good chat through the gateway still reaches the mock and comes back. */
async function expectServing(): Promise<void> {
  const before = mock.requests.length
  const response = await postChat(gw.url, key, mock.url)
  const text = await response.text()
  expect(response.status, text).toBe(200)
  expect(JSON.parse(text).choices[0].message.content).toBe(MOCK_REPLY)
  expect(mock.requests.length).toBe(before + 1)
}

async function adminRaw(method: string, path: string, body: string, apiKey: string = gw.adminKey): Promise<{ status: number; body: any }> {
  const response = await fetch(`${gw.url}${path}`, { method, headers: { 'x-gateway-api-key': apiKey, 'content-type': 'application/json' }, body })
  const text = await response.text()
  return { status: response.status, body: JSON.parse(text) }
}

describe('JSON nested deeper than 64 levels', () => {
  it('is refused with 400 on the data plane, before the provider is called', async () => {
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: dataPlaneHeaders(key, mock.url),
      body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":${nestedArrays(DEEP)}}]}`,
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({ error: { message: TOO_DEEP_MESSAGE, type: 'invalid_request_error', param: null, code: 'GW_REQ_INVALID' } })
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('is refused with 400 AB01 in a virtual key model_config (it was a 500)', async () => {
    const workspace = await gw.admin('POST', '/v1/admin/workspaces', { name: 'deep-json' })
    expect(workspace.status).toBe(200)
    const body = `{"name":"deep","provider":"openai","key":"sk-deep","workspace_id":"${workspace.body.id}","model_config":${nestedObjects(DEEP)}}`
    expect(await adminRaw('POST', '/v1/virtual-keys', body)).toEqual({ status: 400, body: { success: false, data: { message: TOO_DEEP_MESSAGE, errorCode: 'AB01' } } })
    // 64 levels in all (the body object, model_config and 62 below it) are still accepted.
    const fits = `{"name":"fits","provider":"openai","key":"sk-fits","workspace_id":"${workspace.body.id}","model_config":${nestedObjects(62)}}`
    const created = await adminRaw('POST', '/v1/virtual-keys', fits)
    expect(created.status, JSON.stringify(created.body)).toBe(200)
  })

  it('is refused with 400 AB01 in a custom log and in feedback (raw bodies the Admin API parses itself)', async () => {
    const log = `{"request":{"url":"https://api.openai.com/v1/chat/completions","body":{"deep":${nestedArrays(DEEP)}}},"response":{"body":{}}}`
    expect(await adminRaw('POST', '/v1/logs', log, key)).toEqual({ status: 400, body: { success: false, data: { message: TOO_DEEP_MESSAGE, errorCode: 'AB01' } } })
    const batch = `[${log}]`
    expect((await adminRaw('POST', '/v1/logs', batch, key)).status).toBe(400)
    const feedback = `{"trace_id":"deep-trace","value":1,"metadata":{"deep":${nestedArrays(DEEP)}}}`
    expect(await adminRaw('POST', '/v1/feedback', feedback, key)).toEqual({ status: 400, body: { success: false, data: { message: TOO_DEEP_MESSAGE, errorCode: 'AB01' } } })
    const fits = `{"request":{"url":"https://api.openai.com/v1/chat/completions","body":{"deep":${nestedArrays(40)}}},"response":{"body":{}}}`
    const stored = await adminRaw('POST', '/v1/logs', fits, key)
    expect(stored.status, JSON.stringify(stored.body)).toBe(200)
  })
})

describe('JSON nested deeper than 64 levels in a pass-through body', () => {
  it('is forwarded byte for byte: the gateway does not parse it as a request, and the limit estimators that peek at it cannot fail', async () => {
    const body = `{"model":"m","max_tokens":5,"documents":${nestedArrays(DEEP)}}`
    const response = await fetch(`${gw.url}/v1/rerank`, { method: 'POST', headers: dataPlaneHeaders(key, mock.url), body })
    expect(response.status, await response.text()).toBe(200)
    expect(mock.requests).toHaveLength(1)
    expect(mock.requests[0]?.text()).toBe(body)
  })
})

describe('x-gateway-metadata', () => {
  const cases: ReadonlyArray<readonly [string, string]> = [
    ['user=alice', 'it is not valid JSON; send a JSON object of strings, e.g. {"_user":"u1"}'],
    ['["alice"]', 'it must be a JSON object of strings, e.g. {"_user":"u1"}'],
    ['{"_user":"alice","tier":2}', 'the value of "tier" must be a string'],
    ['{"nested":{"a":"b"}}', 'the value of "nested" must be a string'],
    [JSON.stringify(Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v']))), 'it has more than 64 keys'],
    [JSON.stringify({ note: 'x'.repeat(1025) }), 'the value of "note" is longer than 1024 characters'],
    [JSON.stringify(Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`k${i}`, 'x'.repeat(1000)]))), 'it is longer than 8192 characters'],
  ]

  async function expectRefused(target: TestGateway, gatewayKey: string, path: string): Promise<void> {
    for (const [value, problem] of cases) {
      const response = await fetch(`${target.url}${path}`, { method: 'POST', headers: dataPlaneHeaders(gatewayKey, mock.url, { 'x-gateway-metadata': value }), body: '{"model":"gpt-4o-mini","messages":[]}' })
      expect(response.status).toBe(400)
      expect(await response.json()).toEqual({
        error: { message: `Invalid x-gateway-metadata header: ${problem}`, type: 'invalid_request_error', param: 'x-gateway-metadata', code: 'GW_REQ_INVALID' },
      })
    }
    expect(mock.requests).toHaveLength(0)
  }

  it('is refused with 400 naming the problem on inference and pass-through routes; nothing is forwarded', async () => {
    await expectRefused(gw, key, '/v1/chat/completions')
    await expectRefused(gw, key, '/v1/rerank')
    const good = await postChat(gw.url, key, mock.url, { 'x-gateway-metadata': JSON.stringify({ _user: 'alice', env: 'prod' }) })
    expect(good.status, await good.text()).toBe(200)
  })

  it('is refused the same with the log plugin switched off', async () => {
    const quiet = await startTestGateway({ overlay: { plugins: { log: { enabled: false } } } })
    try {
      expect(quiet.wiring.logSink).toBeNull()
      const quietKey = (await quiet.workspaceKey(['completions.write'])).key
      await expectRefused(quiet, quietKey, '/v1/chat/completions')
    } finally {
      await quiet.close()
    }
  })
})

interface RawOutcome {
  /** Everything received, as latin1. */
  readonly text: string
  /** Whether the server closed (or reset) the connection before `waitMs` passed. */
  readonly closed: boolean
}

/**
 * Writes `parts` on one connection (a pause between parts makes the server read them separately),
 * then waits until the server closes the connection, `waitMs` passes or what came back holds a
 * whole keep-alive reply (`/healthz` ends its body with `}`), and reports it.
 */
function raw(parts: ReadonlyArray<string | Buffer>, waitMs: number): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.setNoDelay(true)
    const chunks: Buffer[] = []
    let settled = false
    const settle = (closed: boolean): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      resolve({ text: Buffer.concat(chunks).toString('latin1'), closed })
    }
    const timer = setTimeout(() => settle(false), waitMs)
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      const text = Buffer.concat(chunks).toString('latin1')
      if (text.startsWith('HTTP/1.1 200 ') && text.endsWith('}')) settle(false)
    })
    socket.on('close', () => settle(true))
    socket.on('error', () => settle(true))
    socket.on('connect', async () => {
      for (const [index, part] of parts.entries()) {
        if (index > 0) await new Promise((next) => setTimeout(next, 100))
        if (!socket.destroyed) socket.write(part)
      }
    })
  })
}

/** A request head for `path` with extra header lines, ready to send (no body). */
function head(path: string, lines: readonly string[], apiKey: string = key): string {
  return `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-gateway-api-key: ${apiKey}\r\n${lines.map((line) => `${line}\r\n`).join('')}\r\n`
}

function fields(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `x-filler-${i}: v`)
}

/** Long enough for a held connection to show itself, far below uWS's 10 s idle timeout. */
const HOLD_MS = 1500
/** Ample for a reply or a close that comes at once; the test never waits longer. */
const REPLY_MS = 5000

describe('request header limits', () => {
  it('answers 431 to header fields over 16 KB that reach the gateway, and closes the connection', async () => {
    const outcome = await raw([head('/v1/models', ['x-big: ' + 'a'.repeat(17_000)])], REPLY_MS)
    expect(outcome.text.startsWith('HTTP/1.1 431 Request Header Fields Too Large\r\n'), outcome.text.slice(0, 80)).toBe(true)
    const body = JSON.parse(outcome.text.slice(outcome.text.indexOf('\r\n\r\n') + 4))
    expect(body).toEqual({ error: { message: expect.stringMatching(/^The request header fields take \d+ bytes; at most 16384 are accepted$/), type: 'invalid_request_error', param: null, code: 'GW_REQ_HEADERS_TOO_LARGE' } })
    expect(outcome.closed).toBe(true)
  })

  it('answers the 431 in the Admin API shape on an admin route', async () => {
    const outcome = await raw([head('/v1/admin/workspaces', ['x-big: ' + 'a'.repeat(17_000)], gw.adminKey)], REPLY_MS)
    expect(outcome.text.startsWith('HTTP/1.1 431 Request Header Fields Too Large\r\n'), outcome.text.slice(0, 80)).toBe(true)
    const body = JSON.parse(outcome.text.slice(outcome.text.indexOf('\r\n\r\n') + 4))
    expect(body).toEqual({ success: false, data: { message: expect.stringContaining('at most 16384'), errorCode: 'AB01' } })
  })

  it('never leaves a 100 KB header unanswered: 431 when it arrives in one read, else an immediate close', async () => {
    const outcome = await raw([head('/v1/models', ['x-big: ' + 'a'.repeat(100_000)])], REPLY_MS)
    if (outcome.text.length > 0) expect(outcome.text.startsWith('HTTP/1.1 431 '), outcome.text.slice(0, 80)).toBe(true)
    expect(outcome.closed).toBe(true)
  })

  it('serves 16 KB of header fields and 48 fields (the most uWebSockets.js 20.30 takes)', async () => {
    // Host and x-gateway-api-key are two of the fields; 16 KB in all with name, value and 4 bytes each.
    const fill = 16 * 1024 - ('host'.length + '127.0.0.1'.length + 4) - ('x-gateway-api-key'.length + key.length + 4) - ('x-big'.length + 4)
    const big = await raw([head('/healthz', [`x-big: ${'a'.repeat(fill)}`])], REPLY_MS)
    expect(big.text.startsWith('HTTP/1.1 200 OK\r\n'), big.text.slice(0, 80)).toBe(true)
    const many = await raw([head('/healthz', fields(46))], REPLY_MS)
    expect(many.text.startsWith('HTTP/1.1 200 OK\r\n'), many.text.slice(0, 80)).toBe(true)
  })

  it('pins down what uWebSockets.js 20.30 drops unanswered, holding the connection (README: environment, UWS_HTTP_MAX_HEADERS_SIZE)', async () => {
    const dropped: Array<readonly [string, string | Buffer]> = [
      ['49 header fields', head('/healthz', fields(47))],
      ['101 header fields', head('/healthz', fields(99))],
      ['NUL in a value', head('/healthz', ['x-a: a\u0000b'])],
      ['CR in a value', head('/healthz', ['x-a: a\rb'])],
      ['LF in a value', head('/healthz', ['x-a: a\nb'])],
      ['another control byte in a value', head('/healthz', ['x-a: a\u0001b'])],
    ]
    const outcomes = await Promise.all(dropped.map(async ([name, payload]) => [name, await raw([payload], HOLD_MS)] as const))
    for (const [name, outcome] of outcomes) expect({ name, ...outcome }).toEqual({ name, text: '', closed: false })
    await expectServing()
  })

  it('pins down that uWebSockets.js 20.30 closes at once, unanswered, a request without Host', async () => {
    expect(await raw(['GET /healthz HTTP/1.1\r\nx-a: b\r\n\r\n'], REPLY_MS)).toEqual({ text: '', closed: true })
  })

  it('pins down that uWebSockets.js 20.30 closes at once a head that passes 4096 bytes before it is complete', async () => {
    const start = head('/healthz', ['x-big: ' + 'a'.repeat(3000)])
    expect(start.length).toBeLessThan(4096)
    const fits = await raw([start.slice(0, 2000), start.slice(2000)], REPLY_MS)
    expect(fits.text.startsWith('HTTP/1.1 200 OK\r\n'), fits.text.slice(0, 80)).toBe(true)
    const over = head('/healthz', ['x-big: ' + 'a'.repeat(5000)])
    const cut = await raw([over.slice(0, 3500), over.slice(3500)], REPLY_MS)
    expect(cut).toEqual({ text: '', closed: true })
    await expectServing()
  })
})
