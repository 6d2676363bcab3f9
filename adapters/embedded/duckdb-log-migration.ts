/**
 * Creates the log tables of the embedded file and upgrades a `request_logs` table written by an
 * older version, so an upgraded data directory keeps its logs: `ttfb_ms` becomes `ttft_ms`, the
 * JSON `metadata` column becomes the `metadata_keys`/`metadata_values` lists (and fills
 * `end_user` from its `_user`), and the other new columns get the value a fresh write of the same
 * request would have had (`source` 'gateway', `cache_status` 'disabled', `retry_count` 0, else NULL).
 */
import type { DuckDbExecutor } from './duckdb-database.js'
import { FEEDBACK_DDL, REQUEST_LOG_COLUMNS, REQUEST_LOG_DDL, REQUEST_LOG_TABLE } from './duckdb-schema.js'

const METADATA_MAP = `json_transform(metadata, '"MAP(VARCHAR, VARCHAR)"')`

/** How existing rows fill a new column; `null` leaves them NULL. */
function fillOf(column: string, hasJsonMetadata: boolean): string | null {
  switch (column) {
    case 'source':
      return `'gateway'`
    case 'cache_status':
      return `'disabled'`
    case 'retry_count':
      return '0'
    case 'metadata_keys':
      return hasJsonMetadata ? `coalesce(map_keys(${METADATA_MAP}), []::VARCHAR[])` : '[]::VARCHAR[]'
    case 'metadata_values':
      return hasJsonMetadata ? `coalesce(map_values(${METADATA_MAP}), []::VARCHAR[])` : '[]::VARCHAR[]'
    case 'end_user':
      return hasJsonMetadata ? `json_extract_string(metadata, '$._user')` : null
    default:
      return null
  }
}

/**
 * Brings `request_logs` and `feedback` up to date; run it in one transaction so a failed start
 * changes nothing. DuckDB cannot add a column with a constraint, so a column is added bare, filled
 * by rewriting it (`SET DATA TYPE ... USING`), then made NOT NULL (as the admin migrations do).
 */
export async function migrateLogTables(tx: DuckDbExecutor): Promise<void> {
  const rows = await tx.query(
    `SELECT column_name FROM information_schema.columns
     WHERE table_catalog = current_database() AND table_schema = current_schema() AND table_name = $1`,
    [REQUEST_LOG_TABLE],
  )
  const present = new Set(rows.map((row) => String(row.column_name)))
  if (present.size === 0) {
    await tx.run(REQUEST_LOG_DDL)
  } else {
    if (present.has('ttfb_ms') && !present.has('ttft_ms')) {
      await tx.run(`ALTER TABLE ${REQUEST_LOG_TABLE} RENAME COLUMN ttfb_ms TO ttft_ms`)
      present.add('ttft_ms')
    }
    const hasJsonMetadata = present.has('metadata')
    for (const [column, declared] of REQUEST_LOG_COLUMNS) {
      if (present.has(column)) continue
      const type = declared.replace(' NOT NULL', '')
      const alter = `ALTER TABLE ${REQUEST_LOG_TABLE} ALTER COLUMN ${column}`
      await tx.run(`ALTER TABLE ${REQUEST_LOG_TABLE} ADD COLUMN ${column} ${type}`)
      const fill = fillOf(column, hasJsonMetadata)
      if (fill !== null) await tx.run(`${alter} SET DATA TYPE ${type} USING ${fill}`)
      if (declared.endsWith(' NOT NULL')) await tx.run(`${alter} SET NOT NULL`)
    }
    if (hasJsonMetadata) await tx.run(`ALTER TABLE ${REQUEST_LOG_TABLE} DROP COLUMN metadata`)
  }
  await tx.run(FEEDBACK_DDL)
}
