/**
 * The prompt Admin API against hostile callers: oversized and deeply nested templates and settings
 * are refused with 400 (never stored, never a 500); names carrying Mustache are stored as inert data;
 * another workspace's virtual key, collection, label, prompt version or partial referenced by id is
 * answered exactly like one that does not exist (404, same message), and nothing changes.
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { callAs, type Answer, type Json } from '../helpers/admin-calls.js'
import { startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'
import { MAX_TEMPLATE_BYTES } from '../../plugins/admin-api/prompt-templates.js'

const PROMPT_SCOPES = ['prompts.create', 'prompts.read', 'prompts.list', 'prompts.update', 'prompts.delete', 'prompts.publish', 'virtual_keys.create']

let gw: TestGateway
let keyA: string
let keyB: string
let wsA: string

function call(method: string, path: string, body?: unknown, key: string = keyA): Promise<Answer> {
  return callAs(gw.url, key, method, path, body)
}

async function ok(method: string, path: string, body?: unknown, key?: string): Promise<Json> {
  const answer = await call(method, path, body, key)
  expect(answer.status, `${method} ${path}: ${answer.text}`).toBe(200)
  return answer.body
}

function expectRefused(answer: Answer, status: number, message: RegExp): void {
  expect(answer.status, answer.text.slice(0, 500)).toBe(status)
  expect(answer.body.success).toBe(false)
  expect(answer.body.data.message).toMatch(message)
}

/** How many prompts workspace A has (to show a refused create stored nothing). */
async function promptCount(): Promise<number> {
  return (await ok('GET', '/v1/prompts', undefined, keyA)).total
}

/** `levels` nested arrays around `inner`. */
function nested(levels: number, inner: unknown = 1): unknown {
  let value: unknown = inner
  for (let i = 0; i < levels; i++) value = [value]
  return value
}

beforeAll(async () => {
  gw = await startTestGateway()
  ;({ key: keyA, workspaceId: wsA } = await gw.workspaceKey(PROMPT_SCOPES))
  ;({ key: keyB } = await gw.workspaceKey(PROMPT_SCOPES))
})

afterAll(async () => {
  await gw?.close()
})

describe('oversized and deep bodies', () => {
  it('refuses a template over 1 MiB, in characters or in UTF-8 bytes, and stores nothing', async () => {
    const before = await promptCount()
    expectRefused(await call('POST', '/v1/prompts', { name: 'big', string: 'x'.repeat(MAX_TEMPLATE_BYTES + 1), parameters: {} }), 400, /^string: /)
    // Under the limit in characters, over it in bytes.
    expectRefused(await call('POST', '/v1/prompts', { name: 'wide', string: '€'.repeat(MAX_TEMPLATE_BYTES / 3 + 1), parameters: {} }), 400, new RegExp(`^string: must be at most ${MAX_TEMPLATE_BYTES} bytes`))
    expectRefused(await call('POST', '/v1/prompts/partials', { name: 'wide', string: '€'.repeat(MAX_TEMPLATE_BYTES / 3 + 1) }), 400, /^string: must be at most/)
    expect(await promptCount()).toBe(before)
    // Exactly at the limit is fine.
    const fits = await ok('POST', '/v1/prompts', { name: 'fits', string: 'y'.repeat(MAX_TEMPLATE_BYTES), parameters: {} })
    await ok('DELETE', `/v1/prompts/${fits.id}`)
  })

  it('refuses a template of many tags over the limit before parsing it, and a body over the JSON limit with 413', async () => {
    expectRefused(await call('POST', '/v1/prompts', { name: 'tags', string: '{{a}}'.repeat(MAX_TEMPLATE_BYTES / 5 + 1), parameters: {} }), 400, /^string: /)
    const response = await fetch(`${gw.url}/v1/prompts`, {
      method: 'POST',
      headers: { 'x-gateway-api-key': keyA, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'huge', string: 'z'.repeat(11 * 1024 * 1024), parameters: {} }),
    })
    expect(response.status).toBe(413)
    await response.arrayBuffer()
  })

  it('refuses a chat template nested deeper than 64 levels inside the string (400, not a 500)', async () => {
    // Built as text: JSON.stringify of a value this deep would overflow the test's own stack.
    const template = `[{"role":"user","content":"hi","extra":${'['.repeat(5000)}1${']'.repeat(5000)}}]`
    expectRefused(await call('POST', '/v1/prompts', { name: 'deep', string: template, parameters: {} }), 400, /^string: the chat template nests objects and arrays deeper than 64 levels/)
    const shallow = JSON.stringify([{ role: 'user', content: 'hi', extra: nested(20) }])
    const made = await ok('POST', '/v1/prompts', { name: 'shallow', string: shallow, parameters: {} })
    expectRefused(await call('PUT', `/v1/prompts/${made.id}`, { patch: true, string: template }), 400, /^string: the chat template nests/)
    await ok('DELETE', `/v1/prompts/${made.id}`)
  })

  it('refuses deep or oversized parameters, tools and metadata', async () => {
    expectRefused(await call('POST', '/v1/prompts', { name: 'deep', string: 'x', parameters: { a: nested(100) } }), 400, /deeper than 64 levels/)
    expectRefused(await call('POST', '/v1/prompts', { name: 'big', string: 'x', parameters: { stop: 's'.repeat(300 * 1024) } }), 400, /^parameters: must be at most 262144 characters of JSON/)
    expectRefused(await call('POST', '/v1/prompts', { name: 'big', string: 'x', parameters: {}, template_metadata: { note: 'm'.repeat(300 * 1024) } }), 400, /^template_metadata: must be at most/)
    expectRefused(await call('POST', '/v1/prompts', { name: 'many', string: 'x', parameters: {}, tools: Array.from({ length: 200 }, () => ({ type: 'function' })) }), 400, /^tools: /)
  })

  it('refuses saved parameters that would replace the rendered messages or prompt', async () => {
    expectRefused(await call('POST', '/v1/prompts', { name: 'p', string: 'x', parameters: { messages: [{ role: 'system', content: 'pwned' }] } }), 400, /^parameters: must not contain messages or prompt/)
    expectRefused(await call('POST', '/v1/prompts', { name: 'p', string: 'x', parameters: { prompt: 'pwned' } }), 400, /^parameters: must not contain messages or prompt/)
  })
})

