/**
 * `AdminStore` on the embedded DuckDB file (see duckdb-schema.ts for the tables).
 *
 * All statements go through one session, so writes never interleave inside a transaction and a
 * burst of concurrent inserts simply queues. Timestamps are stored as UTC `TIMESTAMP`s and read
 * back as `Date#toISOString()` (millisecond precision, `Z`). Uniqueness violations reject with
 * `GW_ADMIN_CONFLICT`; anything else (file unreadable, database closed) rejects with the driver
 * error, so callers fail closed.
 */
import type { ApiKeyType } from '../../core/context.js'
import { ERRORS, gatewayError } from '../../core/errors.js'
import type {
  AdminStore,
  ApiKeyRecord,
  ApiKeyStatus,
  BootstrapSeed,
  HealthStatus,
  OrganisationRecord,
  OrganisationRole,
  UserRecord,
  WorkspaceRecord,
} from '../../core/ports.js'
import { conflictFor } from './duckdb-conflicts.js'
import type { DuckDbDatabase, DuckDbExecutor, DuckDbSession, SqlParam, SqlRow } from './duckdb-database.js'
import { ADMIN_TABLES, type AdminTableName, type TableSpec } from './duckdb-schema.js'

const TABLES = new Map<AdminTableName, TableSpec>(ADMIN_TABLES.map((table) => [table.name, table]))

const ORGANISATION_COLUMNS = 'id, name, created_at'
const USER_COLUMNS = 'id, organisation_id, email, first_name, last_name, role, created_at'
const WORKSPACE_COLUMNS = 'id, slug, organisation_id, name, description, created_at, last_updated_at'
const API_KEY_COLUMNS =
  'id, key_hash, masked_key, name, description, type, organisation_id, workspace_id, user_id, scopes, status, expires_at, creation_mode, created_at, last_updated_at'

function placeholders(count: number): string {
  return Array.from({ length: count }, (_, index) => `$${index + 1}`).join(', ')
}

function timestamp(value: string, field: string): Date {
  const date = new Date(value)
  if (Number.isNaN(date.getTime())) {
    throw gatewayError(ERRORS.GW_ADMIN_VALIDATION, `${field} is not an ISO 8601 timestamp`, { param: field })
  }
  return date
}

function optionalTimestamp(value: string | null, field: string): Date | null {
  return value === null ? null : timestamp(value, field)
}

function text(row: SqlRow, column: string): string {
  const value = row[column]
  if (typeof value !== 'string') throw new Error(`DuckDB admin store: column ${column} is not text`)
  return value
}

function optionalText(row: SqlRow, column: string): string | null {
  const value = row[column]
  return value === null || value === undefined ? null : text(row, column)
}

function iso(row: SqlRow, column: string): string {
  const value = row[column]
  if (!(value instanceof Date)) throw new Error(`DuckDB admin store: column ${column} is not a timestamp`)
  return value.toISOString()
}

function optionalIso(row: SqlRow, column: string): string | null {
  const value = row[column]
  return value === null || value === undefined ? null : iso(row, column)
}

function textList(row: SqlRow, column: string): string[] {
  const value = row[column]
  if (!Array.isArray(value)) throw new Error(`DuckDB admin store: column ${column} is not a list`)
  return value.map((item) => String(item))
}

function toOrganisation(row: SqlRow): OrganisationRecord {
  return { id: text(row, 'id'), name: text(row, 'name'), createdAt: iso(row, 'created_at') }
}

function toUser(row: SqlRow): UserRecord {
  return {
    id: text(row, 'id'),
    organisationId: text(row, 'organisation_id'),
    email: text(row, 'email'),
    firstName: text(row, 'first_name'),
    lastName: text(row, 'last_name'),
    role: text(row, 'role') as OrganisationRole,
    createdAt: iso(row, 'created_at'),
  }
}

function toWorkspace(row: SqlRow): WorkspaceRecord {
  return {
    id: text(row, 'id'),
    slug: text(row, 'slug'),
    organisationId: text(row, 'organisation_id'),
    name: text(row, 'name'),
    description: optionalText(row, 'description'),
    createdAt: iso(row, 'created_at'),
    lastUpdatedAt: iso(row, 'last_updated_at'),
  }
}

function toApiKey(row: SqlRow): ApiKeyRecord {
  return {
    id: text(row, 'id'),
    keyHash: text(row, 'key_hash'),
    maskedKey: text(row, 'masked_key'),
    name: text(row, 'name'),
    description: optionalText(row, 'description'),
    type: text(row, 'type') as ApiKeyType,
    organisationId: text(row, 'organisation_id'),
    workspaceId: optionalText(row, 'workspace_id'),
    userId: optionalText(row, 'user_id'),
    scopes: textList(row, 'scopes'),
    status: text(row, 'status') as ApiKeyStatus,
    expiresAt: optionalIso(row, 'expires_at'),
    creationMode: text(row, 'creation_mode') as ApiKeyRecord['creationMode'],
    createdAt: iso(row, 'created_at'),
    lastUpdatedAt: iso(row, 'last_updated_at'),
  }
}

function organisationParams(organisation: OrganisationRecord): SqlParam[] {
  return [organisation.id, organisation.name, timestamp(organisation.createdAt, 'createdAt')]
}

