/**
 * The gateway as its own process (config/main.ts, run from the TypeScript sources through
 * test/helpers/ts-register.mjs), stopped with SIGTERM while requests are in flight: every request
 * it answered with 200 has exactly one log row after a restart over the same data directory. The
 * flush interval is long, so the rows are still queued in memory when the signal arrives.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DuckDbDatabase } from '../../adapters/embedded/duckdb-database.js'
import { DuckDbLogSink } from '../../adapters/embedded/duckdb-log-sink.js'
import { postChat, TEST_ADMIN_KEY } from '../helpers/gateway.js'
import { startMockUpstream, type MockUpstream } from '../helpers/mock-upstream.js'

const ROOT = new URL('../../', import.meta.url)
const CONCURRENCY = 16
/** Requests answered before the signal is sent. */
const BEFORE_SIGNAL = 200

let mock: MockUpstream
let dataDir: string

beforeAll(async () => {
  mock = await startMockUpstream()
  dataDir = mkdtempSync(join(tmpdir(), 'gw-sigterm-'))
})

afterAll(async () => {
  await mock?.close()
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
})

function startGatewayProcess(): Promise<{ child: ChildProcess; url: string; exited: Promise<number | null> }> {
  const overlay = join(dataDir, 'overlay.json')
  writeFileSync(overlay, JSON.stringify({ server: { host: '127.0.0.1' }, logSink: { flushIntervalMs: 600_000, batchSize: 100_000 } }))
  const child = spawn(process.execPath, ['--import', './test/helpers/ts-register.mjs', 'config/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: '0',
      GATEWAY_CONFIG: overlay,
      GATEWAY_DATA_DIR: dataDir,
      GATEWAY_BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY,
      GATEWAY_ALLOWED_CUSTOM_HOSTS: '127.0.0.1',
      GATEWAY_LOG_LEVEL: 'warn',
      CLICKHOUSE_URL: '',
      MONGODB_URI: '',
      REDIS_URL: '',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      const match = /listening on http:\/\/localhost:(\d+)/.exec(output)
      if (match) resolve({ child, url: `http://127.0.0.1:${match[1]}`, exited })
    })
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString()
    })
    void exited.then((code) => reject(new Error(`the gateway exited (${code}) before listening:\n${output}`)))
  })
}

async function admin(url: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { 'x-gateway-api-key': TEST_ADMIN_KEY, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const json = await response.json()
  if (response.status !== 200) throw new Error(`${method} ${path}: ${JSON.stringify(json)}`)
  return json
}

describe('request log across a SIGTERM under load', () => {
  it('keeps a row for every request answered 200, exactly once', async () => {
    const gateway = await startGatewayProcess()
    const workspace = await admin(gateway.url, 'POST', '/v1/admin/workspaces', { name: 'sigterm' })
    const key = (await admin(gateway.url, 'POST', '/v1/api-keys/workspace/service', { name: 'load', workspace_id: workspace.id, scopes: ['completions.write'] })).key

    const answered: string[] = []
    let signalled = false
    let stop = false
    async function worker(): Promise<void> {
      while (!stop) {
        const traceId = `sigterm-${randomUUID()}`
        try {
          const response = await postChat(gateway.url, key, mock.url, { 'x-gateway-trace-id': traceId })
          const text = await response.text()
          if (response.status === 200) answered.push(traceId)
          else if (!signalled) throw new Error(`answered ${response.status} before the signal: ${text}`)
        } catch (error) {
          // Before the signal every request must succeed: stop every worker and fail.
          stop = true
          // After it, the gateway stopped accepting: this request got no answer, so it owes no row.
          if (!signalled) throw error
        }
        if (!signalled && answered.length >= BEFORE_SIGNAL) {
          signalled = true
          gateway.child.kill('SIGTERM')
        }
      }
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, () => worker()))
    expect(await gateway.exited).toBe(0)

    // "Restart": open the same data directory the way the gateway does at start.
    const database = new DuckDbDatabase({ path: join(dataDir, 'gateway.duckdb') })
    const sink = new DuckDbLogSink(database, { flushIntervalMs: 600_000 })
    await sink.start()
    await sink.flush()
    const session = await database.openSession()
    const rows = await session.query(
      `SELECT trace_id, count(*) AS n FROM request_logs WHERE trace_id IN (SELECT unnest($1::VARCHAR[])) GROUP BY trace_id`,
      [answered],
    )
    await session.close()
    await sink.close()
    await database.close()
    const counts = new Map(rows.map((row) => [String(row.trace_id), Number(row.n)]))
    expect(answered.filter((traceId) => counts.get(traceId) !== 1)).toEqual([])
  })
})
