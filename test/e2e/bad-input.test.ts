/**
 * Bad input, end to end: the real gateway on real sockets, a real loopback OpenAI mock behind it.
 * Every refusal must carry the documented status and the data-plane body
 * `{"error":{message,type,param,code}}` with the catalogue code, and the gateway must go on
 * serving good requests afterwards.
 */
import { randomUUID } from 'node:crypto'
import { request as httpRequest } from 'node:http'
import { connect, createServer, type AddressInfo } from 'node:net'
import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { ERRORS, type ErrorCode } from '../../core/errors.js'
import { AdminStore } from '../../core/ports.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_MODELS, MOCK_REPLY, openAiErrorBody, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

/** Error `type` per status, from the table in API.md §2 (405 is the catalogue's). */
const TYPE_BY_STATUS: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  408: 'timeout_error',
  413: 'invalid_request_error',
  502: 'upstream_error',
  504: 'timeout_error',
}

const CHAT_BODY = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] })

let mock: MockUpstream
let gw: TestGateway
let key: string

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  key = (await gw.workspaceKey(['completions.write'])).key
})

afterEach(() => {
  mock.reset()
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

/** Headers of a well-formed data-plane request that selects the mock as an OpenAI custom host. */
function providerHeaders(gatewayKey: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    'x-gateway-api-key': gatewayKey,
    'x-gateway-provider': 'openai',
    'x-gateway-custom-host': mock.url,
    authorization: 'Bearer sk-provider',
    'content-type': 'application/json',
    ...extra,
  }
}

function chat(target: TestGateway, headers: Record<string, string>, body: string = CHAT_BODY, init: RequestInit = {}): Promise<Response> {
  return fetch(`${target.url}/v1/chat/completions`, { method: 'POST', headers, body, ...init })
}

function openaiClient(target: TestGateway, gatewayKey: string, customHost: string = mock.url): OpenAI {
  return new OpenAI({
    apiKey: 'sk-provider',
    baseURL: `${target.url}/v1`,
    defaultHeaders: { 'x-gateway-api-key': gatewayKey, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': customHost },
    maxRetries: 0,
  })
}

/** Asserts the status and the exact data-plane error shape; returns the `error` object. */
async function expectError(response: Response, status: number, code: ErrorCode): Promise<Json> {
  const text = await response.text()
  expect(response.status, text).toBe(status)
  expect(response.headers.get('content-type')).toMatch(/^application\/json/)
  const body = JSON.parse(text) as Json
  expect(Object.keys(body)).toEqual(['error'])
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type'])
  expect(body.error.code).toBe(code)
  expect(ERRORS[code].status).toBe(status)
  expect(body.error.type).toBe(TYPE_BY_STATUS[status])
  expect(typeof body.error.message).toBe('string')
  expect(body.error.message.length).toBeGreaterThan(0)
  expect(body.error.param === null || typeof body.error.param === 'string').toBe(true)
  return body.error as Json
}

/** A good chat request through `target` still succeeds. */
async function expectServing(target: TestGateway = gw, gatewayKey: string = key): Promise<void> {
  const before = mock.requests.length
  const response = await chat(target, providerHeaders(gatewayKey))
  const text = await response.text()
  expect(response.status, text).toBe(200)
  expect((JSON.parse(text) as Json).choices[0].message.content).toBe(MOCK_REPLY)
  expect(mock.requests.length).toBe(before + 1)
}

/** A port on 127.0.0.1 that nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const port = (server.address() as AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** Sends a chunked request body with node:http; resolves with the status and body text. */
function chunkedPost(url: string, headers: Record<string, string>, chunks: readonly Buffer[]): Promise<{ status: number; headers: Json; text: string }> {
  return new Promise((resolve, reject) => {
    let answered = false
    const req = httpRequest(url, { method: 'POST', headers: { ...headers, 'transfer-encoding': 'chunked' } }, (res) => {
      answered = true
      const parts: Buffer[] = []
      res.on('data', (chunk: Buffer) => parts.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(parts).toString('utf8') }))
      res.on('error', reject)
    })
    // The gateway may close the connection before it read every chunk; only an error before any answer counts.
    req.on('error', (error) => {
      if (!answered) reject(error)
    })
    for (const chunk of chunks) req.write(chunk)
    req.end()
  })
}

