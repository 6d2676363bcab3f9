/**
 * `LogSink` on the embedded DuckDB file (tables `request_logs` and `feedback`, see
 * duckdb-schema.ts). Queueing, batching, the journal and exactly-once replays are the shared
 * `BatchingLogSink` (adapters/log-sink/batching-log-sink.ts); this file is the DuckDB writer it is
 * given.
 *
 * - Each batch is one statement: the lines the sink serialised (a slice at a time) are written to
 *   a newline-delimited JSON file and loaded by DuckDB with `read_json`, vectorised and off the
 *   event loop (about 5 µs of CPU per row, measured). Appending value by value (about 20 native
 *   calls per row) stalled the event loop for milliseconds per batch, and one big JSON parameter
 *   unpacked with `from_json` cost about 19 µs per row. A statement is all or nothing, so a failed
 *   batch left nothing behind; replays still check which ids are stored, as the ClickHouse sink must.
 * - The journal lives beside the database file (`<dir>/log-journal/duckdb/`) unless configured.
 * - `start()` creates the tables and upgrades a table written by an older version
 *   (duckdb-log-migration.ts); it fails when that fails (a local file has no reason to be away).
 */
import { randomUUID } from 'node:crypto'
import { rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import type { FeedbackRecord, LogRecord } from '../../core/logs.js'
import { BatchingLogSink, type LogBatchingOptions, type LogStoreWriter } from '../log-sink/batching-log-sink.js'
import { FileJournal } from '../log-sink/file-journal.js'
import { attemptsJson, feedbackVersionKey, metadataFromLists, metadataLists } from '../log-sink/log-records.js'
import { parseAttempts } from '../sql/analytics-sql.js'
import type { EncodedLines } from '../log-sink/slices.js'
import type { DuckDbDatabase, DuckDbSession, SqlParam, SqlRow } from './duckdb-database.js'
import { migrateLogTables } from './duckdb-log-migration.js'
import { FEEDBACK_COLUMNS, FEEDBACK_TABLE, REQUEST_LOG_COLUMNS, REQUEST_LOG_TABLE } from './duckdb-schema.js'

export interface DuckDbLogSinkOptions extends LogBatchingOptions {
  /**
   * Where batch files are staged on their way into DuckDB (deleted after each insert). Defaults to
   * the database file's directory, or the system temp directory for `:memory:`.
   */
  readonly stagingDirectory?: string
  /** The journal's directory (default `<database dir>/log-journal/duckdb`). */
  readonly journalDirectory?: string
  /** Bytes the journal may hold (default 1 GiB); batches beyond are dropped and counted. */
  readonly journalMaxBytes?: number
}

/** Default bound of a journal. */
export const DEFAULT_JOURNAL_MAX_BYTES = 1_073_741_824

const SELECT_COLUMNS = REQUEST_LOG_COLUMNS.map(([name]): string => name)
  .filter((name) => name !== 'created_at')
  .concat('epoch_ms(created_at) AS created_at_ms')
  .join(', ')

/** `read_json` column types: as in the table, without constraints; `created_at` arrives as epoch µs. */
const READ_JSON_COLUMNS = `{${REQUEST_LOG_COLUMNS.map(
  ([name, type]) => `'${name}': '${name === 'created_at' ? 'BIGINT' : type.replace(' NOT NULL', '')}'`,
).join(', ')}}`

function insertBatchSql(file: string): string {
  return `INSERT INTO ${REQUEST_LOG_TABLE} (${REQUEST_LOG_COLUMNS.map(([name]) => name).join(', ')})
SELECT ${REQUEST_LOG_COLUMNS.map(([name]) => (name === 'created_at' ? 'make_timestamp(created_at)' : name)).join(', ')}
FROM read_json('${file.replaceAll("'", "''")}', format = 'newline_delimited', columns = ${READ_JSON_COLUMNS})`
}

/** One JSON line of a batch file: keys are the column names. */
function toJsonLine(record: LogRecord): string {
  const metadata = metadataLists(record.metadata)
  return JSON.stringify({
    id: record.id,
    trace_id: record.traceId,
    source: record.source,
    created_at: record.createdAt * 1000,
    organisation_id: record.organisationId,
    workspace_id: record.workspaceId,
    api_key_id: record.apiKeyId,
    end_user: record.user,
    virtual_key: record.virtualKey,
    config: record.config,
    prompt_slug: record.promptSlug,
    prompt_version: record.promptVersion,
    method: record.method,
    route: record.route,
    path: record.path,
    provider: record.provider,
    model: record.model,
    status: record.status,
    outcome: record.outcome,
    streaming: record.streaming,
    latency_ms: record.latencyMs,
    ttft_ms: record.ttftMs,
    prompt_tokens: record.promptTokens,
    completion_tokens: record.completionTokens,
    total_tokens: record.totalTokens,
    cached_tokens: record.cachedTokens,
    cost_nano_usd: record.costNanoUsd,
    cache_status: record.cacheStatus,
    retry_count: record.retryCount,
    fallback_index: record.fallbackIndex,
    error_code: record.errorCode,
    error_type: record.errorType,
    metadata_keys: metadata.keys,
    metadata_values: metadata.values,
    request_body: record.requestBody,
    response_body: record.responseBody,
    config_version: record.configVersion,
    attempts: attemptsJson(record.attempts),
  })
}

function optionalNumber(row: SqlRow, column: string): number | null {
  const value = row[column]
  return value === null || value === undefined ? null : Number(value)
}

function optionalString(row: SqlRow, column: string): string | null {
  const value = row[column]
  return value === null || value === undefined ? null : String(value)
}

function list(row: SqlRow, column: string): unknown[] {
  const value = row[column]
  return Array.isArray(value) ? value : []
}

function fromRow(row: SqlRow): LogRecord {
  return {
    id: String(row.id),
    traceId: String(row.trace_id),
    source: String(row.source) as LogRecord['source'],
    createdAt: Number(row.created_at_ms),
    organisationId: optionalString(row, 'organisation_id'),
    workspaceId: optionalString(row, 'workspace_id'),
    apiKeyId: optionalString(row, 'api_key_id'),
    user: optionalString(row, 'end_user'),
    virtualKey: optionalString(row, 'virtual_key'),
    config: optionalString(row, 'config'),
    configVersion: optionalNumber(row, 'config_version'),
    promptSlug: optionalString(row, 'prompt_slug'),
    promptVersion: optionalNumber(row, 'prompt_version'),
    method: String(row.method),
    route: String(row.route),
    path: String(row.path),
    provider: optionalString(row, 'provider'),
    model: optionalString(row, 'model'),
    status: Number(row.status),
    outcome: String(row.outcome) as LogRecord['outcome'],
    streaming: row.streaming === true,
    latencyMs: Number(row.latency_ms),
    ttftMs: optionalNumber(row, 'ttft_ms'),
    promptTokens: optionalNumber(row, 'prompt_tokens'),
    completionTokens: optionalNumber(row, 'completion_tokens'),
    totalTokens: optionalNumber(row, 'total_tokens'),
    cachedTokens: optionalNumber(row, 'cached_tokens'),
    costNanoUsd: optionalNumber(row, 'cost_nano_usd'),
    cacheStatus: String(row.cache_status) as LogRecord['cacheStatus'],
    retryCount: Number(row.retry_count),
    fallbackIndex: optionalNumber(row, 'fallback_index'),
    errorCode: optionalString(row, 'error_code'),
    errorType: optionalString(row, 'error_type'),
    metadata: metadataFromLists(list(row, 'metadata_keys'), list(row, 'metadata_values')),
    requestBody: optionalString(row, 'request_body'),
    responseBody: optionalString(row, 'response_body'),
    attempts: parseAttempts(row.attempts),
  }
}

const FEEDBACK_COLUMN_NAMES = FEEDBACK_COLUMNS.map(([name]) => name)

function feedbackParams(record: FeedbackRecord): SqlParam[] {
  const metadata = metadataLists(record.metadata)
  return [
    record.id,
    record.traceId,
    record.organisationId,
    record.workspaceId,
    record.value,
    record.weight,
    metadata.keys,
    metadata.values,
    new Date(record.createdAt),
    new Date(record.updatedAt),
  ]
}

/** The DuckDB writer of the shared sink, over the sink's own session. Exported for tests; use `DuckDbLogSink`. */
export class DuckDbLogWriter implements LogStoreWriter {
  readonly name = 'duckdb'
  readonly label = 'DuckDB'
  readonly #database: DuckDbDatabase
  readonly #stagingDirectory: string
  #session: DuckDbSession | null = null
  #batchNumber = 0

  constructor(database: DuckDbDatabase, stagingDirectory: string) {
    this.#database = database
    this.#stagingDirectory = stagingDirectory
  }

  get opened(): boolean {
    return this.#session !== null && !this.#session.closed
  }

  async open(): Promise<boolean> {
    this.#session = await this.#database.openPreparedSession((session) => session.transaction((tx) => migrateLogTables(tx)))
    return true
  }

  async close(): Promise<void> {
    const session = this.#session
    this.#session = null
    await session?.close()
  }

  async prepare(): Promise<void> {
    await this.session().transaction((tx) => migrateLogTables(tx))
  }

  logLine(record: LogRecord): string {
    return toJsonLine(record)
  }

  async insertLogs(_records: readonly LogRecord[], body: EncodedLines): Promise<void> {
    const session = this.session()
    const file = join(this.#stagingDirectory, `.request-logs-${process.pid}-${++this.#batchNumber}.jsonl`)
    try {
      // The batch holds request bodies: private to the owner, also when it stages in tmpdir().
      await writeFile(file, body.chunks, { mode: 0o600 })
      await session.run(insertBatchSql(file))
    } finally {
      await rm(file, { force: true })
    }
  }

  async existingLogIds(records: readonly LogRecord[]): Promise<ReadonlySet<string>> {
    if (records.length === 0) return new Set()
    let from = Number.POSITIVE_INFINITY
    let to = Number.NEGATIVE_INFINITY
    for (const record of records) {
      if (record.createdAt < from) from = record.createdAt
      if (record.createdAt > to) to = record.createdAt
    }
    const rows = await this.session().query(
      `SELECT id FROM ${REQUEST_LOG_TABLE}
       WHERE created_at BETWEEN make_timestamp($1::BIGINT) AND make_timestamp($2::BIGINT) AND id IN (SELECT unnest($3::VARCHAR[]))`,
      [from * 1000, to * 1000, records.map((record) => record.id)],
    )
    return new Set(rows.map((row) => String(row.id)))
  }

  async insertFeedback(records: readonly FeedbackRecord[]): Promise<void> {
    if (records.length === 0) return
    const width = FEEDBACK_COLUMN_NAMES.length
    const tuples = records.map(
      (_, row) => `(${FEEDBACK_COLUMN_NAMES.map((__, column) => `$${row * width + column + 1}`).join(', ')})`,
    )
    await this.session().run(
      `INSERT INTO ${FEEDBACK_TABLE} (${FEEDBACK_COLUMN_NAMES.join(', ')}) VALUES ${tuples.join(', ')}`,
      records.flatMap(feedbackParams),
    )
  }

  async existingFeedback(records: readonly FeedbackRecord[]): Promise<ReadonlySet<string>> {
    if (records.length === 0) return new Set()
    const rows = await this.session().query(
      `SELECT id, epoch_ms(updated_at) AS updated_at_ms FROM ${FEEDBACK_TABLE} WHERE id IN (SELECT unnest($1::VARCHAR[]))`,
      [records.map((record) => record.id)],
    )
    return new Set(rows.map((row) => feedbackVersionKey(String(row.id), Number(row.updated_at_ms))))
  }

  /** The open session; throws before `open()` and after `close()`. */
  session(): DuckDbSession {
    if (this.#session === null) throw new Error('DuckDB log sink is not started')
    return this.#session
  }
}

export class DuckDbLogSink extends BatchingLogSink {
  readonly #writer: DuckDbLogWriter
  /** A journal directory made up for an in-memory database: nothing can replay it later, so `close()` removes it. */
  readonly #throwawayJournal: string | null

  constructor(database: DuckDbDatabase, options: DuckDbLogSinkOptions = {}) {
    const inMemory = database.path === ':memory:'
    const stagingDirectory = options.stagingDirectory ?? (inMemory ? tmpdir() : dirname(database.path))
    const throwawayJournal = options.journalDirectory === undefined && inMemory ? join(tmpdir(), `gw-log-journal-${process.pid}-${randomUUID()}`) : null
    const journalDirectory = options.journalDirectory ?? throwawayJournal ?? join(dirname(database.path), 'log-journal', 'duckdb')
    const journal = new FileJournal({ directory: journalDirectory, maxBytes: options.journalMaxBytes ?? DEFAULT_JOURNAL_MAX_BYTES })
    const writer = new DuckDbLogWriter(database, stagingDirectory)
    super(writer, journal, options)
    this.#writer = writer
    this.#throwawayJournal = throwawayJournal
  }

  /** Flushes (what cannot be written stays journaled for the next start) and releases the session. */
  override async close(): Promise<void> {
    try {
      await super.close()
    } finally {
      if (this.#throwawayJournal !== null) await rm(this.#throwawayJournal, { recursive: true, force: true })
    }
  }

  /** Rows in `request_logs` (written records only). For tests, not part of the port. */
  async count(): Promise<number> {
    const rows = await this.#writer.session().query(`SELECT count(*) AS n FROM ${REQUEST_LOG_TABLE}`)
    return Number(rows[0]?.n ?? 0)
  }

  /** One written record by request id, or `null`. For tests, not part of the port. */
  async findById(id: string): Promise<LogRecord | null> {
    const rows = await this.#writer.session().query(`SELECT ${SELECT_COLUMNS} FROM ${REQUEST_LOG_TABLE} WHERE id = $1 LIMIT 1`, [id])
    return rows[0] === undefined ? null : fromRow(rows[0])
  }
}
