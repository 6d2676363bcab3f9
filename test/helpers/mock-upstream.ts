import { createHash } from 'node:crypto'
import { EventEmitter } from 'node:events'
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo } from 'node:net'

/** The assistant text of every default chat/completions answer; the default stream's deltas join to it. */
export const MOCK_REPLY = 'Hello from the mock upstream.'

/** The content deltas of the default stream, in order. */
export const MOCK_STREAM_DELTAS = ['Hello', ' from', ' the', ' mock', ' upstream.'] as const

/** Usage reported by default chat and text completions (streamed or not). */
export const MOCK_USAGE = { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 } as const

/** Prompt tokens counted per embedding input. */
export const MOCK_EMBEDDING_TOKENS_PER_INPUT = 4

/** Model ids listed by `GET /v1/models`. */
export const MOCK_MODELS = ['gpt-4o-mini', 'gpt-4o', 'text-embedding-3-small', 'tts-1', 'whisper-1', 'dall-e-3'] as const

/** `created` of every default answer, fixed so responses are byte-for-byte reproducible. */
export const MOCK_CREATED = 1_700_000_000

const DEFAULT_EMBEDDING_DIMENSIONS = 8
const DEFAULT_SPEECH_BYTES = 4096
const SPEECH_WRITES = 4

// A 1x1 transparent PNG.
const TINY_PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='

/** One request as the mock received it. */
export type RecordedRequest = {
  /** Position in `requests` (0-based, restarts at `reset()`). */
  readonly index: number
  readonly method: string
  /** Path including the query string, exactly as sent. */
  readonly path: string
  /** Path without the query string. */
  readonly pathname: string
  readonly headers: IncomingHttpHeaders
  /** Header names and values as sent, alternating, original case and order. */
  readonly rawHeaders: readonly string[]
  /** The request body bytes (partial if the client went away while sending it). */
  readonly body: Buffer
  /** True once the client closed the connection before the mock finished its response. */
  readonly closedByClient: boolean
  /** True once the mock finished writing its response. */
  readonly completed: boolean
  /** SSE events written so far when the answer is a stream. */
  readonly eventsSent: number
  /** The body as UTF-8 text. */
  text(): string
  /** The body parsed as JSON (throws if it is not JSON). */
  json(): unknown
}

type Headers = Readonly<Record<string, string | number | readonly string[]>>

/**
 * What the mock does with one request instead of (or around) its default behaviour. Every action
 * may wait `delayMs` before anything is sent (headers included).
 */
export type MockAction =
  /** The default behaviour for the path, after `delayMs`. */
  | { readonly type: 'default'; readonly delayMs?: number }
  /** A JSON body (serialised with JSON.stringify) with this status; status defaults to 200. */
  | { readonly type: 'json'; readonly status?: number; readonly body: unknown; readonly headers?: Headers; readonly delayMs?: number }
  /** Raw bytes with this status; no content-type unless given in `headers`. */
  | { readonly type: 'raw'; readonly status?: number; readonly body: string | Uint8Array; readonly headers?: Headers; readonly delayMs?: number }
  /** Never answer; the request stays open until the client or `close()` ends it. */
  | { readonly type: 'hang' }
  /** Reset the connection (TCP RST) after reading the request, before any response byte. */
  | { readonly type: 'reset'; readonly delayMs?: number }
  /**
   * An SSE stream (chat.completion.chunk, or text_completion for /v1/completions) whatever the request
   * asked for: role chunk, `chunks` content deltas (see `mockStreamDeltas`), finish chunk, usage chunk
   * when the request has `stream_options.include_usage`, then `data: [DONE]`. `events` replaces
   * those with raw SSE event blocks (e.g. `event: response.created\ndata: {...}`), each sent with a
   * blank line after it. `intervalMs` waits between events; `destroyAfter` closes the socket after
   * that many events (counting the role chunk) without finishing the chunked body, as an upstream
   * dying mid-stream; `stallAfter` sends nothing more after that many events and leaves the
   * response open, as an upstream that hangs mid-stream (until the client or `close()` ends it).
   */
  | {
      readonly type: 'stream'
      readonly chunks?: number
      readonly events?: readonly string[]
      readonly intervalMs?: number
      readonly destroyAfter?: number
      readonly stallAfter?: number
      readonly delayMs?: number
    }

