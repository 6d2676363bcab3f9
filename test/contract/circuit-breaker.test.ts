import { createHash, randomUUID } from 'node:crypto'
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import { InProcessCircuitBreaker } from '../../adapters/memory/in-process-circuit-breaker.js'
import { CLAIM_SCRIPT, RECORD_SCRIPT, RedisCircuitBreaker, type RedisCircuitBreakerOptions } from '../../adapters/redis/redis-circuit-breaker.js'
import type { CircuitBreaker, CircuitSetting } from '../../core/ports.js'
import type { Logger } from '../../core/service.js'
import { freePorts, startRedis, type RedisService } from '../helpers/services.js'
import { describeCircuitBreakerContract } from './circuit-breaker.contract.js'

describeCircuitBreakerContract(
  'in-process',
  async () => {
    const breaker = new InProcessCircuitBreaker()
    await breaker.start()
    return breaker
  },
  { sharedState: false, settle: async () => {} },
)

describeCircuitBreakerContract(
  'redis',
  async () => {
    const breaker = new RedisCircuitBreaker({ url: inject('redisUrl') })
    await breaker.start()
    return breaker
  },
  { sharedState: true, settle: (breaker) => (breaker as RedisCircuitBreaker).settled() },
)

const T0 = 1_800_000_000_000
const SETTING: CircuitSetting = { failureThreshold: 3, cooldownMs: 30_000 }
const WAIT = { timeout: 10_000, interval: 10 }

function circuit(name: string): string {
  return `cbt-${randomUUID()}:cfg@1:config.targets[0]:${name}`
}

function recordingLogger(): Logger & { warnings: Array<{ fields: object; message: string | undefined }> } {
  const warnings: Array<{ fields: object; message: string | undefined }> = []
  return { debug() {}, info() {}, error() {}, warn: (fields, message) => void warnings.push({ fields, message }), warnings }
}

describe('InProcessCircuitBreaker memory', () => {
  it('stores no circuit for healthy targets, and drops one once it closes', () => {
    const cb = new InProcessCircuitBreaker()
    for (let i = 0; i < 100; i++) {
      expect(cb.allow(`k${i}`, SETTING, T0)).toBe(true)
      cb.record(`k${i}`, SETTING, true, T0)
    }
    expect(cb.size).toBe(0)
    cb.record('k', SETTING, false, T0)
    expect(cb.peek('k')).toEqual({ failures: 1, openUntil: 0, probeUntil: 0 })
    cb.record('k', SETTING, true, T0)
    expect(cb.size).toBe(0)
  })

  it('keeps at most maxCircuits, dropping the circuit whose last failure is oldest', () => {
    const cb = new InProcessCircuitBreaker({ maxCircuits: 3 })
    const one = { failureThreshold: 1, cooldownMs: 30_000 }
    for (const name of ['a', 'b', 'c']) cb.record(name, one, false, T0)
    // A fresh failure on the circuit 'a' would make it the newest; here 'a' is reopened (half-open).
    cb.record('a', one, false, T0 + one.cooldownMs)
    cb.record('d', one, false, T0)
    expect(cb.size).toBe(3)
    expect(cb.peek('b')).toBeUndefined()
    expect(cb.allow('b', one, T0 + 1)).toBe(true)
    expect(cb.allow('a', one, T0 + one.cooldownMs + 1)).toBe(false)
    expect(cb.allow('c', one, T0 + 1)).toBe(false)
    for (let i = 0; i < 1_000; i++) cb.record(`flood${i}`, SETTING, false, T0)
    expect(cb.size).toBe(3)
  })
})

