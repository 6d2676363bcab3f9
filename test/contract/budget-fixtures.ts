/** Shared pieces of the budget tests: an in-memory usage store and counter builders. */
import { randomUUID } from 'node:crypto'
import type { BudgetCounter, BudgetReset, UsageStore } from '../../core/budgets.js'
import type { HealthStatus } from '../../core/service.js'

/** A `UsageStore` in memory that can be made to fail. */
export class MemoryUsageStore implements UsageStore {
  readonly totalsByKey = new Map<string, number>()
  /** Each counter's end as `add` kept it (`null`: never ends). */
  readonly endsByKey = new Map<string, number | null>()
  readonly resets = new Map<string, BudgetReset>()
  failing = false
  adds = 0

  async start(): Promise<void> {}
  async close(): Promise<void> {}
  async health(): Promise<HealthStatus> {
    return { ok: !this.failing }
  }

  async add(entries: ReadonlyArray<{ readonly key: string; readonly amount: number; readonly expiresAt?: number | null }>): Promise<void> {
    this.#check()
    this.adds++
    for (const { key, amount, expiresAt = null } of entries) {
      this.totalsByKey.set(key, (this.totalsByKey.get(key) ?? 0) + amount)
      const known = this.endsByKey.get(key)
      // As the adapters do: never ending wins, a counter without an end takes the one written, else the later one.
      this.endsByKey.set(key, expiresAt === null ? null : known === undefined || known === null ? expiresAt : Math.max(known, expiresAt))
    }
  }

  async prune(endedBefore: number): Promise<number> {
    this.#check()
    let deleted = 0
    for (const [key, end] of this.endsByKey) {
      if (end === null || end >= endedBefore) continue
      this.endsByKey.delete(key)
      this.totalsByKey.delete(key)
      deleted++
    }
    return deleted
  }

  async totals(keys: readonly string[]): Promise<readonly number[]> {
    this.#check()
    return keys.map((key) => this.totalsByKey.get(key) ?? 0)
  }

  async recordReset(reset: BudgetReset): Promise<void> {
    this.#check()
    const key = `${reset.kind}:${reset.id}`
    const known = this.resets.get(key)
    if (known === undefined || known.resetAt < reset.resetAt) this.resets.set(key, reset)
  }

  async listResets(): Promise<readonly BudgetReset[]> {
    this.#check()
    return [...this.resets.values()]
  }

  #check(): void {
    if (this.failing) throw new Error('usage store unreachable (test)')
  }
}

/** A fresh hash tag, so tests sharing one Redis never see each other's keys. */
export function testTag(): string {
  return `{test-${randomUUID()}}`
}

/** A counter key under `tag`. */
export function counter(tag: string, name: string, limit: number, expiresAt: number | null = null): BudgetCounter {
  return { key: `gw:budget:${tag}:${name}`, limit, expiresAt }
}
