/**
 * The Admin API of saved configs on the real gateway (issue 15 item 1): create, list, get, update
 * (a new config makes a version, name/status/default alone none), versions newest first and paged;
 * the config schema's errors naming the path; virtual keys of the config's workspace only; custom
 * hosts through the allow-list; one default per workspace; delete refused while an API key or a
 * workspace has the config as its default, unless forced (which clears it there); API key and
 * workspace `defaults.config_id` checked against the workspace's configs; workspace delete counting
 * and taking configs; workspace isolation, scopes and read-only members; audit entries and the
 * `configs` change channel.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CHANGE_CHANNELS } from '../../core/channels.js'
import { ChangeNotifier } from '../../core/ports.js'
import { callAs, inviteUser, type Answer, type Json } from '../helpers/admin-calls.js'
import { startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'

const CONFIG_SCOPES = ['configs.create', 'configs.read', 'configs.list', 'configs.update', 'configs.delete']
const KEY_SCOPES = ['workspace_service_api_keys.create', 'workspace_service_api_keys.read', 'workspace_service_api_keys.update', 'completions.write']

let gw: TestGateway
let wsA: string
let keyA: string
let wsB: string
let keyB: string
/** A member of A whose user key holds every config scope: refused changes come from the role. */
let memberKey: string
let virtualKeyA: Json
let virtualKeyB: Json
/** Config ids published on the configs channel, in order. */
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

function fallback(): Json {
  return {
    strategy: { mode: 'fallback', on_status_codes: [429, 503] },
    retry: { attempts: 2 },
    targets: [
      { virtual_key: virtualKeyA.slug, override_params: { model: 'gpt-4o' } },
      { provider: 'openai', custom_host: 'http://127.0.0.1:9/v1', request_timeout: 5000 },
    ],
  }
}

async function auditEntries(query: string): Promise<Json[]> {
  return (await ok('GET', `/v1/audit-logs?${query}`)).data as Json[]
}

beforeAll(async () => {
  gw = await startTestGateway()
  gw.wiring.resolve(ChangeNotifier).subscribe(CHANGE_CHANNELS.configs, (message) => published.push(message))
  ;({ key: keyA, workspaceId: wsA } = await gw.workspaceKey([...CONFIG_SCOPES, ...KEY_SCOPES, 'virtual_keys.update']))
  ;({ key: keyB, workspaceId: wsB } = await gw.workspaceKey(CONFIG_SCOPES))
  virtualKeyA = await ok('POST', '/v1/virtual-keys', { workspace_id: wsA, name: 'openai A', provider: 'openai', key: 'sk-a-0123456789abcdef' })
  virtualKeyB = await ok('POST', '/v1/virtual-keys', { workspace_id: wsB, name: 'openai B', provider: 'openai', key: 'sk-b-0123456789abcdef' })
  const member = await inviteUser(gw.url, 'member', { id: wsA, role: 'member' }, CONFIG_SCOPES)
  memberKey = member.key as string
})

afterAll(async () => {
  await gw?.close()
})

