/**
 * The embedded DuckDB database: one file (or `:memory:`) shared by the admin store and the log sink.
 *
 * A DuckDB connection must not run two transactions at once, so every adapter opens its own
 * `DuckDbSession` (one connection) and each session runs its work strictly one item at a time: a
 * statement or a whole transaction. Different sessions run in parallel; DuckDB's MVCC
 * keeps them apart.
 *
 * Lifecycle: `start()` is idempotent, so each adapter awaits it in its own `start()` and the
 * composition root may start it too. Adapters close their sessions; whoever owns the database
 * closes it last (`close()` also closes any session still open).
 */
import { chmod, mkdir } from 'node:fs/promises'
import { dirname } from 'node:path'
import {
  DuckDBInstance,
  LIST,
  VARCHAR,
  listValue,
  timestampValue,
} from '@duckdb/node-api'
import type { DuckDBConnection, DuckDBType, DuckDBValue, JS } from '@duckdb/node-api'
import type { HealthStatus, Service } from '../../core/service.js'

export interface DuckDbDatabaseOptions {
  /** Database file path (its parent directory is created, mode 0700), or `:memory:`. */
  readonly path: string
  /**
   * DuckDB settings for the embedded file. Defaults keep it a small tenant of the gateway process:
   * its default buffer pool is 80% of RAM and one thread per core, which competes with the request
   * path for CPU and grew the bench's resident memory past 400 MB. The log sink's batch inserts need
   * about 128MB (see `embedded.memoryLimitMb` in config/schema.ts).
   */
  readonly memoryLimit?: string
  readonly threads?: number
}

/**
 * A bound statement parameter. `Date` binds as a `TIMESTAMP` (UTC, microseconds), a string array as
 * `VARCHAR[]` (empty arrays included); everything else binds as the matching SQL scalar.
 */
export type SqlParam = string | number | boolean | bigint | null | Date | readonly string[]

/** One result row as plain JS values: `TIMESTAMP` → `Date`, `BIGINT` → `bigint`, lists → arrays. */
export type SqlRow = Record<string, JS>

/** What a session offers, and what a transaction body receives. Parameters are always bound (`$1`, `$2`, ...). */
export interface DuckDbExecutor {
  /** Runs one statement and returns its rows. */
  query(sql: string, params?: readonly SqlParam[]): Promise<SqlRow[]>
  /** Runs one statement, ignoring any rows. */
  run(sql: string, params?: readonly SqlParam[]): Promise<void>
}

const VARCHAR_LIST = LIST(VARCHAR)

function bindValue(value: SqlParam): { value: DuckDBValue; type: DuckDBType | undefined } {
  if (value instanceof Date) {
    const ms = value.getTime()
    if (!Number.isFinite(ms)) throw new TypeError('Cannot bind an invalid Date')
    return { value: timestampValue(BigInt(ms) * 1000n), type: undefined }
  }
  if (Array.isArray(value)) {
    // The driver cannot infer an item type from an empty list, so name it.
    return { value: listValue(value as readonly string[]), type: VARCHAR_LIST }
  }
  return { value: value as DuckDBValue, type: undefined }
}

function bindAll(params: readonly SqlParam[]): { values: DuckDBValue[]; types: (DuckDBType | undefined)[] } {
  const values: DuckDBValue[] = []
  const types: (DuckDBType | undefined)[] = []
  for (const param of params) {
    const bound = bindValue(param)
    values.push(bound.value)
    types.push(bound.type)
  }
  return { values, types }
}

async function execute(connection: DuckDBConnection, sql: string, params: readonly SqlParam[] | undefined): Promise<SqlRow[]> {
  if (params === undefined || params.length === 0) {
    const reader = await connection.runAndReadAll(sql)
    return reader.getRowObjectsJS()
  }
  const { values, types } = bindAll(params)
  const reader = await connection.runAndReadAll(sql, values, types as DuckDBType[])
  return reader.getRowObjectsJS()
}

/**
 * Runs statements on a connection whose turn is held by an open transaction. Records a failed
 * statement: DuckDB aborts the transaction on the first error and a later `COMMIT` then rolls
 * back silently, so the transaction must not try to commit.
 */
function transactionExecutor(connection: DuckDBConnection): { executor: DuckDbExecutor; finish(): void; failed(): boolean } {
  let open = true
  let failed = false
  async function guard<T>(task: () => Promise<T>): Promise<T> {
    if (!open) throw new Error('DuckDB transaction already finished')
    try {
      return await task()
    } catch (error) {
      failed = true
      throw error
    }
  }
  return {
    executor: {
      query: (sql, params) => guard(() => execute(connection, sql, params)),
      run: async (sql, params) => {
        await guard(() => execute(connection, sql, params))
      },
    },
    finish: () => {
      open = false
    },
    failed: () => failed,
  }
}

/**
 * One DuckDB connection whose work runs one item at a time, in call order. Obtain it with
 * `DuckDbDatabase.openSession()`.
 */
export class DuckDbSession implements DuckDbExecutor {
  readonly #connection: DuckDBConnection
  readonly #onClose: (session: DuckDbSession) => void
  #tail: Promise<unknown> = Promise.resolve()
  #closed = false

