/**
 * The prompt-render plugin (plugins/prompt-render/plugin.ts) against a fake admin store: version
 * suffixes, workspace isolation, conflicting headers, the virtual key and route it hands on, the
 * rendered body, /render, caching and eviction by change notifications, failure policy, and that
 * it does nothing on other routes.
 */
import { randomUUID } from 'node:crypto'
import { beforeEach, describe, expect, it } from 'vitest'
import { InProcessChangeNotifier } from '../../../adapters/memory/in-process-change-notifier.js'
import type { LabelRecord, PartialRecord, PartialVersionRecord, PromptRecord, PromptVersionRecord, VersionSelector } from '../../../core/admin-records.js'
import { CHANGE_CHANNELS } from '../../../core/channels.js'
import { ClientAbort, RequestContext, type Principal } from '../../../core/context.js'
import { GatewayError } from '../../../core/errors.js'
import type { Reply } from '../../../core/plugin.js'
import type { AdminStore } from '../../../core/ports.js'
import { INFERENCE_ROUTES, PROMPT_ROUTES, type RouteSpec } from '../../../core/routes.js'
import type { Logger } from '../../../core/service.js'
import { promptRenderConfigSchema } from '../../../plugins/prompt-render/config.js'
import { PromptRenderPlugin } from '../../../plugins/prompt-render/plugin.js'

const chatRoute = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec
const completionsRoute = INFERENCE_ROUTES.find((route) => route.id === 'completions') as RouteSpec
const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} }
const ORG = randomUUID()
const WORKSPACE = randomUUID()
const OTHER_WORKSPACE = randomUUID()
const NOW = '2026-01-01T00:00:00.000Z'

/** The store methods the plugin uses; `down` makes them reject like an unreachable store. */
class FakeStore {
  readonly prompts: PromptRecord[] = []
  readonly versions: PromptVersionRecord[] = []
  readonly labels: LabelRecord[] = []
  readonly partials: PartialRecord[] = []
  readonly partialVersions: PartialVersionRecord[] = []
  calls = 0
  down = false

  #call(): void {
    this.calls++
    if (this.down) throw new Error('store down')
  }

  async findPrompt(organisationId: string, idOrSlug: string): Promise<PromptRecord | null> {
    this.#call()
    return this.prompts.find((p) => p.organisationId === organisationId && (p.id === idOrSlug || p.slug === idOrSlug)) ?? null
  }

  async findLabelByName(organisationId: string, workspaceId: string, name: string): Promise<LabelRecord | null> {
    this.#call()
    const candidates = this.labels.filter((l) => l.organisationId === organisationId && l.name === name)
    return candidates.find((l) => l.workspaceId === workspaceId) ?? candidates.find((l) => l.workspaceId === null) ?? null
  }

  async findPromptVersion(promptId: string, selector: VersionSelector): Promise<PromptVersionRecord | null> {
    this.#call()
    const prompt = this.prompts.find((p) => p.id === promptId)
    const of = this.versions.filter((v) => v.promptId === promptId)
    if (prompt === undefined) return null
    if (selector.kind === 'published') return of.find((v) => v.version === prompt.publishedVersion) ?? null
    if (selector.kind === 'latest') return of.find((v) => v.version === prompt.latestVersion) ?? null
    if (selector.kind === 'number') return of.find((v) => v.version === selector.version) ?? null
    return of.find((v) => v.labelId === selector.labelId) ?? null
  }

  async findPartialByName(workspaceId: string, name: string): Promise<PartialRecord | null> {
    this.#call()
    return this.partials.find((p) => p.workspaceId === workspaceId && p.name === name) ?? null
  }

  async findPartialVersion(partialId: string, selector: VersionSelector): Promise<PartialVersionRecord | null> {
    this.#call()
    const partial = this.partials.find((p) => p.id === partialId)
    if (partial === undefined) return null
    const wanted = selector.kind === 'published' ? partial.publishedVersion : selector.kind === 'latest' ? partial.latestVersion : selector.kind === 'number' ? selector.version : -1
    return this.partialVersions.find((v) => v.partialId === partialId && v.version === wanted) ?? null
  }

  addPrompt(slug: string, versions: Array<Partial<PromptVersionRecord>>, workspaceId = WORKSPACE, published = 1): PromptRecord {
    const prompt: PromptRecord = {
      id: randomUUID(),
      slug,
      organisationId: ORG,
      workspaceId,
      collectionId: randomUUID(),
      name: slug,
      status: 'active',
      publishedVersion: published,
      latestVersion: versions.length,
      createdAt: NOW,
      lastUpdatedAt: NOW,
    }
    this.prompts.push(prompt)
    versions.forEach((fields, index) => this.versions.push(version(prompt, index + 1, fields)))
    return prompt
  }

  addPartial(name: string, texts: string[], workspaceId = WORKSPACE): PartialRecord {
    const partial: PartialRecord = {
      id: randomUUID(),
      slug: `${name}-abc123`,
      organisationId: ORG,
      workspaceId,
      collectionId: null,
      name,
      status: 'active',
      publishedVersion: 1,
      latestVersion: texts.length,
      createdAt: NOW,
      lastUpdatedAt: NOW,
    }
    this.partials.push(partial)
    texts.forEach((template, index) =>
      this.partialVersions.push({
        id: randomUUID(),
        partialId: partial.id,
        organisationId: ORG,
        workspaceId,
        version: index + 1,
        template,
        description: null,
        status: 'active',
        createdAt: NOW,
      }),
    )
    return partial
  }
}

