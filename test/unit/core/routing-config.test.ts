/**
 * The config schema and its compiled plan (core/routing-config.ts): every refusal names its path,
 * unknown fields are refused, the saved/inline rules hold, inheritance resolves down the tree, and
 * condition queries match as documented.
 */
import { describe, expect, it } from 'vitest'
import { checkRoutingConfig, compileRoutingConfig, matchesQuery, parseInlineConfig, type RoutingNode } from '../../../core/routing-config.js'

const leaf = { provider: 'openai', api_key: 'sk-1' }

function paths(input: unknown, origin: 'saved' | 'inline' = 'inline'): string[] {
  const check = checkRoutingConfig(input, origin)
  return check.ok ? [] : check.issues.map((issue) => issue.path)
}

describe('checkRoutingConfig', () => {
  it('accepts the documented shapes', () => {
    expect(paths(leaf)).toEqual([])
    expect(paths({ retry: { attempts: 2 }, cache: { mode: 'simple', max_age: 60 } })).toEqual([])
    expect(
      paths({
        strategy: { mode: 'fallback', on_status_codes: [429, 500] },
        targets: [leaf, { strategy: { mode: 'loadbalance' }, targets: [{ ...leaf, weight: 0.7 }, { virtual_key: 'vk-b', weight: 0.3 }] }],
      }),
    ).toEqual([])
  })

  it('names the offending path, unknown fields included', () => {
    expect(paths({ strategy: { mode: 'fallback' }, targets: [leaf, { ...leaf, retry: { attempts: 9 } }] })).toEqual(['targets[1].retry.attempts'])
    expect(paths({ ...leaf, retyr: { attempts: 1 } })).toEqual(['retyr'])
    expect(paths({ strategy: { mode: 'sometimes' }, targets: [leaf] })).toEqual(['strategy.mode'])
    expect(paths({ strategy: { mode: 'fallback' }, targets: [leaf, {}] })).toEqual(['targets[1]'])
  })

  it('checks the rules between fields', () => {
    expect(paths({ targets: [leaf] })).toEqual(['strategy'])
    expect(paths({ strategy: { mode: 'fallback' } })).toEqual(['targets'])
    expect(paths({ strategy: { mode: 'single' }, targets: [leaf, leaf] })).toEqual(['targets'])
    expect(paths({ strategy: { mode: 'loadbalance', on_status_codes: [500] }, targets: [leaf] })).toEqual(['strategy.on_status_codes'])
    expect(paths({ strategy: { mode: 'loadbalance' }, targets: [{ ...leaf, weight: 0 }] })).toEqual(['targets'])
    expect(paths({ virtual_key: 'vk', provider: 'openai' })).toEqual(['provider'])
    expect(paths({ api_key: 'sk' })).toEqual(['api_key'])
    expect(paths({ ...leaf, forward_headers: ['x-gateway-api-key'] })).toEqual(['forward_headers[0]'])
  })

  it('saved configs hold no provider keys; inline ones may not point a virtual key at a custom host', () => {
    expect(paths(leaf, 'saved')).toEqual(['api_key'])
    expect(paths({ virtual_key: 'vk', custom_host: 'https://x.example' }, 'saved')).toEqual([])
    expect(paths({ virtual_key: 'vk', custom_host: 'https://x.example' }, 'inline')).toEqual(['custom_host'])
    // Inherited from a parent too.
    expect(paths({ strategy: { mode: 'fallback' }, custom_host: 'https://x.example', targets: [{ virtual_key: 'vk' }] }, 'inline')).toEqual(['targets[0].custom_host'])
  })

  it('checks conditional targets and query operators', () => {
    const base = { strategy: { mode: 'conditional', conditions: [{ query: { 'metadata.tier': 'gold' }, then: 'a' }], default: 'b' }, targets: [{ name: 'a', ...leaf }, { name: 'b', ...leaf }] }
    expect(paths(base)).toEqual([])
    expect(paths({ ...base, strategy: { ...base.strategy, default: 'c' } })).toEqual(['strategy.default'])
    expect(paths({ ...base, strategy: { ...base.strategy, conditions: [{ query: { 'metadata.tier': { $regex: '.*' } }, then: 'a' }] } })).toEqual([
      'strategy.conditions[0].query.metadata.tier.$regex',
    ])
    expect(paths({ ...base, strategy: { ...base.strategy, conditions: [{ query: { 'body.x': 1 }, then: 'a' }] } })).toEqual(['strategy.conditions[0].query.body.x'])
    expect(paths({ ...base, strategy: { ...base.strategy, conditions: [{ query: { 'params.n': { $in: 3 } }, then: 'a' }] } })).toEqual([
      'strategy.conditions[0].query.params.n.$in',
    ])
    expect(paths({ ...base, targets: [{ name: 'a', ...leaf }, { name: 'a', ...leaf }] })).toContain('targets[1].name')
  })

  it('bounds depth and size', () => {
    let deep: Record<string, unknown> = leaf
    for (let i = 0; i < 10; i++) deep = { strategy: { mode: 'single' }, targets: [deep] }
    expect(checkRoutingConfig(deep, 'inline').ok).toBe(false)
    expect(parseInlineConfig('x'.repeat(70_000)).ok).toBe(false)
    expect(parseInlineConfig('{"strategy":').ok).toBe(false)
    expect(checkRoutingConfig([leaf], 'inline').ok).toBe(false)
  })
})

