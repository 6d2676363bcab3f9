/**
 * `AdminStore` on the embedded DuckDB file. Tables: duckdb-schema.ts (created and migrated on start
 * by duckdb-admin-migrations.ts); record ↔ row conversions: duckdb-admin-rows.ts; the writes of one
 * transaction: duckdb-admin-writer.ts.
 *
 * Two sessions (connections):
 * - every write goes through the write session, so writes never interleave: a transaction has the
 *   connection to itself, concurrent `write`s queue, and optimistic updates and the look-before-write
 *   uniqueness checks cannot race. It is also why no other connection may write these tables.
 * - every read goes through the read session. DuckDB's MVCC gives it the last committed state, so a
 *   read never sees a transaction still open on the write session, never waits for it, and cannot
 *   disturb it. A read issued from inside `write`'s `work` therefore does not deadlock behind the
 *   transaction it runs in (one session would queue it after that transaction: forever); it sees the
 *   state before the transaction, like a MongoDB read outside the session's transaction.
 *
 * Timestamps are stored as UTC `TIMESTAMP`s and read back as `Date#toISOString()` (millisecond
 * precision, `Z`). Uniqueness violations reject with `GW_ADMIN_CONFLICT`; anything else (file
 * unreadable, database closed) rejects with the driver error, so callers fail closed.
 */
import { randomUUID } from 'node:crypto'
import {
  BUILT_IN_LABEL_NAMES,
  type ApiKeyFilter,
  type ApiKeyRecord,
  type AuditEntry,
  type AuditFilter,
  type BootstrapSeed,
  type CollectionFilter,
  type CollectionRecord,
  type ConfigDependants,
  type ConfigFilter,
  type ConfigRecord,
  type ConfigVersionRecord,
  type InviteFilter,
  type InviteRecord,
  type LabelFilter,
  type LabelRecord,
  type MemberFilter,
  type OrganisationRecord,
  type Paged,
  type PageRequest,
  type PartialFilter,
  type PartialRecord,
  type PartialVersionRecord,
  type PromptFilter,
  type PromptRecord,
  type PromptVersionRecord,
  type UserFilter,
  type UserRecord,
  type VersionSelector,
  type VirtualKeyFilter,
  type VirtualKeyRecord,
  type WorkspaceDependants,
  type WorkspaceFilter,
  type WorkspaceMemberRecord,
  type WorkspaceMemberWithUser,
  type WorkspaceRecord,
} from '../../core/admin-records.js'
import { ERRORS, gatewayError } from '../../core/errors.js'
import type { AdminStore, AdminWriter } from '../../core/ports.js'
import type { HealthStatus } from '../../core/service.js'
import {
  apiKeyRow,
  auditRow,
  labelKey,
  labelRow,
  memberRow,
  organisationRow,
  selectList,
  slugKey,
  timestamp,
  toApiKey,
  toAuditEntry,
  toCollection,
  toConfig,
  toConfigVersion,
  toInvite,
  toLabel,
  toMember,
  toOrganisation,
  toPartial,
  toPartialVersion,
  toPrompt,
  toPromptVersion,
  toUser,
  toVirtualKey,
  toWorkspace,
  userRow,
  versionKey,
  workspaceRow,
} from './duckdb-admin-rows.js'
import { createAdminTables } from './duckdb-admin-migrations.js'
import { DuckDbAdminWriter, insertRow } from './duckdb-admin-writer.js'
import type { DuckDbDatabase, DuckDbSession, SqlParam, SqlRow } from './duckdb-database.js'

/** Conditions and their bound parameters, numbered in the order they are added. */
class Query {
  readonly params: SqlParam[] = []
  readonly #conditions: string[] = []

  /** Binds `value` and returns its placeholder. */
  param(value: SqlParam): string {
    this.params.push(value)
    return `$${this.params.length}`
  }

  where(condition: string): this {
    this.#conditions.push(condition)
    return this
  }

  get whereClause(): string {
    return this.#conditions.length === 0 ? '' : `WHERE ${this.#conditions.join(' AND ')}`
  }
}

function pageBound(value: number, field: 'offset' | 'limit'): bigint {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw gatewayError(ERRORS.GW_ADMIN_VALIDATION, `${field} must be a non-negative integer`, { param: field })
  }
  return BigInt(value)
}

