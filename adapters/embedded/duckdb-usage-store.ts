/**
 * `UsageStore` on the embedded DuckDB file (the embedded default): persisted budget usage per
 * counter and the manual resets, in two tables of its own created at start:
 * - `budget_usage(counter_key PRIMARY KEY, total BIGINT, updated_at, expires_at BIGINT)`: `add`
 *   upserts `total = total + amount` for every key of one call in one transaction, and keeps the
 *   counter's end (`expires_at`, epoch ms; NULL: never ends, or stored before ends were kept, a
 *   column added at start to older files); `prune` deletes the counters that ended before a time;
 * - `budget_resets(entity_kind, entity_id, reset_at BIGINT)`: the latest reset per entity.
 * It runs on its own session (connection) of the shared `DuckDbDatabase`, so it never queues behind
 * the admin store's transactions or the log sink's batches.
 */
import type { BudgetReset, UsageStore } from '../../core/budgets.js'
import type { HealthStatus } from '../../core/service.js'
import type { DuckDbDatabase, DuckDbExecutor, DuckDbSession, SqlParam } from './duckdb-database.js'

export const BUDGET_USAGE_DDL = `CREATE TABLE IF NOT EXISTS budget_usage (
  counter_key VARCHAR PRIMARY KEY,
  total BIGINT NOT NULL,
  updated_at TIMESTAMP NOT NULL,
  expires_at BIGINT
)`

/** Files written before counters kept their end lack the column. */
const BUDGET_USAGE_EXPIRES_AT = 'ALTER TABLE budget_usage ADD COLUMN IF NOT EXISTS expires_at BIGINT'

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

/** A counter's end as stored: `null` never ends. */
function endParam(expiresAt: number | null | undefined): bigint | null {
  if (expiresAt === null || expiresAt === undefined) return null
  if (!Number.isFinite(expiresAt)) throw new RangeError(`budget counter ends must be finite, got ${expiresAt}`)
  return BigInt(Math.floor(expiresAt))
}

/** Two ends of one counter: never ending wins, else the later one. */
function laterEnd(a: bigint | null, b: bigint | null): bigint | null {
  if (a === null || b === null) return null
  return a > b ? a : b
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
      await session.run(BUDGET_USAGE_EXPIRES_AT)
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

  async add(entries: ReadonlyArray<{ readonly key: string; readonly amount: number; readonly expiresAt?: number | null }>): Promise<void> {
    // One row per key: DuckDB refuses to update one row twice in a statement.
    const merged = new Map<string, { amount: bigint; end: bigint | null }>()
    for (const { key, amount, expiresAt } of entries) {
      const known = merged.get(key)
      const end = endParam(expiresAt)
      merged.set(key, known === undefined ? { amount: amountParam(amount), end } : { amount: known.amount + amountParam(amount), end: laterEnd(known.end, end) })
    }
    if (merged.size === 0) return
    const rows = [...merged]
    const now = new Date()
    await this.#open().transaction(async (tx: DuckDbExecutor) => {
      for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
        const chunk = rows.slice(start, start + ROWS_PER_STATEMENT)
        const params: SqlParam[] = []
        const values = chunk.map(([key, { amount, end }]) => {
          params.push(key, amount, now, end)
          const at = params.length
          return `($${at - 3}, $${at - 2}, $${at - 1}, $${at}::BIGINT)`
        })
        // The end: never ending (NULL) wins, a stored NULL takes the end written (rows from before
        // ends were kept), else the later one.
        await tx.run(
          `INSERT INTO budget_usage (counter_key, total, updated_at, expires_at) VALUES ${values.join(', ')}
           ON CONFLICT (counter_key) DO UPDATE SET total = budget_usage.total + excluded.total, updated_at = excluded.updated_at,
             expires_at = CASE WHEN excluded.expires_at IS NULL THEN NULL
                               WHEN budget_usage.expires_at IS NULL THEN excluded.expires_at
                               ELSE greatest(budget_usage.expires_at, excluded.expires_at) END`,
          params,
        )
      }
    })
  }

  async prune(endedBefore: number): Promise<number> {
    const rows = await this.#open().query('DELETE FROM budget_usage WHERE expires_at < $1', [BigInt(Math.floor(endedBefore))])
    // DuckDB answers a DELETE with the number of rows deleted.
    return rows[0] === undefined ? 0 : numberOf(Object.values(rows[0])[0])
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
