/**
 * Pass-through, end to end: any non-first-class `/v1` path with a provider selection goes to the
 * provider's base URL (here the loopback mock as a custom host) + path + query, body byte for byte,
 * and the provider's status, body and content headers come back unchanged (API.md §2).
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream, type RecordedRequest } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

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

/** Headers selecting the mock as an OpenAI custom host, with the gateway key and a provider key. */
function passHeaders(extra: Record<string, string> = {}): Record<string, string> {
  return {
    'x-gateway-api-key': key,
    'x-gateway-provider': 'openai',
    'x-gateway-custom-host': mock.url,
    authorization: 'Bearer sk-provider',
    ...extra,
  }
}

/** The one request the mock received. */
async function received(): Promise<RecordedRequest> {
  const [request] = await mock.waitForRequests(1)
  expect(mock.requests).toHaveLength(1)
  return request!
}

/** Sends one request with node:http on a fresh connection (header arrays become repeated lines). */
function nodeRequest(
  path: string,
  method: string,
  headers: Record<string, string | string[]>,
  body?: Buffer,
): Promise<{ status: number; headers: IncomingHttpHeaders; rawHeaders: string[]; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${gw.url}${path}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, text: Buffer.concat(chunks).toString('utf8') }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

/** The values of `name` in a raw header list, in order. */
function rawValues(rawHeaders: readonly string[], name: string): string[] {
  const values: string[] = []
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if ((rawHeaders[i] as string).toLowerCase() === name) values.push(rawHeaders[i + 1] as string)
  return values
}

/** Every header value the mock received, as one string per header. */
function headerValues(headers: IncomingHttpHeaders): string[] {
  return Object.values(headers).flatMap((value) => (value === undefined ? [] : Array.isArray(value) ? value : [value]))
}

async function expectDataPlaneError(response: Response, status: number, code: string): Promise<void> {
  const text = await response.text()
  expect(response.status, text).toBe(status)
  const body = JSON.parse(text) as Json
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type'])
  expect(body.error.code).toBe(code)
  expect(body.error.type).toBe('permission_error')
}

