/**
 * Prompt templates on the data plane, end to end (issue 14, items 2-5): a prompt made through the
 * Admin API runs by id with the official `openai` client, every version suffix resolves, saved
 * hyperparameters reach the provider and the body's overrides win, streams end with [DONE],
 * /render answers the request without a provider call, unknown ids are 404, missing variables and
 * partials 400, another workspace's prompt 404, the request log records the prompt, and an edit
 * made through one instance is rendered by a second one sharing the store and Redis.
 */
import { randomUUID } from 'node:crypto'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, inject, it, vi, type MockInstance } from 'vitest'
import { DuckDbLogSink } from '../../adapters/embedded/duckdb-log-sink.js'
import { RedisChangeNotifier } from '../../adapters/redis/redis-change-notifier.js'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import { ClientAbort, RequestContext, type Principal } from '../../core/context.js'
import type { LogRecord } from '../../core/logs.js'
import type { Reply } from '../../core/plugin.js'
import { AdminStore } from '../../core/ports.js'
import { PROMPT_ROUTES } from '../../core/routes.js'
import type { Logger } from '../../core/service.js'
import { promptRenderConfigSchema } from '../../plugins/prompt-render/config.js'
import { PromptRenderPlugin } from '../../plugins/prompt-render/plugin.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { MOCK_REPLY, MOCK_STREAM_DELTAS, startMockUpstream, type MockUpstream, type RecordedRequest } from '../helpers/mock-upstream.js'

type Json = Record<string, any>

const VK_SECRET = 'sk-prompt-vk-0123456789abcdef'
const PROMPT_SCOPES = ['completions.write', 'prompts.render']

function chatTemplate(version: string): string {
  return JSON.stringify([
    { role: 'system', content: `You are {{persona}} (${version}).{{#tone}} Be {{tone}}.{{/tone}}` },
    { role: 'user', content: '{{question}}' },
  ])
}

const VARIABLES = { persona: 'a travel agent', tone: 'brief', question: 'Where to in May?' }

function expectedMessages(version: string, variables: Record<string, string> = VARIABLES): unknown[] {
  return [
    { role: 'system', content: `You are ${variables.persona} (${version}).${variables.tone ? ` Be ${variables.tone}.` : ''}` },
    { role: 'user', content: variables.question },
  ]
}

let mock: MockUpstream
let gw: TestGateway
let key: string
let workspace: string
let otherKey: string
let prompt: Json
let textPrompt: Json
let sink: DuckDbLogSink
let enqueue: MockInstance<(record: LogRecord) => void>

async function ok(method: string, path: string, body?: unknown): Promise<Json> {
  const answer = await gw.admin(method, path, body)
  expect(answer.status, `${method} ${path}: ${JSON.stringify(answer.body)}`).toBe(200)
  return answer.body
}

function client(apiKey: string = key, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({ apiKey: 'sk-client-side-not-forwarded', baseURL: `${gw.url}/v1`, maxRetries: 0, defaultHeaders: { 'x-gateway-api-key': apiKey, ...headers } })
}

/** `POST /v1/prompts/{id}/completions` through the openai client (its generic `post`, as for any custom route). */
function complete(promptId: string, body: Json, apiKey?: string, headers?: Record<string, string>): Promise<Json> {
  return client(apiKey, headers).post(`/prompts/${encodeURIComponent(promptId)}/completions`, { body })
}

async function completeError(promptId: string, body: Json, apiKey?: string, headers?: Record<string, string>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const failure = await complete(promptId, body, apiKey, headers).then(
    () => null,
    (error: unknown) => error,
  )
  expect(failure).toBeInstanceOf(OpenAI.APIError)
  return failure as InstanceType<typeof OpenAI.APIError>
}

function raw(path: string, body: unknown, apiKey: string = key, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gateway-api-key': apiKey, ...headers }, body: JSON.stringify(body) })
}

