import OpenAI, { toFile } from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  MOCK_REPLY,
  MOCK_STREAM_DELTAS,
  MOCK_USAGE,
  mockSpeechBytes,
  startMockUpstream,
  type MockUpstream,
} from '../helpers/mock-upstream.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'

let mock: MockUpstream
let gw: TestGateway
let key: string
let client: OpenAI

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  ;({ key } = await gw.workspaceKey(['completions.write']))
  client = new OpenAI({
    apiKey: 'sk-provider-secret',
    baseURL: `${gw.url}/v1`,
    maxRetries: 0,
    defaultHeaders: { 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
  })
})

afterAll(async () => {
  await gw?.close()
  await mock?.close()
})

describe('data plane through the openai client', () => {
  it('returns a non-streamed chat completion and forwards the provider key, never the gateway key', async () => {
    mock.reset()
    const completion = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] })
    expect(completion.choices[0]?.message.content).toBe(MOCK_REPLY)
    expect(completion.usage?.total_tokens).toBe(MOCK_USAGE.total_tokens)
    const [seen] = await mock.waitForRequests(1)
    expect(seen?.pathname).toBe('/v1/chat/completions')
    expect(seen?.headers.authorization).toBe('Bearer sk-provider-secret')
    expect(Object.keys(seen?.headers ?? {}).filter((name) => name.startsWith('x-gateway-'))).toEqual([])
    expect(JSON.stringify(seen?.headers)).not.toContain(key)
    expect(seen?.json()).toEqual({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] })
  })

  it('streams a chat completion chunk by chunk, with usage, ending normally', async () => {
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
      stream_options: { include_usage: true },
    })
    const deltas: string[] = []
    let usage: OpenAI.CompletionUsage | null | undefined = null
    for await (const chunk of stream) {
      const content = chunk.choices[0]?.delta.content
      if (content) deltas.push(content)
      if (chunk.usage) usage = chunk.usage
    }
    expect(deltas).toEqual([...MOCK_STREAM_DELTAS])
    expect(usage?.total_tokens).toBe(MOCK_USAGE.total_tokens)
  })

  it('delivers the first streamed event before the upstream finished the stream', async () => {
    mock.reset()
    mock.next({ type: 'stream', chunks: 5, intervalMs: 150 })
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [], stream: true }),
    })
    expect(response.headers.get('content-type')).toContain('text/event-stream')
    const reader = (response.body as ReadableStream<Uint8Array>).getReader()
    const first = await reader.read()
    expect(new TextDecoder().decode(first.value)).toContain('chat.completion.chunk')
    // The upstream is still streaming: the gateway did not buffer the reply.
    expect(mock.requests[0]?.completed).toBe(false)
    await reader.cancel()
  })

  it('answers completions, embeddings, images and models', async () => {
    const completion = await client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'Say hi' })
    expect(completion.object).toBe('text_completion')
    const embeddings = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['a', 'b'] })
    expect(embeddings.data).toHaveLength(2)
    const images = await client.images.generate({ model: 'dall-e-3', prompt: 'a cat' })
    expect(images.data?.length).toBeGreaterThan(0)
    const models = await client.models.list()
    expect(models.data.map((model) => model.id)).toContain('gpt-4o-mini')
  })

  it('returns speech audio bytes unchanged', async () => {
    const speech = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hello' })
    expect(speech.headers.get('content-type')).toBe('audio/mpeg')
    expect(Buffer.from(await speech.arrayBuffer()).equals(mockSpeechBytes())).toBe(true)
  })

  it('forwards a multipart transcription upload byte for byte', async () => {
    mock.reset()
    const audio = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7) % 256))
    const transcription = await client.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(audio, 'clip.mp3', { type: 'audio/mpeg' }) })
    expect(typeof transcription.text).toBe('string')
    const [seen] = await mock.waitForRequests(1)
    expect(seen?.pathname).toBe('/v1/audio/transcriptions')
    expect(seen?.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/)
    expect(seen?.body.includes(audio)).toBe(true)
  })

  it('sets x-gateway-provider and echoes or generates x-gateway-trace-id', async () => {
    const echoed = await client.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [] }, { headers: { 'x-gateway-trace-id': 'trace-abc-123' } })
      .withResponse()
    expect(echoed.response.headers.get('x-gateway-trace-id')).toBe('trace-abc-123')
    expect(echoed.response.headers.get('x-gateway-provider')).toBe('openai')
    const generated = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [] }).withResponse()
    expect(generated.response.headers.get('x-gateway-trace-id')).toMatch(/^[0-9a-f-]{36}$/)
  })

  it('raises provider errors through the openai client with the provider status', async () => {
    mock.next({ type: 'json', status: 400, body: { error: { message: 'model not found', type: 'invalid_request_error', param: 'model', code: 'model_not_found' } } })
    const failure = await client.chat.completions.create({ model: 'nope', messages: [] }).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(OpenAI.BadRequestError)
    expect((failure as InstanceType<typeof OpenAI.BadRequestError>).message).toContain('model not found')
  })

  it('refuses a key once it expires, also while it is cached', async () => {
    const workspace = await gw.admin('POST', '/v1/admin/workspaces', { name: 'expiring' })
    const expiresAt = new Date(Date.now() + 1500).toISOString()
    const created = await gw.admin('POST', '/v1/api-keys/workspace/service', { name: 'short', workspace_id: workspace.body.id, scopes: ['completions.write'], expires_at: expiresAt })
    expect(created.status).toBe(200)
    const call = () =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-gateway-api-key': created.body.key, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }),
      })
    expect((await call()).status).toBe(200)
    await new Promise((resolve) => setTimeout(resolve, Date.parse(expiresAt) - Date.now() + 50))
    const expired = await call()
    expect(expired.status).toBe(401)
    expect(((await expired.json()) as { error: { code: string } }).error.code).toBe('GW_AUTH_KEY_EXPIRED')
  })

  it('authenticates with Authorization: Bearer when x-gateway-api-key is absent, and then sends no Authorization upstream', async () => {
    mock.reset()
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-gateway-provider': 'openai', 'x-gateway-custom-host': mock.url },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }),
    })
    expect(response.status).toBe(200)
    const [seen] = await mock.waitForRequests(1)
    expect(seen?.headers.authorization).toBeUndefined()
  })
})
