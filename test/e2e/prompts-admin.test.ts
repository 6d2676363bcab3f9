/**
 * The Admin API of prompt templates on the real gateway (issue 14 items 1 and 5): prompts with
 * numbered versions (patch, metadata-only updates, publish), labels on versions (built-in and
 * custom), partials, collections and the default collection; workspace isolation as for virtual
 * keys (another workspace's resources are 404, members are read-only); 400s naming the field; every
 * change audited and published on the `prompts` change channel.
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import { AdminStore, ChangeNotifier } from '../../core/ports.js'
import { callAs, inviteUser, type Answer, type Json } from '../helpers/admin-calls.js'
import { startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'

const PROMPT_SCOPES = ['prompts.create', 'prompts.read', 'prompts.list', 'prompts.update', 'prompts.delete', 'prompts.publish']

const CHAT_TEMPLATE = JSON.stringify([
  { role: 'system', content: 'You are {{persona}}.' },
  { role: 'user', content: 'Tell me about {{topic}}.' },
])

let gw: TestGateway
/** Workspace A (slug) and its UUID; a workspace service key of A (acts as a manager). */
let wsA: string
let wsAUuid: string
let keyA: string
/** Workspace B and a key of it with every prompt scope. */
let wsB: string
let keyB: string
/** A member of A whose user key holds every prompt scope: refused changes come from the role. */
let memberKey: string
let virtualKeyA: Json
let virtualKeyB: Json
/** Workspace UUIDs published on the prompts channel, in order. */
const published: string[] = []

function call(method: string, path: string, body?: unknown, key: string = TEST_ADMIN_KEY): Promise<Answer> {
  return callAs(gw.url, key, method, path, body)
}

async function ok(method: string, path: string, body?: unknown, key?: string): Promise<Json> {
  const answer = await call(method, path, body, key)
  expect(answer.status, `${method} ${path}: ${answer.text}`).toBe(200)
  return answer.body
}

function expectError(answer: Answer, status: number, errorCode: string, message?: RegExp): void {
  expect(answer.status, answer.text).toBe(status)
  expect(answer.body.success).toBe(false)
  expect(answer.body.data.errorCode).toBe(errorCode)
  if (message !== undefined) expect(answer.body.data.message).toMatch(message)
}

/** Every version field, as an update without `patch` must send them. */
function fullVersion(overrides: Json = {}): Json {
  return {
    string: CHAT_TEMPLATE,
    parameters: { temperature: 0.2, max_tokens: 100 },
    virtual_key: virtualKeyA.slug,
    model: 'gpt-4o-mini',
    functions: null,
    tools: null,
    tool_choice: null,
    template_metadata: null,
    ...overrides,
  }
}

async function createPrompt(fields: Json = {}, key?: string): Promise<Json> {
  return ok('POST', '/v1/prompts', { workspace_id: key === undefined ? wsA : undefined, name: 'Support', string: CHAT_TEMPLATE, parameters: { temperature: 0.7 }, ...fields }, key)
}

async function auditEntries(query: string): Promise<Json[]> {
  const answer = await ok('GET', `/v1/audit-logs?${query}`)
  return answer.data as Json[]
}

beforeAll(async () => {
  gw = await startTestGateway()
  gw.wiring.resolve(ChangeNotifier).subscribe(CHANGE_CHANNELS.prompts, (message) => published.push(message))
  ;({ key: keyA, workspaceId: wsA } = await gw.workspaceKey([...PROMPT_SCOPES, 'virtual_keys.create', 'virtual_keys.read']))
  ;({ key: keyB, workspaceId: wsB } = await gw.workspaceKey([...PROMPT_SCOPES, 'virtual_keys.create']))
  const organisationId = (await ok('GET', '/v1/admin/organisation')).id
  wsAUuid = (await gw.wiring.resolve(AdminStore).findWorkspace(organisationId, wsA))?.id ?? ''
  virtualKeyA = await ok('POST', '/v1/virtual-keys', { workspace_id: wsA, name: 'openai A', provider: 'openai', key: 'sk-a-0123456789abcdef' })
  virtualKeyB = await ok('POST', '/v1/virtual-keys', { workspace_id: wsB, name: 'openai B', provider: 'openai', key: 'sk-b-0123456789abcdef' })
  const member = await inviteUser(gw.url, 'member', { id: wsA, role: 'member' }, PROMPT_SCOPES)
  memberKey = member.key as string
})

