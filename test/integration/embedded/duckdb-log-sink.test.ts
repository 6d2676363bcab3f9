import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { DuckDbDatabase } from '../../../adapters/embedded/duckdb-database.js'
import { DuckDbLogSink, type DuckDbLogSinkOptions } from '../../../adapters/embedded/duckdb-log-sink.js'
import { REQUEST_LOG_DDL } from '../../../adapters/embedded/duckdb-schema.js'
import type { LogRecord, Logger } from '../../../core/ports.js'

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

function record(overrides: Partial<LogRecord> = {}): LogRecord {
  const id = randomUUID()
  return {
    id,
    traceId: id,
    createdAt: 1_717_171_717_171,
    organisationId: null,
    workspaceId: null,
    apiKeyId: null,
    method: 'POST',
    route: 'chat.completions',
    path: '/v1/chat/completions',
    provider: null,
    model: null,
    status: 200,
    outcome: 'completed',
    streaming: false,
    latencyMs: 12,
    ttfbMs: null,
    usage: null,
    errorCode: null,
    metadata: null,
    ...overrides,
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
    expect(sink.stats()).toEqual({ queued: 0, written: 10_000, dropped: 0 })
    await sink.close()
  })

  it('round-trips a record with every field set, and one with every optional field empty', async () => {
    const { sink } = await startSink(await freshPath(), { flushIntervalMs: NEVER })
    const full = record({
      traceId: 'trace-from-client-123',
      createdAt: 1_700_000_000_123,
      organisationId: randomUUID(),
      workspaceId: randomUUID(),
      apiKeyId: randomUUID(),
      method: 'PUT',
      route: 'passthrough',
      path: '/v1/files/abc?x=1',
      provider: 'openai',
      model: 'gpt-4o-mini',
      status: 429,
      outcome: 'errored',
      streaming: true,
      latencyMs: 1234.5678,
      ttfbMs: 98.765,
      usage: { promptTokens: 11, completionTokens: 22, totalTokens: 33, cachedTokens: 4 },
      errorCode: 'GW_UPSTREAM_TIMEOUT',
      metadata: { _user: 'user-42', team: 'naïve "quotes", commas \\ slashes', empty: '' },
    })
    const sparse = record({ outcome: 'aborted', status: 0, latencyMs: 0, usage: null, metadata: {} })
    sink.enqueue(full)
    sink.enqueue(sparse)
    await sink.flush()
    expect(await sink.findById(full.id)).toEqual(full)
    expect(await sink.findById(sparse.id)).toEqual(sparse)
    expect(await sink.findById(randomUUID())).toBeNull()
    await sink.close()
  })

  it('drops the oldest records when maxQueue is exceeded, counts them and warns', async () => {
    const logger = fakeLogger()
    const { sink } = await startSink(await freshPath(), { maxQueue: 100, batchSize: 1000, flushIntervalMs: 25, logger })
    const records = Array.from({ length: 150 }, () => record())
    for (const item of records) sink.enqueue(item)
    expect(sink.stats()).toEqual({ queued: 100, written: 0, dropped: 50 })

    await vi.waitFor(() => expect(logger.warn).toHaveBeenCalled(), { timeout: 5_000 })
    expect(logger.warn).toHaveBeenCalledTimes(1)
    expect(logger.warn.mock.calls[0]?.[0]).toMatchObject({ dropped: 50 })

    await sink.flush()
    expect(await sink.count()).toBe(100)
    expect(await sink.findById(records[0]?.id ?? '')).toBeNull()
    expect(await sink.findById(records[49]?.id ?? '')).toBeNull()
    expect(await sink.findById(records[50]?.id ?? '')).not.toBeNull()
    expect(await sink.findById(records[149]?.id ?? '')).not.toBeNull()
    expect(sink.stats()).toEqual({ queued: 0, written: 100, dropped: 50 })
    await sink.close()
  })

  it('starts writing as soon as a batch fills, without waiting for the timer', async () => {
    const { sink } = await startSink(await freshPath(), { batchSize: 10, flushIntervalMs: NEVER })
    for (let index = 0; index < 25; index += 1) sink.enqueue(record())
    await vi.waitFor(async () => expect(await sink.count()).toBeGreaterThanOrEqual(20), { timeout: 5_000 })
    await sink.close()
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
    expect(first.sink.stats()).toEqual({ queued: 0, written: 500, dropped: 0 })
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
    expect(sink.stats()).toEqual({ queued: 0, written: 0, dropped: 2 })
    expect(logger.warn).toHaveBeenCalledTimes(1)
  })

  it('keeps a failed batch queued and retries it on the next tick', async () => {
    const logger = fakeLogger()
    const { database, sink } = await startSink(await freshPath(), { batchSize: 5, flushIntervalMs: 25, logger })
    const admin = await database.openSession()
    await admin.run('DROP TABLE request_logs')

    const records = Array.from({ length: 12 }, () => record())
    for (const item of records) sink.enqueue(item)
    await expect(sink.flush()).rejects.toThrow()
    expect(sink.stats()).toMatchObject({ queued: 12, written: 0, dropped: 0 })
    expect((await sink.health()).ok).toBe(false)
    await vi.waitFor(() => expect(logger.warn).toHaveBeenCalledWith(expect.objectContaining({ failures: expect.any(Number) }), expect.any(String)), {
      timeout: 5_000,
    })

    await admin.run(REQUEST_LOG_DDL)
    await vi.waitFor(async () => expect(await sink.count()).toBe(12), { timeout: 5_000 })
    for (const item of records) expect(await sink.findById(item.id)).toEqual(item)
    expect(sink.stats()).toEqual({ queued: 0, written: 12, dropped: 0 })
    expect((await sink.health()).ok).toBe(true)
    await admin.close()
    await sink.close()
  })

  it('bounds the queue while the store is down, dropping the oldest', async () => {
    const { database, sink } = await startSink(await freshPath(), { batchSize: 4, maxQueue: 10, flushIntervalMs: NEVER })
    const admin = await database.openSession()
    await admin.run('DROP TABLE request_logs')
    const records = Array.from({ length: 10 }, () => record())
    for (const item of records) sink.enqueue(item)
    await expect(sink.flush()).rejects.toThrow()
    const later = Array.from({ length: 3 }, () => record())
    for (const item of later) sink.enqueue(item)
    expect(sink.stats()).toEqual({ queued: 10, written: 0, dropped: 3 })

    await admin.run(REQUEST_LOG_DDL)
    await sink.flush()
    const kept = [...records.slice(3), ...later]
    expect(await sink.count()).toBe(10)
    for (const item of kept) expect(await sink.findById(item.id)).not.toBeNull()
    for (const item of records.slice(0, 3)) expect(await sink.findById(item.id)).toBeNull()
    await admin.close()
    await sink.close()
  })

  it('drops and counts a record it cannot store instead of blocking the queue', async () => {
    const { sink } = await startSink(await freshPath(), { flushIntervalMs: NEVER })
    const good = record()
    expect(() => sink.enqueue({ ...record(), createdAt: Number.NaN })).not.toThrow()
    expect(() => sink.enqueue(null as unknown as LogRecord)).not.toThrow()
    sink.enqueue(good)
    await sink.flush()
    expect(await sink.findById(good.id)).toEqual(good)
    expect(sink.stats()).toEqual({ queued: 0, written: 1, dropped: 2 })
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
