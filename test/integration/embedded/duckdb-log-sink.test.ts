import { randomUUID } from 'node:crypto'
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { DuckDbDatabase } from '../../../adapters/embedded/duckdb-database.js'
import { DuckDbLogSink, DuckDbLogWriter, type DuckDbLogSinkOptions } from '../../../adapters/embedded/duckdb-log-sink.js'
import { RECORDS_PER_SLICE } from '../../../adapters/log-sink/slices.js'
import type { LogRecord } from '../../../core/logs.js'
import { LogStoreUnavailableError } from '../../../core/ports.js'
import type { Logger } from '../../../core/service.js'
import { countTurns, watchBatchWork, watchedLogRecord } from '../../helpers/event-loop-turns.js'
import { feedbackRecord, fullLogRecord, logRecord as record } from '../../helpers/log-records.js'

const directories: string[] = []
const databases: DuckDbDatabase[] = []
/** Long enough that the timer never fires during a test that does not want it to. */
const NEVER = 3_600_000

async function freshPath(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'gw-duckdb-logs-'))
  directories.push(directory)
  return join(directory, 'gateway.duckdb')
}

async function startSink(path: string, options: DuckDbLogSinkOptions = {}): Promise<{ database: DuckDbDatabase; sink: DuckDbLogSink }> {
  const database = new DuckDbDatabase({ path })
  databases.push(database)
  const sink = new DuckDbLogSink(database, options)
  await sink.start()
  return { database, sink }
}

type LogFn = Logger['warn']

function fakeLogger() {
  return { debug: vi.fn<LogFn>(), info: vi.fn<LogFn>(), warn: vi.fn<LogFn>(), error: vi.fn<LogFn>() } satisfies Logger
}

/**
 * Makes the sink's writes fail until the returned function restores the table: `request_logs`
 * becomes a view (inserting into a view fails, and the sink's re-preparation leaves it alone).
 */
async function breakStore(database: DuckDbDatabase): Promise<() => Promise<void>> {
  const admin = await database.openSession()
  await admin.run('ALTER TABLE request_logs RENAME TO request_logs_away')
  await admin.run('CREATE VIEW request_logs AS SELECT * FROM request_logs_away')
  return async () => {
    await admin.run('DROP VIEW request_logs')
    await admin.run('ALTER TABLE request_logs_away RENAME TO request_logs')
    await admin.close()
  }
}

afterEach(async () => {
  await Promise.all(databases.splice(0).map((database) => database.close()))
})

afterAll(async () => {
  await Promise.all(directories.splice(0).map((directory) => rm(directory, { recursive: true, force: true })))
})