function version(prompt: PromptRecord, number: number, fields: Partial<PromptVersionRecord>): PromptVersionRecord {
  return {
    id: randomUUID(),
    promptId: prompt.id,
    organisationId: ORG,
    workspaceId: prompt.workspaceId,
    version: number,
    template: JSON.stringify([{ role: 'user', content: `v${number}: {{name}}` }]),
    parameters: { temperature: number / 10 },
    model: 'gpt-4o-mini',
    virtualKey: 'vk-main',
    functions: null,
    tools: null,
    toolChoice: null,
    description: null,
    templateMetadata: null,
    isRawTemplate: false,
    labelId: null,
    status: 'active',
    createdAt: NOW,
    ...fields,
  }
}

function principal(workspaceId: string | null = WORKSPACE): Principal {
  return {
    kind: 'api-key',
    keyId: randomUUID(),
    keyType: workspaceId === null ? 'organisation-service' : 'workspace-service',
    organisationId: ORG,
    workspaceId,
    userId: null,
    scopes: new Set(['completions.write', 'prompts.render']),
    credentialHeader: 'x-gateway-api-key',
    limitSubjects: [],
  }
}

function context(route: RouteSpec, promptId: string | null, body: Record<string, unknown> = {}, headers: Record<string, string> = {}, who = principal()): RequestContext {
  const ctx = new RequestContext({
    requestId: randomUUID(),
    traceId: 'trace',
    receivedAt: Date.now(),
    startedAt: 0,
    method: 'POST',
    path: promptId === null ? route.pattern : `/v1/prompts/${promptId}/x`,
    query: '',
    headers,
    clientIp: null,
    route,
    params: promptId === null ? {} : { promptId },
    signal: new ClientAbort(),
  })
  ctx.principal = who
  ctx.body = body
  ctx.rawBody = Buffer.from(JSON.stringify(body))
  return ctx
}

interface Harness {
  readonly store: FakeStore
  readonly notifier: InProcessChangeNotifier
  readonly plugin: PromptRenderPlugin
  time: number
}

