/**
 * Errors in each route's own format (API.md §2, "Inbound formats"), end to end: a stream that
 * breaks after it started ends with one error event that the route's clients parse (chat
 * `data: {"error":…}`, Responses `event: error` with `sequence_number`, Messages `event: error`
 * with `{"type":"error","error":…}`), and an error reply on `/v1/messages` uses the Messages body.
 * Real gateway, real sockets, the official `openai` client for Responses, raw SSE for Messages (the
 * Anthropic SDK is not a dependency here).
 */
import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { dataPlaneHeaders, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

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

function post(path: string, body: unknown, extra: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.url}${path}`, { method: 'POST', headers: dataPlaneHeaders(key, mock.url, extra), body: JSON.stringify(body) })
}

/** One SSE event block of the wire text: its `event:` name (or null) and joined `data`. */
interface WireEvent {
  readonly event: string | null
  readonly data: string
}

/** Splits SSE text into events the way an SSE parser does (blank line ends an event). */
function wireEvents(text: string): WireEvent[] {
  const events: WireEvent[] = []
  for (const block of text.split(/\r\n\r\n|\n\n|\r\r/)) {
    let event: string | null = null
    const data: string[] = []
    for (const line of block.split(/\r\n|\n|\r/)) {
      if (line.startsWith('event:')) event = line.slice(6).trim()
      else if (line.startsWith('data:')) data.push(line.slice(line.charAt(5) === ' ' ? 6 : 5))
    }
    if (event !== null || data.length > 0) events.push({ event, data: data.join('\n') })
  }
  return events
}

/** A Responses API stream as OpenAI sends it: `event:` lines and `sequence_number` in every payload. */
function responsesEvents(deltas: readonly string[]): string[] {
  const response = { id: 'resp_mock', object: 'response', created_at: 1_700_000_000, status: 'in_progress', model: 'gpt-4o-mini', output: [] }
  const payloads: Json[] = [
    { type: 'response.created', response, sequence_number: 0 },
    { type: 'response.in_progress', response, sequence_number: 1 },
    ...deltas.map((delta, i) => ({ type: 'response.output_text.delta', item_id: 'msg_mock', output_index: 0, content_index: 0, delta, logprobs: [], sequence_number: 2 + i })),
  ]
  return payloads.map((payload) => `event: ${payload.type}\ndata: ${JSON.stringify(payload)}`)
}

/** An Anthropic Messages stream's first events. */
function messagesEvents(deltas: readonly string[]): string[] {
  const start = { type: 'message_start', message: { id: 'msg_mock', type: 'message', role: 'assistant', model: 'claude-sonnet-4', content: [], stop_reason: null, usage: { input_tokens: 5, output_tokens: 0 } } }
  const blockStart = { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }
  const payloads: Json[] = [start, blockStart, ...deltas.map((text) => ({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }))]
  return payloads.map((payload) => `event: ${payload.type}\ndata: ${JSON.stringify(payload)}`)
}

describe('Responses streams (pass-through /v1/responses)', () => {
  const events = responsesEvents(['Hel', 'lo'])

  it('end with an `event: error` the openai client yields as an error event, with the next sequence_number', async () => {
    mock.next({ type: 'stream', events, destroyAfter: events.length }, { path: '/v1/responses' })
    const client = new OpenAI({
      apiKey: 'sk-provider',
      baseURL: `${gw.url}/v1`,
      defaultHeaders: { 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
      maxRetries: 0,
    })
    const stream = await client.responses.create({ model: 'gpt-4o-mini', input: 'Hello', stream: true })
    const received: Json[] = []
    let failure: unknown = null
    try {
      for await (const event of stream) received.push(event as Json)
    } catch (error) {
      failure = error
    }
    // Not a parse error nor a thrown chat-format error: every event carries its `type`, the last is the error.
    expect(failure).toBeNull()
    expect(received.every((event) => typeof event.type === 'string')).toBe(true)
    expect(received.slice(0, -1).map((event) => event.delta ?? null)).toEqual([null, null, 'Hel', 'lo'])
    expect(received.at(-1)).toEqual({
      type: 'error',
      code: 'GW_UPSTREAM_STREAM_BROKEN',
      message: 'The provider stream ended with an error',
      param: null,
      sequence_number: 4,
    })
  })

  it('send it as one SSE event named error after the relayed events, with no chat-format data', async () => {
    mock.next({ type: 'stream', events, destroyAfter: 3 }, { path: '/v1/responses' })
    const response = await post('/v1/responses', { model: 'gpt-4o-mini', input: 'Hello', stream: true })
    expect(response.status).toBe(200)
    const received = wireEvents(await response.text())
    expect(received.map((event) => event.event)).toEqual(['response.created', 'response.in_progress', 'response.output_text.delta', 'error'])
    const last = JSON.parse(received.at(-1)!.data) as Json
    expect(last).toEqual({ type: 'error', code: 'GW_UPSTREAM_STREAM_BROKEN', message: expect.any(String), param: null, sequence_number: 3 })
    expect('error' in last).toBe(false)
  })

  it('close an event the provider broke off in the middle, so the error event stands alone', async () => {
    mock.next(
      (_request, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write(`${events[0]}\n\n`)
        // Half an event, then the connection dies.
        res.write('event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":1,"del', () => res.socket?.destroy())
      },
      { path: '/v1/responses' },
    )
    const response = await post('/v1/responses', { model: 'gpt-4o-mini', input: 'Hello', stream: true })
    const received = wireEvents(await response.text())
    const last = received.at(-1)!
    expect(last.event).toBe('error')
    expect(JSON.parse(last.data)).toMatchObject({ type: 'error', code: 'GW_UPSTREAM_STREAM_BROKEN', sequence_number: 2 })
  })

  it('answer errors before the stream in the OpenAI shape', async () => {
    mock.next({ type: 'reset' }, { path: '/v1/responses' })
    const response = await post('/v1/responses', { model: 'gpt-4o-mini', input: 'Hello', stream: true })
    expect(response.status).toBe(502)
    expect(((await response.json()) as Json).error).toMatchObject({ code: 'GW_UPSTREAM_UNREACHABLE', type: 'upstream_error' })
  })
})

describe('Messages streams and errors (pass-through /v1/messages)', () => {
  const events = messagesEvents(['Hel', 'lo'])

  it('end a broken stream with `event: error` and {"type":"error","error":{type,message}}', async () => {
    mock.next({ type: 'stream', events, destroyAfter: events.length }, { path: '/v1/messages' })
    const response = await post('/v1/messages', { model: 'claude-sonnet-4', max_tokens: 64, messages: [{ role: 'user', content: 'Hello' }], stream: true })
    expect(response.status).toBe(200)
    const received = wireEvents(await response.text())
    expect(received.map((event) => event.event)).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'content_block_delta', 'error'])
    expect(JSON.parse(received.at(-1)!.data)).toEqual({
      type: 'error',
      error: { type: 'upstream_error', message: 'The provider stream ended with an error' },
    })
  })

  it('answer errors before the stream in the Messages shape, gateway errors included', async () => {
    mock.next({ type: 'reset' }, { path: '/v1/messages' })
    const broken = await post('/v1/messages', { model: 'claude-sonnet-4', max_tokens: 64, messages: [], stream: true })
    expect(broken.status).toBe(502)
    expect(broken.headers.get('content-type')).toMatch(/^application\/json/)
    expect(await broken.json()).toEqual({ type: 'error', error: { type: 'upstream_error', message: 'The provider could not be reached' } })

    const unauthenticated = await post('/v1/messages/count_tokens', { model: 'claude-sonnet-4', messages: [] }, { 'x-gateway-api-key': 'gw-not-a-real-key-0000000000' })
    expect(unauthenticated.status).toBe(401)
    expect(await unauthenticated.json()).toEqual({ type: 'error', error: { type: 'authentication_error', message: 'Invalid API key' } })
  })

  it('leave other pass-through paths and their errors in the OpenAI shape', async () => {
    mock.next({ type: 'reset' }, { path: '/v1/messagesx' })
    const response = await post('/v1/messagesx', {})
    expect(response.status).toBe(502)
    expect(((await response.json()) as Json).error).toMatchObject({ code: 'GW_UPSTREAM_UNREACHABLE' })
  })
})
