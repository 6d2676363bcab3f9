/**
 * `LogAnalytics` on the embedded DuckDB file (tables `request_logs` and `feedback`, see
 * duckdb-schema.ts). The queries are the shared ones of adapters/sql/analytics-sql.ts; this class
 * owns one session of the shared database and runs them on it, one at a time (a session is one
 * connection). Literals are inlined through adapters/sql/sql-literals.ts, like the ClickHouse
 * adapter, so both engines run the same query text.
 *
 * `start()` creates (or upgrades) the tables with the sink's migration, whichever of the two starts
 * first, so analytics answer (with nothing) before the first log is written.
 */
import type { FeedbackRecord, GraphName, GraphResult, GroupRequest, GroupResult, CacheSummary, LogAnalytics, LogFilter, LogScope, StoredLog } from '../../core/logs.js'
import type { HealthStatus } from '../../core/ports.js'
import { SqlLogQueries } from '../sql/analytics-sql.js'
import { duckDbDialect } from '../sql/sql-dialect.js'
import type { DuckDbDatabase, DuckDbSession } from './duckdb-database.js'
import { migrateLogTables } from './duckdb-log-migration.js'

export class DuckDbLogAnalytics implements LogAnalytics {
  readonly #database: DuckDbDatabase
  #session: DuckDbSession | null = null
  readonly #queries: SqlLogQueries

  constructor(database: DuckDbDatabase) {
    this.#database = database
    this.#queries = new SqlLogQueries(duckDbDialect(), (sql) => this.#sessionOrThrow().query(sql))
  }

  async start(): Promise<void> {
    if (this.#session !== null && !this.#session.closed) return
    await this.#database.start()
    const session = await this.#database.openSession()
    try {
      await session.transaction((tx) => migrateLogTables(tx))
    } catch (error) {
      await session.close()
      throw error
    }
    this.#session = session
  }

  async close(): Promise<void> {
    const session = this.#session
    this.#session = null
    await session?.close()
  }

  async health(): Promise<HealthStatus> {
    try {
      await this.#sessionOrThrow().query('SELECT 1 AS ok')
      return { ok: true }
    } catch {
      return { ok: false, detail: 'DuckDB log analytics does not answer' }
    }
  }

  graph(name: GraphName, filter: LogFilter): Promise<GraphResult> {
    return this.#queries.graph(name, filter)
  }

  group(request: GroupRequest, filter: LogFilter): Promise<GroupResult> {
    return this.#queries.group(request, filter)
  }

  cacheSummary(filter: LogFilter): Promise<CacheSummary> {
    return this.#queries.cacheSummary(filter)
  }

  findLog(scope: LogScope, id: string): Promise<StoredLog | null> {
    return this.#queries.findLog(scope, id)
  }

  hasTrace(scope: LogScope, traceId: string): Promise<boolean> {
    return this.#queries.hasTrace(scope, traceId)
  }

  findFeedback(scope: LogScope, id: string): Promise<FeedbackRecord | null> {
    return this.#queries.findFeedback(scope, id)
  }

  scanLogs(
    filter: LogFilter,
    options: { readonly batchSize: number; readonly limit: number },
    onBatch: (rows: readonly StoredLog[]) => Promise<boolean>,
  ): Promise<void> {
    return this.#queries.scanLogs(filter, options, onBatch)
  }

  #sessionOrThrow(): DuckDbSession {
    const session = this.#session
    if (session === null || session.closed) throw new Error('DuckDB log analytics is not started')
    return session
  }
}
