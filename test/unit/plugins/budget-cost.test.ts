import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadPriceTable } from '../../../config/pricing.js'
import { costNanoUsd, worstCaseNanoUsd, type ModelPrice } from '../../../core/budgets.js'
import { ConfigError } from '../../../core/registry.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../../core/routes.js'
import { formatAmount, fromCounterUnit, toCounterUnit } from '../../../plugins/budget/cost.js'
import { estimateRequest } from '../../../plugins/budget/estimate.js'

const GPT_4O: ModelPrice = { input: 2.5, output: 10, cachedInput: 1.25, reasoning: null }

describe('cost of a reply', () => {
  it('prices uncached prompt, cached prompt and completion tokens separately (nano-USD)', () => {
    // 800 × 2.5 + 200 × 1.25 + 500 × 10 = 7250 USD per million tokens → 0.00725 USD.
    expect(costNanoUsd(GPT_4O, { promptTokens: 1000, completionTokens: 500, cachedTokens: 200 })).toBe(7_250_000)
    expect(costNanoUsd(GPT_4O, { promptTokens: 1000, completionTokens: 500, cachedTokens: 0 })).toBe(7_500_000)
  })

  it('prices cached tokens at the input price when the model has no cached price', () => {
    const price: ModelPrice = { input: 3, output: 15, cachedInput: null, reasoning: null }
    expect(costNanoUsd(price, { promptTokens: 100, completionTokens: 0, cachedTokens: 100 })).toBe(300_000)
  })

  it('never counts more cached than prompt tokens', () => {
    expect(costNanoUsd(GPT_4O, { promptTokens: 10, completionTokens: 0, cachedTokens: 50 })).toBe(12_500)
  })

  it('prices reasoning tokens apart where the provider does', () => {
    const price: ModelPrice = { input: 0.15, output: 0.6, cachedInput: null, reasoning: 3.5 }
    // 1000 × 0.15 + 600 × 0.6 + 400 × 3.5 = 1910
    expect(costNanoUsd(price, { promptTokens: 1000, completionTokens: 1000, cachedTokens: 0, reasoningTokens: 400 })).toBe(1_910_000)
    expect(costNanoUsd(GPT_4O, { promptTokens: 0, completionTokens: 10, cachedTokens: 0, reasoningTokens: 4 })).toBe(100_000)
  })

  it('reserves every prompt token at the input price and every output token at the higher output price', () => {
    expect(worstCaseNanoUsd(GPT_4O, 100, 50)).toBe(750_000)
    expect(worstCaseNanoUsd({ input: 0.15, output: 0.6, cachedInput: null, reasoning: 3.5 }, 0, 1000)).toBe(3_500_000)
    // Rounded up, never down.
    expect(worstCaseNanoUsd({ input: 0.0001, output: 0, cachedInput: null, reasoning: null }, 1, 0)).toBe(1)
  })

  it('converts limits to counter units and back', () => {
    expect(toCounterUnit('cost', 12.5)).toBe(12_500_000_000)
    expect(fromCounterUnit('cost', 7_250_000)).toBeCloseTo(0.00725, 12)
    expect(toCounterUnit('tokens', 1000)).toBe(1000)
    expect(formatAmount('cost', 12_500_000_000)).toBe('12.50 USD')
    expect(formatAmount('cost', 7_250_000)).toBe('0.00725 USD')
    expect(formatAmount('tokens', 42)).toBe('42 tokens')
  })
})

