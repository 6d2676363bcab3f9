/**
 * `RedisBudgetLedger.reserveWithBuckets` (a request's rate limits and budgets in one Lua script) and
 * batched settlements, on a single Redis server and on a real three-node Redis Cluster.
 */
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { RedisBudgetLedger } from '../../adapters/redis/redis-budget-ledger.js'
import { RedisRateLimiter } from '../../adapters/redis/redis-rate-limiter.js'
import type { BucketAcquire, BucketSpec } from '../../core/limits.js'
import { startRedisCluster, type RedisClusterService } from '../helpers/redis-cluster.js'
import { counter, testTag } from './budget-fixtures.js'

function bucket(tag: string, name: string, capacity: number): BucketSpec {
  // A day-long window: no refill worth a token during a test.
  return { key: `gw:rl:${tag}:${name}`, capacity, windowMs: 86_400_000 }
}

function takeOne(spec: BucketSpec): BucketAcquire {
  return { bucket: spec, take: 1, require: 0 }
}

interface Target {
  url(): string
  /** Reads one hash field (through the cluster when there is one). */
  hget(key: string, field: string): Promise<string | null>
}

function describeCombined(name: string, target: () => Target): void {
  describe(`reserveWithBuckets and batched settle on ${name}`, () => {
    let ledger: RedisBudgetLedger

    beforeAll(async () => {
      ledger = new RedisBudgetLedger({ url: target().url() })
      await ledger.start()
    })

    afterAll(async () => {
      await ledger?.close()
    })

    it('lets exactly 50 of 200 concurrent requests through a limit of 50, reserving budget only for them', async () => {
      const tag = testTag()
      const budget = counter(tag, 'budget', 1_000_000)
      await ledger.seed([{ counter: budget, used: 0 }])
      const limit = bucket(tag, 'rpm', 50)
      const now = Date.now()
      const decisions = await Promise.all(
        Array.from({ length: 200 }, () => ledger.reserveWithBuckets([{ counter: budget, amount: 10 }], [takeOne(limit)], now)),
      )
      expect(decisions.filter((decision) => decision.kind === 'reserved')).toHaveLength(50)
      expect(decisions.filter((decision) => decision.kind === 'rate-limited')).toHaveLength(150)
      const reserved = await target().hget(budget.key, `r:${Math.floor(now / 60_000)}`)
      expect(Number(reserved)).toBe(500)
    })

    it('takes no bucket token when the budget refuses, and reserves nothing when a bucket refuses', async () => {
      const tag = testTag()
      const exhausted = counter(tag, 'exhausted', 100)
      const open = counter(tag, 'open', 1_000)
      await ledger.seed([
        { counter: exhausted, used: 100 },
        { counter: open, used: 0 },
      ])
      const limit = bucket(tag, 'rpm', 1)
      const now = Date.now()
      expect(await ledger.reserveWithBuckets([{ counter: exhausted, amount: 1 }], [takeOne(limit)], now)).toEqual({ kind: 'refused', index: 0, used: 100 })
      // The bucket still holds its one token.
      expect((await ledger.reserveWithBuckets([{ counter: open, amount: 7 }], [takeOne(limit)], now)).kind).toBe('reserved')
      const refused = await ledger.reserveWithBuckets([{ counter: open, amount: 7 }], [takeOne(bucket(tag, 'other', 5)), takeOne(limit)], now)
      expect(refused).toMatchObject({ kind: 'rate-limited', index: 1 })
      expect(await target().hget(open.key, `r:${Math.floor(now / 60_000)}`)).toBe('7')
      expect(await target().hget(bucket(tag, 'other', 5).key, 'tokens')).toBeNull()
    })

    it('reports unknown counters without taking a bucket token, so the caller can seed and retry', async () => {
      const tag = testTag()
      const fresh = counter(tag, 'fresh', 100)
      const limit = bucket(tag, 'rpm', 1)
      const now = Date.now()
      expect(await ledger.reserveWithBuckets([{ counter: fresh, amount: 1 }], [takeOne(limit)], now)).toEqual({ kind: 'unknown', indexes: [0] })
      await ledger.seed([{ counter: fresh, used: 0 }])
      expect((await ledger.reserveWithBuckets([{ counter: fresh, amount: 1 }], [takeOne(limit)], now)).kind).toBe('reserved')
    })

    it('shares bucket state with RedisRateLimiter (same keys, same math)', async () => {
      const limiter = new RedisRateLimiter({ url: target().url() })
      await limiter.start()
      try {
        const tag = testTag()
        const budget = counter(tag, 'budget', 1_000)
        await ledger.seed([{ counter: budget, used: 0 }])
        const limit = bucket(tag, 'rpm', 2)
        const now = Date.now()
        expect(await limiter.acquire([takeOne(limit)], now)).toEqual({ allowed: true })
        expect((await ledger.reserveWithBuckets([{ counter: budget, amount: 1 }], [takeOne(limit)], now)).kind).toBe('reserved')
        expect(await limiter.acquire([takeOne(limit)], now)).toMatchObject({ allowed: false })
      } finally {
        await limiter.close()
      }
    })

    it('settles many concurrent reservations in batches, each caller getting its own counters back', async () => {
      const tag = testTag()
      const shared = counter(tag, 'shared', 1_000_000)
      const own = Array.from({ length: 100 }, (_, index) => counter(tag, `own-${index}`, 1_000_000))
      await ledger.seed([shared, ...own].map((entry) => ({ counter: entry, used: 0 })))
      const now = Date.now()
      const leases = await Promise.all(
        own.map(async (mine) => {
          const decision = await ledger.reserve([{ counter: shared, amount: 100 }, { counter: mine, amount: 100 }], now)
          if (decision.kind !== 'reserved') throw new Error(`not reserved: ${decision.kind}`)
          return decision.lease
        }),
      )
      const settled = await Promise.all(
        own.map((mine, index) =>
          ledger.settle(
            [
              { counter: shared, reserved: 100, actual: 3 },
              { counter: mine, reserved: 100, actual: index },
            ],
            leases[index] as number,
          ),
        ),
      )
      settled.forEach((usage, index) => expect(usage[1]).toBe(index))
      // The shared counter's usage grew by 3 per settlement, each seeing a distinct value.
      expect(new Set(settled.map((usage) => usage[0])).size).toBe(100)
      expect(await target().hget(shared.key, 'u')).toBe('300')
      expect(await target().hget(shared.key, `r:${Math.floor(now / 60_000)}`)).toBeNull()
    })

    it('applies a queued settlement in the next reserve call of its workspace, before that call decides', async () => {
      const patient = new RedisBudgetLedger({ url: target().url(), settleBatchMs: 60_000 })
      await patient.start()
      try {
        const tag = testTag()
        const spend = counter(tag, 'spend', 100)
        await patient.seed([{ counter: spend, used: 0 }])
        const now = Date.now()
        const held = await patient.reserve([{ counter: spend, amount: 100 }], now)
        expect(held.kind).toBe('reserved')
        let settledUsage: ReadonlyArray<number | null> | null = null
        const settling = patient.settle([{ counter: spend, reserved: 100, actual: 30 }], held.kind === 'reserved' ? held.lease : -1).then((usage) => {
          settledUsage = usage
        })
        await new Promise((resolve) => setTimeout(resolve, 50))
        // Still queued: the whole budget is reserved.
        expect(settledUsage).toBeNull()
        expect(await target().hget(spend.key, 'u')).toBe('0')
        // This call releases the 100, adds the 30, and then finds room for 50.
        expect((await patient.reserve([{ counter: spend, amount: 50 }], now)).kind).toBe('reserved')
        await settling
        expect(settledUsage).toEqual([30])
        expect(await target().hget(spend.key, 'u')).toBe('30')
      } finally {
        await patient.close()
      }
    })

    it('sends settlements still queued when it closes', async () => {
      const other = new RedisBudgetLedger({ url: target().url(), settleBatchMs: 60_000 })
      await other.start()
      const tag = testTag()
      const spend = counter(tag, 'spend', 1_000)
      await other.seed([{ counter: spend, used: 0 }])
      const held = await other.reserve([{ counter: spend, amount: 10 }], Date.now())
      const settled = other.settle([{ counter: spend, reserved: 10, actual: 4 }], held.kind === 'reserved' ? held.lease : -1)
      await other.close()
      expect(await settled).toEqual([4])
      expect(await target().hget(spend.key, 'u')).toBe('4')
    })
  })
}

let single: Redis
let cluster: RedisClusterService | null = null
let clusterAdmin: Cluster | null = null

beforeAll(async () => {
  single = new Redis(inject('redisUrl'), { lazyConnect: true, maxRetriesPerRequest: 1 })
  cluster = await startRedisCluster()
  clusterAdmin = new Cluster([{ host: '127.0.0.1', port: cluster.ports[0] as number }])
})

afterAll(async () => {
  await single?.quit()
  clusterAdmin?.disconnect()
  await cluster?.stop()
})

describeCombined('one Redis server', () => ({
  url: () => inject('redisUrl'),
  hget: (key, field) => single.hget(key, field),
}))

describeCombined('Redis Cluster', () => ({
  url: () => (cluster as RedisClusterService).url,
  hget: (key, field) => (clusterAdmin as Cluster).hget(key, field),
}))
