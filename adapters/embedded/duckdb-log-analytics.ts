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
import { LogStoreUnavailableError } from '../../core/ports.js'
import type { HealthStatus } from '../../core/service.js'
import { SqlLogAnalytics } from '../sql/sql-log-analytics.js'
import { duckDbDialect } from '../sql/sql-dialect.js'
import type { DuckDbDatabase, DuckDbSession } from './duckdb-database.js'
import { migrateLogTables } from './duckdb-log-migration.js'

export class DuckDbLogAnalytics extends SqlLogAnalytics {
  readonly #database: DuckDbDatabase
  #session: DuckDbSession | null = null

  constructor(database: DuckDbDatabase) {
    super(duckDbDialect(), (sql) =>
      this.#sessionOrThrow()
        .query(sql)
        .catch((error: unknown) => {
          throw new LogStoreUnavailableError('duckdb', error)
        }),
    )
    this.#database = database
  }

  async start(): Promise<void> {
    if (this.#session !== null && !this.#session.closed) return
    this.#session = await this.#database.openPreparedSession((session) => session.transaction((tx) => migrateLogTables(tx)))
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


  #sessionOrThrow(): DuckDbSession {
    const session = this.#session
    if (session === null || session.closed) throw new Error('DuckDB log analytics is not started')
    return session
  }
}
