/**
 * `AdminWriter` on one open DuckDB transaction (see `DuckDbAdminStore.write`), plus the row-level
 * insert and update helpers the store's own writes (bootstrap, audit entries) share.
 *
 * Uniqueness is checked by looking before writing (see duckdb-conflicts.ts), so a conflict rejects
 * with `GW_ADMIN_CONFLICT` naming the field even when the clashing row was written earlier in the
 * same transaction. Optimistic updates first look for the row in the expected version, so a stale
 * update returns `false` rather than reporting a conflict its changes might also have caused.
 *
 * Found with DuckDB 1.5 (and relied on here): updating a column of a PRIMARY KEY/UNIQUE index
 * (`key_hash` on rotation, `email`, `slug`), deleting and re-inserting a key, and updating a row
 * inserted earlier in the same transaction all work; older DuckDB versions raised spurious
 * constraint errors for some of these ("over-eager" unique checks).
 */
import type {
  ApiKeyRecord,
  InviteRecord,
  InviteState,
  OrganisationRecord,
  UserRecord,
  VirtualKeyRecord,
  WorkspaceMemberRecord,
  WorkspaceRecord,
} from '../../core/admin-records.js'
import type { AdminWriter } from '../../core/ports.js'
import { conflictFor, findConflict } from './duckdb-conflicts.js'
import type { DuckDbExecutor, SqlParam } from './duckdb-database.js'
import {
  type AdminRow,
  apiKeyRow,
  inviteRow,
  memberRow,
  organisationRow,
  selectList,
  timestamp,
  toApiKey,
  toVirtualKey,
  userRow,
  virtualKeyRow,
  workspaceRow,
} from './duckdb-admin-rows.js'
import { ADMIN_TABLES, type AdminTableName, type TableSpec } from './duckdb-schema.js'

const TABLES = new Map<AdminTableName, TableSpec>(ADMIN_TABLES.map((table) => [table.name, table]))

function spec(table: AdminTableName): TableSpec {
  const found = TABLES.get(table)
  if (found === undefined) throw new Error(`DuckDB admin store: unknown table ${table}`)
  return found
}

function primaryKeyValues(table: TableSpec, row: AdminRow): SqlParam[] {
  return (table.uniqueKeys[0]?.columns ?? []).map((column) => row[column] ?? null)
}

/** Inserts one row; a uniqueness violation rejects with `GW_ADMIN_CONFLICT`. */
export async function insertRow(executor: DuckDbExecutor, tableName: AdminTableName, row: AdminRow): Promise<void> {
  const table = spec(tableName)
  const conflict = await findConflict(executor, table, row)
  if (conflict !== null) throw conflict
  const columns = Object.keys(row)
  const placeholders = columns.map((_, index) => `$${index + 1}`)
  try {
    await executor.run(`INSERT INTO ${table.name} (${columns.join(', ')}) VALUES (${placeholders.join(', ')})`, Object.values(row))
  } catch (error) {
    throw conflictFor(table, error) ?? error
  }
}

/** The row an update may change: its identity columns, and the version column with the value the caller read. */
interface UpdateTarget {
  /** Columns that identify (and scope) the row; they are matched, never changed. */
  readonly identity: readonly string[]
  readonly versionColumn: string
  readonly expectedVersion: SqlParam
}

/**
 * Updates every non-identity column of the row when it is still at the expected version; returns
 * whether it was. A uniqueness violation rejects with `GW_ADMIN_CONFLICT`.
 */
