import { spawn, spawnSync } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { cpus, loadavg, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { startClickHouse } from '../test/helpers/services.js'
import { findWrk, runNodeClosedLoop, runOpenLoop, runWrk, stopLoadDrivers } from './load.js'
import type { ClosedLoopResult, OpenLoopResult, RequestSpec } from './load.js'
import { BENCH_PROMPT_VARIABLES, benchPromptTemplate } from './prompt-template.js'

const distBench = fileURLToPath(new URL('.', import.meta.url))
const root = fileURLToPath(new URL('../../', import.meta.url))
const resultsDir = join(root, 'bench', 'results')
const gatewayMain = join(root, 'dist', 'config', 'main.js')

const envNumber = (name: string, fallback: number, least: 'positive' | 'zero' = 'positive'): number => {
  const raw = process.env[name]
  if (raw === undefined || raw.trim() === '') return fallback
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0 || (n === 0 && least === 'positive')) {
    throw new Error(`${name} must be a ${least === 'positive' ? 'positive' : 'non-negative'} number, got '${raw}'`)
  }
  return n
}

const options = {
  durationS: envNumber('BENCH_DURATION_S', 10),
  warmupS: envNumber('BENCH_WARMUP_S', 2),
  connections: envNumber('BENCH_CONNECTIONS', 64),
  rate: envNumber('BENCH_RATE', 1000),
  wrkThreads: envNumber('BENCH_WRK_THREADS', 1),
  nodeFlags: process.env.BENCH_NODE_FLAGS ?? '--max-semi-space-size=64',
  scenarios: (process.env.BENCH_SCENARIOS ?? '').split(',').map((s) => s.trim()).filter((s) => s !== ''),
  forceNodeDriver: process.env.BENCH_CLOSED_DRIVER === 'node',
  modes: (process.env.BENCH_MODES ?? 'json,stream').split(',').map((s) => s.trim()).filter((s) => s !== ''),
  // Paired req/s ratios: bare and gateway alternate in short closed-loop slices (0 rounds: off).
  pairedRounds: envNumber('BENCH_PAIRED_ROUNDS', 5, 'zero'),
  pairedSliceS: envNumber('BENCH_PAIRED_SLICE_S', 3),
  // 1: the server under test (bare forwarder or gateway) gets CPU 0 to itself; this process, the
  // load drivers, the mock, Redis and ClickHouse share the other CPUs (Linux `taskset`).
  pinServer: process.env.BENCH_PIN === '1'
}

const nodeFlags = options.nodeFlags.split(' ').filter((f) => f !== '')
const adminKey = `gw-admin-bench-${randomBytes(12).toString('hex')}`
// A run whose error rate passes this is reported but flagged: its speed is not a proxy's speed.
const maxErrorRatio = 0.01

type Mode = 'json' | 'stream'
type ScenarioName = 'mock' | 'bare' | 'gateway-forward' | 'gateway-full-nolog' | 'gateway-full' | 'gateway-prompt' | 'gateway-config' | 'gateway-cache-hit' | 'gateway-limits'
type GatewayKind = 'forward' | 'full-nolog' | 'full' | 'prompt' | 'config' | 'cache-hit' | 'limits'

// A rate limit that never refuses during a run, and a token budget that is never used up.
const unreachableRateLimit = { type: 'requests', unit: 'rpm', value: 100_000_000 }
const unreachableTokenBudget = { type: 'tokens', credit_limit: 1_000_000_000_000 }
// The issue 4 targets for `gateway-limits` against `gateway-full`.
const limitsTargets = { rpsRatioToFull: 0.8, redisCallsPerRequest: 1 }
// The issue 14 target: a prompt request (2 KB chat template, 5 variables, cached) costs at most 10%
// more server CPU than a plain chat completion through the same chain.
const promptTargets = { cpuRatioToFull: 1.1 }
// The issue 15 targets: a one-target config costs at most 10 µs of server CPU per request over the
// same request without one, and a cache hit costs less CPU than a forwarded request.
const configTargets = { cpuDeltaUs: 10, cacheHitCpuRatio: 1 }
// The foundation's targets for the gateway against the bare forwarder (issue 2).
const foundationTargets = { rpsRatioToBare: 0.7, p99DeltaMs: 1, ttfbP99DeltaMs: 1, peakRssMb: 200 }

type RedisServer = {
  url: string
  pid: number
  client: Redis
  stop: () => Promise<void>
}

// The log sink's counters (`/metrics`) over one mode: proof the records arrived, and what was lost.
type LogFigures = {
  store: 'clickhouse' | 'duckdb'
  written: number | null
  dropped: number | null
  journaled: number | null
}

// `gateway-full` against `gateway-full-nolog`: what logging costs the request path.
type LoggingComparison = {
  mode: Mode
  rpsRatio: number | null
  costPercent: number | null
  target: boolean | null
}

// The issue 5 target: logging costs at most this share of the full chain's requests/s.
const maxLoggingCostPercent = 10

type Server = {
  origin: string
  logStore: 'clickhouse' | 'duckdb' | null
  pid: number
  apiKey: string | null
  virtualKey: string | null
  // `gateway-prompt`: the prompt its requests run (`/v1/prompts/<slug>/completions`).
  promptSlug: string | null
  // `gateway-config` / `gateway-cache-hit`: the inline config its requests send in `x-gateway-config`.
  config: string | null
  redis: RedisServer | null
  stop: () => Promise<void>
}

// Script calls (EVAL/EVALSHA and their _RO forms) between two INFO commandstats snapshots.
type RedisPhase = {
  requests: number
  scriptCalls: number
  callsPerRequest: number
  // Every command's calls in the phase, commands run inside scripts included (they are no round trips).
  commands: Record<string, number>
}

type RedisFigures = {
  closed: RedisPhase | null
  open: RedisPhase | null
  cpuUsPerRequest: number | null
  peakRssMb: number | null
}

type ModeResult = {
  scenario: ScenarioName
  mode: Mode
  skipped: string | null
  closed: ClosedLoopResult | null
  open: OpenLoopResult | null
  serverPeakRssMb: number | null
  serverCpuUsPerRequest: number | null
  upstreamPeakRssMb: number | null
  upstreamCpuUsPerRequest: number | null
  otherCpuPercent: number | null
  redis: RedisFigures | null
  // Virtual key's budget usage (tokens) read through the Admin API after the mode: proof it was charged.
  budgetUsageAfter: number | null
  log: LogFigures | null
  valid: boolean
  invalidReason: string | null
}

type Comparison = {
  scenario: ScenarioName
  mode: Mode
  rpsRatio: number
  p99DeltaMs: number
  ttfbP50DeltaMs: number | null
  ttfbP99DeltaMs: number | null
  peakRssMb: number | null
  targets: { rps: boolean, p99: boolean, ttfb: boolean | null, rss: boolean | null }
}

/** Gateway req/s over the bare forwarder's, measured in alternating slices so the VM's drift hits both alike. */
type PairedComparison = {
  scenario: ScenarioName
  mode: Mode
  ratios: number[]
  median: number | null
  target: boolean | null
}

// `null` figures against `gateway-full` when that scenario was not run (or skipped).
type LimitsComparison = {
  mode: Mode
  rpsRatioToFull: number | null
  p99DeltaMs: number | null
  ttfbP99DeltaMs: number | null
  redisCallsPerRequest: number | null
  targets: { rps: boolean | null, redisCalls: boolean | null }
}

const children = new Set<ChildProcess>()
const tempDirs = new Set<string>()

const killAll = (signal: NodeJS.Signals): void => {
  stopLoadDrivers()
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
  }
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true })
  tempDirs.clear()
}

