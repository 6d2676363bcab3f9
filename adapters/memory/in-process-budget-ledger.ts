/**
 * `BudgetLedger` in process (the embedded default, one gateway process). Same contract as the Redis
 * adapter: all-or-nothing reservations admitted while `used + reserved < limit`, settlements that
 * replace a reservation by the real amount, `unknown` for counters it does not hold (after a
 * restart they are seeded from the usage store). Everything runs synchronously inside one call, so
 * concurrent requests cannot interleave between check and update.
 *
 * Reservations need no lease here: a crash loses them together with the process. Counters are
 * dropped once past `expiresAt` (swept every few thousand calls).
 */
import type { BudgetCounter, BudgetLedger, ReserveDecision } from '../../core/budgets.js'
import type { HealthStatus } from '../../core/service.js'

interface CounterState {
  used: number
  reserved: number
  expiresAt: number | null
}

const SWEEP_EVERY = 4_096
/** The only lease this adapter hands out. */
const LEASE = 0

export interface InProcessBudgetLedgerOptions {
  /** Time source for expiry (default `Date.now`). */
  readonly now?: () => number
}

export class InProcessBudgetLedger implements BudgetLedger {
  readonly #counters = new Map<string, CounterState>()
  readonly #now: () => number
  #calls = 0

  constructor(options: InProcessBudgetLedgerOptions = {}) {
    this.#now = options.now ?? Date.now
  }

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.#counters.clear()
  }

  async health(): Promise<HealthStatus> {
    return { ok: true }
  }

  async reserve(items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly amount: number }>, nowMs: number): Promise<ReserveDecision> {
    this.#maybeSweep(nowMs)
    const states: CounterState[] = []
    const unknown: number[] = []
    items.forEach(({ counter }, index) => {
      const state = this.#held(counter.key, nowMs)
      if (state === undefined) unknown.push(index)
      else states.push(state)
    })
    if (unknown.length > 0) return { kind: 'unknown', indexes: unknown }
    for (let index = 0; index < items.length; index++) {
      const state = states[index] as CounterState
      if (state.used + state.reserved >= (items[index] as { counter: BudgetCounter }).counter.limit) {
        return { kind: 'refused', index, used: state.used }
      }
    }
    items.forEach(({ counter, amount }, index) => {
      const state = states[index] as CounterState
      state.reserved += amount
      state.expiresAt = counter.expiresAt
    })
    return { kind: 'reserved', lease: LEASE }
  }

  async seed(items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly used: number }>): Promise<void> {
    const now = this.#now()
    for (const { counter, used } of items) {
      if (this.#held(counter.key, now) === undefined) this.#counters.set(counter.key, { used, reserved: 0, expiresAt: counter.expiresAt })
    }
  }

  async settle(
    items: ReadonlyArray<{ readonly counter: BudgetCounter; readonly reserved: number; readonly actual: number }>,
    _lease: number,
  ): Promise<ReadonlyArray<number | null>> {
    const now = this.#now()
    return items.map(({ counter, reserved, actual }) => {
      const state = this.#held(counter.key, now)
      if (state === undefined) return null
      state.reserved = Math.max(0, state.reserved - reserved)
      state.used += actual
      return state.used
    })
  }

  async peek(keys: readonly string[]): Promise<ReadonlyArray<number | null>> {
    const now = this.#now()
    return keys.map((key) => this.#held(key, now)?.used ?? null)
  }

  /** The counter's state, unless missing or expired (an expired counter is dropped). */
  #held(key: string, nowMs: number): CounterState | undefined {
    const state = this.#counters.get(key)
    if (state === undefined) return undefined
    if (state.expiresAt !== null && state.expiresAt <= nowMs) {
      this.#counters.delete(key)
      return undefined
    }
    return state
  }

  #maybeSweep(nowMs: number): void {
    if (++this.#calls % SWEEP_EVERY !== 0) return
    for (const [key, state] of this.#counters) {
      if (state.expiresAt !== null && state.expiresAt <= nowMs) this.#counters.delete(key)
    }
  }
}