describe('configs', () => {
  let created: Json

  it('creates a config: {id, slug, version_id, object}, version 1, published on the configs channel', async () => {
    published.length = 0
    created = await ok('POST', '/v1/configs', { name: 'Main routing', config: fallback() }, keyA)
    expect(Object.keys(created).sort()).toEqual(['id', 'object', 'slug', 'version_id'])
    expect(created.object).toBe('config')
    expect(created.slug).toMatch(/^pc-main-routing-[0-9a-f]{6}$/)
    expect(published).toEqual([created.id])
  })

  it('gets it by slug or id with its config as sent', async () => {
    const bySlug = await ok('GET', `/v1/configs/${created.slug}`, undefined, keyA)
    expect(bySlug).toEqual({
      object: 'config',
      id: created.id,
      slug: created.slug,
      name: 'Main routing',
      organisation_id: expect.any(String),
      workspace_id: wsA,
      is_default: 0,
      status: 'active',
      owner_id: expect.any(String),
      updated_by: expect.any(String),
      created_at: expect.any(String),
      last_updated_at: expect.any(String),
      config: fallback(),
      version_id: created.version_id,
      version: 1,
    })
    expect(await ok('GET', `/v1/configs/${created.id}`, undefined, keyA)).toEqual(bySlug)
    // An Admin API key reaches it too, and may name its workspace.
    expect(await ok('GET', `/v1/configs/${created.slug}?workspace_id=${wsA}`)).toEqual(bySlug)
  })

  it('lists the workspace’s configs without their JSON, paged', async () => {
    const second = await ok('POST', '/v1/configs', { name: 'Second', config: { retry: { attempts: 1 } } }, keyA)
    const listed = await ok('GET', '/v1/configs', undefined, keyA)
    expect(listed).toMatchObject({ object: 'list', total: 2 })
    expect(listed.data.map((item: Json) => item.id)).toEqual([created.id, second.id])
    expect(listed.data[0]).toMatchObject({ object: 'config', slug: created.slug, workspace_id: wsA, version: 1, version_id: created.version_id })
    expect(listed.data[0].config).toBeUndefined()
    expect((await ok('GET', '/v1/configs?page_size=1&current_page=1', undefined, keyA)).data.map((item: Json) => item.id)).toEqual([second.id])
    // Admin API key: every workspace, or the one it names; B lists only B's.
    expect((await ok('GET', `/v1/configs?workspace_id=${wsA}`)).total).toBe(2)
    expect((await ok('GET', '/v1/configs', undefined, keyB)).total).toBe(0)
    await ok('DELETE', `/v1/configs/${second.id}`, undefined, keyA)
  })

  it('makes a new version for every update that sends config, none for name or status alone', async () => {
    published.length = 0
    const renamed = await ok('PUT', `/v1/configs/${created.slug}`, { name: 'Renamed' }, keyA)
    expect(renamed).toMatchObject({ name: 'Renamed', version: 1, version_id: created.version_id, config: fallback() })
    const next = { ...fallback(), retry: { attempts: 4, on_status_codes: [500] } }
    const updated = await ok('PUT', `/v1/configs/${created.slug}`, { config: next }, keyA)
    expect(updated).toMatchObject({ id: created.id, slug: created.slug, name: 'Renamed', version: 2, config: next })
    expect(updated.version_id).not.toBe(created.version_id)
    // The same JSON again is still a new version: every update of config makes one.
    const again = await ok('PUT', `/v1/configs/${created.slug}`, { config: next, status: 'archived' }, keyA)
    expect(again).toMatchObject({ version: 3, status: 'archived' })
    await ok('PUT', `/v1/configs/${created.slug}`, { status: 'active' }, keyA)
    expect(await ok('GET', `/v1/configs/${created.id}`, undefined, keyA)).toMatchObject({ version: 3, status: 'active', config: next })
    expect(published).toEqual([created.id, created.id, created.id, created.id])

    const versions = await ok('GET', `/v1/configs/${created.slug}/versions`, undefined, keyA)
    expect(versions).toMatchObject({ object: 'list', total: 3 })
    expect(versions.data.map((item: Json) => item.version)).toEqual([3, 2, 1])
    expect(versions.data[2]).toMatchObject({ object: 'config', id: created.id, slug: created.slug, version_id: created.version_id, config: fallback(), created_by: expect.any(String) })
    expect(versions.data[1]).toMatchObject({ version_id: updated.version_id, config: next })
    const paged = await ok('GET', `/v1/configs/${created.id}/versions?page_size=1&current_page=2`, undefined, keyA)
    expect(paged).toMatchObject({ total: 3, data: [expect.objectContaining({ version: 1 })] })
  })

  it('refuses a config the schema refuses, naming each offending path, and stores nothing', async () => {
    const bad = fallback()
    bad.targets[1].retry = { attempts: 50 }
    bad.targets[0].retyr = { attempts: 1 }
    const answer = await call('POST', '/v1/configs', { name: 'Bad', config: bad }, keyA)
    expectError(answer, 400, 'AB01', /config\.targets\[1\]\.retry\.attempts: /)
    expect(answer.body.data.message).toMatch(/config\.targets\[0\]\.retyr: unknown field/)
    expectError(await call('POST', '/v1/configs', { name: 'Bad', config: { strategy: { mode: 'fallback' } } }, keyA), 400, 'AB01', /^config\.targets: /)
    expectError(await call('POST', '/v1/configs', { name: 'Bad', config: [] }, keyA), 400, 'AB01', /^config: /)
    expectError(await call('POST', '/v1/configs', { name: 'Bad' }, keyA), 400, 'AB01', /^config: /)
    expectError(await call('PUT', `/v1/configs/${created.id}`, { config: { targets: [] } }, keyA), 400, 'AB01', /config\./)
    expectError(await call('POST', '/v1/configs', { name: 'Bad', config: { provider: 'no-such-provider' } }, keyA), 400, 'AB01', /^config\.provider: unknown provider/)
    expect((await ok('GET', '/v1/configs', undefined, keyA)).total).toBe(1)
    expect((await ok('GET', `/v1/configs/${created.id}`, undefined, keyA)).version).toBe(3)
  })

  it('refuses a virtual key of another workspace exactly like an unknown one, naming the path', async () => {
    const other = { strategy: { mode: 'fallback' }, targets: [{ virtual_key: virtualKeyA.slug }, { virtual_key: virtualKeyB.slug }] }
    const foreign = await call('POST', '/v1/configs', { name: 'Foreign', config: other }, keyA)
    expectError(foreign, 400, 'AB01', /^config\.targets\[1\]\.virtual_key: no virtual key ".*" in this workspace$/)
    const byId = await call('POST', '/v1/configs', { name: 'Foreign', config: { virtual_key: virtualKeyB.id } }, keyA)
    expectError(byId, 400, 'AB01', /^config\.virtual_key: no virtual key/)
    const unknown = await call('POST', '/v1/configs', { name: 'Unknown', config: { virtual_key: 'vk-nope-000000' } }, keyA)
    expect(unknown.body.data.message.replace('vk-nope-000000', 'X')).toBe(byId.body.data.message.replace(virtualKeyB.id, 'X'))
    expect((await ok('GET', '/v1/configs', undefined, keyA)).total).toBe(1)
  })

  it('checks custom hosts against the allow-list; pointing a virtual key at another host needs virtual_keys.update', async () => {
    expectError(
      await call('POST', '/v1/configs', { name: 'Metadata', config: { provider: 'openai', custom_host: 'http://169.254.169.254/latest' } }, keyA),
      400,
      'AB01',
      /^config\.custom_host: not allowed/,
    )
    const paired = { strategy: { mode: 'single' }, custom_host: 'http://127.0.0.1:9/v1', targets: [{ virtual_key: virtualKeyA.slug }] }
    const saved = await ok('POST', '/v1/configs', { name: 'Paired', config: paired }, keyA)
    expect((await ok('GET', `/v1/configs/${saved.id}`, undefined, keyA)).config).toEqual(paired)
    // A config editor without virtual_keys.update cannot send the stored credential elsewhere.
    const { key: editor, workspaceId } = await gw.workspaceKey(CONFIG_SCOPES)
    const vk = await ok('POST', '/v1/virtual-keys', { workspace_id: workspaceId, name: 'vk', provider: 'openai', key: 'sk-c-0123456789abcdef' })
    expectError(
      await call('POST', '/v1/configs', { name: 'Paired', config: { virtual_key: vk.slug, custom_host: 'http://127.0.0.1:9/v1' } }, editor),
      403,
      'AB03',
      /^config\.custom_host: pointing virtual key .* needs the virtual_keys\.update scope$/,
    )
    expect((await ok('POST', '/v1/configs', { name: 'Plain', config: { virtual_key: vk.slug } }, editor)).object).toBe('config')
    await ok('DELETE', `/v1/configs/${saved.id}`, undefined, keyA)
  })

  it('keeps one default per workspace: marking one unmarks the previous default', async () => {
    const first = await ok('POST', '/v1/configs', { name: 'Default one', config: { retry: { attempts: 1 } }, is_default: 1 }, keyA)
    expect((await ok('GET', `/v1/configs/${first.id}`, undefined, keyA)).is_default).toBe(1)
    published.length = 0
    const second = await ok('POST', '/v1/configs', { name: 'Default two', config: { retry: { attempts: 2 } }, isDefault: 1 }, keyA)
    expect(published).toEqual([second.id, first.id])
    expect((await ok('GET', `/v1/configs/${first.id}`, undefined, keyA)).is_default).toBe(0)
    expect((await ok('GET', `/v1/configs/${second.id}`, undefined, keyA)).is_default).toBe(1)
    await ok('PUT', `/v1/configs/${first.id}`, { is_default: true }, keyA)
    expect((await ok('GET', `/v1/configs/${second.id}`, undefined, keyA)).is_default).toBe(0)
    expect((await ok('GET', `/v1/configs/${first.id}`, undefined, keyA)).is_default).toBe(1)
    await ok('DELETE', `/v1/configs/${first.id}`, undefined, keyA)
    await ok('DELETE', `/v1/configs/${second.id}`, undefined, keyA)
  })
})

