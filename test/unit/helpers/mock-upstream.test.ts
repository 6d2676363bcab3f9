import { createHash } from 'node:crypto'
import OpenAI, { toFile } from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import {
  MOCK_EMBEDDING_TOKENS_PER_INPUT,
  MOCK_MODELS,
  MOCK_REPLY,
  MOCK_STREAM_DELTAS,
  MOCK_USAGE,
  mockEmbedding,
  mockSpeechBytes,
  mockStreamDeltas,
  openAiErrorBody,
  startMockUpstream,
  type MockUpstream,
} from '../../helpers/mock-upstream.js'

type Json = Record<string, any>

let mock: MockUpstream

beforeAll(async () => {
  mock = await startMockUpstream()
})

afterEach(() => {
  mock.reset()
})

afterAll(async () => {
  await mock.close()
})

function post(path: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(`${mock.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-upstream' },
    body: JSON.stringify(body),
    ...init,
  })
}

/** Reads SSE `data:` payloads until the stream ends (or fails, which rejects). */
async function readEvents(response: Response, onEvent?: (data: string) => void): Promise<string[]> {
  const events: string[] = []
  const decoder = new TextDecoder()
  let buffer = ''
  const reader = response.body!.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    buffer += decoder.decode(value, { stream: true })
    let end: number
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      const data = event.replace(/^data: /, '')
      events.push(data)
      onEvent?.(data)
    }
  }
  return events
}

describe('mock upstream defaults', () => {
  it('answers chat completions with usage and records the request', async () => {
    const body = { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }
    const response = await post('/chat/completions?api-version=1', body, {
      headers: { 'content-type': 'application/json', 'X-Custom': 'yes' },
    })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('application/json')
    expect(response.headers.get('x-request-id')).toBe('mock-req-0')
    const json = (await response.json()) as Json
    expect(json).toMatchObject({
      object: 'chat.completion',
      model: 'gpt-4o',
      choices: [{ index: 0, message: { role: 'assistant', content: MOCK_REPLY }, finish_reason: 'stop' }],
      usage: MOCK_USAGE,
    })

    expect(mock.requests).toHaveLength(1)
    const [request] = mock.requests
    expect(request).toMatchObject({
      index: 0,
      method: 'POST',
      path: '/v1/chat/completions?api-version=1',
      pathname: '/v1/chat/completions',
      completed: true,
      closedByClient: false,
    })
    expect(request?.headers['x-custom']).toBe('yes')
    expect(request?.rawHeaders).toContain('X-Custom')
    expect(Buffer.isBuffer(request?.body)).toBe(true)
    expect(request?.body.equals(Buffer.from(JSON.stringify(body)))).toBe(true)
    expect(request?.json()).toEqual(body)
  })

  it('streams chat completion chunks with a usage chunk when include_usage is set', async () => {
    const response = await post('/chat/completions', {
      model: 'gpt-4o-mini',
      messages: [],
      stream: true,
      stream_options: { include_usage: true },
    })
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const events = await readEvents(response)
    expect(events.at(-1)).toBe('[DONE]')
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event) as Json)
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true)
    expect(chunks[0]?.choices[0].delta.role).toBe('assistant')
    const content = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')
    expect(content).toBe(MOCK_REPLY)
    expect(chunks.at(-2)?.choices[0].finish_reason).toBe('stop')
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: MOCK_USAGE })
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true)
    expect(mock.requests[0]?.eventsSent).toBe(events.length)
  })

  it('streams without a usage chunk when include_usage is not set', async () => {
    const events = await readEvents(await post('/chat/completions', { model: 'm', messages: [], stream: true }))
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event) as Json)
    expect(chunks).toHaveLength(MOCK_STREAM_DELTAS.length + 2)
    expect(chunks.some((chunk) => 'usage' in chunk)).toBe(false)
  })

  it('answers legacy completions, streamed or not', async () => {
    const json = (await (await post('/completions', { model: 'gpt-3.5-turbo-instruct', prompt: 'x' })).json()) as Json
    expect(json).toMatchObject({ object: 'text_completion', choices: [{ text: MOCK_REPLY }], usage: MOCK_USAGE })

    const events = await readEvents(await post('/completions', { prompt: 'x', stream: true, stream_options: { include_usage: true } }))
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event) as Json)
    expect(chunks.map((chunk) => chunk.choices[0]?.text ?? '').join('')).toBe(MOCK_REPLY)
    expect(chunks.at(-1)?.usage).toEqual(MOCK_USAGE)
  })

  it('answers embeddings as floats or base64 float32', async () => {
    const floats = (await (await post('/embeddings', { model: 'text-embedding-3-small', input: ['a', 'b'] })).json()) as Json
    expect(floats.data).toHaveLength(2)
    expect(floats.data[1]).toEqual({ object: 'embedding', index: 1, embedding: mockEmbedding(1) })
    expect(floats.usage).toEqual({ prompt_tokens: 2 * MOCK_EMBEDDING_TOKENS_PER_INPUT, total_tokens: 2 * MOCK_EMBEDDING_TOKENS_PER_INPUT })

    const encoded = (await (await post('/embeddings', { input: 'a', encoding_format: 'base64', dimensions: 4 })).json()) as Json
    const bytes = Buffer.from(encoded.data[0].embedding as string, 'base64')
    expect(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4))).toEqual(mockEmbedding(0, 4))
  })

  it('answers speech with deterministic audio bytes', async () => {
    const response = await post('/audio/speech', { model: 'tts-1', input: 'hello', voice: 'alloy' })
    expect(response.headers.get('content-type')).toBe('audio/mpeg')
    const bytes = Buffer.from(await response.arrayBuffer())
    expect(bytes.equals(mockSpeechBytes())).toBe(true)
  })

  it('describes the multipart body it got for transcriptions and translations', async () => {
    const audio = Buffer.from('not really audio, but bytes')
    for (const endpoint of ['transcriptions', 'translations']) {
      const form = new FormData()
      form.append('model', 'whisper-1')
      form.append('file', new Blob([audio], { type: 'audio/wav' }), 'clip.wav')
      const response = await fetch(`${mock.url}/audio/${endpoint}`, { method: 'POST', body: form })
      const json = (await response.json()) as Json
      const request = mock.requests.at(-1)!
      const boundary = /boundary=(.+)$/.exec(String(request.headers['content-type']))?.[1]
      expect(json.bytes).toBe(request.body.length)
      expect(json.boundary).toBe(boundary)
      expect(json.text).toContain(`${request.body.length} bytes`)
      expect(json.fields).toEqual({ model: 'whisper-1' })
      expect(json.files).toEqual([{
        field: 'file',
        filename: 'clip.wav',
        contentType: 'audio/wav',
        bytes: audio.length,
        sha256: createHash('sha256').update(audio).digest('hex'),
      }])
    }
  })

  it('answers transcriptions as plain text when asked', async () => {
    const form = new FormData()
    form.append('response_format', 'text')
    form.append('file', new Blob([Buffer.from('abc')]), 'a.mp3')
    const response = await fetch(`${mock.url}/audio/transcriptions`, { method: 'POST', body: form })
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/)
    expect(await response.text()).toMatch(/^mock transcribe: \d+ bytes, boundary /)
  })

  it('answers image generations and the model list', async () => {
    const generated = (await (await post('/images/generations', { prompt: 'a cat', n: 2, response_format: 'b64_json' })).json()) as Json
    expect(generated.data).toHaveLength(2)
    expect(Buffer.from(generated.data[0].b64_json as string, 'base64').subarray(1, 4).toString()).toBe('PNG')

    const models = (await (await fetch(`${mock.url}/models`)).json()) as Json
    expect(models.object).toBe('list')
    expect(models.data.map((model: Json) => model.id)).toEqual([...MOCK_MODELS])
  })

  it('echoes anything else', async () => {
    const response = await fetch(`${mock.origin}/v1/files/abc?purpose=batch&x=1`, {
      method: 'PATCH',
      headers: { 'x-pass': 'through' },
      body: 'raw body',
    })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({
      method: 'PATCH',
      path: '/v1/files/abc',
      query: { purpose: 'batch', x: '1' },
      body: 'raw body',
      headers: { 'x-pass': 'through' },
    })
  })

  it('rejects a chat request whose body is not JSON with an OpenAI error', async () => {
    const response = await fetch(`${mock.url}/chat/completions`, { method: 'POST', body: '{nope' })
    expect(response.status).toBe(400)
    expect(((await response.json()) as Json).error.type).toBe('invalid_request_error')
  })
})

describe('mock upstream with the official openai client', () => {
  const client = (): OpenAI => new OpenAI({ apiKey: 'sk-test', baseURL: mock.url, maxRetries: 0 })

  it('parses chat, streamed chat with usage, embeddings and models', async () => {
    const completion = await client().chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    expect(completion.choices[0]?.message.content).toBe(MOCK_REPLY)
    expect(completion.usage?.total_tokens).toBe(MOCK_USAGE.total_tokens)

    const stream = await client().chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [],
      stream: true,
      stream_options: { include_usage: true },
    })
    let text = ''
    let usage: unknown
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ''
      if (chunk.usage) usage = chunk.usage
    }
    expect(text).toBe(MOCK_REPLY)
    expect(usage).toEqual(MOCK_USAGE)

    // The client asks for base64 by default and decodes it.
    const embedding = await client().embeddings.create({ model: 'text-embedding-3-small', input: 'x' })
    expect(embedding.data[0]?.embedding).toEqual(mockEmbedding(0))

    const models = await client().models.list()
    expect(models.data.map((model) => model.id)).toEqual([...MOCK_MODELS])
  })

  it('parses speech and transcriptions', async () => {
    const speech = await client().audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'hello' })
    expect(Buffer.from(await speech.arrayBuffer()).equals(mockSpeechBytes())).toBe(true)

    const transcription = await client().audio.transcriptions.create({
      model: 'whisper-1',
      file: await toFile(Buffer.from('wave'), 'clip.wav', { type: 'audio/wav' }),
    })
    expect(transcription.text).toMatch(/^mock transcribe: \d+ bytes, boundary /)
  })

  it('surfaces a mocked 429 as a RateLimitError', async () => {
    mock.next({ type: 'json', status: 429, body: openAiErrorBody('slow down', 'requests', 'rate_limit_exceeded') })
    await expect(client().chat.completions.create({ model: 'm', messages: [] })).rejects.toBeInstanceOf(OpenAI.RateLimitError)
  })
})

describe('mock upstream overrides', () => {
  it('answers the next matching request with a given status and body, once', async () => {
    mock.next({
      type: 'json',
      status: 429,
      body: openAiErrorBody('Rate limit reached', 'requests', 'rate_limit_exceeded'),
      headers: { 'retry-after': '2' },
    }, { path: '/v1/chat/completions' })

    const other = await post('/embeddings', { input: 'a' })
    expect(other.status).toBe(200)

    const limited = await post('/chat/completions', { messages: [] })
    expect(limited.status).toBe(429)
    expect(limited.headers.get('retry-after')).toBe('2')
    expect(await limited.json()).toEqual({
      error: { message: 'Rate limit reached', type: 'requests', param: null, code: 'rate_limit_exceeded' },
    })

    expect((await post('/chat/completions', { messages: [] })).status).toBe(200)
  })

  it('answers with a non-JSON body', async () => {
    mock.next({ type: 'raw', status: 500, body: '<html>upstream exploded</html>', headers: { 'content-type': 'text/html' } })
    const response = await post('/chat/completions', {})
    expect(response.status).toBe(500)
    expect(response.headers.get('content-type')).toBe('text/html')
    expect(await response.text()).toBe('<html>upstream exploded</html>')
  })

  it('delays the headers', async () => {
    mock.next({ type: 'default', delayMs: 300 })
    await expect(post('/chat/completions', {}, { signal: AbortSignal.timeout(50) })).rejects.toThrow()
    const [request] = await mock.waitForRequests(1)
    await mock.waitForClientClose(request!)
    expect(request?.completed).toBe(false)

    mock.next({ type: 'default', delayMs: 100 })
    expect((await post('/chat/completions', {})).status).toBe(200)
  })

  it('hangs until the client gives up, and reports that the client closed', async () => {
    mock.next({ type: 'hang' })
    const closed: number[] = []
    const unsubscribe = mock.onRequestClosed((request) => closed.push(request.index))
    const controller = new AbortController()
    const pending = post('/chat/completions', { messages: [] }, { signal: controller.signal })
    const [request] = await mock.waitForRequests(1)
    expect(request?.closedByClient).toBe(false)
    controller.abort()
    await expect(pending).rejects.toThrow()
    await mock.waitForClientClose(request!)
    expect(request?.closedByClient).toBe(true)
    expect(closed).toEqual([0])
    unsubscribe()
  })

  it('resets the connection before answering', async () => {
    mock.next({ type: 'reset' })
    const error = await post('/chat/completions', {}).then(() => undefined, (caught: unknown) => caught as Error & { cause?: { code?: string } })
    expect(error).toBeInstanceOf(TypeError)
    expect(error?.cause?.code).toBe('ECONNRESET')
    expect(mock.requests[0]?.closedByClient).toBe(false)
  })

  it('streams K events and then drops the connection', async () => {
    mock.next({ type: 'stream', destroyAfter: 3 })
    const response = await post('/chat/completions', { stream: true })
    expect(response.status).toBe(200)
    const received: string[] = []
    await expect(readEvents(response, (data) => received.push(data))).rejects.toThrow()
    expect(received).toHaveLength(3)
    expect(received.includes('[DONE]')).toBe(false)
    expect(mock.requests[0]).toMatchObject({ eventsSent: 3, completed: false, closedByClient: false })
  })

  it('streams slowly and notices when the client disconnects mid-stream', async () => {
    mock.next({ type: 'stream', chunks: 50, intervalMs: 20 })
    const controller = new AbortController()
    const response = await post('/chat/completions', { stream: true }, { signal: controller.signal })
    const received: string[] = []
    await expect(readEvents(response, (data) => {
      received.push(data)
      if (received.length === 3) controller.abort()
    })).rejects.toThrow()
    const request = mock.requests[0]!
    await mock.waitForClientClose(request)
    expect(request.completed).toBe(false)
    const sentWhenClosed = request.eventsSent
    expect(sentWhenClosed).toBeLessThan(mockStreamDeltas(50).length + 3)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(request.eventsSent).toBe(sentWhenClosed)
  })

  it('lets a test own a path until reset', async () => {
    mock.on('/v1/models', (request, res) => {
      res.writeHead(203, { 'content-type': 'text/plain' })
      res.end(`custom ${request.method}`)
    })
    for (let i = 0; i < 2; i++) {
      const response = await fetch(`${mock.url}/models`)
      expect(response.status).toBe(203)
      expect(await response.text()).toBe('custom GET')
    }
    mock.reset()
    expect(mock.requests).toHaveLength(0)
    expect((await fetch(`${mock.url}/models`)).status).toBe(200)
  })

  it('one-shot overrides win over path overrides', async () => {
    mock.on('/v1/embeddings', { type: 'json', status: 418, body: { teapot: true } })
    mock.next({ type: 'default' }, { path: '/v1/embeddings', method: 'post' })
    expect((await post('/embeddings', { input: 'a' })).status).toBe(200)
    expect((await post('/embeddings', { input: 'a' })).status).toBe(418)
  })

  it('closes promptly with a request still hanging', async () => {
    const own = await startMockUpstream()
    own.next({ type: 'hang' })
    const pending = fetch(`${own.url}/chat/completions`, { method: 'POST', body: '{}' }).catch((error: unknown) => error)
    await own.waitForRequests(1)
    await own.close()
    expect(await pending).toBeInstanceOf(Error)
    expect(own.requests[0]?.closedByClient).toBe(false)
  })

  it('times out waiting for requests that never come', async () => {
    await expect(mock.waitForRequests(1, 50)).rejects.toThrow(/timed out after 50 ms waiting for 1 request\(s\), got 0/)
  })
})
