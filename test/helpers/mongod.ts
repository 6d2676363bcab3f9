/**
 * A MongoDB for tests: `MONGODB_URI` when set, else a throwaway single-node replica set started from
 * the `mongod` on the PATH, else nothing (MongoDB is not in these machines' package sources; the
 * MongoDB suites then skip and say so).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { rmSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MongoClient, MongoServerError } from 'mongodb'
import { findBinary, freePorts } from './services.js'

/** A MongoDB deployment that runs transactions; `stop()` ends it when the tests started it. */
export interface MongoTarget {
  readonly uri: string
  stop(): Promise<void>
}

export const MONGODB_URI_ENV = 'MONGODB_URI'

const REPLICA_SET = 'rs0'
const READY_TIMEOUT_MS = 60_000
const STOP_GRACE_MS = 10_000
const START_ATTEMPTS = 3
const OUTPUT_TAIL_BYTES = 16_384

const running = new Set<{ child: ChildProcess; dir: string }>()
let exitHookInstalled = false

function installExitHook(): void {
  if (exitHookInstalled) return
  exitHookInstalled = true
  // A test run that ends without calling stop() must not leave mongod or its files behind.
  process.on('exit', () => {
    for (const entry of running) {
      entry.child.kill('SIGKILL')
      rmSync(entry.dir, { recursive: true, force: true })
    }
  })
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

async function commandOrNull(client: MongoClient, command: Record<string, unknown>): Promise<Record<string, unknown> | null> {
  try {
    return await client.db('admin').command(command)
  } catch {
    return null
  }
}

const ALREADY_INITIALIZED = 23

/** Whether the set is initiated; `false` while mongod does not answer yet, throws on a refusal. */
async function initiate(client: MongoClient, port: number): Promise<boolean> {
  try {
    await client.db('admin').command({
      replSetInitiate: { _id: REPLICA_SET, members: [{ _id: 0, host: `127.0.0.1:${port}` }] },
    })
    return true
  } catch (error) {
    if (!(error instanceof MongoServerError)) return false
    if (error.code === ALREADY_INITIALIZED) return true
    throw error
  }
}

function tail(text: string): string {
  return text.trimEnd().split('\n').slice(-40).join('\n')
}

async function startOnce(binary: string): Promise<MongoTarget> {
  const [port] = (await freePorts(1)) as [number]
  const dir = await mkdtemp(join(tmpdir(), 'gw-test-mongod-'))
  installExitHook()
  const args = ['--replSet', REPLICA_SET, '--bind_ip', '127.0.0.1', '--port', String(port), '--dbpath', dir, '--nounixsocket']
  const child = spawn(binary, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
  const entry = { child, dir }
  running.add(entry)
  let output = ''
  const append = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-OUTPUT_TAIL_BYTES)
  }
  child.stdout?.on('data', append)
  child.stderr?.on('data', append)
  child.on('error', (error) => append(Buffer.from(`spawn error: ${error.message}\n`)))
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()))
  const exited = (): boolean => child.pid === undefined || child.exitCode !== null || child.signalCode !== null

  const stop = async (): Promise<void> => {
    if (!exited()) {
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS)
      await closed
      clearTimeout(timer)
    }
    running.delete(entry)
    await rm(dir, { recursive: true, force: true })
  }

  // Direct connection: before replSetInitiate the node is not a member of any set the driver could discover.
  const client = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, { serverSelectionTimeoutMS: 1_000 })
  try {
    const deadline = Date.now() + READY_TIMEOUT_MS
    let initiated = false
    for (;;) {
      if (exited()) throw new Error(`mongod exited during startup\n${tail(output)}`)
      if (Date.now() > deadline) throw new Error(`mongod did not become PRIMARY within ${READY_TIMEOUT_MS} ms\n${tail(output)}`)
      if (!initiated) initiated = await initiate(client, port)
      else if ((await commandOrNull(client, { hello: 1 }))?.isWritablePrimary === true) break
      await sleep(100)
    }
  } catch (error) {
    await client.close()
    await stop()
    throw error
  }
  await client.close()
  return { uri: `mongodb://127.0.0.1:${port}/?replicaSet=${REPLICA_SET}`, stop }
}

/**
 * Starts the `mongod` on the PATH as a single-node replica set on a free loopback port, with its
 * data in a fresh temp directory, and resolves once it is PRIMARY. `stop()` ends it and removes
 * the directory.
 */
export async function startMongod(): Promise<MongoTarget> {
  const binary = findBinary('mongod')
  if (binary === undefined) throw new Error('mongod is not on the PATH')
  let lastError: unknown
  // A lost race for the "free" port shows up as mongod exiting at startup; another port usually works.
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    try {
      return await startOnce(binary)
    } catch (error) {
      lastError = error
    }
  }
  throw new Error(`could not start mongod after ${START_ATTEMPTS} attempts: ${String(lastError)}`, { cause: lastError })
}

/** `MONGODB_URI` when set, else a started mongod, else `null` (no MongoDB available). */
export async function mongoTarget(): Promise<MongoTarget | null> {
  const uri = process.env[MONGODB_URI_ENV]
  if (uri !== undefined && uri !== '') return { uri, stop: async () => {} }
  if (findBinary('mongod') === undefined) return null
  return startMongod()
}
