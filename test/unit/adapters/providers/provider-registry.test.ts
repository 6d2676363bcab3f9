import { describe, expect, it } from 'vitest'
import type { ProviderSpec } from '../../../../core/ports.js'
import { INFERENCE_ROUTES } from '../../../../core/routes.js'
import { OPENAI_COMPATIBLE_PROVIDERS } from '../../../../adapters/providers/openai-compatible-providers.js'
import { TableProviderRegistry } from '../../../../adapters/providers/provider-registry.js'

const REQUIRED_SLUGS = [
  'openai', 'groq', 'together-ai', 'fireworks-ai', 'deepinfra', 'mistral-ai', 'perplexity-ai', 'openrouter',
  'deepseek', 'x-ai', 'anyscale', 'ollama', 'lm-studio', 'vllm', 'cerebras', 'nebius', 'novita-ai', 'sambanova',
  'hyperbolic', 'lambda', 'github', 'moonshot', 'zhipu', 'dashscope', 'lingyi', 'monsterapi', 'predibase',
]

const CUSTOM_HOST_ONLY = ['ollama', 'lm-studio', 'vllm', 'predibase']

describe('the OpenAI-compatible provider table', () => {
  it('has every slug once, in kebab-case', () => {
    const slugs = OPENAI_COMPATIBLE_PROVIDERS.map((p) => p.slug)
    expect(new Set(slugs).size).toBe(slugs.length)
    for (const slug of slugs) expect(slug).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/)
  })

  it('declares every required provider', () => {
    const slugs = new Set(OPENAI_COMPATIBLE_PROVIDERS.map((p) => p.slug))
    expect(REQUIRED_SLUGS.filter((slug) => !slugs.has(slug))).toEqual([])
  })

  it.each(OPENAI_COMPATIBLE_PROVIDERS.map((p) => [p.slug, p] as const))('%s: base URL is empty or a clean https URL', (_slug, spec) => {
    if (spec.baseUrl === '') return
    const url = new URL(spec.baseUrl)
    expect(url.protocol).toBe('https:')
    expect(url.username + url.password + url.search + url.hash).toBe('')
    expect(spec.baseUrl.endsWith('/')).toBe(false)
    // The URL is already canonical, so origin + path put back together is the same string.
    expect(url.origin + (url.pathname === '/' ? '' : url.pathname)).toBe(spec.baseUrl)
  })

  it('leaves the base URL empty exactly for the custom-host-only providers', () => {
    const empty = OPENAI_COMPATIBLE_PROVIDERS.filter((p) => p.baseUrl === '').map((p) => p.slug).sort()
    expect(empty).toEqual([...CUSTOM_HOST_ONLY].sort())
  })

  it('names only real route ids as unsupported, and never all of them', () => {
    const routeIds = new Set(INFERENCE_ROUTES.map((r) => r.id))
    for (const spec of OPENAI_COMPATIBLE_PROVIDERS) {
      for (const id of spec.unsupportedRoutes ?? []) expect(routeIds.has(id), `${spec.slug}: ${id}`).toBe(true)
      expect(new Set(spec.unsupportedRoutes ?? []).size).toBe((spec.unsupportedRoutes ?? []).length)
      expect((spec.unsupportedRoutes ?? []).length).toBeLessThan(routeIds.size)
    }
  })

  it('marks every row OpenAI-compatible with a usable auth style', () => {
    for (const spec of OPENAI_COMPATIBLE_PROVIDERS) {
      expect(spec.openAiCompatible).toBe(true)
      expect(['bearer', 'header', 'query', 'none']).toContain(spec.authStyle)
      if (spec.authStyle === 'header' || spec.authStyle === 'query') expect(spec.authName).toBeTruthy()
    }
  })

  it('keeps the table and its rows immutable', () => {
    expect(Object.isFrozen(OPENAI_COMPATIBLE_PROVIDERS)).toBe(true)
    for (const spec of OPENAI_COMPATIBLE_PROVIDERS) expect(Object.isFrozen(spec)).toBe(true)
  })

  it('carries the documented base URLs of a few anchors', () => {
    const bySlug = new Map(OPENAI_COMPATIBLE_PROVIDERS.map((p) => [p.slug, p.baseUrl]))
    expect(bySlug.get('openai')).toBe('https://api.openai.com/v1')
    expect(bySlug.get('groq')).toBe('https://api.groq.com/openai/v1')
    expect(bySlug.get('fireworks-ai')).toBe('https://api.fireworks.ai/inference/v1')
    expect(bySlug.get('deepinfra')).toBe('https://api.deepinfra.com/v1/openai')
  })
})