/** Writes raw bytes on one connection; resolves with everything read once `until` shows up (or the socket ends). */
function rawExchange(port: number, text: string, until: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text))
    let received = ''
    const done = (): void => {
      socket.destroy()
      resolve(received)
    }
    socket.on('data', (data: Buffer) => {
      received += data.toString('latin1')
      if (received.includes(until)) done()
    })
    socket.on('end', done)
    socket.on('error', reject)
  })
}

/** One HTTP/1.1 response as read from a raw socket. */
interface RawResponse {
  /** The error the client's writes or reads failed with (`EPIPE`, `ECONNRESET`), if any. */
  readonly socketError: string | null
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

/**
 * Sends a whole request on a fresh connection and reads nothing until every byte is written, the way
 * Python's `requests` (and many other blocking clients) do; then reads one response. The response is
 * complete when its framing says so (content-length or the last chunk) or the connection ends.
 */
function sendAllThenRead(port: number, head: string, body: Buffer): Promise<RawResponse> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.pause()
    let raw = Buffer.alloc(0)
    let socketError: string | null = null
    let settled = false
    const finish = (): void => {
      if (settled) return
      settled = true
      socket.destroy()
      resolve({ socketError, ...parseResponse(raw) })
    }
    socket.on('error', (error: NodeJS.ErrnoException) => {
      socketError ??= error.code ?? error.message
      finish()
    })
    socket.on('data', (data: Buffer) => {
      raw = Buffer.concat([raw, data])
      if (parseResponse(raw).complete) finish()
    })
    socket.on('end', finish)
    socket.on('close', finish)
    socket.once('connect', async () => {
      socket.write(head)
      for (let offset = 0; offset < body.length && !socket.destroyed; offset += 64 * 1024) {
        if (!socket.write(body.subarray(offset, offset + 64 * 1024))) {
          await new Promise((drained) => {
            socket.once('drain', drained)
            socket.once('close', drained)
          })
        }
      }
      socket.resume()
    })
  })
}

function parseResponse(raw: Buffer): { status: number; headers: Record<string, string>; body: string; complete: boolean } {
  const text = raw.toString('latin1')
  const headEnd = text.indexOf('\r\n\r\n')
  if (headEnd < 0) return { status: 0, headers: {}, body: '', complete: false }
  const [statusLine, ...lines] = text.slice(0, headEnd).split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  const status = Number(statusLine?.split(' ')[1])
  const rest = text.slice(headEnd + 4)
  if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length'])
    return { status, headers, body: rest.slice(0, length), complete: rest.length >= length }
  }
  // Chunked: the chunks of a small error body, then the last (empty) chunk.
  let body = ''
  let at = 0
  for (;;) {
    const lineEnd = rest.indexOf('\r\n', at)
    if (lineEnd < 0) return { status, headers, body, complete: false }
    const size = parseInt(rest.slice(at, lineEnd), 16)
    if (size === 0) return { status, headers, body, complete: rest.length >= lineEnd + 4 }
    if (rest.length < lineEnd + 2 + size + 2) return { status, headers, body, complete: false }
    body += rest.slice(lineEnd + 2, lineEnd + 2 + size)
    at = lineEnd + 2 + size + 2
  }
}

describe('gateway request body checks', () => {
  it('answers 400 GW_REQ_MALFORMED_JSON to a body that is not JSON, without calling the provider', async () => {
    const error = await expectError(await chat(gw, providerHeaders(key), '{"model": "gpt-4o-mini", "messages": ['), 400, 'GW_REQ_MALFORMED_JSON')
    expect(error.message).toMatch(/json/i)
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 400 GW_REQ_MALFORMED_JSON to a JSON array body', async () => {
    await expectError(await chat(gw, providerHeaders(key), JSON.stringify([{ model: 'gpt-4o-mini' }])), 400, 'GW_REQ_MALFORMED_JSON')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 400 GW_REQ_MALFORMED_JSON to an empty body on a JSON route', async () => {
    await expectError(await chat(gw, providerHeaders(key), ''), 400, 'GW_REQ_MALFORMED_JSON')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })
})