process.on('exit', () => killAll('SIGKILL'))
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\nbench: ${signal}, stopping servers\n`)
    killAll('SIGKILL')
    process.exit(130)
  })
}

const log = (msg: string): void => { process.stderr.write(`${msg}\n`) }

const tail = (text: string, lines = 20): string => text.trim().split('\n').slice(-lines).join('\n')

const freePort = (): Promise<number> => new Promise((resolve, reject) => {
  const srv = createServer()
  srv.once('error', reject)
  srv.listen(0, '127.0.0.1', () => {
    const addr = srv.address()
    const port = typeof addr === 'object' && addr !== null ? addr.port : 0
    srv.close(() => resolve(port))
  })
})

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const stopChild = async (child: ChildProcess): Promise<void> => {
  if (child.exitCode !== null || child.signalCode !== null) {
    children.delete(child)
    return
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 3000)
  await exited
  clearTimeout(timer)
  children.delete(child)
}

/**
 * With BENCH_PIN=1, moves every thread of the server under test to CPU 0 (threads it starts later
 * inherit that); everything else was moved off CPU 0 at start. Separates the server's own cost from
 * the scheduler wait it gets when it shares both cores with the load generator and the mock.
 */
const pinServer = (pid: number): void => {
  if (!options.pinServer) return
  const pinned = spawnSync('taskset', ['-a', '-cp', '0', String(pid)], { stdio: 'ignore' })
  if (pinned.status !== 0) throw new Error(`BENCH_PIN=1: taskset could not pin pid ${pid} to CPU 0`)
}

// Our own servers announce their port on stdout; the output is kept small so a pipe is fine.
const spawnWithReadyLine = (script: string, env: Record<string, string>, timeoutMs = 10_000): Promise<{ child: ChildProcess, port: number }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeFlags, script], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    children.add(child)
    let out = ''
    let err = ''
    let settled = false
    const settle = (e: Error | null, port = 0): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (e !== null) {
        void stopChild(child)
        reject(e)
      } else {
        resolve({ child, port })
      }
    }
    const timer = setTimeout(() => settle(new Error(`no READY line within ${timeoutMs} ms; stderr: ${tail(err)}`)), timeoutMs)
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      if (settled) return
      out += d
      const m = /^READY (\d+)$/m.exec(out)
      if (m !== null) settle(null, Number(m[1]))
    })
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { err = (err + d).slice(-20_000) })
    child.once('error', (e) => settle(e))
    child.once('exit', (code, signal) => settle(new Error(`exited (${code ?? signal}) before READY; stderr: ${tail(err)}`)))
  })

const waitForHttp = async (url: string, child: ChildProcess, timeoutMs: number): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  let last = ''
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`exited (${child.exitCode ?? child.signalCode}) before ready`)
    try {
      const res = await request(url, { headersTimeout: 1000, bodyTimeout: 1000 })
      await res.body.dump()
      if (res.statusCode === 200) return
      last = `status ${res.statusCode}`
    } catch (e) {
      last = (e as Error).message
    }
    await sleep(100)
  }
  throw new Error(`not ready within ${timeoutMs} ms (${last})`)
}

// A throwaway redis-server: free port, temp dir, no persistence; killed with the other children.
const startRedis = async (): Promise<RedisServer> => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-redis-'))
  tempDirs.add(dir)
  const port = await freePort()
  const child = spawn('redis-server', [
    '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no',
    '--daemonize', 'no', '--protected-mode', 'yes', '--logfile', ''
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  children.add(child)
  let client: Redis | null = null
  const stop = async (): Promise<void> => {
    client?.disconnect()
    await stopChild(child)
    tempDirs.delete(dir)
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await new Promise<void>((resolve, reject) => {
      let out = ''
      const timer = setTimeout(() => reject(new Error(`redis-server not ready within 10 s: ${tail(out)}`)), 10_000)
      const onData = (d: string): void => {
        out = (out + d).slice(-20_000)
        if (out.includes('Ready to accept connections')) {
          clearTimeout(timer)
          resolve()
        }
      }
      child.stdout!.setEncoding('utf8').on('data', onData)
      child.stderr!.setEncoding('utf8').on('data', onData)
      child.once('error', (e) => { clearTimeout(timer); reject(new Error(`redis-server: ${e.message} (is it on PATH?)`)) })
      child.once('exit', (code, signal) => { clearTimeout(timer); reject(new Error(`redis-server exited (${code ?? signal}): ${tail(out)}`)) })
    })
    const url = `redis://127.0.0.1:${port}`
    client = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true })
    await client.connect()
    if (await client.ping() !== 'PONG') throw new Error('redis-server does not answer PING')
    return { url, pid: child.pid!, client, stop }
  } catch (e) {
    await stop()
    throw e
  }
}

// `cmdstat_<name>:calls=N,...,rejected_calls=R,failed_calls=F`: calls that reached execution plus rejected ones.
const redisCommandCalls = async (client: Redis): Promise<Record<string, number>> => {
  const text = await client.info('commandstats')
  const calls: Record<string, number> = {}
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)(?:.*?rejected_calls=(\d+))?/gm)) {
    calls[m[1]!] = Number(m[2]) + Number(m[3] ?? 0)
  }
  return calls
}

const scriptCommands = ['eval', 'evalsha', 'eval_ro', 'evalsha_ro']

const redisPhase = (before: Record<string, number>, after: Record<string, number>, requests: number): RedisPhase => {
  const commands: Record<string, number> = {}
  for (const [name, n] of Object.entries(after)) {
    const delta = n - (before[name] ?? 0)
    if (delta > 0) commands[name] = delta
  }
  const scriptCalls = scriptCommands.reduce((sum, name) => sum + (commands[name] ?? 0), 0)
  return { requests, scriptCalls, callsPerRequest: requests === 0 ? NaN : scriptCalls / requests, commands }
}

const postJson = async (url: string, headers: Record<string, string>, body: unknown): Promise<Record<string, unknown>> => {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    headersTimeout: 5000,
    bodyTimeout: 5000
  })
  const text = await res.body.text()
  if (res.statusCode >= 300) throw new Error(`POST ${url} → ${res.statusCode}: ${text.slice(0, 300)}`)
  return JSON.parse(text) as Record<string, unknown>
}

// Tolerates both a bare object and a `{ data: {...} }` envelope.
const field = (obj: Record<string, unknown>, name: string): string | null => {
  const direct = obj[name]
  if (typeof direct === 'string') return direct
  const data = obj.data
  if (typeof data === 'object' && data !== null) {
    const nested = (data as Record<string, unknown>)[name]
    if (typeof nested === 'string') return nested
  }
  return null
}

// The log sink's counters from `/metrics` (gw_log_* gauges), `null` when a metric is absent.
const logCounters = async (origin: string): Promise<{ written: number | null, dropped: number | null, journaled: number | null, queued: number | null }> => {
  const res = await request(`${origin}/metrics`, { headersTimeout: 5000, bodyTimeout: 5000 })
  const text = await res.body.text()
  const metric = (name: string): number | null => {
    const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm'))
    return m === null ? null : Number(m[1])
  }
  return {
    written: metric('gw_log_written_records_total'),
    dropped: metric('gw_log_dropped_records_total'),
    journaled: metric('gw_log_journaled_records'),
    queued: metric('gw_log_queue_records')
  }
}

const delta = (after: number | null, before: number | null): number | null =>
  after === null || before === null ? null : after - before

const getJson = async (url: string, headers: Record<string, string>): Promise<Record<string, unknown>> => {
  const res = await request(url, { headers, headersTimeout: 5000, bodyTimeout: 5000 })
  const text = await res.body.text()
  if (res.statusCode >= 300) throw new Error(`GET ${url} → ${res.statusCode}: ${text.slice(0, 300)}`)
  return JSON.parse(text) as Record<string, unknown>
}

/**
 * The inline config `gateway-config` and `gateway-cache-hit` send: one target at the mock, with the
 * provider key in the config (as the plain scenarios send it in headers); `gateway-cache-hit` caches
 * it, so every request after the first is a hit. `null` for the other kinds.
 */
const inlineConfigFor = (kind: GatewayKind, mockOrigin: string): string | null => {
  const target = { provider: 'openai', api_key: 'sk-bench', custom_host: `${mockOrigin}/v1` }
  if (kind === 'config') return JSON.stringify(target)
  if (kind === 'cache-hit') return JSON.stringify({ ...target, cache: { mode: 'simple', max_age: 3600 } })
  return null
}