const ORGANISATION_COLUMNS = selectList('organisations')
const USER_COLUMNS = selectList('users')
const WORKSPACE_COLUMNS = selectList('workspaces')
const INVITE_COLUMNS = selectList('invites')
const API_KEY_COLUMNS = selectList('api_keys')
const VIRTUAL_KEY_COLUMNS = selectList('virtual_keys')
const AUDIT_COLUMNS = selectList('audit_log')
const COLLECTION_COLUMNS = selectList('collections')
const PROMPT_COLUMNS = selectList('prompts')
const PROMPT_VERSION_COLUMNS = selectList('prompt_versions')
const LABEL_COLUMNS = selectList('labels')
const PARTIAL_COLUMNS = selectList('partials')
const PARTIAL_VERSION_COLUMNS = selectList('partial_versions')
const CONFIG_COLUMNS = selectList('configs')
/** What a record id looks like (core/admin-records.ts: ids are UUID strings). */
const UUID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const CONFIG_VERSION_COLUMNS = selectList('config_versions')

/** Case-insensitive substring of the name or slug (`search` of the prompt and collection filters). */
function searchCondition(query: Query, search: string, columns: readonly string[]): string {
  const needle = query.param(search.toLowerCase())
  return `(${columns.map((column) => `contains(lower(${column}), ${needle})`).join(' OR ')})`
}

/** A membership row joined with its user; user columns carry the `u_` prefix. */
const MEMBER_WITH_USER = `SELECT ${selectList('workspace_members', 'm')}, ${selectList('users', 'u', 'u_')}
  FROM workspace_members m JOIN users u ON u.id = m.user_id AND u.organisation_id = m.organisation_id`

function toMemberWithUser(row: SqlRow): WorkspaceMemberWithUser {
  return { member: toMember(row), user: toUser(row, 'u_') }
}

function first<T>(rows: SqlRow[], map: (row: SqlRow) => T): T | null {
  return rows[0] === undefined ? null : map(rows[0])
}

export class DuckDbAdminStore implements AdminStore {
  readonly #database: DuckDbDatabase
  #writeSession: DuckDbSession | null = null
  #readSession: DuckDbSession | null = null

  constructor(database: DuckDbDatabase) {
    this.#database = database
  }