afterAll(async () => {
  await gw?.close()
})

describe('prompts', () => {
  let prompt: Json

  it('creates a prompt in the default collection, made on first use: {id, slug, version_id, object}', async () => {
    expect((await ok('GET', `/v1/collections?workspace_id=${wsA}`)).total).toBe(0)
    published.length = 0
    prompt = await createPrompt({ virtual_key: virtualKeyA.slug, model: 'gpt-4o-mini', version_description: 'first', template_metadata: { owner: 'team' } })
    expect(Object.keys(prompt).sort()).toEqual(['id', 'object', 'slug', 'version_id'])
    expect(prompt.object).toBe('prompt')
    expect(prompt.slug).toMatch(/^pp-support-[0-9a-f]{6}$/)
    expect(published).toEqual([wsAUuid])
    const collections = await ok('GET', `/v1/collections?workspace_id=${wsA}`)
    expect(collections.total).toBe(1)
    expect(collections.data[0]).toMatchObject({ object: 'collection', is_default: true, workspace_id: wsA, collection_details: { prompts_count: 1, child_collections_count: 0 } })
    // A second prompt goes to the same default collection.
    const second = await createPrompt({ name: 'Other' })
    expect((await ok('GET', `/v1/prompts/${second.id}`)).collection_id).toBe(collections.data[0].id)
    expect((await ok('GET', `/v1/collections?workspace_id=${wsA}`)).total).toBe(1)
    await ok('DELETE', `/v1/prompts/${second.id}`)
  })

  it('makes one default collection when the first prompts of a workspace are created at once', async () => {
    const { key } = await gw.workspaceKey(PROMPT_SCOPES)
    const made = await Promise.all(Array.from({ length: 6 }, (_, i) => call('POST', '/v1/prompts', { name: `p${i}`, string: 'x', parameters: {} }, key)))
    for (const answer of made) expect(answer.status, answer.text).toBe(200)
    const collections = await ok('GET', '/v1/collections', undefined, key)
    expect(collections.data.map((item: Json) => [item.is_default, item.collection_details.prompts_count])).toEqual([[true, 6]])
  })

  it('gets a prompt by slug or id with its published version', async () => {
    const bySlug = await ok('GET', `/v1/prompts/${prompt.slug}`)
    expect(bySlug).toMatchObject({
      object: 'prompt',
      id: prompt.id,
      slug: prompt.slug,
      name: 'Support',
      workspace_id: wsA,
      string: CHAT_TEMPLATE,
      parameters: { temperature: 0.7 },
      prompt_version: 1,
      prompt_version_id: prompt.version_id,
      prompt_version_status: 'active',
      prompt_version_description: 'first',
      prompt_version_label_id: null,
      virtual_key: virtualKeyA.slug,
      model: 'gpt-4o-mini',
      functions: null,
      tools: null,
      tool_choice: null,
      template_metadata: { owner: 'team' },
      is_raw_template: 0,
      published_version: 1,
      latest_version: 1,
      status: 'active',
    })
    expect(await ok('GET', `/v1/prompts/${prompt.id}`)).toEqual(bySlug)
    // The workspace's own key sees it too, without naming the workspace.
    expect((await ok('GET', `/v1/prompts/${prompt.slug}`, undefined, keyA)).id).toBe(prompt.id)
  })

  it('stores a virtual key named by UUID as its slug; a completion template as raw text', async () => {
    const made = await createPrompt({ name: 'Completion', string: 'Complete: {{text}}', virtual_key: virtualKeyA.id })
    expect(await ok('GET', `/v1/prompts/${made.id}`)).toMatchObject({ virtual_key: virtualKeyA.slug, is_raw_template: 1, string: 'Complete: {{text}}' })
    await ok('DELETE', `/v1/prompts/${made.id}`)
  })

  it('lists prompts with search, collection and paging; the model is the published version’s', async () => {
    const extra = await createPrompt({ name: 'Billing helper', model: 'gpt-4o' })
    const all = await ok('GET', `/v1/prompts?workspace_id=${wsA}`)
    expect(all.object).toBe('list')
    expect(all.total).toBe(2)
    expect(all.data.map((item: Json) => item.id)).toEqual([prompt.id, extra.id])
    expect(all.data[1]).toMatchObject({ object: 'prompt', slug: extra.slug, name: 'Billing helper', model: 'gpt-4o', workspace_id: wsA })
    expect((await ok('GET', `/v1/prompts?workspace_id=${wsA}&search=BILL`)).data.map((item: Json) => item.id)).toEqual([extra.id])
    const paged = await ok('GET', `/v1/prompts?workspace_id=${wsA}&page_size=1&current_page=1`)
    expect(paged.total).toBe(2)
    expect(paged.data.map((item: Json) => item.id)).toEqual([extra.id])
    const collection = (await ok('GET', `/v1/prompts/${prompt.id}`)).collection_id
    expect((await ok('GET', `/v1/prompts?collection_id=${collection}`, undefined, keyA)).total).toBe(2)
    // Workspace B's key lists its own (none), never A's.
    expect((await ok('GET', '/v1/prompts', undefined, keyB)).total).toBe(0)
    await ok('DELETE', `/v1/prompts/${extra.id}`)
  })

  it('makes a new version on a content change; patch copies the omitted fields from the latest', async () => {
    published.length = 0
    const updated = await ok('PUT', `/v1/prompts/${prompt.slug}`, { patch: true, parameters: { temperature: 0.1 }, version_description: 'cooler' })
    expect(updated).toMatchObject({ id: prompt.id, slug: prompt.slug, prompt_version: 2 })
    expect(updated.prompt_version_id).not.toBe(prompt.version_id)
    expect(published).toEqual([wsAUuid])
    const v2 = await ok('GET', `/v1/prompts/${prompt.id}/versions/${updated.prompt_version_id}`)
    expect(v2).toMatchObject({
      prompt_version: 2,
      string: CHAT_TEMPLATE,
      parameters: { temperature: 0.1 },
      virtual_key: virtualKeyA.slug,
      model: 'gpt-4o-mini',
      template_metadata: { owner: 'team' },
      prompt_version_description: 'cooler',
      latest_version: 2,
      published_version: 1,
    })
    expect(await ok('GET', `/v1/prompts/${prompt.id}/versions/2`)).toEqual(v2)
    // Still version 1 until published.
    expect((await ok('GET', `/v1/prompts/${prompt.id}`)).prompt_version).toBe(1)
  })

  it('without patch, every version field must be sent (400 naming the missing one), and nothing changes', async () => {
    const missing = await call('PUT', `/v1/prompts/${prompt.id}`, { string: CHAT_TEMPLATE, parameters: {} })
    expectError(missing, 400, 'AB01', /^virtual_key: required when an update makes a new version without patch: true/)
    const full = await ok('PUT', `/v1/prompts/${prompt.id}`, fullVersion({ tools: [{ type: 'function', function: { name: 'lookup' } }], tool_choice: 'auto' }))
    expect(full.prompt_version).toBe(3)
    expect(await ok('GET', `/v1/prompts/${prompt.id}/versions/3`)).toMatchObject({
      parameters: { temperature: 0.2, max_tokens: 100 },
      tools: [{ type: 'function', function: { name: 'lookup' } }],
      tool_choice: 'auto',
      // Not copied without patch: the body is the whole version.
      template_metadata: null,
      prompt_version_description: null,
    })
  })

  it('a metadata-only update makes no version', async () => {
    const renamed = await ok('PUT', `/v1/prompts/${prompt.id}`, { name: 'Support v2' })
    expect(renamed.prompt_version).toBe(3)
    const got = await ok('GET', `/v1/prompts/${prompt.id}`)
    expect(got).toMatchObject({ name: 'Support v2', latest_version: 3 })
    expect(await ok('GET', `/v1/prompts/${prompt.id}/versions`)).toHaveLength(3)
  })

  it('lists versions newest first as a bare array', async () => {
    const versions = await ok('GET', `/v1/prompts/${prompt.id}/versions`)
    expect(Array.isArray(versions)).toBe(true)
    expect((versions as unknown as Json[]).map((version) => version.prompt_version)).toEqual([3, 2, 1])
    expect((versions as unknown as Json[])[2]).toMatchObject({ object: 'prompt', id: prompt.version_id, prompt_id: prompt.id, prompt_template: CHAT_TEMPLATE, prompt_description: 'first', label_id: null, status: 'active' })
  })

  it('publishes a version with makeDefault; an unknown version is 404', async () => {
    published.length = 0
    expect(await ok('PUT', `/v1/prompts/${prompt.id}/makeDefault`, { version: 2 })).toEqual({})
    expect(published).toEqual([wsAUuid])
    expect(await ok('GET', `/v1/prompts/${prompt.slug}`)).toMatchObject({ prompt_version: 2, published_version: 2, latest_version: 3, parameters: { temperature: 0.1 } })
    expectError(await call('PUT', `/v1/prompts/${prompt.id}/makeDefault`, { version: 9 }), 404, 'AB08', /Prompt version not found/)
    expectError(await call('PUT', `/v1/prompts/${prompt.id}/makeDefault`, { version: 'latest' }), 400, 'AB01', /^version: /)
    expectError(await call('GET', `/v1/prompts/${prompt.id}/versions/${randomUUID()}`), 404, 'AB08')
  })

  it('refuses bad bodies with 400 naming the field', async () => {
    expectError(await call('POST', '/v1/prompts', { workspace_id: wsA, string: 'x', parameters: {} }), 400, 'AB01', /^name: /)
    expectError(await call('POST', '/v1/prompts', { workspace_id: wsA, name: 'n', parameters: {} }), 400, 'AB01', /^string: /)
    expectError(await call('POST', '/v1/prompts', { workspace_id: wsA, name: 'n', string: 'x' }), 400, 'AB01', /^parameters: /)
    expectError(await call('POST', '/v1/prompts', { workspace_id: wsA, name: 'n', string: 'x', parameters: [] }), 400, 'AB01', /^parameters: /)
    expectError(await call('POST', '/v1/prompts', { workspace_id: wsA, name: 'n', string: 'Hi {{name', parameters: {} }), 400, 'AB01', /^string: Mustache syntax error: Unclosed tag/)
    expectError(await call('POST', '/v1/prompts', { workspace_id: wsA, name: 'n', string: '[{"role":"user","content":"{{#a}}"}]', parameters: {} }), 400, 'AB01', /^string: messages\[0\]\.content: Mustache syntax error: Unclosed section "a"/)
    expectError(await call('POST', '/v1/prompts', { workspace_id: wsA, name: 'n', string: 'x', parameters: { messages: [] } }), 400, 'AB01', /^parameters: must not contain messages or prompt/)
    expectError(await call('POST', '/v1/prompts', { workspace_id: wsA, name: 'n', string: 'x', parameters: {}, colour: 'red' }), 400, 'AB01', /colour/)
    expectError(await call('POST', '/v1/prompts', { name: 'n', string: 'x', parameters: {} }), 400, 'AB01', /^workspace_id: required/)
    expectError(await call('POST', '/v1/prompts', { workspace_id: wsA, name: 'n', string: 'x', parameters: {}, virtual_key: 'no-such-key' }), 404, 'AB08', /Virtual key not found/)
    expectError(await call('POST', '/v1/prompts', { workspace_id: wsA, name: 'n', string: 'x', parameters: {}, collection_id: randomUUID() }), 404, 'AB08', /Collection not found/)
    expectError(await call('PUT', `/v1/prompts/${prompt.id}`, { patch: true, string: '{{/x}}' }), 400, 'AB01', /^string: Mustache syntax error: Unopened section "x"/)
    expect((await ok('GET', `/v1/prompts/${prompt.id}`)).latest_version).toBe(3)
  })

  it('audits every change in its transaction, refusals too', async () => {
    const entries = await auditEntries('resource_type=prompt')
    const actions = entries.map((entry) => `${entry.action} ${entry.response_status_code}`)
    expect(actions).toEqual(expect.arrayContaining(['create 200', 'update 200', 'publish 200', 'delete 200', 'update 400', 'publish 404']))
    const publish = entries.find((entry) => entry.action === 'publish' && entry.response_status_code === 200) as Json
    expect(publish).toMatchObject({ method: 'PUT', uri: `/v1/prompts/${prompt.id}/makeDefault`, resource_id: prompt.id, workspace_id: wsA })
    expect(JSON.parse(publish.request_body)).toEqual({ version: 2 })
    const created = entries.find((entry) => entry.action === 'create' && entry.resource_id === prompt.id) as Json
    expect(created).toMatchObject({ workspace_id: wsA, response_status_code: 200 })
  })
})

