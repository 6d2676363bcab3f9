import { spawn, spawnSync } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'
import type { Dispatcher } from 'undici'

export type RequestSpec = {
  origin: string
  path: string
  headers: Record<string, string>
  body: string
}

export type LatencyStats = {
  count: number
  p50Ms: number
  p90Ms: number
  p99Ms: number
  maxMs: number
  meanMs: number
}

export type ClosedLoopResult = {
  driver: 'wrk' | 'node'
  connections: number
  durationS: number
  requests: number
  rps: number
  // Connect/read/write/timeout errors plus responses with status >= 400.
  errors: number
  latency: LatencyStats
}

export type OpenLoopResult = {
  driver: 'node-open-loop'
  rate: number
  durationS: number
  scheduled: number
  completed: number
  ok: number
  errors: number
  achievedRps: number
  // From the scheduled send time, so a stalled server cannot hide its queueing delay.
  latency: LatencyStats
  // First response body byte, also from the scheduled send time.
  ttfb: LatencyStats
  // How late the driver itself dispatched; large values mean the load generator was CPU-starved.
  sendLag: LatencyStats
  // From the actual dispatch: the server's share without the driver's timer lateness.
  service: LatencyStats
}

export type ClosedLoopOptions = {
  connections: number
  durationS: number
  warmupS: number
  threads?: number
  timeoutS?: number
  // Called after the warm-up, right before the measured run starts (e.g. to snapshot server counters).
  onMeasureStart?: () => Promise<void> | void
}

export type OpenLoopOptions = {
  rate: number
  durationS: number
  warmupS: number
  maxInFlight?: number
  drainTimeoutS?: number
  // Called after the warm-up (all of its requests settled), right before the measured run starts.
  onMeasureStart?: () => Promise<void> | void
}

const emptyStats: LatencyStats = { count: 0, p50Ms: NaN, p90Ms: NaN, p99Ms: NaN, maxMs: NaN, meanMs: NaN }

export const latencyStats = (samples: Float64Array, count: number): LatencyStats => {
  if (count === 0) return emptyStats
  const sorted = samples.slice(0, count).sort()
  const at = (q: number): number => sorted[Math.min(count - 1, Math.max(0, Math.ceil(q * count) - 1))]!
  let sum = 0
  for (let i = 0; i < count; i++) sum += sorted[i]!
  return { count, p50Ms: at(0.5), p90Ms: at(0.9), p99Ms: at(0.99), maxMs: sorted[count - 1]!, meanMs: sum / count }
}

const activeWrk = new Set<ChildProcess>()
const activeDirs = new Set<string>()

// Synchronous so it can run from an exit or signal handler of the orchestrator.
export const stopLoadDrivers = (): void => {
  for (const child of activeWrk) child.kill('SIGKILL')
  activeWrk.clear()
  for (const dir of activeDirs) rmSync(dir, { recursive: true, force: true })
  activeDirs.clear()
}

let wrkPath: string | null | undefined
export const findWrk = (): string | null => {
  if (wrkPath !== undefined) return wrkPath
  const probe = spawnSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' })
  const found = probe.status === 0 ? probe.stdout.trim() : ''
  wrkPath = found === '' ? null : found
  return wrkPath
}

// Lua long brackets need a level whose closing form does not occur in the text.
const luaString = (text: string): string => {
  let level = 0
  while (text.includes(`]${'='.repeat(level)}]`)) level++
  const eq = '='.repeat(level)
  return `[${eq}[${text}]${eq}]`
}

const wrkScript = (spec: RequestSpec): string => {
  const lines = ['wrk.method = "POST"', `wrk.body = ${luaString(spec.body)}`]
  for (const [name, value] of Object.entries(spec.headers)) {
    lines.push(`wrk.headers[ ${luaString(name)} ] = ${luaString(value)}`)
  }
  lines.push(
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    '  io.write(string.format(\'WRK_RESULT {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\\n\',',
    '    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,',
    '    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))',
    'end'
  )
  return lines.join('\n') + '\n'
}

type WrkJson = {
  requests: number
  duration_us: number
  connect: number
  read: number
  write: number
  status: number
  timeout: number
  p50_us: number
  p90_us: number
  p99_us: number
  max_us: number
  mean_us: number
}