const startGateway = async (mockOrigin: string, kind: GatewayKind, clickHouseUrl: string | null): Promise<Server> => {
  if (!existsSync(gatewayMain)) throw new Error(`${gatewayMain} not found (gateway not built yet)`)
  const full = kind !== 'forward'
  const redis = kind === 'limits' ? await startRedis() : null
  const dir = mkdtempSync(join(tmpdir(), 'bench-gateway-'))
  tempDirs.add(dir)
  const overlayPath = join(dir, 'overlay.json')
  const overlay = kind === 'forward'
    ? {
        plugins: Object.fromEntries(
          ['auth', 'scope-check', 'prompt-render', 'routing', 'virtual-key', 'rate-limit', 'budget', 'cache', 'admin-api', 'log', 'audit'].map((name) => [name, { enabled: false }])
        )
      }
    : kind === 'full-nolog' ? { plugins: { log: { enabled: false } } } : {}
  const logs = kind !== 'forward' && kind !== 'full-nolog'
  // Each gateway logs to its own ClickHouse database (the URL path names it).
  const logStore = !logs ? null : clickHouseUrl === null ? 'duckdb' : 'clickhouse'
  const clickHouseEnv = logStore === 'clickhouse' ? { CLICKHOUSE_URL: `${clickHouseUrl}/bench_${kind.replace(/-/g, '_')}_${randomBytes(4).toString('hex')}` } : {}
  writeFileSync(overlayPath, JSON.stringify(overlay))
  const dataDir = join(dir, 'data')
  mkdirSync(dataDir)
  const logPath = join(dir, 'gateway.log')
  // The gateway may log per request: a file costs the load driver nothing, a pipe would.
  const logFd = openSync(logPath, 'a')
  const port = await freePort()
  const child = spawn(process.execPath, [...nodeFlags, gatewayMain], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      GATEWAY_DATA_DIR: dataDir,
      GATEWAY_CONFIG: overlayPath,
      GATEWAY_BOOTSTRAP_ADMIN_KEY: adminKey,
      GATEWAY_ALLOWED_CUSTOM_HOSTS: '127.0.0.1',
      ...(redis === null ? {} : { REDIS_URL: redis.url }),
      ...clickHouseEnv
    },
    stdio: ['ignore', logFd, logFd]
  })
  closeSync(logFd)
  children.add(child)
  if (child.pid !== undefined) pinServer(child.pid)
  const origin = `http://127.0.0.1:${port}`
  const cleanup = async (): Promise<void> => {
    await stopChild(child)
    tempDirs.delete(dir)
    rmSync(dir, { recursive: true, force: true })
    await redis?.stop()
  }
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject)
      child.once('spawn', () => resolve())
    })
    await waitForHttp(`${origin}/readyz`, child, 30_000)
    let apiKey: string | null = null
    let virtualKey: string | null = null
    let promptSlug: string | null = null
    if (full) {
      const limited = kind === 'limits'
      const admin = { 'x-gateway-api-key': adminKey }
      const rateLimits = limited ? { rate_limits: [unreachableRateLimit] } : {}
      const ws = await postJson(`${origin}/v1/admin/workspaces`, admin, { name: 'bench', ...rateLimits })
      const workspaceId = field(ws, 'id')
      if (workspaceId === null) throw new Error(`workspace response has no id: ${JSON.stringify(ws).slice(0, 300)}`)
      const key = await postJson(`${origin}/v1/api-keys/workspace/service`, admin, {
        name: 'bench',
        workspace_id: workspaceId,
        scopes: ['completions.write'],
        ...rateLimits
      })
      apiKey = field(key, 'key')
      if (apiKey === null) throw new Error(`api key response has no key: ${JSON.stringify(key).slice(0, 300)}`)
      if (limited) {
        const vk = await postJson(`${origin}/v1/virtual-keys`, admin, {
          name: 'bench',
          provider: 'openai',
          key: 'sk-bench-virtual-key',
          custom_host: `${mockOrigin}/v1`,
          workspace_id: workspaceId,
          rate_limits: [unreachableRateLimit],
          usage_limits: unreachableTokenBudget
        })
        virtualKey = field(vk, 'slug')
        if (virtualKey === null) throw new Error(`virtual key response has no slug: ${JSON.stringify(vk).slice(0, 300)}`)
        // A run whose limits silently fell back to the in-process limiter would not measure Redis.
        const ready = await getJson(`${origin}/readyz`, {})
        const checks = JSON.stringify(ready.checks ?? ready)
        if (!/redis-rate-limiter/.test(checks)) throw new Error(`gateway is not on the Redis rate limiter: /readyz ${checks.slice(0, 300)}`)
      }
      if (kind === 'prompt') {
        // The prompt's virtual key holds provider, custom host and provider key; requests name only the prompt.
        const vk = await postJson(`${origin}/v1/virtual-keys`, admin, {
          name: 'bench-prompt',
          provider: 'openai',
          key: 'sk-bench-virtual-key',
          custom_host: `${mockOrigin}/v1`,
          workspace_id: workspaceId
        })
        const vkSlug = field(vk, 'slug')
        if (vkSlug === null) throw new Error(`virtual key response has no slug: ${JSON.stringify(vk).slice(0, 300)}`)
        const prompt = await postJson(`${origin}/v1/prompts`, admin, {
          workspace_id: workspaceId,
          name: 'bench',
          string: benchPromptTemplate(),
          parameters: {},
          virtual_key: vkSlug,
          model: 'gpt-4o-mini'
        })
        promptSlug = field(prompt, 'slug')
        if (promptSlug === null) throw new Error(`prompt response has no slug: ${JSON.stringify(prompt).slice(0, 300)}`)
      }
    }
    const config = inlineConfigFor(kind, mockOrigin)
    return { origin, logStore, pid: child.pid!, apiKey, virtualKey, promptSlug, config, redis, stop: cleanup }
  } catch (e) {
    let logTail = ''
    try { logTail = tail(readFileSync(logPath, 'utf8')) } catch { logTail = '' }
    await cleanup()
    throw new Error(`${(e as Error).message}${logTail ? `\n--- gateway log tail ---\n${logTail}` : ''}`)
  }
}

const requestSpec = (server: Server, mockOrigin: string, mode: Mode): RequestSpec => {
  // Every scenario gets the same headers so request sizes match; only the full chain needs a key, and
  // `gateway-limits` names its virtual key (which holds provider, custom host and provider key) instead.
  let headers: Record<string, string> = server.virtualKey === null
    ? {
        'content-type': 'application/json',
        'x-gateway-provider': 'openai',
        'x-gateway-custom-host': `${mockOrigin}/v1`,
        authorization: 'Bearer sk-bench'
      }
    : {
        'content-type': 'application/json',
        'x-gateway-virtual-key': server.virtualKey,
        authorization: 'Bearer sk-bench'
      }
  const origin = server.origin
  if (server.apiKey !== null) headers['x-gateway-api-key'] = server.apiKey
  if (server.promptSlug !== null) {
    // The prompt decides provider and host (selection headers next to it are refused with 400).
    const promptHeaders: Record<string, string> = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' }
    if (server.apiKey !== null) promptHeaders['x-gateway-api-key'] = server.apiKey
    const variables = JSON.stringify(BENCH_PROMPT_VARIABLES)
    const promptBody = mode === 'stream' ? `{"variables":${variables},"stream":true}` : `{"variables":${variables}}`
    return { origin, path: `/v1/prompts/${server.promptSlug}/completions`, headers: promptHeaders, body: promptBody }
  }
  if (server.config !== null) {
    // The config names provider, host and key; selection headers next to it are refused with 400.
    const configHeaders: Record<string, string> = { 'content-type': 'application/json', authorization: 'Bearer sk-bench', 'x-gateway-config': server.config }
    if (server.apiKey !== null) configHeaders['x-gateway-api-key'] = server.apiKey
    headers = configHeaders
  }
  const body = mode === 'stream'
    ? '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello"}],"stream":true}'
    : '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello"}]}'
  return { origin, path: '/v1/chat/completions', headers, body }
}

