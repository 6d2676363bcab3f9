/**
 * Upstream timeouts after the response headers (API.md §2): a provider that goes silent mid-stream
 * for longer than the request's timeout (`x-gateway-request-timeout`, else forward's
 * `idleTimeoutMs`, 60 s by default) gets its request aborted, and the client's stream ends with
 * one `timeout_error` event in the route's format; the request log records the error. Real gateway,
 * real sockets, a loopback mock that stalls.
 */
import { randomUUID } from 'node:crypto'
import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest'
import type { LogRecord } from '../../core/logs.js'
import { forwardConfigSchema } from '../../plugins/forward/config.js'
import { dataPlaneHeaders, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

const STREAM_BODY = { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Hello' }] }
/** The idle bound of the `quick` gateway; short so a stall is seen without waiting a minute. */
const IDLE_MS = 300

let mock: MockUpstream
/** Default forward settings (idle bound 60 s). */
let gw: TestGateway
let key: string
/** forward with `idleTimeoutMs: IDLE_MS`. */
let quick: TestGateway
let quickKey: string
let enqueue: MockInstance<(record: LogRecord) => void>

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  key = (await gw.workspaceKey(['completions.write'])).key
  quick = await startTestGateway({ overlay: { plugins: { forward: { config: { idleTimeoutMs: IDLE_MS } } } } })
  quickKey = (await quick.workspaceKey(['completions.write'])).key
  enqueue = vi.spyOn(quick.wiring.logSink!, 'enqueue')
})

afterEach(() => {
  mock.reset()
})

afterAll(async () => {
  enqueue?.mockRestore()
  await quick?.close()
  await gw?.close()
  await mock?.close()
})

function post(target: TestGateway, gatewayKey: string, path: string, body: unknown, extra: Record<string, string> = {}): Promise<Response> {
  return fetch(`${target.url}${path}`, { method: 'POST', headers: dataPlaneHeaders(gatewayKey, mock.url, extra), body: JSON.stringify(body) })
}

/** SSE events of a stream's text: event name (or null) and data. */
function wireEvents(text: string): Array<{ event: string | null; data: string }> {
  return text
    .split('\n\n')
    .filter((block) => block.trim().length > 0)
    .map((block) => {
      const lines = block.split('\n')
      const event = lines.find((line) => line.startsWith('event: '))?.slice(7) ?? null
      const data = lines.filter((line) => line.startsWith('data: ')).map((line) => line.slice(6)).join('\n')
      return { event, data }
    })
}

/** The log record enqueued for `traceId`. */
async function loggedWith(traceId: string): Promise<LogRecord> {
  return vi.waitFor(() => {
    const record = enqueue.mock.calls.map(([logged]) => logged).find((logged) => logged.traceId === traceId)
    if (record === undefined) throw new Error(`no log record for ${traceId} yet`)
    return record
  })
}

