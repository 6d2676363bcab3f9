/**
 * Uniqueness violations as `GW_ADMIN_CONFLICT` errors that name the field.
 *
 * Two mechanisms, because DuckDB names the columns of a violated key only when the clashing row was
 * committed before the transaction began (`Duplicate key "organisation_id: o1, slug: ws" violates
 * unique constraint`); against a row written earlier in the same transaction it reports only the
 * values (`PRIMARY KEY or UNIQUE constraint violation: duplicate key "o1, ws"`). So writers first
 * look for a clashing row (`findConflict`), which works in both cases and leaves the transaction
 * usable; `conflictFor` still maps a violation the look-up could not foresee. Values are never
 * echoed to the client.
 */
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import type { DuckDbExecutor, SqlParam } from './duckdb-database.js'
import type { TableSpec, UniqueKey } from './duckdb-schema.js'

const DUPLICATE_KEY = /Duplicate key "([\s\S]*)" violates (?:primary key|unique) constraint/

function article(noun: string): string {
  return /^[aeioAEIO]/.test(noun) ? 'An' : 'A'
}

/** Whether a driver error is a primary-key or unique-constraint violation. */
export function isUniqueViolation(error: unknown): boolean {
  if (!(error instanceof Error)) return false
  return /Constraint Error/i.test(error.message) && /duplicate key/i.test(error.message)
}

function matches(keyText: string, key: UniqueKey): boolean {
  const [first, ...rest] = key.columns
  if (first === undefined || !keyText.startsWith(`${first}: `)) return false
  let from = first.length + 2
  for (const column of rest) {
    const at = keyText.indexOf(`, ${column}: `, from)
    if (at < 0) return false
    from = at + column.length + 4
  }
  return true
}

/**
 * The conflict error for `error` raised by a write to `table`, or `null` when `error` is not a
 * uniqueness violation. Composite keys are tried first so `id` never shadows them.
 */
export function conflictFor(table: TableSpec, error: unknown): GatewayError | null {
  if (!isUniqueViolation(error)) return null
  const keyText = DUPLICATE_KEY.exec((error as Error).message)?.[1]
  if (keyText !== undefined) {
    const byWidth = [...table.uniqueKeys].sort((a, b) => b.columns.length - a.columns.length)
    const key = byWidth.find((candidate) => matches(keyText, candidate))
    if (key !== undefined) return conflictError(key, error)
  }
  // Duplicates inside one transaction are reported without column names: only a table with a
  // single key can still tell which one.
  const [onlyKey, ...otherKeys] = table.uniqueKeys
  if (onlyKey !== undefined && otherKeys.length === 0) return conflictError(onlyKey, error)
  const fields = table.uniqueKeys.map((key) => key.columns.filter((column) => column !== 'organisation_id').join(', '))
  return gatewayError(
    ERRORS.GW_ADMIN_CONFLICT,
    `${article(table.entity)} ${table.entity} with the same ${fields.join(' or ')} already exists`,
    { cause: error },
  )
}

function conflictError(key: UniqueKey, cause?: unknown): GatewayError {
  return gatewayError(ERRORS.GW_ADMIN_CONFLICT, key.message, { param: key.field, cause })
}

/**
 * The conflict that writing `row` to `table` would cause, or `null`. For an update, `updating`
 * holds the row's primary-key values: the row itself is not a clash, and its primary key (which
 * updates never change) is not checked. A key with a `NULL` column never clashes (SQL `UNIQUE`).
 * Only sound while no other connection writes the table (the admin store writes through one session).
 */
export async function findConflict(
  executor: DuckDbExecutor,
  table: TableSpec,
  row: Readonly<Record<string, SqlParam>>,
  updating: readonly SqlParam[] | null = null,
): Promise<GatewayError | null> {
  const [primaryKey, ...otherKeys] = table.uniqueKeys
  if (primaryKey === undefined) return null
  const keys = updating === null ? table.uniqueKeys : otherKeys
  for (const key of keys) {
    const values = key.columns.map((column) => row[column])
    if (values.some((value) => value === null || value === undefined)) continue
    const params: SqlParam[] = values as SqlParam[]
    const conditions = key.columns.map((column, index) => `${column} = $${index + 1}`)
    if (updating !== null) {
      const self = primaryKey.columns.map((column, index) => `${column} = $${params.length + index + 1}`)
      conditions.push(`NOT (${self.join(' AND ')})`)
      params.push(...updating)
    }
    const clash = await executor.query(`SELECT 1 AS clash FROM ${table.name} WHERE ${conditions.join(' AND ')} LIMIT 1`, params)
    if (clash.length > 0) return conflictError(key)
  }
  return null
}
