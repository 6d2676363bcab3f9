/**
 * The `LogSink` both request-log stores share (ClickHouse and the embedded DuckDB file): a bounded
 * in-memory queue, batched writes, a durable journal while the store is unreachable, and replays
 * without duplicates. A store only supplies a `LogStoreWriter`: its connection, one record as a
 * line of its bulk format, and the inserts and lookups.
 *
 * - `enqueue` is O(1) and never throws: records go to a ring. When it holds `maxQueue` records its
 *   oldest batch moves to the journal (so a store that hangs, rather than refuses, cannot make the
 *   queue drop records while a write waits for its timeout); only a record the journal cannot take
 *   is dropped and counted. One writer at a time takes up to `batchSize` records from the head; it
 *   starts every `flushIntervalMs` (unref'd timer) and as soon as a batch fills.
 * - Per-record work on a batch (checks, serialising for the store or the journal, parsing a
 *   journaled batch) runs a slice at a time between event-loop turns (slices.ts): a 10 000-record
 *   batch never stalls requests for more than one slice. `enqueue` itself only moves references.
 * - A failed write appends its batch to the journal (fsync'd) and marks the store down. While it
 *   is down, full batches go straight to the journal without contacting the store, and the store
 *   is retried once per tick (and by `flush()`), so a dead store costs one attempt per interval,
 *   memory stays bounded, and nothing waits in memory longer than one interval.
 * - When the store answers again, the journal is replayed oldest first, then the queue is written.
 *   A journaled batch may already be stored (a write can fail after the store committed it, e.g.
 *   a timeout), so a replay first lets the writer make sure no earlier attempt at the batch is
 *   still running, then asks which of the batch's ids the store holds and sends only the others:
 *   each record is stored once. The journal survives a restart and is replayed at the next start.
 * - Losses are counted in `stats().dropped` and warned about at most once per interval: queue
 *   overflow, records that cannot be represented, batches the journal cannot take (full or
 *   failing disk), unreadable journal files, records enqueued after `close()`.
 * - `close()` stops the timer and flushes; what the store does not take then stays journaled.
 */
import type { FeedbackRecord, LogRecord } from '../../core/logs.js'
import { LogStoreUnavailableError, type LogSink, type LogSinkStats } from '../../core/ports.js'
import type { HealthStatus, Logger } from '../../core/service.js'
import type { FileJournal, JournalEntry } from './file-journal.js'
import { checkFeedbackRecord, checkLogRecord, feedbackVersionKey } from './log-records.js'
import { RingQueue } from './ring-queue.js'
import { encodeLines, mapInSlices, nextTurn, type EncodedLines } from './slices.js'

/** What a store gives the sink. Every method that talks to the store rejects when it is unreachable. */
export interface LogStoreWriter {
  /** The store in error messages and logs, e.g. `clickhouse`. */
  readonly name: string
  /** The store in health details, e.g. `ClickHouse`. */
  readonly label: string
  /** Whether the connection is open (between `open()` and `close()`). */
  readonly opened: boolean
  /**
   * Opens the connection and prepares the store. Resolves whether it is prepared: `false` when the
   * store is unreachable and the sink should start anyway (journaling until it answers); rejects
   * when the sink cannot start at all.
   */
  open(): Promise<boolean>
  /** Closes the connection, after the sink's last flush. */
  close(): Promise<void>
  /** Creates what writes need (database, tables, migrations); idempotent. Run again after a failed write. */
  prepare(): Promise<void>
  /** One checked record as one line (no `\n`) of the store's bulk insert format. Must not throw. */
  logLine(record: LogRecord): string
  /**
   * Stores checked records, all or nothing where the store allows it. `body` is their lines
   * (`logLine`). `batch` is the batch they belong to: the same array on a first attempt; on a
   * replay the whole journaled batch, of which `records` are the ones the store lacks.
   */
  insertLogs(records: readonly LogRecord[], body: EncodedLines, batch: readonly LogRecord[]): Promise<void>
  /**
   * Before a replay of `batch`: rejects while an earlier attempt at it may still be writing (its
   * rows could then land after the replay looked for them). Optional: a store whose writes cannot
   * outlive their caller has nothing to wait for.
   */
  settleEarlierAttempts?(batch: readonly LogRecord[]): Promise<void>
  /** Which of these records' ids are already stored (the query is bounded by their tenants and time range). */
  existingLogIds(records: readonly LogRecord[]): Promise<ReadonlySet<string>>
  insertFeedback(records: readonly FeedbackRecord[]): Promise<void>
  /** `feedbackVersionKey(id, updatedAt)` of the given versions already stored. */
  existingFeedback(records: readonly FeedbackRecord[]): Promise<ReadonlySet<string>>
}

