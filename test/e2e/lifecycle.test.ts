/**
 * The gateway's lifecycle, end to end: health, readiness and metrics probes; graceful shutdown
 * (in-flight streams finish, queued log records are written, new connections are refused); plugin
 * switches (a switched-off group answers 404 and its adapters are never opened); and boot refusing
 * bad plugin configuration with a message naming the key.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { Agent, request as httpRequest, type ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { DuckDbDatabase } from '../../adapters/embedded/duckdb-database.js'
import { DuckDbLogSink } from '../../adapters/embedded/duckdb-log-sink.js'
import { startGateway } from '../../config/boot.js'
import type { LogRecord } from '../../core/logs.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, MOCK_STREAM_DELTAS, startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

let mock: MockUpstream

beforeAll(async () => {
  mock = await startMockUpstream()
})

afterAll(async () => {
  await mock?.close()
})

function chatHeaders(key: string | null, traceId?: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-gateway-provider': 'openai',
    'x-gateway-custom-host': mock.url,
    authorization: 'Bearer sk-provider',
    ...(key === null ? {} : { 'x-gateway-api-key': key }),
    ...(traceId === undefined ? {} : { 'x-gateway-trace-id': traceId }),
  }
}

function chat(url: string, key: string | null, options: { traceId?: string; stream?: boolean } = {}): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: chatHeaders(key, options.traceId),
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Hi' }],
      ...(options.stream === true ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
  })
}

/** Resolves with the error code of a fresh TCP connection attempt, or `connected`. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    socket.once('connect', () => {
      socket.destroy()
      resolve('connected')
    })
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message))
  })
}

/** A GET through `agent` (so a kept-alive connection is reused). */
function get(agent: Agent, port: number, path: string): Promise<{ status: number; connection: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body: Buffer.concat(chunks).toString('utf8') }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

/** The value of an unlabelled Prometheus sample, or `undefined`. */
function sample(metrics: string, name: string): number | undefined {
  const line = metrics.split('\n').find((entry) => entry.startsWith(`${name} `))
  return line === undefined ? undefined : Number(line.slice(name.length + 1))
}

