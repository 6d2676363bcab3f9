/**
 * Turns MongoDB duplicate-key errors into `GW_ADMIN_CONFLICT` errors that name the request field.
 *
 * The server reports a duplicate as code 11000 with the index's `keyPattern` (and `keyValue`, which
 * is never copied into the message: the client must not learn other tenants' values). Servers that
 * omit `keyPattern` still name the index in the message (`index: organisation_id_1_slug_1 dup key`),
 * and the indexes are created under known names, so the name is the fallback.
 */
import { ERRORS, gatewayError, type GatewayError } from '../../core/errors.js'
import { collectionSpec, type AdminCollectionRole, type ConflictSpec } from './mongo-admin-collections.js'

const DUPLICATE_KEY_CODES: ReadonlySet<unknown> = new Set([11000, 11001])
const INDEX_NAME = /index: (\S+) dup key/

// A duplicate raised against another transaction's uncommitted write is retried by withTransaction.
const TRANSIENT_LABEL = 'TransientTransactionError'

interface DuplicateKeyShape {
  readonly code?: unknown
  readonly keyPattern?: unknown
  readonly errmsg?: unknown
  readonly message?: unknown
  readonly errorLabels?: unknown
}

/** Whether `error` is the driver's report of a unique-index violation (duck-typed across driver copies). */
export function isDuplicateKeyError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const shape = error as DuplicateKeyShape
  if (!DUPLICATE_KEY_CODES.has(shape.code)) return false
  return !(Array.isArray(shape.errorLabels) && shape.errorLabels.includes(TRANSIENT_LABEL))
}

function article(noun: string): string {
  return /^[aeioAEIO]/.test(noun) ? 'An' : 'A'
}

function sameFields(pattern: Readonly<Record<string, unknown>>, key: Readonly<Record<string, unknown>>): boolean {
  const patternFields = Object.keys(pattern)
  const keyFields = Object.keys(key)
  return patternFields.length === keyFields.length && keyFields.every((field) => patternFields.includes(field))
}

function indexNameOf(shape: DuplicateKeyShape): string | null {
  for (const text of [shape.errmsg, shape.message]) {
    if (typeof text !== 'string') continue
    const name = INDEX_NAME.exec(text)?.[1]
    if (name !== undefined) return name
  }
  return null
}

function conflictSpecFor(role: AdminCollectionRole, shape: DuplicateKeyShape): ConflictSpec | null {
  const spec = collectionSpec(role)
  const idConflict: ConflictSpec = { param: 'id', message: `${article(spec.entity)} ${spec.entity} with this id already exists` }
  const pattern = shape.keyPattern
  if (typeof pattern === 'object' && pattern !== null) {
    const fields = pattern as Readonly<Record<string, unknown>>
    if (sameFields(fields, { _id: 1 })) return idConflict
    const index = spec.indexes.find((candidate) => candidate.conflict !== undefined && sameFields(fields, candidate.key))
    if (index?.conflict !== undefined) return index.conflict
  }
  const name = indexNameOf(shape)
  if (name === '_id_') return idConflict
  return spec.indexes.find((candidate) => candidate.name === name)?.conflict ?? null
}

/**
 * The conflict error for `error` raised by a write to the collection of `role`, or `null` when
 * `error` is not a (non-transient) duplicate-key error.
 */
export function conflictFor(role: AdminCollectionRole, error: unknown): GatewayError | null {
  if (!isDuplicateKeyError(error)) return null
  const conflict = conflictSpecFor(role, error as DuplicateKeyShape)
  if (conflict !== null) return gatewayError(ERRORS.GW_ADMIN_CONFLICT, conflict.message, { param: conflict.param, cause: error })
  const entity = collectionSpec(role).entity
  return gatewayError(ERRORS.GW_ADMIN_CONFLICT, `${article(entity)} ${entity} with the same values already exists`, { cause: error })
}

/** Runs one write; a duplicate key becomes `GW_ADMIN_CONFLICT`, anything else propagates unchanged. */
export async function withConflicts<T>(role: AdminCollectionRole, write: () => Promise<T>): Promise<T> {
  try {
    return await write()
  } catch (error) {
    throw conflictFor(role, error) ?? error
  }
}
