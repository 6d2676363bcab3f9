/**
 * The Admin API's template checks (plugins/admin-api/prompt-templates.ts) and where prompt paths
 * route: chat or completion template, Mustache syntax errors named, size and depth bounds; the
 * partials routes match before `/v1/prompts/:promptId`, and no admin route takes the data-plane
 * prompt paths.
 */
import { describe, expect, it } from 'vitest'
import { RouteTable } from '../../../core/routes.js'
import { checkPartialTemplate, checkPromptTemplate, MAX_TEMPLATE_BYTES, mustacheProblem, newSlug } from '../../../plugins/admin-api/prompt-templates.js'

const CHAT = JSON.stringify([
  { role: 'system', content: 'You are {{persona}}.' },
  { role: 'user', content: [{ type: 'text', text: 'Tell me about {{topic}}{{#detail}} in detail{{/detail}}.' }, { type: 'image_url', image_url: { url: 'https://x/y.png' } }] },
  { role: 'assistant', content: null, tool_calls: [] },
])

describe('checkPromptTemplate', () => {
  it('reads a JSON array of messages as a chat template and anything else as plain text', () => {
    expect(checkPromptTemplate(CHAT, undefined)).toEqual({ ok: true, isRawTemplate: false })
    expect(checkPromptTemplate('Summarise {{text}}', undefined)).toEqual({ ok: true, isRawTemplate: true })
    // Llama-style prompts start with a bracket but are not JSON: plain text.
    expect(checkPromptTemplate('[INST] {{question}} [/INST]', undefined)).toEqual({ ok: true, isRawTemplate: true })
    expect(checkPromptTemplate('{"role": "user"}', undefined)).toEqual({ ok: true, isRawTemplate: true })
  })

  it('follows is_raw_template: 1 keeps a JSON array as text, 0 requires a chat template', () => {
    expect(checkPromptTemplate(CHAT, true)).toEqual({ ok: true, isRawTemplate: true })
    expect(checkPromptTemplate('plain {{x}}', false)).toEqual({ ok: false, message: 'string: must be a JSON array of messages when is_raw_template is 0' })
  })

  it('names the message and the Mustache problem', () => {
    const unclosed = checkPromptTemplate(JSON.stringify([{ role: 'user', content: 'ok' }, { role: 'user', content: 'Hi {{name' }]), undefined)
    expect(unclosed).toMatchObject({ ok: false })
    expect(!unclosed.ok && unclosed.message).toMatch(/^string: messages\[1\]\.content: Mustache syntax error: Unclosed tag/)
    const section = checkPromptTemplate(JSON.stringify([{ role: 'user', content: [{ type: 'text', text: '{{#a}}x{{/b}}' }] }]), undefined)
    expect(!section.ok && section.message).toMatch(/^string: messages\[0\]\.content\[0\]\.text: Mustache syntax error: Unclosed section "a"/)
    const text = checkPromptTemplate('{{/end}}', undefined)
    expect(!text.ok && text.message).toMatch(/^string: Mustache syntax error: Unopened section "end"/)
  })

  it('refuses messages that are not messages', () => {
    expect(checkPromptTemplate('[]', undefined)).toEqual({ ok: false, message: 'string: a chat template needs at least one message' })
    expect(checkPromptTemplate('["hi"]', undefined)).toEqual({ ok: false, message: 'string: messages[0]: must be an object with role and content' })
    expect(checkPromptTemplate('[{"role":"wizard","content":"x"}]', undefined)).toMatchObject({ ok: false, message: expect.stringMatching(/^string: messages\[0\]\.role: must be one of system/) })
    expect(checkPromptTemplate('[{"role":"user","content":42}]', undefined)).toEqual({ ok: false, message: 'string: messages[0].content: must be a string or an array of content parts' })
    expect(checkPromptTemplate('[{"role":"user"}]', undefined)).toMatchObject({ ok: false })
    expect(checkPromptTemplate('[{"role":"user","content":[{"text":"x"}]}]', undefined)).toEqual({ ok: false, message: 'string: messages[0].content[0]: must be an object with a type' })
    expect(checkPromptTemplate('[{"role":"user","content":[{"type":"text","text":1}]}]', undefined)).toEqual({ ok: false, message: 'string: messages[0].content[0].text: must be a string' })
  })

  it('refuses a chat template nested deeper than the JSON limit, and one over 1 MiB', () => {
    const deep = `[{"role":"user","content":"x","extra":${'['.repeat(100)}${']'.repeat(100)}}]`
    expect(checkPromptTemplate(deep, undefined)).toMatchObject({ ok: false, message: expect.stringMatching(/^string: the chat template nests/) })
    // Multi-byte characters: under the limit in characters, over it in bytes.
    const wide = 'é'.repeat(MAX_TEMPLATE_BYTES / 2 + 1)
    expect(checkPromptTemplate(wide, undefined)).toEqual({ ok: false, message: `string: must be at most ${MAX_TEMPLATE_BYTES} bytes` })
    expect(checkPartialTemplate(wide)).toEqual({ ok: false, message: `string: must be at most ${MAX_TEMPLATE_BYTES} bytes` })
    expect(checkPromptTemplate('x'.repeat(MAX_TEMPLATE_BYTES), undefined)).toEqual({ ok: true, isRawTemplate: true })
  })

  it('parses with its own writer: nothing it checked stays cached in the library', async () => {
    const { default: Mustache } = await import('mustache')
    const seen: string[] = []
    const original = Mustache.templateCache
    Mustache.templateCache = { set: (key: string) => void seen.push(key), get: () => undefined, clear: () => undefined, _cache: {} } as never
    try {
      expect(mustacheProblem('{{unique-template-text}}')).toBeNull()
    } finally {
      Mustache.templateCache = original
    }
    expect(seen).toEqual([])
  })
})