  constructor(connection: DuckDBConnection, onClose: (session: DuckDbSession) => void) {
    this.#connection = connection
    this.#onClose = onClose
  }

  get closed(): boolean {
    return this.#closed
  }

  query(sql: string, params?: readonly SqlParam[]): Promise<SqlRow[]> {
    return this.#serialise(() => execute(this.#connection, sql, params))
  }

  async run(sql: string, params?: readonly SqlParam[]): Promise<void> {
    await this.#serialise(() => execute(this.#connection, sql, params))
  }

  /**
   * Runs `work` inside `BEGIN` … `COMMIT` with the session to itself; any error rolls back and
   * rejects with that error. A statement that failed inside `work` rolls the transaction back even
   * if `work` caught the error. `work` must use only the executor it receives (the session's own
   * methods would wait for the transaction to end: a deadlock).
   */
  transaction<T>(work: (tx: DuckDbExecutor) => Promise<T>): Promise<T> {
    return this.#serialise(async () => {
      const connection = this.#connection
      const tx = transactionExecutor(connection)
      await connection.run('BEGIN TRANSACTION')
      try {
        const result = await work(tx.executor)
        if (tx.failed()) throw new Error('DuckDB transaction aborted by a failed statement')
        await connection.run('COMMIT')
        return result
      } catch (error) {
        try {
          await connection.run('ROLLBACK')
        } catch {
          // A failed COMMIT may already have ended the transaction; the original error matters.
        }
        throw error
      } finally {
        tx.finish()
      }
    })
  }

  /** Waits for queued work, then disconnects. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.#tail.then(
      () => undefined,
      () => undefined,
    )
    this.#connection.disconnectSync()
    this.#onClose(this)
  }

  #serialise<T>(task: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new Error('DuckDB session is closed'))
    const result = this.#tail.then(task, task)
    this.#tail = result.catch(() => undefined)
    return result
  }
}

/** The shared DuckDB instance (see the module comment for the lifecycle). */
export class DuckDbDatabase implements Service {
  readonly path: string
  readonly #memoryLimit: string
  readonly #threads: number
  #instance: DuckDBInstance | null = null
  #starting: Promise<void> | null = null
  #healthSession: DuckDbSession | null = null
  readonly #sessions = new Set<DuckDbSession>()

  constructor(options: DuckDbDatabaseOptions) {
    this.path = options.path
    this.#memoryLimit = options.memoryLimit ?? '128MB'
    this.#threads = options.threads ?? 1
  }

  /** Opens the database (creating the file and its directory). Safe to call more than once. */
  start(): Promise<void> {
    this.#starting ??= this.#open().catch((error: unknown) => {
      this.#starting = null
      throw error
    })
    return this.#starting
  }

  /** A new connection for one adapter; close it with `session.close()`. */
  async openSession(): Promise<DuckDbSession> {
    const instance = this.#instance
    if (instance === null) throw new Error('DuckDB database is not started')
    const session = new DuckDbSession(await instance.connect(), (closed) => this.#sessions.delete(closed))
    this.#sessions.add(session)
    return session
  }

  /**
   * Starts the database if needed and opens a session on which `prepare` creates or upgrades the
   * adapter's tables; the session is closed again when `prepare` fails.
   */
  async openPreparedSession(prepare: (session: DuckDbSession) => Promise<void>): Promise<DuckDbSession> {
    await this.start()
    const session = await this.openSession()
    try {
      await prepare(session)
    } catch (error) {
      await session.close()
      throw error
    }
    return session
  }

  async health(): Promise<HealthStatus> {
    if (this.#instance === null) return { ok: false, detail: 'DuckDB database is not open' }
    try {
      this.#healthSession ??= await this.openSession()
      await this.#healthSession.query('SELECT 1 AS ok')
      return { ok: true }
    } catch {
      return { ok: false, detail: 'DuckDB database does not answer' }
    }
  }

  /** Closes every open session, then the database. Idempotent; `start()` may open it again. */
  async close(): Promise<void> {
    const starting = this.#starting
    if (starting === null) return
    await starting.catch(() => undefined)
    await Promise.all([...this.#sessions].map((session) => session.close()))
    this.#healthSession = null
    this.#instance?.closeSync()
    this.#instance = null
    this.#starting = null
  }

  /**
   * The file holds provider credentials (sealed), API key hashes, and request logs with their
   * bodies: its directory is created owner-only (0700, so nothing in it is reachable by other
   * users whatever the files' own modes), and the file and any write-ahead log left by a crash are
   * made 0600 once open. DuckDB creates those itself with the process umask, and re-creates the
   * WAL after every checkpoint, so the process entry (config/main.ts) sets the umask to 077 too.
   */
  async #open(): Promise<void> {
    const onDisk = this.path !== ':memory:' && this.path !== ''
    if (onDisk) await mkdir(dirname(this.path), { recursive: true, mode: 0o700 })
    this.#instance = await DuckDBInstance.create(this.path, { memory_limit: this.#memoryLimit, threads: String(this.#threads) })
    if (onDisk) {
      await chmod(this.path, 0o600)
      await chmod(`${this.path}.wal`, 0o600).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error
      })
    }
  }
}