describe('labels', () => {
  let prompt: Json
  let versions: Json[]
  let production: Json
  let canary: Json

  beforeAll(async () => {
    prompt = await createPrompt({ name: 'Labelled' })
    await ok('PUT', `/v1/prompts/${prompt.id}`, { patch: true, string: 'v2 {{x}}' })
    versions = (await ok('GET', `/v1/prompts/${prompt.id}/versions`)) as unknown as Json[]
  })

  it('lists the built-in labels first, seen from every workspace', async () => {
    const listed = await ok('GET', '/v1/labels', undefined, keyA)
    expect(listed.object).toBe('list')
    expect(listed.data.slice(0, 3).map((label: Json) => label.name).sort()).toEqual(['development', 'production', 'staging'])
    expect(listed.data[0]).toMatchObject({ object: 'label', is_universal: true, workspace_id: null })
    production = listed.data.find((label: Json) => label.name === 'production')
    expect((await ok('GET', `/v1/labels/${production.id}`, undefined, keyB)).name).toBe('production')
  })

  it('creates custom labels with the reference’s name rule (400 naming name) and no built-in names (409)', async () => {
    canary = await ok('POST', '/v1/labels', { name: 'canary', description: 'try', color_code: '#3b82f6' }, keyA)
    expect(Object.keys(canary).sort()).toEqual(['id', 'object'])
    expect(await ok('GET', `/v1/labels/${canary.id}`)).toMatchObject({ name: 'canary', description: 'try', color_code: '#3b82f6', is_universal: false, workspace_id: wsA })
    for (const name of ['latest', 'default', '123', 'a b', 'a@b', '', 'a{{b}}c']) {
      expectError(await call('POST', '/v1/labels', { name }, keyA), 400, 'AB01', /^name: /)
    }
    expectError(await call('POST', '/v1/labels', { name: 'canary' }, keyA), 409, 'AB07')
    expectError(await call('POST', '/v1/labels', { name: 'production' }, keyA), 409, 'AB07')
    // Workspace B has its own labels: A's canary is not seen there.
    expect((await ok('GET', '/v1/labels', undefined, keyB)).data.map((label: Json) => label.name)).not.toContain('canary')
    expectError(await call('GET', `/v1/labels/${canary.id}`, undefined, keyB), 404, 'AB08')
  })

  it('puts a label on one version of a prompt at a time; null takes it off', async () => {
    const [v2, v1] = versions as [Json, Json]
    expect(await ok('PUT', `/v1/prompts/${prompt.id}/versions/${v1.id}`, { label_id: production.id })).toEqual({})
    expect((await ok('GET', `/v1/prompts/${prompt.id}/versions/1`)).prompt_version_label_id).toBe(production.id)
    await ok('PUT', `/v1/prompts/${prompt.id}/versions/${v2.id}`, { label_id: production.id })
    const after = (await ok('GET', `/v1/prompts/${prompt.id}/versions`)) as unknown as Json[]
    expect(after.map((version) => version.label_id)).toEqual([production.id, null])
    // By name, too.
    await ok('PUT', `/v1/prompts/${prompt.id}/versions/1`, { label_id: 'canary' })
    expect((await ok('GET', `/v1/prompts/${prompt.id}/versions/1`)).prompt_version_label_id).toBe(canary.id)
    await ok('PUT', `/v1/prompts/${prompt.id}/versions/1`, { label_id: null })
    expect((await ok('GET', `/v1/prompts/${prompt.id}/versions/1`)).prompt_version_label_id).toBeNull()
    expectError(await call('PUT', `/v1/prompts/${prompt.id}/versions/1`, { label_id: randomUUID() }), 404, 'AB08', /Label not found/)
  })

  it('refuses changes to built-in labels (403) and lets managers rename and delete their own', async () => {
    expectError(await call('PUT', `/v1/labels/${production.id}`, { name: 'prod' }), 403, 'AB03', /Built-in labels/)
    expectError(await call('DELETE', `/v1/labels/${production.id}`), 403, 'AB03', /Built-in labels/)
    expect(await ok('PUT', `/v1/labels/${canary.id}`, { description: 'renamed', name: 'canary-2' }, keyA)).toMatchObject({ name: 'canary-2', description: 'renamed' })
    await ok('PUT', `/v1/prompts/${prompt.id}/versions/1`, { label_id: canary.id })
    expect(await ok('DELETE', `/v1/labels/${canary.id}`, undefined, keyA)).toEqual({})
    expect((await ok('GET', `/v1/prompts/${prompt.id}/versions/1`)).prompt_version_label_id).toBeNull()
    expectError(await call('GET', `/v1/labels/${canary.id}`), 404, 'AB08')
    expect((await auditEntries('resource_type=label')).map((entry) => `${entry.action} ${entry.response_status_code}`)).toEqual(
      expect.arrayContaining(['create 200', 'update 200', 'delete 200', 'update 403', 'delete 403', 'create 409']),
    )
    expect((await auditEntries('resource_type=prompt_version')).length).toBeGreaterThan(0)
  })
})