function userParams(user: UserRecord): SqlParam[] {
  return [
    user.id,
    user.organisationId,
    user.email,
    user.firstName,
    user.lastName,
    user.role,
    timestamp(user.createdAt, 'createdAt'),
  ]
}

function workspaceParams(workspace: WorkspaceRecord): SqlParam[] {
  return [
    workspace.id,
    workspace.slug,
    workspace.organisationId,
    workspace.name,
    workspace.description,
    timestamp(workspace.createdAt, 'createdAt'),
    timestamp(workspace.lastUpdatedAt, 'lastUpdatedAt'),
  ]
}

function apiKeyParams(key: ApiKeyRecord): SqlParam[] {
  return [
    key.id,
    key.keyHash,
    key.maskedKey,
    key.name,
    key.description,
    key.type,
    key.organisationId,
    key.workspaceId,
    key.userId,
    key.scopes,
    key.status,
    optionalTimestamp(key.expiresAt, 'expiresAt'),
    key.creationMode,
    timestamp(key.createdAt, 'createdAt'),
    timestamp(key.lastUpdatedAt, 'lastUpdatedAt'),
  ]
}

/** Inserts one row; a uniqueness violation becomes `GW_ADMIN_CONFLICT`. */
async function insert(executor: DuckDbExecutor, table: AdminTableName, columns: string, params: SqlParam[]): Promise<void> {
  try {
    await executor.run(`INSERT INTO ${table} (${columns}) VALUES (${placeholders(params.length)})`, params)
  } catch (error) {
    const spec = TABLES.get(table)
    throw (spec === undefined ? null : conflictFor(spec, error)) ?? error
  }
}

export class DuckDbAdminStore implements AdminStore {
  readonly #database: DuckDbDatabase
  #session: DuckDbSession | null = null

  constructor(database: DuckDbDatabase) {
    this.#database = database
  }

  /** Opens the database if needed and creates missing tables. */
  async start(): Promise<void> {
    if (this.#session !== null && !this.#session.closed) return
    await this.#database.start()
    const session = await this.#database.openSession()
    try {
      await session.transaction(async (tx) => {
        for (const table of ADMIN_TABLES) await tx.run(table.ddl)
      })
    } catch (error) {
      await session.close()
      throw error
    }
    this.#session = session
  }

  /** Closes this store's connection; the database itself belongs to its owner. */
  async close(): Promise<void> {
    const session = this.#session
    this.#session = null
    await session?.close()
  }

  async health(): Promise<HealthStatus> {
    if (this.#session === null) return { ok: false, detail: 'admin store is not started' }
    try {
      await this.#session.query('SELECT 1 AS ok')
      return { ok: true }
    } catch {
      return { ok: false, detail: 'admin store database does not answer' }
    }
  }

  async findFirstOrganisation(): Promise<OrganisationRecord | null> {
    const rows = await this.#open().query(
      `SELECT ${ORGANISATION_COLUMNS} FROM organisations ORDER BY created_at, id LIMIT 1`,
    )
    return rows[0] === undefined ? null : toOrganisation(rows[0])
  }

  async bootstrap(seed: BootstrapSeed): Promise<void> {
    // Convert (and validate) everything before the transaction opens.
    const organisation = organisationParams(seed.organisation)
    const owner = userParams(seed.owner)
    const workspace = workspaceParams(seed.workspace)
    const adminKey = apiKeyParams(seed.adminKey)
    await this.#open().transaction(async (tx) => {
      await insert(tx, 'organisations', ORGANISATION_COLUMNS, organisation)
      await insert(tx, 'users', USER_COLUMNS, owner)
      await insert(tx, 'workspaces', WORKSPACE_COLUMNS, workspace)
      await insert(tx, 'api_keys', API_KEY_COLUMNS, adminKey)
    })
  }

  async findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const rows = await this.#open().query(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE key_hash = $1`, [keyHash])
    return rows[0] === undefined ? null : toApiKey(rows[0])
  }

  async insertApiKey(key: ApiKeyRecord): Promise<void> {
    await insert(this.#open(), 'api_keys', API_KEY_COLUMNS, apiKeyParams(key))
  }

  async insertWorkspace(workspace: WorkspaceRecord): Promise<void> {
    await insert(this.#open(), 'workspaces', WORKSPACE_COLUMNS, workspaceParams(workspace))
  }

  async findWorkspace(organisationId: string, idOrSlug: string): Promise<WorkspaceRecord | null> {
    // An id match wins over a slug match should a slug ever equal another workspace's id.
    const rows = await this.#open().query(
      `SELECT ${WORKSPACE_COLUMNS} FROM workspaces
       WHERE organisation_id = $1 AND (id = $2 OR slug = $2)
       ORDER BY (id = $2) DESC
       LIMIT 1`,
      [organisationId, idOrSlug],
    )
    return rows[0] === undefined ? null : toWorkspace(rows[0])
  }

  async findUser(organisationId: string, userId: string): Promise<UserRecord | null> {
    const rows = await this.#open().query(
      `SELECT ${USER_COLUMNS} FROM users WHERE organisation_id = $1 AND id = $2`,
      [organisationId, userId],
    )
    return rows[0] === undefined ? null : toUser(rows[0])
  }

  #open(): DuckDbSession {
    if (this.#session === null) throw new Error('DuckDB admin store is not started')
    return this.#session
  }
}