describe('compileRoutingConfig', () => {
  it('resolves inheritance: override_params merge, retry replaced, timeouts and hosts inherited', () => {
    const check = checkRoutingConfig(
      {
        strategy: { mode: 'fallback', cb_config: { failure_threshold: 3, cooldown_interval: 5000 } },
        retry: { attempts: 2 },
        request_timeout: 1000,
        override_params: { model: 'a', temperature: 0 },
        targets: [{ ...leaf, override_params: { model: 'b' } }, { ...leaf, retry: { attempts: 0 }, request_timeout: 50 }],
      },
      'inline',
    )
    if (!check.ok) throw new Error(JSON.stringify(check.issues))
    const plan = compileRoutingConfig(check.config, { slug: 'pc-x', version: 3 })
    expect(plan.id).toBe('pc-x@3')
    const root = plan.root as Extract<RoutingNode, { kind: 'strategy' }>
    const [first, second] = root.children.map((child) => (child as Extract<RoutingNode, { kind: 'target' }>).target)
    expect(first?.path).toBe('config.targets[0]')
    expect(first?.overrideParams).toEqual({ model: 'b', temperature: 0 })
    expect(first?.retry.attempts).toBe(2)
    expect(first?.requestTimeoutMs).toBe(1000)
    expect(first?.breaker?.failureThreshold).toBe(3)
    expect(second?.retry.attempts).toBe(0)
    expect(second?.requestTimeoutMs).toBe(50)
    expect(plan.usesCache).toBe(false)
  })
})

describe('matchesQuery', () => {
  const input = { metadata: { tier: 'gold', n: '42' }, params: { model: 'gpt-4o', max_tokens: 500, stream: true } }
  it('matches equality, operators, $and and $or', () => {
    expect(matchesQuery({ 'metadata.tier': 'gold' }, input)).toBe(true)
    expect(matchesQuery({ 'metadata.tier': { $ne: 'gold' } }, input)).toBe(false)
    expect(matchesQuery({ 'params.model': { $in: ['gpt-4o', 'x'] } }, input)).toBe(true)
    expect(matchesQuery({ 'params.model': { $nin: ['gpt-4o'] } }, input)).toBe(false)
    expect(matchesQuery({ 'params.max_tokens': { $gt: 100, $lte: 500 } }, input)).toBe(true)
    expect(matchesQuery({ 'metadata.n': { $gte: 42 } }, input)).toBe(true)
    expect(matchesQuery({ 'metadata.n': 42 }, input)).toBe(true)
    expect(matchesQuery({ 'params.stream': true }, input)).toBe(true)
    expect(matchesQuery({ $or: [{ 'metadata.tier': 'silver' }, { 'params.max_tokens': { $lt: 1000 } }] }, input)).toBe(true)
    expect(matchesQuery({ $and: [{ 'metadata.tier': 'gold' }, { 'params.model': 'x' }] }, input)).toBe(false)
    expect(matchesQuery({ 'metadata.missing': { $gt: 1 } }, input)).toBe(false)
    expect(matchesQuery({ 'metadata.missing': null }, input)).toBe(true)
  })
})
