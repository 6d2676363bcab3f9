import { createHash, randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import { ACQUIRE_SCRIPT, CHARGE_SCRIPT, isClusterUrl, RedisRateLimiter } from '../../adapters/redis/redis-rate-limiter.js'
import { ClientAbort, RequestContext, type Principal } from '../../core/context.js'
import { isGatewayError, type GatewayError } from '../../core/errors.js'
import type { BucketSpec, LimitSubject } from '../../core/limits.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../core/routes.js'
import type { Logger } from '../../core/service.js'
import { RateLimitPlugin } from '../../plugins/rate-limit/plugin.js'
import { freePorts, startRedis, type RedisService } from '../helpers/services.js'
import { describeRateLimiterContract } from './rate-limiter.contract.js'

describeRateLimiterContract(
  'redis',
  async () => {
    const limiter = new RedisRateLimiter({ url: inject('redisUrl') })
    await limiter.start()
    return limiter
  },
  { sharedState: true },
)

const T0 = 1_800_000_000_000
const MINUTE = 60_000

function tagged(name: string, capacity: number, windowMs = MINUTE): BucketSpec {
  return { key: `rl:{rlr-${randomUUID()}}:${name}`, capacity, windowMs }
}

describe('RedisRateLimiter on its own server', () => {
  let redis: RedisService
  let admin: Redis

  beforeAll(async () => {
    redis = await startRedis()
    admin = new Redis(redis.url)
  })

  afterAll(async () => {
    admin?.disconnect()
    await redis?.stop()
  })

  it('stores {tokens, ts} in a hash that expires after two idle windows, later when below zero', async () => {
    const limiter = new RedisRateLimiter({ url: redis.url })
    await limiter.start()
    try {
      const now = Date.now()
      const requests = tagged('requests', 3)
      await limiter.acquire([{ bucket: requests, take: 1, require: 0 }], now)
      expect(await admin.hgetall(requests.key)).toEqual({ tokens: '2', ts: String(now) })
      const ttl = await admin.pttl(requests.key)
      expect(ttl).toBeGreaterThan(2 * MINUTE - 5_000)
      expect(ttl).toBeLessThanOrEqual(2 * MINUTE)

      const tokens = tagged('tokens', 100)
      await limiter.charge([{ bucket: tokens, amount: 1_100 }], now)
      expect(Number(await admin.hget(tokens.key, 'tokens'))).toBe(-1_000)
      // 1100 tokens to refill at 100 per minute: 11 minutes.
      expect(await admin.pttl(tokens.key)).toBeGreaterThan(11 * MINUTE - 5_000)
    } finally {
      await limiter.close()
    }
  })

  it('keeps working after the server forgot its scripts (NOSCRIPT → EVAL)', async () => {
    const limiter = new RedisRateLimiter({ url: redis.url })
    await limiter.start()
    try {
      const bucket = tagged('noscript', 2)
      expect((await limiter.acquire([{ bucket, take: 1, require: 0 }], T0)).allowed).toBe(true)
      await admin.script('FLUSH')
      expect((await limiter.acquire([{ bucket, take: 1, require: 0 }], T0)).allowed).toBe(true)
      await admin.script('FLUSH')
      await limiter.charge([{ bucket, amount: 5 }], T0)
      expect(await limiter.acquire([{ bucket, take: 1, require: 0 }], T0)).toEqual({ allowed: false, index: 0, retryAfterMs: 3 * MINUTE })
      // EVAL cached both scripts again: later calls go through EVALSHA.
      const shas = [ACQUIRE_SCRIPT, CHARGE_SCRIPT].map((source) => createHash('sha1').update(source).digest('hex'))
      expect(await admin.script('EXISTS', ...shas)).toEqual([1, 1])
    } finally {
      await limiter.close()
    }
  })

  it('reports unhealthy and fails fast once the server is gone', async () => {
    const own = await startRedis()
    const limiter = new RedisRateLimiter({ url: own.url })
    await limiter.start()
    expect(await limiter.health()).toEqual({ ok: true })
    await own.stop()
    const started = Date.now()
    await expect(limiter.acquire([{ bucket: tagged('gone', 5), take: 1, require: 0 }], T0)).rejects.toThrow()
    expect(Date.now() - started).toBeLessThan(5_000)
    await vi.waitFor(async () => expect((await limiter.health()).ok).toBe(false), { timeout: 5_000 })
    await limiter.close()
    expect(await limiter.health()).toEqual({ ok: false, detail: 'closed' })
  })
})

describe('RedisRateLimiter URL handling', () => {
  it('recognises ?cluster=true only', () => {
    expect(isClusterUrl('redis://10.0.0.1:6379?cluster=true')).toBe(true)
    expect(isClusterUrl('rediss://user:pw@host:7000/0?cluster=true')).toBe(true)
    expect(isClusterUrl('redis://10.0.0.1:6379')).toBe(false)
    expect(isClusterUrl('redis://10.0.0.1:6379?cluster=false')).toBe(false)
  })

  it('refuses other schemes', () => {
    expect(() => new RedisRateLimiter({ url: 'http://127.0.0.1:6379' })).toThrow(/redis:\/\//)
  })

  it('fails start against a closed port with a message naming REDIS_URL, password masked', async () => {
    const [port] = (await freePorts(1)) as [number]
    const limiter = new RedisRateLimiter({ url: `redis://user:s3cret@127.0.0.1:${port}`, startTimeoutMs: 300 })
    const failure = (await limiter.start().catch((error: unknown) => error)) as Error
    expect(failure.message).toContain('REDIS_URL=redis://user:***@127.0.0.1')
    expect(failure.message).not.toContain('s3cret')
    await limiter.close()
  })
})

// ------------------------------------------------------------------------------------------------
// Redis down: the plugin's failure policy with the real adapter pointed at a closed port.

const chatRoute = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec

function subject(): LimitSubject {
  return { kind: 'api-key', id: randomUUID(), label: 'API key gw********abc', rateLimits: [{ type: 'requests', unit: 'rpm', value: 10 }], usageLimits: [] }
}

function requestContext(limits: LimitSubject): RequestContext {
  const ctx = new RequestContext({
    requestId: randomUUID(),
    traceId: 'trace',
    receivedAt: Date.now(),
    startedAt: 0,
    method: 'POST',
    path: chatRoute.pattern,
    query: '',
    headers: {},
    clientIp: null,
    route: chatRoute,
    params: {},
    signal: new ClientAbort(),
  })
  const principal: Principal = {
    kind: 'api-key',
    keyId: limits.id,
    keyType: 'workspace-service',
    organisationId: randomUUID(),
    workspaceId: randomUUID(),
    userId: null,
    scopes: new Set(['completions.write']),
    credentialHeader: 'x-gateway-api-key',
    limitSubjects: [limits],
  }
  ctx.principal = principal
  ctx.body = { model: 'm', messages: [] }
  return ctx
}

function recordingLogger(): Logger & { warnings: Array<{ fields: object; message: string | undefined }> } {
  const warnings: Array<{ fields: object; message: string | undefined }> = []
  return { debug() {}, info() {}, error() {}, warn: (fields, message) => void warnings.push({ fields, message }), warnings }
}

describe('rate-limit plugin with Redis down', () => {
  let closedUrl: string

  beforeAll(async () => {
    const [port] = (await freePorts(1)) as [number]
    closedUrl = `redis://127.0.0.1:${port}`
  })

  it('fails open: the request passes, and the failure is counted and logged', async () => {
    const limiter = new RedisRateLimiter({ url: closedUrl })
    const logger = recordingLogger()
    const plugin = new RateLimitPlugin({ failMode: 'open' }, limiter, { now: () => Date.now() }, logger)
    try {
      const started = Date.now()
      expect(await plugin.onAccess(requestContext(subject()))).toBeUndefined()
      expect(await plugin.onAccess(requestContext(subject()))).toBeUndefined()
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(plugin.stats()).toEqual({ refused: 0, acquireErrors: 2, chargeErrors: 0 })
      // Logged once (then throttled), with the count.
      expect(logger.warnings).toHaveLength(1)
      expect(logger.warnings[0]?.message).toContain('failMode open')
      expect(logger.warnings[0]?.fields).toMatchObject({ operation: 'acquire', acquireErrors: 1 })
    } finally {
      await limiter.close()
    }
  })

  it('fails closed: the request gets 503 GW_RATE_LIMIT_UNAVAILABLE', async () => {
    const limiter = new RedisRateLimiter({ url: closedUrl })
    const logger = recordingLogger()
    const plugin = new RateLimitPlugin({ failMode: 'closed' }, limiter, { now: () => Date.now() }, logger)
    try {
      const result = await plugin.onAccess(requestContext(subject()))
      expect(isGatewayError(result)).toBe(true)
      expect(result as GatewayError).toMatchObject({ status: 503, code: 'GW_RATE_LIMIT_UNAVAILABLE', type: 'service_unavailable_error' })
      expect(plugin.stats().acquireErrors).toBe(1)
      expect(logger.warnings[0]?.message).toContain('failMode closed')
    } finally {
      await limiter.close()
    }
  })

  it('reaches the limiter only for requests with rules', async () => {
    const limiter = new RedisRateLimiter({ url: closedUrl })
    const plugin = new RateLimitPlugin({ failMode: 'closed' }, limiter, { now: () => Date.now() }, recordingLogger())
    try {
      expect(await plugin.onAccess(requestContext({ ...subject(), rateLimits: [] }))).toBeUndefined()
      expect(plugin.stats().acquireErrors).toBe(0)
    } finally {
      await limiter.close()
    }
  })
})
