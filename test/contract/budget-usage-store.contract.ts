/** The `UsageStore` contract, run against every adapter (DuckDB file, MongoDB). */
import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import type { UsageStore } from '../../core/budgets.js'

export interface UsageStoreTarget {
  readonly store: UsageStore
  /** The same data opened again, as after a restart. */
  reopen(): Promise<UsageStore>
  close(): Promise<void>
}

export function describeUsageStoreContract(name: string, open: () => Promise<UsageStoreTarget>): void {
  describe(`UsageStore contract: ${name}`, () => {
    const targets: UsageStoreTarget[] = []
    async function target(): Promise<UsageStoreTarget> {
      const made = await open()
      targets.push(made)
      return made
    }

    afterEach(async () => {
      await Promise.all(targets.splice(0).map((entry) => entry.close()))
    })

    const key = (name: string) => `gw:budget:{${randomUUID()}}:${name}`

    it('adds amounts to the persisted totals, 0 for keys never written', async () => {
      const { store } = await target()
      const a = key('a')
      const b = key('b')
      await store.add([
        { key: a, amount: 7 },
        { key: b, amount: 1_000_000_000_000 },
      ])
      await store.add([
        { key: a, amount: 5 },
        { key: a, amount: 1 },
      ])
      expect(await store.totals([a, b, key('never')])).toEqual([13, 1_000_000_000_000, 0])
      expect(await store.totals([b, a, b])).toEqual([1_000_000_000_000, 13, 1_000_000_000_000])
      await store.add([])
      expect(await store.totals([])).toEqual([])
    })

    it('keeps totals exact for large nano-USD sums', async () => {
      const { store } = await target()
      const a = key('a')
      // 2^53 - 1 nano-USD ≈ 9 million USD: the largest exact integer.
      await store.add([{ key: a, amount: 9_007_199_254_740_000 }])
      await store.add([{ key: a, amount: 991 }])
      expect(await store.totals([a])).toEqual([9_007_199_254_740_991])
    })

    it('sums concurrent adds without losing any', async () => {
      const { store } = await target()
      const a = key('a')
      await Promise.all(Array.from({ length: 50 }, () => store.add([{ key: a, amount: 3 }])))
      expect(await store.totals([a])).toEqual([150])
    })

    it('records resets, keeping the latest per entity', async () => {
      const { store } = await target()
      const id = randomUUID()
      await store.recordReset({ kind: 'api-key', id, resetAt: 2_000 })
      await store.recordReset({ kind: 'api-key', id, resetAt: 1_000 })
      await store.recordReset({ kind: 'workspace', id, resetAt: 500 })
      const mine = (await store.listResets()).filter((reset) => reset.id === id)
      expect(mine.sort((x, y) => x.kind.localeCompare(y.kind))).toEqual([
        { kind: 'api-key', id, resetAt: 2_000 },
        { kind: 'workspace', id, resetAt: 500 },
      ])
      await store.recordReset({ kind: 'api-key', id, resetAt: 1_700_000_000_000 })
      expect((await store.listResets()).find((reset) => reset.id === id && reset.kind === 'api-key')?.resetAt).toBe(1_700_000_000_000)
    })

    it('keeps everything across a restart', async () => {
      const made = await target()
      const a = key('a')
      const id = randomUUID()
      await made.store.add([{ key: a, amount: 42 }])
      await made.store.recordReset({ kind: 'virtual-key', id, resetAt: 123 })
      const again = await made.reopen()
      expect(await again.totals([a])).toEqual([42])
      expect((await again.listResets()).filter((reset) => reset.id === id)).toEqual([{ kind: 'virtual-key', id, resetAt: 123 }])
    })

    it('reports health', async () => {
      const { store } = await target()
      expect(await store.health()).toEqual({ ok: true })
    })
  })
}