describe('Mustache in names', () => {
  it('stores names with Mustache as inert text; slugs keep only letters, digits and dashes', async () => {
    const name = '{{#admin}}{{>secrets}}{{{raw}}}{{/admin}} "}] ]'
    const made = await ok('POST', '/v1/prompts', { name, string: 'Hello {{who}}', parameters: {} })
    expect(made.slug).toMatch(/^pp-admin-secrets-raw-ad-[0-9a-f]{6}$/)
    const got = await ok('GET', `/v1/prompts/${made.slug}`)
    expect(got.name).toBe(name)
    expect(got.string).toBe('Hello {{who}}')
    const collection = await ok('POST', '/v1/collections', { name })
    expect((await ok('GET', `/v1/collections/${collection.id}`)).name).toBe(name)
    await ok('DELETE', `/v1/prompts/${made.id}`)
  })

  it('refuses partial names a tag could not call, and label names with @, white space or control characters', async () => {
    for (const name of ['a}}', '{{x}}', 'a b', '>x', 'a\nb', '']) {
      expectRefused(await call('POST', '/v1/prompts/partials', { name, string: 'x' }), 400, /^name: /)
    }
    for (const name of ['prod@1', 'a b', 'a\u0000', 'a\tb', 'latest', 'default', '42', '{{x}}']) {
      expectRefused(await call('POST', '/v1/labels', { name }), 400, /^name: /)
    }
  })
})

