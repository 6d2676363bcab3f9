/**
 * What the gateway leaves on disk (issue 12, item 8):
 * - a custom log (`POST /v1/logs`) is masked before it is stored, so neither the log store's rows
 *   (DuckDB file and its write-ahead log, ClickHouse table) nor the journal hold the secrets a
 *   client pasted into bodies or metadata; reads stay masked;
 * - the embedded data directory and everything the gateway creates in it are its owner's only:
 *   directories 0700, files 0600, whatever the umask (the in-process cases run with umask 0, the
 *   widest there is), and the process entry's umask covers what DuckDB creates itself (its WAL).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient, type ClickHouseClient } from '@clickhouse/client'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { DuckDbDatabase } from '../../adapters/embedded/duckdb-database.js'
import { DuckDbLogSink } from '../../adapters/embedded/duckdb-log-sink.js'
import { FileJournal } from '../../adapters/log-sink/file-journal.js'
import { startTestGateway, TEST_ADMIN_KEY, type TestGateway } from '../helpers/gateway.js'

const ROOT = new URL('../../', import.meta.url)
const SCOPES = ['completions.write', 'logs.write', 'logs.read']

/** Fresh secrets per run, long enough that their masked form (`sk********xyz`) cannot contain them. */
function secrets() {
  return {
    apiKey: `sk-live-${randomBytes(16).toString('hex')}`,
    bearer: `sk-bearer-${randomBytes(16).toString('hex')}`,
    clientSecret: `cs-${randomBytes(16).toString('hex')}`,
    gatewayKey: `gw-${randomBytes(32).toString('base64url')}`,
    metadataKey: `sk-meta-${randomBytes(16).toString('hex')}`,
  }
}
type Secrets = ReturnType<typeof secrets>

/** A custom log that carries each secret somewhere a careless client would put it. */
function customLog(s: Secrets): unknown {
  return {
    request: {
      url: 'https://api.openai.com/v1/chat/completions',
      body: { model: 'gpt-4o-mini', api_key: s.apiKey, messages: [{ role: 'user', content: s.gatewayKey }] },
    },
    response: {
      status: 200,
      body: { id: 'chatcmpl-1', echoed: { authorization: `Bearer ${s.bearer}`, oauth: { client_secret: s.clientSecret } } },
    },
    metadata: { _user: 'alice', api_key: s.metadataKey },
  }
}

function expectNoSecret(text: string, s: Secrets): void {
  for (const [name, secret] of Object.entries(s)) expect(text.includes(secret), `${name} stored in clear`).toBe(false)
}

