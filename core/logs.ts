/**
 * Request logs, feedback and analytics: the records and the read-side port.
 *
 * Write side: `LogSink` (core/ports.ts) takes `LogRecord`s on the request path (enqueue only) and
 * `FeedbackRecord`s from the Admin API. Read side: `LogAnalytics` answers the analytics graphs,
 * groups and summary, finds one log, and scans logs for exports. Both sides have a ClickHouse
 * adapter (production, `CLICKHOUSE_URL`) and a DuckDB adapter (embedded default) over the same
 * two tables, `request_logs` and `feedback`.
 *
 * Units: times are epoch milliseconds; cost is kept exact as nano-USD (USD × 10⁹, integer) and
 * shown in cents by the Admin API (1 cent = 10⁷ nano-USD).
 */
import { portToken, type Service } from './service.js'

/** Where a log record came from. */
export type LogSource = 'gateway' | 'custom'

/**
 * Response-cache outcome of a request (`disabled` until a cache plugin runs). `refresh`: the cache
 * was on for the request but `x-gateway-cache-force-refresh` skipped the lookup and the answer
 * replaced the stored one (`x-gateway-cache-status: REFRESH`).
 */
export type CacheStatus = 'disabled' | 'miss' | 'hit' | 'semantic_hit' | 'refresh'

/** Attempts kept in one record: the first `MAX_LOG_ATTEMPTS - 1` and the last (the one that answered). */
export const MAX_LOG_ATTEMPTS = 32

/**
 * One upstream attempt of a config-routed request, as stored (JSON text in the `attempts` column)
 * and shown by the Admin API: keys are already the API's snake_case names.
 */
export interface LogAttempt {
  /** The config leaf tried, as in `x-gateway-last-used-option-index` (`config.targets[1]`). */
  readonly target: string
  readonly provider: string | null
  /** The target's virtual key slug, or `null`. */
  readonly virtual_key: string | null
  /** Upstream status, the status of the gateway's own refusal (429/412 of our limits, ...), or 0 when none came (connection failure, timeout). */
  readonly status: number
  /** From the attempt's start until its status was known (response headers); `null` when it never ended. */
  readonly latency_ms: number | null
  /** Which try of its target (0: the first, n: the n-th retry). */
  readonly retry: number
  /** Catalogue code of the gateway error that ended the attempt (`GW_...`), or `null`. */
  readonly error_code: string | null
  /** How the response cache took part, or `null` when it did not look. */
  readonly cache_status: CacheStatus | null
}

/** One request's log record, written after the reply ended, errored or was aborted. */
export interface LogRecord {
  /** Request id (UUID); unique, so a record written twice can be recognised. */
  readonly id: string
  readonly traceId: string
  /** `gateway` for proxied requests, `custom` for `POST /v1/logs`. */
  readonly source: LogSource
  /** Epoch ms when the request arrived. */
  readonly createdAt: number
  readonly organisationId: string | null
  /** Workspace UUID. */
  readonly workspaceId: string | null
  /** API key UUID (`null` for JWTs and custom logs). */
  readonly apiKeyId: string | null
  /** The end user: the `_user` metadata value. */
  readonly user: string | null
  /** Virtual key slug; for a config-routed request, that of the attempt the answer came from (see `fallbackIndex`). */
  readonly virtualKey: string | null
  /**
   * The saved config's slug the request was routed by; `null` without a config and for an inline
   * `x-gateway-config` (it has no identity; such a record still has `attempts`).
   */
  readonly config: string | null
  /** The saved config's version that routed it; `null` with `config`. */
  readonly configVersion: number | null
  readonly promptSlug: string | null
  readonly promptVersion: number | null
  readonly method: string
  /** Route id (`chat.completions`, `passthrough`, `custom`, ...). */
  readonly route: string
  readonly path: string
  readonly provider: string | null
  readonly model: string | null
  readonly status: number
  readonly outcome: 'completed' | 'errored' | 'aborted'
  readonly streaming: boolean
  readonly latencyMs: number
  /** Time to the first response byte (first token when streaming); `null` when nothing was sent. */
  readonly ttftMs: number | null
  /** Token counts; all `null` when the provider reported no usage. */
  readonly promptTokens: number | null
  readonly completionTokens: number | null
  readonly totalTokens: number | null
  readonly cachedTokens: number | null
  /** Cost from the price table in nano-USD; 0 for an unlisted model, `null` without usage. */
  readonly costNanoUsd: number | null
  readonly cacheStatus: CacheStatus
  /** Attempts beyond the first (retries and fallbacks). */
  readonly retryCount: number
  /**
   * Config-routed requests: how many targets the router moved past before the one the answer came
   * from (the served attempt, else the last one; 0: the first target tried, after any retries);
   * `null` without a config or without attempts.
   */
  readonly fallbackIndex: number | null
  /** Catalogue code of the gateway error (`GW_...`), or `null`. */
  readonly errorCode: string | null
  /** Error type (`rate_limit_error`, `upstream_error`, ...), or `null`. */
  readonly errorType: string | null
  /** `x-gateway-metadata` values. */
  readonly metadata: Readonly<Record<string, string>> | null
  /** Request and response bodies, only when the log plugin is configured to keep them (size-capped). */
  readonly requestBody: string | null
  readonly responseBody: string | null
  /** Every upstream attempt of a config-routed request, in order (at most `MAX_LOG_ATTEMPTS`); `null` without a config or before any attempt. */
  readonly attempts: readonly LogAttempt[] | null
}

