/**
 * Analytics bench: 1 000 000 request logs over 30 days in the embedded DuckDB file and in
 * ClickHouse, then the time taken by a few analytics calls over the whole 30 days (target: under
 * 1 s each). Run after a build: `node dist/bench/analytics.js`.
 *
 * ClickHouse: `CLICKHOUSE_URL` when set (a throwaway database is created in it and dropped), else a
 * throwaway clickhouse-server started like the test suite does. `BENCH_ANALYTICS_ROWS` changes the
 * row count; `BENCH_ANALYTICS_ENGINES=duckdb` (or `clickhouse`) runs one engine only.
 *
 * The rows are generated inside each engine by the same integer formulas over the row number, so
 * both stores hold the same data without shipping a gigabyte of JSON.
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@clickhouse/client'
import { ClickHouseLogAnalytics } from '../adapters/clickhouse/clickhouse-log-analytics.js'
import { DuckDbDatabase } from '../adapters/embedded/duckdb-database.js'
import { DuckDbLogAnalytics } from '../adapters/embedded/duckdb-log-analytics.js'
import type { LogAnalytics, LogFilter } from '../core/logs.js'
import { startClickHouse } from '../test/helpers/services.js'

const ROWS = Number(process.env.BENCH_ANALYTICS_ROWS ?? 1_000_000)
const ENGINES = (process.env.BENCH_ANALYTICS_ENGINES ?? 'duckdb,clickhouse').split(',')
const START = Date.UTC(2026, 0, 1)
const SPAN = 30 * 86_400_000
const STEP = Math.floor(SPAN / ROWS)

/** Column list and the expression of each column over the row number `n`, per engine. */
function generatedColumns(n: string, concat: (a: string, b: string) => string, pick: (list: string, index: string) => string, cond: (c: string, a: string, b: string) => string) {
  const created = `(${START} + ${n} * ${STEP} + (${n} * 7919) % ${STEP})`
  const prompt = `((${n} * 37) % 2000 + 10)`
  const completion = `((${n} * 53) % 1000 + 1)`
  const model = `((${n} * 31) % 4)`
  return {
    created,
    columns: [
      ['id', concat(`'log-'`, n)],
      ['trace_id', concat(`'trace-'`, n)],
      ['source', `'gateway'`],
      ['organisation_id', `'org-bench'`],
      ['workspace_id', cond(`${n} % 5 = 0`, `'ws-2'`, `'ws-1'`)],
      ['api_key_id', concat(`'key-'`, `(${n} % 3)`)],
      ['end_user', concat(`'user-'`, `((${n} * 13) % 50)`)],
      ['virtual_key', `'vk-main'`],
      ['method', `'POST'`],
      ['route', `'chat.completions'`],
      ['path', `'/v1/chat/completions'`],
      ['provider', pick(`['openai', 'openai', 'anthropic', 'anthropic']`, `${model} + 1`)],
      ['model', pick(`['gpt-4o', 'gpt-4o-mini', 'claude-3-5-sonnet', 'claude-3-haiku']`, `${model} + 1`)],
      ['status', cond(`${n} % 23 = 0`, '500', cond(`${n} % 29 = 0`, '429', '200'))],
      ['outcome', `'completed'`],
      ['latency_ms', `(((${n} * 7919) % 400000) / 100.0 + 50)`],
      ['prompt_tokens', prompt],
      ['completion_tokens', completion],
      ['total_tokens', `(${prompt} + ${completion})`],
      ['cost_nano_usd', `(${prompt} * 250 + ${completion} * 1000)`],
      ['cache_status', pick(`['disabled', 'disabled', 'disabled', 'disabled', 'miss', 'miss', 'miss', 'miss', 'hit', 'semantic_hit']`, `${n} % 10 + 1`)],
      ['retry_count', cond(`${n} % 31 = 0`, '1', '0')],
      ['metadata_keys', `['env']`],
      ['metadata_values', cond(`${n} % 3 = 0`, `['staging']`, `['prod']`)],
    ] as const,
  }
}

async function fillDuckDb(database: DuckDbDatabase): Promise<void> {
  const session = await database.openSession()
  try {
    const g = generatedColumns('n', (a, b) => `(${a} || ${b}::VARCHAR)`, (list, index) => `${list}[${index}]`, (c, a, b) => `CASE WHEN ${c} THEN ${a} ELSE ${b} END`)
    const columns = [...g.columns.map(([name]) => name), 'created_at', 'streaming']
    const values = [...g.columns.map(([, expression]) => expression), `epoch_ms(${g.created})`, 'false']
    await session.run(`INSERT INTO request_logs (${columns.join(', ')}) SELECT ${values.join(', ')} FROM range(${ROWS}) AS t(n)`)
  } finally {
    await session.close()
  }
}