async function updateRow(executor: DuckDbExecutor, tableName: AdminTableName, row: AdminRow, target: UpdateTarget): Promise<boolean> {
  const table = spec(tableName)
  const where = target.identity.map((column, index) => `${column} = $${index + 1}`)
  where.push(`${target.versionColumn} = $${target.identity.length + 1}`)
  const whereParams: SqlParam[] = [...target.identity.map((column) => row[column] ?? null), target.expectedVersion]
  const current = await executor.query(`SELECT 1 AS found FROM ${table.name} WHERE ${where.join(' AND ')}`, whereParams)
  if (current.length === 0) return false

  const conflict = await findConflict(executor, table, row, primaryKeyValues(table, row))
  if (conflict !== null) throw conflict

  const changed = Object.keys(row).filter((column) => !target.identity.includes(column))
  const assignments = changed.map((column, index) => `${column} = $${whereParams.length + index + 1}`)
  try {
    const rows = await executor.query(
      `UPDATE ${table.name} SET ${assignments.join(', ')} WHERE ${where.join(' AND ')} RETURNING ${target.identity[0] ?? '1'}`,
      [...whereParams, ...changed.map((column) => row[column] ?? null)],
    )
    return rows.length > 0
  } catch (error) {
    throw conflictFor(table, error) ?? error
  }
}

const API_KEY_COLUMNS = selectList('api_keys')
const VIRTUAL_KEY_COLUMNS = selectList('virtual_keys')

/** The target of an optimistic update of a record scoped by organisation and versioned by `lastUpdatedAt`. */
function versioned(expectedLastUpdatedAt: string, identity: readonly string[] = ['id', 'organisation_id']): UpdateTarget {
  return {
    identity,
    versionColumn: 'last_updated_at',
    expectedVersion: timestamp(expectedLastUpdatedAt, 'expectedLastUpdatedAt'),
  }
}

/** Keys in the order listings use (`createdAt`, then id), since `RETURNING` promises no order. */
function byCreation(keys: ApiKeyRecord[]): ApiKeyRecord[] {
  return keys.sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) : a.createdAt < b.createdAt ? -1 : 1))
}

/** Deletes the organisation's (`$1`) API keys matching `condition` and returns them, in listing order. */
async function deleteApiKeys(tx: DuckDbExecutor, condition: string, params: readonly SqlParam[]): Promise<ApiKeyRecord[]> {
  const keys = await tx.query(`DELETE FROM api_keys WHERE organisation_id = $1 AND ${condition} RETURNING ${API_KEY_COLUMNS}`, params)
  return byCreation(keys.map((key) => toApiKey(key)))
}

/**
 * The writes of one transaction. Calls run one at a time even when `work` overlaps them (a
 * connection runs one statement at a time, and each call's look-before-write must not interleave
 * with another call's write).
 */
export class DuckDbAdminWriter implements AdminWriter {
  readonly #tx: DuckDbExecutor
  #tail: Promise<unknown> = Promise.resolve()

  constructor(tx: DuckDbExecutor) {
    this.#tx = tx
  }

