/**
 * The price table of the budget plugin: `config/pricing.json` (indicative list prices, USD per
 * million tokens), then a file named by `plugins.budget.config.pricingFile`, then the
 * `plugins.budget.config.prices` overlay; each layer adds or replaces whole model entries. Every
 * layer is validated (zod); a mistake is a `ConfigError` naming the key.
 *
 * Lookup (`PriceTable.find`): provider slug and model id, case-insensitive; a model id that is not
 * listed matches its longest listed prefix followed by `-`, `:` or `@` (`gpt-4o-2024-08-06` →
 * `gpt-4o`). When the provider does not list the model (or is unknown, e.g. a config routes the
 * request), the highest price any provider lists for it applies: a worst case for budgets.
 */
import { readFileSync } from 'node:fs'
import { z } from 'zod'
import type { ModelPrice, PriceTable } from '../core/budgets.js'
import { ConfigError } from '../core/registry.js'
import defaults from './pricing.json' with { type: 'json' }

const price = z.number().finite().min(0)

const modelPriceSchema = z
  .object({
    input: price,
    output: price,
    cachedInput: price.nullable().optional(),
    reasoning: price.nullable().optional(),
  })
  .strict()

/** `{ "<provider>": { "<model>": {input, output, cachedInput?, reasoning?} } }` */
export const pricesSchema = z.record(z.string().min(1), z.record(z.string().min(1), modelPriceSchema))

export type PriceEntries = z.infer<typeof pricesSchema>

const pricingFileSchema = z
  .object({
    _comment: z.string().optional(),
    unit: z.literal('USD per 1M tokens').optional(),
    models: pricesSchema,
  })
  .strict()

/** Characters that may follow a listed model id in a longer (dated or tagged) id. */
const PREFIX_BOUNDARY = new Set(['-', ':', '@'])
const LOOKUP_CACHE_LIMIT = 10_000

function parse<T>(schema: z.ZodType<T>, value: unknown, key: string): T {
  const parsed = schema.safeParse(value)
  if (parsed.success) return parsed.data
  const issue = parsed.error.issues[0]
  const path = issue && issue.path.length > 0 ? `.${issue.path.map(String).join('.')}` : ''
  throw new ConfigError(`${key}${path}`, issue?.message ?? 'invalid')
}

function toPrice(entry: z.infer<typeof modelPriceSchema>): ModelPrice {
  return Object.freeze({ input: entry.input, output: entry.output, cachedInput: entry.cachedInput ?? null, reasoning: entry.reasoning ?? null })
}

/** The worst of two prices, field by field (a budget reservation must not under-reserve). */
function worse(a: ModelPrice, b: ModelPrice): ModelPrice {
  const cached = (p: ModelPrice) => p.cachedInput ?? p.input
  const reasoning = (p: ModelPrice) => p.reasoning ?? p.output
  return Object.freeze({
    input: Math.max(a.input, b.input),
    output: Math.max(a.output, b.output),
    cachedInput: Math.max(cached(a), cached(b)),
    reasoning: Math.max(reasoning(a), reasoning(b)),
  })
}

/** Model id → price, with the longest-prefix rule. */
class ModelIndex {
  readonly #exact = new Map<string, ModelPrice>()

  set(model: string, price: ModelPrice): void {
    this.#exact.set(model.toLowerCase(), price)
  }

  /** Merges with the worse of the two prices (the cross-provider index). */
  merge(model: string, price: ModelPrice): void {
    const key = model.toLowerCase()
    const known = this.#exact.get(key)
    this.#exact.set(key, known === undefined ? price : worse(known, price))
  }

  find(model: string): ModelPrice | null {
    const id = model.toLowerCase()
    const exact = this.#exact.get(id)
    if (exact !== undefined) return exact
    for (let end = id.length - 1; end > 0; end--) {
      if (!PREFIX_BOUNDARY.has(id[end] as string)) continue
      const found = this.#exact.get(id.slice(0, end))
      if (found !== undefined) return found
    }
    return null
  }
}

export class JsonPriceTable implements PriceTable {
  readonly #byProvider = new Map<string, ModelIndex>()
  readonly #anyProvider = new ModelIndex()
  /** Lookups are per request: remember results (bounded; cleared when full). */
  readonly #cache = new Map<string, ModelPrice | null>()

  constructor(entries: PriceEntries) {
    for (const [provider, models] of Object.entries(entries)) {
      const index = new ModelIndex()
      for (const [model, entry] of Object.entries(models)) {
        const modelPrice = toPrice(entry)
        index.set(model, modelPrice)
        this.#anyProvider.merge(model, modelPrice)
      }
      this.#byProvider.set(provider.toLowerCase(), index)
    }
  }

  find(provider: string | null, model: string): ModelPrice | null {
    const cacheKey = `${provider ?? ''}\n${model}`
    const cached = this.#cache.get(cacheKey)
    if (cached !== undefined) return cached
    const own = provider === null ? null : (this.#byProvider.get(provider.toLowerCase())?.find(model) ?? null)
    const found = own ?? this.#anyProvider.find(model)
    if (this.#cache.size >= LOOKUP_CACHE_LIMIT) this.#cache.clear()
    this.#cache.set(cacheKey, found)
    return found
  }
}

/** Adds or replaces whole model entries of `base` with those of `overlay`. */
function overlayPrices(base: PriceEntries, overlay: PriceEntries): PriceEntries {
  const merged: Record<string, Record<string, PriceEntries[string][string]>> = {}
  for (const [provider, models] of Object.entries(base)) merged[provider] = { ...models }
  for (const [provider, models] of Object.entries(overlay)) merged[provider] = { ...merged[provider], ...models }
  return merged
}

export interface PriceTableSources {
  /** A JSON file shaped like `config/pricing.json`, layered over it. */
  readonly file?: string | null
  /** Entries layered over everything else (`plugins.budget.config.prices`). */
  readonly overlay?: unknown
}

/** The default table with the configured file and overlay applied. */
export function loadPriceTable(sources: PriceTableSources = {}): JsonPriceTable {
  let entries = parse(pricingFileSchema, defaults, 'config/pricing.json').models
  if (sources.file !== undefined && sources.file !== null) {
    let text: string
    try {
      text = readFileSync(sources.file, 'utf8')
    } catch (error) {
      throw new ConfigError('plugins.budget.config.pricingFile', `cannot read ${sources.file}: ${(error as Error).message}`)
    }
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (error) {
      throw new ConfigError('plugins.budget.config.pricingFile', `${sources.file} is not valid JSON: ${(error as Error).message}`)
    }
    entries = overlayPrices(entries, parse(pricingFileSchema, json, 'plugins.budget.config.pricingFile').models)
  }
  if (sources.overlay !== undefined && sources.overlay !== null) {
    entries = overlayPrices(entries, parse(pricesSchema, sources.overlay, 'plugins.budget.config.prices'))
  }
  return new JsonPriceTable(entries)
}
