/**
 * A throwaway three-node Redis Cluster on loopback: three `redis-server --cluster-enabled yes`
 * processes (no replicas, persistence off) in fresh temp directories, joined with
 * `redis-cli --cluster create`, ready once every node reports `cluster_state:ok`. Each node's
 * cluster bus port is picked free too (the default, port + 10000, may be anyone's ephemeral
 * port), and a start that loses a port race is retried on fresh ports. `stop()` kills
 * them and removes the directories; if the test process dies first, a detached watchdog does.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ensureServiceBinaries, findBinary, freePorts, withRetries } from './services.js'

export interface RedisClusterService {
  readonly ports: readonly number[]
  /** A URL for the gateway: `redis://127.0.0.1:<first port>?cluster=true`. */
  readonly url: string
  stop(): Promise<void>
}

const READY_TIMEOUT_MS = 30_000
const NODES = 3

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** Sends one inline command and returns the raw reply once `done` says it is complete. */
function rawCommand(port: number, command: string, done: (reply: string) => boolean): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    let reply = ''
    const finish = (value: string | null): void => {
      socket.destroy()
      resolve(value)
    }
    socket.setTimeout(1_000, () => finish(null))
    socket.on('connect', () => socket.write(`${command}\r\n`))
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1')
      if (done(reply)) finish(reply)
    })
    socket.on('error', () => finish(null))
  })
}

async function clusterStateOk(port: number): Promise<boolean> {
  const reply = await rawCommand(port, 'CLUSTER INFO', (text) => text.includes('cluster_state:') && text.endsWith('\r\n\r\n'))
  return reply?.includes('cluster_state:ok') ?? false
}

function run(binary: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')))
    child.once('error', reject)
    child.once('exit', (code) => (code === 0 ? resolve(output) : reject(new Error(`${binary} ${args.join(' ')} failed (exit ${code}):\n${output}`))))
  })
}

/** Kills `pid` and removes `dir` if this process dies without calling stop(). */
function watchdog(pid: number, dir: string): ChildProcess | undefined {
  const script = 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -KILL "$2" 2>/dev/null; rm -rf "$3"'
  try {
    const child = spawn('sh', ['-c', script, 'watchdog', String(process.pid), String(pid), dir], { detached: true, stdio: 'ignore' })
    child.on('error', () => {})
    child.unref()
    return child
  } catch {
    return undefined
  }
}

export async function startRedisCluster(): Promise<RedisClusterService> {
  await ensureServiceBinaries()
  const server = findBinary('redis-server')
  const cli = findBinary('redis-cli')
  if (server === undefined || cli === undefined) throw new Error('redis-server and redis-cli are needed (Debian package redis-server / redis-tools)')
  return withRetries('redis cluster', () => startOnce(server, cli))
}

async function startOnce(server: string, cli: string): Promise<RedisClusterService> {
  const picked = await freePorts(NODES * 2)
  const ports = picked.slice(0, NODES)
  const busPorts = picked.slice(NODES)
  const nodes: Array<{ child: ChildProcess; dir: string; guard: ChildProcess | undefined; output: () => string }> = []

  const stop = async (): Promise<void> => {
    await Promise.all(
      nodes.splice(0).map(async ({ child, dir, guard }) => {
        if (guard?.pid !== undefined) {
          try {
            process.kill(-guard.pid, 'SIGKILL')
          } catch {
            // already gone
          }
        }
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise((resolve) => child.once('close', resolve))
          child.kill('SIGKILL')
          await exited
        }
        await rm(dir, { recursive: true, force: true })
      }),
    )
  }

  try {
    for (const [index, port] of ports.entries()) {
      const dir = await mkdtemp(join(tmpdir(), 'gw-test-redis-cluster-'))
      const child = spawn(
        server,
        [
          '--port', String(port),
          '--bind', '127.0.0.1',
          '--cluster-enabled', 'yes',
          '--cluster-port', String(busPorts[index]),
          '--cluster-config-file', join(dir, 'nodes.conf'),
          '--cluster-node-timeout', '5000',
          '--save', '',
          '--appendonly', 'no',
          '--dir', dir,
          '--daemonize', 'no',
        ],
        { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
      )
      let output = ''
      child.stdout?.on('data', (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-8_192)))
      child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-8_192)))
      child.on('error', () => {})
      nodes.push({ child, dir, guard: child.pid === undefined ? undefined : watchdog(child.pid, dir), output: () => output })
    }
    const deadline = Date.now() + READY_TIMEOUT_MS
    for (const [index, port] of ports.entries()) {
      while ((await rawCommand(port, 'PING', (text) => text.includes('\r\n'))) !== '+PONG\r\n') {
        const node = nodes[index]
        if (node !== undefined && node.child.exitCode !== null) throw new Error(`redis-server on port ${port} exited:\n${node.output()}`)
        if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer PING`)
        await sleep(50)
      }
    }
    await run(cli, ['--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes'])
    for (const port of ports) {
      while (!(await clusterStateOk(port))) {
        if (Date.now() > deadline) throw new Error(`the cluster did not reach cluster_state:ok on port ${port}`)
        await sleep(100)
      }
    }
  } catch (error) {
    await stop()
    throw error
  }
  return { ports, url: `redis://127.0.0.1:${ports[0]}?cluster=true`, stop }
}
