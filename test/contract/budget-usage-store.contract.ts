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

    it('prunes the counters that ended before a time; counters that never end are kept', async () => {
      const { store } = await target()
      const [ended, later, lifetime, unstated] = [key('ended'), key('later'), key('lifetime'), key('unstated')]
      await store.add([
        { key: ended, amount: 1, expiresAt: 1_000 },
        { key: later, amount: 2, expiresAt: 5_000 },
        { key: lifetime, amount: 3, expiresAt: null },
        { key: unstated, amount: 4 },
      ])
      expect(await store.prune(3_000)).toBeGreaterThanOrEqual(1)
      expect(await store.totals([ended, later, lifetime, unstated])).toEqual([0, 2, 3, 4])
      // Far in the future: every counter with an end is gone, those without one stay.
      await store.prune(Date.now() + 10 * 365 * 86_400_000)
      expect(await store.totals([ended, later, lifetime, unstated])).toEqual([0, 0, 3, 4])
    })

    it('moves an end later, never earlier; never ending wins; a counter without an end takes the one written', async () => {
      const { store } = await target()
      const [movedLater, keptLater, madeLifetime, givenEnd, sameCall] = [key('a'), key('b'), key('c'), key('d'), key('e')]
      await store.add([
        { key: movedLater, amount: 1, expiresAt: 2_000 },
        { key: keptLater, amount: 1, expiresAt: 8_000 },
        { key: madeLifetime, amount: 1, expiresAt: 2_000 },
        { key: givenEnd, amount: 1, expiresAt: null },
      ])
      await store.add([
        { key: movedLater, amount: 1, expiresAt: 8_000 },
        { key: keptLater, amount: 1, expiresAt: 2_000 },
        { key: madeLifetime, amount: 1, expiresAt: null },
        { key: givenEnd, amount: 1, expiresAt: 2_000 },
      ])
      await store.add([
        { key: sameCall, amount: 1, expiresAt: 2_000 },
        { key: sameCall, amount: 1, expiresAt: 8_000 },
      ])
      await store.prune(5_000)
      expect(await store.totals([movedLater, keptLater, madeLifetime, givenEnd, sameCall])).toEqual([2, 2, 2, 0, 2])
      await store.prune(9_000)
      expect(await store.totals([movedLater, keptLater, madeLifetime, sameCall])).toEqual([0, 0, 2, 0])
    })

    it('prunes nothing when nothing ended, and counts what it deleted', async () => {
      const { store } = await target()
      const tag = randomUUID()
      const keys = [0, 1, 2].map((index) => `gw:budget:{${tag}}:${index}`)
      await store.add(keys.map((name, index) => ({ key: name, amount: 1, expiresAt: 10 + index })))
      expect(await store.prune(10)).toBe(0)
      expect(await store.prune(12)).toBe(2)
      expect(await store.totals(keys)).toEqual([0, 0, 1])
    })

    it('reports health', async () => {
      const { store } = await target()
      expect(await store.health()).toEqual({ ok: true })
    })
  })
}
