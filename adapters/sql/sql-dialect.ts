/**
 * What differs between the two log stores' SQL, and nothing else: the analytics queries
 * (analytics-sql.ts) are written once against this small object.
 *
 * Both stores hold the same columns (adapters/embedded/duckdb-schema.ts,
 * adapters/clickhouse/clickhouse-schema.ts) with three differences handled here: ClickHouse keeps
 * the exact time in `created_at_ms` (UInt64) next to `created_at` (DateTime seconds, the sort and
 * partition key) while DuckDB has one millisecond `TIMESTAMP`; feedback versions are ordered by
 * `updated_at_ms` vs `updated_at`; and a missing organisation/workspace is `''` in ClickHouse.
 *
 * Every method returns SQL built only from constants and the quoting helpers of sql-literals.ts.
 */
import { databaseName, quoteInteger, quoteNumber, quoteString, type SqlEngine } from './sql-literals.js'

export interface SqlDialect {
  readonly engine: SqlEngine
  /** Qualified, validated table names. */
  readonly logsTable: string
  readonly feedbackTable: string
  /** A string literal. */
  str(value: string): string
  /** A finite number literal. */
  num(value: number): string
  /** A non-negative integer literal. */
  int(value: number): string
  /** Expression: a log row's creation time in epoch milliseconds. */
  readonly logCreatedAtMs: string
  /** Condition: a log row was created within [fromMs, toMs] (written so the store can prune by time). */
  logTimeRange(fromMs: number, toMs: number): string
  /** Keyset condition: a log row sorts after (createdAtMs, id) in (created_at, id) order. */
  logAfter(createdAtMs: number, id: string): string
  /** ORDER BY list of the stable log order. */
  readonly logOrder: string
  /** Select list of every log column, with `created_at_ms` as epoch milliseconds. */
  readonly logColumns: string
  /** Expression: the bucket start (epoch seconds) of an epoch-milliseconds expression. */
  bucketOf(msExpression: string, stepSeconds: number): string
  /** Condition: the log row's metadata has `key` with exactly `value`. */
  metadataEquals(key: string, value: string): string
  /** Condition: the log row's metadata has `key`. */
  hasMetadataKey(key: string): string
  /** Expression: the value of metadata `key` (only meaningful where `hasMetadataKey`). */
  metadataValue(key: string): string
  /** Aggregate: rows where `condition` holds. */
  countIf(condition: string): string
  /** Aggregate: sum of `expression` over rows where `condition` holds (NULL/0 when none). */
  sumIf(expression: string, condition: string): string
  /** Aggregate: distinct non-NULL values of `expression`. */
  countDistinct(expression: string): string
  /**
   * Aggregate: the exact nearest-rank percentiles of `expression`, as an array in the order of
   * `percents` (integers 1..99): pN of n values is the value at 1-based rank ceil(N·n/100).
   */
  percentiles(expression: string, percents: readonly number[]): string
  /** Expression: `value` of the row with the greatest `by` in the group. */
  argMax(value: string, by: string): string
  /** A join clause on one shared column name. */
  join(kind: 'inner' | 'left', subquery: string, column: string): string
  /** Feedback columns: the version order and the creation time in epoch ms. */
  readonly feedbackVersion: string
  readonly feedbackCreatedAtMs: string
  readonly feedbackUpdatedAtMs: string
  /** Condition: the row belongs to no workspace (feedback given with an organisation key). */
  readonly noWorkspace: string
  /** Expression: 1 where `condition` holds, else 0 (the same integer on both engines). */
  flag(condition: string): string
}

/** N/100 for an integer percent 1..99; anything else is refused before it reaches SQL. */
function percentLevel(percent: number): number {
  if (!Number.isInteger(percent) || percent < 1 || percent > 99) throw new TypeError(`invalid percentile: ${String(percent)}`)
  return percent / 100
}

const LOG_FIELDS = [
  'id', 'trace_id', 'source', 'organisation_id', 'workspace_id', 'api_key_id', 'end_user', 'virtual_key', 'config',
  'prompt_slug', 'prompt_version', 'method', 'route', 'path', 'provider', 'model', 'status', 'outcome', 'streaming',
  'latency_ms', 'ttft_ms', 'prompt_tokens', 'completion_tokens', 'total_tokens', 'cached_tokens', 'cost_nano_usd',
  'cache_status', 'retry_count', 'fallback_index', 'error_code', 'error_type', 'metadata_keys', 'metadata_values',
  'request_body', 'response_body', 'config_version', 'attempts',
] as const