/** A custom responder; it owns `res` and must end it (or deliberately not). */
export type MockHandler = (request: RecordedRequest, res: ServerResponse) => void | Promise<void>

/** Which requests a one-shot override applies to; omitted fields match anything. */
export type RequestMatch = { readonly path?: string; readonly method?: string }

/** A mock OpenAI-compatible provider on 127.0.0.1. */
export type MockUpstream = {
  /** Base URL including `/v1`, e.g. `http://127.0.0.1:41234/v1`, ready for a provider `baseURL`. */
  readonly url: string
  /** `http://127.0.0.1:PORT` */
  readonly origin: string
  readonly port: number
  /** Every request received since start or the last `reset()`, in arrival order. */
  readonly requests: readonly RecordedRequest[]
  /** Queues a one-shot override for the next request matching `match` (pathname and/or method). */
  next(action: MockAction | MockHandler, match?: RequestMatch): void
  /** Overrides every request to `pathname` until `reset()`; the latest call for a path wins. */
  on(pathname: string, action: MockAction | MockHandler): void
  /** Forgets recorded requests and every override. */
  reset(): void
  /** Resolves with the first `count` requests once they have arrived (bodies complete). */
  waitForRequests(count: number, timeoutMs?: number): Promise<RecordedRequest[]>
  /** Resolves once the client has closed `request`'s connection before the response finished. */
  waitForClientClose(request: RecordedRequest, timeoutMs?: number): Promise<void>
  /** Calls `listener` whenever a client closes a connection before its response finished; returns an unsubscribe. */
  onRequestClosed(listener: (request: RecordedRequest) => void): () => void
  /** Stops the server, dropping open connections (hanging and streaming requests included). */
  close(): Promise<void>
}

/** The body OpenAI sends with an error status. */
export function openAiErrorBody(
  message: string,
  type = 'invalid_request_error',
  code: string | null = null,
  param: string | null = null,
): { error: { message: string; type: string; param: string | null; code: string | null } } {
  return { error: { message, type, param, code } }
}

/** The `count` content deltas a mock stream sends; `count` defaults to the default stream's. */
export function mockStreamDeltas(count: number = MOCK_STREAM_DELTAS.length): string[] {
  return Array.from({ length: count }, (_, i) => MOCK_STREAM_DELTAS[i % MOCK_STREAM_DELTAS.length] as string)
}

/** The deterministic bytes `/v1/audio/speech` answers with (byte i is i mod 256). */
export function mockSpeechBytes(length: number = DEFAULT_SPEECH_BYTES): Buffer {
  const bytes = Buffer.alloc(length)
  for (let i = 0; i < length; i++) bytes[i] = i % 256
  return bytes
}

/** The vector the mock returns for embedding input number `inputIndex`. */
export function mockEmbedding(inputIndex: number, dimensions: number = DEFAULT_EMBEDDING_DIMENSIONS): number[] {
  // Values that survive a float32 round trip exactly, so base64 and float answers agree.
  return Array.from({ length: dimensions }, (_, j) => Math.fround((inputIndex + 1) * 0.125 + j * 0.0625))
}

type MutableRecord = {
  -readonly [K in keyof RecordedRequest]: RecordedRequest[K]
}

type Override = { action: MockAction | MockHandler; match: RequestMatch | undefined }

type Exchange = {
  record: MutableRecord
  req: IncomingMessage
  res: ServerResponse
  url: URL
  destroyedByMock: boolean
}

class Closing extends Error {}