describe('gateway body size limit', () => {
  let small: TestGateway
  let smallKey: string

  beforeAll(async () => {
    small = await startTestGateway({ overlay: { server: { maxJsonBodyBytes: 1024 } } })
    smallKey = (await small.workspaceKey(['completions.write'])).key
  })

  afterAll(async () => {
    await small?.close()
  })

  const oversized = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x'.repeat(4096) }] })

  it('answers 413 GW_REQ_BODY_TOO_LARGE to a body whose content-length is over the limit, and the provider never sees it', async () => {
    const error = await expectError(await chat(small, providerHeaders(smallKey), oversized), 413, 'GW_REQ_BODY_TOO_LARGE')
    expect(error.message).toContain('1024')
    expect(mock.requests).toHaveLength(0)
    await expectServing(small, smallKey)
  })

  it('answers 413 GW_REQ_BODY_TOO_LARGE to a chunked body that grows over the limit, and the provider never sees it', async () => {
    const bytes = Buffer.from(oversized)
    const chunks = [bytes.subarray(0, 512), bytes.subarray(512, 1024), bytes.subarray(1024, 2048), bytes.subarray(2048)]
    const reply = await chunkedPost(`${small.url}/v1/chat/completions`, providerHeaders(smallKey), chunks)
    expect(reply.status, reply.text).toBe(413)
    expect(reply.headers['content-type']).toMatch(/^application\/json/)
    const body = JSON.parse(reply.text) as Json
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type'])
    expect(body.error.code).toBe('GW_REQ_BODY_TOO_LARGE')
    expect(body.error.type).toBe('invalid_request_error')
    expect(mock.requests).toHaveLength(0)
    await expectServing(small, smallKey)
  })

  it('answers 413 to a client that sends all of a 20 MB body before it reads, every time (lingering close, no broken pipe)', async () => {
    const body = Buffer.alloc(20 * 1024 * 1024, 0x61)
    const headers = `x-gateway-api-key: ${key}\r\nx-gateway-provider: openai\r\nx-gateway-custom-host: ${mock.url}\r\ncontent-type: application/json\r\n`
    const port = Number(new URL(gw.url).port)
    for (let round = 0; round < 5; round++) {
      // A declared length over the limit (refused before any byte is read) and a chunked body that grows over it.
      for (const framing of [`content-length: ${body.length}`, 'transfer-encoding: chunked']) {
        const chunked = framing.startsWith('transfer-encoding')
        const payload = chunked ? Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]) : body
        const reply = await sendAllThenRead(port, `POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\n${headers}${framing}\r\n\r\n`, payload)
        expect(reply.socketError, `${framing}, round ${round}`).toBeNull()
        expect(reply.status, `${framing}, round ${round}: ${reply.body}`).toBe(413)
        expect(reply.headers['content-type']).toMatch(/^application\/json/)
        expect(JSON.parse(reply.body).error).toMatchObject({ code: 'GW_REQ_BODY_TOO_LARGE', type: 'invalid_request_error' })
      }
    }
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 413 to 20 MB bodies sent with fetch and node:http, every time', async () => {
    const body = Buffer.alloc(20 * 1024 * 1024, 0x62)
    for (let round = 0; round < 3; round++) {
      await expectError(await chat(gw, providerHeaders(key), body as unknown as string), 413, 'GW_REQ_BODY_TOO_LARGE')
      const chunks = Array.from({ length: 20 }, (_, i) => body.subarray(i * 1024 * 1024, (i + 1) * 1024 * 1024))
      const reply = await chunkedPost(`${gw.url}/v1/chat/completions`, providerHeaders(key), chunks)
      expect(reply.status, reply.text).toBe(413)
      expect(JSON.parse(reply.text).error.code).toBe('GW_REQ_BODY_TOO_LARGE')
    }
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('accepts a chunked body under the limit', async () => {
    const bytes = Buffer.from(CHAT_BODY)
    const reply = await chunkedPost(`${small.url}/v1/chat/completions`, providerHeaders(smallKey), [bytes.subarray(0, 10), bytes.subarray(10)])
    expect(reply.status, reply.text).toBe(200)
    expect(mock.requests).toHaveLength(1)
    expect(mock.requests[0]?.body.equals(bytes)).toBe(true)
  })
})

