/**
 * Compiles a `LogFilter` (core/logs.ts) into the WHERE condition of a `request_logs` query.
 *
 * Always present: the organisation, the workspace when the scope has one, and the time range, so
 * no query can read another tenant's rows whatever else the filter holds. Then, each only when
 * given and non-empty (an empty list means "not filtered", as an empty query parameter does):
 * status codes, virtual keys, configs, API key ids, `provider__model` pairs, models, trace ids,
 * prompt slugs, cache statuses, metadata pairs (all must match), cost in cents, token ranges and
 * the trace's average weighted feedback.
 *
 * Ranges are inclusive. Token and cost ranges never match a request without usage (NULL).
 */
import type { LogFilter, LogScope, NumberRange } from '../../core/logs.js'
import type { SqlDialect } from './sql-dialect.js'

/** Nano-USD per cent. */
export const NANO_USD_PER_CENT = 10_000_000

/** Condition: the row belongs to the scope (organisation, and workspace when set). */
export function scopeCondition(dialect: SqlDialect, scope: LogScope): string {
  const parts = [`organisation_id = ${dialect.str(scope.organisationId)}`]
  if (scope.workspaceId !== null) parts.push(`workspace_id = ${dialect.str(scope.workspaceId)}`)
  return parts.join(' AND ')
}

function inList(dialect: SqlDialect, column: string, values: readonly string[] | undefined): string | null {
  if (values === undefined || values.length === 0) return null
  return `${column} IN (${values.map((value) => dialect.str(value)).join(', ')})`
}

function range(dialect: SqlDialect, column: string, bounds: NumberRange | undefined): string[] {
  if (bounds === undefined) return []
  const parts: string[] = []
  if (bounds.min !== undefined) parts.push(`${column} >= ${dialect.num(bounds.min)}`)
  if (bounds.max !== undefined) parts.push(`${column} <= ${dialect.num(bounds.max)}`)
  return parts
}

/**
 * A cent bound as whole nano-USD. Cost is stored as integers, so `cost >= 1.5 cents` is
 * `cost_nano_usd >= 15000000`; a product that floating point leaves a hair off an integer
 * (0.1 × 10⁷) is rounded to it instead of excluding the exact value.
 */
function centsToNano(cents: number, direction: 'min' | 'max'): number {
  const nano = cents * NANO_USD_PER_CENT
  const nearest = Math.round(nano)
  if (Math.abs(nano - nearest) < 1e-6) return nearest
  return direction === 'min' ? Math.ceil(nano) : Math.floor(nano)
}

/**
 * Subquery: the current version of every feedback entry the scope sees, as
 * `(id, fb_trace, fb_value, fb_weight, fb_created_ms)`. Versions are rows with the same id; the
 * one with the greatest update time wins (ClickHouse merges may not have run yet). A workspace
 * sees its own feedback and the organisation's (given with an organisation key), never another
 * workspace's: trace ids are chosen by clients, so two workspaces may share one.
 */
export function currentFeedbackSql(dialect: SqlDialect, scope: LogScope, extraCondition?: string): string {
  const v = dialect.feedbackVersion
  let where = `organisation_id = ${dialect.str(scope.organisationId)}`
  if (scope.workspaceId !== null) where += ` AND (workspace_id = ${dialect.str(scope.workspaceId)} OR ${dialect.noWorkspace})`
  if (extraCondition !== undefined) where += ` AND ${extraCondition}`
  return `SELECT id, ${dialect.argMax('trace_id', v)} AS fb_trace, ${dialect.argMax('value', v)} AS fb_value, ${dialect.argMax('weight', v)} AS fb_weight, ${dialect.argMax(dialect.feedbackCreatedAtMs, v)} AS fb_created_ms FROM ${dialect.feedbackTable} WHERE ${where} GROUP BY id`
}

/** Compiles the whole filter; the result is a condition for `WHERE`. */
export function logFilterCondition(dialect: SqlDialect, filter: LogFilter): string {
  const parts: string[] = [scopeCondition(dialect, filter.scope), dialect.logTimeRange(filter.from, filter.to)]
  const push = (part: string | null): void => {
    if (part !== null) parts.push(part)
  }
  if (filter.statusCodes !== undefined && filter.statusCodes.length > 0) {
    parts.push(`status IN (${filter.statusCodes.map((code) => dialect.num(code)).join(', ')})`)
  }
  push(inList(dialect, 'virtual_key', filter.virtualKeys))
  push(inList(dialect, 'config', filter.configs))
  push(inList(dialect, 'api_key_id', filter.apiKeyIds))
  if (filter.providerModels !== undefined && filter.providerModels.length > 0) {
    const pairs = filter.providerModels.map((pair) => `(provider = ${dialect.str(pair.provider)} AND model = ${dialect.str(pair.model)})`)
    parts.push(`(${pairs.join(' OR ')})`)
  }
  push(inList(dialect, 'model', filter.models))
  push(inList(dialect, 'trace_id', filter.traceIds))
  push(inList(dialect, 'prompt_slug', filter.promptSlugs))
  push(inList(dialect, 'cache_status', filter.cacheStatuses))
  if (filter.metadata !== undefined) {
    for (const [key, value] of Object.entries(filter.metadata)) parts.push(dialect.metadataEquals(key, value))
  }
  if (filter.costCents !== undefined) {
    const { min, max } = filter.costCents
    if (min !== undefined) parts.push(`cost_nano_usd >= ${dialect.num(centsToNano(min, 'min'))}`)
    if (max !== undefined) parts.push(`cost_nano_usd <= ${dialect.num(centsToNano(max, 'max'))}`)
  }
  parts.push(...range(dialect, 'total_tokens', filter.totalTokens))
  parts.push(...range(dialect, 'prompt_tokens', filter.promptTokens))
  parts.push(...range(dialect, 'completion_tokens', filter.completionTokens))
  const weighted = filter.weightedFeedback
  if (weighted !== undefined && (weighted.min !== undefined || weighted.max !== undefined)) {
    const having = range(dialect, 'avg(fb_value * fb_weight)', weighted).join(' AND ')
    parts.push(`trace_id IN (SELECT fb_trace FROM (${currentFeedbackSql(dialect, filter.scope)}) AS current_feedback GROUP BY fb_trace HAVING ${having})`)
  }
  return parts.join(' AND ')
}
