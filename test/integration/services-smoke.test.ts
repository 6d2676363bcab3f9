import { randomBytes } from 'node:crypto'
import { createClient, type ClickHouseClient } from '@clickhouse/client'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'

// What @clickhouse/client 1.23 needs against Debian's ClickHouse 18.16 (checked here and by hand):
// - The defaults work: `createClient({ url })` sends no settings unless asked, and both
//   `compression: { request: true, response: true }` (gzip) work too.
// - Server-side query parameters (`query_params`, `{name:Type}`) do NOT: 18.16 rejects them with
//   "Unknown setting param_x" (they arrived in 19.x); inline escaped literals instead.
// - Newer settings are rejected with code 115 ("Unknown setting"), e.g. `async_insert`, even in
//   clickhouse_settings; `date_time_input_format: 'best_effort'` and `input_format_skip_unknown_fields`
//   exist. Without best_effort, DateTime accepts 'YYYY-MM-DD hh:mm:ss' or unix seconds, not ISO 'T…Z'.
// - Not in 18.16: DateTime64, TTL clauses, the JSONCompactEachRow format; LowCardinality needs
//   allow_experimental_low_cardinality_type=1. JSONEachRow and JSON work; UInt64 comes back quoted.

describe('throwaway Redis', () => {
  let redis: Redis

  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { lazyConnect: true, maxRetriesPerRequest: 1 })
  })

  afterAll(async () => {
    await redis.quit()
  })

  it('is the URL exported to workers as well', () => {
    expect(inject('redisUrl')).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/)
    expect(process.env.GATEWAY_TEST_REDIS_URL).toBe(inject('redisUrl'))
  })

  it('sets and gets a key', async () => {
    const key = `smoke:${randomBytes(6).toString('hex')}`
    expect(await redis.set(key, 'value', 'EX', 60)).toBe('OK')
    expect(await redis.get(key)).toBe('value')
  })

  it('runs a Lua script with EVAL', async () => {
    const key = `smoke:counter:${randomBytes(6).toString('hex')}`
    const script = "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) redis.call('EXPIRE', KEYS[1], 60) return n"
    expect(await redis.eval(script, 1, key, 5)).toBe(5)
    expect(await redis.eval(script, 1, key, 2)).toBe(7)
  })
})

describe('throwaway ClickHouse', () => {
  const database = `smoke_${randomBytes(6).toString('hex')}`
  let clickhouse: ClickHouseClient

  beforeAll(async () => {
    clickhouse = createClient({ url: inject('clickhouseUrl') })
    await clickhouse.command({ query: `CREATE DATABASE ${database}` })
  })

  afterAll(async () => {
    await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` })
    await clickhouse.close()
  })

  it('is the old 18.x server', async () => {
    expect(process.env.GATEWAY_TEST_CLICKHOUSE_URL).toBe(inject('clickhouseUrl'))
    const result = await clickhouse.query({ query: 'SELECT version() AS version', format: 'JSONEachRow' })
    const rows = await result.json<{ version: string }>()
    expect(rows).toHaveLength(1)
    expect(rows[0]?.version.startsWith('18.')).toBe(true)
  })

  it('stores and reads back rows of a MergeTree table through JSONEachRow', async () => {
    await clickhouse.command({
      query: `CREATE TABLE ${database}.events (d Date, ts DateTime, tenant String, tokens UInt32, cost Float64)
        ENGINE = MergeTree() PARTITION BY toYYYYMM(d) ORDER BY (tenant, ts)`,
    })
    const rows = [
      { d: '2024-05-01', ts: '2024-05-01 10:00:00', tenant: 'acme', tokens: 12, cost: 0.5 },
      { d: '2024-05-01', ts: '2024-05-01 09:00:00', tenant: 'acme', tokens: 3, cost: 0.25 },
      { d: '2024-06-02', ts: '2024-06-02 08:30:00', tenant: 'beta', tokens: 7, cost: 1 },
    ]
    await clickhouse.insert({ table: `${database}.events`, values: rows, format: 'JSONEachRow' })

    const result = await clickhouse.query({
      query: `SELECT d, ts, tenant, tokens, cost FROM ${database}.events ORDER BY tenant, ts`,
      format: 'JSONEachRow',
    })
    expect(await result.json()).toEqual([rows[1], rows[0], rows[2]])

    const totals = await clickhouse.query({
      query: `SELECT tenant, sum(tokens) AS tokens, count() AS n FROM ${database}.events GROUP BY tenant ORDER BY tenant`,
      format: 'JSONEachRow',
    })
    // sum(UInt32) and count() are UInt64, which JSON output quotes.
    expect(await totals.json()).toEqual([
      { tenant: 'acme', tokens: '15', n: '2' },
      { tenant: 'beta', tokens: '7', n: '1' },
    ])
  })

  it('accepts gzip-compressed requests and responses', async () => {
    const compressed = createClient({ url: inject('clickhouseUrl'), compression: { request: true, response: true } })
    try {
      await compressed.command({ query: `CREATE TABLE ${database}.gz (n UInt32) ENGINE = Memory` })
      await compressed.insert({ table: `${database}.gz`, values: [{ n: 1 }, { n: 2 }], format: 'JSONEachRow' })
      const result = await compressed.query({ query: `SELECT n FROM ${database}.gz ORDER BY n`, format: 'JSONEachRow' })
      expect(await result.json()).toEqual([{ n: 1 }, { n: 2 }])
    } finally {
      await compressed.close()
    }
  })
})