describe('partials', () => {
  let partial: Json

  it('creates, reads, versions and publishes a partial', async () => {
    partial = await ok('POST', '/v1/prompts/partials', { name: 'signature', string: 'Regards, {{team}}', version_description: 'v1' }, keyA)
    expect(partial).toMatchObject({ object: 'partial', slug: expect.stringMatching(/^signature-[0-9a-f]{6}$/) })
    expect(await ok('GET', `/v1/prompts/partials/${partial.slug}`)).toMatchObject({
      object: 'partial',
      id: partial.id,
      name: 'signature',
      string: 'Regards, {{team}}',
      version: 1,
      version_description: 'v1',
      prompt_partial_version_id: partial.version_id,
      workspace_id: wsA,
    })
    const updated = await ok('PUT', `/v1/prompts/partials/${partial.id}`, { string: 'Best, {{team}}', description: 'friendlier' }, keyA)
    expect(updated).toMatchObject({ id: partial.id, version: 2 })
    // Published stays 1 until makeDefault.
    expect((await ok('GET', `/v1/prompts/partials/${partial.id}`)).string).toBe('Regards, {{team}}')
    const versions = (await ok('GET', `/v1/prompts/partials/${partial.id}/versions`)) as unknown as Json[]
    expect(versions.map((version) => [version.version, version.string, version.description])).toEqual([
      [2, 'Best, {{team}}', 'friendlier'],
      [1, 'Regards, {{team}}', 'v1'],
    ])
    expect(versions[0]).toMatchObject({ object: 'partial', prompt_partial_id: partial.id, prompt_partial_version_id: updated.prompt_partial_version_id })
    published.length = 0
    expect(await ok('PUT', `/v1/prompts/partials/${partial.id}/makeDefault`, { version: 2 }, keyA)).toEqual({})
    expect(published).toEqual([wsAUuid])
    expect((await ok('GET', `/v1/prompts/partials/${partial.id}`)).string).toBe('Best, {{team}}')
    expectError(await call('PUT', `/v1/prompts/partials/${partial.id}/makeDefault`, { version: 5 }, keyA), 404, 'AB08')
  })

  it('lists partials as a bare array; names are unique in a workspace and callable as {{>name}}', async () => {
    const listed = (await ok('GET', '/v1/prompts/partials', undefined, keyA)) as unknown as Json[]
    expect(listed.map((item) => item.name)).toEqual(['signature'])
    expect((await ok('GET', '/v1/prompts/partials', undefined, keyB)) as unknown as Json[]).toEqual([])
    expectError(await call('POST', '/v1/prompts/partials', { name: 'signature', string: 'x' }, keyA), 409, 'AB07')
    expectError(await call('POST', '/v1/prompts/partials', { name: 'has space', string: 'x' }, keyA), 400, 'AB01', /^name: /)
    expectError(await call('POST', '/v1/prompts/partials', { name: 'x}}', string: 'x' }, keyA), 400, 'AB01', /^name: /)
    expectError(await call('POST', '/v1/prompts/partials', { name: 'ok', string: '{{#open}}' }, keyA), 400, 'AB01', /^string: Mustache syntax error/)
    // The same name in another workspace is fine.
    const other = await ok('POST', '/v1/prompts/partials', { name: 'signature', string: 'B' }, keyB)
    expectError(await call('GET', `/v1/prompts/partials/${other.id}`, undefined, keyA), 404, 'AB08')
    await ok('DELETE', `/v1/prompts/partials/${other.id}`, undefined, keyB)
  })

  it('deletes a partial', async () => {
    expect(await ok('DELETE', `/v1/prompts/partials/${partial.id}`, undefined, keyA)).toEqual({})
    expectError(await call('GET', `/v1/prompts/partials/${partial.id}`, undefined, keyA), 404, 'AB08')
    expect((await auditEntries('resource_type=prompt_partial')).map((entry) => entry.action)).toEqual(expect.arrayContaining(['create', 'update', 'publish', 'delete']))
  })
})

