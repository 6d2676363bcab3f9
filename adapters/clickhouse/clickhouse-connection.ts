/**
 * What the ClickHouse log sink and log analytics share about reaching the store: one way to build
 * the client, one check of the database name, and one table setup.
 */
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client'
import { databaseName } from '../sql/sql-literals.js'
import { clickHouseFeedbackDdl, clickHouseRequestLogDdl } from './clickhouse-schema.js'

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

/** Creates the database and the request-log and feedback tables; idempotent. */
export async function prepareClickHouseLogTables(client: ClickHouseClient, database: string): Promise<void> {
  await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}` })
  await client.command({ query: clickHouseRequestLogDdl(database) })
  await client.command({ query: clickHouseFeedbackDdl(database) })
}
