/**
 * `LogSink` on ClickHouse (tables of clickhouse-schema.ts; ClickHouse 18.16 and later). Queueing,
 * batching, the journal and exactly-once replays are the shared `BatchingLogSink`
 * (adapters/log-sink/batching-log-sink.ts); this file is the ClickHouse writer it is given.
 *
 * - Batches are inserted as JSONEachRow, one HTTP request each, the body streamed from the buffers
 *   the sink serialised a slice at a time. `created_at` goes as unix seconds (18.16 parses no ISO
 *   8601 without `best_effort`), `created_at_ms` as the exact epoch ms, and a missing organisation
 *   or workspace as `''` (key columns cannot be Nullable).
 * - A write can fail after ClickHouse committed it (the answer is lost, or the request timed out
 *   while the server kept going), and its batch is then journaled and replayed. Each record must
 *   still be stored once:
 *   - Every insert carries a `query_id` naming its batch (`gw-log-<batch key>-<random>`; the key is
 *     a hash of the batch's size and first and last ids, which are UUIDs the gateway made). Before
 *     a replay the writer asks `system.processes` whether an insert of that batch is still running
 *     and, if so, waits for the next retry: otherwise the replay could look for the rows before the
 *     earlier insert commits them. This sees the server it asks, and only inserts that are
 *     executing: 18.16 lists an HTTP insert once it has read its whole body, so one whose data
 *     was still on its way is not seen. A server that refuses to answer leaves the id check alone
 *     in charge.
 *   - Then the shared sink asks which of the batch's ids are stored, bounded by the batch's
 *     tenants and time range (the table's sort key, so the lookup reads only their granules), and
 *     inserts the rest. Literals are inlined through the shared quoting helper (18.16 has no
 *     query parameters).
 *   - Where the server can (detected by `prepare`; not 18.16), `request_logs` keeps a
 *     deduplication window, so the server itself drops a repeated insert of the same rows, across
 *     replicas too; from 22.x inserts also carry `insert_deduplication_token`: the batch key when
 *     the whole batch is sent, a key of the subset otherwise. On 18.16 the two checks above are
 *     what holds.
 * - `start()` creates the database and both tables; when ClickHouse is unreachable it logs, still
 *   starts (records go to the journal) and creates them on the first write that gets through.
 * - The journal lives under the data directory (`<dataDir>/log-journal/clickhouse/`), so one data
 *   directory serves one gateway process.
 */
import { createHash, randomUUID } from 'node:crypto'
import { Readable } from 'node:stream'
import { ClickHouseError, type ClickHouseClient } from '@clickhouse/client'
import type { FeedbackRecord, LogRecord } from '../../core/logs.js'
import type { Logger } from '../../core/service.js'
import { BatchingLogSink, type LogBatchingOptions, type LogStoreWriter } from '../log-sink/batching-log-sink.js'
import { FileJournal } from '../log-sink/file-journal.js'
import { attemptsJson, feedbackVersionKey, metadataLists } from '../log-sink/log-records.js'
import type { EncodedLines } from '../log-sink/slices.js'
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
    config_version: record.configVersion,
    attempts: attemptsJson(record.attempts),
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

/**
 * Names a batch in every attempt to store it: its size and its first and last ids (UUIDs the
 * gateway made, each in exactly one batch), hashed. Computed without touching the other records.
 */
export function batchKey(batch: readonly LogRecord[]): string {
  return createHash('sha256')
    .update(`${batch.length}\n${batch[0]?.id ?? ''}\n${batch.at(-1)?.id ?? ''}`)
    .digest('hex')
    .slice(0, 32)
}

/** The `query_id` prefix of every insert of the batch with this key. */
export const insertQueryIdPrefix = (key: string): string => `gw-log-${key}-`

/** The ClickHouse writer of the shared sink. Exported for tests; use `ClickHouseLogSink`. */
export class ClickHouseLogWriter implements LogStoreWriter {
  readonly name = 'clickhouse'
  readonly label = 'ClickHouse'
  readonly #url: string
  readonly #timeoutMs: number
  readonly #database: string
  readonly #logger: Logger | null
  #client: ClickHouseClient | null = null
  /** Inserts carry `insert_deduplication_token` (the server and the table honour it); set by `prepare`. */
  #insertTokens = false

  constructor(url: string, database: string, timeoutMs: number, logger: Logger | null) {
    this.#url = url
    this.#database = database
    this.#timeoutMs = timeoutMs
    this.#logger = logger
  }