describe('collections', () => {
  it('creates nested collections, counts their children and prompts, renames, and deletes only empty ones', async () => {
    const parent = await ok('POST', '/v1/collections', { name: 'Support team' }, keyA)
    expect(parent).toMatchObject({ object: 'collection', slug: expect.stringMatching(/^support-team-[0-9a-f]{6}$/) })
    const child = await ok('POST', '/v1/collections', { name: 'Escalations', parent_collection_id: parent.slug }, keyA)
    const inChild = await createPrompt({ name: 'Escalate', collection_id: child.id }, keyA)
    const got = await ok('GET', `/v1/collections/${parent.id}`, undefined, keyA)
    expect(got).toMatchObject({ id: parent.id, name: 'Support team', is_default: false, parent_collection_id: null, workspace_id: wsA })
    expect(got.child_collections.map((item: Json) => item.id)).toEqual([child.id])
    const listed = await ok('GET', `/v1/collections?search=escal`, undefined, keyA)
    expect(listed.data).toEqual([expect.objectContaining({ id: child.id, parent_collection_id: parent.id, collection_details: { child_collections_count: 0, prompts_count: 1 } })])
    expect(await ok('PUT', `/v1/collections/${child.id}`, { name: 'Escalated' }, keyA)).toMatchObject({ name: 'Escalated' })
    expectError(await call('DELETE', `/v1/collections/${parent.id}`, undefined, keyA), 409, 'AB07')
    expectError(await call('DELETE', `/v1/collections/${child.id}`, undefined, keyA), 409, 'AB07')
    // A prompt moves between collections of its workspace without a new version.
    const moved = await ok('PUT', `/v1/prompts/${inChild.id}`, { collection_id: parent.id }, keyA)
    expect(moved.prompt_version).toBe(1)
    expect(await ok('DELETE', `/v1/collections/${child.id}`, undefined, keyA)).toEqual({})
    await ok('DELETE', `/v1/prompts/${inChild.id}`, undefined, keyA)
    expect(await ok('DELETE', `/v1/collections/${parent.id}`, undefined, keyA)).toEqual({})
    expect((await auditEntries('resource_type=collection')).map((entry) => `${entry.action} ${entry.response_status_code}`)).toEqual(
      expect.arrayContaining(['create 200', 'update 200', 'delete 200', 'delete 409']),
    )
  })
})

