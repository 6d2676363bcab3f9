import { createServer, type AddressInfo } from 'node:net'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { LEASE_SLOT_MS, RedisBudgetLedger } from '../../adapters/redis/redis-budget-ledger.js'
import { counter, testTag } from './budget-fixtures.js'
import { describeBudgetLedgerContract } from './budget-ledger.contract.js'

let admin: Redis

beforeAll(() => {
  admin = new Redis(inject('redisUrl'), { lazyConnect: true, maxRetriesPerRequest: 1 })
})

afterAll(async () => {
  await admin.quit()
})

describeBudgetLedgerContract('redis', async () => {
  const ledger = new RedisBudgetLedger({ url: inject('redisUrl') })
  await ledger.start()
  return {
    ledger,
    // What FLUSHALL does to these counters, without touching other tests' keys on the shared server.
    async forget(keys) {
      if (keys.length > 0) await admin.del(...keys)
      return ledger
    },
    close: () => ledger.close(),
  }
})

describe('RedisBudgetLedger', () => {
  it('stops counting a reservation that was never settled once its lease is over (a crashed instance)', async () => {
    const ledger = new RedisBudgetLedger({ url: inject('redisUrl'), leaseMs: 120_000 })
    await ledger.start()
    try {
      const a = counter(testTag(), 'a', 100)
      await ledger.seed([{ counter: a, used: 0 }])
      const start = Date.now()
      expect((await ledger.reserve([{ counter: a, amount: 100 }], start)).kind).toBe('reserved')
      expect((await ledger.reserve([{ counter: a, amount: 1 }], start + 60_000)).kind).toBe('refused')
      // Two minutes (two lease slots) later the orphaned 100 no longer holds the budget.
      expect((await ledger.reserve([{ counter: a, amount: 1 }], start + 120_000 + LEASE_SLOT_MS)).kind).toBe('reserved')
      const fields = await admin.hkeys(a.key)
      expect(fields.filter((field) => field.startsWith('r:'))).toHaveLength(1)
    } finally {
      await ledger.close()
    }
  })

  it('keeps a counter as one hash, tagged with the workspace, expiring with its period', async () => {
    const ledger = new RedisBudgetLedger({ url: inject('redisUrl') })
    await ledger.start()
    try {
      const tag = testTag()
      const expiresAt = Date.now() + 3_600_000
      const a = counter(tag, 'a', 100, expiresAt)
      await ledger.seed([{ counter: a, used: 12 }])
      const held = await ledger.reserve([{ counter: a, amount: 30 }], Date.now())
      expect(await admin.hget(a.key, 'u')).toBe('12')
      const expireTime = await admin.pexpiretime(a.key)
      expect(Math.abs(expireTime - expiresAt)).toBeLessThanOrEqual(1)
      await ledger.settle([{ counter: a, reserved: 30, actual: 20 }], held.kind === 'reserved' ? held.lease : -1)
      expect(await admin.hgetall(a.key)).toEqual({ u: '32' })
    } finally {
      await ledger.close()
    }
  })

  it('rejects (so the plugin fails closed) when Redis cannot be reached, naming REDIS_URL with the password masked', async () => {
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const { port } = closed.address() as AddressInfo
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const ledger = new RedisBudgetLedger({ url: `redis://gw:s3cret@127.0.0.1:${port}`, startTimeoutMs: 200 })
    const failure = await ledger.start().then(
      () => null,
      (error: unknown) => error as Error,
    )
    expect(failure?.message).toContain(`REDIS_URL=redis://gw:***@127.0.0.1:${port}`)
    expect(failure?.message).not.toContain('s3cret')
    await expect(ledger.reserve([{ counter: counter(testTag(), 'a', 1), amount: 1 }], Date.now())).rejects.toThrow()
    expect((await ledger.health()).ok).toBe(false)
    await ledger.close()
  })
})
