/**
 * ClickHouseLogSink against the real ClickHouse the test run starts (18.16), one throwaway
 * database per test. Outages are made with a TCP proxy in front of it (test/helpers/tcp-fault-proxy.ts):
 * refused connections, and inserts that ClickHouse performs but whose answer never reaches the sink.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient, type ClickHouseClient } from '@clickhouse/client'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import { prepareClickHouseLogTables } from '../../../adapters/clickhouse/clickhouse-connection.js'
import {
  ClickHouseLogSink,
  ClickHouseLogWriter,
  batchKey,
  type ClickHouseLogSinkOptions,
} from '../../../adapters/clickhouse/clickhouse-log-sink.js'
import { clickHouseRequestLogDdl } from '../../../adapters/clickhouse/clickhouse-schema.js'
import { RECORDS_PER_SLICE } from '../../../adapters/log-sink/slices.js'
import type { LogRecord } from '../../../core/logs.js'
import { LogStoreUnavailableError } from '../../../core/ports.js'
import type { Logger } from '../../../core/service.js'
import { watchBatchWork } from '../../helpers/event-loop-turns.js'
import { feedbackRecord, fullLogRecord, logRecord } from '../../helpers/log-records.js'
import { startFaultProxy, type FaultProxy } from '../../helpers/tcp-fault-proxy.js'

const NEVER = 3_600_000
let clickhouse: ClickHouseClient
const databases: string[] = []
const directories: string[] = []
const sinks: ClickHouseLogSink[] = []
let proxy: FaultProxy

function freshDatabase(): string {
  const database = `logs_test_${randomBytes(6).toString('hex')}`
  databases.push(database)
  return database
}

async function freshJournal(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'gw-ch-journal-'))
  directories.push(directory)
  return directory
}

function quietLogger(): Logger {
  return { debug: vi.fn(), info: vi.fn(), warn: vi.fn(), error: vi.fn() }
}

function sinkFor(options: Partial<ClickHouseLogSinkOptions> & { database: string; journalDirectory: string }): ClickHouseLogSink {
  const sink = new ClickHouseLogSink({ url: inject('clickhouseUrl'), flushIntervalMs: NEVER, logger: quietLogger(), requestTimeoutMs: 10_000, ...options })
  sinks.push(sink)
  return sink
}

async function rows<T>(query: string): Promise<T[]> {
  const result = await clickhouse.query({ query, format: 'JSONEachRow' })
  return result.json<T>()
}

/** Total rows and distinct ids in the database's request_logs. */
async function tally(database: string): Promise<{ rows: number; ids: number }> {
  const [row] = await rows<{ n: string; u: string }>(`SELECT count() AS n, uniqExact(id) AS u FROM ${database}.request_logs`)
  return { rows: Number(row?.n ?? 0), ids: Number(row?.u ?? 0) }
}

/** How often each id occurs (ids missing from the table are absent). */
async function occurrences(database: string, ids: readonly string[]): Promise<Map<string, number>> {
  const list = ids.map((id) => `'${id}'`).join(', ')
  const found = await rows<{ id: string; n: string }>(`SELECT id, count() AS n FROM ${database}.request_logs WHERE id IN (${list}) GROUP BY id`)
  return new Map(found.map((row) => [row.id, Number(row.n)]))
}

async function expectEachOnce(database: string, records: readonly LogRecord[]): Promise<void> {
  const seen = await occurrences(database, records.map((record) => record.id))
  expect(seen.size).toBe(records.length)
  expect([...seen.values()].every((n) => n === 1)).toBe(true)
}

beforeAll(async () => {
  clickhouse = createClient({ url: inject('clickhouseUrl') })
  proxy = await startFaultProxy(new URL(inject('clickhouseUrl')))
})

afterEach(async () => {
  proxy.mode = 'up'
  await Promise.all(sinks.splice(0).map((sink) => sink.close().catch(() => undefined)))
})

