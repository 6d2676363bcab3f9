import { spawn, type ChildProcess } from 'node:child_process'
import { accessSync, constants, readFileSync, rmSync } from 'node:fs'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer, connect, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'

/** A throwaway redis-server on a loopback port. */
export type RedisService = {
  readonly url: string
  readonly port: number
  readonly dir: string
  stop(): Promise<void>
}

/** A throwaway clickhouse-server on loopback ports; `url` is its HTTP interface. */
export type ClickHouseService = {
  readonly url: string
  readonly httpPort: number
  readonly tcpPort: number
  readonly dir: string
  stop(): Promise<void>
}

const BINARY_PACKAGES = {
  'redis-server': 'redis-server',
  'clickhouse-server': 'clickhouse-server',
} as const

type ServiceBinary = keyof typeof BINARY_PACKAGES

const READY_TIMEOUT_MS = 30_000
const START_ATTEMPTS = 3
const OUTPUT_TAIL_BYTES = 16_384

// clickhouse-server lives in /usr/sbin, which a non-root PATH often lacks.
const EXTRA_BIN_DIRS = ['/usr/local/sbin', '/usr/sbin', '/sbin']

/** Absolute path of an executable on the PATH (or in the sbin dirs), or undefined. */
export function findBinary(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), ...EXTRA_BIN_DIRS]
  for (const dir of dirs) {
    const candidate = join(dir, name)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      continue
    }
  }
  return undefined
}

let installation: Promise<void> | undefined

/**
 * Makes sure redis-server and clickhouse-server are installed. When one is missing and the process
 * runs as root, installs the Debian packages once (apt-get update, then apt-get install); when not
 * root, throws with a message saying what to install.
 */
export function ensureServiceBinaries(): Promise<void> {
  // Memoised so concurrent starts never run two apt-get processes against the dpkg lock.
  installation ??= installMissing()
  return installation
}

async function installMissing(): Promise<void> {
  const missing = (Object.keys(BINARY_PACKAGES) as ServiceBinary[]).filter((bin) => findBinary(bin) === undefined)
  if (missing.length === 0) return
  const packages = missing.map((bin) => BINARY_PACKAGES[bin])
  if (process.getuid?.() !== 0) {
    throw new Error(
      `Missing ${missing.join(', ')} on the PATH. Install the Debian package(s) first: ` +
        `sudo apt-get install -y ${packages.join(' ')} (or run the tests as root to install them automatically).`,
    )
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  process.stderr.write(`[services] ${missing.join(', ')} missing; installing ${packages.join(' ')} with apt-get\n`)
  await runCommand('apt-get', ['update'], env)
  await runCommand('apt-get', ['install', '-y', ...packages], env)
  const stillMissing = missing.filter((bin) => findBinary(bin) === undefined)
  if (stillMissing.length > 0) throw new Error(`apt-get install finished but ${stillMissing.join(', ')} is still not on the PATH`)
}

function runCommand(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'inherit', 'inherit'] })
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      if (code === 0) resolve()
      else reject(new Error(`${command} ${args.join(' ')} failed (${signal ?? `exit code ${code}`})`))
    })
  })
}

async function requireBinary(name: ServiceBinary): Promise<string> {
  await ensureServiceBinaries()
  const path = findBinary(name)
  if (path === undefined) throw new Error(`${name} not found on the PATH`)
  return path
}

/** Ports that are free right now; all listeners stay open until every port is picked so they differ. */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, () => new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
      const server = createServer()
      server.once('error', reject)
      server.listen(0, '127.0.0.1', () => resolve(server))
    })),
  )
  const ports = servers.map((server) => (server.address() as AddressInfo).port)
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
  return ports
}

type Tracked = { child: ChildProcess; watchdog: ChildProcess | undefined; dir: string }

const tracked = new Set<Tracked>()
let exitHooksInstalled = false

// The watchdog is detached, so it leads its own process group; killing the group takes its `sleep` too.
function killWatchdog(watchdog: ChildProcess | undefined): void {
  if (watchdog?.pid === undefined) return
  try {
    process.kill(-watchdog.pid, 'SIGKILL')
  } catch {
    // already gone
  }
}

