/**
 * What the ClickHouse log sink and log analytics share about reaching the store: one way to build
 * the client, one check of the database name, and one table setup.
 */
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client'
import { databaseName, quoteString } from '../sql/sql-literals.js'
import {
  CLICKHOUSE_DEDUPLICATION_WINDOW,
  CLICKHOUSE_REQUEST_LOG_COLUMNS,
  CLICKHOUSE_REQUEST_LOG_TABLE,
  clickHouseFeedbackDdl,
  clickHouseRequestLogDdl,
} from './clickhouse-schema.js'

/** `database`, or `gateway`, checked (it is written into DDL and every query). */
export function logDatabaseOf(database: string | undefined): string {
  return databaseName(database ?? 'gateway')
}

/**
 * A client for the store at `url`, without a database: the URL's path is dropped (the client would
 * take it as the default database, which may not exist yet), and every statement names its
 * database. The driver's own logger is off: it would print every failed request to stderr, and
 * the callers report failures themselves (rate limited).
 */
export function clickHouseLogClient(url: string, requestTimeoutMs: number): ClickHouseClient {
  const base = new URL(url)
  base.pathname = '/'
  return createClient({ url: base.toString(), request_timeout: requestTimeoutMs, log: { level: ClickHouseLogLevel.OFF } })
}

/** What the server and the `request_logs` table offer against a repeated insert (see clickhouse-log-sink.ts). */
export interface ClickHouseLogTableFeatures {
  /**
   * Inserts may carry `insert_deduplication_token` and the table honours it (22.x and later, with a
   * Replicated engine or a plain MergeTree keeping a deduplication window). False on 18.16.
   */
  readonly insertTokens: boolean
}

/**
 * Adds the `request_logs` columns a table made by an older version lacks (each is Nullable, so old
 * rows read `NULL`). Looked up in `system.columns` (18.16 has no `ADD COLUMN IF NOT EXISTS`); when
 * another instance adds the same column at the same moment, the refused ALTER is checked again.
 */
async function addMissingLogColumns(client: ClickHouseClient, database: string): Promise<void> {
  const present = async (): Promise<Set<string>> => {
    const result = await client.query({
      query: `SELECT name FROM system.columns WHERE database = ${quoteString('clickhouse', database)} AND table = ${quoteString('clickhouse', CLICKHOUSE_REQUEST_LOG_TABLE)}`,
      format: 'JSONEachRow',
    })
    return new Set((await result.json<{ name: string }>()).map((row) => row.name))
  }
  const columns = await present()
  for (const [name, type] of CLICKHOUSE_REQUEST_LOG_COLUMNS) {
    if (columns.has(name)) continue
    try {
      await client.command({ query: `ALTER TABLE ${database}.${CLICKHOUSE_REQUEST_LOG_TABLE} ADD COLUMN ${name} ${type}` })
    } catch (error) {
      if (!(await present()).has(name)) throw error
    }
  }
}

/**
 * Creates the database and the request-log and feedback tables, and adds the request-log columns
 * an older version's table lacks; idempotent. On servers that can
 * (not 18.16), `request_logs` keeps a deduplication window (created so, or set on a table an older
 * version created), and the answer says whether inserts should carry a deduplication token.
 */
export async function prepareClickHouseLogTables(client: ClickHouseClient, database: string): Promise<ClickHouseLogTableFeatures> {
  await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}` })
  // Plain aliases: `window` is a keyword on servers with window functions.
  const server = await first<{ has_token: string | number; has_window: string | number }>(
    client,
    `SELECT
  (SELECT count() FROM system.settings WHERE name = 'insert_deduplication_token') AS has_token,
  (SELECT count() FROM system.merge_tree_settings WHERE name = 'non_replicated_deduplication_window') AS has_window`,
  )
  const window = Number(server?.has_window ?? 0) > 0
  await client.command({ query: clickHouseRequestLogDdl(database, window) })
  await addMissingLogColumns(client, database)
  await client.command({ query: clickHouseFeedbackDdl(database) })
  if (!window) return { insertTokens: false }
  const table = await first<{ engine: string; create_table_query: string }>(
    client,
    `SELECT engine, create_table_query FROM system.tables WHERE database = ${quoteString('clickhouse', database)} AND name = ${quoteString('clickhouse', CLICKHOUSE_REQUEST_LOG_TABLE)}`,
  )
  let deduplicates = table?.engine.startsWith('Replicated') === true
  if (table?.engine === 'MergeTree') {
    deduplicates = /non_replicated_deduplication_window\s*=\s*[1-9]/.test(table.create_table_query)
    // A table created before the window was set (or by an older version of the gateway) gets it
    // now. Best effort: without it (a user not allowed to ALTER) the sink still writes, relying on
    // its own checks, rather than never getting prepared.
    if (!deduplicates) {
      deduplicates = await client
        .command({
          query: `ALTER TABLE ${database}.${CLICKHOUSE_REQUEST_LOG_TABLE} MODIFY SETTING non_replicated_deduplication_window = ${CLICKHOUSE_DEDUPLICATION_WINDOW}`,
        })
        .then(
          () => true,
          () => false,
        )
    }
  }
  return { insertTokens: deduplicates && Number(server?.has_token ?? 0) > 0 }
}

async function first<T>(client: ClickHouseClient, query: string): Promise<T | undefined> {
  const result = await client.query({ query, format: 'JSONEachRow' })
  return (await result.json<T>())[0]
}
