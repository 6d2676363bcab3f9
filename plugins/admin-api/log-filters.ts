/**
 * The log filters of API.md §5 (analytics query parameters, export `filters`) → `LogFilter`.
 *
 * Input is strict: an unknown or repeated parameter, an element of a comma list that is not of its
 * kind, a list longer than its cap, a time range that is reversed or longer than 366 days → 400
 * AB01 naming the field. Every value that reaches `LogFilter` is therefore a plain, bounded value
 * of a known shape (the adapters still quote every literal; this is the first of two fences).
 *
 * Scope: a workspace key (or JWT) always reads its own workspace and `workspace_slug` is ignored;
 * an organisation key reads the workspace `workspace_slug` names (slug or UUID; unknown → 404
 * AB08), or the whole organisation without it.
 */
import type { Principal } from '../../core/context.js'
import type { CacheStatus, LogFilter, LogScope, NumberRange } from '../../core/logs.js'
import { z } from 'zod'
import { invalid, notFound, type AdminDeps, type Outcome } from './request.js'
import { describeIssue, isoDateTime, snakePaging } from './schemas.js'

/** Longest time range one query may cover. */
export const MAX_RANGE_DAYS = 366
const DAY_MS = 86_400_000
/** Elements of one comma list. */
export const MAX_LIST_ITEMS = 100
/** Characters of one parameter value. */
const MAX_VALUE_CHARS = 4096
/** Pairs of the `metadata` filter. */
export const MAX_METADATA_PAIRS = 20

const SLUG = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const PROVIDER = /^[a-z0-9][a-z0-9-]{0,63}$/
const MODEL = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$/
/** Trace ids are client strings (`x-gateway-trace-id`, ≤ 128): visible ASCII; a comma separates list items. */
export const TRACE_ID = /^[\x21-\x2b\x2d-\x7e]{1,128}$/
/**
 * Metadata keys: letters, digits and `_ . : @ / -` (e.g. `_user`, `env`, `team.name`); never a
 * name that means something to JavaScript objects.
 */
export const METADATA_KEY = /^(?!(?:__proto__|constructor|prototype)$)[A-Za-z0-9_.:@/-]{1,128}$/
/** Metadata values: no control characters. */
const METADATA_VALUE = /^[^\x00-\x1f\x7f]{0,1024}$/

const slug = z.string().regex(SLUG, 'must be a slug: letters, digits, . _ : - (at most 200 characters)')
const statusCode = z
  .string()
  .regex(/^[1-5][0-9]{2}$/, 'must be an HTTP status code (100-599)')
  .transform(Number)
const uuid = z.string().regex(UUID, 'must be a UUID')
const model = z.string().regex(MODEL, 'must be a model name: letters, digits, . _ : / @ + - (at most 200 characters)')
const providerModel = z.string().transform((text, ctx) => {
  const split = text.indexOf('__')
  const provider = split < 0 ? '' : text.slice(0, split)
  const name = split < 0 ? '' : text.slice(split + 2)
  if (!PROVIDER.test(provider) || !MODEL.test(name)) {
    ctx.addIssue({ code: 'custom', message: 'must be provider__model, e.g. openai__gpt-4o' })
    return z.NEVER
  }
  return { provider, model: name }
})
const traceId = z.string().regex(TRACE_ID, 'must be a trace id: 1-128 visible ASCII characters without commas')
const CACHE_STATUSES: readonly CacheStatus[] = ['disabled', 'miss', 'hit', 'semantic_hit', 'refresh']
/** `hit`, `HIT`, `semantic hit`, `SEMANTIC_HIT`, ... */
const cacheStatus = z
  .string()
  .transform((text) => text.toLowerCase().replace(/[ -]/g, '_'))
  .pipe(z.enum(CACHE_STATUSES as [CacheStatus, ...CacheStatus[]], { message: `must be one of ${CACHE_STATUSES.join(', ')}` }))

