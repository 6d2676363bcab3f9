/**
 * The composition root loads a store's driver only when its URL is set, so a gateway on embedded
 * defaults does not carry MongoDB, Redis and ClickHouse clients it never uses. Checked in a fresh
 * Node process (this worker has long loaded every driver), by the CommonJS modules it ends up with.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const DRIVERS = ['/node_modules/mongodb/', '/node_modules/ioredis/', '/node_modules/@clickhouse/client/']
const dataDir = mkdtempSync(join(tmpdir(), 'gw-wiring-drivers-'))

// Wires the gateway (nothing is started or connected) with `env`, then prints the drivers loaded.
const SCRIPT = `
import { createRequire } from 'node:module'
const { loadConfig } = await import('./config/load.ts')
const { wire } = await import('./config/wiring.ts')
await wire(loadConfig(JSON.parse(process.argv[1])))
const loaded = Object.keys(createRequire(import.meta.url).cache)
console.log(JSON.stringify(${JSON.stringify(DRIVERS)}.filter((driver) => loaded.some((file) => file.includes(driver)))))
process.exit(0)
`

function driversLoadedWith(env: Record<string, string>): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', './test/helpers/ts-register.mjs', '--input-type=module', '-e', SCRIPT, JSON.stringify({ GATEWAY_DATA_DIR: dataDir, GATEWAY_LOG_LEVEL: 'error', ...env })], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')))
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')))
    child.once('error', reject)
    child.once('exit', (code) => {
      const last = out.trim().split('\n').at(-1) ?? ''
      if (code !== 0 || !last.startsWith('[')) reject(new Error(`wiring script failed (exit ${code}):\n${out}\n${err}`))
      else resolve(JSON.parse(last) as string[])
    })
  })
}

afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

describe('wire', () => {
  it('loads no MongoDB, Redis or ClickHouse driver on embedded defaults', async () => {
    expect(await driversLoadedWith({})).toEqual([])
  }, 60_000)

  it('loads the Redis and ClickHouse drivers once their URLs are set', async () => {
    expect(await driversLoadedWith({ REDIS_URL: 'redis://127.0.0.1:1', CLICKHOUSE_URL: 'http://127.0.0.1:1/gateway' })).toEqual([
      '/node_modules/ioredis/',
      '/node_modules/@clickhouse/client/',
    ])
  }, 60_000)
})
