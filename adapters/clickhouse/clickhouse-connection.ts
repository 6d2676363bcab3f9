/**
 * What the ClickHouse log sink and log analytics share about reaching the store: one way to build
 * the client, one check of the database name, and one table setup.
 */
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client'
import { databaseName, quoteString } from '../sql/sql-literals.js'
import {
  CLICKHOUSE_DEDUPLICATION_WINDOW,
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
 * Creates the database and the request-log and feedback tables; idempotent. On servers that can
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