async function postLog(url: string, key: string, s: Secrets): Promise<string> {
  const response = await fetch(`${url}/v1/logs`, { method: 'POST', headers: { 'x-gateway-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify(customLog(s)) })
  const body = (await response.json()) as { log_ids: string[] }
  expect(response.status, JSON.stringify(body)).toBe(200)
  return body.log_ids[0] as string
}

/** Every directory and file under `dir` (itself included) with its permission bits. */
function modes(dir: string): Array<{ path: string; type: 'dir' | 'file'; mode: string }> {
  const found: Array<{ path: string; type: 'dir' | 'file'; mode: string }> = []
  const visit = (path: string): void => {
    const info = statSync(path)
    found.push({ path, type: info.isDirectory() ? 'dir' : 'file', mode: (info.mode & 0o777).toString(8) })
    if (info.isDirectory()) for (const entry of readdirSync(path)) visit(join(path, entry))
  }
  visit(dir)
  return found
}

function modeOf(path: string): string {
  return (statSync(path).mode & 0o777).toString(8)
}

describe('custom logs are masked before they are stored', () => {
  let gw: TestGateway
  let key: string

  beforeAll(async () => {
    gw = await startTestGateway()
    key = (await gw.workspaceKey(SCOPES)).key
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('keeps no secret in the DuckDB row or write-ahead log, and reads stay masked', async () => {
    const s = secrets()
    const id = await postLog(gw.url, key, s)
    const sink = gw.wiring.logSink as DuckDbLogSink
    await sink.flush()
    const stored = await sink.findById(id)
    expect(stored).not.toBeNull()
    expectNoSecret(JSON.stringify(stored), s)
    // The masked forms are what was stored: the shape survives, the secret does not.
    expect(JSON.parse(stored?.requestBody as string)).toMatchObject({ model: 'gpt-4o-mini', api_key: `sk********${s.apiKey.slice(-3)}` })
    expect(stored?.metadata).toEqual({ _user: 'alice', api_key: `sk********${s.metadataKey.slice(-3)}` })
    expect(stored?.user).toBe('alice')
    // The WAL holds the rows written since the last checkpoint in their stored form.
    const files = readdirSync(gw.dataDir).filter((file) => file.startsWith('gateway.duckdb'))
    expect(files).toContain('gateway.duckdb.wal')
    for (const file of files) {
      const path = join(gw.dataDir, file)
      if (statSync(path).isFile()) expectNoSecret(readFileSync(path).toString('latin1'), s)
    }

    const read = await fetch(`${gw.url}/v1/logs/${id}`, { headers: { 'x-gateway-api-key': key } })
    const view = (await read.json()) as { request: { body: Record<string, unknown> } }
    expect(read.status, JSON.stringify(view)).toBe(200)
    expectNoSecret(JSON.stringify(view), s)
    expect(view.request.body.api_key).toBe(`sk********${s.apiKey.slice(-3)}`)
  })
})

describe('custom logs are masked before they reach ClickHouse', () => {
  const database = `gw_sec_${randomBytes(6).toString('hex')}`
  let clickhouse: ClickHouseClient
  let gw: TestGateway

  beforeAll(async () => {
    clickhouse = createClient({ url: inject('clickhouseUrl') })
    gw = await startTestGateway({ env: { CLICKHOUSE_URL: `${inject('clickhouseUrl')}/${database}` } })
  })

  afterAll(async () => {
    await gw?.close()
    await clickhouse?.command({ query: `DROP DATABASE IF EXISTS ${database}` })
    await clickhouse?.close()
  })

  it('keeps no secret in the stored row', async () => {
    const key = (await gw.workspaceKey(SCOPES)).key
    const s = secrets()
    const id = await postLog(gw.url, key, s)
    await gw.wiring.logSink?.flush()
    const result = await clickhouse.query({ query: `SELECT * FROM ${database}.request_logs WHERE id = '${id}'`, format: 'JSONEachRow' })
    const rows = await result.json()
    expect(rows).toHaveLength(1)
    const text = JSON.stringify(rows[0])
    expectNoSecret(text, s)
    expect(text).toContain(`sk********${s.apiKey.slice(-3)}`)
  })
})

describe('files the gateway creates are its owner\'s only', () => {
  let previousUmask: number
  let root: string

  beforeAll(() => {
    // The widest umask: any mode below that is not 0o666/0o777 was set by the gateway itself.
    previousUmask = process.umask(0)
    root = mkdtempSync(join(tmpdir(), 'gw-perms-'))
  })

  afterAll(() => {
    process.umask(previousUmask)
    rmSync(root, { recursive: true, force: true })
  })

  it('creates the data directory 0700 and the DuckDB file and master key 0600, even with umask 0', async () => {
    const dataDir = join(root, 'in-process', 'data')
    const gw = await startTestGateway({ env: { GATEWAY_DATA_DIR: dataDir } })
    try {
      const key = (await gw.workspaceKey(SCOPES)).key
      await postLog(gw.url, key, secrets())
      await gw.wiring.logSink?.flush()
      const created = await gw.admin('POST', '/v1/virtual-keys', { name: 'perm', provider: 'openai', key: 'sk-perm', workspace_id: (await gw.admin('POST', '/v1/admin/workspaces', { name: 'perms' })).body.id })
      expect(created.status, JSON.stringify(created.body)).toBe(200)
      expect(modeOf(dataDir)).toBe('700')
      expect(modeOf(join(dataDir, 'gateway.duckdb'))).toBe('600')
      expect(modeOf(join(dataDir, 'master.key'))).toBe('600')
      expect(modeOf(join(dataDir, 'log-journal'))).toBe('700')
      expect(modeOf(join(dataDir, 'log-journal', 'duckdb'))).toBe('700')
    } finally {
      await gw.close()
    }
  })

  it('writes journal batches 0600 in a 0700 directory, even with umask 0', async () => {
    const directory = join(root, 'journal', 'clickhouse')
    const journal = new FileJournal({ directory, maxBytes: 1_000_000 })
    await journal.open()
    expect(await journal.append('logs', [{ id: randomUUID(), requestBody: 'body' }])).toBe(true)
    const entry = journal.oldest()
    expect(entry).toBeDefined()
    expect(modeOf(join(root, 'journal'))).toBe('700')
    expect(modeOf(directory)).toBe('700')
    expect(modeOf(join(directory, entry?.file as string))).toBe('600')
  })

  it('narrows an existing DuckDB file to 0600 when it opens it (DuckDB itself creates files with the umask)', async () => {
    const dir = join(root, 'reopen')
    const database = new DuckDbDatabase({ path: join(dir, 'gateway.duckdb') })
    const sink = new DuckDbLogSink(database, { flushIntervalMs: 600_000 })
    await sink.start()
    // The tables were created after the file was opened: DuckDB made the WAL itself, with the
    // umask, which is why the process entry sets it (next test).
    expect(modeOf(join(dir, 'gateway.duckdb.wal'))).toBe('666')
    await sink.close()
    await database.close()
    chmodSync(join(dir, 'gateway.duckdb'), 0o644)
    const again = new DuckDbDatabase({ path: join(dir, 'gateway.duckdb') })
    await again.start()
    expect(modeOf(dir)).toBe('700')
    expect(modeOf(join(dir, 'gateway.duckdb'))).toBe('600')
    await again.close()
  })
})

describe('the gateway process (config/main.ts)', () => {
  let root: string
  let child: ChildProcess | null = null

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'gw-perms-process-'))
  })

  afterAll(() => {
    child?.kill('SIGKILL')
    rmSync(root, { recursive: true, force: true })
  })

  function start(dataDir: string): Promise<{ url: string; exited: Promise<number | null> }> {
    const overlay = join(root, 'overlay.json')
    writeFileSync(overlay, JSON.stringify({ server: { host: '127.0.0.1' }, logSink: { flushIntervalMs: 50 } }))
    const spawned = spawn(process.execPath, ['--import', './test/helpers/ts-register.mjs', 'config/main.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: '0',
        GATEWAY_CONFIG: overlay,
        GATEWAY_DATA_DIR: dataDir,
        GATEWAY_BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY,
        GATEWAY_LOG_LEVEL: 'warn',
        CLICKHOUSE_URL: '',
        MONGODB_URI: '',
        REDIS_URL: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    child = spawned
    let output = ''
    const exited = new Promise<number | null>((resolve) => spawned.once('exit', (code) => resolve(code)))
    return new Promise((resolve, reject) => {
      spawned.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString()
        const match = /listening on http:\/\/localhost:(\d+)/.exec(output)
        if (match) resolve({ url: `http://127.0.0.1:${match[1]}`, exited })
      })
      spawned.stderr?.on('data', (chunk: Buffer) => {
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
    expect(response.status, `${method} ${path}: ${JSON.stringify(json)}`).toBe(200)
    return json
  }

  it('leaves only 0700 directories and 0600 files in its data directory, the WAL DuckDB re-creates included', async () => {
    const dataDir = join(root, 'data')
    const gateway = await start(dataDir)
    const workspace = await admin(gateway.url, 'POST', '/v1/admin/workspaces', { name: 'perms' })
    await admin(gateway.url, 'POST', '/v1/virtual-keys', { name: 'perm', provider: 'openai', key: 'sk-perm', workspace_id: workspace.id })
    const key = (await admin(gateway.url, 'POST', '/v1/api-keys/workspace/service', { name: 'logs', workspace_id: workspace.id, scopes: SCOPES })).key
    const s = secrets()
    const id = await postLog(gateway.url, key, s)
    // Reading a log not written yet flushes the sink first.
    const read = await fetch(`${gateway.url}/v1/logs/${id}`, { headers: { 'x-gateway-api-key': key } })
    expect(read.status).toBe(200)

    const found = modes(dataDir)
    const names = found.map((entry) => entry.path.slice(dataDir.length))
    expect(names).toEqual(expect.arrayContaining(['', '/gateway.duckdb', '/gateway.duckdb.wal', '/master.key', '/log-journal', '/log-journal/duckdb']))
    expect(found.filter((entry) => entry.mode !== (entry.type === 'dir' ? '700' : '600'))).toEqual([])
    expectNoSecret(readFileSync(join(dataDir, 'gateway.duckdb.wal')).toString('latin1'), s)

    child?.kill('SIGTERM')
    expect(await gateway.exited).toBe(0)
    child = null
    // The row as stored, read straight from the file the process left.
    const database = new DuckDbDatabase({ path: join(dataDir, 'gateway.duckdb') })
    await database.start()
    const session = await database.openSession()
    const rows = await session.query('SELECT * FROM request_logs WHERE id = $1', [id])
    await session.close()
    await database.close()
    expect(rows).toHaveLength(1)
    expectNoSecret(JSON.stringify(rows[0], (_key, value: unknown) => (typeof value === 'bigint' ? String(value) : value)), s)
    expect(existsSync(join(dataDir, 'gateway.duckdb'))).toBe(true)
  })
})