afterAll(async () => {
  for (const database of databases) await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` })
  await clickhouse.close()
  await proxy.close()
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })))
})

describe('ClickHouseLogSink', () => {
  it('creates its database and tables and writes every record in batches', async () => {
    const database = freshDatabase()
    const sink = sinkFor({ database, journalDirectory: await freshJournal(), batchSize: 500 })
    await sink.start()
    expect((await sink.health()).ok).toBe(true)
    const records = Array.from({ length: 3000 }, (_, index) => logRecord({ createdAt: 1_717_171_717_171 + index }))
    for (const record of records) sink.enqueue(record)
    await sink.flush()
    expect(await tally(database)).toEqual({ rows: 3000, ids: 3000 })
    expect(sink.stats()).toEqual({ queued: 0, written: 3000, dropped: 0, journaled: 0 })
    const tables = await rows<{ name: string }>(`SELECT name FROM system.tables WHERE database = '${database}' ORDER BY name`)
    expect(tables.map((table) => table.name)).toEqual(['feedback', 'request_logs'])
  })

  it('stores every field in its column', async () => {
    const database = freshDatabase()
    const sink = sinkFor({ database, journalDirectory: await freshJournal() })
    await sink.start()
    const full = fullLogRecord()
    const sparse = logRecord({ outcome: 'aborted', status: 0 })
    sink.enqueue(full)
    sink.enqueue(sparse)
    await sink.flush()
    const [stored] = await rows<Record<string, unknown>>(`SELECT * FROM ${database}.request_logs WHERE id = '${full.id}'`)
    expect(stored).toMatchObject({
      organisation_id: full.organisationId,
      workspace_id: full.workspaceId,
      created_at_ms: String(full.createdAt),
      trace_id: full.traceId,
      source: 'custom',
      api_key_id: full.apiKeyId,
      end_user: 'user-42',
      virtual_key: 'openai-prod',
      config: 'cfg-1',
      prompt_slug: 'welcome',
      prompt_version: 3,
      status: 429,
      outcome: 'errored',
      streaming: 1,
      latency_ms: full.latencyMs,
      ttft_ms: full.ttftMs,
      prompt_tokens: 11,
      completion_tokens: 22,
      total_tokens: 33,
      cached_tokens: 4,
      cost_nano_usd: String(full.costNanoUsd),
      cache_status: 'miss',
      retry_count: 2,
      fallback_index: 1,
      error_code: 'GW_UPSTREAM_TIMEOUT',
      error_type: 'timeout_error',
      metadata_keys: Object.keys(full.metadata ?? {}),
      metadata_values: Object.values(full.metadata ?? {}),
      request_body: full.requestBody,
      response_body: full.responseBody,
      config_version: 4,
    })
    expect(JSON.parse(String(stored?.attempts))).toEqual(full.attempts)
    const [empty] = await rows<Record<string, unknown>>(`SELECT * FROM ${database}.request_logs WHERE id = '${sparse.id}'`)
    expect(empty).toMatchObject({ organisation_id: '', workspace_id: '', end_user: null, prompt_tokens: null, cost_nano_usd: null, metadata_keys: [], config_version: null, attempts: null })
  })

  it('adds the columns a table of an older version lacks, keeping its rows, and then stores them', async () => {
    const database = freshDatabase()
    // request_logs as the version before config routing made it: no config_version, no attempts.
    const older = clickHouseRequestLogDdl(database).replace(/,\n\s*config_version [^,\n]*/, '').replace(/,\n\s*attempts [^,\n]*/, '')
    expect(older).not.toMatch(/config_version|attempts/)
    await clickhouse.command({ query: `CREATE DATABASE ${database}` })
    await clickhouse.command({ query: older })
    await clickhouse.insert({
      table: `${database}.request_logs`,
      values: [{ organisation_id: 'org', workspace_id: 'ws', created_at: 1_700_000_000, created_at_ms: 1_700_000_000_123, id: 'old-1', trace_id: 't', source: 'gateway', method: 'POST', route: 'chat.completions', path: '/v1/chat/completions', status: 200, outcome: 'completed', streaming: 0, latency_ms: 1, cache_status: 'disabled', retry_count: 0, metadata_keys: [], metadata_values: [] }],
      format: 'JSONEachRow',
    })
    const sink = sinkFor({ database, journalDirectory: await freshJournal() })
    await sink.start()
    const full = fullLogRecord()
    sink.enqueue(full)
    await sink.flush()
    expect(sink.stats()).toMatchObject({ written: 1, journaled: 0, dropped: 0 })
    const stored = await rows<Record<string, unknown>>(`SELECT id, config_version, attempts FROM ${database}.request_logs ORDER BY id`)
    expect(stored).toHaveLength(2)
    expect(stored.find((row) => row.id === 'old-1')).toEqual({ id: 'old-1', config_version: null, attempts: null })
    const written = stored.find((row) => row.id === full.id)
    expect(written?.config_version).toBe(4)
    expect(JSON.parse(String(written?.attempts))).toEqual(full.attempts)
    // A second start (another instance, or a restart) finds nothing left to add.
    const again = sinkFor({ database, journalDirectory: await freshJournal() })
    await again.start()
    expect((await again.health()).ok).toBe(true)
  })

  it('stores feedback, one row per version', async () => {
    const database = freshDatabase()
    const sink = sinkFor({ database, journalDirectory: await freshJournal() })
    await sink.start()
    const first = feedbackRecord()
    await sink.recordFeedback([first])
    await sink.recordFeedback([{ ...first, value: -2, updatedAt: first.updatedAt + 1 }])
    const stored = await rows<{ value: number; updated_at_ms: string }>(
      `SELECT value, updated_at_ms FROM ${database}.feedback WHERE id = '${first.id}' ORDER BY updated_at_ms`,
    )
    expect(stored).toEqual([
      { value: 5, updated_at_ms: String(first.updatedAt) },
      { value: -2, updated_at_ms: String(first.updatedAt + 1) },
    ])
  })

  it('refuses an invalid database name', () => {
    expect(() => new ClickHouseLogSink({ url: inject('clickhouseUrl'), database: 'x; DROP', journalDirectory: tmpdir() })).toThrow(TypeError)
  })
})

describe('ClickHouseLogSink when ClickHouse goes away', () => {
  it('keeps accepting records, journals them, and stores each exactly once when ClickHouse is back', async () => {
    const database = freshDatabase()
    const journalDirectory = await freshJournal()
    const sink = sinkFor({ url: proxy.url, database, journalDirectory, batchSize: 50 })
    await sink.start()
    const batches = (count: number) => Array.from({ length: count }, () => logRecord({ organisationId: 'org-fault', workspaceId: randomUUID() }))

    const before = batches(100)
    for (const record of before) sink.enqueue(record)
    await sink.flush()
    expect(await tally(database)).toEqual({ rows: 100, ids: 100 })

    // ClickHouse writes the batch but the answer is lost: the sink cannot know, so it journals it.
    proxy.mode = 'lose-insert-responses'
    const unanswered = batches(20)
    for (const record of unanswered) sink.enqueue(record)
    await expect(sink.flush()).rejects.toThrow(LogStoreUnavailableError)
    expect(sink.stats()).toMatchObject({ queued: 0, journaled: 20 })
    expect(await tally(database)).toEqual({ rows: 120, ids: 120 })

    proxy.mode = 'down'
    const during = batches(230)
    for (const record of during) expect(() => sink.enqueue(record)).not.toThrow()
    await expect(sink.flush()).rejects.toThrow()
    expect(sink.stats()).toMatchObject({ queued: 0, journaled: 250, dropped: 0 })
    // Still ready (replies do not depend on the log store), saying what is happening.
    expect(await sink.health()).toMatchObject({ ok: true, detail: expect.stringContaining('failing') })

    // Replays whose inserts again go through without an answer.
    proxy.mode = 'lose-insert-responses'
    await expect(sink.flush()).rejects.toThrow()

    proxy.mode = 'up'
    await sink.flush()
    expect(sink.stats()).toEqual({ queued: 0, written: 350, dropped: 0, journaled: 0 })
    expect((await sink.health()).ok).toBe(true)
    expect(await readdir(journalDirectory)).toEqual([])
    expect(await tally(database)).toEqual({ rows: 350, ids: 350 })
    await expectEachOnce(database, [...before, ...unanswered, ...during])
  })

  it('starts while ClickHouse is unreachable and creates its tables once it answers', async () => {
    const database = freshDatabase()
    proxy.mode = 'down'
    const sink = sinkFor({ url: proxy.url, database, journalDirectory: await freshJournal() })
    await sink.start()
    // Still ready (replies do not depend on the log store), saying what is happening.
    expect(await sink.health()).toMatchObject({ ok: true, detail: expect.stringContaining('failing') })
    const records = Array.from({ length: 10 }, () => logRecord())
    for (const record of records) sink.enqueue(record)
    await expect(sink.flush()).rejects.toThrow()
    await expect(sink.recordFeedback([feedbackRecord()])).resolves.toBeUndefined()
    expect(sink.stats()).toMatchObject({ journaled: 11 })
    proxy.mode = 'up'
    await sink.flush()
    await expectEachOnce(database, records)
    const [feedback] = await rows<{ n: string }>(`SELECT count() AS n FROM ${database}.feedback`)
    expect(Number(feedback?.n)).toBe(1)
    expect(sink.stats()).toMatchObject({ journaled: 0, written: 11 })
  })

  it('replays the journal of an earlier process at the next start', async () => {
    const database = freshDatabase()
    const journalDirectory = await freshJournal()
    proxy.mode = 'down'
    const first = sinkFor({ url: proxy.url, database, journalDirectory, batchSize: 7 })
    await first.start()
    const records = Array.from({ length: 30 }, () => logRecord())
    for (const record of records) first.enqueue(record)
    await first.close()
    expect(first.stats()).toMatchObject({ journaled: 30, dropped: 0 })
    expect((await readdir(journalDirectory)).length).toBeGreaterThan(0)

    proxy.mode = 'up'
    const second = sinkFor({ url: proxy.url, database, journalDirectory })
    await second.start()
    expect(second.stats().journaled).toBe(30)
    await vi.waitFor(() => expect(second.stats().journaled).toBe(0), { timeout: 10_000 })
    await expectEachOnce(database, records)
    expect(await readdir(journalDirectory)).toEqual([])
  })
})

describe('ClickHouseLogSink batching', () => {
  it('turns steady traffic into one insert per tick, not back-to-back small inserts', async () => {
    const counting = await startFaultProxy(new URL(inject('clickhouseUrl')))
    try {
      const database = freshDatabase()
      const sink = sinkFor({ url: counting.url, database, journalDirectory: await freshJournal(), flushIntervalMs: 250, batchSize: 100_000 })
      await sink.start()
      const sent: LogRecord[] = []
      // 2 s of traffic, 20 records every 10 ms (2000/s), while the writer runs on its 250 ms ticks.
      for (let step = 0; step < 200; step++) {
        for (let index = 0; index < 20; index++) {
          const record = logRecord()
          sent.push(record)
          sink.enqueue(record)
        }
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      await sink.flush()
      await expectEachOnce(database, sent)
      // About one insert per 250 ms tick (and one for the final flush); writing what arrived during
      // each insert at once would make one insert per ClickHouse round trip instead (dozens here).
      expect(counting.inserts).toBeGreaterThanOrEqual(2)
      expect(counting.inserts).toBeLessThanOrEqual(Math.ceil(2_000 / 250) + 4)
    } finally {
      await counting.close()
    }
  })
})

describe('ClickHouseLogSink when an insert outlives its request', () => {
  it('stores each record once when an insert that timed out commits after the replay began', async () => {
    const database = freshDatabase()
    // request_logs as the sink makes it, plus a column computed on insert that sleeps 3 s (18.16's
    // longest sleep) before the rows are written: the sink gives up after 0.5 s, and ClickHouse
    // keeps going and commits them later, as an overloaded server does.
    await clickhouse.command({ query: `CREATE DATABASE ${database}` })
    await clickhouse.command({ query: clickHouseRequestLogDdl(database).replace(/\n\) ENGINE/, ',\n  slow_insert UInt8 MATERIALIZED sleep(3)\n) ENGINE') })
    const sink = sinkFor({ database, journalDirectory: await freshJournal(), requestTimeoutMs: 500 })
    await sink.start()
    const records = Array.from({ length: 300 }, () => logRecord({ organisationId: 'org-slow' }))
    for (const record of records) sink.enqueue(record)
    await expect(sink.flush()).rejects.toThrow(LogStoreUnavailableError)
    expect(sink.stats()).toMatchObject({ queued: 0, journaled: 300 })
    const running = async (): Promise<string[]> =>
      (await rows<{ query_id: string }>(`SELECT query_id FROM system.processes WHERE query_id LIKE 'gw-log-%'`)).map((row) => row.query_id)
    expect(await running()).toEqual([expect.stringMatching(new RegExp(`^gw-log-${batchKey(records)}-`))])

    // The replay must not look for the rows while that insert can still commit them.
    await expect(sink.flush()).rejects.toThrow(/still running/)
    expect(sink.stats()).toMatchObject({ journaled: 300, written: 0 })

    await vi.waitFor(async () => expect(await running()).toEqual([]), { timeout: 15_000, interval: 100 })
    await sink.flush()
    expect(sink.stats()).toMatchObject({ queued: 0, journaled: 0, written: 300, dropped: 0 })
    expect(await tally(database)).toEqual({ rows: 300, ids: 300 })
    await expectEachOnce(database, records)
  })

  it('finds that ClickHouse 18.16 takes no deduplication token, and leaves its table as 18.16 wants it', async () => {
    const database = freshDatabase()
    const features = await prepareClickHouseLogTables(clickhouse, database)
    expect(features).toEqual({ insertTokens: false })
    const [table] = await rows<{ engine_full: string }>(`SELECT engine_full FROM system.tables WHERE database = '${database}' AND name = 'request_logs'`)
    expect(table?.engine_full).not.toContain('non_replicated_deduplication_window')
    // Where the server has the setting, new tables keep a deduplication window.
    expect(clickHouseRequestLogDdl(database, true)).toMatch(/\nSETTINGS non_replicated_deduplication_window = 1000$/)
    expect(clickHouseRequestLogDdl(database)).not.toContain('SETTINGS')
  })

  it('names every insert after its batch, the same for every attempt', () => {
    const batch = Array.from({ length: 3 }, () => logRecord())
    expect(batchKey(batch)).toMatch(/^[0-9a-f]{32}$/)
    expect(batchKey(batch.map((record) => ({ ...record })))).toBe(batchKey(batch))
    expect(batchKey(batch.slice(0, 2))).not.toBe(batchKey(batch))
    expect(batchKey([...batch].reverse())).not.toBe(batchKey(batch))
  })
})

describe('ClickHouseLogSink and the event loop', () => {
  it('checks and serialises a 10 000-record batch a slice at a time, never in one turn', async () => {
    const database = freshDatabase()
    const sink = sinkFor({ database, journalDirectory: await freshJournal() })
    await sink.start()
    const { checks, lines } = await watchBatchWork(ClickHouseLogWriter, async (watched) => {
      for (let index = 0; index < 10_000; index += 1) sink.enqueue(watched())
      await sink.flush()
    })
    expect(await tally(database)).toEqual({ rows: 10_000, ids: 10_000 })
    expect(checks.marks).toBe(10_000)
    expect(checks.mostInOneTurn).toBeLessThanOrEqual(RECORDS_PER_SLICE)
    expect(lines.marks).toBe(10_000)
    expect(lines.mostInOneTurn).toBeLessThanOrEqual(RECORDS_PER_SLICE)
  })
})
