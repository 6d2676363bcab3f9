/**
 * The analytics queries of the `LogAnalytics` port, written once for ClickHouse and DuckDB over a
 * `SqlDialect`; each adapter supplies the dialect and a function that runs one query.
 *
 * Definitions (the same on both engines, and what the contract suite recomputes in TypeScript):
 * - A request is one `request_logs` row matching the filter (log-filter-sql.ts). An error is a
 *   request with `status >= 400`. Costs are shown in cents (nano-USD / 10⁷); latencies in ms.
 * - Averages of cost and tokens are over the requests that reported usage (non-NULL); an empty
 *   bucket (or an average with nothing to average) shows 0. Rates are percentages (0..100).
 * - Percentiles are exact nearest-rank: pN of n sorted values is the value at 1-based rank
 *   ceil(N·n/100) (an actual latency, never interpolated). ClickHouse's `quantileExact` natively
 *   takes rank floor(p·n)+1, which differs when p·n is an integer, so the dialect shifts its level
 *   (sql-dialect.ts `percentiles`); the contract suite checks both engines against this definition.
 * - Users are distinct non-NULL `end_user` values; `users/requests` counts requests that carry a
 *   user, and averages them per distinct user.
 * - Rescued requests succeeded (`status < 400`) after more than one attempt: by a fallback when
 *   `fallback_index > 0`, otherwise by retries (`retry_count > 0`), grouped by retry count.
 * - Cache: hits are `hit` (simple) and `semantic_hit`; the hit rate is hits over the requests that
 *   consulted the cache (`cache_status <> 'disabled'`, so a forced `refresh` counts as a non-hit);
 *   savings are the logged cost of the hits, accumulated from the start of the range. The cache
 *   summary's speedup compares the average latency of hits with that of misses (`miss` only):
 *   (miss − hit) / miss × 100, 0 without both.
 * - Feedback: the current version of each entry (latest update) of the organisation whose trace
 *   has at least one request matching the filter, created (first version) within the time range;
 *   bucketed by its creation time. Weighted feedback is value × weight. A request's weighted
 *   feedback is the average over its trace's entries; the metadata group averages that over the
 *   requests that have feedback.
 * - Groups are ordered by requests (descending) then key (ascending, byte order) and skip rows
 *   without a key; `total` counts distinct keys.
 */
import type {
  AnalyticsValue,
  CacheSummary,
  FeedbackRecord,
  GraphName,
  GraphResult,
  GroupRequest,
  GroupResult,
  LogAttempt,
  LogFilter,
  LogScope,
  StoredLog,
} from '../../core/logs.js'
import { bucketStarts, bucketStepSeconds, bucketTimestamp } from './analytics-buckets.js'
import { currentFeedbackSql, logFilterCondition, NANO_USD_PER_CENT, scopeCondition } from './log-filter-sql.js'
import type { SqlDialect } from './sql-dialect.js'

/** One result row as the driver returns it (numbers may be strings or bigints). */
export type SqlResultRow = Readonly<Record<string, unknown>>

/** Runs one query and returns its rows. */
export type QueryRunner = (sql: string) => Promise<readonly SqlResultRow[]>

type Point = Record<string, AnalyticsValue>

/** A driver value as a number: UInt64 arrives as a string from ClickHouse, HUGEINT as a bigint from DuckDB. */
export function toNumber(value: unknown): number {
  if (value === null || value === undefined) return 0
  if (typeof value === 'number') return value
  if (typeof value === 'bigint') return Number(value)
  if (typeof value === 'boolean') return value ? 1 : 0
  if (typeof value === 'string') return value === '' ? 0 : Number(value)
  return Number(value)
}

function toNumberOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : toNumber(value)
}

function toStringOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value)
}

function ratio(numerator: number, denominator: number): number {
  return denominator > 0 ? numerator / denominator : 0
}

function cents(nanoUsd: number): number {
  return nanoUsd / NANO_USD_PER_CENT
}

function sumOf(rows: Iterable<SqlResultRow>, key: string): number {
  let total = 0
  for (const row of rows) total += toNumber(row[key])
  return total
}

const PERCENTILES = [50, 90, 99] as const