function killTrackedSync(): void {
  for (const entry of tracked) {
    entry.child.kill('SIGKILL')
    killWatchdog(entry.watchdog)
    try {
      rmSync(entry.dir, { recursive: true, force: true })
    } catch {
      // best effort: the process is going away anyway
    }
  }
  tracked.clear()
}

function installExitHooks(): void {
  if (exitHooksInstalled) return
  exitHooksInstalled = true
  process.on('exit', killTrackedSync)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killTrackedSync()
      // Our listener suppressed the default action; re-raise when nobody else handles the signal.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
    })
  }
}

/**
 * A detached shell that outlives us only to clean up: if this process dies without running its
 * exit hooks (SIGKILL, OOM), it kills the server and removes its directory.
 */
function spawnWatchdog(childPid: number, dir: string): ChildProcess | undefined {
  const script = 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -KILL "$2" 2>/dev/null; rm -rf "$3"'
  try {
    const watchdog = spawn('sh', ['-c', script, 'watchdog', String(process.pid), String(childPid), dir], {
      detached: true,
      stdio: 'ignore',
    })
    watchdog.on('error', () => {})
    watchdog.unref()
    return watchdog
  } catch {
    return undefined
  }
}

type Launched = {
  child: ChildProcess
  output(): string
  exited(): boolean
  stop(signal: NodeJS.Signals, graceMs: number): Promise<void>
}

function launch(binary: string, args: string[], dir: string): Launched {
  installExitHooks()
  const child = spawn(binary, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  const append = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-OUTPUT_TAIL_BYTES)
  }
  child.stdout?.on('data', append)
  child.stderr?.on('data', append)
  child.on('error', (error) => append(Buffer.from(`spawn error: ${error.message}\n`)))
  const watchdog = child.pid === undefined ? undefined : spawnWatchdog(child.pid, dir)
  const entry: Tracked = { child, watchdog, dir }
  tracked.add(entry)
  const exitedPromise = new Promise<void>((resolve) => child.once('close', () => resolve()))
  const exited = (): boolean => child.exitCode !== null || child.signalCode !== null || child.pid === undefined
  return {
    child,
    output: () => output,
    exited,
    async stop(signal, graceMs) {
      killWatchdog(watchdog)
      if (!exited()) {
        child.kill(signal)
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
        await exitedPromise
        clearTimeout(timer)
      }
      tracked.delete(entry)
    },
  }
}

async function waitUntilReady(
  name: string,
  launched: Launched,
  probe: () => Promise<boolean>,
  diagnostics: () => string,
): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (launched.exited()) {
      throw new Error(`${name} exited during startup (${describeExit(launched.child)})\n${diagnostics()}`)
    }
    if (await probe()) return
    await sleep(100)
  }
  throw new Error(`${name} did not become ready within ${READY_TIMEOUT_MS} ms\n${diagnostics()}`)
}

function describeExit(child: ChildProcess): string {
  return child.signalCode !== null ? `signal ${child.signalCode}` : `exit code ${child.exitCode}`
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function tail(text: string, lines = 40): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n')
}

function readTail(path: string): string {
  try {
    return tail(readFileSync(path, 'utf8'))
  } catch {
    return '(unreadable)'
  }
}

function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    let reply = ''
    const finish = (ok: boolean): void => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1_000, () => finish(false))
    socket.on('connect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1')
      if (reply.includes('\r\n')) finish(reply.startsWith('+PONG'))
    })
    socket.on('error', () => finish(false))
  })
}

async function httpPing(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1_000) })
    const body = await response.text()
    return response.ok && body.trim() === 'Ok.'
  } catch {
    return false
  }
}

// A lost race for a "free" port shows up as the server exiting at startup; another port usually works.
export async function withRetries<T>(name: string, attempt: () => Promise<T>): Promise<T> {
  let lastError: unknown
  for (let i = 0; i < START_ATTEMPTS; i++) {
    try {
      return await attempt()
    } catch (error) {
      lastError = error
    }
  }
  throw new Error(`could not start ${name} after ${START_ATTEMPTS} attempts: ${String(lastError)}`, { cause: lastError })
}