describe('workspaces and roles', () => {
  let prompt: Json

  beforeAll(async () => {
    prompt = await createPrompt({ name: 'Isolated', virtual_key: virtualKeyA.slug })
  })

  it('answers 404 for another workspace’s prompt on every route, and changes nothing', async () => {
    const before = await ok('GET', `/v1/prompts/${prompt.id}`)
    for (const [method, path, body] of [
      ['GET', `/v1/prompts/${prompt.id}`, undefined],
      ['GET', `/v1/prompts/${prompt.slug}/versions`, undefined],
      ['GET', `/v1/prompts/${prompt.slug}/versions/1`, undefined],
      ['PUT', `/v1/prompts/${prompt.id}`, { name: 'taken' }],
      ['PUT', `/v1/prompts/${prompt.id}/versions/1`, { label_id: null }],
      ['PUT', `/v1/prompts/${prompt.id}/makeDefault`, { version: 1 }],
      ['DELETE', `/v1/prompts/${prompt.id}`, undefined],
    ] as const) {
      expectError(await call(method, path, body, keyB), 404, 'AB08', /^Prompt not found$/)
    }
    // An Admin API key naming another workspace than the prompt's gets the same answer.
    expectError(await call('GET', `/v1/prompts/${prompt.id}?workspace_id=${wsB}`), 404, 'AB08')
    expectError(await call('PUT', `/v1/prompts/${prompt.id}`, { workspace_id: wsB, name: 'x' }), 404, 'AB08')
    expectError(await call('DELETE', `/v1/prompts/${prompt.id}`, { workspace_id: wsB }), 404, 'AB08')
    expect(await ok('GET', `/v1/prompts/${prompt.id}?workspace_id=${wsA}`)).toEqual(before)
  })

  it('lets members read but not change (403), whatever scopes their key holds', async () => {
    expect((await ok('GET', `/v1/prompts/${prompt.id}`, undefined, memberKey)).id).toBe(prompt.id)
    expect((await ok('GET', '/v1/prompts', undefined, memberKey)).total).toBeGreaterThan(0)
    expectError(await call('PUT', `/v1/prompts/${prompt.id}`, { name: 'x' }, memberKey), 403, 'AB03')
    expectError(await call('PUT', `/v1/prompts/${prompt.id}/makeDefault`, { version: 1 }, memberKey), 403, 'AB03')
    expectError(await call('DELETE', `/v1/prompts/${prompt.id}`, undefined, memberKey), 403, 'AB03')
    expectError(await call('POST', '/v1/prompts', { name: 'n', string: 'x', parameters: {} }, memberKey), 403, 'AB03')
    expectError(await call('POST', '/v1/labels', { name: 'mine' }, memberKey), 403, 'AB03')
    expectError(await call('POST', '/v1/collections', { name: 'mine' }, memberKey), 403, 'AB03')
    expectError(await call('POST', '/v1/prompts/partials', { name: 'mine', string: 'x' }, memberKey), 403, 'AB03')
    expect((await ok('GET', `/v1/prompts/${prompt.id}`)).name).toBe('Isolated')
  })

  it('needs the prompts scopes: a key without prompts.publish cannot publish', async () => {
    const { key } = await gw.workspaceKey(['prompts.read', 'prompts.update'])
    const own = await createPrompt({ workspace_id: undefined }, keyA)
    expectError(await call('PUT', `/v1/prompts/${own.id}/makeDefault`, { version: 1 }, key), 403, 'AB03')
    await ok('DELETE', `/v1/prompts/${own.id}`, undefined, keyA)
  })

  it('refuses another workspace’s virtual key, collection or label by id, as not found', async () => {
    expectError(await call('POST', '/v1/prompts', { name: 'n', string: 'x', parameters: {}, virtual_key: virtualKeyB.id }, keyA), 404, 'AB08', /Virtual key not found/)
    const collectionB = await ok('POST', '/v1/collections', { name: 'B stuff' }, keyB)
    expectError(await call('POST', '/v1/prompts', { name: 'n', string: 'x', parameters: {}, collection_id: collectionB.id }, keyA), 404, 'AB08', /Collection not found/)
    const labelB = await ok('POST', '/v1/labels', { name: 'b-only' }, keyB)
    expectError(await call('PUT', `/v1/prompts/${prompt.id}/versions/1`, { label_id: labelB.id }, keyA), 404, 'AB08', /Label not found/)
    expectError(await call('PUT', `/v1/prompts/${prompt.id}/versions/1`, { label_id: 'b-only' }, keyA), 404, 'AB08', /Label not found/)
  })
})
