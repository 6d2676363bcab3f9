/**
 * `UsageStore` on the embedded DuckDB file (the embedded default): persisted budget usage per
 * counter and the manual resets, in two tables of its own created at start:
 * - `budget_usage(counter_key PRIMARY KEY, total BIGINT, updated_at)`: `add` upserts
 *   `total = total + amount` for every key of one call in one transaction;
 * - `budget_resets(entity_kind, entity_id, reset_at BIGINT)`: the latest reset per entity.
 * It runs on its own session (connection) of the shared `DuckDbDatabase`, so it never queues behind
 * the admin store's transactions or the log sink's batches.
 */
import type { BudgetReset, UsageStore } from '../../core/budgets.js'
import type { HealthStatus } from '../../core/ports.js'
import type { DuckDbDatabase, DuckDbExecutor, DuckDbSession, SqlParam } from './duckdb-database.js'

export const BUDGET_USAGE_DDL = `CREATE TABLE IF NOT EXISTS budget_usage (
  counter_key VARCHAR PRIMARY KEY,
  total BIGINT NOT NULL,
  updated_at TIMESTAMP NOT NULL
)`

export const BUDGET_RESETS_DDL = `CREATE TABLE IF NOT EXISTS budget_resets (
  entity_kind VARCHAR NOT NULL,
  entity_id VARCHAR NOT NULL,
  reset_at BIGINT NOT NULL,
  PRIMARY KEY (entity_kind, entity_id)
)`

/** Rows per upsert statement (one statement per chunk, all chunks in one transaction). */
const ROWS_PER_STATEMENT = 250

function amountParam(amount: number): bigint {
  if (!Number.isFinite(amount) || amount < 0) throw new RangeError(`budget amounts must be non-negative numbers, got ${amount}`)
  return BigInt(Math.round(amount))
}

function numberOf(value: unknown): number {
  if (typeof value === 'bigint') return Number(value)
  if (typeof value === 'number') return value
  throw new TypeError('budget usage store: unexpected column value')
}

export class DuckDbUsageStore implements UsageStore {
  readonly #database: DuckDbDatabase
  #session: DuckDbSession | null = null

  constructor(database: DuckDbDatabase) {
    this.#database = database
  }

  async start(): Promise<void> {
    if (this.#session !== null) return
    this.#session = await this.#database.openPreparedSession(async (session) => {
      await session.run(BUDGET_USAGE_DDL)
      await session.run(BUDGET_RESETS_DDL)
    })
  }

  async close(): Promise<void> {
    const session = this.#session
    this.#session = null
    await session?.close()
  }

  async health(): Promise<HealthStatus> {
    if (this.#session === null) return { ok: false, detail: 'usage store is not started' }
    try {
      await this.#session.query('SELECT 1 AS ok')
      return { ok: true }
    } catch {
      return { ok: false, detail: 'usage store does not answer' }
    }
  }

  async add(entries: ReadonlyArray<{ readonly key: string; readonly amount: number }>): Promise<void> {
    // One row per key: DuckDB refuses to update one row twice in a statement.
    const merged = new Map<string, bigint>()
    for (const { key, amount } of entries) merged.set(key, (merged.get(key) ?? 0n) + amountParam(amount))
    if (merged.size === 0) return
    const rows = [...merged]
    const now = new Date()
    await this.#open().transaction(async (tx: DuckDbExecutor) => {
      for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
        const chunk = rows.slice(start, start + ROWS_PER_STATEMENT)
        const params: SqlParam[] = []
        const values = chunk.map(([key, amount]) => {
          params.push(key, amount, now)
          const at = params.length
          return `($${at - 2}, $${at - 1}, $${at})`
        })
        await tx.run(
          `INSERT INTO budget_usage (counter_key, total, updated_at) VALUES ${values.join(', ')}
           ON CONFLICT (counter_key) DO UPDATE SET total = budget_usage.total + excluded.total, updated_at = excluded.updated_at`,
          params,
        )
      }
    })
  }

  async totals(keys: readonly string[]): Promise<readonly number[]> {
    if (keys.length === 0) return []
    const session = this.#open()
    const found = new Map<string, number>()
    // Point lookups on the primary key (a handful per seed).
    for (const key of new Set(keys)) {
      const rows = await session.query('SELECT total FROM budget_usage WHERE counter_key = $1', [key])
      if (rows[0] !== undefined) found.set(key, numberOf(rows[0].total))
    }
    return keys.map((key) => found.get(key) ?? 0)
  }

  async recordReset(reset: BudgetReset): Promise<void> {
    await this.#open().run(
      `INSERT INTO budget_resets (entity_kind, entity_id, reset_at) VALUES ($1, $2, $3)
       ON CONFLICT (entity_kind, entity_id) DO UPDATE SET reset_at = greatest(budget_resets.reset_at, excluded.reset_at)`,
      [reset.kind, reset.id, BigInt(Math.floor(reset.resetAt))],
    )
  }

  async listResets(): Promise<readonly BudgetReset[]> {
    const rows = await this.#open().query('SELECT entity_kind, entity_id, reset_at FROM budget_resets')
    return rows.map((row) => ({
      kind: String(row.entity_kind) as BudgetReset['kind'],
      id: String(row.entity_id),
      resetAt: numberOf(row.reset_at),
    }))
  }

  #open(): DuckDbSession {
    if (this.#session === null) throw new Error('usage store is not started')
    return this.#session
  }
}