describe('TableProviderRegistry', () => {
  it('looks providers up by slug and lists them all', () => {
    const registry = new TableProviderRegistry({ allowedCustomHosts: [] })
    expect(registry.get('groq')?.baseUrl).toBe('https://api.groq.com/openai/v1')
    expect(registry.get('vllm')?.baseUrl).toBe('')
    expect(registry.get('nope')).toBeUndefined()
    expect(registry.get('')).toBeUndefined()
    expect(registry.list().map((p) => p.slug)).toEqual(OPENAI_COMPATIBLE_PROVIDERS.map((p) => p.slug))
  })

  it('uses the table it is given', () => {
    const custom: ProviderSpec = { slug: 'anthropic', baseUrl: 'https://api.anthropic.com/v1', authStyle: 'header', authName: 'x-api-key', openAiCompatible: false }
    const registry = new TableProviderRegistry({ allowedCustomHosts: [], providers: [...OPENAI_COMPATIBLE_PROVIDERS, custom] })
    expect(registry.get('anthropic')).toBe(custom)
    expect(registry.list()).toHaveLength(OPENAI_COMPATIBLE_PROVIDERS.length + 1)
  })

  it('refuses a table with a duplicate slug', () => {
    const dup: ProviderSpec = { slug: 'groq', baseUrl: 'https://example.com/v1', authStyle: 'bearer', openAiCompatible: true }
    expect(() => new TableProviderRegistry({ allowedCustomHosts: [], providers: [...OPENAI_COMPATIBLE_PROVIDERS, dup] })).toThrow(/duplicate provider slug "groq"/)
  })

  it('refuses an allow-list it cannot read', () => {
    expect(() => new TableProviderRegistry({ allowedCustomHosts: ['localhost:9021'] })).toThrow(/localhost:9021/)
  })

  it('checks custom hosts against the allow-list it was given', async () => {
    const open = new TableProviderRegistry({ allowedCustomHosts: ['127.0.0.1'] })
    const closed = new TableProviderRegistry({ allowedCustomHosts: [] })
    expect(await open.checkCustomHost('http://127.0.0.1:9021/v1')).toEqual({ ok: true, origin: 'http://127.0.0.1:9021', basePath: '/v1' })
    expect((await closed.checkCustomHost('http://127.0.0.1:9021/v1')).ok).toBe(false)
  })

  it('refuses metadata addresses even when the operator allow-lists them', async () => {
    const registry = new TableProviderRegistry({ allowedCustomHosts: ['169.254.169.254', '0.0.0.0/0'] })
    expect((await registry.checkCustomHost('http://169.254.169.254/latest/meta-data')).ok).toBe(false)
  })

  it('resolves host names with the system resolver (localhost from the hosts file)', async () => {
    const allowed = new TableProviderRegistry({ allowedCustomHosts: ['localhost'] })
    const refused = new TableProviderRegistry({ allowedCustomHosts: [] })
    expect(await allowed.checkCustomHost('http://localhost:9021/v1')).toEqual({ ok: true, origin: 'http://localhost:9021', basePath: '/v1' })
    expect(await refused.checkCustomHost('http://localhost:9021/v1')).toEqual({ ok: false, reason: 'custom host resolves to an address that is not allow-listed' })
  })

  it('passes a custom resolver through', async () => {
    const registry = new TableProviderRegistry({
      allowedCustomHosts: [],
      resolveHost: async () => [{ address: '10.0.0.1' }],
    })
    expect((await registry.checkCustomHost('https://looks-public.example.com/v1')).ok).toBe(false)
  })
})