describe('gateway routing errors', () => {
  it('answers 404 GW_REQ_ROUTE_NOT_FOUND outside /v1', async () => {
    const response = await fetch(`${gw.url}/v2/chat/completions`, { method: 'POST', headers: providerHeaders(key), body: CHAT_BODY })
    await expectError(response, 404, 'GW_REQ_ROUTE_NOT_FOUND')
    await expectError(await fetch(`${gw.url}/nothing-here`), 404, 'GW_REQ_ROUTE_NOT_FOUND')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 405 GW_REQ_METHOD_NOT_ALLOWED to PATCH on /v1 paths', async () => {
    await expectError(await fetch(`${gw.url}/v1/chat/completions`, { method: 'PATCH', headers: providerHeaders(key), body: CHAT_BODY }), 405, 'GW_REQ_METHOD_NOT_ALLOWED')
    await expectError(await fetch(`${gw.url}/v1/rerank`, { method: 'PATCH', headers: providerHeaders(key), body: '{}' }), 405, 'GW_REQ_METHOD_NOT_ALLOWED')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  // Gateway bug: the 405 (and 404) error body is written in reply to HEAD, although a HEAD response
  // must not carry content (RFC 9110 §9.3.2). A keep-alive client then reads those bytes as the
  // start of the next response: Node's http client fails with "Parse Error: Expected HTTP/".
  // Cause: core/http/server.ts #sendError always ends with the body, whatever the method.
  it('answers HEAD with 405 and no body, so the next response on the connection parses', async () => {
    const pipelined = 'HEAD /v1/files/x HTTP/1.1\r\nHost: gateway\r\n\r\nGET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n'
    const received = await rawExchange(gw.port, pipelined, '{"status":"ok"}')
    expect(received.slice(0, 13)).toBe('HTTP/1.1 405 ')
    const afterHead = received.slice(received.indexOf('\r\n\r\n') + 4)
    expect(afterHead.slice(0, 13)).toBe('HTTP/1.1 200 ')
  })

  it('answers 400 GW_REQ_PROVIDER_UNKNOWN to an unknown provider slug, naming the header', async () => {
    const error = await expectError(await chat(gw, providerHeaders(key, { 'x-gateway-provider': 'no-such-provider' })), 400, 'GW_REQ_PROVIDER_UNKNOWN')
    expect(error.param).toBe('x-gateway-provider')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 400 GW_REQ_PROVIDER_MISSING on a first-class route without provider selection', async () => {
    await expectError(await chat(gw, { 'x-gateway-api-key': key, 'content-type': 'application/json' }), 400, 'GW_REQ_PROVIDER_MISSING')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 400 GW_REQ_PROVIDER_MISSING on an unknown /v1 path without provider selection', async () => {
    const response = await fetch(`${gw.url}/v1/rerank`, {
      method: 'POST',
      headers: { 'x-gateway-api-key': key, 'content-type': 'application/json' },
      body: '{"query":"q"}',
    })
    await expectError(response, 400, 'GW_REQ_PROVIDER_MISSING')
    await expectError(await fetch(`${gw.url}/v1/files/abc`, { headers: { 'x-gateway-api-key': key } }), 400, 'GW_REQ_PROVIDER_MISSING')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 400 GW_REQ_PROVIDER_MISSING to an Admin API key on a /v1 path that names no admin route', async () => {
    const response = await fetch(`${gw.url}/v1/api-keys/organisation/user`, {
      method: 'POST',
      headers: { 'x-gateway-api-key': gw.adminKey, 'content-type': 'application/json' },
      body: '{"name":"x"}',
    })
    await expectError(response, 400, 'GW_REQ_PROVIDER_MISSING')
  })

  it('survives malformed percent-escapes in admin path parameters (no key needed to send them)', async () => {
    for (const path of ['/v1/admin/workspaces/%E0%A4%A', '/v1/admin/workspaces/%']) {
      const response = await fetch(`${gw.url}${path}`)
      expect(response.status).toBeGreaterThanOrEqual(400)
      expect(response.status).toBeLessThan(500)
      expect(((await response.json()) as { error: { code: string } }).error.code).toMatch(/^GW_/)
    }
    await expectServing()
  })
})

describe('gateway authentication and scopes on the data plane', () => {
  it('answers 401 GW_AUTH_KEY_MISSING without any key', async () => {
    const headers = providerHeaders(key)
    delete headers['x-gateway-api-key']
    delete headers.authorization
    const error = await expectError(await chat(gw, headers), 401, 'GW_AUTH_KEY_MISSING')
    expect(error.message).toBe('Missing gateway API key: send it in x-gateway-api-key')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 401 GW_AUTH_KEY_MISSING naming x-gateway-api-key to a provider key in Authorization without a gateway key, with no key lookup', async () => {
    const store = gw.wiring.resolve(AdminStore)
    const lookups = vi.spyOn(store, 'findApiKeyByHash')
    try {
      for (const path of ['/v1/chat/completions', '/v1/rerank']) {
        const headers = providerHeaders(key, { authorization: `Bearer sk-proj-${randomUUID()}` })
        delete headers['x-gateway-api-key']
        const response = await fetch(`${gw.url}${path}`, { method: 'POST', headers, body: CHAT_BODY })
        const error = await expectError(response, 401, 'GW_AUTH_KEY_MISSING')
        expect(error.message).toMatch(/^Missing gateway API key: send it in x-gateway-api-key/)
        expect(error.param).toBe('x-gateway-api-key')
      }
      expect(lookups).not.toHaveBeenCalled()
    } finally {
      lookups.mockRestore()
    }
    const client = new OpenAI({ apiKey: 'sk-provider', baseURL: `${gw.url}/v1`, defaultHeaders: { 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url }, maxRetries: 0 })
    const failure = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] }).then(() => null, (error: unknown) => error)
    expect(failure).toBeInstanceOf(OpenAI.AuthenticationError)
    expect((failure as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('GW_AUTH_KEY_MISSING')
    expect((failure as Error).message).toContain('x-gateway-api-key')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 401 GW_AUTH_KEY_INVALID to an unknown key in x-gateway-api-key', async () => {
    await expectError(await chat(gw, providerHeaders('gw-not-a-real-key-0000000000')), 401, 'GW_AUTH_KEY_INVALID')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 401 GW_AUTH_KEY_INVALID to an unknown key sent as Authorization: Bearer', async () => {
    const headers = providerHeaders(key, { authorization: 'Bearer gw-not-a-real-key-1111111111' })
    delete headers['x-gateway-api-key']
    await expectError(await chat(gw, headers), 401, 'GW_AUTH_KEY_INVALID')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('raises an AuthenticationError carrying the catalogue code in the openai client for an invalid key', async () => {
    const client = openaiClient(gw, 'gw-not-a-real-key-2222222222')
    const failure = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] }).then(
      () => null,
      (error: unknown) => error,
    )
    expect(failure).toBeInstanceOf(OpenAI.AuthenticationError)
    expect((failure as InstanceType<typeof OpenAI.AuthenticationError>).status).toBe(401)
    expect((failure as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('GW_AUTH_KEY_INVALID')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })

  it('answers 403 GW_SCOPE_MISSING on chat to a key without completions.write, but lets it list models', async () => {
    const listKey = (await gw.workspaceKey(['virtual_keys.list'])).key
    await expectError(await chat(gw, providerHeaders(listKey)), 403, 'GW_SCOPE_MISSING')
    expect(mock.requests).toHaveLength(0)

    const models = await fetch(`${gw.url}/v1/models`, { headers: providerHeaders(listKey) })
    const text = await models.text()
    expect(models.status, text).toBe(200)
    expect((JSON.parse(text) as Json).data.map((entry: Json) => entry.id)).toEqual([...MOCK_MODELS])
    expect(mock.requests.map((request) => `${request.method} ${request.pathname}`)).toEqual(['GET /v1/models'])
    await expectServing()
  })

  it('answers 403 GW_SCOPE_ADMIN_KEY_ON_DATA_PLANE to an Admin API key', async () => {
    await expectError(await chat(gw, providerHeaders(gw.adminKey)), 403, 'GW_SCOPE_ADMIN_KEY_ON_DATA_PLANE')
    await expectError(await fetch(`${gw.url}/v1/models`, { headers: providerHeaders(gw.adminKey) }), 403, 'GW_SCOPE_ADMIN_KEY_ON_DATA_PLANE')
    expect(mock.requests).toHaveLength(0)
    await expectServing()
  })
})

describe('gateway custom host guard', () => {
  const refused = [
    'http://169.254.169.254/v1',
    'http://[::ffff:169.254.169.254]/',
    'file:///etc/passwd',
    'http://user:pw@127.0.0.1/',
  ]

  for (const host of refused) {
    it(`answers 400 GW_REQ_CUSTOM_HOST_REFUSED to ${host}`, async () => {
      const error = await expectError(await chat(gw, providerHeaders(key, { 'x-gateway-custom-host': host })), 400, 'GW_REQ_CUSTOM_HOST_REFUSED')
      expect(error.param).toBe('x-gateway-custom-host')
      expect(mock.requests).toHaveLength(0)
      await expectServing()
    })
  }

  describe('with an empty allow-list', () => {
    let strict: TestGateway
    let strictKey: string

    beforeAll(async () => {
      strict = await startTestGateway({ env: { GATEWAY_ALLOWED_CUSTOM_HOSTS: '' } })
      strictKey = (await strict.workspaceKey(['completions.write'])).key
    })

    afterAll(async () => {
      await strict?.close()
    })

    it('answers 400 GW_REQ_CUSTOM_HOST_REFUSED to a loopback custom host', async () => {
      const error = await expectError(await chat(strict, providerHeaders(strictKey)), 400, 'GW_REQ_CUSTOM_HOST_REFUSED')
      expect(error.param).toBe('x-gateway-custom-host')
      expect(mock.requests).toHaveLength(0)
      // The same request is served by the gateway whose allow-list names 127.0.0.1.
      await expectServing()
    })
  })
})

describe('gateway upstream failures', () => {
  it('answers 502 GW_UPSTREAM_UNREACHABLE when the provider refuses the connection', async () => {
    const port = await closedPort()
    const response = await chat(gw, providerHeaders(key, { 'x-gateway-custom-host': `http://127.0.0.1:${port}/v1` }))
    await expectError(response, 502, 'GW_UPSTREAM_UNREACHABLE')
    await expectServing()
  })

  it('answers 502 GW_UPSTREAM_UNREACHABLE when the provider resets the connection', async () => {
    mock.next({ type: 'reset' })
    await expectError(await chat(gw, providerHeaders(key)), 502, 'GW_UPSTREAM_UNREACHABLE')
    expect(mock.requests).toHaveLength(1)
    await expectServing()
  })

  it('answers 408 GW_UPSTREAM_REQUEST_TIMEOUT when the provider outlasts x-gateway-request-timeout', async () => {
    mock.next({ type: 'hang' })
    await expectError(await chat(gw, providerHeaders(key, { 'x-gateway-request-timeout': '200' })), 408, 'GW_UPSTREAM_REQUEST_TIMEOUT')
    const [hung] = await mock.waitForRequests(1)
    await mock.waitForClientClose(hung!)
    await expectServing()
  })

  for (const value of ['abc', '0', '-5', '1.5', '99999999999']) {
    it(`answers 400 GW_REQ_INVALID to x-gateway-request-timeout: ${value}`, async () => {
      const error = await expectError(await chat(gw, providerHeaders(key, { 'x-gateway-request-timeout': value })), 400, 'GW_REQ_INVALID')
      expect(error.param).toBe('x-gateway-request-timeout')
      expect(mock.requests).toHaveLength(0)
      await expectServing()
    })
  }

  describe('with a short upstream headers timeout', () => {
    let impatient: TestGateway
    let impatientKey: string

    beforeAll(async () => {
      impatient = await startTestGateway({ overlay: { upstream: { headersTimeoutMs: 300 } } })
      impatientKey = (await impatient.workspaceKey(['completions.write'])).key
    })

    afterAll(async () => {
      await impatient?.close()
    })

    it('answers 504 GW_UPSTREAM_TIMEOUT when the provider sends no headers in time', async () => {
      mock.next({ type: 'hang' })
      await expectError(await chat(impatient, providerHeaders(impatientKey)), 504, 'GW_UPSTREAM_TIMEOUT')
      const [hung] = await mock.waitForRequests(1)
      await mock.waitForClientClose(hung!)
      await expectServing(impatient, impatientKey)
    })
  })
})

describe('gateway provider error pass-through', () => {
  it('returns the provider 429 with its OpenAI error body and Retry-After unchanged', async () => {
    const providerBody = openAiErrorBody('Rate limit reached for gpt-4o-mini', 'requests', 'rate_limit_exceeded')
    mock.next({ type: 'json', status: 429, body: providerBody, headers: { 'retry-after': '7' } })
    const response = await chat(gw, providerHeaders(key))
    expect(response.status).toBe(429)
    expect(response.headers.get('retry-after')).toBe('7')
    expect(await response.json()).toEqual(providerBody)
    await expectServing()
  })

  it('raises a RateLimitError with the provider message in the openai client', async () => {
    mock.next({ type: 'json', status: 429, body: openAiErrorBody('Slow down', 'requests', 'rate_limit_exceeded') })
    const failure = await openaiClient(gw, key)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] })
      .then(() => null, (error: unknown) => error)
    expect(failure).toBeInstanceOf(OpenAI.RateLimitError)
    expect((failure as InstanceType<typeof OpenAI.RateLimitError>).code).toBe('rate_limit_exceeded')
    expect((failure as InstanceType<typeof OpenAI.RateLimitError>).message).toContain('Slow down')
    await expectServing()
  })

  it('wraps a provider 500 with a plain-text body into an OpenAI-shaped body naming the provider', async () => {
    mock.next({ type: 'raw', status: 500, body: 'upstream exploded', headers: { 'content-type': 'text/plain' } })
    const response = await chat(gw, providerHeaders(key))
    const text = await response.text()
    expect(response.status, text).toBe(500)
    expect(response.headers.get('content-type')).toMatch(/^application\/json/)
    const body = JSON.parse(text) as Json
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type'])
    expect(body.error.message).toContain('openai')
    expect(body.error.message).toContain('upstream exploded')
    expect(typeof body.error.type).toBe('string')
    await expectServing()
  })
})