async function fillClickHouse(url: string, database: string): Promise<void> {
  const client = createClient({ url })
  try {
    const g = generatedColumns('number', (a, b) => `concat(${a}, toString(${b}))`, (list, index) => `${list}[${index}]`, (c, a, b) => `if(${c}, ${a}, ${b})`)
    const columns = [...g.columns.map(([name]) => name), 'created_at', 'created_at_ms', 'streaming']
    const values = [...g.columns.map(([, expression]) => expression), `toDateTime(intDiv(${g.created}, 1000))`, g.created, '0']
    await client.command({ query: `INSERT INTO ${database}.request_logs (${columns.join(', ')}) SELECT ${values.join(', ')} FROM system.numbers LIMIT ${ROWS}` })
    await client.command({ query: `OPTIMIZE TABLE ${database}.request_logs FINAL` })
  } finally {
    await client.close()
  }
}

const CALLS: ReadonlyArray<{ readonly label: string; readonly run: (analytics: LogAnalytics, filter: LogFilter) => Promise<unknown> }> = [
  { label: 'graph requests', run: (a, f) => a.graph('requests', f) },
  { label: 'graph cost', run: (a, f) => a.graph('cost', f) },
  { label: 'graph latency (p50/p90/p99)', run: (a, f) => a.graph('latency', f) },
  { label: 'graph errors/rate', run: (a, f) => a.graph('errors/rate', f) },
  { label: 'graph users', run: (a, f) => a.graph('users', f) },
  { label: 'graph cache/hit-rate', run: (a, f) => a.graph('cache/hit-rate', f) },
  { label: 'group users (page 0)', run: (a, f) => a.group({ name: 'users', page: 0, pageSize: 50 }, f) },
  { label: 'group metadata/env', run: (a, f) => a.group({ name: 'metadata', metadataKey: 'env', page: 0, pageSize: 50 }, f) },
  { label: 'cache summary', run: (a, f) => a.cacheSummary(f) },
]

interface Timing {
  readonly engine: string
  readonly label: string
  readonly firstMs: number
  readonly medianMs: number
}

async function timeCalls(engine: string, analytics: LogAnalytics): Promise<Timing[]> {
  const filter: LogFilter = { scope: { organisationId: 'org-bench', workspaceId: null }, from: START, to: START + SPAN - 1 }
  const check = (await analytics.graph('requests', filter)).summary.total
  if (check !== ROWS) throw new Error(`${engine}: expected ${ROWS} requests, the graph says ${String(check)}`)
  const timings: Timing[] = []
  for (const call of CALLS) {
    const samples: number[] = []
    for (let i = 0; i < 5; i++) {
      const started = performance.now()
      await call.run(analytics, filter)
      samples.push(performance.now() - started)
    }
    const sorted = [...samples].sort((a, b) => a - b)
    timings.push({ engine, label: call.label, firstMs: samples[0] as number, medianMs: sorted[2] as number })
  }
  return timings
}

async function benchDuckDb(): Promise<Timing[]> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-analytics-'))
  // The gateway's own settings (128 MB, one thread): the figures are what the embedded default gives.
  const database = new DuckDbDatabase({ path: join(dir, 'bench.duckdb') })
  const analytics = new DuckDbLogAnalytics(database)
  try {
    await analytics.start()
    const started = performance.now()
    await fillDuckDb(database)
    console.log(`duckdb: ${ROWS} rows generated in ${((performance.now() - started) / 1000).toFixed(1)} s`)
    return await timeCalls('duckdb', analytics)
  } finally {
    await analytics.close()
    await database.close()
    await rm(dir, { recursive: true, force: true })
  }
}

async function benchClickHouse(): Promise<Timing[]> {
  const external = process.env.CLICKHOUSE_URL
  const server = external === undefined || external === '' ? await startClickHouse() : null
  const url = server?.url ?? (external as string)
  const database = `bench_analytics_${randomBytes(4).toString('hex')}`
  const analytics = new ClickHouseLogAnalytics({ url, database })
  try {
    await analytics.start()
    const started = performance.now()
    await fillClickHouse(url, database)
    console.log(`clickhouse: ${ROWS} rows generated in ${((performance.now() - started) / 1000).toFixed(1)} s`)
    return await timeCalls('clickhouse', analytics)
  } finally {
    await analytics.close()
    const client = createClient({ url })
    await client.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined)
    await client.close()
    await server?.stop()
  }
}

async function main(): Promise<void> {
  const timings: Timing[] = []
  if (ENGINES.includes('duckdb')) timings.push(...(await benchDuckDb()))
  if (ENGINES.includes('clickhouse')) timings.push(...(await benchClickHouse()))
  console.log(`\n${ROWS} rows over 30 days, organisation scope, whole range (5 runs each)\n`)
  console.log(`${'engine'.padEnd(11)} ${'call'.padEnd(30)} ${'first ms'.padStart(9)} ${'median ms'.padStart(10)}  < 1 s`)
  for (const t of timings) {
    console.log(`${t.engine.padEnd(11)} ${t.label.padEnd(30)} ${t.firstMs.toFixed(0).padStart(9)} ${t.medianMs.toFixed(0).padStart(10)}  ${t.medianMs < 1000 ? 'yes' : 'NO'}`)
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