describe('another workspace’s resources, referenced by id', () => {
  let promptA: Json
  let promptB: Json
  let collectionB: Json
  let labelB: Json
  let virtualKeyB: Json
  let partialB: Json

  beforeAll(async () => {
    promptA = await ok('POST', '/v1/prompts', { name: 'mine', string: 'A {{x}}', parameters: {} }, keyA)
    promptB = await ok('POST', '/v1/prompts', { name: 'theirs', string: 'B {{x}}', parameters: {} }, keyB)
    collectionB = await ok('POST', '/v1/collections', { name: 'theirs' }, keyB)
    labelB = await ok('POST', '/v1/labels', { name: 'theirs' }, keyB)
    virtualKeyB = await ok('POST', '/v1/virtual-keys', { name: 'theirs', provider: 'openai', key: 'sk-theirs-0123456789' }, keyB)
    partialB = await ok('POST', '/v1/prompts/partials', { name: 'theirs', string: 'B' }, keyB)
  })

  /** The refusal for `theirs` is the one for an id that does not exist: nothing tells them apart. */
  async function sameAsUnknown(send: (id: string) => Promise<Answer>, theirs: string, message: RegExp): Promise<void> {
    const foreign = await send(theirs)
    const unknown = await send(randomUUID())
    expectRefused(foreign, 404, message)
    expect(foreign.body).toEqual(unknown.body)
  }

  it('a virtual key, collection or parent collection of another workspace is not found', async () => {
    await sameAsUnknown((id) => call('POST', '/v1/prompts', { name: 'n', string: 'x', parameters: {}, virtual_key: id }), virtualKeyB.id, /^Virtual key not found$/)
    await sameAsUnknown((id) => call('POST', '/v1/prompts', { name: 'n', string: 'x', parameters: {}, virtual_key: id }), virtualKeyB.slug, /^Virtual key not found$/)
    await sameAsUnknown((id) => call('POST', '/v1/prompts', { name: 'n', string: 'x', parameters: {}, collection_id: id }), collectionB.id, /^Collection not found$/)
    await sameAsUnknown((id) => call('POST', '/v1/prompts/partials', { name: 'n', string: 'x', collection_id: id }), collectionB.slug, /^Collection not found$/)
    await sameAsUnknown((id) => call('POST', '/v1/collections', { name: 'n', parent_collection_id: id }), collectionB.id, /^Parent collection not found$/)
    await sameAsUnknown((id) => call('PUT', `/v1/prompts/${promptA.id}`, { collection_id: id }), collectionB.id, /^Collection not found$/)
    await sameAsUnknown((id) => call('PUT', `/v1/prompts/${promptA.id}`, { patch: true, virtual_key: id }), virtualKeyB.id, /^Virtual key not found$/)
    await sameAsUnknown((id) => call('GET', `/v1/prompts?collection_id=${id}`), collectionB.id, /^Collection not found$/)
    const mine = await ok('GET', `/v1/prompts/${promptA.id}`)
    expect(mine).toMatchObject({ latest_version: 1, virtual_key: null })
    expect((await ok('GET', '/v1/prompts?search=n', undefined, keyA)).data.filter((item: Json) => item.name === 'n')).toEqual([])
  })

  it('a label of another workspace cannot be put on a version, by id or by name', async () => {
    await sameAsUnknown((id) => call('PUT', `/v1/prompts/${promptA.id}/versions/1`, { label_id: id }), labelB.id, /^Label not found$/)
    expectRefused(await call('PUT', `/v1/prompts/${promptA.id}/versions/1`, { label_id: 'theirs' }), 404, /^Label not found$/)
    expect((await ok('GET', `/v1/prompts/${promptA.id}/versions/1`)).prompt_version_label_id).toBeNull()
  })

  it('a version of another prompt is not one of this prompt’s', async () => {
    const theirVersion = promptB.version_id as string
    await sameAsUnknown((id) => call('GET', `/v1/prompts/${promptA.id}/versions/${id}`), theirVersion, /^Prompt version not found$/)
    await sameAsUnknown((id) => call('PUT', `/v1/prompts/${promptA.id}/versions/${id}`, { label_id: null }), theirVersion, /^Prompt version not found$/)
  })

  it('their prompts, partials, labels and collections are not found on their own paths, and stay unchanged', async () => {
    await sameAsUnknown((id) => call('PUT', `/v1/prompts/${id}/makeDefault`, { version: 1 }), promptB.slug, /^Prompt not found$/)
    await sameAsUnknown((id) => call('DELETE', `/v1/prompts/${id}`), promptB.id, /^Prompt not found$/)
    await sameAsUnknown((id) => call('PUT', `/v1/prompts/partials/${id}`, { string: 'pwned' }), partialB.id, /^Partial not found$/)
    await sameAsUnknown((id) => call('DELETE', `/v1/labels/${id}`), labelB.id, /^Label not found$/)
    await sameAsUnknown((id) => call('PUT', `/v1/collections/${id}`, { name: 'pwned' }), collectionB.id, /^Collection not found$/)
    expect((await ok('GET', `/v1/prompts/partials/${partialB.id}`, undefined, keyB)).string).toBe('B')
    expect((await ok('GET', `/v1/collections/${collectionB.id}`, undefined, keyB)).name).toBe('theirs')
    expect((await ok('GET', `/v1/prompts/${promptB.id}`, undefined, keyB)).name).toBe('theirs')
  })

  it('a workspace key cannot name another workspace to create there', async () => {
    const before = (await ok('GET', '/v1/prompts', undefined, keyB)).total
    expectRefused(await call('POST', '/v1/prompts', { workspace_id: (await ok('GET', `/v1/prompts/${promptB.id}`, undefined, keyB)).workspace_id, name: 'n', string: 'x', parameters: {} }), 404, /^Workspace not found$/)
    expect((await ok('GET', '/v1/prompts', undefined, keyB)).total).toBe(before)
    // Its own workspace, named, is fine.
    const own = await ok('POST', '/v1/prompts', { workspace_id: wsA, name: 'own', string: 'x', parameters: {} })
    await ok('DELETE', `/v1/prompts/${own.id}`)
  })

  it('the Admin API key reaches both workspaces, but only by naming the right one', async () => {
    const bWorkspace = (await ok('GET', `/v1/prompts/${promptB.id}`, undefined, keyB)).workspace_id
    expectRefused(await callAs(gw.url, TEST_ADMIN_KEY, 'GET', `/v1/prompts/${promptA.id}?workspace_id=${bWorkspace}`), 404, /^Prompt not found$/)
    expect((await callAs(gw.url, TEST_ADMIN_KEY, 'GET', `/v1/prompts/${promptA.id}?workspace_id=${wsA}`)).status).toBe(200)
  })
})