/** The provider request made by the call `call`: exactly one, at the returned index. */
async function upstreamOf(call: () => Promise<unknown>): Promise<RecordedRequest> {
  const before = mock.requests.length
  await call()
  const [request] = (await mock.waitForRequests(before + 1)).slice(before)
  expect(mock.requests.length).toBe(before + 1)
  return request as RecordedRequest
}

beforeAll(async () => {
  mock = await startMockUpstream()
  gw = await startTestGateway()
  ;({ key, workspaceId: workspace } = await gw.workspaceKey(PROMPT_SCOPES))
  ;({ key: otherKey } = await gw.workspaceKey(PROMPT_SCOPES))
  const virtualKey = await ok('POST', '/v1/virtual-keys', { workspace_id: workspace, name: 'prompts', provider: 'openai', key: VK_SECRET, custom_host: mock.url })
  // Version 1 (published on create), then version 2; v2 is published and v1 published again, so v2 is the latest only.
  prompt = await ok('POST', '/v1/prompts', {
    workspace_id: workspace,
    name: 'Travel',
    string: chatTemplate('v1'),
    parameters: { temperature: 0.1, max_tokens: 50 },
    virtual_key: virtualKey.slug,
    model: 'gpt-4o-mini',
  })
  await ok('PUT', `/v1/prompts/${prompt.id}`, { patch: true, string: chatTemplate('v2'), parameters: { temperature: 0.2, top_p: 0.5 }, model: 'gpt-4o' })
  await ok('PUT', `/v1/prompts/${prompt.id}/makeDefault`, { version: 2 })
  await ok('PUT', `/v1/prompts/${prompt.id}/makeDefault`, { version: 1 })
  const production = ((await ok('GET', '/v1/labels?workspace_id=' + workspace)).data as Json[]).find((label) => label.name === 'production') as Json
  const versions = (await ok('GET', `/v1/prompts/${prompt.id}/versions`)) as unknown as Json[]
  const v1 = versions.find((version) => version.prompt_version === 1) as Json
  await ok('PUT', `/v1/prompts/${prompt.id}/versions/${v1.id}`, { label_id: production.id })
  textPrompt = await ok('POST', '/v1/prompts', {
    workspace_id: workspace,
    name: 'Haiku',
    string: 'Write a haiku about {{topic}}.',
    parameters: { max_tokens: 30 },
    virtual_key: virtualKey.slug,
    model: 'gpt-3.5-turbo-instruct',
  })
  const logSink = gw.wiring.logSink
  if (!(logSink instanceof DuckDbLogSink)) throw new Error('expected the embedded DuckDB log sink')
  sink = logSink
  enqueue = vi.spyOn(sink, 'enqueue')
})

afterAll(async () => {
  enqueue?.mockRestore()
  await gw?.close()
  await mock?.close()
})

describe('version suffixes', () => {
  const cases: ReadonlyArray<readonly [string, string, Json]> = [
    ['', 'v1', { model: 'gpt-4o-mini', temperature: 0.1, max_tokens: 50 }],
    ['@latest', 'v2', { model: 'gpt-4o', temperature: 0.2, top_p: 0.5 }],
    ['@1', 'v1', { model: 'gpt-4o-mini', temperature: 0.1, max_tokens: 50 }],
    ['@2', 'v2', { model: 'gpt-4o', temperature: 0.2, top_p: 0.5 }],
    ['@production', 'v1', { model: 'gpt-4o-mini', temperature: 0.1, max_tokens: 50 }],
  ]
  for (const [suffix, version, parameters] of cases) {
    it(`"${suffix || '(none)'}" reaches the provider as ${version} with its saved parameters, through the virtual key`, async () => {
      let completion: Json = {}
      const upstream = await upstreamOf(async () => {
        completion = await complete(`${prompt.slug}${suffix}`, { variables: VARIABLES })
      })
      expect(completion.object).toBe('chat.completion')
      expect(completion.choices[0].message.content).toBe(MOCK_REPLY)
      expect(upstream.pathname).toBe('/v1/chat/completions')
      expect(upstream.headers.authorization).toBe(`Bearer ${VK_SECRET}`)
      expect(upstream.json()).toEqual({ ...parameters, messages: expectedMessages(version) })
    })
  }

  it('finds the prompt by its id as well as its slug', async () => {
    const upstream = await upstreamOf(() => complete(`${prompt.id}@2`, { variables: VARIABLES }))
    expect((upstream.json() as Json).messages).toEqual(expectedMessages('v2'))
  })
})