  async updateOrganisation(organisation: OrganisationRecord): Promise<void> {
    const row = organisationRow(organisation)
    return this.#serialise(async (tx) => {
      const changed = Object.keys(row).filter((column) => column !== 'id')
      const assignments = changed.map((column, index) => `${column} = $${index + 2}`)
      await tx.run(`UPDATE organisations SET ${assignments.join(', ')} WHERE id = $1`, [
        organisation.id,
        ...changed.map((column) => row[column] ?? null),
      ])
    })
  }

  async insertUser(user: UserRecord): Promise<void> {
    return this.#insert('users', userRow(user))
  }

  async updateUser(user: UserRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    return this.#update('users', userRow(user), versioned(expectedLastUpdatedAt))
  }

  async deleteUser(organisationId: string, userId: string): Promise<readonly ApiKeyRecord[]> {
    return this.#serialise(async (tx) => {
      const keys = await deleteApiKeys(tx, "user_id = $2 AND type = 'workspace-user'", [organisationId, userId])
      await tx.run('DELETE FROM workspace_members WHERE organisation_id = $1 AND user_id = $2', [organisationId, userId])
      await tx.run('DELETE FROM users WHERE organisation_id = $1 AND id = $2', [organisationId, userId])
      return keys
    })
  }

  async insertWorkspace(workspace: WorkspaceRecord): Promise<void> {
    return this.#insert('workspaces', workspaceRow(workspace))
  }

  async updateWorkspace(workspace: WorkspaceRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    return this.#update('workspaces', workspaceRow(workspace), versioned(expectedLastUpdatedAt))
  }

  async deleteWorkspace(organisationId: string, workspaceId: string): Promise<readonly ApiKeyRecord[]> {
    // Configs join this cascade when a later issue adds their table.
    return this.#serialise(async (tx) => {
      const keys = await deleteApiKeys(tx, 'workspace_id = $2', [organisationId, workspaceId])
      await tx.run('DELETE FROM virtual_keys WHERE organisation_id = $1 AND workspace_id = $2', [organisationId, workspaceId])
      await tx.run('DELETE FROM workspace_members WHERE organisation_id = $1 AND workspace_id = $2', [organisationId, workspaceId])
      await tx.run('DELETE FROM workspaces WHERE organisation_id = $1 AND id = $2', [organisationId, workspaceId])
      return keys
    })
  }

  async insertMember(member: WorkspaceMemberRecord): Promise<void> {
    return this.#insert('workspace_members', memberRow(member))
  }

  async updateMember(member: WorkspaceMemberRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    return this.#update('workspace_members', memberRow(member), versioned(expectedLastUpdatedAt, ['workspace_id', 'user_id', 'organisation_id']))
  }

  async deleteMember(workspaceId: string, userId: string): Promise<boolean> {
    return this.#serialise(async (tx) => {
      const rows = await tx.query('DELETE FROM workspace_members WHERE workspace_id = $1 AND user_id = $2 RETURNING user_id', [
        workspaceId,
        userId,
      ])
      return rows.length > 0
    })
  }

  async insertInvite(invite: InviteRecord): Promise<void> {
    return this.#insert('invites', inviteRow(invite))
  }

  async updateInvite(invite: InviteRecord, expectedState: InviteState): Promise<boolean> {
    return this.#update('invites', inviteRow(invite), { identity: ['id', 'organisation_id'], versionColumn: 'state', expectedVersion: expectedState })
  }

  async insertApiKey(key: ApiKeyRecord): Promise<void> {
    return this.#insert('api_keys', apiKeyRow(key))
  }

  async updateApiKey(key: ApiKeyRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    return this.#update('api_keys', apiKeyRow(key), versioned(expectedLastUpdatedAt))
  }

  async deleteApiKey(organisationId: string, keyId: string): Promise<ApiKeyRecord | null> {
    return this.#serialise(async (tx) => {
      const rows = await tx.query(`DELETE FROM api_keys WHERE organisation_id = $1 AND id = $2 RETURNING ${API_KEY_COLUMNS}`, [
        organisationId,
        keyId,
      ])
      return rows[0] === undefined ? null : toApiKey(rows[0])
    })
  }

  async insertVirtualKey(key: VirtualKeyRecord): Promise<void> {
    return this.#insert('virtual_keys', virtualKeyRow(key))
  }

  async updateVirtualKey(key: VirtualKeyRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    return this.#update('virtual_keys', virtualKeyRow(key), versioned(expectedLastUpdatedAt))
  }

  async deleteVirtualKey(organisationId: string, virtualKeyId: string): Promise<VirtualKeyRecord | null> {
    return this.#serialise(async (tx) => {
      const rows = await tx.query(
        `DELETE FROM virtual_keys WHERE organisation_id = $1 AND id = $2 RETURNING ${VIRTUAL_KEY_COLUMNS}`,
        [organisationId, virtualKeyId],
      )
      return rows[0] === undefined ? null : toVirtualKey(rows[0])
    })
  }

  /** Queues one `insertRow`; the row is built (and checked) by the caller, before queueing. */
  #insert(table: AdminTableName, row: AdminRow): Promise<void> {
    return this.#serialise((tx) => insertRow(tx, table, row))
  }

  /** Queues one optimistic `updateRow`; whether the row was at the expected version. */
  #update(table: AdminTableName, row: AdminRow, target: UpdateTarget): Promise<boolean> {
    return this.#serialise((tx) => updateRow(tx, table, row, target))
  }

  #serialise<T>(task: (tx: DuckDbExecutor) => Promise<T>): Promise<T> {
    const result = this.#tail.then(
      () => task(this.#tx),
      () => task(this.#tx),
    )
    this.#tail = result.catch(() => undefined)
    return result
  }
}