  get opened(): boolean {
    return this.#client !== null
  }

  async open(): Promise<boolean> {
    this.#client = clickHouseLogClient(this.#url, this.#timeoutMs)
    try {
      await this.prepare()
      return true
    } catch (error) {
      this.#logger?.warn(
        { error: error instanceof Error ? error.message : String(error) },
        'ClickHouse is unreachable at start: request logs are journaled until it answers',
      )
      return false
    }
  }

  async close(): Promise<void> {
    const client = this.#client
    this.#client = null
    await client?.close()
  }

  async prepare(): Promise<void> {
    const features = await prepareClickHouseLogTables(this.#open(), this.#database)
    this.#insertTokens = features.insertTokens
  }

  logLine(record: LogRecord): string {
    return JSON.stringify(toRow(record))
  }

  async insertLogs(records: readonly LogRecord[], body: EncodedLines, batch: readonly LogRecord[]): Promise<void> {
    const key = batchKey(batch)
    const result = await this.#open().exec({
      query: `INSERT INTO ${this.#database}.${CLICKHOUSE_REQUEST_LOG_TABLE} FORMAT JSONEachRow`,
      // Streamed as serialised: joining the slices would copy the whole batch in one turn.
      values: Readable.from(body.chunks, { objectMode: false }),
      query_id: `${insertQueryIdPrefix(key)}${randomUUID()}`,
      // The whole batch repeats its first attempt's token; a subset has its own (the same token on
      // other rows would make the server drop them as a repeat).
      ...(this.#insertTokens ? { clickhouse_settings: { insert_deduplication_token: records === batch ? key : `${key}-${batchKey(records)}` } } : {}),
    })
    // Read the (empty) answer to the end so the connection goes back to the pool.
    for await (const _chunk of result.stream) void _chunk
  }

  async settleEarlierAttempts(batch: readonly LogRecord[]): Promise<void> {
    const prefix = insertQueryIdPrefix(batchKey(batch))
    let running: number
    try {
      const result = await this.#open().query({
        query: `SELECT count() AS n FROM system.processes WHERE startsWith(query_id, ${quote(prefix)})`,
        format: 'JSONEachRow',
      })
      running = Number((await result.json<{ n: string | number }>())[0]?.n ?? 0)
    } catch (error) {
      // The server answered but will not say (no access to system.processes): the id check alone decides.
      if (error instanceof ClickHouseError) return
      throw error
    }
    if (running > 0) throw new Error(`an earlier insert of this batch is still running in ClickHouse (query_id ${prefix}…); replayed once it ends`)
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
      const result = await this.#open().query({ query, format: 'JSONEachRow' })
      for (const row of await result.json<{ id: string }>()) found.add(row.id)
    }
    return found
  }

  async insertFeedback(records: readonly FeedbackRecord[]): Promise<void> {
    await this.#open().insert({ table: `${this.#database}.${CLICKHOUSE_FEEDBACK_TABLE}`, values: records.map(feedbackRow), format: 'JSONEachRow' })
  }

  async existingFeedback(records: readonly FeedbackRecord[]): Promise<ReadonlySet<string>> {
    const found = new Set<string>()
    for (const part of chunks(records, IDS_PER_QUERY)) {
      const query = `SELECT id, updated_at_ms FROM ${this.#database}.${CLICKHOUSE_FEEDBACK_TABLE}
WHERE organisation_id IN ${inList(part.map((record) => record.organisationId))}
  AND id IN ${inList(part.map((record) => record.id))}`
      const result = await this.#open().query({ query, format: 'JSONEachRow' })
      for (const row of await result.json<{ id: string; updated_at_ms: string | number }>()) {
        found.add(feedbackVersionKey(row.id, Number(row.updated_at_ms)))
      }
    }
    return found
  }

  #open(): ClickHouseClient {
    if (this.#client === null) throw new Error('ClickHouse log sink is not started')
    return this.#client
  }
}

export class ClickHouseLogSink extends BatchingLogSink {
  constructor(options: ClickHouseLogSinkOptions) {
    const writer = new ClickHouseLogWriter(options.url, logDatabaseOf(options.database), options.requestTimeoutMs ?? 30_000, options.logger ?? null)
    const journal = new FileJournal({ directory: options.journalDirectory, maxBytes: options.journalMaxBytes ?? DEFAULT_JOURNAL_MAX_BYTES })
    super(writer, journal, options)
  }
}