describe('RedisCircuitBreaker on the shared server', () => {
  const made: RedisCircuitBreaker[] = []
  let admin: Redis

  async function breaker(options: Partial<RedisCircuitBreakerOptions> = {}): Promise<RedisCircuitBreaker> {
    const instance = new RedisCircuitBreaker({ url: inject('redisUrl'), ...options })
    made.push(instance)
    await instance.start()
    return instance
  }

  beforeAll(() => {
    admin = new Redis(inject('redisUrl'))
  })

  afterAll(async () => {
    await Promise.all(made.map((instance) => instance.close()))
    admin?.disconnect()
  })

  it('keeps {f, o, p} in one hash per circuit that expires an hour after the cool-down, and none for healthy targets', async () => {
    const cb = await breaker()
    const key = circuit('hash')
    cb.record(key, SETTING, true, T0)
    await cb.settled()
    expect(await admin.exists(`gateway:cb:${key}`)).toBe(0)
    cb.record(key, SETTING, false, T0)
    await cb.settled()
    expect(await admin.hgetall(`gateway:cb:${key}`)).toEqual({ f: '1', o: '0', p: '0' })
    const ttl = await admin.pttl(`gateway:cb:${key}`)
    expect(ttl).toBeGreaterThan(SETTING.cooldownMs + 3_600_000 - 5_000)
    expect(ttl).toBeLessThanOrEqual(SETTING.cooldownMs + 3_600_000)
    cb.record(key, SETTING, false, T0)
    cb.record(key, SETTING, false, T0)
    await cb.settled()
    expect(await admin.hgetall(`gateway:cb:${key}`)).toEqual({ f: '0', o: String(T0 + SETTING.cooldownMs), p: '0' })
    expect(await cb.allow(key, SETTING, T0 + SETTING.cooldownMs)).toBe(true)
    expect(await admin.hget(`gateway:cb:${key}`, 'p')).toBe(String(T0 + 2 * SETTING.cooldownMs))
    cb.record(key, SETTING, true, T0 + SETTING.cooldownMs)
    await cb.settled()
    expect(await admin.exists(`gateway:cb:${key}`)).toBe(0)
    expect(cb.peek(key)).toBeUndefined()
  })

  it('keeps whole milliseconds in Redis and the mirror when the caller’s clock has fractions', async () => {
    const cb = await breaker()
    const key = circuit('fractions')
    cb.record(key, { failureThreshold: 1, cooldownMs: 30_000 }, false, T0 + 0.625)
    await cb.settled()
    expect(await admin.hget(`gateway:cb:${key}`, 'o')).toBe(String(T0 + 30_000))
    expect(cb.peek(key)?.openUntil).toBe(T0 + 30_000)
  })

  it('resets failures counted on one instance when another records a success', async () => {
    const [a, b] = [await breaker(), await breaker()]
    const key = circuit('reset-across')
    a.record(key, SETTING, false, T0)
    a.record(key, SETTING, false, T0)
    await a.settled()
    // b learns of the failures from the published `failing` state, so its success goes to Redis.
    await vi.waitFor(() => expect(b.peek(key)?.failures).toBeGreaterThan(0), WAIT)
    b.record(key, SETTING, true, T0 + 1)
    await b.settled()
    await vi.waitFor(() => expect(a.peek(key)).toBeUndefined(), WAIT)
    a.record(key, SETTING, false, T0 + 2)
    a.record(key, SETTING, false, T0 + 2)
    await a.settled()
    expect(a.allow(key, SETTING, T0 + 3)).toBe(true)
  })

  it('keeps at most maxCircuits mirrored', async () => {
    const cb = await breaker({ maxCircuits: 5 })
    for (let i = 0; i < 50; i++) cb.record(circuit(`flood${i}`), SETTING, false, T0)
    await cb.settled()
    expect(cb.stats().circuits).toBeLessThanOrEqual(5)
  })
})