const smokeCheck = async (spec: RequestSpec, mode: Mode): Promise<string | null> => {
  try {
    const res = await request(`${spec.origin}${spec.path}`, {
      method: 'POST',
      headers: spec.headers,
      body: spec.body,
      headersTimeout: 5000,
      bodyTimeout: 5000
    })
    const text = await res.body.text()
    if (res.statusCode !== 200) return `smoke request got ${res.statusCode}: ${text.slice(0, 300)}`
    const expected = mode === 'stream' ? 'data: [DONE]' : '"chat.completion"'
    if (!text.includes(expected)) return `smoke response lacks ${expected}: ${text.slice(0, 300)}`
    return null
  } catch (e) {
    return `smoke request failed: ${(e as Error).message}`
  }
}

const procStatusKb = (pid: number, key: string): number | null => {
  try {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m === null ? null : Number(m[1])
  } catch {
    return null
  }
}

// Writing 5 to clear_refs resets VmHWM, so each mode's peak is its own and not the previous mode's.
const resetPeakRss = (pid: number): void => {
  try { writeFileSync(`/proc/${pid}/clear_refs`, '5') } catch { /* older kernels or no permission: the peak then covers the process lifetime */ }
}

const peakRssMb = (pid: number): number | null => {
  const kb = procStatusKb(pid, 'VmHWM')
  return kb === null ? null : kb / 1024
}

const clockTicks = 100
// utime + stime (and, with children, those of reaped children such as wrk) in clock ticks.
const procTicks = (pid: number | 'self', withChildren = false): number | null => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the parenthesised command name, which may itself contain spaces.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
    return f[11]! + f[12]! + (withChildren ? f[13]! + f[14]! : 0)
  } catch {
    return null
  }
}

const cpuMs = (pid: number): number | null => {
  const ticks = procTicks(pid)
  return ticks === null ? null : ticks * 1000 / clockTicks
}

const cpuTotals = (): { busy: number, total: number } => {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
  const total = fields.reduce((a, b) => a + b, 0)
  // idle + iowait
  return { busy: total - (fields[3] ?? 0) - (fields[4] ?? 0), total }
}

// Other work on the box (builds, test runs) skews every figure; measure it so the report can say so.
const machineBusyPercent = async (ms: number): Promise<number | null> => {
  try {
    const a = cpuTotals()
    await sleep(ms)
    const b = cpuTotals()
    return b.total === a.total ? 0 : (b.busy - a.busy) * 100 / (b.total - a.total)
  } catch {
    return null
  }
}

type CpuSnapshot = { machine: { busy: number, total: number }, own: number }

const cpuSnapshot = (pids: number[]): CpuSnapshot | null => {
  try {
    let own = procTicks('self', true) ?? 0
    for (const pid of pids) own += procTicks(pid) ?? 0
    return { machine: cpuTotals(), own }
  } catch {
    return null
  }
}

// Share of all cores used by processes that are not part of this run during the measurement.
const otherCpuPercent = (a: CpuSnapshot | null, b: CpuSnapshot | null): number | null => {
  if (a === null || b === null || b.machine.total === a.machine.total) return null
  const foreign = (b.machine.busy - a.machine.busy) - (b.own - a.own)
  return Math.max(0, foreign * 100 / (b.machine.total - a.machine.total))
}

const errorRatio = (errors: number, total: number): number => total === 0 ? 1 : errors / total

const runMode = async (scenario: ScenarioName, mode: Mode, server: Server, mockOrigin: string, mockPid: number): Promise<ModeResult> => {
  const result: ModeResult = {
    scenario,
    mode,
    skipped: null,
    closed: null,
    open: null,
    serverPeakRssMb: null,
    serverCpuUsPerRequest: null,
    upstreamPeakRssMb: null,
    upstreamCpuUsPerRequest: null,
    otherCpuPercent: null,
    redis: null,
    budgetUsageAfter: null,
    log: null,
    valid: false,
    invalidReason: null
  }
  const spec = requestSpec(server, mockOrigin, mode)
  const smoke = await smokeCheck(spec, mode)
  if (smoke !== null) {
    result.skipped = smoke
    log(`  ${scenario}/${mode}: SKIPPED — ${smoke}`)
    return result
  }
  const upstreamSeparate = server.pid !== mockPid
  resetPeakRss(server.pid)
  if (upstreamSeparate) resetPeakRss(mockPid)
  const ownPids = upstreamSeparate ? [server.pid, mockPid] : [server.pid]
  const redis = server.redis
  if (redis !== null) {
    ownPids.push(redis.pid)
    resetPeakRss(redis.pid)
    result.redis = { closed: null, open: null, cpuUsPerRequest: null, peakRssMb: null }
  }
  const cpuStart = cpuSnapshot(ownPids)
  const logBefore = server.logStore === null ? null : await logCounters(server.origin)
  // Redis script calls are counted over the measured runs only (warm-ups excluded). The end snapshot
  // waits a moment so that the last replies' settlements (sent after the reply) are in it.
  let redisBefore: Record<string, number> = {}
  let redisCpuBefore: number | null = null
  const redisMeasureStart = redis === null
    ? undefined
    : async (): Promise<void> => {
        redisBefore = await redisCommandCalls(redis.client)
        redisCpuBefore = cpuMs(redis.pid)
      }
  const redisMeasureEnd = async (requests: number): Promise<{ phase: RedisPhase, cpuMs: number | null }> => {
    await sleep(250)
    const phase = redisPhase(redisBefore, await redisCommandCalls(redis!.client), requests)
    const cpuAfter = cpuMs(redis!.pid)
    return { phase, cpuMs: cpuAfter === null || redisCpuBefore === null ? null : cpuAfter - redisCpuBefore }
  }

  log(`  ${scenario}/${mode}: closed loop, ${options.connections} connections, ${options.warmupS}s warm-up + ${options.durationS}s`)
  const cpuServerBefore = cpuMs(server.pid)
  const cpuMockBefore = upstreamSeparate ? cpuMs(mockPid) : null
  // CPU is sampled around the whole call, so warm-up requests are in it too; the count is estimated the same way.
  const runClosedLoop = findWrk() !== null && !options.forceNodeDriver ? runWrk : runNodeClosedLoop
  result.closed = await runClosedLoop(spec, {
    connections: options.connections,
    durationS: options.durationS,
    warmupS: options.warmupS,
    threads: options.wrkThreads,
    onMeasureStart: redisMeasureStart
  })
  if (redis !== null) {
    const end = await redisMeasureEnd(result.closed.requests)
    result.redis!.closed = end.phase
    if (end.cpuMs !== null && result.closed.requests > 0) result.redis!.cpuUsPerRequest = end.cpuMs * 1000 / result.closed.requests
  }
  const cpuServerAfter = cpuMs(server.pid)
  const cpuMockAfter = upstreamSeparate ? cpuMs(mockPid) : null
  const approxRequests = result.closed.rps * (options.durationS + options.warmupS)
  if (cpuServerBefore !== null && cpuServerAfter !== null && approxRequests > 0) {
    result.serverCpuUsPerRequest = (cpuServerAfter - cpuServerBefore) * 1000 / approxRequests
  }
  if (cpuMockBefore !== null && cpuMockAfter !== null && approxRequests > 0) {
    result.upstreamCpuUsPerRequest = (cpuMockAfter - cpuMockBefore) * 1000 / approxRequests
  }

  log(`  ${scenario}/${mode}: open loop, ${options.rate} req/s, 1s warm-up + ${options.durationS}s`)
  result.open = await runOpenLoop(spec, { rate: options.rate, durationS: options.durationS, warmupS: Math.min(1, options.warmupS), onMeasureStart: redisMeasureStart })
  if (redis !== null) {
    result.redis!.open = (await redisMeasureEnd(result.open.completed)).phase
    result.redis!.peakRssMb = peakRssMb(redis.pid)
  }
  if (server.virtualKey !== null) {
    try {
      const vk = await getJson(`${server.origin}/v1/virtual-keys/${server.virtualKey}`, { 'x-gateway-api-key': adminKey })
      const usage = (vk.usage_limits as Record<string, unknown> | null | undefined)?.current_usage
      result.budgetUsageAfter = typeof usage === 'number' ? usage : null
    } catch (e) {
      log(`  ${scenario}/${mode}: could not read the virtual key's budget usage: ${(e as Error).message}`)
    }
  }

  result.otherCpuPercent = otherCpuPercent(cpuStart, cpuSnapshot(ownPids))
  if (result.otherCpuPercent !== null && result.otherCpuPercent > 10) {
    log(`  ${scenario}/${mode}: WARNING other processes used ${result.otherCpuPercent.toFixed(0)}% of the CPUs meanwhile — figures skewed`)
  }
  if (server.logStore !== null && logBefore !== null) {
    // Records are written in batches (every second by default): wait until the queue is empty.
    let after = await logCounters(server.origin)
    for (let i = 0; i < 50 && (after.queued ?? 0) > 0; i++) {
      await sleep(200)
      after = await logCounters(server.origin)
    }
    result.log = {
      store: server.logStore,
      written: delta(after.written, logBefore.written),
      dropped: delta(after.dropped, logBefore.dropped),
      journaled: after.journaled
    }
  }
  result.serverPeakRssMb = peakRssMb(server.pid)
  if (upstreamSeparate) result.upstreamPeakRssMb = peakRssMb(mockPid)
  // Errors include every status >= 400, so refusals (429 rate limit, 412 budget) count here.
  const reasons: string[] = []
  if (errorRatio(result.closed.errors, result.closed.requests) > maxErrorRatio ||
    errorRatio(result.open.errors, result.open.scheduled) > maxErrorRatio) {
    reasons.push(`error rate above ${maxErrorRatio * 100}% (status >= 400 included: 429/412 refusals count)`)
  }
  if (result.redis !== null) {
    // Each request must at least run the rate-limit script; fewer calls mean the limits were not applied.
    for (const [phase, figures] of [['closed', result.redis.closed], ['open', result.redis.open]] as const) {
      if (figures === null || !(figures.callsPerRequest >= 0.99)) {
        reasons.push(`${phase} loop: ${fmt(figures?.callsPerRequest)} Redis script calls per request, limits not applied`)
      }
    }
  }
  result.valid = reasons.length === 0
  result.invalidReason = reasons.length === 0 ? null : reasons.join('; ')
  if (!result.valid) log(`  ${scenario}/${mode}: WARNING ${result.invalidReason} — figures flagged invalid`)
  return result
}

