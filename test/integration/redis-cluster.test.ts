/**
 * The Redis rate limiter on a real three-node Redis Cluster: the whole limiter contract (multi-key
 * Lua scripts, exactness under concurrency from several clients), keys of many workspaces spread
 * over the nodes, and the plugin's bucket keys sharing one slot per request.
 */
import { randomUUID } from 'node:crypto'
import { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RedisRateLimiter } from '../../adapters/redis/redis-rate-limiter.js'
import { ClientAbort, RequestContext, type Principal } from '../../core/context.js'
import { isGatewayError } from '../../core/errors.js'
import type { LimitSubject } from '../../core/limits.js'
import { INFERENCE_ROUTES, type RouteSpec } from '../../core/routes.js'
import { RateLimitPlugin } from '../../plugins/rate-limit/plugin.js'
import { describeRateLimiterContract } from '../contract/rate-limiter.contract.js'
import { startRedisCluster, type RedisClusterService } from '../helpers/redis-cluster.js'

let cluster: RedisClusterService
let admin: Cluster

beforeAll(async () => {
  cluster = await startRedisCluster()
  admin = new Cluster([{ host: '127.0.0.1', port: cluster.ports[0] as number }])
})

afterAll(async () => {
  admin?.disconnect()
  await cluster?.stop()
})

describeRateLimiterContract(
  'redis cluster',
  async () => {
    const limiter = new RedisRateLimiter({ url: cluster.url })
    await limiter.start()
    return limiter
  },
  { sharedState: true },
)

describe('RedisRateLimiter on Redis Cluster', () => {
  it('runs one script per call for workspaces whose keys live on different nodes', async () => {
    const limiter = new RedisRateLimiter({ url: cluster.url })
    await limiter.start()
    try {
      const nodesUsed = new Set<string>()
      for (let i = 0; i < 12; i++) {
        const tag = randomUUID()
        const buckets = ['api-key', 'workspace', 'virtual-key'].map((kind) => ({ key: `rl:{${tag}}:${kind}:${randomUUID()}:requests:rpm`, capacity: 1, windowMs: 60_000 }))
        const take = buckets.map((bucket) => ({ bucket, take: 1, require: 0 }))
        expect(await limiter.acquire(take, Date.now())).toEqual({ allowed: true })
        expect(await limiter.acquire(take, Date.now())).toMatchObject({ allowed: false, index: 0 })
        const slot = (await admin.cluster('KEYSLOT', buckets[0]?.key as string)) as number
        const ranges = await admin.cluster('SLOTS')
        const range = ranges.find(([from, to]) => slot >= from && slot <= to)
        nodesUsed.add(String(range?.[2]?.[1]))
      }
      // 12 random workspaces over 3 nodes: all on one node has a chance of 3 / 3^12.
      expect(nodesUsed.size).toBeGreaterThan(1)
    } finally {
      await limiter.close()
    }
  })

  it('refuses keys of two slots in one call (why every key carries the workspace hash tag)', async () => {
    const limiter = new RedisRateLimiter({ url: cluster.url })
    await limiter.start()
    try {
      // Two tags whose slots differ.
      let other = randomUUID()
      const first = randomUUID()
      const slotOf = async (tag: string): Promise<number> => (await admin.cluster('KEYSLOT', `{${tag}}`)) as number
      while ((await slotOf(other)) === (await slotOf(first))) other = randomUUID()
      const take = [first, other].map((tag) => ({ bucket: { key: `rl:{${tag}}:x`, capacity: 5, windowMs: 60_000 }, take: 1, require: 0 }))
      await expect(limiter.acquire(take, Date.now())).rejects.toThrow()
    } finally {
      await limiter.close()
    }
  })

  it('checks the API key, workspace and virtual key of a plugin request in one script', async () => {
    const limiter = new RedisRateLimiter({ url: cluster.url })
    await limiter.start()
    const plugin = new RateLimitPlugin({ failMode: 'closed' }, limiter, { now: () => Date.now() }, { debug() {}, info() {}, warn() {}, error() {} })
    try {
      const workspaceId = randomUUID()
      const subject = (kind: LimitSubject['kind'], value: number): LimitSubject => ({
        kind,
        id: randomUUID(),
        label: `${kind} x`,
        rateLimits: [{ type: 'requests', unit: 'rpm', value }],
        usageLimits: [],
      })
      const key = subject('api-key', 5)
      const workspace = subject('workspace', 3)
      const virtualKey = subject('virtual-key', 10)
      const chat = INFERENCE_ROUTES.find((route) => route.id === 'chat.completions') as RouteSpec
      const request = (): RequestContext => {
        const ctx = new RequestContext({
          requestId: randomUUID(),
          traceId: 't',
          receivedAt: Date.now(),
          startedAt: 0,
          method: 'POST',
          path: chat.pattern,
          query: '',
          headers: {},
          clientIp: null,
          route: chat,
          params: {},
          signal: new ClientAbort(),
        })
        const principal: Principal = {
          kind: 'api-key',
          keyId: key.id,
          keyType: 'workspace-service',
          organisationId: randomUUID(),
          workspaceId,
          userId: null,
          scopes: new Set(),
          credentialHeader: 'x-gateway-api-key',
          limitSubjects: [key, workspace],
        }
        ctx.principal = principal
        ctx.virtualKey = virtualKey
        ctx.body = {}
        return ctx
      }
      const results = await Promise.all(Array.from({ length: 8 }, () => plugin.onAccess(request())))
      expect(results.filter((result) => result === undefined)).toHaveLength(3)
      const refusals = results.filter(isGatewayError)
      expect(refusals).toHaveLength(5)
      expect(refusals[0]?.message).toContain('workspace x')
      expect(plugin.stats()).toEqual({ refused: 5, acquireErrors: 0, chargeErrors: 0 })
      // The API key's bucket holds 5 - 3 (plus a few ms of refill): refused calls took nothing from it.
      const stored = Number(await admin.hget(`rl:{${workspaceId}}:api-key:${key.id}:requests:rpm`, 'tokens'))
      expect(stored).toBeGreaterThanOrEqual(2)
      expect(stored).toBeLessThan(2.1)
    } finally {
      await limiter.close()
    }
  })
})