/** Starts the mock provider on 127.0.0.1 on a free port. */
export async function startMockUpstream(): Promise<MockUpstream> {
  const requests: RecordedRequest[] = []
  const queue: Override[] = []
  const routes = new Map<string, MockAction | MockHandler>()
  const events = new EventEmitter()
  events.setMaxListeners(0)
  const timers = new Set<{ timer: NodeJS.Timeout; reject: (error: Error) => void }>()
  let closing = false

  // Timers are tracked so close() can abandon delays and slow streams at once.
  const wait = (ms: number): Promise<void> =>
    new Promise((resolve, reject) => {
      if (closing) return reject(new Closing())
      const entry = {
        timer: setTimeout(() => {
          timers.delete(entry)
          resolve()
        }, ms),
        reject,
      }
      timers.add(entry)
    })

  const server = createServer((req, res) => {
    void handle(req, res)
  })
  server.keepAliveTimeout = 5_000

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = req.url ?? '/'
    const url = new URL(path, 'http://mock.invalid')
    const record: MutableRecord = {
      index: -1,
      method: req.method ?? 'GET',
      path,
      pathname: url.pathname,
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: Buffer.alloc(0),
      closedByClient: false,
      completed: false,
      eventsSent: 0,
      text() {
        return this.body.toString('utf8')
      },
      json() {
        return JSON.parse(this.body.toString('utf8')) as unknown
      },
    }
    const exchange: Exchange = { record, req, res, url, destroyedByMock: false }
    res.on('error', () => {})
    req.on('error', () => {})
    res.on('finish', () => {
      record.completed = true
    })
    res.on('close', () => {
      if (record.completed || exchange.destroyedByMock || closing) return
      record.closedByClient = true
      events.emit('client-close', record)
    })

    const chunks: Buffer[] = []
    try {
      for await (const chunk of req) chunks.push(chunk as Buffer)
    } catch {
      // the client went away mid-body; keep what arrived
    }
    record.body = Buffer.concat(chunks)
    record.index = requests.length
    requests.push(record)
    events.emit('request', record)
    if (res.destroyed) return

    try {
      await respond(exchange, pickOverride(record))
    } catch (error) {
      if (error instanceof Closing || res.destroyed) return
      if (!res.headersSent) {
        sendJson(record, res, 500, openAiErrorBody(`mock upstream handler failed: ${String(error)}`, 'server_error'))
      } else {
        res.destroy()
      }
    }
  }

  function pickOverride(record: RecordedRequest): MockAction | MockHandler | undefined {
    const position = queue.findIndex(({ match }) =>
      (match?.path === undefined || match.path === record.pathname) &&
      (match?.method === undefined || match.method.toUpperCase() === record.method))
    if (position >= 0) return queue.splice(position, 1)[0]?.action
    return routes.get(record.pathname)
  }

  async function respond(exchange: Exchange, override: MockAction | MockHandler | undefined): Promise<void> {
    const { res, record } = exchange
    if (typeof override === 'function') return override(record, res)
    const action: MockAction = override ?? { type: 'default' }
    if (action.type !== 'hang' && action.delayMs !== undefined && action.delayMs > 0) await wait(action.delayMs)
    if (res.destroyed) return
    switch (action.type) {
      case 'default':
        return defaultResponse(exchange)
      case 'json':
        return sendJson(record, res, action.status ?? 200, action.body, action.headers)
      case 'raw':
        res.writeHead(action.status ?? 200, { ...commonHeaders(record), ...action.headers } as OutgoingHttpHeaders)
        res.end(action.body)
        return
      case 'hang':
        return
      case 'reset':
        exchange.destroyedByMock = true
        exchange.req.socket.resetAndDestroy()
        return
      case 'stream': {
        const body = parseJsonObject(record.body) ?? {}
        const kind = record.pathname.endsWith('/completions') && !record.pathname.endsWith('/chat/completions') ? 'text' : 'chat'
        const events = action.events ?? dataEvents(streamEvents(kind, record, body, mockStreamDeltas(action.chunks)))
        return sendStream(exchange, events, action)
      }
    }
  }

  async function defaultResponse(exchange: Exchange): Promise<void> {
    const { record, res, url } = exchange
    const route = `${record.method} ${record.pathname}`
    if (route === 'POST /v1/chat/completions' || route === 'POST /v1/completions') {
      const body = parseJsonObject(record.body)
      if (body === undefined) return sendJson(record, res, 400, openAiErrorBody('The request body is not valid JSON.'))
      const kind = route === 'POST /v1/chat/completions' ? 'chat' : 'text'
      if (body.stream === true) return sendStream(exchange, dataEvents(streamEvents(kind, record, body, mockStreamDeltas())), {})
      return sendJson(record, res, 200, kind === 'chat' ? chatCompletion(record, body) : textCompletion(record, body))
    }
    if (route === 'POST /v1/embeddings') {
      const body = parseJsonObject(record.body)
      if (body === undefined) return sendJson(record, res, 400, openAiErrorBody('The request body is not valid JSON.'))
      return sendJson(record, res, 200, embeddings(body))
    }
    if (route === 'POST /v1/audio/speech') return sendSpeech(exchange)
    if (route === 'POST /v1/audio/transcriptions' || route === 'POST /v1/audio/translations') {
      return sendTranscription(exchange, route.endsWith('translations') ? 'translate' : 'transcribe')
    }
    if (route === 'POST /v1/images/generations') {
      const body = parseJsonObject(record.body)
      if (body === undefined) return sendJson(record, res, 400, openAiErrorBody('The request body is not valid JSON.'))
      return sendJson(record, res, 200, images(body))
    }
    if (route === 'GET /v1/models') {
      return sendJson(record, res, 200, { object: 'list', data: MOCK_MODELS.map(model) })
    }
    if (record.method === 'GET' && record.pathname.startsWith('/v1/models/')) {
      const id = decodeURIComponent(record.pathname.slice('/v1/models/'.length))
      return sendJson(record, res, 200, model(id))
    }
    return sendJson(record, res, 200, {
      method: record.method,
      path: record.pathname,
      query: Object.fromEntries(url.searchParams),
      body: record.text(),
      headers: record.headers,
    })
  }

  async function sendStream(
    exchange: Exchange,
    events: readonly string[],
    options: { intervalMs?: number; destroyAfter?: number; stallAfter?: number },
  ): Promise<void> {
    const { res, record } = exchange
    res.writeHead(200, {
      ...commonHeaders(record),
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
    })
    res.flushHeaders()
    for (let i = 0; i < events.length; i++) {
      if (options.destroyAfter !== undefined && i >= options.destroyAfter) {
        exchange.destroyedByMock = true
        res.socket?.destroy()
        return
      }
      if (options.stallAfter !== undefined && i >= options.stallAfter) return
      if (i > 0 && options.intervalMs !== undefined && options.intervalMs > 0) await wait(options.intervalMs)
      if (res.destroyed) return
      // Waiting for the flush keeps events apart and ensures they left before any destroy.
      await new Promise<void>((resolve) => res.write(`${events[i]}\n\n`, () => resolve()))
      record.eventsSent++
    }
    if (options.stallAfter !== undefined && options.stallAfter <= events.length) return
    if (options.destroyAfter !== undefined && options.destroyAfter <= events.length) {
      exchange.destroyedByMock = true
      res.socket?.destroy()
      return
    }
    res.end()
  }

  async function sendSpeech(exchange: Exchange): Promise<void> {
    const { res, record } = exchange
    const format = String(parseJsonObject(record.body)?.response_format ?? 'mp3')
    const bytes = mockSpeechBytes()
    res.writeHead(200, { ...commonHeaders(record), 'content-type': AUDIO_TYPES[format] ?? 'audio/mpeg' })
    const size = Math.ceil(bytes.length / SPEECH_WRITES)
    for (let offset = 0; offset < bytes.length; offset += size) {
      if (res.destroyed) return
      await new Promise<void>((resolve) => res.write(bytes.subarray(offset, offset + size), () => resolve()))
    }
    res.end()
  }

  function sendTranscription(exchange: Exchange, task: 'transcribe' | 'translate'): void {
    const { res, record } = exchange
    const contentType = record.headers['content-type'] ?? ''
    const boundary = multipartBoundary(contentType)
    const parts = boundary === undefined ? [] : parseMultipart(record.body, boundary)
    const fields: Record<string, string> = {}
    const files: Array<{ field: string; filename: string; contentType: string; bytes: number; sha256: string }> = []
    for (const part of parts) {
      if (part.filename === undefined) fields[part.name] = part.data.toString('utf8')
      else files.push({
        field: part.name,
        filename: part.filename,
        contentType: part.contentType ?? '',
        bytes: part.data.length,
        sha256: createHash('sha256').update(part.data).digest('hex'),
      })
    }
    const text = `mock ${task}: ${record.body.length} bytes, boundary ${boundary ?? 'none'}`
    if (fields.response_format === 'text') {
      res.writeHead(200, { ...commonHeaders(record), 'content-type': 'text/plain; charset=utf-8' })
      res.end(text)
      return
    }
    sendJson(record, res, 200, {
      text,
      task,
      bytes: record.body.length,
      boundary: boundary ?? null,
      fields,
      files,
      usage: { type: 'duration', seconds: 1 },
    })
  }

  function sendJson(record: RecordedRequest, res: ServerResponse, status: number, body: unknown, headers?: Headers): void {
    const payload = Buffer.from(JSON.stringify(body))
    res.writeHead(status, {
      ...commonHeaders(record),
      'content-type': 'application/json',
      'content-length': payload.length,
      ...headers,
    } as OutgoingHttpHeaders)
    res.end(payload)
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const port = (server.address() as AddressInfo).port
  const origin = `http://127.0.0.1:${port}`

  return {
    url: `${origin}/v1`,
    origin,
    port,
    requests,
    next(action, match) {
      queue.push({ action, match })
    },
    on(pathname, action) {
      routes.set(pathname, action)
    },
    reset() {
      requests.length = 0
      queue.length = 0
      routes.clear()
    },
    waitForRequests(count, timeoutMs = 5_000) {
      return waitForEvent(events, 'request', () => requests.length >= count, timeoutMs, () => `${count} request(s), got ${requests.length}`)
        .then(() => requests.slice(0, count))
    },
    waitForClientClose(request, timeoutMs = 5_000) {
      return waitForEvent(events, 'client-close', () => request.closedByClient, timeoutMs, () => `the client to close request ${request.index} (${request.method} ${request.path})`)
    },
    onRequestClosed(listener) {
      events.on('client-close', listener)
      return () => {
        events.off('client-close', listener)
      }
    },
    async close() {
      closing = true
      for (const entry of timers) {
        clearTimeout(entry.timer)
        entry.reject(new Closing())
      }
      timers.clear()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeAllConnections()
      await closed
    },
  }
}