describe('completions', () => {
  it('lets the body override saved hyperparameters; variables never reach the provider', async () => {
    const upstream = await upstreamOf(() =>
      complete(prompt.slug, { variables: { ...VARIABLES, tone: '' }, temperature: 0.9, max_tokens: 7, stop: ['\n'], response_format: { type: 'json_object' }, stream: false }),
    )
    expect(upstream.json()).toEqual({
      model: 'gpt-4o-mini',
      temperature: 0.9,
      max_tokens: 7,
      stop: ['\n'],
      response_format: { type: 'json_object' },
      messages: expectedMessages('v1', { ...VARIABLES, tone: '' }),
    })
  })

  it('sends a completion template to /completions and answers a text_completion', async () => {
    let completion: Json = {}
    const upstream = await upstreamOf(async () => {
      completion = await complete(textPrompt.slug, { variables: { topic: 'rain' } })
    })
    expect(upstream.pathname).toBe('/v1/completions')
    expect(upstream.json()).toEqual({ model: 'gpt-3.5-turbo-instruct', max_tokens: 30, prompt: 'Write a haiku about rain.' })
    expect(completion.object).toBe('text_completion')
  })

  it('streams through the openai client when stream is true, ending with [DONE]', async () => {
    const stream = await client().post(`/prompts/${prompt.slug}@latest/completions`, { body: { variables: VARIABLES, stream: true }, stream: true }) as unknown as AsyncIterable<Json>
    const deltas: string[] = []
    for await (const chunk of stream) deltas.push(chunk.choices[0]?.delta?.content ?? '')
    expect(deltas.join('')).toBe(MOCK_STREAM_DELTAS.join(''))
    const upstream = mock.requests[mock.requests.length - 1] as RecordedRequest
    expect(upstream.json()).toMatchObject({ stream: true, messages: expectedMessages('v2') })
  })

  it('streams as raw SSE that ends with data: [DONE]', async () => {
    const response = await raw(`/v1/prompts/${prompt.slug}/completions`, { variables: VARIABLES, stream: true })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toContain('text/event-stream')
    const text = await response.text()
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
    expect(text).toContain('chat.completion.chunk')
  })
})

describe('render', () => {
  it('answers {success, data: <the complete request>} and calls no provider', async () => {
    const before = mock.requests.length
    const response = await raw(`/v1/prompts/${prompt.slug}@latest/render`, { variables: VARIABLES, max_tokens: 9 })
    const body = (await response.json()) as Json
    expect(response.status, JSON.stringify(body)).toBe(200)
    expect(body).toEqual({ success: true, data: { model: 'gpt-4o', temperature: 0.2, top_p: 0.5, max_tokens: 9, messages: expectedMessages('v2') } })
    expect(mock.requests.length).toBe(before)
  })

  it('needs prompts.render, and completions need completions.write', async () => {
    const { key: completionsOnly } = await gw.workspaceKey(['completions.write'])
    const { key: renderOnly } = await gw.workspaceKey(['prompts.render'])
    const refused = await raw(`/v1/prompts/${prompt.slug}/render`, { variables: VARIABLES }, completionsOnly)
    expect(refused.status).toBe(403)
    expect(((await refused.json()) as Json).error.code).toBe('GW_SCOPE_MISSING')
    expect((await completeError(prompt.slug, { variables: VARIABLES }, renderOnly)).status).toBe(403)
  })
})