describe('pass-through request forwarding', () => {
  it('forwards POST /v1/rerank with its JSON body byte for byte (odd spacing kept)', async () => {
    const body = '{ "model" :"rerank-english-v3.0",\n  "query":"what is up" , "documents":["a", "b"],"return_documents" : true,"max_chunks_per_doc":  4 }'
    const response = await fetch(`${gw.url}/v1/rerank`, { method: 'POST', headers: passHeaders({ 'content-type': 'application/json' }), body })
    const text = await response.text()
    expect(response.status, text).toBe(200)
    const request = await received()
    expect(request.method).toBe('POST')
    expect(request.path).toBe('/v1/rerank')
    expect(request.body.equals(Buffer.from(body))).toBe(true)
    expect(request.headers['content-type']).toBe('application/json')
    expect(request.headers['content-length']).toBe(String(Buffer.byteLength(body)))
    // The mock's echo comes back as it sent it.
    expect((JSON.parse(text) as Json).body).toBe(body)
  })

  it('forwards GET with the path after /v1 and the query string unchanged', async () => {
    const response = await fetch(`${gw.url}/v1/files/abc?purpose=x&limit=2`, { headers: passHeaders() })
    const text = await response.text()
    expect(response.status, text).toBe(200)
    const request = await received()
    expect(request.method).toBe('GET')
    expect(request.path).toBe('/v1/files/abc?purpose=x&limit=2')
    expect(request.body).toHaveLength(0)
    expect((JSON.parse(text) as Json).query).toEqual({ purpose: 'x', limit: '2' })
  })

  it('keeps an encoded query string byte for byte', async () => {
    const query = 'filter=a%20b%26c&tag=%E2%9C%93&empty=&flag'
    const response = await fetch(`${gw.url}/v1/files?${query}`, { headers: passHeaders() })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    expect((await received()).path).toBe(`/v1/files?${query}`)
  })

  it('forwards PUT with a binary body byte for byte', async () => {
    const bytes = Buffer.from([0, 1, 2, 255, 254, 0x0d, 0x0a, 0x7b])
    const response = await fetch(`${gw.url}/v1/collections/c1`, {
      method: 'PUT',
      headers: passHeaders({ 'content-type': 'application/octet-stream' }),
      body: bytes,
    })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    const request = await received()
    expect(request.method).toBe('PUT')
    expect(request.path).toBe('/v1/collections/c1')
    expect(request.headers['content-type']).toBe('application/octet-stream')
    expect(request.body.equals(bytes)).toBe(true)
  })

  it('forwards PUT with a JSON body to a collection', async () => {
    const body = '{"metadata":{"owner" : "team-a"}}'
    const response = await fetch(`${gw.url}/v1/collections/c1?version=3`, { method: 'PUT', headers: passHeaders({ 'content-type': 'application/json' }), body })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    const request = await received()
    expect(request.path).toBe('/v1/collections/c1?version=3')
    expect(request.text()).toBe(body)
  })

  it('forwards DELETE with its path, query and body', async () => {
    const response = await fetch(`${gw.url}/v1/collections/c1?force=true`, { method: 'DELETE', headers: passHeaders({ 'content-type': 'text/plain' }), body: 'bye' })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    const request = await received()
    expect(request.method).toBe('DELETE')
    expect(request.path).toBe('/v1/collections/c1?force=true')
    expect(request.text()).toBe('bye')
  })

  it('forwards DELETE without a body', async () => {
    const response = await fetch(`${gw.url}/v1/files/file-123`, { method: 'DELETE', headers: passHeaders() })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    const request = await received()
    expect(request.method).toBe('DELETE')
    expect(request.path).toBe('/v1/files/file-123')
    expect(request.body).toHaveLength(0)
  })

  it('works through the openai client as a custom request', async () => {
    const client = new OpenAI({
      apiKey: 'sk-provider',
      baseURL: `${gw.url}/v1`,
      defaultHeaders: { 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
      maxRetries: 0,
    })
    const answer = await client.post<Json>('/rerank', { body: { model: 'rerank-1', query: 'q', documents: ['a'] } })
    expect(answer.path).toBe('/v1/rerank')
    const request = await received()
    expect(request.json()).toEqual({ model: 'rerank-1', query: 'q', documents: ['a'] })
    expect(request.headers.authorization).toBe('Bearer sk-provider')
  })

  it('sends a path naming an Admin API route to the provider when a provider is selected', async () => {
    const body = '{"name":"not-a-workspace"}'
    const response = await fetch(`${gw.url}/v1/admin/workspaces`, { method: 'POST', headers: passHeaders({ 'content-type': 'application/json' }), body })
    const text = await response.text()
    expect(response.status, text).toBe(200)
    expect(response.headers.get('x-gateway-provider')).toBe('openai')
    const answer = JSON.parse(text) as Json
    expect(answer.path).toBe('/v1/admin/workspaces')
    expect(answer.body).toBe(body)
    const request = await received()
    expect(request.method).toBe('POST')
    expect(request.path).toBe('/v1/admin/workspaces')

    // Without a provider selection the same path is the Admin API (which refuses a workspace key).
    const admin = await fetch(`${gw.url}/v1/admin/workspaces`, { method: 'POST', headers: { 'x-gateway-api-key': key, 'content-type': 'application/json' }, body })
    expect(admin.status).toBe(403)
    expect(((await admin.json()) as Json).success).toBe(false)
    expect(mock.requests).toHaveLength(1)
  })
})

describe('pass-through response relay', () => {
  it('returns the provider status, body and content headers unchanged (418 text/plain)', async () => {
    mock.next({
      type: 'raw',
      status: 418,
      body: 'I am a teapot\n  (short and stout)',
      headers: { 'content-type': 'text/plain; charset=utf-8', 'x-provider-thing': 'spout-42', 'content-language': 'en' },
    })
    const response = await fetch(`${gw.url}/v1/rerank`, { method: 'POST', headers: passHeaders({ 'content-type': 'application/json' }), body: '{}' })
    expect(response.status).toBe(418)
    expect(await response.text()).toBe('I am a teapot\n  (short and stout)')
    expect(response.headers.get('content-type')).toBe('text/plain; charset=utf-8')
    expect(response.headers.get('content-language')).toBe('en')
    expect(response.headers.get('x-provider-thing')).toBe('spout-42')
  })

  it('returns a provider JSON error as it is, not normalised into the gateway shape', async () => {
    const body = { detail: [{ loc: ['body', 'query'], msg: 'field required' }] }
    mock.next({ type: 'json', status: 422, body, headers: { 'x-provider-thing': 'validation' } })
    const response = await fetch(`${gw.url}/v1/rerank`, { method: 'POST', headers: passHeaders({ 'content-type': 'application/json' }), body: '{}' })
    expect(response.status).toBe(422)
    expect(response.headers.get('content-type')).toBe('application/json')
    expect(response.headers.get('x-provider-thing')).toBe('validation')
    expect(await response.text()).toBe(JSON.stringify(body))
  })

  it('returns a binary provider body byte for byte', async () => {
    const bytes = Buffer.from([0, 255, 1, 254, 2, 253, 0x0a, 0x0d])
    mock.next({ type: 'raw', status: 200, body: bytes, headers: { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) } })
    const response = await fetch(`${gw.url}/v1/files/abc/content`, { headers: passHeaders() })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('application/octet-stream')
    expect(Buffer.from(await response.arrayBuffer()).equals(bytes)).toBe(true)
  })

  it('relays a provider body sent in several chunks without a length', async () => {
    const parts = ['{"data":[', '{"id":"a"},', '{"id":"b"}', ']}']
    mock.next(async (_request, res) => {
      res.writeHead(201, { 'content-type': 'application/json', 'x-provider-thing': 'chunked' })
      for (const part of parts) await new Promise<void>((resolve) => res.write(part, () => resolve()))
      res.end()
    })
    const response = await fetch(`${gw.url}/v1/batches`, { method: 'POST', headers: passHeaders({ 'content-type': 'application/json' }), body: '{}' })
    expect(response.status).toBe(201)
    expect(response.headers.get('x-provider-thing')).toBe('chunked')
    expect(await response.text()).toBe(parts.join(''))
  })

  it('adds x-gateway-provider and echoes x-gateway-trace-id', async () => {
    const traced = await fetch(`${gw.url}/v1/files`, { headers: passHeaders({ 'x-gateway-trace-id': 'trace-pass-1' }) })
    expect(traced.status).toBe(200)
    await traced.arrayBuffer()
    expect(traced.headers.get('x-gateway-provider')).toBe('openai')
    expect(traced.headers.get('x-gateway-trace-id')).toBe('trace-pass-1')

    const untraced = await fetch(`${gw.url}/v1/files`, { headers: passHeaders() })
    await untraced.arrayBuffer()
    expect(untraced.headers.get('x-gateway-provider')).toBe('openai')
    expect(untraced.headers.get('x-gateway-trace-id')).toMatch(/^[0-9a-f-]{36}$/)
  })
})