describe('probes', () => {
  let gw: TestGateway

  beforeAll(async () => {
    gw = await startTestGateway()
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('answers /healthz with 200', async () => {
    const response = await fetch(`${gw.url}/healthz`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ status: 'ok' })
  })

  it('answers /readyz with 200, ready, and a passing check per started service', async () => {
    const response = await fetch(`${gw.url}/readyz`)
    const body = (await response.json()) as Json
    expect(response.status, JSON.stringify(body)).toBe(200)
    expect(body.status).toBe('ready')
    const names = Object.keys(body.checks)
    expect(names).toEqual(expect.arrayContaining(['admin-store', 'log-sink', 'upstream-client']))
    expect(names.sort()).toEqual(gw.wiring.services.map((entry) => entry.name).sort())
    for (const name of names) expect(body.checks[name], name).toMatchObject({ ok: true })
  })

  it('serves Prometheus text on /metrics with the in-flight and log queue gauges', async () => {
    const response = await fetch(`${gw.url}/metrics`)
    const text = await response.text()
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toContain('text/plain')
    expect(text).toContain('# TYPE gw_http_in_flight_requests gauge')
    expect(text).toContain('# TYPE gw_log_queue_records gauge')
    expect(sample(text, 'gw_http_in_flight_requests')).toBe(0)
    expect(sample(text, 'gw_log_queue_records')).toBeGreaterThanOrEqual(0)
  })

  it('counts a request in flight while its stream is open', async () => {
    const { key } = await gw.workspaceKey(['completions.write'])
    let release!: () => void
    const released = new Promise<void>((resolve) => {
      release = resolve
    })
    mock.reset()
    mock.next(async (_request, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(`data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'a' } }] })}\n\n`)
      await released
      res.end('data: [DONE]\n\n')
    }, { path: '/v1/chat/completions' })
    const response = await chat(gw.url, key, { stream: true })
    const reader = (response.body as ReadableStream<Uint8Array>).getReader()
    await reader.read()
    const during = await (await fetch(`${gw.url}/metrics`)).text()
    expect(sample(during, 'gw_http_in_flight_requests')).toBe(1)
    release()
    while (!(await reader.read()).done) {
      // drain the stream
    }
    await vi.waitFor(async () => {
      const after = await (await fetch(`${gw.url}/metrics`)).text()
      expect(sample(after, 'gw_http_in_flight_requests')).toBe(0)
    }, { timeout: 10_000 })
  })
})

describe('graceful shutdown', () => {
  let gw: TestGateway

  beforeAll(async () => {
    // The flush timer never fires: queued records reach the store only through shutdown.
    gw = await startTestGateway({ overlay: { logSink: { flushIntervalMs: 3_600_000 } } })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('finishes an in-flight stream, refuses new connections, and writes queued log records', async () => {
    const sink = gw.wiring.logSink
    expect(sink).not.toBeNull()
    const enqueue = vi.spyOn(sink!, 'enqueue')
    const recordOf = (traceId: string): LogRecord | undefined =>
      enqueue.mock.calls.map(([record]) => record).find((record) => record.traceId === traceId)
    const { key } = await gw.workspaceKey(['completions.write'])
    // One kept-alive connection, opened before shutdown.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    expect((await get(agent, gw.port, '/healthz')).status).toBe(200)

    // A request finished before shutdown: its record is only queued.
    const before = await chat(gw.url, key, { traceId: 'before-stop' })
    expect(before.status).toBe(200)
    expect(((await before.json()) as Json).choices[0].message.content).toBe(MOCK_REPLY)
    await vi.waitFor(() => expect(recordOf('before-stop')).toBeDefined(), { timeout: 10_000 })
    expect(sink!.stats().queued).toBeGreaterThanOrEqual(1)

    mock.reset()
    mock.next({ type: 'stream', chunks: 5, intervalMs: 100 }, { path: '/v1/chat/completions' })
    const response = await chat(gw.url, key, { traceId: 'during-stop', stream: true })
    expect(response.status).toBe(200)
    const reader = (response.body as ReadableStream<Uint8Array>).getReader()
    const decoder = new TextDecoder()
    const first = await reader.read()
    let text = decoder.decode(first.value, { stream: true })
    expect(text).toContain('chat.completion.chunk')

    let stopped = false
    let upstreamCompletedAtStop: boolean | undefined
    let streamRecordQueuedAtStop: boolean | undefined
    const stopping = gw.stop().then(() => {
      stopped = true
      upstreamCompletedAtStop = mock.requests[0]?.completed
      streamRecordQueuedAtStop = recordOf('during-stop') !== undefined
    })

    // Shutdown stops accepting at once, while the stream is still running.
    expect(await tryConnect(gw.port)).toBe('ECONNREFUSED')

    let chunk = await reader.read()
    while (!chunk.done) {
      text += decoder.decode(chunk.value, { stream: true })
      chunk = await reader.read()
    }
    expect(text).toContain('data: [DONE]')
    const deltas = text
      .split('\n\n')
      .filter((event) => event.startsWith('data: {'))
      .map((event) => (JSON.parse(event.slice(6)) as Json).choices?.[0]?.delta?.content)
      .filter((content): content is string => typeof content === 'string' && content.length > 0)
    expect(deltas).toEqual([...MOCK_STREAM_DELTAS])

    await stopping
    expect(stopped).toBe(true)
    expect(upstreamCompletedAtStop).toBe(true)
    expect(streamRecordQueuedAtStop).toBe(true)
    expect(await tryConnect(gw.port)).toBe('ECONNREFUSED')
    // A connection opened before shutdown is told the gateway is going away, then closed.
    const late = await get(agent, gw.port, '/healthz')
    expect(late.status).toBe(503)
    expect(late.connection).toBe('close')
    expect(JSON.parse(late.body).error.code).toBe('GW_UNAVAILABLE')
    agent.destroy()

    // Both records reached the file: reopen it the way the next start would.
    const database = new DuckDbDatabase({ path: join(gw.dataDir, 'gateway.duckdb') })
    const reopened = new DuckDbLogSink(database)
    await reopened.start()
    try {
      const finished = await reopened.findById(recordOf('before-stop')!.id)
      expect(finished).toMatchObject({ traceId: 'before-stop', route: 'chat.completions', status: 200, outcome: 'completed', streaming: false })
      const streamed = await reopened.findById(recordOf('during-stop')!.id)
      expect(streamed).toMatchObject({ traceId: 'during-stop', route: 'chat.completions', status: 200, outcome: 'completed', streaming: true })
    } finally {
      await reopened.close()
      await database.close()
    }
  })

  it('resolves stop() again when called a second time', async () => {
    await expect(gw.stop()).resolves.toBeUndefined()
  })
})

describe('plugin switches', () => {
  let gw: TestGateway

  beforeAll(async () => {
    gw = await startTestGateway({
      overlay: {
        plugins: {
          auth: { enabled: false },
          'scope-check': { enabled: false },
          log: { enabled: false },
          'admin-api': { enabled: false },
          audit: { enabled: false },
          'virtual-key': { enabled: false },
          routing: { enabled: false },
          'prompt-render': { enabled: false },
          'rate-limit': { enabled: false },
          budget: { enabled: false },
        },
      },
    })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('serves chat without any gateway key when auth is off', async () => {
    mock.reset()
    const response = await chat(gw.url, null)
    const body = (await response.json()) as Json
    expect(response.status, JSON.stringify(body)).toBe(200)
    expect(body.choices[0].message.content).toBe(MOCK_REPLY)
    const [seen] = await mock.waitForRequests(1)
    expect(seen?.headers.authorization).toBe('Bearer sk-provider')
  })

  it('answers 404 on Admin API routes when admin-api is off', async () => {
    for (const [method, path] of [['GET', '/v1/admin/organisation'], ['POST', '/v1/admin/workspaces'], ['POST', '/v1/api-keys/workspace/service']] as const) {
      const response = await fetch(`${gw.url}${path}`, {
        method,
        headers: { 'x-gateway-api-key': gw.adminKey, 'content-type': 'application/json' },
        ...(method === 'POST' ? { body: '{"name":"x"}' } : {}),
      })
      const body = (await response.json()) as Json
      expect(response.status, `${method} ${path}: ${JSON.stringify(body)}`).toBe(404)
      expect(body.error.code).toBe('GW_REQ_ROUTE_NOT_FOUND')
    }
  })

  it('never starts an adapter that no enabled plugin needs', async () => {
    const names = gw.wiring.services.map((entry) => entry.name)
    expect(names).toContain('upstream-client')
    expect(names).not.toContain('admin-store')
    expect(names).not.toContain('log-sink')
    expect(names).not.toContain('embedded-database')
    expect(gw.wiring.logSink).toBeNull()
    expect(existsSync(join(gw.dataDir, 'gateway.duckdb'))).toBe(false)
    const ready = (await (await fetch(`${gw.url}/readyz`)).json()) as Json
    expect(ready.status).toBe('ready')
    expect(Object.keys(ready.checks)).not.toContain('admin-store')
    expect(Object.keys(ready.checks)).not.toContain('log-sink')
  })
})

describe('boot', () => {
  let dataDir: string

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'gw-e2e-badboot-'))
  })

  afterAll(() => {
    rmSync(dataDir, { recursive: true, force: true })
  })

  function boot(overlay: unknown): Promise<unknown> {
    return startGateway({
      env: { PORT: '0', GATEWAY_DATA_DIR: dataDir, GATEWAY_LOG_LEVEL: 'silent' },
      overlay: { server: { host: '127.0.0.1' }, ...(overlay as object) },
    })
  }

  it('refuses an unknown plugin, naming its key', async () => {
    await expect(boot({ plugins: { nope: { enabled: true } } })).rejects.toThrow('plugins.nope')
    expect(readdirSync(dataDir)).toEqual([])
  })

  it('refuses two plugins with the same priority, naming the priority key', async () => {
    // forward has priority 100.
    await expect(boot({ plugins: { log: { enabled: true, priority: 100 } } })).rejects.toThrow(/plugins\.log\.priority.*forward/)
    expect(readdirSync(dataDir)).toEqual([])
  })

  it('refuses scope-check enabled with auth disabled, naming the unmet requirement', async () => {
    await expect(boot({ plugins: { auth: { enabled: false }, 'admin-api': { enabled: false } } })).rejects.toThrow(/plugins\.scope-check.*auth/)
    expect(readdirSync(dataDir)).toEqual([])
  })
})
