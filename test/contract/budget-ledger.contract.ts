/**
 * The `BudgetLedger` contract, run against every adapter (in process, Redis). Each test uses its
 * own hash tag, so runs sharing one Redis never see each other's counters.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { InProcessChangeNotifier } from '../../adapters/memory/in-process-change-notifier.js'
import type { BudgetCounter, BudgetLedger } from '../../core/budgets.js'
import type { Logger } from '../../core/service.js'
import { BudgetBook } from '../../plugins/budget/book.js'
import { MemoryUsageStore, counter, testTag } from './budget-fixtures.js'

export interface LedgerTarget {
  readonly ledger: BudgetLedger
  /**
   * Loses the given counters the way production does (Redis: the keys are deleted, as by a flush;
   * in process: a restart, which loses every counter). Returns the ledger to use from then on.
   */
  forget(keys: readonly string[]): Promise<BudgetLedger>
  close(): Promise<void>
}

const SILENT: Logger = { debug() {}, info() {}, warn() {}, error() {} }

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

async function seeded(ledger: BudgetLedger, ...counters: BudgetCounter[]): Promise<void> {
  await ledger.seed(counters.map((entry) => ({ counter: entry, used: 0 })))
}

export function describeBudgetLedgerContract(name: string, open: () => Promise<LedgerTarget>): void {
  describe(`BudgetLedger contract: ${name}`, () => {
    const targets: LedgerTarget[] = []
    async function target(): Promise<LedgerTarget> {
      const made = await open()
      targets.push(made)
      return made
    }

    afterEach(async () => {
      await Promise.all(targets.splice(0).map((entry) => entry.close()))
    })

    it('reports counters it does not hold as unknown, and then changes nothing', async () => {
      const { ledger } = await target()
      const tag = testTag()
      const a = counter(tag, 'a', 100)
      const b = counter(tag, 'b', 10)
      await ledger.seed([{ counter: b, used: 9 }])
      expect(await ledger.reserve([{ counter: a, amount: 5 }, { counter: b, amount: 5 }], Date.now())).toEqual({ kind: 'unknown', indexes: [0] })
      expect(await ledger.peek([a.key, b.key])).toEqual([null, 9])
      // b got no reservation from the refused call: 9 + 0 < 10 still admits.
      expect((await ledger.reserve([{ counter: b, amount: 1 }], Date.now())).kind).toBe('reserved')
    })

    it('seeds only counters it does not hold', async () => {
      const { ledger } = await target()
      const tag = testTag()
      const a = counter(tag, 'a', 100)
      await ledger.seed([{ counter: a, used: 30 }])
      await ledger.seed([{ counter: a, used: 99 }])
      expect(await ledger.peek([a.key])).toEqual([30])
    })

    it('admits while usage plus reservations is below the limit, then refuses with the counter and its usage', async () => {
      const { ledger } = await target()
      const a = counter(testTag(), 'a', 100)
      await ledger.seed([{ counter: a, used: 10 }])
      const now = Date.now()
      expect((await ledger.reserve([{ counter: a, amount: 40 }], now)).kind).toBe('reserved')
      expect((await ledger.reserve([{ counter: a, amount: 40 }], now)).kind).toBe('reserved')
      // 10 + 80 < 100: admitted, and may take the counter past its limit by its own reservation.
      expect((await ledger.reserve([{ counter: a, amount: 40 }], now)).kind).toBe('reserved')
      expect(await ledger.reserve([{ counter: a, amount: 1 }], now)).toEqual({ kind: 'refused', index: 0, used: 10 })
      expect(await ledger.reserve([{ counter: a, amount: 0 }], now)).toEqual({ kind: 'refused', index: 0, used: 10 })
    })

    it('is all or nothing across counters', async () => {
      const { ledger } = await target()
      const tag = testTag()
      const a = counter(tag, 'a', 81)
      const b = counter(tag, 'b', 50)
      await seeded(ledger, a, b)
      const now = Date.now()
      const both = [
        { counter: a, amount: 40 },
        { counter: b, amount: 40 },
      ]
      expect((await ledger.reserve(both, now)).kind).toBe('reserved')
      expect((await ledger.reserve(both, now)).kind).toBe('reserved')
      expect(await ledger.reserve(both, now)).toEqual({ kind: 'refused', index: 1, used: 0 })
      // a holds 80 of 81: the refused call added nothing to it, so one more request fits.
      expect((await ledger.reserve([{ counter: a, amount: 40 }], now)).kind).toBe('reserved')
      expect((await ledger.reserve([{ counter: a, amount: 40 }], now)).kind).toBe('refused')
    })

    it('settles: the reservation is replaced by the real amount, atomically, and the new usage returned', async () => {
      const { ledger } = await target()
      const tag = testTag()
      const a = counter(tag, 'a', 100)
      const b = counter(tag, 'b', 1_000)
      await seeded(ledger, a, b)
      const now = Date.now()
      const held = await ledger.reserve(
        [
          { counter: a, amount: 60 },
          { counter: b, amount: 60 },
        ],
        now,
      )
      expect(held.kind).toBe('reserved')
      const lease = held.kind === 'reserved' ? held.lease : -1
      expect(
        await ledger.settle(
          [
            { counter: a, reserved: 60, actual: 25 },
            { counter: b, reserved: 60, actual: 90 },
          ],
          lease,
        ),
      ).toEqual([25, 90])
      expect(await ledger.peek([a.key, b.key])).toEqual([25, 90])
      // Nothing of the 60 stays reserved on a: 25 + 70 + 4 < 100 admits three more.
      for (const amount of [70, 4, 1]) expect((await ledger.reserve([{ counter: a, amount }], now)).kind).toBe('reserved')
      expect(await ledger.reserve([{ counter: a, amount: 1 }], now)).toEqual({ kind: 'refused', index: 0, used: 25 })
    })

    it('never recreates a forgotten counter when settling (its history lives in the usage store)', async () => {
      const made = await target()
      const a = counter(testTag(), 'a', 100)
      await seeded(made.ledger, a)
      const held = await made.ledger.reserve([{ counter: a, amount: 10 }], Date.now())
      const ledger = await made.forget([a.key])
      const lease = held.kind === 'reserved' ? held.lease : -1
      expect(await ledger.settle([{ counter: a, reserved: 10, actual: 7 }], lease)).toEqual([null])
      expect(await ledger.peek([a.key])).toEqual([null])
      expect(await ledger.reserve([{ counter: a, amount: 1 }], Date.now())).toEqual({ kind: 'unknown', indexes: [0] })
    })

    it('forgets a counter once its period is over (expiresAt)', async () => {
      const { ledger } = await target()
      const a = counter(testTag(), 'a', 100, Date.now() + 300)
      await ledger.seed([{ counter: a, used: 5 }])
      expect(await ledger.peek([a.key])).toEqual([5])
      await sleep(600)
      expect(await ledger.peek([a.key])).toEqual([null])
      expect((await ledger.reserve([{ counter: a, amount: 1 }], Date.now())).kind).toBe('unknown')
    })

    it('a cost budget hit by 100 concurrent requests never ends above limit + in-flight reservations, and ends exhausted', async () => {
      const { ledger } = await target()
      // $0.01 in nano-USD; every request reserves a worst case of $0.0003 and really costs 50-100% of it.
      const limit = 10_000_000
      const worst = 300_000
      const tag = testTag()
      const budget = counter(tag, 'cost', limit)
      const workspace = counter(tag, 'workspace-cost', 1_000_000_000)
      await seeded(ledger, budget, workspace)
      let admitted = 0
      let refused = 0
      let inFlight = 0
      let maxInFlight = 0
      const request = async (): Promise<void> => {
        const decision = await ledger.reserve(
          [
            { counter: budget, amount: worst },
            { counter: workspace, amount: worst },
          ],
          Date.now(),
        )
        if (decision.kind !== 'reserved') {
          expect(decision.kind).toBe('refused')
          refused++
          return
        }
        admitted++
        maxInFlight = Math.max(maxInFlight, ++inFlight)
        await sleep(Math.random() * 5)
        const actual = Math.round(worst * (0.5 + Math.random() / 2))
        inFlight--
        await ledger.settle(
          [
            { counter: budget, reserved: worst, actual },
            { counter: workspace, reserved: worst, actual },
          ],
          decision.lease,
        )
      }
      // Waves of 100 concurrent requests until one wave is refused entirely.
      for (let wave = 0; wave < 20; wave++) {
        const before = admitted
        await Promise.all(Array.from({ length: 100 }, request))
        if (admitted === before) break
      }
      const [used, workspaceUsed] = (await ledger.peek([budget.key, workspace.key])) as [number, number]
      expect(maxInFlight).toBeGreaterThan(1)
      expect(refused).toBeGreaterThan(0)
      expect(used).toBeGreaterThanOrEqual(limit)
      expect(used).toBeLessThanOrEqual(limit + worst)
      // The other counter got exactly the same charges: nothing was reserved on it by refused requests.
      expect(workspaceUsed).toBe(used)
      expect(await ledger.reserve([{ counter: budget, amount: worst }], Date.now())).toEqual({ kind: 'refused', index: 0, used })
    })

    it('a counter lost by a flush or restart is seeded from the usage store: no spend is lost', async () => {
      const made = await target()
      const store = new MemoryUsageStore()
      const now = Date.now()
      const book = new BudgetBook({ ledger: made.ledger, store, notifier: new InProcessChangeNotifier(), clock: { now: () => now }, logger: SILENT, persistIntervalMs: 60_000 })
      await book.start()
      const a = counter(testTag(), 'a', 1_000)
      for (let index = 0; index < 20; index++) {
        const decision = await book.reserve([{ counter: a, amount: 10 }], now)
        expect(decision.kind).toBe('reserved')
        await book.settle([{ counter: a, reserved: 10, actual: 7 }], decision.kind === 'reserved' ? decision.lease : -1)
      }
      await book.flush()
      expect(store.totalsByKey.get(a.key)).toBe(140)
      // Settled but not yet written when the ledger loses the counter: the book adds what it has not written.
      const late = await book.reserve([{ counter: a, amount: 10 }], now)
      await book.settle([{ counter: a, reserved: 10, actual: 5 }], late.kind === 'reserved' ? late.lease : -1)
      // The counter is lost, then the book (which still knows its unwritten 5) writes; a new book
      // over the same store, as on another instance, seeds from the persisted total.
      const ledger = await made.forget([a.key])
      await book.flush()
      expect(store.totalsByKey.get(a.key)).toBe(145)
      const live = new BudgetBook({ ledger, store, notifier: new InProcessChangeNotifier(), clock: { now: () => now }, logger: SILENT, persistIntervalMs: 60_000 })
      await live.start()
      expect((await live.reserve([{ counter: a, amount: 10 }], now)).kind).toBe('reserved')
      expect(await ledger.peek([a.key])).toEqual([145])
      await book.close()
      await live.close()
    })

    it('seeding adds what the book settled but has not written to the usage store yet', async () => {
      const made = await target()
      const store = new MemoryUsageStore()
      const now = Date.now()
      let ledger = made.ledger
      // A book whose ledger can be swapped under it, as a Redis flush swaps the data under one client.
      const swappable: BudgetLedger = {
        start: async () => {},
        close: async () => {},
        health: async () => ({ ok: true }),
        reserve: (items, nowMs) => ledger.reserve(items, nowMs),
        seed: (items) => ledger.seed(items),
        settle: (items, lease) => ledger.settle(items, lease),
        peek: (keys) => ledger.peek(keys),
      }
      const book = new BudgetBook({ ledger: swappable, store, notifier: new InProcessChangeNotifier(), clock: { now: () => now }, logger: SILENT, persistIntervalMs: 60_000 })
      await book.start()
      const a = counter(testTag(), 'a', 1_000)
      for (const actual of [30, 12]) {
        const decision = await book.reserve([{ counter: a, amount: 50 }], now)
        await book.settle([{ counter: a, reserved: 50, actual }], decision.kind === 'reserved' ? decision.lease : -1)
        await book.flush()
      }
      const late = await book.reserve([{ counter: a, amount: 50 }], now)
      await book.settle([{ counter: a, reserved: 50, actual: 8 }], late.kind === 'reserved' ? late.lease : -1)
      expect(store.totalsByKey.get(a.key)).toBe(42)
      ledger = await made.forget([a.key])
      expect((await book.reserve([{ counter: a, amount: 50 }], now)).kind).toBe('reserved')
      expect(await ledger.peek([a.key])).toEqual([50])
      await book.close()
      expect(store.totalsByKey.get(a.key)).toBe(50)
    })
  })
}