/** ClickHouse 18.16+: no query parameters, no `toStartOfInterval`, UInt64 returned as strings. */
export function clickHouseDialect(database: string): SqlDialect {
  const db = databaseName(database)
  const str = (value: string): string => quoteString('clickhouse', value)
  return {
    engine: 'clickhouse',
    logsTable: `${db}.request_logs`,
    feedbackTable: `${db}.feedback`,
    str,
    num: quoteNumber,
    int: quoteInteger,
    logCreatedAtMs: 'created_at_ms',
    // `created_at` (seconds) is in the sort key: the coarse condition prunes granules, the
    // millisecond one is exact.
    logTimeRange: (fromMs, toMs) =>
      `created_at >= toDateTime(${quoteInteger(Math.max(0, Math.floor(fromMs / 1000)))}) AND created_at <= toDateTime(${quoteInteger(Math.max(0, Math.floor(toMs / 1000)))}) AND created_at_ms >= ${quoteInteger(Math.max(0, Math.ceil(fromMs)))} AND created_at_ms <= ${quoteInteger(Math.max(0, Math.floor(toMs)))}`,
    logAfter: (createdAtMs, id) => `(created_at_ms > ${quoteInteger(createdAtMs)} OR (created_at_ms = ${quoteInteger(createdAtMs)} AND id > ${str(id)}))`,
    logOrder: 'created_at_ms, id',
    logColumns: [...LOG_FIELDS, 'created_at_ms'].join(', '),
    bucketOf: (ms, step) => `(intDiv(${ms}, ${quoteInteger(step * 1000)}) * ${quoteInteger(step)})`,
    // `has` first: indexOf() is 0 for a missing key and `arr[0]` is '' in ClickHouse.
    metadataEquals: (key, value) => `(has(metadata_keys, ${str(key)}) AND metadata_values[indexOf(metadata_keys, ${str(key)})] = ${str(value)})`,
    hasMetadataKey: (key) => `has(metadata_keys, ${str(key)})`,
    metadataValue: (key) => `metadata_values[indexOf(metadata_keys, ${str(key)})]`,
    countIf: (condition) => `countIf(${condition})`,
    sumIf: (expression, condition) => `sumIf(${expression}, ${condition})`,
    countDistinct: (expression) => `uniqExact(${expression})`,
    // quantileExact(level) takes the value at 0-based index floor(level·n). With level = N/100 − 10⁻¹²
    // that index is ceil(N·n/100) − 1 for every n below 10¹⁰: when N·n/100 is an integer m the
    // product falls just under m, otherwise its fraction (a multiple of 1/100) dwarfs 10⁻¹²·n.
    percentiles: (expression, percents) => `quantilesExact(${percents.map((p) => quoteNumber(percentLevel(p) - 1e-12)).join(', ')})(${expression})`,
    argMax: (value, by) => `argMax(${value}, ${by})`,
    join: (kind, subquery, column) => `${kind === 'inner' ? 'ALL INNER' : 'ANY LEFT'} JOIN (${subquery}) USING ${column}`,
    feedbackVersion: 'updated_at_ms',
    feedbackCreatedAtMs: 'created_at_ms',
    feedbackUpdatedAtMs: 'updated_at_ms',
    noWorkspace: "workspace_id = ''",
    flag: (condition) => `if(${condition}, 1, 0)`,
  }
}

/** DuckDB 1.x over the embedded file's tables. */
export function duckDbDialect(): SqlDialect {
  const str = (value: string): string => quoteString('duckdb', value)
  const at = (ms: number): string => `epoch_ms(${quoteInteger(ms)})`
  return {
    engine: 'duckdb',
    logsTable: 'request_logs',
    feedbackTable: 'feedback',
    str,
    num: quoteNumber,
    int: quoteInteger,
    logCreatedAtMs: 'epoch_ms(created_at)',
    // Constant bounds on the raw column let DuckDB's zone maps skip row groups.
    logTimeRange: (fromMs, toMs) => `created_at >= ${at(Math.max(0, Math.ceil(fromMs)))} AND created_at <= ${at(Math.max(0, Math.floor(toMs)))}`,
    logAfter: (createdAtMs, id) => `(created_at > ${at(createdAtMs)} OR (created_at = ${at(createdAtMs)} AND id > ${str(id)}))`,
    logOrder: 'created_at, id',
    logColumns: [...LOG_FIELDS, 'epoch_ms(created_at) AS created_at_ms'].join(', '),
    bucketOf: (ms, step) => `((${ms} // ${quoteInteger(step * 1000)}) * ${quoteInteger(step)})`,
    // list_position() is NULL for a missing key, and indexing with NULL yields NULL: no match.
    metadataEquals: (key, value) => `(metadata_values[list_position(metadata_keys, ${str(key)})] = ${str(value)})`,
    hasMetadataKey: (key) => `list_contains(metadata_keys, ${str(key)})`,
    metadataValue: (key) => `metadata_values[list_position(metadata_keys, ${str(key)})]`,
    countIf: (condition) => `count(*) FILTER (WHERE ${condition})`,
    sumIf: (expression, condition) => `sum(${expression}) FILTER (WHERE ${condition})`,
    countDistinct: (expression) => `count(DISTINCT ${expression})`,
    // With DECIMAL levels (a literal like 0.90) quantile_disc computes the rank in integers:
    // ceil(n·q), exactly nearest rank. A DOUBLE level would go through floating point.
    percentiles: (expression, percents) => `quantile_disc(${expression}, [${percents.map((p) => percentLevel(p).toFixed(2)).join(', ')}])`,
    argMax: (value, by) => `arg_max(${value}, ${by})`,
    join: (kind, subquery, column) => `${kind === 'inner' ? 'INNER' : 'LEFT'} JOIN (${subquery}) AS joined USING (${column})`,
    feedbackVersion: 'updated_at',
    feedbackCreatedAtMs: 'epoch_ms(created_at)',
    feedbackUpdatedAtMs: 'epoch_ms(updated_at)',
    noWorkspace: 'workspace_id IS NULL',
    flag: (condition) => `CASE WHEN ${condition} THEN 1 ELSE 0 END`,
  }
}