describe('newSlug', () => {
  it('makes <prefix><name>-<6 hex> from any name, Mustache braces included', () => {
    expect(newSlug('Support Bot!', 'prompt', 'pp-')).toMatch(/^pp-support-bot-[0-9a-f]{6}$/)
    expect(newSlug('{{#x}}', 'prompt', 'pp-')).toMatch(/^pp-x-[0-9a-f]{6}$/)
    expect(newSlug('{{}}', 'prompt', 'pp-')).toMatch(/^pp-prompt-[0-9a-f]{6}$/)
  })
})

describe('prompt routes', () => {
  const table = new RouteTable()
  const idOf = (method: string, path: string, selectsProvider = false): string | null => {
    const found = table.lookup(method, path, selectsProvider)
    return found.kind === 'route' ? found.match.route.id : found.kind
  }

  it('matches the partials routes before /v1/prompts/:promptId', () => {
    expect(idOf('GET', '/v1/prompts/partials')).toBe('prompts.partials.list')
    expect(idOf('POST', '/v1/prompts/partials')).toBe('prompts.partials.create')
    expect(idOf('GET', '/v1/prompts/partials/p1')).toBe('prompts.partials.get')
    expect(idOf('PUT', '/v1/prompts/partials/p1/makeDefault')).toBe('prompts.partials.publish')
    expect(idOf('GET', '/v1/prompts/partials/p1/versions')).toBe('prompts.partials.versions.list')
    expect(idOf('GET', '/v1/prompts/pp-a-123456')).toBe('prompts.get')
    expect(idOf('GET', '/v1/prompts/pp-a-123456/versions/2')).toBe('prompts.versions.get')
    expect(idOf('PUT', '/v1/prompts/pp-a-123456/makeDefault')).toBe('prompts.publish')
    expect(idOf('DELETE', '/v1/labels/l1')).toBe('labels.delete')
    expect(idOf('PUT', '/v1/collections/c1')).toBe('collections.update')
  })

  it('leaves the data-plane prompt paths to the data plane, and admin paths with a provider selection to pass-through', () => {
    for (const path of ['/v1/prompts/pp-a-123456/completions', '/v1/prompts/pp-a-123456@latest/render']) {
      const found = table.lookup('POST', path, false)
      expect(found.kind === 'route' && found.match.route.group, path).not.toBe('admin')
    }
    expect(idOf('PUT', '/v1/collections/c1', true)).toBe('passthrough')
    expect(idOf('GET', '/v1/prompts', true)).toBe('passthrough')
  })
})
