/**
 * `LogAnalytics` on ClickHouse (tables of clickhouse-schema.ts, ClickHouse 18.16 and later). The
 * queries are the shared ones of adapters/sql/analytics-sql.ts; ClickHouse 18.16 has no
 * server-side query parameters, so every literal is inlined through
 * adapters/sql/sql-literals.ts. Results are read as JSONEachRow (UInt64 arrives as a string and
 * is converted by the shared code).
 *
 * `start()` creates the database and tables when missing (the same DDL as the sink), so analytics
 * answer before the first log is written. ClickHouse being unreachable does not stop the gateway
 * from starting (the data plane does not need it): the tables are then prepared before the first
 * query that reaches it, and until then queries reject (the Admin API answers 503).
 * `health()` stays ok while ClickHouse is down, with a detail: readiness must not take the data
 * plane out of a load balancer because analytics are unavailable. A failed query rejects with a generic message; the
 * server's text (which may quote the query) is kept only as the `cause`, for the process log.
 */
import type { ClickHouseClient } from '@clickhouse/client'
import { LogStoreUnavailableError } from '../../core/ports.js'
import type { HealthStatus } from '../../core/service.js'
import type { SqlResultRow } from '../sql/analytics-sql.js'
import { SqlLogAnalytics } from '../sql/sql-log-analytics.js'
import { clickHouseDialect } from '../sql/sql-dialect.js'
import { clickHouseLogClient, logDatabaseOf, prepareClickHouseLogTables } from './clickhouse-connection.js'

export interface ClickHouseLogAnalyticsOptions {
  /** HTTP interface URL, e.g. `http://user:password@host:8123` (a path is ignored: see `database`). */
  readonly url: string
  /** Database holding `request_logs` and `feedback` (default `gateway`); `[A-Za-z_][A-Za-z0-9_]*`. */
  readonly database?: string
  /** Per-query timeout (default 30 s). */
  readonly requestTimeoutMs?: number
}

export class ClickHouseLogAnalytics extends SqlLogAnalytics {
  readonly #url: string
  readonly #database: string
  readonly #timeoutMs: number
  #client: ClickHouseClient | null = null
  #prepared = false

  constructor(options: ClickHouseLogAnalyticsOptions) {
    const database = logDatabaseOf(options.database)
    super(clickHouseDialect(database), (sql) => this.#query(sql))
    this.#url = options.url
    this.#database = database
    this.#timeoutMs = options.requestTimeoutMs ?? 30_000
  }

  async start(): Promise<void> {
    if (this.#client !== null) return
    this.#client = clickHouseLogClient(this.#url, this.#timeoutMs)
    // Unreachable now: retried before the first query (see the header).
    await this.#prepare(this.#client).catch(() => undefined)
  }

  async #prepare(client: ClickHouseClient): Promise<void> {
    try {
      await prepareClickHouseLogTables(client, this.#database)
    } catch (error) {
      throw new LogStoreUnavailableError('clickhouse', error)
    }
    this.#prepared = true
  }

  async close(): Promise<void> {
    const client = this.#client
    this.#client = null
    await client?.close()
  }

  async health(): Promise<HealthStatus> {
    const client = this.#client
    if (client === null) return { ok: false, detail: 'ClickHouse log analytics is not started' }
    const down = { ok: true, detail: 'ClickHouse does not answer: analytics and log reads answer 503 until it does' }
    try {
      const ping = await client.ping()
      return ping.success ? { ok: true } : down
    } catch {
      return down
    }
  }


  async #query(sql: string): Promise<readonly SqlResultRow[]> {
    const client = this.#client
    if (client === null) throw new Error('ClickHouse log analytics is not started')
    if (!this.#prepared) await this.#prepare(client)
    try {
      const result = await client.query({ query: sql, format: 'JSONEachRow' })
      return await result.json<SqlResultRow>()
    } catch (error) {
      throw new LogStoreUnavailableError('clickhouse', error)
    }
  }
}