describe('refusals', () => {
  it('answers 404 for an unknown prompt, version or label, and for another workspace’s prompt', async () => {
    for (const [id, apiKey] of [
      ['pp-no-such-prompt', key],
      [`${prompt.slug}@9`, key],
      [`${prompt.slug}@no-such-label`, key],
      [`${prompt.slug}@staging`, key],
      [prompt.slug, otherKey],
      [`${prompt.id}@latest`, otherKey],
    ] as const) {
      const error = await completeError(id, { variables: VARIABLES }, apiKey)
      expect(error.status, id).toBe(404)
      expect((error.error as Json).code).toBe('GW_PROMPT_NOT_FOUND')
      expect((error.error as Json).type).toBe('not_found_error')
    }
    const render = await raw(`/v1/prompts/${prompt.slug}/render`, { variables: VARIABLES }, otherKey)
    expect(render.status).toBe(404)
  })

  it('answers 400 naming a missing variable, and a value that is not a string', async () => {
    const missing = await completeError(prompt.slug, { variables: { persona: 'x', tone: 'y' } })
    expect(missing.status).toBe(400)
    expect((missing.error as Json).code).toBe('GW_PROMPT_VARIABLE_MISSING')
    expect(missing.message).toContain('"question"')
    const notString = await completeError(prompt.slug, { variables: { ...VARIABLES, question: { nested: true } } })
    expect(notString.status).toBe(400)
    expect((notString.error as Json).param).toBe('variables.question')
  })

  it('answers 400 naming a missing partial, and renders the workspace’s partials', async () => {
    await ok('POST', '/v1/prompts/partials', { workspace_id: workspace, name: 'signature', string: 'Signed, {{persona}}' })
    const withPartials = await ok('POST', '/v1/prompts', {
      workspace_id: workspace,
      name: 'Partials',
      string: JSON.stringify([{ role: 'user', content: 'Hi. {{>signature}}' }]),
      parameters: {},
      virtual_key: (await ok('GET', `/v1/prompts/${prompt.id}`)).virtual_key,
      model: 'gpt-4o-mini',
    })
    const rendered = (await (await raw(`/v1/prompts/${withPartials.slug}/render`, { variables: { persona: 'Ada' } })).json()) as Json
    expect(rendered.data.messages).toEqual([{ role: 'user', content: 'Hi. Signed, Ada' }])
    await ok('PUT', `/v1/prompts/${withPartials.id}`, { patch: true, string: JSON.stringify([{ role: 'user', content: 'Hi. {{>no-such-partial}}' }]) })
    const error = await completeError(`${withPartials.slug}@latest`, { variables: { persona: 'Ada' } })
    expect(error.status).toBe(400)
    expect((error.error as Json).code).toBe('GW_PROMPT_PARTIAL_NOT_FOUND')
    expect(error.message).toContain('"no-such-partial"')
  })

  for (const header of ['x-gateway-provider', 'x-gateway-virtual-key', 'x-gateway-custom-host', 'x-gateway-config']) {
    it(`answers 400 naming ${header} sent with a prompt, and calls no provider`, async () => {
      const before = mock.requests.length
      const error = await completeError(prompt.slug, { variables: VARIABLES }, key, { [header]: header === 'x-gateway-custom-host' ? mock.url : 'openai' })
      expect(error.status).toBe(400)
      expect((error.error as Json).param).toBe(header)
      expect(mock.requests.length).toBe(before)
    })
  }
})

describe('limits', () => {
  it("charges the template's virtual key's rate limit on completions, and nothing on /render", async () => {
    const limited = await ok('POST', '/v1/virtual-keys', {
      workspace_id: workspace,
      name: 'limited',
      provider: 'openai',
      key: VK_SECRET,
      custom_host: mock.url,
      rate_limits: [{ type: 'requests', unit: 'rpm', value: 1 }],
    })
    const onLimited = await ok('POST', '/v1/prompts', { workspace_id: workspace, name: 'Limited', string: chatTemplate('v1'), parameters: {}, virtual_key: limited.slug, model: 'gpt-4o-mini' })
    for (let i = 0; i < 3; i++) expect((await raw(`/v1/prompts/${onLimited.slug}/render`, { variables: VARIABLES })).status).toBe(200)
    expect((await complete(onLimited.slug, { variables: VARIABLES })).object).toBe('chat.completion')
    const refused = await completeError(onLimited.slug, { variables: VARIABLES })
    expect(refused.status).toBe(429)
    expect((refused.error as Json).code).toBe('GW_RATE_LIMITED')
    expect(refused.message).toContain('virtual key')
  })
})