/** Per-group settings: the expression grouped on, the API's field name, and whether cost is shown. */
const GROUPS = {
  users: { expression: 'end_user', field: 'user', cost: true, numeric: false },
  'ai-models': { expression: 'model', field: 'ai_model', cost: false, numeric: false },
  providers: { expression: 'provider', field: 'provider', cost: true, numeric: false },
  'api-keys': { expression: 'api_key_id', field: 'api_key_id', cost: true, numeric: false },
  'virtual-keys': { expression: 'virtual_key', field: 'virtual_key', cost: true, numeric: false },
  configs: { expression: 'config', field: 'config', cost: true, numeric: false },
  'status-codes': { expression: 'status', field: 'status_code', cost: true, numeric: true },
} as const

/** The shared implementation behind `ClickHouseLogAnalytics` and `DuckDbLogAnalytics`. */
export class SqlLogQueries {
  readonly #d: SqlDialect
  readonly #run: QueryRunner
  /** ClickHouse keeps '' for a missing organisation/workspace. */
  readonly #emptyIsNull: boolean

  constructor(dialect: SqlDialect, run: QueryRunner) {
    this.#d = dialect
    this.#run = run
    this.#emptyIsNull = dialect.engine === 'clickhouse'
  }

  // -------------------------------------------------------------------------------------------
  // Graphs