describe('DuckDbLogSink', () => {
  it('writes all of 10 000 enqueued records by the end of flush()', async () => {
    const { sink } = await startSink(await freshPath(), { flushIntervalMs: NEVER })
    for (let index = 0; index < 10_000; index += 1) sink.enqueue(record({ status: 200 + (index % 3) }))
    await sink.flush()
    expect(await sink.count()).toBe(10_000)
    expect(sink.stats()).toEqual({ queued: 0, written: 10_000, dropped: 0, journaled: 0 })
    await sink.close()
  })

  it('round-trips a record with every field set, and one with every optional field empty', async () => {
    const { sink } = await startSink(await freshPath(), { flushIntervalMs: NEVER })
    const full = fullLogRecord()
    const sparse = record({ outcome: 'aborted', status: 0, latencyMs: 0 })
    sink.enqueue(full)
    sink.enqueue(sparse)
    await sink.flush()
    expect(await sink.findById(full.id)).toEqual(full)
    expect(await sink.findById(sparse.id)).toEqual(sparse)
    expect(await sink.findById(randomUUID())).toBeNull()
    await sink.close()
  })

  it('stores feedback entries, one row per version', async () => {
    const { database, sink } = await startSink(await freshPath(), { flushIntervalMs: NEVER })
    const first = feedbackRecord()
    const second = { ...first, value: -3, updatedAt: first.updatedAt + 1000 }
    await sink.recordFeedback([first])
    await sink.recordFeedback([second, feedbackRecord({ workspaceId: null, metadata: null })])
    const session = await database.openSession()
    const rows = await session.query('SELECT id, value, metadata_keys, metadata_values, epoch_ms(updated_at) AS u FROM feedback ORDER BY u, id')
    expect(rows).toHaveLength(3)
    expect(rows.filter((row) => row.id === first.id).map((row) => row.value)).toEqual([5, -3])
    expect(rows.find((row) => row.id === first.id)?.metadata_keys).toEqual(['reviewer'])
    await session.close()
    await expect(sink.recordFeedback([{ ...first, value: 11 }])).rejects.toThrow(TypeError)
    await sink.close()
  })

  it('moves the oldest batch of a full queue (maxQueue) to the journal, and writes it from there', async () => {
    const { sink } = await startSink(await freshPath(), { maxQueue: 100, batchSize: 40, flushIntervalMs: NEVER })
    const records = Array.from({ length: 150 }, () => record())
    for (const item of records) sink.enqueue(item)
    // Record 101 found the queue full: the oldest 40 are being journaled (still counted as queued), none dropped.
    expect(sink.stats()).toEqual({ queued: 150, written: 0, dropped: 0, journaled: 0 })

    await sink.flush()
    expect(await sink.count()).toBe(150)
    for (const item of [records[0], records[39], records[40], records[149]]) expect(await sink.findById(item?.id ?? '')).not.toBeNull()
    expect(sink.stats()).toEqual({ queued: 0, written: 150, dropped: 0, journaled: 0 })
    await sink.close()
  })

  it('drops and counts what a full queue cannot hand to the journal either, and warns', async () => {
    const logger = fakeLogger()
    // A journal of 1 byte takes nothing.
    const { sink } = await startSink(await freshPath(), { maxQueue: 100, batchSize: 1000, flushIntervalMs: NEVER, journalMaxBytes: 1, logger })
    const records = Array.from({ length: 150 }, () => record())
    for (const item of records) sink.enqueue(item)
    await vi.waitFor(() => expect(sink.stats()).toEqual({ queued: 50, written: 0, dropped: 100, journaled: 0 }), { timeout: 5_000 })

    await sink.flush()
    expect(await sink.count()).toBe(50)
    expect(await sink.findById(records[99]?.id ?? '')).toBeNull()
    expect(await sink.findById(records[100]?.id ?? '')).not.toBeNull()
    expect(sink.stats()).toEqual({ queued: 0, written: 50, dropped: 100, journaled: 0 })
    await sink.close()
    // One warning for the interval's drops, not one per record.
    const dropWarnings = logger.warn.mock.calls.filter(([, message]) => message === 'request log records dropped')
    expect(dropWarnings.map(([fields]) => fields)).toEqual([expect.objectContaining({ dropped: 100, totalDropped: 100 })])
  })

  it('starts writing as soon as a batch fills, without waiting for the timer', async () => {
    const { sink } = await startSink(await freshPath(), { batchSize: 10, flushIntervalMs: NEVER })
    for (let index = 0; index < 25; index += 1) sink.enqueue(record())
    await vi.waitFor(async () => expect(await sink.count()).toBeGreaterThanOrEqual(20), { timeout: 5_000 })
    await sink.close()
  })

  it('removes the journal directory it made up for an in-memory database when it closes', async () => {
    const mine = async (): Promise<string[]> => (await readdir(tmpdir())).filter((name) => name.startsWith(`gw-log-journal-${process.pid}-`))
    const before = await mine()
    const database = new DuckDbDatabase({ path: ':memory:' })
    databases.push(database)
    const sink = new DuckDbLogSink(database, { flushIntervalMs: NEVER })
    await sink.start()
    expect((await mine()).filter((name) => !before.includes(name))).toHaveLength(1)
    await sink.close()
    expect((await mine()).filter((name) => !before.includes(name))).toEqual([])
  })

  it('writes on the timer tick', async () => {
    const { sink } = await startSink(await freshPath(), { batchSize: 1000, flushIntervalMs: 25 })
    sink.enqueue(record())
    sink.enqueue(record())
    await vi.waitFor(async () => expect(await sink.count()).toBe(2), { timeout: 5_000 })
    await sink.close()
  })

  it('flushes what is queued on close(), and the records survive close and reopen', async () => {
    const path = await freshPath()
    const first = await startSink(path, { batchSize: 1000, flushIntervalMs: NEVER })
    const records = Array.from({ length: 500 }, (_, index) => record({ latencyMs: index }))
    for (const item of records) first.sink.enqueue(item)
    expect(first.sink.stats().queued).toBe(500)
    await first.sink.close()
    expect(first.sink.stats()).toEqual({ queued: 0, written: 500, dropped: 0, journaled: 0 })
    await first.database.close()

    const second = await startSink(path, { flushIntervalMs: NEVER })
    expect(await second.sink.count()).toBe(500)
    expect(await second.sink.findById(records[321]?.id ?? '')).toEqual(records[321])
    second.sink.enqueue(record())
    await second.sink.flush()
    expect(await second.sink.count()).toBe(501)
    await second.sink.close()
  })

  it('counts records enqueued after close() as dropped, without throwing', async () => {
    const logger = fakeLogger()
    const { sink } = await startSink(await freshPath(), { flushIntervalMs: NEVER, logger })
    await sink.close()
    expect(() => sink.enqueue(record())).not.toThrow()
    expect(() => sink.enqueue(record())).not.toThrow()
    expect(sink.stats()).toEqual({ queued: 0, written: 0, dropped: 2, journaled: 0 })
    expect(logger.warn).toHaveBeenCalledTimes(1)
  })

  it('journals batches while the store fails and replays them, each record once, when it is back', async () => {
    const logger = fakeLogger()
    const path = await freshPath()
    const { database, sink } = await startSink(path, { batchSize: 5, flushIntervalMs: NEVER, logger })
    const restore = await breakStore(database)

    const records = Array.from({ length: 12 }, () => record())
    for (const item of records) sink.enqueue(item)
    await expect(sink.flush()).rejects.toThrow(LogStoreUnavailableError)
    expect(sink.stats()).toMatchObject({ queued: 0, written: 0, dropped: 0, journaled: 12 })
    // Still ready (replies do not depend on the log store), saying what is happening.
    expect(await sink.health()).toMatchObject({ ok: true, detail: expect.stringContaining('failing') })
    expect((await readdir(join(path, '..', 'log-journal', 'duckdb'))).length).toBeGreaterThan(0)

    await restore()
    await sink.flush()
    expect(await sink.count()).toBe(12)
    for (const item of records) expect(await sink.findById(item.id)).toEqual(item)
    expect(sink.stats()).toEqual({ queued: 0, written: 12, dropped: 0, journaled: 0 })
    expect((await sink.health()).ok).toBe(true)
    expect(await readdir(join(path, '..', 'log-journal', 'duckdb'))).toEqual([])
    await sink.close()
  })

  it('replays a journal left by a closed sink at the next start, without duplicating rows already stored', async () => {
    const path = await freshPath()
    const first = await startSink(path, { batchSize: 4, flushIntervalMs: NEVER })
    const restore = await breakStore(first.database)
    const records = Array.from({ length: 10 }, () => record())
    for (const item of records) first.sink.enqueue(item)
    await first.sink.close()
    expect(first.sink.stats()).toMatchObject({ journaled: 10, dropped: 0 })
    await restore()
    // Some of the journaled records reach the store another way (as after a write that timed out
    // but was committed): the replay must not write them twice.
    const early = new DuckDbLogSink(first.database, { flushIntervalMs: NEVER, journalDirectory: join(path, '..', 'unused-journal') })
    await early.start()
    early.enqueue(records[0] as LogRecord)
    early.enqueue(records[5] as LogRecord)
    await early.close()
    await first.database.close()

    const second = await startSink(path, { flushIntervalMs: NEVER })
    await second.sink.flush()
    expect(await second.sink.count()).toBe(10)
    for (const item of records) expect(await second.sink.findById(item.id)).toEqual(item)
    expect(second.sink.stats()).toMatchObject({ written: 10, journaled: 0, dropped: 0 })
    await second.sink.close()
  })

  it('bounds the journal: a batch that does not fit is dropped, counted and warned about', async () => {
    const logger = fakeLogger()
    const { database, sink } = await startSink(await freshPath(), { batchSize: 10, flushIntervalMs: NEVER, journalMaxBytes: 20_000, logger })
    const restore = await breakStore(database)
    for (let index = 0; index < 10; index += 1) sink.enqueue(record())
    await expect(sink.flush()).rejects.toThrow()
    const journaled = sink.stats().journaled
    expect(journaled).toBe(10)
    for (let round = 0; round < 5; round += 1) {
      for (let index = 0; index < 10; index += 1) sink.enqueue(record())
      await expect(sink.flush()).rejects.toThrow()
    }
    const stats = sink.stats()
    expect(stats.dropped).toBeGreaterThan(0)
    expect(stats.journaled + stats.dropped).toBe(60)
    await restore()
    await sink.close()
    expect(logger.warn).toHaveBeenCalledWith(expect.objectContaining({ dropped: expect.any(Number) }), 'request log records dropped')
    expect(await sink.stats().written).toBe(stats.journaled)
  })

  it('drops and counts a record it cannot store instead of blocking the queue', async () => {
    const { sink } = await startSink(await freshPath(), { flushIntervalMs: NEVER })
    const good = record()
    expect(() => sink.enqueue({ ...record(), createdAt: Number.NaN })).not.toThrow()
    expect(() => sink.enqueue(null as unknown as LogRecord)).not.toThrow()
    sink.enqueue(good)
    await sink.flush()
    expect(await sink.findById(good.id)).toEqual(good)
    expect(sink.stats()).toEqual({ queued: 0, written: 1, dropped: 2, journaled: 0 })
    await sink.close()
  })

  it('shares one database with another session and reports healthy', async () => {
    const { database, sink } = await startSink(await freshPath(), { flushIntervalMs: NEVER })
    expect((await sink.health()).ok).toBe(true)
    expect((await database.health()).ok).toBe(true)
    sink.enqueue(record())
    await sink.flush()
    const other = await database.openSession()
    const rows = await other.query('SELECT count(*) AS n FROM request_logs')
    expect(Number(rows[0]?.n)).toBe(1)
    await other.close()
    await sink.close()
    expect((await sink.health()).ok).toBe(false)
  })
})