/** A comma-separated list of `element`s (1..max items). */
function listOf<T extends z.ZodType<unknown, string>>(element: T, what: string, max = MAX_LIST_ITEMS) {
  return z
    .string()
    .max(MAX_VALUE_CHARS)
    .transform((text) => text.split(',').map((part) => part.trim()))
    .pipe(z.array(element).min(1).max(max, `at most ${max} items`))
    .describe(`Comma-separated ${what} (at most ${max})`)
}

const metadataFilter = z
  .string()
  .max(MAX_VALUE_CHARS)
  .transform((text, ctx) => {
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON object of strings, e.g. {"_user":"u1"}' })
      return z.NEVER
    }
    // zod drops a `__proto__` key silently; a filter must not quietly match more than asked.
    if (value !== null && typeof value === 'object' && Object.hasOwn(value, '__proto__')) {
      ctx.addIssue({ code: 'custom', message: 'metadata keys are letters, digits and _ . : @ / - (at most 128)' })
      return z.NEVER
    }
    return value
  })
  .pipe(
    z
      .record(z.string().regex(METADATA_KEY, 'metadata keys are letters, digits and _ . : @ / - (at most 128)'), z.string().regex(METADATA_VALUE, 'must be a string of at most 1024 characters without control characters'), {
        message: 'must be a JSON object of strings',
      })
      .refine((value) => Object.keys(value).length <= MAX_METADATA_PAIRS, `at most ${MAX_METADATA_PAIRS} pairs`),
  )
  .describe('A JSON object of strings; every pair must match, e.g. {"_user":"u1","env":"prod"}')

function decimal(min: number, max: number, what: string) {
  return z
    .string()
    .regex(/^-?[0-9]{1,13}(\.[0-9]{1,6})?$/, `must be a number (${what})`)
    .transform(Number)
    .pipe(z.number().min(min).max(max))
}
const tokens = z
  .string()
  .regex(/^[0-9]{1,12}$/, 'must be a whole number of tokens')
  .transform(Number)
const cents = decimal(0, 1e12, 'cents')
const feedback = decimal(-10, 10, '-10..10')

/**
 * The filter parameters. Used for the analytics query string, for export `filters` (values turned
 * into strings first) and, through the OpenAPI document, for their description.
 */
const filterShape = {
  time_of_generation_min: isoDateTime.describe('Start, ISO 8601 with offset (required; the range is at most 366 days)'),
  time_of_generation_max: isoDateTime.describe('End, ISO 8601 with offset (required)'),
  workspace_slug: slug.optional().describe('Organisation keys: the workspace to read (slug or UUID); absent → the whole organisation. Ignored for workspace keys.'),
  status_code: listOf(statusCode, 'HTTP status codes').optional(),
  virtual_keys: listOf(slug, 'virtual key slugs').optional(),
  configs: listOf(slug, 'config slugs').optional(),
  api_key_ids: listOf(uuid, 'API key UUIDs').optional(),
  ai_org_model: listOf(providerModel, 'provider__model pairs').optional(),
  ai_model: listOf(model, 'model names').optional(),
  trace_id: listOf(traceId, 'trace ids').optional(),
  prompt_slug: listOf(slug, 'prompt slugs').optional(),
  cache_status: listOf(cacheStatus, 'cache statuses (disabled, miss, hit, semantic_hit, refresh)').optional(),
  metadata: metadataFilter.optional(),
  cost_min: cents.optional().describe('Cost in cents, inclusive'),
  cost_max: cents.optional().describe('Cost in cents, inclusive'),
  total_units_min: tokens.optional(),
  total_units_max: tokens.optional(),
  prompt_token_min: tokens.optional(),
  prompt_token_max: tokens.optional(),
  completion_token_min: tokens.optional(),
  completion_token_max: tokens.optional(),
  weighted_feedback_min: feedback.optional(),
  weighted_feedback_max: feedback.optional(),
}

