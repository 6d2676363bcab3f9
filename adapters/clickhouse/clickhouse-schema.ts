/**
 * The ClickHouse tables of request logs and feedback, written for ClickHouse 18.16 and later (no
 * `DateTime64`, no `Map`, no `LowCardinality` without a setting): the same column names as the
 * DuckDB tables (adapters/embedded/duckdb-schema.ts).
 *
 * - `request_logs`: MergeTree, partitioned by month, ordered with the tenant first
 *   (`organisation_id, workspace_id, created_at, id`) so every analytics query, which always
 *   filters on the tenant and a time range, reads only its own granules. Key columns cannot be
 *   Nullable: a missing organisation or workspace is `''`. `created_at` (seconds) serves
 *   partitioning and bucketing; `created_at_ms` keeps the exact epoch milliseconds.
 * - On servers that have it (20.x and later), `request_logs` keeps `non_replicated_deduplication_window`
 *   inserted blocks, so a repeated insert of a batch (same rows, or the same
 *   `insert_deduplication_token` on 22.x and later) is dropped by the server; see clickhouse-log-sink.ts.
 * - Columns added after a table's first release are appended to `CLICKHOUSE_REQUEST_LOG_COLUMNS`
 *   (Nullable, or with a default an old row can take): `prepareClickHouseLogTables` adds the ones an
 *   existing table lacks on start (clickhouse-connection.ts). `attempts` is JSON text.
 * - `feedback`: ReplacingMergeTree on `updated_at_ms`: an update inserts a new version of the row
 *   and merges keep the latest; readers must still pick the latest themselves (`argMax`), because
 *   merges happen eventually.
 */
export const CLICKHOUSE_REQUEST_LOG_TABLE = 'request_logs'
export const CLICKHOUSE_FEEDBACK_TABLE = 'feedback'

export const CLICKHOUSE_REQUEST_LOG_COLUMNS = [
  ['organisation_id', 'String'],
  ['workspace_id', 'String'],
  ['created_at', 'DateTime'],
  ['created_at_ms', 'UInt64'],
  ['id', 'String'],
  ['trace_id', 'String'],
  ['source', 'String'],
  ['api_key_id', 'Nullable(String)'],
  ['end_user', 'Nullable(String)'],
  ['virtual_key', 'Nullable(String)'],
  ['config', 'Nullable(String)'],
  ['prompt_slug', 'Nullable(String)'],
  ['prompt_version', 'Nullable(UInt32)'],
  ['method', 'String'],
  ['route', 'String'],
  ['path', 'String'],
  ['provider', 'Nullable(String)'],
  ['model', 'Nullable(String)'],
  ['status', 'UInt16'],
  ['outcome', 'String'],
  ['streaming', 'UInt8'],
  ['latency_ms', 'Float64'],
  ['ttft_ms', 'Nullable(Float64)'],
  ['prompt_tokens', 'Nullable(UInt32)'],
  ['completion_tokens', 'Nullable(UInt32)'],
  ['total_tokens', 'Nullable(UInt32)'],
  ['cached_tokens', 'Nullable(UInt32)'],
  ['cost_nano_usd', 'Nullable(UInt64)'],
  ['cache_status', 'String'],
  ['retry_count', 'UInt16'],
  ['fallback_index', 'Nullable(Int16)'],
  ['error_code', 'Nullable(String)'],
  ['error_type', 'Nullable(String)'],
  ['metadata_keys', 'Array(String)'],
  ['metadata_values', 'Array(String)'],
  ['request_body', 'Nullable(String)'],
  ['response_body', 'Nullable(String)'],
  ['config_version', 'Nullable(UInt32)'],
  ['attempts', 'Nullable(String)'],
] as const

export const CLICKHOUSE_FEEDBACK_COLUMNS = [
  ['organisation_id', 'String'],
  ['workspace_id', 'String'],
  ['id', 'String'],
  ['trace_id', 'String'],
  ['value', 'Int8'],
  ['weight', 'Float64'],
  ['metadata_keys', 'Array(String)'],
  ['metadata_values', 'Array(String)'],
  ['created_at', 'DateTime'],
  ['created_at_ms', 'UInt64'],
  ['updated_at_ms', 'UInt64'],
] as const

const columnList = (columns: ReadonlyArray<readonly [string, string]>): string =>
  columns.map(([name, type]) => `${name} ${type}`).join(',\n  ')

/**
 * Inserted blocks a plain MergeTree remembers to drop a repeated insert (servers that have the
 * setting, 20.x and later; 18.16 has none). Writers of all gateways count together, so this covers
 * a retry up to about a thousand inserts later; replays older than that rely on the id check.
 */
export const CLICKHOUSE_DEDUPLICATION_WINDOW = 1000

/**
 * `database` is validated by the caller (`[A-Za-z_][A-Za-z0-9_]*`). `deduplicationWindow`: only on
 * servers that know `non_replicated_deduplication_window` (18.16 refuses an unknown setting).
 */
export const clickHouseRequestLogDdl = (database: string, deduplicationWindow = false): string => `CREATE TABLE IF NOT EXISTS ${database}.${CLICKHOUSE_REQUEST_LOG_TABLE} (
  ${columnList(CLICKHOUSE_REQUEST_LOG_COLUMNS)}
) ENGINE = MergeTree
PARTITION BY toYYYYMM(created_at)
ORDER BY (organisation_id, workspace_id, created_at, id)${
  deduplicationWindow ? `\nSETTINGS non_replicated_deduplication_window = ${CLICKHOUSE_DEDUPLICATION_WINDOW}` : ''
}`

export const clickHouseFeedbackDdl = (database: string): string => `CREATE TABLE IF NOT EXISTS ${database}.${CLICKHOUSE_FEEDBACK_TABLE} (
  ${columnList(CLICKHOUSE_FEEDBACK_COLUMNS)}
) ENGINE = ReplacingMergeTree(updated_at_ms)
PARTITION BY toYYYYMM(created_at)
ORDER BY (organisation_id, workspace_id, id)`
