/**
 * The part of `LogAnalytics` both SQL engines share: every query method hands over to
 * `SqlLogQueries`. An adapter extends this with its connection's lifecycle (`start`, `close`,
 * `health`) and the function that runs one query.
 */
import type {
  CacheSummary,
  FeedbackRecord,
  GraphName,
  GraphResult,
  GroupRequest,
  GroupResult,
  LogAnalytics,
  LogFilter,
  LogScope,
  StoredLog,
} from '../../core/logs.js'
import type { HealthStatus } from '../../core/service.js'
import { SqlLogQueries, type QueryRunner } from './analytics-sql.js'
import type { SqlDialect } from './sql-dialect.js'

export abstract class SqlLogAnalytics implements LogAnalytics {
  readonly #queries: SqlLogQueries

  protected constructor(dialect: SqlDialect, run: QueryRunner) {
    this.#queries = new SqlLogQueries(dialect, run)
  }

  abstract start(): Promise<void>
  abstract close(): Promise<void>
  abstract health(): Promise<HealthStatus>

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
}