const compare = (bare: ModeResult, other: ModeResult): Comparison | null => {
  if (bare.closed === null || bare.open === null || other.closed === null || other.open === null) return null
  const rpsRatio = other.closed.rps / bare.closed.rps
  const p99DeltaMs = other.open.latency.p99Ms - bare.open.latency.p99Ms
  const stream = other.mode === 'stream'
  const ttfbP50DeltaMs = stream ? other.open.ttfb.p50Ms - bare.open.ttfb.p50Ms : null
  const ttfbP99DeltaMs = stream ? other.open.ttfb.p99Ms - bare.open.ttfb.p99Ms : null
  return {
    scenario: other.scenario,
    mode: other.mode,
    rpsRatio,
    p99DeltaMs,
    ttfbP50DeltaMs,
    ttfbP99DeltaMs,
    peakRssMb: other.serverPeakRssMb,
    targets: {
      rps: rpsRatio >= foundationTargets.rpsRatioToBare,
      p99: p99DeltaMs <= foundationTargets.p99DeltaMs,
      ttfb: ttfbP99DeltaMs === null ? null : ttfbP99DeltaMs <= foundationTargets.ttfbP99DeltaMs,
      rss: other.serverPeakRssMb === null ? null : other.serverPeakRssMb < foundationTargets.peakRssMb
    }
  }
}

const fmt = (n: number | null | undefined, digits = 2): string =>
  n === null || n === undefined || Number.isNaN(n) ? '-' : n.toFixed(digits)

const table = (header: string[], rows: string[][]): string => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]): string => cells.map((c, i) => i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)).join('  ')
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

const resultTable = (results: ModeResult[]): string => {
  const rate = options.rate
  const header = ['scenario', 'mode', `rps@${options.connections}c`, 'p50 ms', 'p99 ms', `p50@${rate}/s`, `p99@${rate}/s`, `max@${rate}/s`,
    'ttfb p50', 'ttfb p99', 'achieved/s', 'errors', 'peak RSS MB', 'cpu us/req', 'other cpu%', 'note']
  const rows = results.map((r) => {
    if (r.skipped !== null) return [r.scenario, r.mode, ...Array<string>(13).fill('-'), 'skipped']
    const c = r.closed!
    const o = r.open!
    return [
      r.scenario, r.mode, fmt(c.rps, 0), fmt(c.latency.p50Ms), fmt(c.latency.p99Ms),
      fmt(o.latency.p50Ms), fmt(o.latency.p99Ms), fmt(o.latency.maxMs),
      r.mode === 'stream' ? fmt(o.ttfb.p50Ms) : '-', r.mode === 'stream' ? fmt(o.ttfb.p99Ms) : '-',
      fmt(o.achievedRps, 0), `${c.errors}/${o.errors}`, fmt(r.serverPeakRssMb, 1), fmt(r.serverCpuUsPerRequest, 0),
      fmt(r.otherCpuPercent, 0), r.valid ? '' : `INVALID: ${r.invalidReason ?? ''}`
    ]
  })
  return table(header, rows)
}

const mark = (ok: boolean | null): string => ok === null ? '' : ok ? ' ok' : ' FAIL'

const comparisonTable = (comparisons: Comparison[]): string => {
  const header = ['vs bare', 'mode', 'rps ratio (>=0.70)', 'p99 delta ms (<=1)', 'ttfb p50 delta ms', 'ttfb p99 delta ms (<=1)', 'peak RSS MB (<200)']
  const rows = comparisons.map((c) => [
    c.scenario, c.mode,
    `${fmt(c.rpsRatio)}${mark(c.targets.rps)}`,
    `${c.p99DeltaMs >= 0 ? '+' : ''}${fmt(c.p99DeltaMs)}${mark(c.targets.p99)}`,
    c.ttfbP50DeltaMs === null ? '-' : `${c.ttfbP50DeltaMs >= 0 ? '+' : ''}${fmt(c.ttfbP50DeltaMs)}`,
    c.ttfbP99DeltaMs === null ? '-' : `${c.ttfbP99DeltaMs >= 0 ? '+' : ''}${fmt(c.ttfbP99DeltaMs)}${mark(c.targets.ttfb)}`,
    `${fmt(c.peakRssMb, 1)}${mark(c.targets.rss)}`
  ])
  return table(header, rows)
}

const compareToFull = (fullResult: ModeResult | undefined, limits: ModeResult): LimitsComparison | null => {
  if (limits.closed === null || limits.open === null) return null
  const full = fullResult?.closed != null && fullResult.open !== null ? { closed: fullResult.closed, open: fullResult.open } : null
  const rpsRatioToFull = full === null ? null : limits.closed.rps / full.closed.rps
  const ttfbP99DeltaMs = full === null || limits.mode !== 'stream' ? null : limits.open.ttfb.p99Ms - full.open.ttfb.p99Ms
  // The open loop's count is exact (its warm-up has settled before the first snapshot and every measured
  // request before the last); the closed loop's is off by the requests in flight at either edge.
  const redisCallsPerRequest = limits.redis?.open?.callsPerRequest ?? limits.redis?.closed?.callsPerRequest ?? null
  return {
    mode: limits.mode,
    rpsRatioToFull,
    p99DeltaMs: full === null ? null : limits.open.latency.p99Ms - full.open.latency.p99Ms,
    ttfbP99DeltaMs,
    redisCallsPerRequest,
    targets: {
      rps: rpsRatioToFull === null ? null : rpsRatioToFull >= limitsTargets.rpsRatioToFull,
      redisCalls: redisCallsPerRequest === null ? null : redisCallsPerRequest <= limitsTargets.redisCallsPerRequest
    }
  }
}