async function harness(config: Record<string, unknown> = {}): Promise<Harness> {
  const store = new FakeStore()
  const notifier = new InProcessChangeNotifier()
  const parsed = promptRenderConfigSchema.safeParse(config)
  if (!parsed.success) throw new Error(JSON.stringify(parsed.error.issues))
  const h = { store, notifier, time: Date.now() } as Harness & { plugin: PromptRenderPlugin }
  h.plugin = new PromptRenderPlugin(parsed.data, store as unknown as AdminStore, notifier, { now: () => h.time }, silent)
  await h.plugin.start()
  return h
}

/** Runs onRequest then onAccess, as the pipeline would; returns what stopped it, if anything. */
async function run(plugin: PromptRenderPlugin, ctx: RequestContext): Promise<GatewayError | Reply | undefined> {
  const first = await plugin.onRequest(ctx)
  if (first !== undefined) return first
  return plugin.onAccess(ctx)
}

function sentMessages(ctx: RequestContext): unknown {
  return (JSON.parse((ctx.rawBody as Buffer).toString('utf8')) as { messages: unknown }).messages
}

describe('version suffixes', () => {
  let h: Harness
  beforeEach(async () => {
    h = await harness()
    const prompt = h.store.addPrompt('pp-greet-abc123', [{}, {}, {}], WORKSPACE, 2)
    h.store.labels.push({
      id: 'label-production',
      organisationId: ORG,
      workspaceId: null,
      name: 'production',
      description: null,
      colorCode: null,
      isUniversal: true,
      status: 'active',
      createdAt: NOW,
      lastUpdatedAt: NOW,
    })
    const v1 = h.store.versions.find((v) => v.promptId === prompt.id && v.version === 1) as PromptVersionRecord
    h.store.versions[h.store.versions.indexOf(v1)] = { ...v1, labelId: 'label-production' }
  })

  const cases: ReadonlyArray<readonly [string, number]> = [
    ['pp-greet-abc123', 2],
    ['pp-greet-abc123@latest', 3],
    ['pp-greet-abc123@1', 1],
    ['pp-greet-abc123@3', 3],
    ['pp-greet-abc123@production', 1],
  ]
  for (const [id, expected] of cases) {
    it(`${id} runs version ${expected}`, async () => {
      const ctx = context(PROMPT_ROUTES.completions, id, { variables: { name: 'Ada' } })
      expect(await run(h.plugin, ctx)).toBeUndefined()
      expect(ctx.prompt).toMatchObject({ slug: 'pp-greet-abc123', version: expected, virtualKey: 'vk-main', route: chatRoute })
      expect(sentMessages(ctx)).toEqual([{ role: 'user', content: `v${expected}: Ada` }])
      expect(ctx.body).toMatchObject({ model: 'gpt-4o-mini', temperature: expected / 10 })
    })
  }

  it('finds the prompt by its id too', async () => {
    const id = (h.store.prompts[0] as PromptRecord).id
    const ctx = context(PROMPT_ROUTES.completions, `${id}@1`, { variables: { name: 'x' } })
    expect(await run(h.plugin, ctx)).toBeUndefined()
    expect(ctx.prompt?.version).toBe(1)
  })

  for (const id of ['pp-nope', 'pp-greet-abc123@9', 'pp-greet-abc123@staging', 'pp-greet-abc123@', '@latest', 'x'.repeat(400)]) {
    it(`answers 404 GW_PROMPT_NOT_FOUND for ${id.slice(0, 30)}`, async () => {
      const result = await run(h.plugin, context(PROMPT_ROUTES.completions, id, { variables: { name: 'x' } }))
      expect(result).toBeInstanceOf(GatewayError)
      expect((result as GatewayError).code).toBe('GW_PROMPT_NOT_FOUND')
      expect((result as GatewayError).status).toBe(404)
    })
  }
})

