/**
 * Turns DuckDB uniqueness violations into `GW_ADMIN_CONFLICT` errors that name the field.
 * DuckDB reports `Duplicate key "organisation_id: o1, slug: ws" violates unique constraint`, and
 * the column names pick the matching `UniqueKey` (values are never echoed to the client).
 */
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
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
    if (key !== undefined) return gatewayError(ERRORS.GW_ADMIN_CONFLICT, key.message, { param: key.field, cause: error })
  }
  // Duplicates inside one transaction are reported without column names.
  const fields = table.uniqueKeys.map((key) => key.columns.filter((column) => column !== 'organisation_id').join(', '))
  return gatewayError(
    ERRORS.GW_ADMIN_CONFLICT,
    `${article(table.entity)} ${table.entity} with the same ${fields.join(' or ')} already exists`,
    { cause: error },
  )
}