describe('request log', () => {
  it('records the prompt slug and version, filterable by prompt_slug in analytics', async () => {
    const traceId = `prompt-log-${randomUUID()}`
    await upstreamOf(() => complete(`${prompt.slug}@2`, { variables: VARIABLES }, key, { 'x-gateway-trace-id': traceId }))
    const record = await vi.waitFor(
      () => {
        const found = enqueue.mock.calls.map(([logged]) => logged).find((logged) => logged.traceId === traceId)
        if (found === undefined) throw new Error('not logged yet')
        return found
      },
      { timeout: 10_000, interval: 20 },
    )
    expect(record).toMatchObject({ promptSlug: prompt.slug, promptVersion: 2, route: 'prompts.completions', model: 'gpt-4o', status: 200 })
    expect(record.totalTokens).toBeGreaterThan(0)
    await sink.flush()
    expect(await sink.findById(record.id)).toMatchObject({ promptSlug: prompt.slug, promptVersion: 2 })
    const now = Date.now()
    const range = `time_of_generation_min=${encodeURIComponent(new Date(now - 3_600_000).toISOString())}&time_of_generation_max=${encodeURIComponent(new Date(now + 3_600_000).toISOString())}`
    const graph = await gw.admin('GET', `/v1/analytics/graphs/requests?${range}&prompt_slug=${prompt.slug}&trace_id=${traceId}`)
    expect(graph.status, JSON.stringify(graph.body)).toBe(200)
    expect(graph.body.summary.total).toBe(1)
    const none = await gw.admin('GET', `/v1/analytics/graphs/requests?${range}&prompt_slug=${textPrompt.slug}&trace_id=${traceId}`)
    expect(none.body.summary.total).toBe(0)
  })
})