  async graph(name: GraphName, filter: LogFilter): Promise<GraphResult> {
    switch (name) {
      case 'requests': {
        const s = await this.#series(filter, 'count(*) AS n')
        return { summary: { total: sumOf(s.rows.values(), 'n') }, dataPoints: s.points((row) => ({ total: toNumber(row?.n) })) }
      }
      case 'cost': {
        const s = await this.#series(filter, 'sum(cost_nano_usd) AS cost_nano, count(cost_nano_usd) AS usage_n')
        const total = sumOf(s.rows.values(), 'cost_nano')
        return {
          summary: { total: cents(total), avg: cents(ratio(total, sumOf(s.rows.values(), 'usage_n'))) },
          dataPoints: s.points((row) => ({ total: cents(toNumber(row?.cost_nano)), avg: cents(ratio(toNumber(row?.cost_nano), toNumber(row?.usage_n))) })),
        }
      }
      case 'tokens': {
        const s = await this.#series(filter, 'sum(total_tokens) AS tokens, count(total_tokens) AS usage_n')
        const total = sumOf(s.rows.values(), 'tokens')
        return {
          summary: { total, avg: ratio(total, sumOf(s.rows.values(), 'usage_n')) },
          dataPoints: s.points((row) => ({ total: toNumber(row?.tokens), avg: ratio(toNumber(row?.tokens), toNumber(row?.usage_n)) })),
        }
      }
      case 'latency':
        return this.#latency(filter)
      case 'users': {
        const [s, whole] = await Promise.all([
          this.#series(filter, `${this.#d.countDistinct('end_user')} AS users`),
          this.#whole(filter, `${this.#d.countDistinct('end_user')} AS users`),
        ])
        return { summary: { total: toNumber(whole.users) }, dataPoints: s.points((row) => ({ total: toNumber(row?.users) })) }
      }
      case 'users/requests': {
        const select = `count(end_user) AS user_requests, ${this.#d.countDistinct('end_user')} AS users`
        const [s, whole] = await Promise.all([this.#series(filter, select), this.#whole(filter, select)])
        const total = toNumber(whole.user_requests)
        const unique = toNumber(whole.users)
        return {
          summary: { total, unique, avg: ratio(total, unique) },
          dataPoints: s.points((row) => ({ avg: ratio(toNumber(row?.user_requests), toNumber(row?.users)) })),
        }
      }
      case 'errors': {
        const s = await this.#series(filter, `${this.#d.countIf('status >= 400')} AS errors`)
        return { summary: { total: sumOf(s.rows.values(), 'errors') }, dataPoints: s.points((row) => ({ total: toNumber(row?.errors) })) }
      }
      case 'errors/rate': {
        const s = await this.#series(filter, `count(*) AS n, ${this.#d.countIf('status >= 400')} AS errors`)
        const rate = (errors: number, n: number): number => ratio(errors, n) * 100
        return {
          summary: { rate: rate(sumOf(s.rows.values(), 'errors'), sumOf(s.rows.values(), 'n')) },
          dataPoints: s.points((row) => ({ rate: rate(toNumber(row?.errors), toNumber(row?.n)) })),
        }
      }
      case 'errors/stacks':
        return this.#errorStacks(filter)
      case 'errors/status-codes': {
        const rows = await this.#run(
          `SELECT status AS status_code, count(*) AS n FROM ${this.#d.logsTable} WHERE ${logFilterCondition(this.#d, filter)} AND status >= 400 GROUP BY status_code ORDER BY status_code`,
        )
        return {
          summary: { total_errors: sumOf(rows, 'n'), unique_error_codes: rows.length },
          dataPoints: rows.map((row) => ({ status_code: toNumber(row.status_code), count: toNumber(row.n) })),
        }
      }
      case 'requests/rescued':
        return this.#rescued(filter)
      case 'cache/hit-rate':
        return this.#cacheHitRate(filter)
      case 'cache/latency': {
        const hit = "cache_status IN ('hit', 'semantic_hit')"
        const s = await this.#series(filter, `${this.#d.countIf(hit)} AS hits, ${this.#d.sumIf('latency_ms', hit)} AS hit_latency`)
        return { summary: {}, dataPoints: s.points((row) => ({ avg: ratio(toNumber(row?.hit_latency), toNumber(row?.hits)) })) }
      }
      case 'feedbacks': {
        const s = await this.#feedbackSeries(filter)
        return { summary: { total: sumOf(s.rows.values(), 'n') }, dataPoints: s.points((row) => ({ total: toNumber(row?.n) })) }
      }
      case 'feedbacks/weighted': {
        const s = await this.#feedbackSeries(filter)
        return {
          summary: { avg: ratio(sumOf(s.rows.values(), 'weighted'), sumOf(s.rows.values(), 'n')) },
          dataPoints: s.points((row) => ({ avg: ratio(toNumber(row?.weighted), toNumber(row?.n)) })),
        }
      }
      case 'feedbacks/scores': {
        const rows = await this.#run(`SELECT fb_value AS score, count(*) AS n FROM ${this.#feedbackFrom(filter)} WHERE ${this.#feedbackWhere(filter)} GROUP BY score ORDER BY score`)
        return { summary: { total: sumOf(rows, 'n') }, dataPoints: rows.map((row) => ({ score: toNumber(row.score), total: toNumber(row.n) })) }
      }
      case 'feedbacks/ai-models':
        return this.#feedbackByModel(filter)
    }
  }

  /** Additive per-bucket aggregates of the matching requests. */
  async #series(filter: LogFilter, select: string, extraCondition?: string) {
    const d = this.#d
    const step = bucketStepSeconds(filter.from, filter.to)
    const where = logFilterCondition(d, filter) + (extraCondition === undefined ? '' : ` AND ${extraCondition}`)
    const rows = await this.#run(`SELECT ${d.bucketOf(d.logCreatedAtMs, step)} AS bucket, ${select} FROM ${d.logsTable} WHERE ${where} GROUP BY bucket`)
    return this.#bucketed(filter, step, rows)
  }