describe('gateway streaming failures', () => {
  const streamBody = JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Hello' }] })

  it('makes the openai client throw after the first deltas when the provider dies mid-stream', async () => {
    mock.next({ type: 'stream', destroyAfter: 2 })
    const stream = await openaiClient(gw, key).chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'Hello' }],
    })
    const deltas: string[] = []
    let failure: unknown = null
    try {
      for await (const chunk of stream) deltas.push(chunk.choices[0]?.delta.content ?? '')
    } catch (error) {
      failure = error
    }
    expect(deltas.join('')).toBe('Hello')
    expect(failure).toBeInstanceOf(OpenAI.APIError)
    expect(String((failure as Error).message)).toMatch(/stream/i)
    await expectServing()
  })

  it('ends a broken stream with one data: {"error":...} event and no [DONE]', async () => {
    mock.next({ type: 'stream', destroyAfter: 2 })
    const response = await chat(gw, providerHeaders(key), streamBody)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const events = (await response.text()).split('\n\n').filter((event) => event.trim().length > 0)
    expect(events.some((event) => event.trim() === 'data: [DONE]')).toBe(false)
    const last = events[events.length - 1] as string
    expect(last.startsWith('data: ')).toBe(true)
    const error = (JSON.parse(last.slice('data: '.length)) as Json).error as Json
    expect(error).toEqual({ message: expect.any(String), type: 'upstream_error', code: 'GW_UPSTREAM_STREAM_BROKEN' })
    const contents = events.slice(0, -1).map((event) => (JSON.parse(event.slice('data: '.length)) as Json).choices[0].delta.content)
    expect(contents).toEqual(['', 'Hello'])
    await expectServing()
  })

  it('closes the provider request when the client disconnects mid-stream, and keeps serving', async () => {
    mock.next({ type: 'stream', intervalMs: 50, chunks: 200 })
    const controller = new AbortController()
    const response = await chat(gw, providerHeaders(key), streamBody, { signal: controller.signal })
    expect(response.status).toBe(200)
    const reader = response.body!.getReader()
    const first = await reader.read()
    expect(first.done).toBe(false)
    controller.abort()
    await reader.read().catch(() => undefined)

    const [streamed] = await mock.waitForRequests(1)
    await mock.waitForClientClose(streamed!)
    expect(streamed!.closedByClient).toBe(true)
    expect(streamed!.completed).toBe(false)
    await expectServing()
  })
})

