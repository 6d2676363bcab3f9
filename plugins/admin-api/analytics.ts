/**
 * Analytics (`GET /v1/analytics/…`, API.md §5, reference §9; scope `analytics.view`): graphs,
 * groups and the cache summary over the request logs, read through `LogAnalytics`. Filters and
 * scope come from log-filters.ts; costs are in cents; the adapter picks the bucket size from the
 * range. Another workspace's logs are never counted: the scope is part of every query.
 */
import type { Principal, RequestContext } from '../../core/context.js'
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import type { LogServices } from '../../core/log-exports.js'
import { GRAPH_NAMES, GROUP_NAMES, type GraphName, type GroupName, type LogFilter } from '../../core/logs.js'
import { jsonReply, type Reply } from '../../core/plugin.js'
import {
  analyticsGroupQuery,
  analyticsQuery,
  logScopeOf,
  METADATA_KEY,
  parseFilterInput,
  queryParameters,
  toLogFilter,
  type FilterInput,
} from './log-filters.js'
import { invalid, type AdminDeps, type AdminRequest, type Handler, type Outcome, type HandlerMap } from './request.js'
import { listView } from './views.js'

/** The log ports, or the error that says logs are off. */
export function logServicesOf(deps: AdminDeps): Outcome<LogServices> {
  return deps.logs === null ? { ok: false, error: gatewayError(ERRORS.GW_LOGS_DISABLED) } : { ok: true, value: deps.logs }
}

/** Query string → validated input and the caller's `LogFilter`. */
async function filterOf<S extends typeof analyticsQuery | typeof analyticsGroupQuery>(
  deps: AdminDeps,
  principal: Principal,
  ctx: RequestContext,
  schema: S,
): Promise<Outcome<{ input: FilterInput & Record<string, unknown>; filter: LogFilter }>> {
  const values = queryParameters(ctx.query, schema)
  if (!values.ok) return values
  const parsed = parseFilterInput(values.value, schema)
  if (!parsed.ok) return parsed
  const input = parsed.value as FilterInput & Record<string, unknown>
  const scope = await logScopeOf(deps, principal, input.workspace_slug)
  if (!scope.ok) return scope
  return { ok: true, value: { input, filter: toLogFilter(input, scope.value) } }
}

function graphHandler(name: GraphName): Handler {
  return async ({ ctx, principal, deps }: AdminRequest): Promise<Reply | GatewayError> => {
    const logs = logServicesOf(deps)
    if (!logs.ok) return logs.error
    const parsed = await filterOf(deps, principal, ctx, analyticsQuery)
    if (!parsed.ok) return parsed.error
    const result = await logs.value.analytics.graph(name, parsed.value.filter)
    return jsonReply(200, { object: 'analytics-graph', summary: result.summary, data_points: result.dataPoints })
  }
}

function groupHandler(name: GroupName): Handler {
  return async ({ ctx, principal, deps }: AdminRequest): Promise<Reply | GatewayError> => {
    const logs = logServicesOf(deps)
    if (!logs.ok) return logs.error
    let metadataKey: string | undefined
    if (name === 'metadata') {
      metadataKey = ctx.params.metadataKey ?? ''
      if (!METADATA_KEY.test(metadataKey)) return invalid('metadataKey: must be a metadata key: letters, digits and _ . : @ / - (at most 128 characters)', 'metadataKey')
    }
    const parsed = await filterOf(deps, principal, ctx, analyticsGroupQuery)
    if (!parsed.ok) return parsed.error
    const { input, filter } = parsed.value
    const page = input.current_page as number
    const pageSize = input.page_size as number
    const result = await logs.value.analytics.group({ name, page, pageSize, ...(metadataKey === undefined ? {} : { metadataKey }) }, filter)
    return jsonReply(200, listView(result.total, result.rows.map((row) => ({ ...row, object: 'analytics-group' }))))
  }
}

async function cacheSummary({ ctx, principal, deps }: AdminRequest): Promise<Reply | GatewayError> {
  const logs = logServicesOf(deps)
  if (!logs.ok) return logs.error
  const parsed = await filterOf(deps, principal, ctx, analyticsQuery)
  if (!parsed.ok) return parsed.error
  const summary = await logs.value.analytics.cacheSummary(parsed.value.filter)
  return jsonReply(200, {
    object: 'analytics-summary',
    summary: { hits: summary.hits, avg_latency: summary.avgLatency, total_requests: summary.totalRequests, cache_speedup: summary.cacheSpeedup },
  })
}

export const analyticsHandlers: HandlerMap = {
  ...Object.fromEntries(GRAPH_NAMES.map((name) => [`analytics.graphs.${name}`, graphHandler(name)])),
  ...Object.fromEntries(GROUP_NAMES.map((name) => [`analytics.groups.${name}`, groupHandler(name)])),
  'analytics.summary.cache': cacheSummary,
}