/** One feedback entry (`POST /v1/feedback`); weighted feedback = value × weight. */
export interface FeedbackRecord {
  /** UUID. */
  readonly id: string
  /** The `x-gateway-trace-id` of the request it rates. */
  readonly traceId: string
  readonly organisationId: string
  readonly workspaceId: string | null
  /** Integer −10..10. */
  readonly value: number
  /** 0..1. */
  readonly weight: number
  readonly metadata: Readonly<Record<string, string>> | null
  readonly createdAt: number
  /** A later version of the same id replaces an earlier one. */
  readonly updatedAt: number
}

/** Where analytics and log reads may look: always one organisation, optionally one workspace. */
export interface LogScope {
  readonly organisationId: string
  /** `null`: the whole organisation (organisation keys without `workspace_slug`). */
  readonly workspaceId: string | null
}

/** An inclusive numeric range; either end may be absent. */
export interface NumberRange {
  readonly min?: number
  readonly max?: number
}

/**
 * The filters of API.md §5 (analytics and export filters), already parsed and validated by the
 * Admin API: every string here is a plain value to be quoted, never SQL.
 */
export interface LogFilter {
  readonly scope: LogScope
  /** Epoch ms, inclusive. */
  readonly from: number
  /** Epoch ms, inclusive. */
  readonly to: number
  readonly statusCodes?: readonly number[]
  readonly virtualKeys?: readonly string[]
  readonly configs?: readonly string[]
  readonly apiKeyIds?: readonly string[]
  /** `ai_org_model` pairs (`provider__model`). */
  readonly providerModels?: ReadonlyArray<{ readonly provider: string; readonly model: string }>
  readonly models?: readonly string[]
  readonly traceIds?: readonly string[]
  readonly promptSlugs?: readonly string[]
  readonly cacheStatuses?: readonly CacheStatus[]
  /** Every pair must match (`metadata` JSON). */
  readonly metadata?: Readonly<Record<string, string>>
  /** Cost in cents. */
  readonly costCents?: NumberRange
  readonly totalTokens?: NumberRange
  readonly promptTokens?: NumberRange
  readonly completionTokens?: NumberRange
  /** Average weighted feedback of the request's trace. */
  readonly weightedFeedback?: NumberRange
}

/** Graph paths under `/v1/analytics/graphs/` (API.md §5). */
export const GRAPH_NAMES = [
  'requests', 'cost', 'latency', 'tokens', 'users', 'users/requests', 'errors', 'errors/rate',
  'errors/stacks', 'errors/status-codes', 'requests/rescued', 'cache/hit-rate', 'cache/latency',
  'feedbacks', 'feedbacks/scores', 'feedbacks/weighted', 'feedbacks/ai-models',
] as const
export type GraphName = (typeof GRAPH_NAMES)[number]

/** Group paths under `/v1/analytics/groups/` (`metadata/{key}` is `metadata` plus a key). */
export const GROUP_NAMES = [
  'users', 'ai-models', 'metadata', 'providers', 'api-keys', 'virtual-keys', 'configs', 'status-codes',
] as const
export type GroupName = (typeof GROUP_NAMES)[number]

/** A JSON value of a graph's summary or data point (numbers already in API units: cents, ms, %). */
export type AnalyticsValue = number | string | null | ReadonlyArray<Readonly<Record<string, number | string | null>>>

/** `{object: "analytics-graph", summary, data_points}` without `object`; keys are the API's snake_case names. */
export interface GraphResult {
  readonly summary: Readonly<Record<string, AnalyticsValue>>
  /** Time buckets (with `timestamp`, ISO 8601, zero-filled) or, for the few non-time graphs, rows. */
  readonly dataPoints: ReadonlyArray<Readonly<Record<string, AnalyticsValue>>>
}

export interface GroupRequest {
  readonly name: GroupName
  /** Required for `metadata`. */
  readonly metadataKey?: string
  /** 0-based. */
  readonly page: number
  readonly pageSize: number
}

/** A page of `analytics-group` rows (without `object`), keys in the API's snake_case. */
export interface GroupResult {
  readonly total: number
  readonly rows: ReadonlyArray<Readonly<Record<string, AnalyticsValue>>>
}

/** `GET /v1/analytics/summary/cache` figures. */
export interface CacheSummary {
  readonly hits: number
  readonly avgLatency: number
  readonly totalRequests: number
  /** Percent. */
  readonly cacheSpeedup: number
}

/** A stored log with its feedback, as `GET /v1/logs/{id}` shows it. */
export interface StoredLog extends LogRecord {
  /** Average weighted feedback of its trace; `null` without feedback. */
  readonly weightedFeedback: number | null
}

/**
 * The read side of the log store. Every method takes the caller's scope and never returns a row
 * of another organisation or (for a workspace scope) another workspace. Queries are built from
 * validated values only; every literal goes through one quoting helper.
 */
export interface LogAnalytics extends Service {
  graph(name: GraphName, filter: LogFilter): Promise<GraphResult>
  group(request: GroupRequest, filter: LogFilter): Promise<GroupResult>
  cacheSummary(filter: LogFilter): Promise<CacheSummary>
  /** One log by request id (or, failing that, trace id) within the scope; `null` when absent. */
  findLog(scope: LogScope, id: string): Promise<StoredLog | null>
  /** Whether some log of the scope has this trace id (feedback may only rate known traces). */
  hasTrace(scope: LogScope, traceId: string): Promise<boolean>
  /** Finds a feedback entry by id within the scope. */
  findFeedback(scope: LogScope, id: string): Promise<FeedbackRecord | null>
  /**
   * Streams the logs matching `filter`, oldest first, in pages of up to `batchSize`, until `onBatch`
   * has seen them all or `limit` rows; stops early when `onBatch` returns `false`.
   */
  scanLogs(filter: LogFilter, options: { readonly batchSize: number; readonly limit: number }, onBatch: (rows: readonly StoredLog[]) => Promise<boolean>): Promise<void>
}
export const LogAnalytics = portToken<LogAnalytics>('LogAnalytics')