describe('pass-through header handling', () => {
  it('never sends x-gateway-* headers or the gateway key to the provider', async () => {
    const response = await fetch(`${gw.url}/v1/rerank`, {
      method: 'POST',
      headers: passHeaders({
        'content-type': 'application/json',
        'x-gateway-trace-id': 'trace-hidden',
        'x-gateway-metadata': '{"_user":"u1"}',
        'x-gateway-request-timeout': '5000',
        'x-gateway-forward-headers': 'x-gateway-api-key, x-custom',
        'x-gateway-anything-else': 'secret-ish',
        'x-custom': 'kept',
      }),
      body: '{}',
    })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    const request = await received()
    expect(Object.keys(request.headers).filter((name) => name.startsWith('x-gateway-'))).toEqual([])
    expect(headerValues(request.headers).some((value) => value.includes(key))).toBe(false)
    expect(request.headers['x-custom']).toBe('kept')
  })

  it('passes the provider key in Authorization when the gateway key came in x-gateway-api-key', async () => {
    const response = await fetch(`${gw.url}/v1/files`, { headers: passHeaders({ authorization: 'Bearer sk-provider-secret' }) })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    const request = await received()
    expect(request.headers.authorization).toBe('Bearer sk-provider-secret')
    expect(request.headers['x-gateway-api-key']).toBeUndefined()
  })

  it('does not forward Authorization when it carried the gateway key and no provider key was given', async () => {
    const response = await fetch(`${gw.url}/v1/rerank`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'x-gateway-provider': 'openai',
        'x-gateway-custom-host': mock.url,
        'content-type': 'application/json',
      },
      body: '{"query":"q"}',
    })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    const request = await received()
    expect(request.headers.authorization).toBeUndefined()
    expect(headerValues(request.headers).some((value) => value.includes(key))).toBe(false)
    expect(request.text()).toBe('{"query":"q"}')
  })

  it('forwards ordinary client headers without x-gateway-forward-headers', async () => {
    const response = await fetch(`${gw.url}/v1/rerank`, {
      method: 'POST',
      headers: passHeaders({
        'content-type': 'application/json',
        accept: 'application/vnd.provider+json',
        'accept-language': 'fr-CH',
        'user-agent': 'e2e-client/1.0',
        'x-api-version': '2024-07-01',
        'openai-beta': 'assistants=v2',
        'cohere-client': 'sdk',
      }),
      body: '{}',
    })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    const request = await received()
    expect(request.headers.accept).toBe('application/vnd.provider+json')
    expect(request.headers['accept-language']).toBe('fr-CH')
    expect(request.headers['user-agent']).toBe('e2e-client/1.0')
    expect(request.headers['x-api-version']).toBe('2024-07-01')
    expect(request.headers['openai-beta']).toBe('assistants=v2')
    expect(request.headers['cohere-client']).toBe('sdk')
  })

  it('does not forward hop-by-hop headers, and reframes a chunked body', async () => {
    const body = Buffer.from('{"query":"hop"}')
    const reply = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/v1/rerank`, {
        method: 'POST',
        agent: false,
        headers: {
          ...passHeaders({ 'content-type': 'application/json' }),
          connection: 'keep-alive',
          'keep-alive': 'timeout=5, max=100',
          'proxy-connection': 'keep-alive',
          'proxy-authorization': 'Basic cHJveHk6c2VjcmV0',
          te: 'trailers',
          trailer: 'x-checksum',
          'transfer-encoding': 'chunked',
          'x-end-to-end': 'kept',
        },
      }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }))
        res.on('error', reject)
      })
      req.on('error', reject)
      req.write(body.subarray(0, 5))
      req.end(body.subarray(5))
    })
    expect(reply.status, reply.text).toBe(200)
    const request = await received()
    expect(request.body.equals(body)).toBe(true)
    expect(request.headers['x-end-to-end']).toBe('kept')
    for (const name of ['keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding']) {
      expect(request.headers[name], name).toBeUndefined()
    }
    expect(request.headers['content-length']).toBe(String(body.length))
    expect(headerValues(request.headers).some((value) => value.includes('cHJveHk6c2VjcmV0'))).toBe(false)
  })
})

describe('pass-through HTTP conformance (known gateway bugs)', () => {
  // Gateway bug: a header named in the client's Connection header is hop-by-hop (RFC 9110 §7.6.1:
  // an intermediary MUST remove it) but is forwarded to the provider. plugins/forward/plugin.ts
  // filters only the fixed NOT_FORWARDED names and never reads the Connection tokens.
  it('does not forward headers named in the Connection header', async () => {
    const reply = await nodeRequest('/v1/files', 'GET', { ...passHeaders(), connection: 'keep-alive, x-hop-token', 'x-hop-token': 'per-connection' })
    expect(reply.status, reply.text).toBe(200)
    const request = await received()
    expect(request.headers.connection).not.toBe('keep-alive, x-hop-token')
    expect(request.headers['x-hop-token']).toBeUndefined()
  })

  // Gateway bug: a request header sent on two lines reaches the provider with only its last value
  // (`x-multi: a` + `x-multi: b` → `x-multi: b`). core/http/server.ts copies headers with
  // `headers[name] = value` in req.forEach, so earlier lines are overwritten; RFC 9110 §5.3 lets an
  // intermediary join them as `a, b`, never drop one.
  it('forwards every value of a header sent on several lines, in order', async () => {
    const reply = await nodeRequest('/v1/files', 'GET', { ...passHeaders(), 'x-multi': ['first', 'second'] })
    expect(reply.status, reply.text).toBe(200)
    const request = await received()
    expect(rawValues(request.rawHeaders, 'x-multi').join(', ')).toBe('first, second')
  })

  // Gateway bug: a provider 204 (sent without Content-Length) comes back with `content-length: 0`
  // added, which RFC 9110 §8.6 forbids on 204 (uWS's end() writes it; the reply path would need
  // endWithoutBody for 1xx/204/304).
  it('returns a provider 204 without adding a Content-Length', async () => {
    mock.next({ type: 'raw', status: 204, body: '' })
    const reply = await nodeRequest('/v1/files/file-1', 'DELETE', passHeaders())
    expect(reply.status).toBe(204)
    expect(rawValues((await received()).rawHeaders, 'content-length')).toEqual([])
    expect(rawValues(reply.rawHeaders, 'content-length')).toEqual([])
  })
})

describe('pass-through access control', () => {
  it('refuses a key without completions.write with 403 GW_SCOPE_MISSING, on every method', async () => {
    const listKey = (await gw.workspaceKey(['virtual_keys.list'])).key
    for (const method of ['GET', 'POST', 'PUT', 'DELETE']) {
      const response = await fetch(`${gw.url}/v1/collections/c1`, {
        method,
        headers: passHeaders({ 'x-gateway-api-key': listKey }),
        ...(method === 'GET' ? {} : { body: '{}' }),
      })
      await expectDataPlaneError(response, 403, 'GW_SCOPE_MISSING')
    }
    expect(mock.requests).toHaveLength(0)
  })

  it('refuses an Admin API key with 403 GW_SCOPE_ADMIN_KEY_ON_DATA_PLANE', async () => {
    const post = await fetch(`${gw.url}/v1/rerank`, { method: 'POST', headers: passHeaders({ 'x-gateway-api-key': gw.adminKey }), body: '{}' })
    await expectDataPlaneError(post, 403, 'GW_SCOPE_ADMIN_KEY_ON_DATA_PLANE')
    const adminPath = await fetch(`${gw.url}/v1/admin/workspaces`, { method: 'POST', headers: passHeaders({ 'x-gateway-api-key': gw.adminKey }), body: '{"name":"x"}' })
    await expectDataPlaneError(adminPath, 403, 'GW_SCOPE_ADMIN_KEY_ON_DATA_PLANE')
    expect(mock.requests).toHaveLength(0)
  })

  it('refuses a request without any gateway key with 401', async () => {
    const response = await fetch(`${gw.url}/v1/files`, { headers: { 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url } })
    const body = (await response.json()) as Json
    expect(response.status).toBe(401)
    expect(body.error.code).toBe('GW_AUTH_KEY_MISSING')
    expect(mock.requests).toHaveLength(0)
  })
})