/** Query of every graph and of the cache summary. */
export const analyticsQuery = z.object(filterShape)
/** Query of the group endpoints: the filters plus paging. */
export const analyticsGroupQuery = z.object({ ...filterShape, ...snakePaging })
/** Export `filters`: the filters plus the export's own paging (`page_size` ≤ 50000, default 50000). */
export const MAX_EXPORT_ROWS = 50_000
export const exportFilterFields = z.object({
  ...filterShape,
  current_page: z.coerce.number().int().min(0).max(1_000_000).default(0),
  page_size: z.coerce.number().int().min(1).max(MAX_EXPORT_ROWS).default(MAX_EXPORT_ROWS),
})

export type FilterInput = z.output<typeof analyticsQuery>

/** `span_id` is a documented filter the gateway cannot serve: spans are not recorded. */
const UNSUPPORTED: Readonly<Record<string, string>> = {
  span_id: 'span_id: filtering by span is not supported (spans are not recorded)',
}

/**
 * The query string as a record of its parameters. Unknown and repeated parameters are refused
 * (a repeated one could otherwise slip a second value past whoever read the first); empty values
 * count as absent.
 */
export function queryParameters(query: string, schema: z.ZodObject): Outcome<Record<string, string>> {
  const known = schema.shape as Record<string, unknown>
  const values: Record<string, string> = {}
  for (const [name, value] of new URLSearchParams(query)) {
    const unsupported = UNSUPPORTED[name]
    if (unsupported !== undefined) return { ok: false, error: invalid(unsupported, name) }
    if (!Object.hasOwn(known, name)) return { ok: false, error: invalid(`${printable(name)}: unknown query parameter`, name) }
    if (Object.hasOwn(values, name)) return { ok: false, error: invalid(`${name}: given more than once`, name) }
    if (value.length > 0) values[name] = value
  }
  return { ok: true, value: values }
}

/** A client-chosen name, safe to echo in a message (bounded, no control characters). */
function printable(name: string): string {
  const shown = name.replace(/[^\x20-\x7e]/g, '?')
  return shown.length > 64 ? `${shown.slice(0, 64)}…` : shown
}

/** Validates parsed values (`schema` is one of the schemas above); `prefix` is put before field names (`filters.`). */
export function parseFilterInput<S extends z.ZodObject>(values: Readonly<Record<string, unknown>>, schema: S, prefix = ''): Outcome<z.output<S>> {
  const parsed = schema.safeParse(values)
  if (!parsed.success) {
    const field = String(parsed.error.issues[0]?.path[0] ?? 'query')
    return { ok: false, error: invalid(`${prefix}${describeIssue(parsed.error)}`, `${prefix}${field}`) }
  }
  const input = parsed.data as FilterInput
  const from = Date.parse(input.time_of_generation_min)
  const to = Date.parse(input.time_of_generation_max)
  if (from > to) return { ok: false, error: invalid(`${prefix}time_of_generation_max: must not be before time_of_generation_min`, `${prefix}time_of_generation_max`) }
  if (to - from > MAX_RANGE_DAYS * DAY_MS) {
    return { ok: false, error: invalid(`${prefix}time_of_generation_max: the range may cover at most ${MAX_RANGE_DAYS} days`, `${prefix}time_of_generation_max`) }
  }
  for (const [min, max] of RANGES) {
    const low = input[min]
    const high = input[max]
    if (low !== undefined && high !== undefined && low > high) return { ok: false, error: invalid(`${prefix}${max}: must not be below ${min}`, `${prefix}${max}`) }
  }
  return { ok: true, value: parsed.data }
}

const RANGES = [
  ['cost_min', 'cost_max'],
  ['total_units_min', 'total_units_max'],
  ['prompt_token_min', 'prompt_token_max'],
  ['completion_token_min', 'completion_token_max'],
  ['weighted_feedback_min', 'weighted_feedback_max'],
] as const

function range(min: number | undefined, max: number | undefined): NumberRange | undefined {
  if (min === undefined && max === undefined) return undefined
  return { ...(min === undefined ? {} : { min }), ...(max === undefined ? {} : { max }) }
}

