/**
 * `LogSink` on ClickHouse (tables of clickhouse-schema.ts; ClickHouse 18.16 and later). Queueing,
 * batching, the journal and exactly-once replays are the shared `LogBatcher`
 * (adapters/log-sink/log-batcher.ts); this file is the ClickHouse side of it.
 *
 * - Batches are inserted as JSONEachRow, one HTTP request each. `created_at` goes as unix seconds
 *   (18.16 parses no ISO 8601 without `best_effort`), `created_at_ms` as the exact epoch ms, and a
 *   missing organisation or workspace as `''` (key columns cannot be Nullable).
 * - Plain MergeTree on 18.16 has no insert deduplication, and an insert that times out may still
 *   have been written. So before a journaled batch is replayed, the sink asks which of its ids are
 *   stored, bounded by the batch's tenants and time range (the table's sort key, so the lookup
 *   reads only their granules), and inserts the rest. Literals are inlined through the shared
 *   quoting helper (18.16 has no query parameters).
 * - `start()` creates the database and both tables; when ClickHouse is unreachable it logs, still
 *   starts (records go to the journal) and creates them on the first write that gets through.
 * - The journal lives under the data directory (`<dataDir>/log-journal/clickhouse/`), so one data
 *   directory serves one gateway process.
 */
import { Readable } from 'node:stream'
import type { ClickHouseClient } from '@clickhouse/client'
import type { FeedbackRecord, HealthStatus, LogRecord, LogSink, LogSinkStats, Logger } from '../../core/ports.js'
import { FileJournal } from '../log-sink/file-journal.js'
import { LogBatcher, type LogBatchingOptions, type LogStoreWriter } from '../log-sink/log-batcher.js'
import { feedbackVersionKey, metadataLists, serialiseInSlices } from '../log-sink/log-records.js'
import { quoteInteger, quoteString } from '../sql/sql-literals.js'
import { clickHouseLogClient, logDatabaseOf, prepareClickHouseLogTables } from './clickhouse-connection.js'
import { CLICKHOUSE_FEEDBACK_TABLE, CLICKHOUSE_REQUEST_LOG_TABLE } from './clickhouse-schema.js'

export interface ClickHouseLogSinkOptions extends LogBatchingOptions {
  /** HTTP interface URL, e.g. `http://user:password@host:8123` (a path is ignored: see `database`). */
  readonly url: string
  /** Database of `request_logs` and `feedback`, created when missing (default `gateway`); `[A-Za-z_][A-Za-z0-9_]*`. */
  readonly database?: string
  /** The journal's directory, e.g. `<dataDir>/log-journal/clickhouse`. */
  readonly journalDirectory: string
  /** Bytes the journal may hold (default 1 GiB); batches beyond are dropped and counted. */
  readonly journalMaxBytes?: number
  /** Per-request timeout (default 30 s). */
  readonly requestTimeoutMs?: number
}

const DEFAULT_JOURNAL_MAX_BYTES = 1_073_741_824
/** Ids per existence query: keeps each query far below ClickHouse's 256 KiB `max_query_size`. */
const IDS_PER_QUERY = 500

const quote = (value: string): string => quoteString('clickhouse', value)

function toRow(record: LogRecord): Record<string, unknown> {
  const metadata = metadataLists(record.metadata)
  return {
    organisation_id: record.organisationId ?? '',
    workspace_id: record.workspaceId ?? '',
    created_at: Math.floor(record.createdAt / 1000),
    created_at_ms: record.createdAt,
    id: record.id,
    trace_id: record.traceId,
    source: record.source,
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
    streaming: record.streaming ? 1 : 0,
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
  }
}

function feedbackRow(record: FeedbackRecord): Record<string, unknown> {
  const metadata = metadataLists(record.metadata)
  return {
    organisation_id: record.organisationId,
    workspace_id: record.workspaceId ?? '',
    id: record.id,
    trace_id: record.traceId,
    value: record.value,
    weight: record.weight,
    metadata_keys: metadata.keys,
    metadata_values: metadata.values,
    created_at: Math.floor(record.createdAt / 1000),
    created_at_ms: record.createdAt,
    updated_at_ms: record.updatedAt,
  }
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const result: T[][] = []
  for (let start = 0; start < items.length; start += size) result.push(items.slice(start, start + size))
  return result
}

const inList = (values: Iterable<string>): string => `(${[...new Set(values)].map(quote).join(', ')})`

/** The ClickHouse side of the batcher. */
class ClickHouseLogStore implements LogStoreWriter {
  readonly #client: () => ClickHouseClient
  readonly #database: string

  constructor(client: () => ClickHouseClient, database: string) {
    this.#client = client
    this.#database = database
  }