const runWrkOnce = (wrk: string, scriptPath: string, spec: RequestSpec, opts: ClosedLoopOptions, durationS: number): Promise<ClosedLoopResult> =>
  new Promise((resolve, reject) => {
    const threads = Math.max(1, Math.min(opts.threads ?? 1, opts.connections))
    const args = [
      `-t${threads}`, `-c${opts.connections}`, `-d${durationS}s`, `--timeout`, `${opts.timeoutS ?? 5}s`,
      '-s', scriptPath, `${spec.origin}${spec.path}`
    ]
    const child = spawn(wrk, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    activeWrk.add(child)
    let out = ''
    let err = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d })
    child.stderr.setEncoding('utf8').on('data', (d: string) => { err += d })
    // wrk stops by itself; this only bounds a wedged run.
    const guard = setTimeout(() => child.kill('SIGKILL'), (durationS + 20) * 1000)
    child.on('error', (e) => { clearTimeout(guard); reject(e) })
    child.on('close', (code) => {
      clearTimeout(guard)
      activeWrk.delete(child)
      const line = out.split('\n').find((l) => l.startsWith('WRK_RESULT '))
      if (line === undefined) {
        reject(new Error(`wrk exited with ${code} without a result: ${(err || out).trim().slice(-500)}`))
        return
      }
      const r = JSON.parse(line.slice('WRK_RESULT '.length)) as WrkJson
      const seconds = r.duration_us / 1e6
      resolve({
        driver: 'wrk',
        connections: opts.connections,
        durationS: seconds,
        requests: r.requests,
        rps: r.requests / seconds,
        errors: r.connect + r.read + r.write + r.status + r.timeout,
        latency: {
          count: r.requests,
          p50Ms: r.p50_us / 1000,
          p90Ms: r.p90_us / 1000,
          p99Ms: r.p99_us / 1000,
          maxMs: r.max_us / 1000,
          meanMs: r.mean_us / 1000
        }
      })
    })
  })

export const runWrk = async (spec: RequestSpec, opts: ClosedLoopOptions): Promise<ClosedLoopResult> => {
  const wrk = findWrk()
  if (wrk === null) throw new Error('wrk not found')
  const dir = mkdtempSync(join(tmpdir(), 'bench-wrk-'))
  activeDirs.add(dir)
  try {
    const scriptPath = join(dir, 'request.lua')
    writeFileSync(scriptPath, wrkScript(spec))
    if (opts.warmupS > 0) await runWrkOnce(wrk, scriptPath, spec, opts, opts.warmupS)
    await opts.onMeasureStart?.()
    return await runWrkOnce(wrk, scriptPath, spec, opts, opts.durationS)
  } finally {
    activeDirs.delete(dir)
    rmSync(dir, { recursive: true, force: true })
  }
}

type Outcome = { status: number, firstByteAt: number, endAt: number, error: Error | null }

// A raw dispatch handler keeps the driver's own per-request cost far below the servers'.
const sendOne = (pool: Pool, spec: RequestSpec, body: Buffer, done: (o: Outcome) => void): void => {
  const outcome: Outcome = { status: 0, firstByteAt: 0, endAt: 0, error: null }
  const handler: Dispatcher.DispatchHandler = {
    // undici only treats a handler as the new controller-style API when onRequestStart exists.
    onRequestStart () {},
    onResponseStart (_c, statusCode) { outcome.status = statusCode },
    onResponseData () {
      if (outcome.firstByteAt === 0) outcome.firstByteAt = performance.now()
    },
    onResponseEnd () {
      outcome.endAt = performance.now()
      if (outcome.firstByteAt === 0) outcome.firstByteAt = outcome.endAt
      done(outcome)
    },
    onResponseError (_c, error) {
      outcome.endAt = performance.now()
      outcome.error = error
      done(outcome)
    }
  }
  pool.dispatch({ origin: spec.origin, method: 'POST', path: spec.path, headers: spec.headers, body }, handler)
}

const newPool = (origin: string, connections: number, timeoutS: number): Pool =>
  new Pool(origin, {
    connections,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    headersTimeout: timeoutS * 1000,
    bodyTimeout: timeoutS * 1000
  })