describe('idle timeout between stream chunks', () => {
  it('defaults to 60 s in forward settings', () => {
    expect(forwardConfigSchema.parse({}).idleTimeoutMs).toBe(60_000)
  })

  it('ends a stalled chat stream with one timeout_error event (504), aborts the provider request and logs the error', async () => {
    mock.next({ type: 'stream', stallAfter: 2 })
    const traceId = randomUUID()
    const response = await post(quick, quickKey, '/v1/chat/completions', STREAM_BODY, { 'x-gateway-trace-id': traceId })
    expect(response.status).toBe(200)
    const events = wireEvents(await response.text())
    expect(events.some((event) => event.data === '[DONE]')).toBe(false)
    expect(events.slice(0, -1).map((event) => (JSON.parse(event.data) as Json).choices[0].delta.content)).toEqual(['', 'Hello'])
    expect(JSON.parse(events.at(-1)!.data)).toEqual({
      error: { message: 'The provider sent nothing for longer than the idle timeout', type: 'timeout_error', code: 'GW_UPSTREAM_TIMEOUT' },
    })

    const [stalled] = await mock.waitForRequests(1)
    await mock.waitForClientClose(stalled!)
    expect(stalled!.closedByClient).toBe(true)
    expect(stalled!.eventsSent).toBe(2)

    const record = await loggedWith(traceId)
    expect(record).toMatchObject({ errorCode: 'GW_UPSTREAM_TIMEOUT', errorType: 'timeout_error', outcome: 'errored', streaming: true })
  })

  it('makes the openai client raise the timeout after the deltas it got', async () => {
    mock.next({ type: 'stream', stallAfter: 3 })
    const client = new OpenAI({
      apiKey: 'sk-provider',
      baseURL: `${quick.url}/v1`,
      defaultHeaders: { 'x-gateway-api-key': quickKey, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
      maxRetries: 0,
    })
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Hello' }] })
    const deltas: string[] = []
    let failure: unknown = null
    try {
      for await (const chunk of stream) deltas.push(chunk.choices[0]?.delta.content ?? '')
    } catch (error) {
      failure = error
    }
    expect(deltas.join('')).toBe('Hello from')
    expect(failure).toBeInstanceOf(OpenAI.APIError)
    expect((failure as InstanceType<typeof OpenAI.APIError>).code).toBe('GW_UPSTREAM_TIMEOUT')
  })

  it('takes x-gateway-request-timeout as the bound when the request sends one (408 event)', async () => {
    mock.next({ type: 'stream', stallAfter: 2 })
    const response = await post(gw, key, '/v1/chat/completions', STREAM_BODY, { 'x-gateway-request-timeout': String(IDLE_MS) })
    expect(response.status).toBe(200)
    const events = wireEvents(await response.text())
    expect(JSON.parse(events.at(-1)!.data)).toEqual({
      error: { message: `The provider sent nothing for longer than x-gateway-request-timeout (${IDLE_MS} ms)`, type: 'timeout_error', code: 'GW_UPSTREAM_REQUEST_TIMEOUT' },
    })
    const [stalled] = await mock.waitForRequests(1)
    await mock.waitForClientClose(stalled!)
  })

  it('lets a stream with gaps shorter than the bound finish, however long it runs in all', async () => {
    mock.next({ type: 'stream', chunks: 15, intervalMs: 80 })
    const response = await post(quick, quickKey, '/v1/chat/completions', STREAM_BODY)
    const events = wireEvents(await response.text())
    expect(events.at(-1)!.data).toBe('[DONE]')
  })

  it('ends a stalled Responses stream with an `event: error` timeout event', async () => {
    const events = [
      `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: { id: 'resp_mock', status: 'in_progress' } })}`,
      `event: response.output_text.delta\ndata: ${JSON.stringify({ type: 'response.output_text.delta', delta: 'Hi', sequence_number: 1 })}`,
    ]
    mock.next({ type: 'stream', events, stallAfter: events.length }, { path: '/v1/responses' })
    const response = await post(quick, quickKey, '/v1/responses', { model: 'gpt-4o-mini', input: 'Hello', stream: true })
    const received = wireEvents(await response.text())
    expect(received.map((event) => event.event)).toEqual(['response.created', 'response.output_text.delta', 'error'])
    expect(JSON.parse(received.at(-1)!.data)).toMatchObject({ type: 'error', code: 'GW_UPSTREAM_TIMEOUT', sequence_number: 2 })
  })

  it('answers 504 when a whole (not streamed) body stalls before it was sent', async () => {
    mock.next((_request, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '64' })
      res.write('{"id":"chatcmpl-stalled",')
    })
    const response = await post(quick, quickKey, '/v1/chat/completions', { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] })
    expect(response.status).toBe(504)
    expect(((await response.json()) as Json).error).toMatchObject({ code: 'GW_UPSTREAM_TIMEOUT', type: 'timeout_error' })
  })
})