function waitForEvent(events: EventEmitter, name: string, done: () => boolean, timeoutMs: number, what: () => string): Promise<void> {
  if (done()) return Promise.resolve()
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (!done()) return
      cleanup()
      resolve()
    }
    const timer = setTimeout(() => {
      cleanup()
      reject(new Error(`mock upstream: timed out after ${timeoutMs} ms waiting for ${what()}`))
    }, timeoutMs)
    const cleanup = (): void => {
      clearTimeout(timer)
      events.off(name, check)
    }
    events.on(name, check)
  })
}

const AUDIO_TYPES: Readonly<Record<string, string>> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
}

function commonHeaders(record: RecordedRequest): Record<string, string> {
  return { 'x-request-id': `mock-req-${record.index}` }
}

function parseJsonObject(body: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body.toString('utf8'))
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

function modelOf(body: Record<string, unknown>, fallback: string): string {
  return typeof body.model === 'string' ? body.model : fallback
}

function includeUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options
  return typeof options === 'object' && options !== null && (options as Record<string, unknown>).include_usage === true
}

function chatCompletion(record: RecordedRequest, body: Record<string, unknown>): unknown {
  return {
    id: `chatcmpl-mock-${record.index}`,
    object: 'chat.completion',
    created: MOCK_CREATED,
    model: modelOf(body, 'gpt-4o-mini'),
    system_fingerprint: 'fp_mock',
    choices: [{
      index: 0,
      message: { role: 'assistant', content: MOCK_REPLY, refusal: null },
      logprobs: null,
      finish_reason: 'stop',
    }],
    usage: { ...MOCK_USAGE },
  }
}