export interface LogBatchingOptions {
  /** Records per write (default 10 000: ClickHouse spends ~35 ms of CPU per insert whatever its size, so fewer, larger inserts cost it a quarter as much per row as 1000-row ones). */
  readonly batchSize?: number
  /** Flush timer period, and the retry period while the store is down (default 1000 ms). */
  readonly flushIntervalMs?: number
  /** Records held in memory before the oldest batch moves to the journal (default 100 000). */
  readonly maxQueue?: number
  /** Receives loss, journal and write-failure warnings (at most one of each per interval). */
  readonly logger?: Logger
}

function positiveInteger(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`log sink: ${name} must be a positive integer`)
  return value
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}

export class BatchingLogSink implements LogSink {
  readonly #store: LogStoreWriter
  readonly #journal: FileJournal
  readonly #batchSize: number
  readonly #flushIntervalMs: number
  readonly #maxQueue: number
  readonly #logger: Logger | null
  readonly #queue = new RingQueue<LogRecord>(1024)
  readonly #line: (record: LogRecord) => string
  #timer: NodeJS.Timeout | null = null
  #started = false
  #closed = false
  #prepared = false
  /** The last store operation failed: full batches go to the journal until a retry succeeds. */
  #down = false
  /** The next run may contact the store even though it is down (set by the tick and `flush()`). */
  #retryDue = false
  /** The running writer, if any; resolves with the store error that stopped it, or `null`. */
  #draining: Promise<Error | null> | null = null
  /** Records taken from the queue and not yet written, journaled or dropped. */
  #inFlight = 0
  /** Journal appends of batches moved out of a full queue (see `#overflow`). */
  readonly #overflows = new Set<Promise<void>>()
  #enqueued = 0
  /** Enqueued records that left the queue: written, journaled or dropped. */
  #settled = 0
  #written = 0
  #dropped = 0
  #droppedSinceWarning = 0
  #journaledSinceWarning = 0
  #failuresSinceWarning = 0
  #lastFailure = ''
  #warnedAfterClose = false

  constructor(store: LogStoreWriter, journal: FileJournal, options: LogBatchingOptions = {}) {
    this.#store = store
    this.#journal = journal
    this.#batchSize = positiveInteger(options.batchSize, 10_000, 'batchSize')
    this.#flushIntervalMs = positiveInteger(options.flushIntervalMs, 1000, 'flushIntervalMs')
    this.#maxQueue = positiveInteger(options.maxQueue, 100_000, 'maxQueue')
    this.#logger = options.logger ?? null
    this.#line = (record) => store.logLine(record)
  }