  prepare(): Promise<void> {
    return prepareClickHouseLogTables(this.#client(), this.#database)
  }

  async insertLogs(records: readonly LogRecord[]): Promise<void> {
    // Encoded a slice at a time between event-loop turns (the client's own encoder does a whole
    // batch in one go, stalling requests for tens of milliseconds), then sent as the request body.
    const body = await serialiseInSlices(records, (record) => JSON.stringify(toRow(record)))
    const result = await this.#client().exec({
      query: `INSERT INTO ${this.#database}.${CLICKHOUSE_REQUEST_LOG_TABLE} FORMAT JSONEachRow`,
      values: Readable.from([Buffer.from(body)], { objectMode: false }),
    })
    // Read the (empty) answer to the end so the connection goes back to the pool.
    for await (const _chunk of result.stream) void _chunk
  }

  async existingLogIds(records: readonly LogRecord[]): Promise<ReadonlySet<string>> {
    const found = new Set<string>()
    for (const part of chunks(records, IDS_PER_QUERY)) {
      let from = Number.POSITIVE_INFINITY
      let to = Number.NEGATIVE_INFINITY
      for (const record of part) {
        from = Math.min(from, record.createdAt)
        to = Math.max(to, record.createdAt)
      }
      const query = `SELECT id FROM ${this.#database}.${CLICKHOUSE_REQUEST_LOG_TABLE}
WHERE organisation_id IN ${inList(part.map((record) => record.organisationId ?? ''))}
  AND workspace_id IN ${inList(part.map((record) => record.workspaceId ?? ''))}
  AND created_at >= toDateTime(${quoteInteger(Math.floor(from / 1000))})
  AND created_at <= toDateTime(${quoteInteger(Math.floor(to / 1000))})
  AND id IN ${inList(part.map((record) => record.id))}`
      const result = await this.#client().query({ query, format: 'JSONEachRow' })
      for (const row of await result.json<{ id: string }>()) found.add(row.id)
    }
    return found
  }

  async insertFeedback(records: readonly FeedbackRecord[]): Promise<void> {
    await this.#client().insert({ table: `${this.#database}.${CLICKHOUSE_FEEDBACK_TABLE}`, values: records.map(feedbackRow), format: 'JSONEachRow' })
  }

  async existingFeedback(records: readonly FeedbackRecord[]): Promise<ReadonlySet<string>> {
    const found = new Set<string>()
    for (const part of chunks(records, IDS_PER_QUERY)) {
      const query = `SELECT id, updated_at_ms FROM ${this.#database}.${CLICKHOUSE_FEEDBACK_TABLE}
WHERE organisation_id IN ${inList(part.map((record) => record.organisationId))}
  AND id IN ${inList(part.map((record) => record.id))}`
      const result = await this.#client().query({ query, format: 'JSONEachRow' })
      for (const row of await result.json<{ id: string; updated_at_ms: string | number }>()) {
        found.add(feedbackVersionKey(row.id, Number(row.updated_at_ms)))
      }
    }
    return found
  }
}

export class ClickHouseLogSink implements LogSink {
  readonly #url: string
  readonly #timeoutMs: number
  readonly #logger: Logger | null
  readonly #store: ClickHouseLogStore
  readonly #batcher: LogBatcher
  #client: ClickHouseClient | null = null

  constructor(options: ClickHouseLogSinkOptions) {
    const database = logDatabaseOf(options.database)
    this.#url = options.url
    this.#timeoutMs = options.requestTimeoutMs ?? 30_000
    this.#logger = options.logger ?? null
    const journal = new FileJournal({ directory: options.journalDirectory, maxBytes: options.journalMaxBytes ?? DEFAULT_JOURNAL_MAX_BYTES })
    this.#store = new ClickHouseLogStore(() => this.#open(), database)
    this.#batcher = new LogBatcher('clickhouse', this.#store, journal, options)
  }

  async start(): Promise<void> {
    if (this.#client !== null) return
    this.#client = clickHouseLogClient(this.#url, this.#timeoutMs)
    let prepared = true
    try {
      await this.#store.prepare()
    } catch (error) {
      prepared = false
      this.#logger?.warn(
        { error: error instanceof Error ? error.message : String(error) },
        'ClickHouse is unreachable at start: request logs are journaled until it answers',
      )
    }
    await this.#batcher.start(prepared)
  }

  enqueue(record: LogRecord): void {
    this.#batcher.enqueue(record)
  }

  recordFeedback(records: readonly FeedbackRecord[]): Promise<void> {
    return this.#batcher.recordFeedback(records)
  }

  flush(): Promise<void> {
    return this.#batcher.flush()
  }

  stats(): LogSinkStats {
    return this.#batcher.stats()
  }

  async health(): Promise<HealthStatus> {
    if (this.#client === null) return { ok: false, detail: 'request log sink is not started' }
    return this.#batcher.health('ClickHouse')
  }

  /** Flushes (what ClickHouse does not take stays journaled for the next start) and closes the client. */
  async close(): Promise<void> {
    try {
      await this.#batcher.close()
    } finally {
      const client = this.#client
      this.#client = null
      await client?.close()
    }
  }

  #open(): ClickHouseClient {
    if (this.#client === null) throw new Error('ClickHouse log sink is not started')
    return this.#client
  }
}