describe('workspaces and callers', () => {
  it("answers another workspace's prompt exactly like an unknown one, also when its template is broken", async () => {
    const h = await harness()
    h.store.addPrompt('pp-theirs', [{}], OTHER_WORKSPACE)
    h.store.addPrompt('pp-broken', [{ template: JSON.stringify([{ role: 'user', content: '{{>missing}}' }]) }], OTHER_WORKSPACE)
    for (const id of ['pp-theirs', 'pp-theirs@latest', 'pp-broken']) {
      const theirs = (await run(h.plugin, context(PROMPT_ROUTES.completions, id, { variables: { name: 'x' } }))) as GatewayError
      const unknown = (await run(h.plugin, context(PROMPT_ROUTES.completions, id.replace('pp-', 'pp-unknown-'), { variables: { name: 'x' } }))) as GatewayError
      expect(theirs.code).toBe('GW_PROMPT_NOT_FOUND')
      expect(theirs.message).toBe(unknown.message.replace('pp-unknown-', 'pp-'))
    }
    // Their own workspace sees it.
    const ctx = context(PROMPT_ROUTES.completions, 'pp-theirs', { variables: { name: 'x' } }, {}, principal(OTHER_WORKSPACE))
    expect(await run(h.plugin, ctx)).toBeUndefined()
  })

  it('refuses callers without a workspace (404) without asking the store', async () => {
    const h = await harness()
    h.store.addPrompt('pp-a', [{}])
    const result = await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-a', {}, {}, principal(null)))
    expect((result as GatewayError).code).toBe('GW_PROMPT_NOT_FOUND')
    expect(h.store.calls).toBe(0)
  })
})

describe('request checks', () => {
  let h: Harness
  beforeEach(async () => {
    h = await harness()
    h.store.addPrompt('pp-a', [{}])
    h.store.addPrompt('pp-nokey', [{ virtualKey: null }])
  })

  for (const header of ['x-gateway-provider', 'x-gateway-virtual-key', 'x-gateway-custom-host', 'x-gateway-config']) {
    it(`refuses ${header} next to a prompt (400 naming it), before any lookup`, async () => {
      const result = (await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-a', { variables: { name: 'x' } }, { [header]: 'x' }))) as GatewayError
      expect(result.code).toBe('GW_REQ_INVALID')
      expect(result.param).toBe(header)
      expect(result.message).toContain(header)
      expect(h.store.calls).toBe(0)
    })
  }

  it('refuses to run a version without a virtual key (400 naming the fix), but renders it', async () => {
    const result = (await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-nokey', { variables: { name: 'x' } }))) as GatewayError
    expect(result.code).toBe('GW_REQ_INVALID')
    expect(result.param).toBe('virtual_key')
    expect(result.message).toContain('virtual_key')
    const render = (await run(h.plugin, context(PROMPT_ROUTES.render, 'pp-nokey', { variables: { name: 'x' } }))) as Reply
    expect(render.status).toBe(200)
  })

  it('answers a missing variable with 400 naming it, and leaves the body as sent', async () => {
    const ctx = context(PROMPT_ROUTES.completions, 'pp-a', { variables: {} })
    const result = (await run(h.plugin, ctx)) as GatewayError
    expect(result.code).toBe('GW_PROMPT_VARIABLE_MISSING')
    expect(result.message).toContain('"name"')
    expect(ctx.body).toEqual({ variables: {} })
  })
})

describe('the request handed on', () => {
  it('replaces body and rawBody with the rendered request; the virtual key and route go in ctx.prompt', async () => {
    const h = await harness()
    h.store.addPrompt('pp-a', [{ parameters: { max_tokens: 50, temperature: 0.1 } }])
    const ctx = context(PROMPT_ROUTES.completions, 'pp-a', { variables: { name: 'Ada' }, temperature: 0.9, stream: true })
    expect(await run(h.plugin, ctx)).toBeUndefined()
    const expected = { max_tokens: 50, temperature: 0.9, model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'v1: Ada' }], stream: true }
    expect(ctx.body).toEqual(expected)
    expect(JSON.parse((ctx.rawBody as Buffer).toString('utf8'))).toEqual(expected)
    expect(ctx.prompt).toMatchObject({ virtualKey: 'vk-main', route: chatRoute })
  })

  it('sends a completion template as a completions request', async () => {
    const h = await harness()
    h.store.addPrompt('pp-text', [{ template: 'Say {{name}}', isRawTemplate: true }])
    const ctx = context(PROMPT_ROUTES.completions, 'pp-text', { variables: { name: 'hi' } })
    expect(await run(h.plugin, ctx)).toBeUndefined()
    expect(ctx.prompt?.route).toBe(completionsRoute)
    expect(ctx.body).toMatchObject({ prompt: 'Say hi' })
  })

  it('answers /render with {success, data} and no virtual key to resolve', async () => {
    const h = await harness()
    h.store.addPrompt('pp-a', [{}])
    const ctx = context(PROMPT_ROUTES.render, 'pp-a', { variables: { name: 'Ada' }, max_tokens: 7 })
    const reply = (await run(h.plugin, ctx)) as Reply
    expect(reply.status).toBe(200)
    expect(JSON.parse(reply.body as string)).toEqual({
      success: true,
      data: { temperature: 0.1, model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'v1: Ada' }], max_tokens: 7 },
    })
    expect(ctx.prompt).toMatchObject({ slug: 'pp-a', version: 1, virtualKey: null, route: PROMPT_ROUTES.render })
  })

  it('names a missing partial (400) and renders partials of the prompt workspace, by version too', async () => {
    const h = await harness()
    h.store.addPartial('footer', ['v1 by {{name}}', 'v2 by {{name}}'])
    h.store.addPartial('footer', ['theirs'], OTHER_WORKSPACE)
    h.store.addPrompt('pp-p', [
      { template: JSON.stringify([{ role: 'user', content: 'Hi. {{>footer}} / {{>footer@latest}} / {{>footer@1}}' }]) },
      { template: JSON.stringify([{ role: 'user', content: 'Hi. {{>header}}' }]) },
    ])
    const ctx = context(PROMPT_ROUTES.completions, 'pp-p', { variables: { name: 'Ada' } })
    expect(await run(h.plugin, ctx)).toBeUndefined()
    expect(sentMessages(ctx)).toEqual([{ role: 'user', content: 'Hi. v1 by Ada / v2 by Ada / v1 by Ada' }])
    const missing = (await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-p@2', { variables: { name: 'Ada' } }))) as GatewayError
    expect(missing.code).toBe('GW_PROMPT_PARTIAL_NOT_FOUND')
    expect(missing.message).toContain('"header"')
  })
})