function textCompletion(record: RecordedRequest, body: Record<string, unknown>): unknown {
  return {
    id: `cmpl-mock-${record.index}`,
    object: 'text_completion',
    created: MOCK_CREATED,
    model: modelOf(body, 'gpt-3.5-turbo-instruct'),
    choices: [{ text: MOCK_REPLY, index: 0, logprobs: null, finish_reason: 'stop' }],
    usage: { ...MOCK_USAGE },
  }
}

function streamEvents(kind: 'chat' | 'text', record: RecordedRequest, body: Record<string, unknown>, deltas: string[]): string[] {
  const withUsage = includeUsage(body)
  // With include_usage on, OpenAI sends `usage: null` on every chunk but the last.
  const usageField = withUsage ? { usage: null } : {}
  const payloads: unknown[] = []
  if (kind === 'chat') {
    const base = {
      id: `chatcmpl-mock-${record.index}`,
      object: 'chat.completion.chunk',
      created: MOCK_CREATED,
      model: modelOf(body, 'gpt-4o-mini'),
      system_fingerprint: 'fp_mock',
    }
    const chunk = (delta: Record<string, unknown>, finish: string | null): unknown => ({
      ...base,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...usageField,
    })
    payloads.push(chunk({ role: 'assistant', content: '', refusal: null }, null))
    for (const delta of deltas) payloads.push(chunk({ content: delta }, null))
    payloads.push(chunk({}, 'stop'))
    if (withUsage) payloads.push({ ...base, choices: [], usage: { ...MOCK_USAGE } })
  } else {
    const base = {
      id: `cmpl-mock-${record.index}`,
      object: 'text_completion',
      created: MOCK_CREATED,
      model: modelOf(body, 'gpt-3.5-turbo-instruct'),
    }
    const chunk = (text: string, finish: string | null): unknown => ({
      ...base,
      choices: [{ text, index: 0, logprobs: null, finish_reason: finish }],
      ...usageField,
    })
    payloads.push(chunk('', null))
    for (const delta of deltas) payloads.push(chunk(delta, null))
    payloads.push(chunk('', 'stop'))
    if (withUsage) payloads.push({ ...base, choices: [], usage: { ...MOCK_USAGE } })
  }
  return [...payloads.map((payload) => JSON.stringify(payload)), '[DONE]']
}