describe('gateway trace id on errors', () => {
  it('echoes x-gateway-trace-id on error replies from every layer', async () => {
    const traced = (id: string, extra: Record<string, string> = {}) => ({ ...providerHeaders(key, extra), 'x-gateway-trace-id': id })

    const notFound = await fetch(`${gw.url}/nowhere`, { headers: traced('trace-404') })
    expect(notFound.headers.get('x-gateway-trace-id')).toBe('trace-404')
    await expectError(notFound, 404, 'GW_REQ_ROUTE_NOT_FOUND')

    const badMethod = await fetch(`${gw.url}/v1/chat/completions`, { method: 'PATCH', headers: traced('trace-405'), body: CHAT_BODY })
    expect(badMethod.headers.get('x-gateway-trace-id')).toBe('trace-405')
    await expectError(badMethod, 405, 'GW_REQ_METHOD_NOT_ALLOWED')

    const unauthenticated = await chat(gw, traced('trace-401', { 'x-gateway-api-key': 'gw-not-a-real-key-3333333333' }))
    expect(unauthenticated.headers.get('x-gateway-trace-id')).toBe('trace-401')
    await expectError(unauthenticated, 401, 'GW_AUTH_KEY_INVALID')

    const malformed = await chat(gw, traced('trace-400'), '{nope')
    expect(malformed.headers.get('x-gateway-trace-id')).toBe('trace-400')
    await expectError(malformed, 400, 'GW_REQ_MALFORMED_JSON')

    mock.next({ type: 'reset' })
    const upstream = await chat(gw, traced('trace-502'))
    expect(upstream.headers.get('x-gateway-trace-id')).toBe('trace-502')
    await expectError(upstream, 502, 'GW_UPSTREAM_UNREACHABLE')

    mock.next({ type: 'json', status: 429, body: openAiErrorBody('Slow down') })
    const provider = await chat(gw, traced('trace-429'))
    expect(provider.status).toBe(429)
    expect(provider.headers.get('x-gateway-trace-id')).toBe('trace-429')
    await provider.arrayBuffer()
    await expectServing()
  })

  it('generates a trace id on error replies when the client sent none', async () => {
    const response = await chat(gw, providerHeaders('gw-not-a-real-key-4444444444'))
    const traceId = response.headers.get('x-gateway-trace-id')
    expect(traceId).toMatch(/^[0-9a-f-]{36}$/)
    await expectError(response, 401, 'GW_AUTH_KEY_INVALID')
  })
})
