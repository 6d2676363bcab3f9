/**
 * `UsageStore` on MongoDB (production, next to the admin store): persisted budget usage and manual
 * resets, in two collections of the admin store's database:
 * - `budget_usage` `{_id: <counter key>, total, updated_at, expires_at}`: `add` is one unordered bulk
 *   write of `$inc` upserts (each is atomic on its document; the totals only ever grow); the
 *   counter's end `expires_at` (epoch ms as a `Long`) takes the later of the stored and written
 *   ends with `$max` (a missing or null end sorts below every number), and `null` (never ends) is
 *   `$set`; `prune` deletes the counters whose end is before a time (`$lt` never matches null);
 * - `budget_resets` `{_id: "<kind>:<id>", kind, entity_id, reset_at}`: `$max`, so a late write never
 *   moves a reset back.
 * Totals are stored as 64-bit integers (`Long`), exact for any budget. The driver's errors
 * propagate (never a `GatewayError`), so the budget plugin fails closed.
 */
import { Long, MongoClient, type Collection, type Db } from 'mongodb'
import type { BudgetReset, UsageStore } from '../../core/budgets.js'
import type { HealthStatus } from '../../core/service.js'
import { DEFAULT_DATABASE_NAME, databaseNameOf } from './mongo-connection.js'

export const USAGE_COLLECTIONS = { usage: 'budget_usage', resets: 'budget_resets' } as const

interface UsageDocument {
  _id: string
  total: Long | number
  updated_at: Date
  /** Epoch ms; `null` or absent: never ends (or written before ends were kept). */
  expires_at?: Long | null
}

interface ResetDocument {
  _id: string
  kind: string
  entity_id: string
  reset_at: Long | number
}

export interface MongoUsageStoreOptions {
  readonly uri: string
  /** Defaults to the database in the URI's path, else `gateway`. */
  readonly databaseName?: string
}

const HEALTH_TIMEOUT_MS = 2_000

function amountOf(amount: number): Long {
  if (!Number.isFinite(amount) || amount < 0) throw new RangeError(`budget amounts must be non-negative numbers, got ${amount}`)
  return Long.fromNumber(Math.round(amount))
}

function endOf(expiresAt: number | null | undefined): Long | null {
  if (expiresAt === null || expiresAt === undefined) return null
  if (!Number.isFinite(expiresAt)) throw new RangeError(`budget counter ends must be finite, got ${expiresAt}`)
  return Long.fromNumber(Math.floor(expiresAt))
}

function numberOf(value: Long | number | undefined): number {
  if (value === undefined) return 0
  return typeof value === 'number' ? value : value.toNumber()
}

export class MongoUsageStore implements UsageStore {
  readonly #uri: string
  readonly #databaseName: string
  #client: MongoClient | null = null
  #db: Db | null = null

  constructor(options: MongoUsageStoreOptions) {
    this.#uri = options.uri
    this.#databaseName = options.databaseName ?? databaseNameOf(options.uri) ?? DEFAULT_DATABASE_NAME
  }

  async start(): Promise<void> {
    if (this.#client !== null) return
    const client = new MongoClient(this.#uri)
    try {
      await client.connect()
      const db = client.db(this.#databaseName)
      await db.command({ ping: 1 })
      this.#client = client
      this.#db = db
    } catch (error) {
      await client.close().catch(() => undefined)
      throw error
    }
  }

  async close(): Promise<void> {
    const client = this.#client
    this.#client = null
    this.#db = null
    await client?.close()
  }

  async health(): Promise<HealthStatus> {
    const db = this.#db
    if (db === null) return { ok: false, detail: 'usage store is not started' }
    try {
      await db.command({ ping: 1 }, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) })
      return { ok: true }
    } catch {
      return { ok: false, detail: 'usage store database does not answer' }
    }
  }

  async add(entries: ReadonlyArray<{ readonly key: string; readonly amount: number; readonly expiresAt?: number | null }>): Promise<void> {
    if (entries.length === 0) return
    // One update per key, so the order of an unordered bulk write cannot decide a counter's end.
    const merged = new Map<string, { amount: number; end: number | null }>()
    for (const { key, amount, expiresAt } of entries) {
      amountOf(amount)
      const end = expiresAt ?? null
      const known = merged.get(key)
      merged.set(key, known === undefined ? { amount, end } : { amount: known.amount + amount, end: known.end === null || end === null ? null : Math.max(known.end, end) })
    }
    const now = new Date()
    await this.#usage().bulkWrite(
      [...merged].map(([key, { amount, end }]) => {
        const expiresAt = endOf(end)
        const update =
          expiresAt === null
            ? { $inc: { total: amountOf(amount) }, $set: { updated_at: now, expires_at: null } }
            : { $inc: { total: amountOf(amount) }, $set: { updated_at: now }, $max: { expires_at: expiresAt } }
        return { updateOne: { filter: { _id: key }, update, upsert: true } }
      }),
      { ordered: false },
    )
  }

  async prune(endedBefore: number): Promise<number> {
    const result = await this.#usage().deleteMany({ expires_at: { $lt: Long.fromNumber(Math.floor(endedBefore)) } })
    return result.deletedCount
  }

  async totals(keys: readonly string[]): Promise<readonly number[]> {
    if (keys.length === 0) return []
    const documents = await this.#usage()
      .find({ _id: { $in: [...new Set(keys)] } }, { promoteLongs: false })
      .toArray()
    const totals = new Map(documents.map((document) => [document._id, numberOf(document.total)]))
    return keys.map((key) => totals.get(key) ?? 0)
  }

  async recordReset(reset: BudgetReset): Promise<void> {
    await this.#resets().updateOne(
      { _id: `${reset.kind}:${reset.id}` },
      { $max: { reset_at: Long.fromNumber(Math.floor(reset.resetAt)) }, $set: { kind: reset.kind, entity_id: reset.id } },
      { upsert: true },
    )
  }

  async listResets(): Promise<readonly BudgetReset[]> {
    const documents = await this.#resets().find({}, { promoteLongs: false }).toArray()
    return documents.map((document) => ({
      kind: document.kind as BudgetReset['kind'],
      id: document.entity_id,
      resetAt: numberOf(document.reset_at),
    }))
  }

  #usage(): Collection<UsageDocument> {
    return this.#open().collection<UsageDocument>(USAGE_COLLECTIONS.usage)
  }

  #resets(): Collection<ResetDocument> {
    return this.#open().collection<ResetDocument>(USAGE_COLLECTIONS.resets)
  }

  #open(): Db {
    if (this.#db === null) throw new Error('usage store is not started')
    return this.#db
  }
}