const closedLoopOnce = async (spec: RequestSpec, opts: ClosedLoopOptions, durationS: number): Promise<ClosedLoopResult> => {
  const timeoutS = opts.timeoutS ?? 5
  const pool = newPool(spec.origin, opts.connections, timeoutS)
  const body = Buffer.from(spec.body)
  let samples = new Float64Array(1 << 16)
  let count = 0
  let requests = 0
  let errors = 0
  const start = performance.now()
  const deadline = start + durationS * 1000
  const loop = (): Promise<void> => new Promise((resolve) => {
    const next = (): void => {
      if (performance.now() >= deadline) { resolve(); return }
      const sentAt = performance.now()
      sendOne(pool, spec, body, (o) => {
        requests++
        if (o.error !== null || o.status >= 400) errors++
        else {
          if (count === samples.length) {
            const grown = new Float64Array(samples.length * 2)
            grown.set(samples)
            samples = grown
          }
          samples[count++] = o.endAt - sentAt
        }
        next()
      })
    }
    next()
  })
  await Promise.all(Array.from({ length: opts.connections }, loop))
  const seconds = (performance.now() - start) / 1000
  await pool.destroy()
  return {
    driver: 'node',
    connections: opts.connections,
    durationS: seconds,
    requests,
    rps: requests / seconds,
    errors,
    latency: latencyStats(samples, count)
  }
}

export const runNodeClosedLoop = async (spec: RequestSpec, opts: ClosedLoopOptions): Promise<ClosedLoopResult> => {
  if (opts.warmupS > 0) await closedLoopOnce(spec, opts, opts.warmupS)
  await opts.onMeasureStart?.()
  return closedLoopOnce(spec, opts, opts.durationS)
}

export const runClosedLoop = async (spec: RequestSpec, opts: ClosedLoopOptions): Promise<ClosedLoopResult> =>
  findWrk() !== null ? runWrk(spec, opts) : runNodeClosedLoop(spec, opts)

const openLoopOnce = (spec: RequestSpec, opts: OpenLoopOptions, durationS: number): Promise<OpenLoopResult> =>
  new Promise((resolve) => {
    const total = Math.max(1, Math.floor(opts.rate * durationS))
    const intervalMs = 1000 / opts.rate
    const maxInFlight = opts.maxInFlight ?? Math.max(256, opts.rate * 5)
    const drainTimeoutMs = (opts.drainTimeoutS ?? 5) * 1000
    const pool = newPool(spec.origin, Math.min(maxInFlight, 1024), 10)
    const body = Buffer.from(spec.body)
    const latency = new Float64Array(total)
    const ttfb = new Float64Array(total)
    const lag = new Float64Array(total)
    const service = new Float64Array(total)
    let okCount = 0
    let lagCount = 0
    let completed = 0
    let errors = 0
    let inFlight = 0
    let next = 0
    let finished = false
    const start = performance.now() + 5

    const finish = (): void => {
      if (finished) return
      finished = true
      const end = performance.now()
      // Whatever is still in flight after the drain window counts as an error (a timeout).
      errors += inFlight
      void pool.destroy().catch(() => {})
      const measuredS = Math.max(durationS, (end - start) / 1000)
      resolve({
        driver: 'node-open-loop',
        rate: opts.rate,
        durationS,
        scheduled: total,
        completed,
        ok: okCount,
        errors,
        achievedRps: okCount / measuredS,
        latency: latencyStats(latency, okCount),
        ttfb: latencyStats(ttfb, okCount),
        sendLag: latencyStats(lag, lagCount),
        service: latencyStats(service, okCount)
      })
    }

    const maybeDone = (): void => {
      if (next >= total && inFlight === 0) finish()
    }

    const fire = (scheduledAt: number): void => {
      if (inFlight >= maxInFlight) {
        errors++
        return
      }
      const sentAt = performance.now()
      lag[lagCount++] = sentAt - scheduledAt
      inFlight++
      sendOne(pool, spec, body, (o) => {
        if (finished) return
        inFlight--
        completed++
        if (o.error !== null || o.status >= 400) errors++
        else {
          latency[okCount] = o.endAt - scheduledAt
          ttfb[okCount] = o.firstByteAt - scheduledAt
          service[okCount] = o.endAt - sentAt
          okCount++
        }
        maybeDone()
      })
    }

    const tick = (): void => {
      const now = performance.now()
      while (next < total) {
        const scheduledAt = start + next * intervalMs
        if (scheduledAt > now) break
        next++
        fire(scheduledAt)
      }
      if (next < total) {
        setTimeout(tick, Math.max(0, start + next * intervalMs - performance.now()))
        return
      }
      setTimeout(finish, drainTimeoutMs).unref()
      maybeDone()
    }
    setTimeout(tick, 5)
  })

export const runOpenLoop = async (spec: RequestSpec, opts: OpenLoopOptions): Promise<OpenLoopResult> => {
  if (opts.warmupS > 0) await openLoopOnce(spec, opts, opts.warmupS)
  await opts.onMeasureStart?.()
  return openLoopOnce(spec, opts, opts.durationS)
}
