import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ERRORS, GatewayError } from '../../../../core/errors.js'
import type { ByteStream, UpstreamRequest } from '../../../../core/ports.js'
import { connectAddressPolicy, parseAllowList } from '../../../../adapters/providers/custom-host-policy.js'
import { UndiciUpstreamClient, type UndiciUpstreamClientOptions } from '../../../../adapters/providers/upstream-client.js'

type Handler = (req: IncomingMessage, res: ServerResponse) => void

interface TestServer {
  readonly origin: string
  readonly port: number
  readonly server: Server
  /** Sockets the server accepted. */
  readonly sockets: Socket[]
  /** Sockets the server saw close. */
  closedSockets: number
}

const servers: Server[] = []
const clients: UndiciUpstreamClient[] = []

afterEach(async () => {
  const open = servers.splice(0)
  for (const server of open) server.closeAllConnections()
  await Promise.allSettled(clients.splice(0).map((c) => c.close()))
  await Promise.all(open.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
})

async function startServer(handler: Handler): Promise<TestServer> {
  const server = createServer(handler)
  const state: TestServer = { origin: '', port: 0, server, sockets: [], closedSockets: 0 }
  server.on('connection', (socket: Socket) => {
    state.sockets.push(socket)
    socket.on('close', () => {
      state.closedSockets++
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  servers.push(server)
  const port = (server.address() as AddressInfo).port
  return Object.assign(state, { origin: `http://127.0.0.1:${port}`, port })
}

function client(options: UndiciUpstreamClientOptions = {}): UndiciUpstreamClient {
  const c = new UndiciUpstreamClient(options)
  clients.push(c)
  return c
}

function request(origin: string, overrides: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return {
    origin,
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"model":"m"}',
    signal: new AbortController().signal,
    requestTimeoutMs: null,
    ...overrides,
  }
}

/** Pulls a push body chunk by chunk (the tests read it step by step). */
function iterate(body: ByteStream): { next(): Promise<IteratorResult<Buffer>>; [Symbol.asyncIterator](): AsyncIterator<Buffer> } {
  const chunks: Buffer[] = []
  let ended = false
  let failure: unknown = null
  let wake: (() => void) | null = null
  const notify = (): void => {
    wake?.()
    wake = null
  }
  body.consume(
    (chunk) => {
      chunks.push(chunk)
      notify()
    },
    () => {
      ended = true
      notify()
    },
    (error) => {
      failure = error ?? new Error('body error')
      notify()
    },
  )
  const iterator = {
    async next(): Promise<IteratorResult<Buffer>> {
      for (;;) {
        const chunk = chunks.shift()
        if (chunk !== undefined) return { value: chunk, done: false }
        if (failure !== null) throw failure
        if (ended) return { value: undefined, done: true }
        await new Promise<void>((resolve) => {
          wake = resolve
        })
      }
    },
    [Symbol.asyncIterator]() {
      return iterator
    },
  }
  return iterator
}

async function readAll(body: ByteStream): Promise<string> {
  let text = ''
  for await (const chunk of iterate(body)) text += String(chunk)
  return text
}

async function readError(body: ByteStream): Promise<unknown> {
  try {
    await readAll(body)
  } catch (err) {
    return err
  }
  throw new Error('the body ended without an error')
}

async function sendError(c: UndiciUpstreamClient, req: UpstreamRequest): Promise<GatewayError> {
  try {
    const res = await c.send(req)
    res.body.destroy()
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError)
    return err as GatewayError
  }
  throw new Error('send resolved; an error was expected')
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const port = (server.address() as AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

describe('UndiciUpstreamClient', () => {
  it('sends the request as given and returns status, headers and an unread body', async () => {
    let seen: { method?: string; url?: string; auth?: string; body?: string } = {}
    const srv = await startServer((req, res) => {
      let body = ''
      req.on('data', (c) => (body += String(c)))
      req.on('end', () => {
        seen = { method: req.method, url: req.url, auth: req.headers.authorization, body }
        res.writeHead(201, { 'content-type': 'application/json', 'x-request-id': 'r-1' })
        res.end(JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion' }))
      })
    })
    const res = await client().send(request(srv.origin, { path: '/v1/chat/completions?x=1', headers: { authorization: 'Bearer sk-test', 'content-type': 'application/json' } }))
    expect(res.status).toBe(201)
    expect(res.headers['content-type']).toBe('application/json')
    expect(res.headers['x-request-id']).toBe('r-1')
    expect(JSON.parse(await readAll(res.body))).toEqual({ id: 'chatcmpl-1', object: 'chat.completion' })
    expect(seen).toEqual({ method: 'POST', url: '/v1/chat/completions?x=1', auth: 'Bearer sk-test', body: '{"model":"m"}' })
  })

  it('sends binary bodies and GET requests without a body', async () => {
    const lengths: number[] = []
    const srv = await startServer((req, res) => {
      let n = 0
      req.on('data', (c: Buffer) => (n += c.length))
      req.on('end', () => {
        lengths.push(n)
        res.end(req.method)
      })
    })
    const c = client()
    const post = await c.send(request(srv.origin, { body: new Uint8Array([0, 1, 2, 255]) }))
    expect(await readAll(post.body)).toBe('POST')
    const get = await c.send(request(srv.origin, { method: 'GET', path: '/v1/models', body: null }))
    expect(await readAll(get.body)).toBe('GET')
    expect(lengths).toEqual([4, 0])
  })

  it('streams the body: the first chunk arrives before the server has sent the rest', { timeout: 5_000 }, async () => {
    const gate = deferred()
    const srv = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: {"n":1}\n\n')
      void gate.promise.then(() => {
        res.write('data: {"n":2}\n\n')
        res.end('data: [DONE]\n\n')
      })
    })
    const res = await client().send(request(srv.origin))
    const iterator = iterate(res.body)
    const first = await iterator.next()
    expect(String(first.value)).toBe('data: {"n":1}\n\n')
    gate.resolve()
    let rest = ''
    for (let next = await iterator.next(); next.done !== true; next = await iterator.next()) rest += String(next.value)
    expect(rest).toBe('data: {"n":2}\n\ndata: [DONE]\n\n')
  })

  it('reuses one keep-alive connection for sequential requests', async () => {
    const srv = await startServer((req, res) => {
      req.resume()
      req.on('end', () => res.end('ok'))
    })
    const c = client()
    for (let i = 0; i < 3; i++) {
      expect(await readAll((await c.send(request(srv.origin))).body)).toBe('ok')
      // undici frees the connection one tick after the body ends.
      await new Promise((r) => setImmediate(r))
    }
    expect(srv.sockets).toHaveLength(1)
  })

  it('bounds the connections per origin', async () => {
    const release = deferred()
    const srv = await startServer((_req, res) => {
      void release.promise.then(() => res.end('ok'))
    })
    const c = client({ connectionsPerOrigin: 2 })
    const pending = [1, 2, 3, 4].map(() => c.send(request(srv.origin)))
    await new Promise((r) => setTimeout(r, 150))
    expect(srv.sockets).toHaveLength(2)
    release.resolve()
    for (const res of await Promise.all(pending)) expect(await readAll(res.body)).toBe('ok')
    expect(srv.sockets).toHaveLength(2)
  })

  it('rejects with GW_UPSTREAM_UNREACHABLE (502) when the connection is refused, without driver detail', async () => {
    const port = await freePort()
    const err = await sendError(client(), request(`http://127.0.0.1:${port}`))
    expect(err.code).toBe('GW_UPSTREAM_UNREACHABLE')
    expect(err.status).toBe(502)
    expect(err.message).toBe(ERRORS.GW_UPSTREAM_UNREACHABLE.message)
    expect(err.message).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/)
    expect(err.cause).toBeInstanceOf(Error)
  })

  it('rejects with GW_UPSTREAM_UNREACHABLE when the server closes the socket before answering', async () => {
    const srv = await startServer((req) => req.socket.destroy())
    const err = await sendError(client(), request(srv.origin))
    expect(err.code).toBe('GW_UPSTREAM_UNREACHABLE')
  })

  it('aborts after requestTimeoutMs without headers: 408 GW_UPSTREAM_REQUEST_TIMEOUT, and the server sees the request go', async () => {
    const closed = deferred()
    const srv = await startServer((req) => {
      req.on('close', () => closed.resolve())
    })
    const started = Date.now()
    const err = await sendError(client(), request(srv.origin, { requestTimeoutMs: 200 }))
    expect(err.code).toBe('GW_UPSTREAM_REQUEST_TIMEOUT')
    expect(err.status).toBe(408)
    expect(Date.now() - started).toBeLessThan(5_000)
    await closed.promise
  })

  it('does not cut a slow body once the headers arrived within requestTimeoutMs', async () => {
    const srv = await startServer((_req, res) => {
      res.writeHead(200)
      res.write('a')
      setTimeout(() => res.end('b'), 400)
    })
    const res = await client().send(request(srv.origin, { requestTimeoutMs: 200 }))
    expect(await readAll(res.body)).toBe('ab')
  })

  it('maps the gateway headers timeout to 504 GW_UPSTREAM_TIMEOUT', async () => {
    const srv = await startServer(() => {})
    const err = await sendError(client({ headersTimeoutMs: 200 }), request(srv.origin))
    expect(err.code).toBe('GW_UPSTREAM_TIMEOUT')
    expect(err.status).toBe(504)
  })

  it('keeps 504 when the gateway headers timeout fires before a longer request timeout', async () => {
    const srv = await startServer(() => {})
    const err = await sendError(client({ headersTimeoutMs: 200 }), request(srv.origin, { requestTimeoutMs: 10_000 }))
    expect(err.code).toBe('GW_UPSTREAM_TIMEOUT')
  })

  it('maps a socket destroyed mid-body to GW_UPSTREAM_STREAM_BROKEN through toError', async () => {
    const srv = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: {"n":1}\n\n')
      setTimeout(() => res.socket?.destroy(), 50)
    })
    const c = client()
    const res = await c.send(request(srv.origin))
    const raw = await readError(res.body)
    const err = c.toError(raw, null)
    expect(err.code).toBe('GW_UPSTREAM_STREAM_BROKEN')
    expect(err.status).toBe(502)
    expect(err.message).toBe(ERRORS.GW_UPSTREAM_STREAM_BROKEN.message)
    expect(err.cause).toBe(raw)
  })

  it('maps a body that stalls past bodyTimeoutMs to 504, or 408 when the request set its own timeout', async () => {
    const srv = await startServer((_req, res) => {
      res.writeHead(200)
      res.write('partial')
    })
    const c = client({ bodyTimeoutMs: 200 })
    const res = await c.send(request(srv.origin))
    const raw = await readError(res.body)
    expect(c.toError(raw, null).code).toBe('GW_UPSTREAM_TIMEOUT')
    expect(c.toError(raw, null).status).toBe(504)
    expect(c.toError(raw, 5_000).code).toBe('GW_UPSTREAM_REQUEST_TIMEOUT')
    expect(c.toError(raw, 5_000).status).toBe(408)
  })

  it('bounds the silence between body chunks by the request\'s idleTimeoutMs, over the client default, and drops the connection', async () => {
    const srv = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: first\n\n')
    })
    const c = client({ bodyTimeoutMs: 600_000 })
    const res = await c.send(request(srv.origin, { idleTimeoutMs: 200 }))
    const raw = await readError(res.body)
    const err = c.toError(raw, null)
    expect(err.code).toBe('GW_UPSTREAM_TIMEOUT')
    expect(err.message).toBe('The provider sent nothing for longer than the idle timeout')
    expect(c.toError(raw, 200).message).toBe('The provider sent nothing for longer than x-gateway-request-timeout (200 ms)')
    await vi.waitFor(() => expect(srv.closedSockets).toBe(1))
  })

  it('returns GatewayErrors from toError unchanged', () => {
    const c = client()
    const original = new GatewayError(ERRORS.GW_UPSTREAM_TIMEOUT)
    expect(c.toError(original, null)).toBe(original)
  })

  it.each([
    ['without', null],
    ['with', 10_000],
  ])('aborts the upstream request when the client goes away before the headers (%s a request timeout)', async (_label, requestTimeoutMs) => {
    const received = deferred()
    const closed = deferred()
    const srv = await startServer((req) => {
      req.on('close', () => closed.resolve())
      received.resolve()
    })
    const controller = new AbortController()
    const pending = sendError(client(), request(srv.origin, { signal: controller.signal, requestTimeoutMs }))
    await received.promise
    controller.abort()
    const err = await pending
    expect(err.status).toBe(502)
    await closed.promise
  })

  it.each([
    ['without', null],
    ['with', 10_000],
  ])('aborts the upstream body when the client goes away mid-stream (%s a request timeout)', async (_label, requestTimeoutMs) => {
    const closed = deferred()
    let finished = false
    const srv = await startServer((_req, res) => {
      res.on('close', () => closed.resolve())
      res.on('finish', () => {
        finished = true
      })
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: 1\n\n')
    })
    const controller = new AbortController()
    const res = await client().send(request(srv.origin, { signal: controller.signal, requestTimeoutMs }))
    const iterator = iterate(res.body)
    await iterator.next()
    controller.abort()
    await expect(iterator.next()).rejects.toBeDefined()
    await closed.promise
    expect(finished).toBe(false)
  })

  it('refuses to connect when a DNS answer fails the address filter', async () => {
    const srv = await startServer((_req, res) => res.end('ok'))
    const guarded = client({ isAddressAllowed: () => false })
    const err = await sendError(guarded, request(`http://localhost:${srv.port}`))
    expect(err.code).toBe('GW_UPSTREAM_UNREACHABLE')
    expect(srv.sockets).toHaveLength(0)
    const open = client()
    expect(await readAll((await open.send(request(`http://localhost:${srv.port}`))).body)).toBe('ok')
  })

  it('with the connect-time allow-list policy, refuses a host name that resolves to a loopback address unless allow-listed (DNS rebinding)', async () => {
    const srv = await startServer((_req, res) => res.end('ok'))
    const origin = `http://localhost:${srv.port}`
    const strict = client({ isAddressAllowed: connectAddressPolicy(parseAllowList([])) })
    expect((await sendError(strict, request(origin))).code).toBe('GW_UPSTREAM_UNREACHABLE')
    expect(srv.sockets).toHaveLength(0)
    for (const allowed of [['localhost'], ['127.0.0.0/8', '::1']]) {
      const c = client({ isAddressAllowed: connectAddressPolicy(parseAllowList(allowed)) })
      expect(await readAll((await c.send(request(origin))).body)).toBe('ok')
    }
  })

  it('closes its pools on close(), reports unhealthy, and refuses new origins', async () => {
    const srv = await startServer((_req, res) => res.end('ok'))
    const c = client()
    await readAll((await c.send(request(srv.origin))).body)
    expect(await c.health()).toEqual({ ok: true })
    await c.close()
    await new Promise((r) => setTimeout(r, 50))
    expect(srv.closedSockets).toBe(1)
    expect((await c.health()).ok).toBe(false)
    const err = await sendError(c, request(srv.origin))
    expect(err.code).toBe('GW_UNAVAILABLE')
  })

  it('destroys connections still busy when the close grace period ends', async () => {
    const received = deferred()
    const srv = await startServer(() => received.resolve())
    const c = client({ closeGraceMs: 100 })
    const pending = sendError(c, request(srv.origin))
    await received.promise
    const started = Date.now()
    await c.close()
    expect(Date.now() - started).toBeLessThan(5_000)
    expect((await pending).code).toBe('GW_UPSTREAM_UNREACHABLE')
  })

  it('closes the oldest idle pool when more than maxOrigins origins are in use', async () => {
    const a = await startServer((_req, res) => res.end('a'))
    const b = await startServer((_req, res) => res.end('b'))
    const c = client({ maxOrigins: 1 })
    expect(await readAll((await c.send(request(a.origin))).body)).toBe('a')
    expect(await readAll((await c.send(request(b.origin))).body)).toBe('b')
    await new Promise((r) => setTimeout(r, 50))
    expect(a.closedSockets).toBe(1)
    expect(b.closedSockets).toBe(0)
    expect(await readAll((await c.send(request(a.origin))).body)).toBe('a')
  })
})