/** Payloads as `data:` event blocks. */
function dataEvents(payloads: readonly string[]): string[] {
  return payloads.map((payload) => `data: ${payload}`)
}

function embeddings(body: Record<string, unknown>): unknown {
  const input = body.input
  const count = Array.isArray(input)
    ? (input.length > 0 && input.every((item) => typeof item === 'number') ? 1 : input.length)
    : 1
  const dimensions = typeof body.dimensions === 'number' ? body.dimensions : DEFAULT_EMBEDDING_DIMENSIONS
  const base64 = body.encoding_format === 'base64'
  const tokens = count * MOCK_EMBEDDING_TOKENS_PER_INPUT
  return {
    object: 'list',
    data: Array.from({ length: count }, (_, index) => {
      const vector = mockEmbedding(index, dimensions)
      return {
        object: 'embedding',
        index,
        embedding: base64 ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector,
      }
    }),
    model: modelOf(body, 'text-embedding-3-small'),
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  }
}

function images(body: Record<string, unknown>): unknown {
  const n = typeof body.n === 'number' && body.n > 0 ? body.n : 1
  const b64 = body.response_format === 'b64_json'
  const prompt = typeof body.prompt === 'string' ? body.prompt : ''
  return {
    created: MOCK_CREATED,
    data: Array.from({ length: n }, (_, i) =>
      b64 ? { b64_json: TINY_PNG_BASE64, revised_prompt: prompt } : { url: `https://mock-upstream.invalid/images/${i}.png`, revised_prompt: prompt }),
  }
}

function model(id: string): unknown {
  return { id, object: 'model', created: MOCK_CREATED, owned_by: 'mock-upstream' }
}

function multipartBoundary(contentType: string): string | undefined {
  const match = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType)
  return match?.[1] ?? match?.[2]
}

type MultipartPart = { name: string; filename: string | undefined; contentType: string | undefined; data: Buffer }

function parseMultipart(body: Buffer, boundary: string): MultipartPart[] {
  const delimiter = Buffer.from(`--${boundary}`)
  const parts: MultipartPart[] = []
  let position = body.indexOf(delimiter)
  while (position >= 0) {
    const start = position + delimiter.length
    if (body.subarray(start, start + 2).toString() === '--') break
    const next = body.indexOf(delimiter, start)
    if (next < 0) break
    // Each part sits between "\r\n" after the delimiter and "\r\n" before the next one.
    const part = body.subarray(start + 2, next - 2)
    const headerEnd = part.indexOf('\r\n\r\n')
    if (headerEnd >= 0) {
      const headers = part.subarray(0, headerEnd).toString('utf8')
      const disposition = /content-disposition:([^\r\n]*)/i.exec(headers)?.[1] ?? ''
      parts.push({
        name: /\bname="([^"]*)"/i.exec(disposition)?.[1] ?? '',
        filename: /\bfilename="([^"]*)"/i.exec(disposition)?.[1],
        contentType: /content-type:\s*([^\r\n]*)/i.exec(headers)?.[1]?.trim(),
        data: part.subarray(headerEnd + 4),
      })
    }
    position = next
  }
  return parts
}