describe('DuckDbLogSink on a data directory of an older version', () => {
  const OLD_DDL = `CREATE TABLE request_logs (
    id VARCHAR NOT NULL, trace_id VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL, organisation_id VARCHAR,
    workspace_id VARCHAR, api_key_id VARCHAR, method VARCHAR NOT NULL, route VARCHAR NOT NULL, path VARCHAR NOT NULL,
    provider VARCHAR, model VARCHAR, status INTEGER NOT NULL, outcome VARCHAR NOT NULL, streaming BOOLEAN NOT NULL,
    latency_ms DOUBLE NOT NULL, ttfb_ms DOUBLE, prompt_tokens INTEGER, completion_tokens INTEGER, total_tokens INTEGER,
    cached_tokens INTEGER, error_code VARCHAR, metadata VARCHAR)`

  it('upgrades request_logs in place and keeps the old rows, metadata converted', async () => {
    const path = await freshPath()
    const old = new DuckDbDatabase({ path })
    await old.start()
    const session = await old.openSession()
    await session.run(OLD_DDL)
    await session.run(`INSERT INTO request_logs VALUES
      ('old-1', 'trace-1', make_timestamp(1700000000123000), 'org', 'ws', 'key', 'POST', 'chat.completions', '/v1/chat/completions',
       'openai', 'gpt-4o-mini', 200, 'completed', false, 12.5, 3.25, 10, 5, 15, 0, NULL, '{"_user":"alice","team":"blue"}'),
      ('old-2', 'trace-2', make_timestamp(1700000001000000), NULL, NULL, NULL, 'GET', 'passthrough', '/v1/models',
       NULL, NULL, 401, 'errored', false, 1, NULL, NULL, NULL, NULL, NULL, 'GW_AUTH_MISSING', NULL)`)
    await session.close()
    await old.close()

    const { sink } = await startSink(path, { flushIntervalMs: NEVER })
    expect(await sink.count()).toBe(2)
    expect(await sink.findById('old-1')).toEqual(
      record({
        id: 'old-1',
        traceId: 'trace-1',
        createdAt: 1_700_000_000_123,
        organisationId: 'org',
        workspaceId: 'ws',
        apiKeyId: 'key',
        user: 'alice',
        provider: 'openai',
        model: 'gpt-4o-mini',
        latencyMs: 12.5,
        ttftMs: 3.25,
        promptTokens: 10,
        completionTokens: 5,
        totalTokens: 15,
        cachedTokens: 0,
        metadata: { _user: 'alice', team: 'blue' },
      }),
    )
    expect(await sink.findById('old-2')).toMatchObject({ method: 'GET', status: 401, errorCode: 'GW_AUTH_MISSING', metadata: null, user: null, ttftMs: null, cacheStatus: 'disabled', source: 'gateway', retryCount: 0 })
    const fresh = fullLogRecord()
    sink.enqueue(fresh)
    await sink.flush()
    expect(await sink.findById(fresh.id)).toEqual(fresh)
    await sink.close()
  })
})