const limitsTable = (rows: LimitsComparison[], results: ModeResult[]): string => {
  const header = ['limits vs full', 'mode', `rps ratio (>=${fmt(limitsTargets.rpsRatioToFull)})`, 'p99 delta ms', 'ttfb p99 delta ms',
    `redis calls/req (<=${limitsTargets.redisCallsPerRequest})`, 'closed-loop calls/req', 'redis cpu us/req', 'budget used']
  return table(header, rows.map((c) => {
    const r = results.find((x) => x.scenario === 'gateway-limits' && x.mode === c.mode)
    return [
      'gateway-limits', c.mode,
      `${fmt(c.rpsRatioToFull)}${mark(c.targets.rps)}`,
      c.p99DeltaMs === null ? '-' : `${c.p99DeltaMs >= 0 ? '+' : ''}${fmt(c.p99DeltaMs)}`,
      c.ttfbP99DeltaMs === null ? '-' : `${c.ttfbP99DeltaMs >= 0 ? '+' : ''}${fmt(c.ttfbP99DeltaMs)}`,
      `${fmt(c.redisCallsPerRequest)}${mark(c.targets.redisCalls)}`,
      fmt(r?.redis?.closed?.callsPerRequest),
      fmt(r?.redis?.cpuUsPerRequest, 0),
      r?.budgetUsageAfter === null || r?.budgetUsageAfter === undefined ? '-' : String(r.budgetUsageAfter)
    ]
  }))
}

const loggingTable = (rows: LoggingComparison[], results: ModeResult[]): string => {
  const header = ['full vs full-nolog', 'mode', 'log store', 'rps ratio', `logging cost % (<=${maxLoggingCostPercent})`, 'records written', 'dropped', 'journaled']
  return table(header, rows.map((c) => {
    const r = results.find((x) => x.scenario === 'gateway-full' && x.mode === c.mode)
    return [
      'gateway-full', c.mode, r?.log?.store ?? '-', fmt(c.rpsRatio), `${fmt(c.costPercent, 1)}${mark(c.target)}`,
      String(r?.log?.written ?? '-'), String(r?.log?.dropped ?? '-'), String(r?.log?.journaled ?? '-')
    ]
  }))
}

const allScenarios: ScenarioName[] = ['mock', 'bare', 'gateway-forward', 'gateway-full-nolog', 'gateway-full', 'gateway-prompt', 'gateway-config', 'gateway-cache-hit', 'gateway-limits']
const aliases: Record<string, ScenarioName> = {
  forward: 'gateway-forward',
  nolog: 'gateway-full-nolog',
  'full-nolog': 'gateway-full-nolog',
  full: 'gateway-full',
  gateway: 'gateway-full',
  prompt: 'gateway-prompt',
  config: 'gateway-config',
  'cache-hit': 'gateway-cache-hit',
  cache: 'gateway-cache-hit',
  limits: 'gateway-limits'
}
const gatewayKinds: Partial<Record<ScenarioName, GatewayKind>> = {
  'gateway-forward': 'forward',
  'gateway-full-nolog': 'full-nolog',
  'gateway-full': 'full',
  'gateway-prompt': 'prompt',
  'gateway-config': 'config',
  'gateway-cache-hit': 'cache-hit',
  'gateway-limits': 'limits'
}
// Scenarios compared with `gateway-full` on server CPU per request, side by side (see `pairedVsFull`).
const versusFull: ReadonlyArray<{ scenario: ScenarioName, kind: GatewayKind }> = [
  { scenario: 'gateway-prompt', kind: 'prompt' },
  { scenario: 'gateway-config', kind: 'config' },
  { scenario: 'gateway-cache-hit', kind: 'cache-hit' }
]

// Where the logging scenarios send their records: BENCH_CLICKHOUSE_URL, else a throwaway
// clickhouse-server, else (BENCH_LOG_STORE=duckdb, or no clickhouse-server) the embedded DuckDB file.
const startLogStore = async (selected: readonly ScenarioName[]): Promise<{ url: string, stop: () => Promise<void> } | null> => {
  if (!selected.some((s) => s === 'gateway-full' || s === 'gateway-prompt' || s === 'gateway-config' || s === 'gateway-cache-hit' || s === 'gateway-limits')) return null
  if (process.env.BENCH_LOG_STORE === 'duckdb') return null
  const external = process.env.BENCH_CLICKHOUSE_URL
  if (external !== undefined && external !== '') return { url: external.replace(/\/+$/, ''), stop: async () => {} }
  try {
    const server = await startClickHouse()
    return { url: server.url, stop: server.stop }
  } catch (e) {
    log(`bench: WARNING no ClickHouse (${(e as Error).message.split('\n')[0]}): logging scenarios use the embedded DuckDB sink`)
    return null
  }
}