/**
 * Starts a throwaway redis-server on a free 127.0.0.1 port with persistence off and its working dir
 * in a fresh temp directory. `stop()` terminates it and removes the directory.
 */
export async function startRedis(): Promise<RedisService> {
  const binary = await requireBinary('redis-server')
  return withRetries('redis-server', async () => {
    const [port] = (await freePorts(1)) as [number]
    const dir = await mkdtemp(join(tmpdir(), 'gw-test-redis-'))
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no']
    const launched = launch(binary, args, dir)
    const stop = async (): Promise<void> => {
      await launched.stop('SIGTERM', 5_000)
      await rm(dir, { recursive: true, force: true })
    }
    try {
      await waitUntilReady('redis-server', launched, () => redisPing(port), () => `output:\n${tail(launched.output())}`)
    } catch (error) {
      await stop()
      throw error
    }
    return { url: `redis://127.0.0.1:${port}`, port, dir, stop }
  })
}

function xmlText(value: string): string {
  return value.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;')
}

// A self-contained config instead of /etc/clickhouse-server/config.xml plus `--` overrides: with the
// packaged file, 18.16 writes preprocessed configs under the <path> from the file
// (/var/lib/clickhouse/preprocessed_configs) before overrides apply, and its users.xml admits
// every network. Only what differs from the built-in defaults is set; no interserver port is opened.
function clickHouseConfig(dir: string, httpPort: number, tcpPort: number): string {
  const data = `${dir}/data`
  return `<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>${xmlText(`${dir}/server.log`)}</log>
    <errorlog>${xmlText(`${dir}/server.err.log`)}</errorlog>
    <size>10M</size>
    <count>1</count>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <path>${xmlText(`${data}/`)}</path>
  <tmp_path>${xmlText(`${data}/tmp/`)}</tmp_path>
  <user_files_path>${xmlText(`${data}/user_files/`)}</user_files_path>
  <format_schema_path>${xmlText(`${data}/format_schemas/`)}</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
</yandex>
`
}

const CLICKHOUSE_USERS = `<?xml version="1.0"?>
<yandex>
  <profiles>
    <default></default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks>
        <ip>127.0.0.1</ip>
        <ip>::1</ip>
      </networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas>
    <default></default>
  </quotas>
</yandex>
`

/**
 * Starts a throwaway clickhouse-server (HTTP and native ports on 127.0.0.1, free ports) with its
 * config, data and logs in a fresh temp directory; resolves once `GET /ping` answers. User `default`,
 * no password, database `default`. `stop()` kills it and removes the directory.
 */
export async function startClickHouse(): Promise<ClickHouseService> {
  const binary = await requireBinary('clickhouse-server')
  return withRetries('clickhouse-server', async () => {
    const [httpPort, tcpPort] = (await freePorts(2)) as [number, number]
    const dir = await mkdtemp(join(tmpdir(), 'gw-test-clickhouse-'))
    await mkdir(join(dir, 'data', 'tmp'), { recursive: true })
    await writeFile(join(dir, 'config.xml'), clickHouseConfig(dir, httpPort, tcpPort))
    await writeFile(join(dir, 'users.xml'), CLICKHOUSE_USERS)
    const launched = launch(binary, [`--config-file=${join(dir, 'config.xml')}`], dir)
    // The data is thrown away, and a graceful shutdown costs ~2 s per run for nothing.
    const stop = async (): Promise<void> => {
      await launched.stop('SIGKILL', 5_000)
      await rm(dir, { recursive: true, force: true })
    }
    const url = `http://127.0.0.1:${httpPort}`
    const diagnostics = (): string =>
      `output:\n${tail(launched.output())}\nerror log (${dir}/server.err.log):\n${readTail(join(dir, 'server.err.log'))}`
    try {
      await waitUntilReady('clickhouse-server', launched, () => httpPing(`${url}/ping`), diagnostics)
    } catch (error) {
      await stop()
      throw error
    }
    return { url, httpPort, tcpPort, dir, stop }
  })
}