describe('price table', () => {
  const table = loadPriceTable()

  it('loads and validates the shipped config/pricing.json', () => {
    expect(table.find('openai', 'gpt-4o')).toEqual({ input: 2.5, output: 10, cachedInput: 1.25, reasoning: null })
    expect(table.find('anthropic', 'claude-3-5-haiku')?.output).toBe(4)
  })

  it('matches dated or tagged ids by their longest listed prefix, case-insensitively', () => {
    expect(table.find('openai', 'gpt-4o-2024-08-06')).toEqual(table.find('openai', 'gpt-4o'))
    expect(table.find('openai', 'gpt-4o-mini-2024-07-18')).toEqual(table.find('openai', 'gpt-4o-mini'))
    expect(table.find('openai', 'GPT-4o-Mini')).toEqual(table.find('openai', 'gpt-4o-mini'))
    expect(table.find('openai', 'gpt-4o-2024-05-13')?.input).toBe(5)
    expect(table.find('anthropic', 'claude-opus-4-5-20251101')?.input).toBe(5)
    expect(table.find('anthropic', 'claude-opus-4-20250514')?.input).toBe(15)
    // Only `-`, `:` and `@` continue an id: gpt-4.5 is not gpt-4.
    expect(table.find('openai', 'gpt-4.5-preview')).toBeNull()
  })

  it('returns null for unknown models (they cost 0 and are counted by the plugin)', () => {
    expect(table.find('openai', 'my-finetune')).toBeNull()
    expect(table.find(null, 'no-such-model')).toBeNull()
  })

  it('without a provider, or with one that does not list the model, takes the highest listed price', () => {
    expect(table.find(null, 'gpt-4o-mini')).toEqual(table.find('openai', 'gpt-4o-mini'))
    const both = loadPriceTable({ overlay: { a: { m: { input: 1, output: 5 } }, b: { m: { input: 2, output: 3, cachedInput: 0.5 } } } })
    expect(both.find(null, 'm')).toEqual({ input: 2, output: 5, cachedInput: 1, reasoning: 5 })
    expect(table.find('azure-openai', 'gpt-4.1')?.output).toBe(8)
    expect(table.find('groq', 'llama-3.3-70b-versatile')?.input).toBe(0.59)
  })

  it('applies a price file, then the config overlay, replacing whole model entries', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-prices-'))
    try {
      const file = join(dir, 'prices.json')
      writeFileSync(file, JSON.stringify({ models: { openai: { 'gpt-4o': { input: 1, output: 2 } }, acme: { 'acme-1': { input: 3, output: 4 } } } }))
      const custom = loadPriceTable({ file, overlay: { acme: { 'acme-1': { input: 5, output: 6, cachedInput: 1 } } } })
      expect(custom.find('openai', 'gpt-4o')).toEqual({ input: 1, output: 2, cachedInput: null, reasoning: null })
      expect(custom.find('openai', 'gpt-4o-mini')?.input).toBe(0.15)
      expect(custom.find('acme', 'acme-1')).toEqual({ input: 5, output: 6, cachedInput: 1, reasoning: null })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('refuses invalid prices with a ConfigError naming the key', () => {
    const attempt = () => loadPriceTable({ overlay: { openai: { 'gpt-4o': { input: -1, output: 2 } } } })
    expect(attempt).toThrow(ConfigError)
    expect(attempt).toThrow(/plugins\.budget\.config\.prices\.openai\.gpt-4o\.input/)
    expect(() => loadPriceTable({ overlay: { openai: { 'gpt-4o': { input: 1, output: 2, typo: 3 } } } })).toThrow(ConfigError)
    expect(() => loadPriceTable({ file: '/nonexistent/prices.json' })).toThrow(/pricingFile/)
  })
})

describe('request estimate', () => {
  const route = (id: string): RouteSpec => INFERENCE_ROUTES.find((candidate) => candidate.id === id) as RouteSpec
  const json = (id: string, body: Record<string, unknown>) => {
    const raw = Buffer.from(JSON.stringify(body))
    return estimateRequest({ route: route(id), rawBody: raw, body }, 4096)
  }

  it('counts body bytes / 4 as prompt tokens and max_tokens (or the default cap) as output', () => {
    const body = { model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(100) }], max_tokens: 50 }
    const bytes = JSON.stringify(body).length
    expect(json('chat.completions', body)).toEqual({ model: 'gpt-4o', promptTokens: Math.ceil(bytes / 4), maxOutputTokens: 50 })
    expect(json('chat.completions', { model: 'gpt-4o', messages: [], max_completion_tokens: 7 }).maxOutputTokens).toBe(7)
    expect(json('chat.completions', { model: 'gpt-4o', messages: [] }).maxOutputTokens).toBe(4096)
  })

  it('reserves no output for embeddings', () => {
    expect(json('embeddings', { model: 'text-embedding-3-small', input: 'hello' }).maxOutputTokens).toBe(0)
  })

  it('does not tokenize raw uploads', () => {
    const estimate = estimateRequest({ route: route('audio.transcriptions'), rawBody: Buffer.alloc(1_000_000), body: null }, 4096)
    expect(estimate).toEqual({ model: null, promptTokens: 0, maxOutputTokens: 0 })
  })
})