  /** Opens the database if needed, creates missing tables and adds missing columns, in one transaction. */
  async start(): Promise<void> {
    if (this.#writeSession !== null && !this.#writeSession.closed) return
    await this.#database.start()
    const writes = await this.#database.openSession()
    let reads: DuckDbSession | null = null
    try {
      await writes.transaction(createAdminTables)
      reads = await this.#database.openSession()
    } catch (error) {
      await writes.close()
      throw error
    }
    this.#writeSession = writes
    this.#readSession = reads
  }

  /** Closes this store's connections; the database itself belongs to its owner. */
  async close(): Promise<void> {
    const sessions = [this.#writeSession, this.#readSession]
    this.#writeSession = null
    this.#readSession = null
    await Promise.all(sessions.map((session) => session?.close()))
  }

  async health(): Promise<HealthStatus> {
    if (this.#writeSession === null || this.#readSession === null) return { ok: false, detail: 'admin store is not started' }
    try {
      // Only the read session: a query on the write session would wait for any open transaction.
      await this.#readSession.query('SELECT 1 AS ok')
      return { ok: true }
    } catch {
      return { ok: false, detail: 'admin store database does not answer' }
    }
  }

  // -------------------------------------------------------------------------------------------
  // Writes

  async write<T>(audit: AuditEntry, work: (writer: AdminWriter) => Promise<T>): Promise<T> {
    const auditValues = auditRow(audit)
    return this.#writes().transaction(async (tx) => {
      const result = await work(new DuckDbAdminWriter(tx))
      await insertRow(tx, 'audit_log', auditValues)
      return result
    })
  }

  async recordAudit(entry: AuditEntry): Promise<void> {
    const row = auditRow(entry)
    // A transaction keeps the uniqueness look-up and the insert together.
    await this.#writes().transaction((tx) => insertRow(tx, 'audit_log', row))
  }

  async bootstrap(seed: BootstrapSeed): Promise<void> {
    // Convert (and validate) everything before the transaction opens.
    const organisation = organisationRow(seed.organisation)
    const owner = userRow(seed.owner)
    const workspace = workspaceRow(seed.workspace)
    const membership = memberRow(seed.membership)
    const adminKey = apiKeyRow(seed.adminKey)
    await this.#writes().transaction(async (tx) => {
      await insertRow(tx, 'organisations', organisation)
      await insertRow(tx, 'users', owner)
      await insertRow(tx, 'workspaces', workspace)
      await insertRow(tx, 'workspace_members', membership)
      await insertRow(tx, 'api_keys', adminKey)
    })
  }

  // -------------------------------------------------------------------------------------------
  // Audit log

  async listAuditEntries(organisationId: string, filter: AuditFilter, page: PageRequest): Promise<Paged<AuditEntry>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.startTime !== undefined) query.where(`timestamp >= ${query.param(timestamp(filter.startTime, 'startTime'))}`)
    if (filter.endTime !== undefined) query.where(`timestamp <= ${query.param(timestamp(filter.endTime, 'endTime'))}`)
    if (filter.uri !== undefined) {
      query.where(
        filter.uri.endsWith('*')
          ? `starts_with(uri, ${query.param(filter.uri.slice(0, -1))})`
          : `split_part(uri, '?', 1) = ${query.param(filter.uri)}`,
      )
    }
    if (filter.responseStatusCode !== undefined) {
      if (!Number.isInteger(filter.responseStatusCode)) {
        throw gatewayError(ERRORS.GW_ADMIN_VALIDATION, 'responseStatusCode must be an integer', { param: 'responseStatusCode' })
      }
      query.where(`response_status_code = ${query.param(filter.responseStatusCode)}`)
    }
    const exact = [
      ['method', filter.method],
      ['request_id', filter.requestId],
      ['user_id', filter.userId],
      ['user_type', filter.userType],
      ['api_key_id', filter.apiKeyId],
      ['workspace_id', filter.workspaceId],
      ['resource_type', filter.resourceType],
      ['action', filter.action],
      ['client_ip', filter.clientIp],
    ] as const
    for (const [column, value] of exact) {
      if (value !== undefined) query.where(`${column} = ${query.param(value)}`)
    }
    return this.#page(query, `SELECT ${AUDIT_COLUMNS} FROM audit_log`, 'timestamp DESC, id', page, (row) => toAuditEntry(row))
  }

  // -------------------------------------------------------------------------------------------
  // Organisations

  async findFirstOrganisation(): Promise<OrganisationRecord | null> {
    const rows = await this.#reads().query(`SELECT ${ORGANISATION_COLUMNS} FROM organisations ORDER BY created_at, id LIMIT 1`)
    return first(rows, (row) => toOrganisation(row))
  }

  async findOrganisation(organisationId: string): Promise<OrganisationRecord | null> {
    const rows = await this.#reads().query(`SELECT ${ORGANISATION_COLUMNS} FROM organisations WHERE id = $1`, [organisationId])
    return first(rows, (row) => toOrganisation(row))
  }

  // -------------------------------------------------------------------------------------------
  // Users

  async findUser(organisationId: string, userId: string): Promise<UserRecord | null> {
    const rows = await this.#reads().query(`SELECT ${USER_COLUMNS} FROM users WHERE organisation_id = $1 AND id = $2`, [
      organisationId,
      userId,
    ])
    return first(rows, (row) => toUser(row))
  }

  async findUserByEmail(organisationId: string, email: string): Promise<UserRecord | null> {
    const rows = await this.#reads().query(`SELECT ${USER_COLUMNS} FROM users WHERE organisation_id = $1 AND email = $2`, [
      organisationId,
      email,
    ])
    return first(rows, (row) => toUser(row))
  }

  async listUsers(organisationId: string, filter: UserFilter, page: PageRequest): Promise<Paged<UserRecord>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.role !== undefined) query.where(`role = ${query.param(filter.role)}`)
    if (filter.email !== undefined) query.where(`email = ${query.param(filter.email)}`)
    return this.#page(query, `SELECT ${USER_COLUMNS} FROM users`, 'created_at, id', page, (row) => toUser(row))
  }

  // -------------------------------------------------------------------------------------------
  // Workspaces

  async findWorkspace(organisationId: string, idOrSlug: string): Promise<WorkspaceRecord | null> {
    // An id match wins over a slug match should a slug ever equal another workspace's id.
    const rows = await this.#reads().query(
      `SELECT ${WORKSPACE_COLUMNS} FROM workspaces
       WHERE organisation_id = $1 AND (id = $2 OR slug = $2)
       ORDER BY (id = $2) DESC
       LIMIT 1`,
      [organisationId, idOrSlug],
    )
    return first(rows, (row) => toWorkspace(row))
  }

  async listWorkspaces(organisationId: string, filter: WorkspaceFilter, page: PageRequest): Promise<Paged<WorkspaceRecord>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.name !== undefined) query.where(`contains(name, ${query.param(filter.name)})`)
    if (filter.exactName !== undefined) query.where(`name = ${query.param(filter.exactName)}`)
    if (filter.ids !== undefined) query.where(`list_contains(${query.param(filter.ids)}, id)`)
    return this.#page(query, `SELECT ${WORKSPACE_COLUMNS} FROM workspaces`, 'created_at, id', page, (row) => toWorkspace(row))
  }

  async workspaceDependants(organisationId: string, workspaceId: string): Promise<WorkspaceDependants> {
    // One statement, so the counts come from the same snapshot.
    const rows = await this.#reads().query(
      `SELECT
         (SELECT count(*) FROM api_keys WHERE organisation_id = $1 AND workspace_id = $2) AS api_keys,
         (SELECT count(*) FROM virtual_keys WHERE organisation_id = $1 AND workspace_id = $2) AS virtual_keys,
         (SELECT count(*) FROM configs WHERE organisation_id = $1 AND workspace_id = $2) AS configs,
         (SELECT count(*) FROM prompts WHERE organisation_id = $1 AND workspace_id = $2) AS prompts`,
      [organisationId, workspaceId],
    )
    return {
      apiKeys: Number(rows[0]?.api_keys ?? 0),
      virtualKeys: Number(rows[0]?.virtual_keys ?? 0),
      configs: Number(rows[0]?.configs ?? 0),
      prompts: Number(rows[0]?.prompts ?? 0),
    }
  }

  // -------------------------------------------------------------------------------------------
  // Members

  async findMember(workspaceId: string, userId: string): Promise<WorkspaceMemberWithUser | null> {
    const rows = await this.#reads().query(`${MEMBER_WITH_USER} WHERE m.workspace_id = $1 AND m.user_id = $2`, [workspaceId, userId])
    return first(rows, toMemberWithUser)
  }

  async listMembers(workspaceId: string, filter: MemberFilter, page: PageRequest): Promise<Paged<WorkspaceMemberWithUser>> {
    const query = new Query()
    query.where(`m.workspace_id = ${query.param(workspaceId)}`)
    if (filter.role !== undefined) query.where(`m.role = ${query.param(filter.role)}`)
    if (filter.email !== undefined) query.where(`u.email = ${query.param(filter.email)}`)
    return this.#page(query, MEMBER_WITH_USER, 'm.created_at, m.user_id', page, toMemberWithUser)
  }

  async listMembershipsOfUser(organisationId: string, userId: string): Promise<readonly WorkspaceMemberRecord[]> {
    // A left join, so a membership never disappears from the list for want of its workspace.
    const rows = await this.#reads().query(
      `SELECT ${selectList('workspace_members', 'm')} FROM workspace_members m
       LEFT JOIN workspaces w ON w.id = m.workspace_id AND w.organisation_id = m.organisation_id
       WHERE m.organisation_id = $1 AND m.user_id = $2
       ORDER BY w.created_at NULLS LAST, m.workspace_id`,
      [organisationId, userId],
    )
    return rows.map((row) => toMember(row))
  }

  // -------------------------------------------------------------------------------------------
  // Invites

  async findInvite(organisationId: string, inviteId: string): Promise<InviteRecord | null> {
    const rows = await this.#reads().query(`SELECT ${INVITE_COLUMNS} FROM invites WHERE organisation_id = $1 AND id = $2`, [
      organisationId,
      inviteId,
    ])
    return first(rows, (row) => toInvite(row))
  }

  async findInviteByTokenHash(tokenHash: string): Promise<InviteRecord | null> {
    const rows = await this.#reads().query(`SELECT ${INVITE_COLUMNS} FROM invites WHERE token_hash = $1`, [tokenHash])
    return first(rows, (row) => toInvite(row))
  }

  async listInvites(organisationId: string, filter: InviteFilter, page: PageRequest, now: string): Promise<Paged<InviteRecord>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.role !== undefined) query.where(`role = ${query.param(filter.role)}`)
    if (filter.email !== undefined) query.where(`email = ${query.param(filter.email)}`)
    if (filter.status === 'pending' || filter.status === 'expired') {
      const at = query.param(timestamp(now, 'now'))
      query.where(`state = 'pending' AND expires_at ${filter.status === 'pending' ? '>' : '<='} ${at}`)
    } else if (filter.status !== undefined) {
      query.where(`state = ${query.param(filter.status)}`)
    }
    return this.#page(query, `SELECT ${INVITE_COLUMNS} FROM invites`, 'created_at DESC, id', page, (row) => toInvite(row))
  }

  // -------------------------------------------------------------------------------------------
  // API keys

  async findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    // A current hash wins over a rotated-out one (hashes are random, so both matching is theoretical).
    const rows = await this.#reads().query(
      `SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE key_hash = $1 OR previous_key_hash = $1 ORDER BY (key_hash = $1) DESC LIMIT 1`,
      [keyHash],
    )
    return first(rows, (row) => toApiKey(row))
  }

  async findApiKey(organisationId: string, keyId: string): Promise<ApiKeyRecord | null> {
    const rows = await this.#reads().query(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE organisation_id = $1 AND id = $2`, [
      organisationId,
      keyId,
    ])
    return first(rows, (row) => toApiKey(row))
  }

  async listApiKeys(organisationId: string, filter: ApiKeyFilter, page: PageRequest): Promise<Paged<ApiKeyRecord>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.workspaceId !== undefined) query.where(`workspace_id = ${query.param(filter.workspaceId)}`)
    if (filter.types !== undefined) query.where(`list_contains(${query.param(filter.types)}, type)`)
    return this.#page(query, `SELECT ${API_KEY_COLUMNS} FROM api_keys`, 'created_at, id', page, (row) => toApiKey(row))
  }

  // -------------------------------------------------------------------------------------------
  // Virtual keys

  async findVirtualKey(organisationId: string, idOrSlug: string): Promise<VirtualKeyRecord | null> {
    // An id match wins over a slug match should a slug ever equal another virtual key's id.
    const rows = await this.#reads().query(
      `SELECT ${VIRTUAL_KEY_COLUMNS} FROM virtual_keys
       WHERE organisation_id = $1 AND (id = $2 OR slug = $2)
       ORDER BY (id = $2) DESC
       LIMIT 1`,
      [organisationId, idOrSlug],
    )
    return first(rows, (row) => toVirtualKey(row))
  }

  async listVirtualKeys(organisationId: string, filter: VirtualKeyFilter, page: PageRequest): Promise<Paged<VirtualKeyRecord>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.workspaceId !== undefined) query.where(`workspace_id = ${query.param(filter.workspaceId)}`)
    return this.#page(query, `SELECT ${VIRTUAL_KEY_COLUMNS} FROM virtual_keys`, 'created_at, id', page, (row) => toVirtualKey(row))
  }

  async sampleSealedSecret(): Promise<string | null> {
    // `sealed_keys[1]` is NULL for an empty list (DuckDB lists are 1-based); the oldest key is picked
    // so the answer is stable across calls.
    const rows = await this.#reads().query(
      `SELECT coalesce(sealed_keys[1], sealed_model_config) AS secret FROM virtual_keys
       WHERE coalesce(sealed_keys[1], sealed_model_config) IS NOT NULL
       ORDER BY created_at, id
       LIMIT 1`,
    )
    const secret = rows[0]?.secret
    return typeof secret === 'string' ? secret : null
  }

  // -------------------------------------------------------------------------------------------
  // Collections

  async findCollection(organisationId: string, idOrSlug: string): Promise<CollectionRecord | null> {
    return this.#findByIdOrSlug('collections', COLLECTION_COLUMNS, organisationId, idOrSlug, toCollection)
  }

  async findDefaultCollection(workspaceId: string): Promise<CollectionRecord | null> {
    const rows = await this.#reads().query(`SELECT ${COLLECTION_COLUMNS} FROM collections WHERE default_workspace_id = $1`, [workspaceId])
    return first(rows, (row) => toCollection(row))
  }

  async listCollections(organisationId: string, filter: CollectionFilter, page: PageRequest): Promise<Paged<CollectionRecord>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.workspaceId !== undefined) query.where(`workspace_id = ${query.param(filter.workspaceId)}`)
    if (filter.search !== undefined) query.where(searchCondition(query, filter.search, ['name', 'slug']))
    return this.#page(query, `SELECT ${COLLECTION_COLUMNS} FROM collections`, 'created_at, id', page, (row) => toCollection(row))
  }

  // -------------------------------------------------------------------------------------------
  // Prompts

  async findPrompt(organisationId: string, idOrSlug: string): Promise<PromptRecord | null> {
    return this.#findByIdOrSlug('prompts', PROMPT_COLUMNS, organisationId, idOrSlug, toPrompt)
  }

  async listPrompts(organisationId: string, filter: PromptFilter, page: PageRequest): Promise<Paged<PromptRecord>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.workspaceId !== undefined) query.where(`workspace_id = ${query.param(filter.workspaceId)}`)
    if (filter.collectionId !== undefined) query.where(`collection_id = ${query.param(filter.collectionId)}`)
    if (filter.search !== undefined) query.where(searchCondition(query, filter.search, ['name', 'slug']))
    return this.#page(query, `SELECT ${PROMPT_COLUMNS} FROM prompts`, 'created_at, id', page, (row) => toPrompt(row))
  }

  async findPromptVersion(promptId: string, selector: VersionSelector): Promise<PromptVersionRecord | null> {
    // Every look-up goes through a single-column key (see duckdb-schema.ts), so DuckDB reads it by index.
    if (selector.kind === 'label') {
      const rows = await this.#reads().query(`SELECT ${PROMPT_VERSION_COLUMNS} FROM prompt_versions WHERE label_key = $1`, [
        labelKey(promptId, selector.labelId),
      ])
      return first(rows, (row) => toPromptVersion(row))
    }
    const number = await this.#versionNumber('prompts', promptId, selector)
    if (number === null) return null
    const rows = await this.#reads().query(`SELECT ${PROMPT_VERSION_COLUMNS} FROM prompt_versions WHERE version_key = $1`, [
      versionKey(promptId, number),
    ])
    return first(rows, (row) => toPromptVersion(row))
  }

  async findPromptVersionById(promptId: string, versionId: string): Promise<PromptVersionRecord | null> {
    const rows = await this.#reads().query(`SELECT ${PROMPT_VERSION_COLUMNS} FROM prompt_versions WHERE id = $2 AND prompt_id = $1`, [
      promptId,
      versionId,
    ])
    return first(rows, (row) => toPromptVersion(row))
  }

  async listPromptVersions(promptId: string): Promise<readonly PromptVersionRecord[]> {
    const rows = await this.#reads().query(
      `SELECT ${PROMPT_VERSION_COLUMNS} FROM prompt_versions WHERE prompt_id = $1 ORDER BY version DESC`,
      [promptId],
    )
    return rows.map((row) => toPromptVersion(row))
  }

  // -------------------------------------------------------------------------------------------
  // Labels

  async findLabel(organisationId: string, labelId: string): Promise<LabelRecord | null> {
    const rows = await this.#reads().query(`SELECT ${LABEL_COLUMNS} FROM labels WHERE organisation_id = $1 AND id = $2`, [organisationId, labelId])
    return first(rows, (row) => toLabel(row))
  }

  async findLabelByName(organisationId: string, workspaceId: string, name: string): Promise<LabelRecord | null> {
    // Both candidates through the (organisation_id, scope, name) key; the workspace's own wins.
    const rows = await this.#reads().query(
      `SELECT ${LABEL_COLUMNS} FROM labels
       WHERE organisation_id = $1 AND name = $3 AND (scope = $2 OR scope = '')
       ORDER BY is_universal
       LIMIT 1`,
      [organisationId, workspaceId, name],
    )
    return first(rows, (row) => toLabel(row))
  }

  async listLabels(organisationId: string, filter: LabelFilter, page: PageRequest): Promise<Paged<LabelRecord>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.workspaceId !== undefined) query.where(`(workspace_id = ${query.param(filter.workspaceId)} OR is_universal)`)
    if (filter.search !== undefined) query.where(searchCondition(query, filter.search, ['name']))
    return this.#page(query, `SELECT ${LABEL_COLUMNS} FROM labels`, 'is_universal DESC, created_at, id', page, (row) => toLabel(row))
  }

  async ensureBuiltInLabels(organisationId: string, now: string): Promise<void> {
    const at = timestamp(now, 'now')
    // Usually they exist: a read answers that without queueing on the write session.
    const found = await this.#reads().query(
      "SELECT count(*) AS present FROM labels WHERE organisation_id = $1 AND scope = '' AND list_contains($2, name)",
      [organisationId, BUILT_IN_LABEL_NAMES],
    )
    if (Number(found[0]?.present ?? 0) === BUILT_IN_LABEL_NAMES.length) return
    // On the write session: concurrent calls queue, so each sees what the one before it created.
    await this.#writes().transaction(async (tx) => {
      const existing = await tx.query("SELECT name FROM labels WHERE organisation_id = $1 AND scope = ''", [organisationId])
      const present = new Set(existing.map((row) => row.name))
      for (const name of BUILT_IN_LABEL_NAMES) {
        if (present.has(name)) continue
        const label: LabelRecord = {
          id: randomUUID(),
          organisationId,
          workspaceId: null,
          name,
          description: null,
          colorCode: null,
          isUniversal: true,
          status: 'active',
          createdAt: at.toISOString(),
          lastUpdatedAt: at.toISOString(),
        }
        await insertRow(tx, 'labels', labelRow(label))
      }
    })
  }

  // -------------------------------------------------------------------------------------------
  // Partials

  async findPartial(organisationId: string, idOrSlug: string): Promise<PartialRecord | null> {
    return this.#findByIdOrSlug('partials', PARTIAL_COLUMNS, organisationId, idOrSlug, toPartial)
  }

  async findPartialByName(workspaceId: string, name: string): Promise<PartialRecord | null> {
    const rows = await this.#reads().query(`SELECT ${PARTIAL_COLUMNS} FROM partials WHERE workspace_id = $1 AND name = $2`, [workspaceId, name])
    return first(rows, (row) => toPartial(row))
  }

  async listPartials(organisationId: string, filter: PartialFilter, page: PageRequest): Promise<Paged<PartialRecord>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.workspaceId !== undefined) query.where(`workspace_id = ${query.param(filter.workspaceId)}`)
    if (filter.collectionId !== undefined) query.where(`collection_id = ${query.param(filter.collectionId)}`)
    return this.#page(query, `SELECT ${PARTIAL_COLUMNS} FROM partials`, 'created_at, id', page, (row) => toPartial(row))
  }

  async findPartialVersion(partialId: string, selector: VersionSelector): Promise<PartialVersionRecord | null> {
    const number = await this.#versionNumber('partials', partialId, selector)
    if (number === null) return null
    const rows = await this.#reads().query(`SELECT ${PARTIAL_VERSION_COLUMNS} FROM partial_versions WHERE version_key = $1`, [
      versionKey(partialId, number),
    ])
    return first(rows, (row) => toPartialVersion(row))
  }

  async listPartialVersions(partialId: string): Promise<readonly PartialVersionRecord[]> {
    const rows = await this.#reads().query(
      `SELECT ${PARTIAL_VERSION_COLUMNS} FROM partial_versions WHERE partial_id = $1 ORDER BY version DESC`,
      [partialId],
    )
    return rows.map((row) => toPartialVersion(row))
  }

  // -------------------------------------------------------------------------------------------
  // Configs

  async findConfig(organisationId: string, slugOrId: string): Promise<ConfigRecord | null> {
    // Single-column key look-ups (see duckdb-schema.ts). Ids are UUIDs, so only a UUID-shaped value
    // is tried as one, first: an id match wins should a slug ever equal another config's id. A slug
    // (what requests send) costs one look-up.
    if (UUID_SHAPE.test(slugOrId)) {
      const byId = await this.#reads().query(`SELECT ${CONFIG_COLUMNS} FROM configs WHERE id = $1 AND organisation_id = $2`, [slugOrId, organisationId])
      if (byId[0] !== undefined) return toConfig(byId[0])
    }
    const bySlug = await this.#reads().query(`SELECT ${CONFIG_COLUMNS} FROM configs WHERE slug_key = $1`, [slugKey(organisationId, slugOrId)])
    return first(bySlug, (row) => toConfig(row))
  }

  async listConfigs(organisationId: string, filter: ConfigFilter, page: PageRequest): Promise<Paged<ConfigRecord>> {
    const query = new Query()
    query.where(`organisation_id = ${query.param(organisationId)}`)
    if (filter.workspaceId !== undefined) query.where(`workspace_id = ${query.param(filter.workspaceId)}`)
    if (filter.isDefault !== undefined) query.where(`is_default = ${query.param(filter.isDefault)}`)
    return this.#page(query, `SELECT ${CONFIG_COLUMNS} FROM configs`, 'created_at, id', page, (row) => toConfig(row))
  }

  async listConfigVersions(configId: string, page: PageRequest): Promise<Paged<ConfigVersionRecord>> {
    const query = new Query()
    query.where(`config_id = ${query.param(configId)}`)
    return this.#page(query, `SELECT ${CONFIG_VERSION_COLUMNS} FROM config_versions`, 'version DESC', page, (row) => toConfigVersion(row))
  }

  async configDependants(organisationId: string, refs: readonly string[]): Promise<ConfigDependants> {
    if (refs.length === 0) return { apiKeys: [], workspaces: [] }
    // `defaults` is the JSON text of `RequestDefaults`; these tables are small and this is no hot path.
    const { keys, workspaces } = await this.#reads().transaction(async (tx) => ({
      keys: await tx.query(
        `SELECT ${API_KEY_COLUMNS} FROM api_keys
         WHERE organisation_id = $1 AND list_contains($2, json_extract_string(defaults, '$.configId'))
         ORDER BY created_at, id`,
        [organisationId, [...refs]],
      ),
      workspaces: await tx.query(
        `SELECT ${WORKSPACE_COLUMNS} FROM workspaces
         WHERE organisation_id = $1 AND list_contains($2, json_extract_string(defaults, '$.configId'))
         ORDER BY created_at, id`,
        [organisationId, [...refs]],
      ),
    }))
    return { apiKeys: keys.map((row) => toApiKey(row)), workspaces: workspaces.map((row) => toWorkspace(row)) }
  }

  // -------------------------------------------------------------------------------------------

  /**
   * The version number `selector` names: its own, or the owner's published or latest one (read by
   * primary key); `null` when there is none, and for a label (partials carry none).
   */
  async #versionNumber(owners: 'prompts' | 'partials', ownerId: string, selector: VersionSelector): Promise<number | null> {
    switch (selector.kind) {
      case 'number':
        return Number.isSafeInteger(selector.version) ? selector.version : null
      case 'label':
        return null
      case 'published':
      case 'latest': {
        const column = selector.kind === 'published' ? 'published_version' : 'latest_version'
        const rows = await this.#reads().query(`SELECT ${column} AS version FROM ${owners} WHERE id = $1`, [ownerId])
        const version = rows[0]?.version
        return typeof version === 'number' ? version : null
      }
    }
  }

  /** A record of the organisation by UUID or slug; an id match wins should a slug equal another record's id. */
  async #findByIdOrSlug<T>(
    table: 'collections' | 'prompts' | 'partials',
    columns: string,
    organisationId: string,
    idOrSlug: string,
    map: (row: SqlRow) => T,
  ): Promise<T | null> {
    const rows = await this.#reads().query(
      `SELECT ${columns} FROM ${table}
       WHERE organisation_id = $1 AND (id = $2 OR slug = $2)
       ORDER BY (id = $2) DESC
       LIMIT 1`,
      [organisationId, idOrSlug],
    )
    return first(rows, (row) => map(row))
  }

  /**
   * One page of `select` filtered by `query`, and the count across pages, read in one transaction
   * so both come from the same snapshot.
   */
  async #page<T>(query: Query, select: string, orderBy: string, page: PageRequest, map: (row: SqlRow) => T): Promise<Paged<T>> {
    const offset = pageBound(page.offset, 'offset')
    const limit = pageBound(page.limit, 'limit')
    const filtered = `${select} ${query.whereClause}`
    const bound = query.params.length
    const paged = `${filtered} ORDER BY ${orderBy} LIMIT $${bound + 1} OFFSET $${bound + 2}`
    const { counted, rows } = await this.#reads().transaction(async (tx) => ({
      counted: await tx.query(`SELECT count(*) AS total FROM (${filtered})`, query.params),
      rows: await tx.query(paged, [...query.params, limit, offset]),
    }))
    return { total: Number(counted[0]?.total ?? 0), items: rows.map(map) }
  }

  #writes(): DuckDbSession {
    if (this.#writeSession === null) throw new Error('DuckDB admin store is not started')
    return this.#writeSession
  }

  #reads(): DuckDbSession {
    if (this.#readSession === null) throw new Error('DuckDB admin store is not started')
    return this.#readSession
  }
}