/** Validated input + scope → the port's filter. */
export function toLogFilter(input: FilterInput, scope: LogScope): LogFilter {
  const optional = <K extends keyof LogFilter>(key: K, value: LogFilter[K] | undefined): Partial<LogFilter> => (value === undefined ? {} : { [key]: value })
  return {
    scope,
    from: Date.parse(input.time_of_generation_min),
    to: Date.parse(input.time_of_generation_max),
    ...optional('statusCodes', input.status_code),
    ...optional('virtualKeys', input.virtual_keys),
    ...optional('configs', input.configs),
    ...optional('apiKeyIds', input.api_key_ids?.map((id) => id.toLowerCase())),
    ...optional('providerModels', input.ai_org_model),
    ...optional('models', input.ai_model),
    ...optional('traceIds', input.trace_id),
    ...optional('promptSlugs', input.prompt_slug),
    ...optional('cacheStatuses', input.cache_status),
    ...optional('metadata', input.metadata),
    ...optional('costCents', range(input.cost_min, input.cost_max)),
    ...optional('totalTokens', range(input.total_units_min, input.total_units_max)),
    ...optional('promptTokens', range(input.prompt_token_min, input.prompt_token_max)),
    ...optional('completionTokens', range(input.completion_token_min, input.completion_token_max)),
    ...optional('weightedFeedback', range(input.weighted_feedback_min, input.weighted_feedback_max)),
  }
}

/**
 * Where the caller may read: its own workspace for workspace keys and JWTs (`workspace_slug`
 * ignored); for organisation keys the named workspace, or the whole organisation.
 */
export async function logScopeOf(deps: AdminDeps, principal: Principal, workspaceSlug: string | undefined): Promise<Outcome<LogScope>> {
  if (principal.workspaceId !== null) return { ok: true, value: { organisationId: principal.organisationId, workspaceId: principal.workspaceId } }
  if (workspaceSlug === undefined) return { ok: true, value: { organisationId: principal.organisationId, workspaceId: null } }
  const workspace = await deps.store.findWorkspace(principal.organisationId, workspaceSlug)
  if (workspace === null) return { ok: false, error: notFound(`workspace_slug: workspace ${workspaceSlug}`) }
  return { ok: true, value: { organisationId: principal.organisationId, workspaceId: workspace.id } }
}

/**
 * Export `filters` (JSON) → the string values the filter schema reads: arrays become comma lists,
 * numbers their decimal text, `metadata` its JSON text. Anything else is refused naming the field.
 */
export function exportFilterValues(filters: Readonly<Record<string, unknown>>): Outcome<Record<string, string>> {
  const known = exportFilterFields.shape as Record<string, unknown>
  const values: Record<string, string> = {}
  for (const [name, value] of Object.entries(filters)) {
    const unsupported = UNSUPPORTED[name]
    if (unsupported !== undefined) return { ok: false, error: invalid(`filters.${unsupported}`, `filters.${name}`) }
    if (!Object.hasOwn(known, name)) return { ok: false, error: invalid(`filters.${printable(name)}: unknown filter`, `filters.${name}`) }
    if (value === null || value === undefined) continue
    const text = filterText(name, value)
    if (text === null) return { ok: false, error: invalid(`filters.${name}: must be a string, a number or a list of them${name === 'metadata' ? ' (metadata: an object of strings)' : ''}`, `filters.${name}`) }
    if (text.length > 0) values[name] = text
  }
  return { ok: true, value: values }
}

function filterText(name: string, value: unknown): string | null {
  if (typeof value === 'string') return value
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : null
  if (name === 'metadata' && typeof value === 'object' && !Array.isArray(value)) return JSON.stringify(value)
  if (Array.isArray(value) && value.length <= MAX_LIST_ITEMS * 2) {
    const parts: string[] = []
    for (const item of value) {
      if (typeof item === 'number' && Number.isFinite(item)) parts.push(String(item))
      else if (typeof item === 'string' && !item.includes(',')) parts.push(item)
      else return null
    }
    return parts.join(',')
  }
  return null
}