const median = (values: readonly number[]): number | null => {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/**
 * The req/s ratio to the bare forwarder with both servers up at once, measured in alternating
 * closed-loop slices (bare first in even rounds, gateway first in odd ones). On a shared VM whose
 * speed drifts by tens of percent over minutes, scenarios measured minutes apart are not comparable;
 * slices seconds apart are. One ratio per round; the table shows their median and range.
 */
const pairedRatios = async (bare: Server, gateway: Server, scenario: ScenarioName, mode: Mode, mockOrigin: string): Promise<PairedComparison> => {
  const specs = { bare: requestSpec(bare, mockOrigin, mode), gateway: requestSpec(gateway, mockOrigin, mode) }
  const runClosedLoop = findWrk() !== null && !options.forceNodeDriver ? runWrk : runNodeClosedLoop
  const slice = async (spec: RequestSpec): Promise<number> =>
    (await runClosedLoop(spec, { connections: options.connections, durationS: options.pairedSliceS, warmupS: 1, threads: options.wrkThreads })).rps
  const ratios: number[] = []
  for (let round = 0; round < options.pairedRounds; round++) {
    let bareRps: number
    let gatewayRps: number
    if (round % 2 === 0) {
      bareRps = await slice(specs.bare)
      gatewayRps = await slice(specs.gateway)
    } else {
      gatewayRps = await slice(specs.gateway)
      bareRps = await slice(specs.bare)
    }
    if (bareRps > 0) ratios.push(gatewayRps / bareRps)
  }
  const mid = median(ratios)
  return { scenario, mode, ratios, median: mid, target: mid === null ? null : mid >= foundationTargets.rpsRatioToBare }
}

/** A scenario against `gateway-full`: server CPU per request and req/s, both running, alternating slices. */
type FullComparison = {
  scenario: ScenarioName
  mode: Mode
  // From the main runs (minutes apart): the scenario's cpu us/req over full's.
  cpuRatioMain: number | null
  rounds: Array<{ fullRps: number, otherRps: number, fullCpuUs: number | null, otherCpuUs: number | null }>
  cpuRatioMedian: number | null
  // Median of the per-round differences in server CPU per request (scenario minus full), µs.
  cpuDeltaMedianUs: number | null
  rpsRatioMedian: number | null
  // Against the scenario's own target (`targetOf`).
  target: boolean | null
}

/** Each scenario's target against `gateway-full`, as text and as a check. */
const targetOf = (scenario: ScenarioName): { text: string, met: (ratio: number | null, deltaUs: number | null) => boolean | null } => {
  if (scenario === 'gateway-config') {
    return { text: `cpu delta <= ${configTargets.cpuDeltaUs} us`, met: (_ratio, delta) => (delta === null ? null : delta <= configTargets.cpuDeltaUs) }
  }
  if (scenario === 'gateway-cache-hit') {
    return { text: `cpu ratio < ${fmt(configTargets.cacheHitCpuRatio)}`, met: (ratio) => (ratio === null ? null : ratio < configTargets.cacheHitCpuRatio) }
  }
  return { text: `cpu ratio <= ${fmt(promptTargets.cpuRatioToFull)}`, met: (ratio) => (ratio === null ? null : ratio <= promptTargets.cpuRatioToFull) }
}

/**
 * Server CPU per request of a scenario and `gateway-full` in alternating closed-loop slices (full
 * first in even rounds), so the VM's drift hits both alike. CPU is the server process's user +
 * system time over the slice (its 1 s warm-up included), per request at the slice's rate.
 */
const pairedVsFull = async (full: Server, other: Server, scenario: ScenarioName, mode: Mode, mockOrigin: string, cpuRatioMain: number | null): Promise<FullComparison> => {
  const runClosedLoop = findWrk() !== null && !options.forceNodeDriver ? runWrk : runNodeClosedLoop
  const slice = async (server: Server): Promise<{ rps: number, cpuUs: number | null }> => {
    const before = cpuMs(server.pid)
    const result = await runClosedLoop(requestSpec(server, mockOrigin, mode), { connections: options.connections, durationS: options.pairedSliceS, warmupS: 1, threads: options.wrkThreads })
    const after = cpuMs(server.pid)
    const requests = result.rps * (options.pairedSliceS + 1)
    return { rps: result.rps, cpuUs: before === null || after === null || requests <= 0 ? null : (after - before) * 1000 / requests }
  }
  const rounds: FullComparison['rounds'] = []
  for (let round = 0; round < options.pairedRounds; round++) {
    let f: { rps: number, cpuUs: number | null }
    let o: { rps: number, cpuUs: number | null }
    if (round % 2 === 0) {
      f = await slice(full)
      o = await slice(other)
    } else {
      o = await slice(other)
      f = await slice(full)
    }
    rounds.push({ fullRps: f.rps, otherRps: o.rps, fullCpuUs: f.cpuUs, otherCpuUs: o.cpuUs })
  }
  const measured = rounds.filter((r) => r.fullCpuUs !== null && r.otherCpuUs !== null && r.fullCpuUs > 0)
  const cpuRatioMedian = median(measured.map((r) => r.otherCpuUs! / r.fullCpuUs!))
  const cpuDeltaMedianUs = median(measured.map((r) => r.otherCpuUs! - r.fullCpuUs!))
  const rpsRatios = rounds.filter((r) => r.fullRps > 0).map((r) => r.otherRps / r.fullRps)
  return { scenario, mode, cpuRatioMain, rounds, cpuRatioMedian, cpuDeltaMedianUs, rpsRatioMedian: median(rpsRatios), target: targetOf(scenario).met(cpuRatioMedian, cpuDeltaMedianUs) }
}

const versusFullTable = (rows: FullComparison[]): string => {
  const header = ['vs full', 'mode', 'rounds', 'cpu/req ratio median', 'min', 'max', 'cpu delta us median', 'target', 'rps ratio median', 'cpu/req ratio, main runs']
  return table(header, rows.map((r) => {
    const ratios = r.rounds.filter((x) => x.fullCpuUs !== null && x.otherCpuUs !== null && x.fullCpuUs > 0).map((x) => x.otherCpuUs! / x.fullCpuUs!)
    return [
      r.scenario, r.mode, String(r.rounds.length), fmt(r.cpuRatioMedian),
      fmt(ratios.length === 0 ? null : Math.min(...ratios)), fmt(ratios.length === 0 ? null : Math.max(...ratios)),
      r.cpuDeltaMedianUs === null ? '-' : r.cpuDeltaMedianUs.toFixed(1), `${targetOf(r.scenario).text}${mark(r.target)}`,
      fmt(r.rpsRatioMedian), fmt(r.cpuRatioMain)
    ]
  }))
}

const pairedTable = (rows: PairedComparison[]): string => {
  const header = ['paired vs bare', 'mode', 'rounds', 'rps ratio median (>=0.70)', 'min', 'max']
  return table(header, rows.map((r) => [
    r.scenario, r.mode, String(r.ratios.length), `${fmt(r.median)}${mark(r.target)}`,
    fmt(r.ratios.length === 0 ? null : Math.min(...r.ratios)), fmt(r.ratios.length === 0 ? null : Math.max(...r.ratios))
  ]))
}

const main = async (): Promise<void> => {
  const startedAt = new Date()
  const selected = options.scenarios.length === 0
    ? allScenarios
    : allScenarios.filter((s) => options.scenarios.some((f) => f === s || aliases[f] === s))
  if (selected.length === 0) throw new Error(`BENCH_SCENARIOS='${options.scenarios.join(',')}' matches none of ${allScenarios.join(', ')}`)
  const modes = options.modes.filter((m): m is Mode => m === 'json' || m === 'stream')
  const wrk = findWrk()
  const closedDriver = wrk !== null && !options.forceNodeDriver
    ? `wrk (${wrk}, ${options.wrkThreads} thread)`
    : `node/undici closed loop (${wrk === null ? 'wrk not found' : 'BENCH_CLOSED_DRIVER=node'})`
  log(`bench: closed-loop driver: ${closedDriver}; open-loop driver: node/undici at ${options.rate} req/s`)
  log(`bench: scenarios ${selected.join(', ')}; modes ${modes.join(', ')}; ${cpus().length} CPUs${options.pinServer ? '' : ' shared by driver, servers and mock'}`)
  if (options.pinServer) {
    if (cpus().length < 2) throw new Error('BENCH_PIN=1 needs at least 2 CPUs')
    const others = `1-${cpus().length - 1}`
    if (spawnSync('taskset', ['-a', '-cp', others, String(process.pid)], { stdio: 'ignore' }).status !== 0) throw new Error('BENCH_PIN=1 needs taskset (util-linux)')
    log(`bench: BENCH_PIN=1: the server under test runs on CPU 0; drivers, mock, Redis and ClickHouse on CPUs ${others}`)
  }

  const busyBefore = await machineBusyPercent(1000)
  const loadBefore = loadavg()
  if (busyBefore !== null && busyBefore > 15) {
    log(`bench: WARNING the machine is ${busyBefore.toFixed(0)}% busy before the run (load ${loadBefore.map((l) => l.toFixed(2)).join(' ')}): figures will be skewed`)
  }

  const mock = await spawnWithReadyLine(join(distBench, 'mock-upstream.js'), { PORT: '0' })
  const mockOrigin = `http://127.0.0.1:${mock.port}`
  const mockPid = mock.child.pid!
  log(`bench: mock upstream ready at ${mockOrigin}`)

  const clickHouse = await startLogStore(selected)
  if (clickHouse !== null) log(`bench: logging scenarios write to ClickHouse at ${clickHouse.url}`)

  const results: ModeResult[] = []
  for (const scenario of selected) {
    log(`bench: scenario ${scenario}`)
    let server: Server
    try {
      if (scenario === 'mock') {
        server = { origin: mockOrigin, logStore: null, pid: mockPid, apiKey: null, virtualKey: null, promptSlug: null, config: null, redis: null, stop: async () => {} }
      } else if (scenario === 'bare') {
        const bare = await spawnWithReadyLine(join(distBench, 'bare-forwarder.js'), { PORT: '0', UPSTREAM: mockOrigin })
        pinServer(bare.child.pid!)
        server = { origin: `http://127.0.0.1:${bare.port}`, logStore: null, pid: bare.child.pid!, apiKey: null, virtualKey: null, promptSlug: null, config: null, redis: null, stop: () => stopChild(bare.child) }
      } else {
        server = await startGateway(mockOrigin, gatewayKinds[scenario]!, clickHouse?.url ?? null)
      }
    } catch (e) {
      const reason = `server failed to start: ${(e as Error).message}`
      log(`  ${scenario}: SKIPPED — ${reason}`)
      for (const mode of modes) {
        results.push({ scenario, mode, skipped: reason, closed: null, open: null, serverPeakRssMb: null, serverCpuUsPerRequest: null, upstreamPeakRssMb: null, upstreamCpuUsPerRequest: null, otherCpuPercent: null, redis: null, budgetUsageAfter: null, log: null, valid: false, invalidReason: reason })
      }
      continue
    }
    try {
      for (const mode of modes) results.push(await runMode(scenario, mode, server, mockOrigin, mockPid))
    } finally {
      await server.stop()
    }
  }
  const paired: PairedComparison[] = []
  const pairedScenarios = selected.filter((s) => s.startsWith('gateway-') && results.some((r) => r.scenario === s && r.skipped === null))
  if (options.pairedRounds > 0 && selected.includes('bare') && pairedScenarios.length > 0) {
    log(`bench: paired req/s ratios, ${options.pairedRounds} rounds of ${options.pairedSliceS}s slices (+1s warm-up each), bare and gateway alternating`)
    const bareChild = await spawnWithReadyLine(join(distBench, 'bare-forwarder.js'), { PORT: '0', UPSTREAM: mockOrigin })
    pinServer(bareChild.child.pid!)
    const bare: Server = { origin: `http://127.0.0.1:${bareChild.port}`, logStore: null, pid: bareChild.child.pid!, apiKey: null, virtualKey: null, promptSlug: null, config: null, redis: null, stop: () => stopChild(bareChild.child) }
    try {
      for (const scenario of pairedScenarios) {
        const gateway = await startGateway(mockOrigin, gatewayKinds[scenario]!, clickHouse?.url ?? null)
        try {
          for (const mode of modes) {
            const row = await pairedRatios(bare, gateway, scenario, mode, mockOrigin)
            log(`  ${scenario}/${mode}: paired ratios ${row.ratios.map((r) => fmt(r)).join(' ')}`)
            paired.push(row)
          }
        } finally {
          await gateway.stop()
        }
      }
    } finally {
      await bare.stop()
    }
  }
  const fullComparisons: FullComparison[] = []
  const ran = (scenario: ScenarioName): boolean => results.some((r) => r.scenario === scenario && r.skipped === null)
  const againstFull = versusFull.filter((v) => ran(v.scenario))
  if (options.pairedRounds > 0 && ran('gateway-full') && againstFull.length > 0) {
    log(`bench: ${againstFull.map((v) => v.scenario).join(', ')} against gateway-full, ${options.pairedRounds} rounds of ${options.pairedSliceS}s slices (+1s warm-up each), alternating`)
    const full = await startGateway(mockOrigin, 'full', clickHouse?.url ?? null)
    try {
      for (const { scenario, kind } of againstFull) {
        // An inline config needs no set-up of its own: its requests go to the same gateway process as
        // gateway-full's, so the slices differ only by the request (two processes differ by more
        // than the 10 µs measured here: JIT state, heap, their stores).
        const inline = inlineConfigFor(kind, mockOrigin)
        const other = inline === null ? await startGateway(mockOrigin, kind, clickHouse?.url ?? null) : { ...full, config: inline, stop: async () => {} }
        try {
          for (const mode of modes) {
            const mainFull = results.find((r) => r.scenario === 'gateway-full' && r.mode === mode)?.serverCpuUsPerRequest ?? null
            const mainOther = results.find((r) => r.scenario === scenario && r.mode === mode)?.serverCpuUsPerRequest ?? null
            const row = await pairedVsFull(full, other, scenario, mode, mockOrigin, mainFull === null || mainOther === null || mainFull <= 0 ? null : mainOther / mainFull)
            log(`  ${scenario}/${mode}: cpu/req ratios ${row.rounds.map((r) => (r.fullCpuUs === null || r.otherCpuUs === null ? '-' : fmt(r.otherCpuUs / r.fullCpuUs))).join(' ')}`)
            fullComparisons.push(row)
          }
        } finally {
          await other.stop()
        }
      }
    } finally {
      await full.stop()
    }
  }
  await stopChild(mock.child)
  await clickHouse?.stop()

  const comparisons: Comparison[] = []
  for (const mode of modes) {
    const bare = results.find((r) => r.scenario === 'bare' && r.mode === mode)
    if (bare === undefined) continue
    for (const r of results) {
      if (r.mode !== mode || !r.scenario.startsWith('gateway-')) continue
      const c = compare(bare, r)
      if (c !== null) comparisons.push(c)
    }
  }

  const limitsComparisons: LimitsComparison[] = []
  for (const mode of modes) {
    const full = results.find((r) => r.scenario === 'gateway-full' && r.mode === mode)
    const limits = results.find((r) => r.scenario === 'gateway-limits' && r.mode === mode)
    if (limits === undefined) continue
    const c = compareToFull(full, limits)
    if (c !== null) limitsComparisons.push(c)
  }

  const loggingComparisons: LoggingComparison[] = []
  for (const mode of modes) {
    const full = results.find((r) => r.scenario === 'gateway-full' && r.mode === mode)
    const nolog = results.find((r) => r.scenario === 'gateway-full-nolog' && r.mode === mode)
    if (full?.closed == null) continue
    const rpsRatio = nolog?.closed == null ? null : full.closed.rps / nolog.closed.rps
    const costPercent = rpsRatio === null ? null : (1 - rpsRatio) * 100
    loggingComparisons.push({ mode, rpsRatio, costPercent, target: costPercent === null ? null : costPercent <= maxLoggingCostPercent })
  }

  process.stdout.write(`\n${resultTable(results)}\n`)
  if (comparisons.length > 0) process.stdout.write(`\n${comparisonTable(comparisons)}\n`)
  if (limitsComparisons.length > 0) {
    process.stdout.write(`\n${limitsTable(limitsComparisons, results)}\n`)
    process.stdout.write(`redis calls/req = EVAL/EVALSHA calls / requests of the measured open loop (all limits of a request, before and after the reply); the closed-loop figure is off by the ${options.connections} requests in flight at each edge\n`)
  }
  if (loggingComparisons.length > 0) process.stdout.write(`\n${loggingTable(loggingComparisons, results)}\n`)
  if (paired.length > 0) {
    process.stdout.write(`\n${pairedTable(paired)}\n`)
    process.stdout.write(`paired = bare forwarder and gateway measured in alternating ${options.pairedSliceS}s slices at ${options.connections} connections, both running; one ratio per round\n`)
  }
  if (fullComparisons.length > 0) {
    process.stdout.write(`\n${versusFullTable(fullComparisons)}\n`)
    process.stdout.write(`vs full = server CPU per request (and req/s) of the scenario against gateway-full, both running, in alternating ${options.pairedSliceS}s slices at ${options.connections} connections (gateway-config and gateway-cache-hit: the same gateway process, their requests naming an inline config); one ratio and one difference per round\n`)
  }
  process.stdout.write('\nerrors = closed-loop/open-loop; latencies at the fixed rate and TTFB are from the scheduled send time\n')

  const report = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      totalMemMb: Math.round(totalmem() / 1048576),
      node: process.version,
      busyPercentBeforeRun: busyBefore,
      loadAvgBeforeRun: loadBefore,
      loadAvgAfterRun: loadavg()
    },
    drivers: { closedLoop: closedDriver, openLoop: 'node/undici dispatch, fixed timetable' },
    options,
    mock: { chunks: Number(process.env.MOCK_CHUNKS ?? 20), chunkDelayMs: Number(process.env.MOCK_CHUNK_DELAY_MS ?? 0), latencyMs: Number(process.env.MOCK_LATENCY_MS ?? 0) },
    results,
    comparisons,
    limitsComparisons,
    loggingComparisons,
    pairedComparisons: paired,
    fullComparisons
  }
  mkdirSync(resultsDir, { recursive: true })
  const file = join(resultsDir, `${startedAt.toISOString().replace(/:/g, '-')}.json`)
  const json = JSON.stringify(report, null, 2) + '\n'
  writeFileSync(file, json)
  writeFileSync(join(resultsDir, 'latest.json'), json)
  process.stdout.write(`results: ${file}\n`)
}

main().then(() => {
  killAll('SIGKILL')
  process.exit(0)
}, (e: unknown) => {
  log(`bench: failed: ${e instanceof Error ? e.stack ?? e.message : String(e)}`)
  killAll('SIGKILL')
  process.exit(1)
})