describe('default configs of API keys and workspaces', () => {
  let config: Json
  let configB: Json

  beforeAll(async () => {
    config = await ok('POST', '/v1/configs', { name: 'Key default', config: { retry: { attempts: 1 } } }, keyA)
    configB = await ok('POST', '/v1/configs', { name: 'B only', config: { retry: { attempts: 1 } } }, keyB)
  })

  it('checks an API key’s defaults.config_id against its workspace’s configs, storing the slug', async () => {
    const byId = await ok('POST', '/v1/api-keys/workspace/service', { name: 'k', scopes: ['completions.write'], defaults: { config_id: config.id, metadata: { team: 'a' } } }, keyA)
    expect((await ok('GET', `/v1/api-keys/${byId.id}`, undefined, keyA)).defaults).toEqual({ config_id: config.slug, metadata: { team: 'a' } })
    for (const ref of ['pc-unknown-000000', configB.slug, configB.id]) {
      expectError(
        await call('POST', '/v1/api-keys/workspace/service', { name: 'k', scopes: ['completions.write'], defaults: { config_id: ref } }, keyA),
        400,
        'AB01',
        /^defaults\.config_id: no config ".*" in this workspace$/,
      )
      expectError(await call('PUT', `/v1/api-keys/${byId.id}`, { defaults: { config_id: ref } }, keyA), 400, 'AB01', /^defaults\.config_id: /)
    }
    expect((await ok('GET', `/v1/api-keys/${byId.id}`, undefined, keyA)).defaults.config_id).toBe(config.slug)
    await ok('PUT', `/v1/api-keys/${byId.id}`, { defaults: { config_id: null } }, keyA)
    expect((await ok('GET', `/v1/api-keys/${byId.id}`, undefined, keyA)).defaults.config_id).toBeNull()
    await ok('DELETE', `/v1/api-keys/${byId.id}`)
  })

  it('checks a workspace’s defaults.config_id the same way', async () => {
    expectError(await call('PUT', `/v1/admin/workspaces/${wsA}`, { defaults: { config_id: configB.slug } }), 400, 'AB01', /^defaults\.config_id: /)
    expectError(await call('POST', '/v1/admin/workspaces', { name: 'new', defaults: { config_id: config.slug } }), 400, 'AB01', /^defaults\.config_id: /)
    const workspace = await ok('PUT', `/v1/admin/workspaces/${wsA}`, { defaults: { config_id: config.id } })
    expect(workspace.defaults.config_id).toBe(config.slug)
    await ok('PUT', `/v1/admin/workspaces/${wsA}`, { defaults: null })
  })

  it('refuses to delete a config an API key or workspace has as its default (409), unless forced, which clears it there', async () => {
    const key = await ok('POST', '/v1/api-keys/workspace/service', { name: 'k', scopes: ['completions.write'], defaults: { config_id: config.slug, metadata: { a: 'b' } } }, keyA)
    await ok('PUT', `/v1/admin/workspaces/${wsA}`, { defaults: { config_id: config.slug } })
    expectError(await call('DELETE', `/v1/configs/${config.slug}`, undefined, keyA), 409, 'AB07', /default config .* of 1 API key and 1 workspace.*force=true/)
    expectError(await call('DELETE', `/v1/configs/${config.slug}?force=false`, undefined, keyA), 409, 'AB07')
    expect((await ok('GET', `/v1/configs/${config.id}`, undefined, keyA)).id).toBe(config.id)
    published.length = 0
    expect(await ok('DELETE', `/v1/configs/${config.slug}?force=true`, undefined, keyA)).toEqual({})
    expect(published).toEqual([config.id])
    expectError(await call('GET', `/v1/configs/${config.id}`, undefined, keyA), 404, 'AB08', /^Config not found$/)
    expectError(await call('GET', `/v1/configs/${config.id}/versions`, undefined, keyA), 404, 'AB08')
    expect((await ok('GET', `/v1/api-keys/${key.id}`, undefined, keyA)).defaults).toEqual({ config_id: null, metadata: { a: 'b' } })
    expect((await ok('GET', `/v1/admin/workspaces/${wsA}`)).defaults.config_id).toBeNull()
    expect((await auditEntries('resource_type=config&action=delete')).map((entry) => entry.response_status_code)).toEqual(expect.arrayContaining([409, 200]))
  })

  it('counts configs as workspace dependants; force_delete takes them', async () => {
    const { key, workspaceId } = await gw.workspaceKey(CONFIG_SCOPES)
    const doomed = await ok('POST', '/v1/configs', { name: 'Doomed', config: { retry: { attempts: 1 } } }, key)
    await ok('DELETE', `/v1/api-keys/${(await ok('GET', `/v1/api-keys?workspace_id=${workspaceId}`)).data[0].id}`)
    expectError(await call('DELETE', `/v1/admin/workspaces/${workspaceId}`), 409, 'AB07', /1 configs/)
    published.length = 0
    expect(await ok('DELETE', `/v1/admin/workspaces/${workspaceId}`, { force_delete: true })).toEqual({})
    expect(published).toEqual([doomed.id])
    expectError(await call('GET', `/v1/configs/${doomed.id}`), 404, 'AB08')
  })
})