describe('DuckDbLogSink and the event loop', () => {
  it('checks and serialises a 10 000-record batch a slice at a time, never in one turn', async () => {
    const { sink } = await startSink(await freshPath(), { flushIntervalMs: NEVER })
    const { checks, lines } = await watchBatchWork(DuckDbLogWriter, async (watched) => {
      for (let index = 0; index < 10_000; index += 1) sink.enqueue(watched())
      await sink.flush()
    })
    expect(await sink.count()).toBe(10_000)
    expect(checks.marks).toBe(10_000)
    expect(checks.mostInOneTurn).toBeLessThanOrEqual(RECORDS_PER_SLICE)
    expect(lines.marks).toBe(10_000)
    expect(lines.mostInOneTurn).toBeLessThanOrEqual(RECORDS_PER_SLICE)
    await sink.close()
  })

  it('only takes the oldest batch of a full queue inside enqueue(); checking and journaling it come later', async () => {
    const { sink } = await startSink(await freshPath(), { maxQueue: 1000, batchSize: 100_000, flushIntervalMs: NEVER })
    const checks = countTurns()
    try {
      const records = Array.from({ length: 1000 }, () => watchedLogRecord(checks))
      for (const item of records) sink.enqueue(item)
      expect(checks.marks).toBe(0)
      // The queue is full: this call moves the 1000 waiting records towards the journal.
      sink.enqueue(record())
      expect(checks.marks).toBe(0)
      expect(sink.stats()).toMatchObject({ queued: 1001, dropped: 0 })
      await sink.flush()
      expect(checks.marks).toBe(1000)
      expect(checks.mostInOneTurn).toBeLessThanOrEqual(RECORDS_PER_SLICE)
      expect(await sink.count()).toBe(1001)
      expect(sink.stats()).toEqual({ queued: 0, written: 1001, dropped: 0, journaled: 0 })
    } finally {
      checks.stop()
      await sink.close()
    }
  })
})