/** A TCP proxy in front of Redis that can cut every connection and refuse new ones, then heal. */
async function startProxy(target: URL): Promise<{ url: string; cut(): void; heal(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  let down = false
  const server: Server = createServer((client) => {
    if (down) return void client.destroy()
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 6379) })
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
      socket.on('error', () => {})
    }
    client.pipe(upstream).pipe(client)
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `redis://127.0.0.1:${port}`,
    cut() {
      down = true
      for (const socket of sockets) socket.destroy()
    },
    heal() {
      down = false
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

describe('RedisCircuitBreaker when Redis goes away', () => {
  let redis: RedisService

  beforeAll(async () => {
    redis = await startRedis()
  })

  afterAll(async () => {
    await redis?.stop()
  })

  it('never refuses because of Redis: counts, opens, probes and closes in the instance, logging errors rate-limited', async () => {
    const own = await startRedis()
    const logger = recordingLogger()
    const cb = new RedisCircuitBreaker({ url: own.url, logger })
    await cb.start()
    try {
      const healthy = circuit('healthy')
      const failing = circuit('failing')
      cb.record(failing, SETTING, false, T0)
      await cb.settled()
      await own.stop()
      await vi.waitFor(async () => expect((await cb.health()).ok).toBe(false), WAIT)

      expect(cb.allow(healthy, SETTING, T0)).toBe(true)
      cb.record(failing, SETTING, false, T0 + 1)
      await cb.settled()
      expect(cb.allow(failing, SETTING, T0 + 2)).toBe(true)
      cb.record(failing, SETTING, false, T0 + 2)
      await cb.settled()
      // Three failures in a row (one counted by Redis, two here): open.
      expect(cb.allow(failing, SETTING, T0 + 3)).toBe(false)
      const probeAt = T0 + 2 + SETTING.cooldownMs
      const answers = await Promise.all([cb.allow(failing, SETTING, probeAt), cb.allow(failing, SETTING, probeAt), cb.allow(failing, SETTING, probeAt)])
      expect(answers).toEqual([true, false, false])
      cb.record(failing, SETTING, true, probeAt + 10)
      await cb.settled()
      expect(cb.allow(failing, SETTING, probeAt + 20)).toBe(true)

      expect(cb.stats().errors).toBe(4)
      expect(logger.warnings).toHaveLength(1)
      expect(logger.warnings[0]?.message).toContain('cannot reach Redis')
      expect(logger.warnings[0]?.fields).toMatchObject({ operation: 'record', errors: 1 })
    } finally {
      await cb.close()
    }
    expect(await cb.health()).toEqual({ ok: false, detail: 'closed' })
  })

  it('keeps working after the server forgot its scripts (NOSCRIPT → EVAL)', async () => {
    const admin = new Redis(redis.url)
    const cb = new RedisCircuitBreaker({ url: redis.url })
    await cb.start()
    const key = circuit('noscript')
    await admin.script('FLUSH')
    cb.record(key, SETTING, false, T0)
    cb.record(key, SETTING, false, T0)
    cb.record(key, SETTING, false, T0)
    await cb.settled()
    expect(cb.allow(key, SETTING, T0 + 1)).toBe(false)
    await admin.script('FLUSH')
    expect(await cb.allow(key, SETTING, T0 + SETTING.cooldownMs)).toBe(true)
    cb.record(key, SETTING, true, T0 + SETTING.cooldownMs)
    await cb.settled()
    expect(cb.allow(key, SETTING, T0 + SETTING.cooldownMs)).toBe(true)
    // EVAL cached both scripts again: later calls go through EVALSHA.
    const shas = [RECORD_SCRIPT, CLAIM_SCRIPT].map((source) => createHash('sha1').update(source).digest('hex'))
    expect(await admin.script('EXISTS', ...shas)).toEqual([1, 1])
    expect(cb.stats().errors).toBe(0)
    await cb.close()
    admin.disconnect()
  })

  it('sends nothing to Redis for outcomes of a healthy target', async () => {
    const admin = new Redis(redis.url)
    const cb = new RedisCircuitBreaker({ url: redis.url })
    await cb.start()
    const key = circuit('quiet')
    const before = Number((await admin.info('stats')).match(/total_commands_processed:(\d+)/)?.[1])
    for (let i = 0; i < 200; i++) {
      expect(cb.allow(key, SETTING, T0)).toBe(true)
      cb.record(key, SETTING, true, T0)
    }
    await cb.settled()
    const after = Number((await admin.info('stats')).match(/total_commands_processed:(\d+)/)?.[1])
    await cb.close()
    admin.disconnect()
    // The server is this describe's own: only the first INFO command itself ran.
    expect(after - before).toBe(1)
  })

  it('re-reads its circuits after its subscriber missed messages', async () => {
    const proxy = await startProxy(new URL(redis.url))
    const a = new RedisCircuitBreaker({ url: redis.url })
    const b = new RedisCircuitBreaker({ url: proxy.url })
    await Promise.all([a.start(), b.start()])
    try {
      const key = circuit('missed')
      b.record(key, SETTING, false, T0)
      await b.settled()
      expect(b.peek(key)?.failures).toBe(1)
      proxy.cut()
      await vi.waitFor(async () => expect((await b.health()).ok).toBe(false), WAIT)
      a.record(key, SETTING, false, T0 + 1)
      a.record(key, SETTING, false, T0 + 1)
      await a.settled()
      expect(a.allow(key, SETTING, T0 + 2)).toBe(false)
      // b missed the `open` message while cut off; it still says closed, until it reconnects.
      expect(b.allow(key, SETTING, T0 + 2)).toBe(true)
      proxy.heal()
      await vi.waitFor(() => expect(b.allow(key, SETTING, T0 + 2)).toBe(false), WAIT)
      expect(b.peek(key)).toEqual({ failures: 0, openUntil: T0 + 1 + SETTING.cooldownMs, probeUntil: 0 })
    } finally {
      await Promise.all([a.close(), b.close()])
      await proxy.close()
    }
  })
})

describe('RedisCircuitBreaker URL handling', () => {
  it('refuses other schemes', () => {
    expect(() => new RedisCircuitBreaker({ url: 'http://127.0.0.1:6379' })).toThrow(/redis:\/\//)
  })

  it('fails start against a closed port with a message naming REDIS_URL, password masked', async () => {
    const [port] = (await freePorts(1)) as [number]
    const cb: CircuitBreaker = new RedisCircuitBreaker({ url: `redis://user:s3cret@127.0.0.1:${port}`, startTimeoutMs: 300 })
    const failure = (await cb.start().catch((error: unknown) => error)) as Error
    expect(failure.message).toContain('circuit breaker cannot reach Redis at REDIS_URL=redis://user:***@127.0.0.1')
    expect(failure.message).not.toContain('s3cret')
    await cb.close()
  })
})
