/**
 * The Redis budget ledger on a real three-node Redis Cluster: the whole ledger contract (multi-key
 * Lua scripts need every key of a call in one slot: the workspace hash tag), and counters of many
 * workspaces spread over the nodes.
 */
import { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RedisBudgetLedger } from '../../adapters/redis/redis-budget-ledger.js'
import { startRedisCluster, type RedisClusterService } from '../helpers/redis-cluster.js'
import { counter, testTag } from './budget-fixtures.js'
import { describeBudgetLedgerContract } from './budget-ledger.contract.js'

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

describeBudgetLedgerContract('redis cluster', async () => {
  const ledger = new RedisBudgetLedger({ url: cluster.url })
  await ledger.start()
  return {
    ledger,
    async forget(keys) {
      for (const key of keys) await admin.del(key)
      return ledger
    },
    close: () => ledger.close(),
  }
})

describe('RedisBudgetLedger on Redis Cluster', () => {
  it('serves counters of many workspaces, spread over every node, each request in one slot', async () => {
    const ledger = new RedisBudgetLedger({ url: cluster.url })
    await ledger.start()
    try {
      const workspaces = Array.from({ length: 30 }, () => testTag())
      for (const tag of workspaces) {
        const key = counter(tag, 'api-key:k:0:cost:0', 100)
        const workspace = counter(tag, 'workspace:w:0:cost:0', 100)
        expect(await ledger.reserve([{ counter: key, amount: 10 }, { counter: workspace, amount: 10 }], Date.now())).toEqual({ kind: 'unknown', indexes: [0, 1] })
        await ledger.seed([
          { counter: key, used: 5 },
          { counter: workspace, used: 7 },
        ])
        const held = await ledger.reserve([{ counter: key, amount: 10 }, { counter: workspace, amount: 10 }], Date.now())
        expect(held.kind).toBe('reserved')
        expect(await ledger.settle([{ counter: key, reserved: 10, actual: 3 }, { counter: workspace, reserved: 10, actual: 3 }], held.kind === 'reserved' ? held.lease : -1)).toEqual([8, 10])
      }
      const slots = new Set(await Promise.all(workspaces.map((tag) => admin.cluster('KEYSLOT', `gw:budget:${tag}:x`) as Promise<number>)))
      const nodes = new Set([...slots].map((slot) => admin.slots[slot]?.[0]))
      expect(nodes.size).toBe(3)
    } finally {
      await ledger.close()
    }
  })
})