describe('switched off', () => {
  it('answers 404 naming the plugin when prompt-render is disabled', async () => {
    const off = await startTestGateway({ overlay: { plugins: { 'prompt-render': { enabled: false } } } })
    try {
      const made = await off.workspaceKey(PROMPT_SCOPES)
      for (const path of ['/v1/prompts/pp-x/completions', '/v1/prompts/pp-x/render']) {
        const response = await fetch(`${off.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gateway-api-key': made.key }, body: '{"variables":{}}' })
        const body = (await response.json()) as Json
        expect(response.status, path).toBe(404)
        expect(body.error.code).toBe('GW_REQ_ROUTE_NOT_FOUND')
        expect(body.error.message).toContain('prompt-render')
      }
    } finally {
      await off.close()
    }
  })
})

describe('a second instance sharing the store and Redis', () => {
  const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} }
  let shared: TestGateway
  const notifiers: RedisChangeNotifier[] = []
  const plugins: PromptRenderPlugin[] = []

  afterAll(async () => {
    for (const plugin of plugins) await plugin.close()
    for (const notifier of notifiers) await notifier.close()
    await shared?.close()
  })

  /**
   * Instance B: the prompt-render plugin of a second gateway, on the first one's admin store (one
   * DuckDB file takes one process, so the two instances share the store object) and its own Redis
   * connection. Its compiled versions never expire on their own (1 h): only a change notification
   * makes it read the store again.
   */
  async function secondInstance(channelPrefix?: string): Promise<{ plugin: PromptRenderPlugin; notifier: RedisChangeNotifier }> {
    const notifier = new RedisChangeNotifier({ url: inject('redisUrl'), ...(channelPrefix === undefined ? {} : { channelPrefix }) })
    await notifier.start()
    notifiers.push(notifier)
    const parsed = promptRenderConfigSchema.safeParse({ cacheTtlMs: 3_600_000 })
    if (!parsed.success) throw new Error('bad config')
    const plugin = new PromptRenderPlugin(parsed.data, shared.wiring.resolve(AdminStore), notifier, { now: () => Date.now() }, silent)
    await plugin.start()
    plugins.push(plugin)
    return { plugin, notifier }
  }

  async function renderOn(plugin: PromptRenderPlugin, principal: Principal, promptId: string): Promise<unknown> {
    const ctx = new RequestContext({
      requestId: randomUUID(),
      traceId: 't',
      receivedAt: Date.now(),
      startedAt: 0,
      method: 'POST',
      path: `/v1/prompts/${promptId}/render`,
      query: '',
      headers: {},
      clientIp: null,
      route: PROMPT_ROUTES.render,
      params: { promptId },
      signal: new ClientAbort(),
    })
    ctx.principal = principal
    ctx.body = { variables: VARIABLES }
    const first = await plugin.onRequest(ctx)
    if (first !== undefined) throw first
    const reply = plugin.onAccess(ctx) as Reply
    return (JSON.parse(reply.body as string) as Json).data.messages
  }

  it('renders the new published version at once after an edit and publish through the first instance', async () => {
    shared = await startTestGateway({ env: { REDIS_URL: inject('redisUrl') } })
    const made = await shared.workspaceKey(PROMPT_SCOPES)
    const store = shared.wiring.resolve(AdminStore)
    const organisation = (await shared.admin('GET', '/v1/admin/organisation')).body
    const workspaceUuid = (await store.findWorkspace(organisation.id, made.workspaceId))?.id as string
    const principal: Principal = {
      kind: 'api-key',
      keyId: made.keyId,
      keyType: 'workspace-service',
      organisationId: organisation.id,
      workspaceId: workspaceUuid,
      userId: null,
      scopes: new Set(PROMPT_SCOPES),
      credentialHeader: 'x-gateway-api-key',
      limitSubjects: [],
    }
    const created = await shared.admin('POST', '/v1/prompts', { workspace_id: made.workspaceId, name: 'Shared', string: chatTemplate('v1'), parameters: {} })
    expect(created.status, JSON.stringify(created.body)).toBe(200)

    const b = await secondInstance()
    // A control instance whose Redis channels are elsewhere: it never hears of the edit.
    const deaf = await secondInstance(`deaf-${randomUUID()}:`)
    expect(await renderOn(b.plugin, principal, created.body.slug)).toEqual(expectedMessages('v1'))
    expect(await renderOn(deaf.plugin, principal, created.body.slug)).toEqual(expectedMessages('v1'))

    // The edit and publish go through instance A's Admin API; B hears of them over Redis.
    const heard = new Promise<void>((resolve) => {
      let count = 0
      const unsubscribe = b.notifier.subscribe(CHANGE_CHANNELS.prompts, (message) => {
        if (message === workspaceUuid && ++count === 2) {
          unsubscribe()
          resolve()
        }
      })
    })
    const edited = await shared.admin('PUT', `/v1/prompts/${created.body.id}`, { patch: true, string: chatTemplate('v2') })
    expect(edited.status, JSON.stringify(edited.body)).toBe(200)
    const published = await shared.admin('PUT', `/v1/prompts/${created.body.id}/makeDefault`, { version: 2 })
    expect(published.status, JSON.stringify(published.body)).toBe(200)
    await heard

    expect(await renderOn(b.plugin, principal, created.body.slug)).toEqual(expectedMessages('v2'))
    // Without the notification the compiled version 1 would have stayed.
    expect(await renderOn(deaf.plugin, principal, created.body.slug)).toEqual(expectedMessages('v1'))
    // And instance A itself, over HTTP.
    const own = (await (await fetch(`${shared.url}/v1/prompts/${created.body.slug}/render`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-api-key': made.key },
      body: JSON.stringify({ variables: VARIABLES }),
    })).json()) as Json
    expect(own.data.messages).toEqual(expectedMessages('v2'))
  })
})