  /** Zero-filled points over every bucket of the range (see analytics-buckets.ts). */
  #bucketed(filter: LogFilter, step: number, rows: readonly SqlResultRow[]) {
    const byBucket = new Map<number, SqlResultRow>()
    for (const row of rows) byBucket.set(toNumber(row.bucket), row)
    const starts = bucketStarts(filter.from, filter.to, step)
    return {
      rows: byBucket,
      starts,
      points(make: (row: SqlResultRow | undefined, start: number) => Point): Point[] {
        return starts.map((start) => ({ timestamp: bucketTimestamp(start), ...make(byBucket.get(start), start) }))
      },
    }
  }

  /** One row of aggregates over the whole range (for what buckets cannot add up: distinct counts). */
  async #whole(filter: LogFilter, select: string): Promise<SqlResultRow> {
    const rows = await this.#run(`SELECT ${select} FROM ${this.#d.logsTable} WHERE ${logFilterCondition(this.#d, filter)}`)
    return rows[0] ?? {}
  }

  async #latency(filter: LogFilter): Promise<GraphResult> {
    const d = this.#d
    const step = bucketStepSeconds(filter.from, filter.to)
    const where = logFilterCondition(d, filter)
    const aggregates = `count(*) AS n, sum(latency_ms) AS lat_sum, ${d.percentiles('latency_ms', PERCENTILES)} AS lat_pct`
    const [rows, wholeRows] = await Promise.all([
      this.#run(`SELECT ${d.bucketOf(d.logCreatedAtMs, step)} AS bucket, ${aggregates} FROM ${d.logsTable} WHERE ${where} GROUP BY bucket`),
      this.#run(`SELECT ${aggregates} FROM ${d.logsTable} WHERE ${where}`),
    ])
    const figures = (row: SqlResultRow | undefined): Point => {
      const n = toNumber(row?.n)
      const pct = Array.isArray(row?.lat_pct) ? (row.lat_pct as unknown[]) : []
      if (n === 0) return { avg: 0, p50: 0, p90: 0, p99: 0 }
      return { avg: toNumber(row?.lat_sum) / n, p50: toNumber(pct[0]), p90: toNumber(pct[1]), p99: toNumber(pct[2]) }
    }
    const s = this.#bucketed(filter, step, rows)
    return { summary: figures(wholeRows[0]), dataPoints: s.points((row) => figures(row)) }
  }

  async #errorStacks(filter: LogFilter): Promise<GraphResult> {
    const d = this.#d
    const step = bucketStepSeconds(filter.from, filter.to)
    const rows = await this.#run(
      `SELECT ${d.bucketOf(d.logCreatedAtMs, step)} AS bucket, status AS status_code, count(*) AS n FROM ${d.logsTable} WHERE ${logFilterCondition(d, filter)} AND status >= 400 GROUP BY bucket, status_code ORDER BY bucket, status_code`,
    )
    const stats = new Map<number, Array<{ response_status_code: number; count: number }>>()
    for (const row of rows) {
      const bucket = toNumber(row.bucket)
      let list = stats.get(bucket)
      if (list === undefined) stats.set(bucket, (list = []))
      list.push({ response_status_code: toNumber(row.status_code), count: toNumber(row.n) })
    }
    const starts = bucketStarts(filter.from, filter.to, step)
    return {
      summary: { total: sumOf(rows, 'n') },
      dataPoints: starts.map((start) => ({ timestamp: bucketTimestamp(start), stats: stats.get(start) ?? [] })),
    }
  }

  async #rescued(filter: LogFilter): Promise<GraphResult> {
    const d = this.#d
    const step = bucketStepSeconds(filter.from, filter.to)
    // coalesce: ClickHouse's if() refuses a Nullable condition.
    const viaFallback = 'coalesce(fallback_index, 0) > 0'
    const rows = await this.#run(
      `SELECT ${d.bucketOf(d.logCreatedAtMs, step)} AS bucket, retry_count AS retries, ${d.flag(viaFallback)} AS via_fallback, count(*) AS n FROM ${d.logsTable} WHERE ${logFilterCondition(d, filter)} AND status < 400 AND (retry_count > 0 OR ${viaFallback}) GROUP BY bucket, retries, via_fallback ORDER BY bucket, retries`,
    )
    const retries = new Map<number, Array<{ retry_success_count: number; count: number }>>()
    const fallbacks = new Map<number, number>()
    let retryTotal = 0
    let fallbackTotal = 0
    for (const row of rows) {
      const bucket = toNumber(row.bucket)
      const n = toNumber(row.n)
      if (toNumber(row.via_fallback) === 1) {
        fallbacks.set(bucket, (fallbacks.get(bucket) ?? 0) + n)
        fallbackTotal += n
      } else {
        let list = retries.get(bucket)
        if (list === undefined) retries.set(bucket, (list = []))
        list.push({ retry_success_count: toNumber(row.retries), count: n })
        retryTotal += n
      }
    }
    const starts = bucketStarts(filter.from, filter.to, step)
    return {
      summary: { retry: retryTotal, fallback: fallbackTotal },
      dataPoints: starts.map((start) => ({ timestamp: bucketTimestamp(start), retry: retries.get(start) ?? [], fallback: fallbacks.get(start) ?? 0 })),
    }
  }

  async #cacheHitRate(filter: LogFilter): Promise<GraphResult> {
    const d = this.#d
    const simple = "cache_status = 'hit'"
    const semantic = "cache_status = 'semantic_hit'"
    const s = await this.#series(
      filter,
      `${d.countIf(simple)} AS simple_hits, ${d.countIf(semantic)} AS semantic_hits, ${d.countIf("cache_status <> 'disabled'")} AS consulted, ${d.sumIf('cost_nano_usd', simple)} AS simple_saved, ${d.sumIf('cost_nano_usd', semantic)} AS semantic_saved`,
    )
    let simpleSaved = 0
    let semanticSaved = 0
    const dataPoints = s.points((row) => {
      const simpleHits = toNumber(row?.simple_hits)
      const semanticHits = toNumber(row?.semantic_hits)
      simpleSaved += toNumber(row?.simple_saved)
      semanticSaved += toNumber(row?.semantic_saved)
      return {
        simple_hits: simpleHits,
        semantic_hits: semanticHits,
        rate: ratio(simpleHits + semanticHits, toNumber(row?.consulted)) * 100,
        cumulative_simple_cache_savings: cents(simpleSaved),
        cumulative_semantic_cache_savings: cents(semanticSaved),
      }
    })
    const hits = sumOf(s.rows.values(), 'simple_hits') + sumOf(s.rows.values(), 'semantic_hits')
    return { summary: { total: hits, rate: ratio(hits, sumOf(s.rows.values(), 'consulted')) * 100 }, dataPoints }
  }

  /** `FROM` source of the current feedback entries of the filter's organisation. */
  #feedbackFrom(filter: LogFilter): string {
    return `(${currentFeedbackSql(this.#d, filter.scope)}) AS current_feedback`
  }

  /** Feedback created in the range whose trace has a request matching the filter. */
  #feedbackWhere(filter: LogFilter): string {
    const d = this.#d
    return `fb_created_ms >= ${d.int(Math.max(0, Math.ceil(filter.from)))} AND fb_created_ms <= ${d.int(Math.max(0, Math.floor(filter.to)))} AND fb_trace IN (SELECT trace_id FROM ${d.logsTable} WHERE ${logFilterCondition(d, filter)})`
  }

  async #feedbackSeries(filter: LogFilter) {
    const d = this.#d
    const step = bucketStepSeconds(filter.from, filter.to)
    const rows = await this.#run(
      `SELECT ${d.bucketOf('fb_created_ms', step)} AS bucket, count(*) AS n, sum(fb_value * fb_weight) AS weighted FROM ${this.#feedbackFrom(filter)} WHERE ${this.#feedbackWhere(filter)} GROUP BY bucket`,
    )
    return this.#bucketed(filter, step, rows)
  }

  async #feedbackByModel(filter: LogFilter): Promise<GraphResult> {
    const d = this.#d
    const models = `SELECT DISTINCT trace_id AS fb_trace, model AS ai_model FROM ${d.logsTable} WHERE ${logFilterCondition(d, filter)} AND model IS NOT NULL`
    const rows = await this.#run(
      `SELECT ai_model, count(*) AS n, sum(fb_value * fb_weight) AS weighted FROM ${this.#feedbackFrom(filter)} ${d.join('inner', models, 'fb_trace')} WHERE fb_created_ms >= ${d.int(Math.max(0, Math.ceil(filter.from)))} AND fb_created_ms <= ${d.int(Math.max(0, Math.floor(filter.to)))} GROUP BY ai_model ORDER BY n DESC, ai_model`,
    )
    return {
      summary: {},
      dataPoints: rows.map((row) => ({ ai_model: toStringOrNull(row.ai_model), total: toNumber(row.n), avg_weighted_feedback: ratio(toNumber(row.weighted), toNumber(row.n)) })),
    }
  }

  // -------------------------------------------------------------------------------------------
  // Groups and summary

  async group(request: GroupRequest, filter: LogFilter): Promise<GroupResult> {
    const d = this.#d
    const limit = d.int(request.pageSize)
    const offset = d.int(request.page * request.pageSize)
    const where = logFilterCondition(d, filter)
    if (request.name === 'metadata') {
      if (request.metadataKey === undefined) throw new TypeError('the metadata group needs a metadata key')
      return this.#metadataGroup(request.metadataKey, where, limit, offset, filter)
    }
    const spec = GROUPS[request.name]
    const keyed = `${where} AND ${spec.expression} IS NOT NULL`
    const [rows, totals] = await Promise.all([
      this.#run(
        `SELECT ${spec.expression} AS group_key, count(*) AS n, sum(cost_nano_usd) AS cost_nano FROM ${d.logsTable} WHERE ${keyed} GROUP BY group_key ORDER BY n DESC, group_key LIMIT ${limit} OFFSET ${offset}`,
      ),
      this.#run(`SELECT ${d.countDistinct(spec.expression)} AS total FROM ${d.logsTable} WHERE ${keyed}`),
    ])
    return {
      total: toNumber(totals[0]?.total),
      rows: rows.map((row) => {
        const out: Point = { [spec.field]: spec.numeric ? toNumber(row.group_key) : toStringOrNull(row.group_key), requests: toNumber(row.n) }
        if (spec.cost) out.cost = cents(toNumber(row.cost_nano))
        return out
      }),
    }
  }

  async #metadataGroup(key: string, where: string, limit: string, offset: string, filter: LogFilter): Promise<GroupResult> {
    const d = this.#d
    const keyed = `${where} AND ${d.hasMetadataKey(key)}`
    const matched = `SELECT trace_id, ${d.metadataValue(key)} AS group_key, cost_nano_usd, total_tokens, ${d.logCreatedAtMs} AS row_ms FROM ${d.logsTable} WHERE ${keyed}`
    const perTrace = `SELECT fb_trace AS trace_id, avg(fb_value * fb_weight) AS fb_avg, count(*) AS fb_n FROM ${this.#feedbackFrom(filter)} GROUP BY fb_trace`
    const withFeedback = 'fb_n > 0'
    const [rows, totals] = await Promise.all([
      this.#run(
        `SELECT group_key, count(*) AS n, sum(cost_nano_usd) AS cost_nano, sum(total_tokens) AS tokens, count(total_tokens) AS usage_n, ${d.sumIf('fb_avg', withFeedback)} AS fb_sum, ${d.countIf(withFeedback)} AS fb_requests, max(row_ms) AS last_ms FROM (${matched}) AS matched ${d.join('left', perTrace, 'trace_id')} GROUP BY group_key ORDER BY n DESC, group_key LIMIT ${limit} OFFSET ${offset}`,
      ),
      this.#run(`SELECT ${d.countDistinct(d.metadataValue(key))} AS total FROM ${d.logsTable} WHERE ${keyed}`),
    ])
    return {
      total: toNumber(totals[0]?.total),
      rows: rows.map((row) => {
        const withFb = toNumber(row.fb_requests)
        return {
          metadata_value: toStringOrNull(row.group_key),
          requests: toNumber(row.n),
          cost: cents(toNumber(row.cost_nano)),
          avg_tokens: ratio(toNumber(row.tokens), toNumber(row.usage_n)),
          avg_weighted_feedback: withFb > 0 ? toNumber(row.fb_sum) / withFb : null,
          requests_with_feedback: withFb,
          last_seen: new Date(toNumber(row.last_ms)).toISOString(),
        }
      }),
    }
  }

  async cacheSummary(filter: LogFilter): Promise<CacheSummary> {
    const d = this.#d
    const hit = "cache_status IN ('hit', 'semantic_hit')"
    const miss = "cache_status = 'miss'"
    const row = await this.#whole(
      filter,
      `count(*) AS n, ${d.countIf(hit)} AS hits, ${d.sumIf('latency_ms', hit)} AS hit_latency, ${d.countIf(miss)} AS misses, ${d.sumIf('latency_ms', miss)} AS miss_latency`,
    )
    const hits = toNumber(row.hits)
    const hitAvg = ratio(toNumber(row.hit_latency), hits)
    const missAvg = ratio(toNumber(row.miss_latency), toNumber(row.misses))
    return {
      hits,
      avgLatency: hitAvg,
      totalRequests: toNumber(row.n),
      cacheSpeedup: hits > 0 && missAvg > 0 ? ((missAvg - hitAvg) / missAvg) * 100 : 0,
    }
  }

  // -------------------------------------------------------------------------------------------
  // Single records and scans

  async findLog(scope: LogScope, id: string): Promise<StoredLog | null> {
    const d = this.#d
    const descending = d.logOrder.split(', ').map((column) => `${column} DESC`).join(', ')
    const base = `SELECT ${d.logColumns} FROM ${d.logsTable} WHERE ${scopeCondition(d, scope)}`
    let rows = await this.#run(`${base} AND id = ${d.str(id)} ORDER BY ${d.logOrder} LIMIT 1`)
    if (rows.length === 0) rows = await this.#run(`${base} AND trace_id = ${d.str(id)} ORDER BY ${descending} LIMIT 1`)
    const row = rows[0]
    if (row === undefined) return null
    const weights = await this.#traceFeedback(scope, [String(row.trace_id)])
    return this.#toStoredLog(row, weights)
  }

  async hasTrace(scope: LogScope, traceId: string): Promise<boolean> {
    const d = this.#d
    const rows = await this.#run(`SELECT 1 AS found FROM ${d.logsTable} WHERE ${scopeCondition(d, scope)} AND trace_id = ${d.str(traceId)} LIMIT 1`)
    return rows.length > 0
  }

  async findFeedback(scope: LogScope, id: string): Promise<FeedbackRecord | null> {
    const d = this.#d
    const v = d.feedbackVersion
    const rows = await this.#run(
      `SELECT id, ${d.argMax('trace_id', v)} AS fb_trace, ${d.argMax('organisation_id', v)} AS fb_organisation, ${d.argMax('workspace_id', v)} AS fb_workspace, ${d.argMax('value', v)} AS fb_value, ${d.argMax('weight', v)} AS fb_weight, ${d.argMax('metadata_keys', v)} AS fb_keys, ${d.argMax('metadata_values', v)} AS fb_values, ${d.argMax(d.feedbackCreatedAtMs, v)} AS fb_created_ms, max(${d.feedbackUpdatedAtMs}) AS fb_updated_ms FROM ${d.feedbackTable} WHERE organisation_id = ${d.str(scope.organisationId)} AND id = ${d.str(id)} GROUP BY id`,
    )
    const row = rows[0]
    if (row === undefined) return null
    const workspaceId = this.#tenant(row.fb_workspace)
    if (scope.workspaceId !== null && workspaceId !== scope.workspaceId) return null
    return {
      id: String(row.id),
      traceId: String(row.fb_trace),
      organisationId: String(row.fb_organisation),
      workspaceId,
      value: toNumber(row.fb_value),
      weight: toNumber(row.fb_weight),
      metadata: zipMetadata(row.fb_keys, row.fb_values),
      createdAt: toNumber(row.fb_created_ms),
      updatedAt: toNumber(row.fb_updated_ms),
    }
  }

  async scanLogs(
    filter: LogFilter,
    options: { readonly batchSize: number; readonly limit: number },
    onBatch: (rows: readonly StoredLog[]) => Promise<boolean>,
  ): Promise<void> {
    const d = this.#d
    const where = logFilterCondition(d, filter)
    const batchSize = Math.max(1, Math.floor(options.batchSize))
    let remaining = Math.max(0, Math.floor(options.limit))
    let cursor: { createdAtMs: number; id: string } | null = null
    while (remaining > 0) {
      const take = Math.min(batchSize, remaining)
      const after = cursor === null ? '' : ` AND ${d.logAfter(cursor.createdAtMs, cursor.id)}`
      const rows = await this.#run(`SELECT ${d.logColumns} FROM ${d.logsTable} WHERE ${where}${after} ORDER BY ${d.logOrder} LIMIT ${d.int(take)}`)
      if (rows.length === 0) return
      const weights = await this.#traceFeedback(filter.scope, [...new Set(rows.map((row) => String(row.trace_id)))])
      const logs = rows.map((row) => this.#toStoredLog(row, weights))
      remaining -= logs.length
      const last = logs[logs.length - 1] as StoredLog
      cursor = { createdAtMs: last.createdAt, id: last.id }
      const more = await onBatch(logs)
      if (!more || rows.length < take) return
    }
  }

  /** Average weighted feedback per trace (only traces that have feedback). */
  async #traceFeedback(scope: LogScope, traceIds: readonly string[]): Promise<Map<string, number>> {
    const weights = new Map<string, number>()
    if (traceIds.length === 0) return weights
    const d = this.#d
    const only = `trace_id IN (${traceIds.map((trace) => d.str(trace)).join(', ')})`
    const rows = await this.#run(
      `SELECT fb_trace, sum(fb_value * fb_weight) AS weighted, count(*) AS n FROM (${currentFeedbackSql(d, scope, only)}) AS current_feedback GROUP BY fb_trace`,
    )
    for (const row of rows) weights.set(String(row.fb_trace), ratio(toNumber(row.weighted), toNumber(row.n)))
    return weights
  }

  #tenant(value: unknown): string | null {
    const text = toStringOrNull(value)
    return this.#emptyIsNull && text === '' ? null : text
  }

  #toStoredLog(row: SqlResultRow, weights: ReadonlyMap<string, number>): StoredLog {
    const traceId = String(row.trace_id)
    return {
      id: String(row.id),
      traceId,
      source: row.source === 'custom' ? 'custom' : 'gateway',
      createdAt: toNumber(row.created_at_ms),
      organisationId: this.#tenant(row.organisation_id),
      workspaceId: this.#tenant(row.workspace_id),
      apiKeyId: toStringOrNull(row.api_key_id),
      user: toStringOrNull(row.end_user),
      virtualKey: toStringOrNull(row.virtual_key),
      config: toStringOrNull(row.config),
      configVersion: toNumberOrNull(row.config_version),
      promptSlug: toStringOrNull(row.prompt_slug),
      promptVersion: toNumberOrNull(row.prompt_version),
      method: String(row.method),
      route: String(row.route),
      path: String(row.path),
      provider: toStringOrNull(row.provider),
      model: toStringOrNull(row.model),
      status: toNumber(row.status),
      outcome: row.outcome === 'errored' || row.outcome === 'aborted' ? row.outcome : 'completed',
      streaming: toNumber(row.streaming) === 1,
      latencyMs: toNumber(row.latency_ms),
      ttftMs: toNumberOrNull(row.ttft_ms),
      promptTokens: toNumberOrNull(row.prompt_tokens),
      completionTokens: toNumberOrNull(row.completion_tokens),
      totalTokens: toNumberOrNull(row.total_tokens),
      cachedTokens: toNumberOrNull(row.cached_tokens),
      costNanoUsd: toNumberOrNull(row.cost_nano_usd),
      cacheStatus: cacheStatusOf(row.cache_status),
      retryCount: toNumber(row.retry_count),
      fallbackIndex: toNumberOrNull(row.fallback_index),
      errorCode: toStringOrNull(row.error_code),
      errorType: toStringOrNull(row.error_type),
      metadata: zipMetadata(row.metadata_keys, row.metadata_values),
      requestBody: toStringOrNull(row.request_body),
      responseBody: toStringOrNull(row.response_body),
      attempts: parseAttempts(row.attempts),
      weightedFeedback: weights.get(traceId) ?? null,
    }
  }
}

function cacheStatusOf(value: unknown): StoredLog['cacheStatus'] {
  return value === 'miss' || value === 'hit' || value === 'semantic_hit' || value === 'refresh' ? value : 'disabled'
}

/**
 * The `attempts` column (JSON text the sinks wrote from checked records) back to its list; `null`
 * for `NULL` and for text that is not a JSON array.
 */
export function parseAttempts(value: unknown): LogAttempt[] | null {
  if (typeof value !== 'string') return null
  try {
    const parsed: unknown = JSON.parse(value)
    return Array.isArray(parsed) ? (parsed as LogAttempt[]) : null
  } catch {
    return null
  }
}

/** Parallel key/value lists back to a record; `null` when empty (the sinks store `null` and `{}` alike). */
function zipMetadata(keys: unknown, values: unknown): Readonly<Record<string, string>> | null {
  if (!Array.isArray(keys) || !Array.isArray(values) || keys.length === 0) return null
  const metadata: Record<string, string> = {}
  keys.forEach((key, index) => {
    metadata[String(key)] = String(values[index] ?? '')
  })
  return metadata
}