  /**
   * Opens the store (when it is unreachable and its writer allows, the sink starts anyway and
   * prepares it on the first write that gets through), opens the journal and starts the timer.
   * Replays a journal left by an earlier run. Idempotent while started.
   */
  async start(): Promise<void> {
    if (this.#store.opened) return
    const prepared = await this.#store.open()
    await this.#journal.open()
    this.#prepared = prepared
    this.#down = !prepared
    this.#retryDue = true
    this.#started = true
    this.#closed = false
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = setInterval(() => this.#tick(), this.#flushIntervalMs)
    this.#timer.unref()
    if (this.#journal.records > 0) {
      this.#log('info', { journaled: this.#journal.records, directory: this.#journal.directory }, 'replaying journaled request logs')
    }
    if (this.#journal.length > 0 || this.#queue.length > 0) void this.#drain()
  }

  enqueue(record: LogRecord): void {
    try {
      this.#enqueued += 1
      if (this.#closed) {
        this.#dropAfterClose()
        return
      }
      if (this.#queue.length >= this.#maxQueue) this.#overflow()
      this.#queue.push(record)
      if (this.#queue.length >= this.#batchSize && this.#draining === null && this.#started) void this.#drain()
    } catch {
      this.#settled += 1
      this.#countDropped(1)
    }
  }

  /**
   * Tries the store now and writes (or, with the store down, journals) every record enqueued
   * before the call; replays the journal first when the store answers. Rejects with the store's
   * error when it could not be reached; the records are then journaled (or, if the journal could
   * not take them, counted as dropped).
   */
  async flush(): Promise<void> {
    const target = this.#enqueued
    await this.#draining
    let failure: Error | null
    do {
      // Batches moved out of a full queue are replayed from the journal like any other.
      await Promise.all(this.#overflows)
      this.#retryDue = true
      failure = await this.#drain()
      // The second condition only guards against a counting slip turning into a busy loop.
    } while (this.#settled < target && (this.#queue.length > 0 || this.#draining !== null || this.#overflows.size > 0))
    if (failure !== null) throw new LogStoreUnavailableError(this.#store.name, failure)
  }

  /**
   * Stores feedback now (it is rare and the caller waits for it); when the store fails, journals
   * it for the replay. Rejects only when neither worked.
   */
  async recordFeedback(records: readonly FeedbackRecord[]): Promise<void> {
    const checked = records.map(checkFeedbackRecord)
    if (checked.length === 0) return
    try {
      await this.#ensurePrepared()
      await this.#store.insertFeedback(checked)
      this.#written += checked.length
      return
    } catch (error) {
      this.#noteFailure(asError(error))
    }
    if (!(await this.#journal.append('feedback', checked))) {
      throw new LogStoreUnavailableError(this.#store.name, new Error(`unreachable, and the log journal is full (${this.#journal.directory})`))
    }
    this.#journaledSinceWarning += checked.length
  }

  /**
   * Ok while writing works, and still ok (with what is happening) while the store is down, because
   * replies never depend on it and records are journaled meanwhile; not ok before `start()` and
   * after `close()`.
   */
  async health(): Promise<HealthStatus> {
    if (!this.#started || this.#closed) return { ok: false, detail: 'request log sink is not started' }
    if (!this.#down) return { ok: true }
    const { queued, journaled } = this.stats()
    return {
      ok: true,
      detail: `${this.#store.label} log writes are failing; ${queued} records queued, ${journaled} journaled (replayed when the store is back)`,
    }
  }

  stats(): LogSinkStats {
    return { queued: this.#queue.length + this.#inFlight, written: this.#written, dropped: this.#dropped, journaled: this.#journal.records }
  }

  /** Stops the timer, flushes (what the store does not take stays journaled for the next start) and closes the store. */
  async close(): Promise<void> {
    try {
      if (!this.#closed) await this.#stop()
    } finally {
      await this.#store.close()
    }
  }

  async #stop(): Promise<void> {
    this.#closed = true
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    try {
      await this.flush()
    } catch (error) {
      this.#log(
        'warn',
        { journaled: this.#journal.records, directory: this.#journal.directory, error: asError(error).message },
        `request log store (${this.#store.name}) unreachable at shutdown: journaled records are replayed at the next start`,
      )
    } finally {
      this.#reportWarnings()
    }
  }

  #tick(): void {
    this.#reportWarnings()
    if (this.#queue.length === 0 && this.#journal.length === 0) return
    this.#retryDue = true
    void this.#drain()
  }

  #drain(): Promise<Error | null> {
    this.#draining ??= this.#run()
      .catch(asError)
      .finally(() => {
        this.#draining = null
      })
    return this.#draining
  }

  async #run(): Promise<Error | null> {
    let failure: Error | null = null
    const tries = !this.#down || this.#retryDue
    if (tries) {
      this.#retryDue = false
      failure = await this.#replay()
      if (failure === null) failure = await this.#writeQueue()
    }
    // A run that just failed journals everything queued; one that skipped a down store only full batches.
    if (this.#down) await this.#spill(tries ? 1 : this.#batchSize)
    return failure
  }

  async #ensurePrepared(): Promise<void> {
    if (this.#prepared) return
    await this.#store.prepare()
    this.#prepared = true
  }

  /** Replays journaled batches, oldest first, each record once. */
  async #replay(): Promise<Error | null> {
    for (let entry = this.#journal.oldest(); entry !== undefined; entry = this.#journal.oldest()) {
      let items: unknown[]
      try {
        items = await this.#journal.read(entry)
      } catch (error) {
        await this.#quarantine(entry, asError(error))
        continue
      }
      // A batch whose records no longer pass the checks can never be stored: set it aside. Only
      // the checks decide that; any error from the store means the store is down.
      let logs: LogRecord[] | null = null
      let feedback: FeedbackRecord[] | null = null
      try {
        if (entry.kind === 'logs') logs = await mapInSlices(items as LogRecord[], checkLogRecord)
        else feedback = items.map((item) => checkFeedbackRecord(item as FeedbackRecord))
      } catch (error) {
        await this.#quarantine(entry, asError(error))
        continue
      }
      try {
        await this.#ensurePrepared()
        if (logs !== null) {
          await this.#store.settleEarlierAttempts?.(logs)
          const stored = await this.#store.existingLogIds(logs)
          const missing = stored.size === 0 ? logs : logs.filter((record) => !stored.has(record.id))
          if (missing.length > 0) await this.#store.insertLogs(missing, await encodeLines(missing, this.#line), logs)
        } else if (feedback !== null) {
          const stored = await this.#store.existingFeedback(feedback)
          const missing = feedback.filter((record) => !stored.has(feedbackVersionKey(record.id, record.updatedAt)))
          if (missing.length > 0) await this.#store.insertFeedback(missing)
        }
      } catch (error) {
        return this.#noteFailure(asError(error))
      }
      this.#down = false
      await this.#journal.remove(entry)
      this.#written += entry.count
    }
    return null
  }

  /**
   * Writes what was queued when it started, then only full batches, until the store fails (the
   * failed batch is journaled). Records that arrive meanwhile wait for a full batch or the next
   * tick: writing them at once would turn steady traffic into back-to-back small inserts, and each
   * insert has a fixed cost in the store (about 35 ms of ClickHouse CPU).
   */
  async #writeQueue(): Promise<Error | null> {
    let owed = this.#queue.length
    while (this.#queue.length > 0 && (owed > 0 || this.#queue.length >= this.#batchSize)) {
      const taken = this.#take(this.#batchSize)
      owed -= taken.length
      const batch = await this.#checked(taken)
      if (batch.length === 0) continue
      try {
        await this.#ensurePrepared()
        await this.#store.insertLogs(batch, await encodeLines(batch, this.#line), batch)
        this.#written += batch.length
        this.#down = false
      } catch (error) {
        const failure = this.#noteFailure(asError(error))
        await this.#toJournal(batch)
        return failure
      } finally {
        this.#settle(batch.length)
      }
    }
    return null
  }

  /** Moves queued records to the journal while the store is down, batch by batch, until fewer than `minimum` are left. */
  async #spill(minimum: number): Promise<void> {
    while (this.#queue.length >= minimum && this.#queue.length > 0) {
      const batch = await this.#checked(this.#take(this.#batchSize))
      if (batch.length === 0) continue
      try {
        await this.#toJournal(batch)
      } finally {
        this.#settle(batch.length)
      }
    }
  }

  /**
   * The queue is full: its oldest batch goes to the journal, beside whatever the writer is doing,
   * and is replayed from there. Runs inside `enqueue`, so it only takes the batch; checking and
   * journaling it happen in later turns. Before `start()` there is no journal yet, so the oldest
   * record is dropped instead.
   */
  #overflow(): void {
    if (!this.#started) {
      this.#queue.shift()
      this.#settled += 1
      this.#countDropped(1)
      return
    }
    const taken = this.#take(this.#batchSize)
    const appended = nextTurn()
      .then(() => this.#checked(taken))
      .then(async (batch) => {
        try {
          if (batch.length > 0) await this.#toJournal(batch)
        } finally {
          this.#settle(batch.length)
        }
      })
      .finally(() => this.#overflows.delete(appended))
    this.#overflows.add(appended)
  }

  /** Takes up to `count` records from the head; they count as in flight until settled. */
  #take(count: number): LogRecord[] {
    const taken = this.#queue.take(count)
    this.#inFlight += taken.length
    return taken
  }

  /** The taken records that can be stored, checked a slice at a time; the others are dropped, counted and settled. */
  async #checked(taken: readonly LogRecord[]): Promise<LogRecord[]> {
    const checked = await mapInSlices(taken, (record): LogRecord | null => {
      try {
        return checkLogRecord(record)
      } catch {
        return null
      }
    })
    const valid = checked.filter((record): record is LogRecord => record !== null)
    const invalid = taken.length - valid.length
    if (invalid > 0) {
      this.#settle(invalid)
      this.#countDropped(invalid)
    }
    return valid
  }

  #settle(count: number): void {
    this.#settled += count
    this.#inFlight -= count
  }

  async #toJournal(batch: readonly LogRecord[]): Promise<void> {
    try {
      if (await this.#journal.append('logs', batch)) {
        this.#journaledSinceWarning += batch.length
        return
      }
      this.#countDropped(batch.length)
      this.#lastFailure = `the log journal is full (${this.#journal.bytes} bytes in ${this.#journal.directory})`
    } catch (error) {
      this.#countDropped(batch.length)
      this.#log('error', { lost: batch.length, error: asError(error).message, directory: this.#journal.directory }, 'request log journal write failed')
    }
  }

  async #quarantine(entry: JournalEntry, error: Error): Promise<void> {
    const keptAs = await this.#journal.quarantine(entry)
    this.#countDropped(entry.count)
    this.#log('error', { file: entry.file, keptAs, lost: entry.count, error: error.message }, 'unreadable request log journal file set aside')
  }

  #noteFailure(error: Error): Error {
    this.#down = true
    // A dropped database or table is recreated by the next attempt.
    this.#prepared = false
    this.#failuresSinceWarning += 1
    this.#lastFailure = error.message
    return error
  }

  #countDropped(count: number): void {
    this.#dropped += count
    this.#droppedSinceWarning += count
  }

  #dropAfterClose(): void {
    this.#settled += 1
    this.#countDropped(1)
    if (this.#warnedAfterClose) return
    this.#warnedAfterClose = true
    this.#log('warn', {}, 'request log record dropped: the log sink is closed')
  }

  #reportWarnings(): void {
    if (this.#droppedSinceWarning > 0) {
      this.#log(
        'warn',
        { dropped: this.#droppedSinceWarning, totalDropped: this.#dropped, maxQueue: this.#maxQueue, error: this.#lastFailure },
        'request log records dropped',
      )
      this.#droppedSinceWarning = 0
    }
    if (this.#failuresSinceWarning > 0 || this.#journaledSinceWarning > 0) {
      this.#log(
        'warn',
        {
          store: this.#store.name,
          failures: this.#failuresSinceWarning,
          journaledNow: this.#journaledSinceWarning,
          journaled: this.#journal.records,
          queued: this.stats().queued,
          error: this.#lastFailure,
        },
        'request log store unreachable; records are journaled and replayed once it answers',
      )
      this.#failuresSinceWarning = 0
      this.#journaledSinceWarning = 0
    }
  }

  #log(level: 'info' | 'warn' | 'error', fields: object, message: string): void {
    try {
      this.#logger?.[level](fields, message)
    } catch {
      // A broken logger must not break enqueue or the writer.
    }
  }
}