describe('cache', () => {
  it('compiles a version once: later requests are answered without the store, synchronously', async () => {
    const h = await harness()
    h.store.addPrompt('pp-a', [{}])
    await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-a', { variables: { name: 'x' } }))
    const calls = h.store.calls
    const ctx = context(PROMPT_ROUTES.completions, 'pp-a', { variables: { name: 'y' } })
    // A hit returns a plain value: the pipeline runs it without an await.
    expect(h.plugin.onRequest(ctx)).toBeUndefined()
    expect(h.plugin.onAccess(ctx)).toBeUndefined()
    expect(sentMessages(ctx)).toEqual([{ role: 'user', content: 'v1: y' }])
    expect(h.store.calls).toBe(calls)
  })

  it("drops a workspace's versions on its prompts notification, and every unknown id on any", async () => {
    const h = await harness()
    const prompt = h.store.addPrompt('pp-a', [{}])
    const theirs = h.store.addPrompt('pp-b', [{}], OTHER_WORKSPACE)
    const ask = async (id: string, who = principal()) => {
      const ctx = context(PROMPT_ROUTES.completions, id, { variables: { name: 'x' } }, {}, who)
      const result = await run(h.plugin, ctx)
      return result instanceof GatewayError ? result.code : sentMessages(ctx)
    }
    expect(await ask('pp-a')).toEqual([{ role: 'user', content: 'v1: x' }])
    expect(await ask('pp-b', principal(OTHER_WORKSPACE))).toEqual([{ role: 'user', content: 'v1: x' }])
    expect(await ask('pp-new')).toBe('GW_PROMPT_NOT_FOUND')

    // Version 2 is made and published, and a prompt pp-new created; other workspaces change nothing of ours.
    h.store.versions.push(version(prompt, 2, {}))
    h.store.prompts[h.store.prompts.indexOf(prompt)] = { ...prompt, publishedVersion: 2, latestVersion: 2 }
    h.store.versions.push(version(theirs, 2, {}))
    h.store.prompts[h.store.prompts.indexOf(theirs)] = { ...theirs, publishedVersion: 2, latestVersion: 2 }
    h.store.addPrompt('pp-new', [{}])
    h.notifier.publish(CHANGE_CHANNELS.prompts, OTHER_WORKSPACE)
    expect(await ask('pp-a')).toEqual([{ role: 'user', content: 'v1: x' }])
    expect(await ask('pp-b', principal(OTHER_WORKSPACE))).toEqual([{ role: 'user', content: 'v2: x' }])
    expect(await ask('pp-new')).toEqual([{ role: 'user', content: 'v1: x' }])

    h.notifier.publish(CHANGE_CHANNELS.prompts, WORKSPACE)
    expect(await ask('pp-a')).toEqual([{ role: 'user', content: 'v2: x' }])
  })

  it('drops everything on *', async () => {
    const h = await harness()
    const prompt = h.store.addPrompt('pp-a', [{}])
    await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-a', { variables: { name: 'x' } }))
    h.store.prompts[0] = { ...prompt, slug: 'pp-renamed' }
    h.notifier.publish(CHANGE_CHANNELS.prompts, '*')
    const result = (await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-a', { variables: { name: 'x' } }))) as GatewayError
    expect(result.code).toBe('GW_PROMPT_NOT_FOUND')
  })

  it('remembers an unknown id for negativeCacheTtlMs only', async () => {
    const h = await harness({ negativeCacheTtlMs: 1000 })
    await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-later', {}))
    h.store.addPrompt('pp-later', [{}])
    expect(((await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-later', { variables: { name: 'x' } }))) as GatewayError).code).toBe('GW_PROMPT_NOT_FOUND')
    h.time += 1001
    expect(await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-later', { variables: { name: 'x' } }))).toBeUndefined()
  })
})

describe('failure policy', () => {
  it('answers 503 when the store is down and nothing is cached, and uses a stale version while it is down', async () => {
    const h = await harness({ cacheTtlMs: 1000 })
    h.store.addPrompt('pp-a', [{}])
    h.store.down = true
    const refused = (await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-a', { variables: { name: 'x' } }))) as GatewayError
    expect(refused.code).toBe('GW_PROMPT_UNAVAILABLE')
    expect(refused.status).toBe(503)
    h.store.down = false
    expect(await run(h.plugin, context(PROMPT_ROUTES.completions, 'pp-a', { variables: { name: 'x' } }))).toBeUndefined()
    h.store.down = true
    h.time += 5000
    const ctx = context(PROMPT_ROUTES.completions, 'pp-a', { variables: { name: 'x' } })
    expect(await run(h.plugin, ctx)).toBeUndefined()
    expect(ctx.prompt?.version).toBe(1)
  })
})

describe('other routes', () => {
  it('does nothing on a chat completion: no store call, body untouched, no ctx.prompt', async () => {
    const h = await harness()
    const body = { model: 'm', messages: [{ role: 'user', content: '{{x}}' }], variables: { x: 'y' } }
    const ctx = context(chatRoute, null, body, { 'x-gateway-provider': 'openai' })
    const raw = ctx.rawBody
    expect(h.plugin.onRequest(ctx)).toBeUndefined()
    expect(h.plugin.onAccess(ctx)).toBeUndefined()
    expect(ctx.prompt).toBeNull()
    expect(ctx.body).toBe(body)
    expect(ctx.rawBody).toBe(raw)
    expect(h.store.calls).toBe(0)
  })
})
