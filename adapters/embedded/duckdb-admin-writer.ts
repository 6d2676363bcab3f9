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
import {
  BUILT_IN_LABEL_NAMES,
  type ApiKeyRecord,
  type CollectionRecord,
  type ConfigRecord,
  type ConfigVersionRecord,
  type InviteRecord,
  type InviteState,
  type LabelRecord,
  type OrganisationRecord,
  type PartialRecord,
  type PartialVersionRecord,
  type PromptRecord,
  type PromptVersionRecord,
  type UserRecord,
  type VirtualKeyRecord,
  type WorkspaceMemberRecord,
  type WorkspaceRecord,
} from '../../core/admin-records.js'
import { ERRORS, gatewayError } from '../../core/errors.js'
import type { AdminWriter } from '../../core/ports.js'
import { conflictFor, findConflict } from './duckdb-conflicts.js'
import type { DuckDbExecutor, SqlParam } from './duckdb-database.js'
import {
  type AdminRow,
  apiKeyRow,
  collectionRow,
  configRow,
  configVersionRow,
  inviteRow,
  labelKey,
  labelRow,
  memberRow,
  organisationRow,
  partialRow,
  partialVersionRow,
  promptRow,
  promptVersionRow,
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

/**
 * What a workspace takes with it besides its API keys, memberships and itself: every table whose
 * rows carry the workspace id (prompt and partial versions included, so none is left orphaned).
 */
const WORKSPACE_CASCADE = [
  'virtual_keys', 'config_versions', 'configs', 'prompt_versions', 'prompts', 'partial_versions', 'partials', 'collections', 'labels',
] as const satisfies readonly AdminTableName[]

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

/** A custom label may not take a built-in label's name (core/admin-records.ts `BUILT_IN_LABEL_NAMES`). */
function refuseBuiltInLabelName(label: LabelRecord): void {
  if (!label.isUniversal && BUILT_IN_LABEL_NAMES.includes(label.name)) {
    throw gatewayError(ERRORS.GW_ADMIN_CONFLICT, 'A built-in label has this name', { param: 'name' })
  }
}

/** Checks that a record's first version belongs to it: a mismatch is a bug of the caller, never stored. */
function checkFirstVersion(
  owner: { readonly id: string; readonly organisationId: string; readonly workspaceId: string },
  version: { readonly organisationId: string; readonly workspaceId: string },
  ownerId: string,
): void {
  if (ownerId !== owner.id || version.organisationId !== owner.organisationId || version.workspaceId !== owner.workspaceId) {
    throw new TypeError('the first version does not belong to the record it is inserted with')
  }
}

/** A config's first version is version 1 of that config, and the record carries it as its latest. */
function checkFirstConfigVersion(config: ConfigRecord, first: ConfigVersionRecord): void {
  checkFirstVersion(config, first, first.configId)
  if (first.version !== 1 || config.version !== 1 || config.versionId !== first.id || config.config !== first.config) {
    throw new TypeError('a config is inserted with its version 1, which the record carries as its latest')
  }
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
    return this.#serialise(async (tx) => {
      const keys = await deleteApiKeys(tx, 'workspace_id = $2', [organisationId, workspaceId])
      for (const table of WORKSPACE_CASCADE) {
        await tx.run(`DELETE FROM ${table} WHERE organisation_id = $1 AND workspace_id = $2`, [organisationId, workspaceId])
      }
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

  async insertCollection(collection: CollectionRecord): Promise<void> {
    return this.#insert('collections', collectionRow(collection))
  }

  async updateCollection(collection: CollectionRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    return this.#update('collections', collectionRow(collection), versioned(expectedLastUpdatedAt))
  }

  async deleteCollection(organisationId: string, collectionId: string): Promise<boolean> {
    return this.#serialise(async (tx) => {
      const contents = await tx.query(
        `SELECT
           EXISTS (SELECT 1 FROM prompts WHERE organisation_id = $1 AND collection_id = $2)
           OR EXISTS (SELECT 1 FROM partials WHERE organisation_id = $1 AND collection_id = $2)
           OR EXISTS (SELECT 1 FROM collections WHERE organisation_id = $1 AND parent_collection_id = $2) AS used`,
        [organisationId, collectionId],
      )
      if (contents[0]?.used === true) {
        throw gatewayError(ERRORS.GW_ADMIN_CONFLICT, 'The collection is not empty: move or delete its prompts, partials and collections first', {
          param: 'collectionId',
        })
      }
      const rows = await tx.query('DELETE FROM collections WHERE organisation_id = $1 AND id = $2 RETURNING id', [organisationId, collectionId])
      return rows.length > 0
    })
  }

  async insertPrompt(prompt: PromptRecord, first: PromptVersionRecord): Promise<void> {
    checkFirstVersion(prompt, first, first.promptId)
    const promptValues = promptRow(prompt)
    const versionValues = promptVersionRow(first)
    return this.#serialise(async (tx) => {
      await insertRow(tx, 'prompts', promptValues)
      await insertRow(tx, 'prompt_versions', versionValues)
    })
  }

  async updatePrompt(prompt: PromptRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    return this.#update('prompts', promptRow(prompt), versioned(expectedLastUpdatedAt))
  }

  async insertPromptVersion(version: PromptVersionRecord): Promise<void> {
    return this.#insert('prompt_versions', promptVersionRow(version))
  }

  async setPromptVersionLabel(promptId: string, versionId: string, labelId: string | null): Promise<boolean> {
    return this.#serialise(async (tx) => {
      const found = await tx.query('SELECT 1 AS found FROM prompt_versions WHERE prompt_id = $1 AND id = $2', [promptId, versionId])
      if (found.length === 0) return false
      const key = labelKey(promptId, labelId)
      // Off the other version first, so the label key never holds the label twice.
      if (key !== null) {
        await tx.run('UPDATE prompt_versions SET label_id = NULL, label_key = NULL WHERE label_key = $1 AND id <> $2', [key, versionId])
      }
      await tx.run('UPDATE prompt_versions SET label_id = $3, label_key = $4 WHERE prompt_id = $1 AND id = $2', [promptId, versionId, labelId, key])
      return true
    })
  }

  async deletePrompt(organisationId: string, promptId: string): Promise<boolean> {
    return this.#serialise(async (tx) => {
      const rows = await tx.query('DELETE FROM prompts WHERE organisation_id = $1 AND id = $2 RETURNING id', [organisationId, promptId])
      await tx.run('DELETE FROM prompt_versions WHERE organisation_id = $1 AND prompt_id = $2', [organisationId, promptId])
      return rows.length > 0
    })
  }

  async insertLabel(label: LabelRecord): Promise<void> {
    refuseBuiltInLabelName(label)
    return this.#insert('labels', labelRow(label))
  }

  async updateLabel(label: LabelRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    refuseBuiltInLabelName(label)
    return this.#update('labels', labelRow(label), versioned(expectedLastUpdatedAt))
  }

  async deleteLabel(organisationId: string, labelId: string): Promise<boolean> {
    return this.#serialise(async (tx) => {
      const rows = await tx.query('DELETE FROM labels WHERE organisation_id = $1 AND id = $2 RETURNING id', [organisationId, labelId])
      if (rows.length === 0) return false
      await tx.run('UPDATE prompt_versions SET label_id = NULL, label_key = NULL WHERE organisation_id = $1 AND label_id = $2', [
        organisationId,
        labelId,
      ])
      return true
    })
  }

  async insertPartial(partial: PartialRecord, first: PartialVersionRecord): Promise<void> {
    checkFirstVersion(partial, first, first.partialId)
    const partialValues = partialRow(partial)
    const versionValues = partialVersionRow(first)
    return this.#serialise(async (tx) => {
      await insertRow(tx, 'partials', partialValues)
      await insertRow(tx, 'partial_versions', versionValues)
    })
  }

  async updatePartial(partial: PartialRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    return this.#update('partials', partialRow(partial), versioned(expectedLastUpdatedAt))
  }

  async insertPartialVersion(version: PartialVersionRecord): Promise<void> {
    return this.#insert('partial_versions', partialVersionRow(version))
  }

  async deletePartial(organisationId: string, partialId: string): Promise<boolean> {
    return this.#serialise(async (tx) => {
      const rows = await tx.query('DELETE FROM partials WHERE organisation_id = $1 AND id = $2 RETURNING id', [organisationId, partialId])
      await tx.run('DELETE FROM partial_versions WHERE organisation_id = $1 AND partial_id = $2', [organisationId, partialId])
      return rows.length > 0
    })
  }

  async insertConfig(config: ConfigRecord, first: ConfigVersionRecord): Promise<void> {
    checkFirstConfigVersion(config, first)
    const configValues = configRow(config)
    const versionValues = configVersionRow(first)
    return this.#serialise(async (tx) => {
      await insertRow(tx, 'configs', configValues)
      await insertRow(tx, 'config_versions', versionValues)
    })
  }

  async updateConfig(config: ConfigRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    return this.#update('configs', configRow(config), versioned(expectedLastUpdatedAt))
  }

  async insertConfigVersion(version: ConfigVersionRecord): Promise<void> {
    return this.#insert('config_versions', configVersionRow(version))
  }

  async deleteConfig(organisationId: string, configId: string): Promise<boolean> {
    return this.#serialise(async (tx) => {
      const rows = await tx.query('DELETE FROM configs WHERE organisation_id = $1 AND id = $2 RETURNING id', [organisationId, configId])
      await tx.run('DELETE FROM config_versions WHERE organisation_id = $1 AND config_id = $2', [organisationId, configId])
      return rows.length > 0
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