describe('access', () => {
  let config: Json

  beforeAll(async () => {
    config = await ok('POST', '/v1/configs', { name: 'Isolated', config: { retry: { attempts: 1 } } }, keyA)
  })

  it('answers 404 for another workspace’s config on every route, and changes nothing', async () => {
    const before = await ok('GET', `/v1/configs/${config.id}`, undefined, keyA)
    for (const [method, path, body] of [
      ['GET', `/v1/configs/${config.id}`, undefined],
      ['GET', `/v1/configs/${config.slug}`, undefined],
      ['GET', `/v1/configs/${config.slug}/versions`, undefined],
      ['PUT', `/v1/configs/${config.id}`, { name: 'taken' }],
      ['PUT', `/v1/configs/${config.slug}`, { config: { retry: { attempts: 2 } } }],
      ['DELETE', `/v1/configs/${config.id}`, undefined],
      ['DELETE', `/v1/configs/${config.id}?force=true`, undefined],
    ] as const) {
      expectError(await call(method, path, body, keyB), 404, 'AB08', /^Config not found$/)
    }
    // An Admin API key naming another workspace than the config's gets the same answer.
    expectError(await call('GET', `/v1/configs/${config.id}?workspace_id=${wsB}`), 404, 'AB08', /^Config not found$/)
    expectError(await call('PUT', `/v1/configs/${config.id}`, { workspace_id: wsB, name: 'x' }), 404, 'AB08')
    expectError(await call('DELETE', `/v1/configs/${config.id}`, { workspace_id: wsB }), 404, 'AB08')
    expect(await ok('GET', `/v1/configs/${config.id}`, undefined, keyA)).toEqual(before)
  })

  it('lets members read and list but not create, change or delete (403)', async () => {
    expect((await ok('GET', `/v1/configs/${config.id}`, undefined, memberKey)).id).toBe(config.id)
    expect((await ok('GET', '/v1/configs', undefined, memberKey)).total).toBeGreaterThan(0)
    expect((await ok('GET', `/v1/configs/${config.id}/versions`, undefined, memberKey)).total).toBe(1)
    expectError(await call('POST', '/v1/configs', { name: 'n', config: {} }, memberKey), 403, 'AB03')
    expectError(await call('PUT', `/v1/configs/${config.id}`, { name: 'x' }, memberKey), 403, 'AB03')
    expectError(await call('DELETE', `/v1/configs/${config.id}`, undefined, memberKey), 403, 'AB03')
    expect((await ok('GET', `/v1/configs/${config.id}`, undefined, keyA)).name).toBe('Isolated')
  })

  it('needs the configs scopes: list does not imply read, and each change its own scope', async () => {
    const { key: lister } = await gw.workspaceKey(['configs.list'])
    expect((await ok('GET', '/v1/configs', undefined, lister)).object).toBe('list')
    expectError(await call('GET', `/v1/configs/${config.id}`, undefined, lister), 403, 'AB03')
    const { key: reader } = await gw.workspaceKey(['configs.read'])
    expectError(await call('GET', '/v1/configs', undefined, reader), 403, 'AB03')
    expectError(await call('POST', '/v1/configs', { name: 'n', config: {} }, reader), 403, 'AB03')
    const { key: updater } = await gw.workspaceKey(['configs.update'])
    expectError(await call('DELETE', `/v1/configs/${config.id}`, undefined, updater), 403, 'AB03')
  })

  it('requires workspace_id with an Admin API key on create', async () => {
    expectError(await call('POST', '/v1/configs', { name: 'n', config: {} }), 400, 'AB01', /^workspace_id: required/)
    const made = await ok('POST', '/v1/configs', { name: 'By admin', config: {}, workspace_id: wsB })
    expect((await ok('GET', `/v1/configs/${made.slug}`, undefined, keyB)).workspace_id).toBe(wsB)
  })

  it('audits every change, refused ones included, in the config’s workspace', async () => {
    const entries = await auditEntries('resource_type=config')
    const actions = entries.map((entry) => `${entry.action} ${entry.response_status_code}`)
    expect(actions).toEqual(expect.arrayContaining(['create 200', 'update 200', 'delete 200', 'create 400', 'update 404', 'create 403', 'delete 409']))
    const createdEntry = entries.find((entry) => entry.action === 'create' && entry.response_status_code === 200 && entry.resource_id === config.id)
    expect(createdEntry).toMatchObject({ method: 'POST', uri: '/v1/configs' })
    expect(createdEntry?.request_body).toContain('"retry"')
  })

  it('describes every config operation in the OpenAPI document', async () => {
    const document = await ok('GET', '/v1/openapi.json')
    expect(Object.keys(document.paths['/v1/configs'] ?? {}).sort()).toEqual(['get', 'post'])
    expect(Object.keys(document.paths['/v1/configs/{configId}'] ?? {}).sort()).toEqual(['delete', 'get', 'put'])
    expect(document.paths['/v1/configs/{configId}/versions'].get['x-gateway-scopes']).toEqual(['configs.read'])
    expect(document.paths['/v1/configs'].post.requestBody.content['application/json'].schema.required).toEqual(['name', 'config'])
  })
})
