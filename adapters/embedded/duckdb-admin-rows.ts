/**
 * Conversions between admin records (core/admin-records.ts) and rows of the DuckDB admin tables
 * (duckdb-schema.ts), in both directions.
 *
 * Writing validates what SQL cannot: every ISO timestamp (an invalid one is a `GW_ADMIN_VALIDATION`
 * naming the field) becomes a `Date`, and structured settings become JSON text. Reading turns
 * `TIMESTAMP`s back into `Date#toISOString()` strings and parses the JSON text, so a record read
 * back deep-equals the record written.
 */
import type {
  ApiKeyRecord,
  ApiKeyStatus,
  ApiKeyType,
  AuditEntry,
  CollectionRecord,
  ConfigRecord,
  ConfigStatus,
  ConfigVersionRecord,
  InviteRecord,
  InviteState,
  JwtSettings,
  LabelRecord,
  OrganisationRecord,
  OrganisationRole,
  PartialRecord,
  PartialVersionRecord,
  PromptRecord,
  PromptStatus,
  PromptVersionRecord,
  RateLimitRule,
  RequestDefaults,
  UsageLimitRule,
  UserRecord,
  VirtualKeyRecord,
  VirtualKeyStatus,
  WorkspaceMemberRecord,
  WorkspaceRecord,
  WorkspaceRole,
} from '../../core/admin-records.js'
import { ERRORS, gatewayError } from '../../core/errors.js'
import type { SqlParam, SqlRow } from './duckdb-database.js'

/** One row to write: column name → bound value. Key order is the column order of the `INSERT`. */
export type AdminRow = Readonly<Record<string, SqlParam>>

// ---------------------------------------------------------------------------------------------
// Writing

/** Parses an ISO 8601 timestamp; anything else is the caller's mistake, named by `field`. */
export function timestamp(value: string, field: string): Date {
  const date = new Date(value)
  if (Number.isNaN(date.getTime())) {
    throw gatewayError(ERRORS.GW_ADMIN_VALIDATION, `${field} is not an ISO 8601 timestamp`, { param: field })
  }
  return date
}

function optionalTimestamp(value: string | null, field: string): Date | null {
  return value === null ? null : timestamp(value, field)
}

function json(value: unknown): string {
  return JSON.stringify(value)
}

function optionalJson(value: unknown): string | null {
  return value === null ? null : JSON.stringify(value)
}

/** JSON text of any value; `null` (and a missing value) is SQL `NULL`. */
function optionalJsonValue(value: unknown): string | null {
  return value === null || value === undefined ? null : JSON.stringify(value)
}

/** A version number or count: a safe integer, else the caller's mistake, named by `field`. */
function integer(value: number, field: string): number {
  if (!Number.isSafeInteger(value)) {
    throw gatewayError(ERRORS.GW_ADMIN_VALIDATION, `${field} is not an integer`, { param: field })
  }
  return value
}

function jwtSettingsText(jwt: JwtSettings | null): string | null {
  if (jwt === null) return null
  // Stored in the same normalised form as the timestamp columns, so every timestamp reads back alike.
  return json({ ...jwt, updatedAt: timestamp(jwt.updatedAt, 'jwt.updatedAt').toISOString() })
}

export function organisationRow(organisation: OrganisationRecord): AdminRow {
  return {
    id: organisation.id,
    name: organisation.name,
    created_at: timestamp(organisation.createdAt, 'createdAt'),
    jwt_settings: jwtSettingsText(organisation.jwt),
  }
}

export function userRow(user: UserRecord): AdminRow {
  return {
    id: user.id,
    organisation_id: user.organisationId,
    email: user.email,
    first_name: user.firstName,
    last_name: user.lastName,
    role: user.role,
    password_hash: user.passwordHash,
    created_at: timestamp(user.createdAt, 'createdAt'),
    last_updated_at: timestamp(user.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function workspaceRow(workspace: WorkspaceRecord): AdminRow {
  return {
    id: workspace.id,
    slug: workspace.slug,
    organisation_id: workspace.organisationId,
    name: workspace.name,
    description: workspace.description,
    defaults: optionalJson(workspace.defaults),
    usage_limits: json(workspace.usageLimits),
    rate_limits: json(workspace.rateLimits),
    created_at: timestamp(workspace.createdAt, 'createdAt'),
    last_updated_at: timestamp(workspace.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function memberRow(member: WorkspaceMemberRecord): AdminRow {
  return {
    workspace_id: member.workspaceId,
    user_id: member.userId,
    organisation_id: member.organisationId,
    role: member.role,
    created_at: timestamp(member.createdAt, 'createdAt'),
    last_updated_at: timestamp(member.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function inviteRow(invite: InviteRecord): AdminRow {
  return {
    id: invite.id,
    organisation_id: invite.organisationId,
    token_hash: invite.tokenHash,
    email: invite.email,
    role: invite.role,
    workspaces: json(invite.workspaces),
    api_key_scopes: invite.apiKeyScopes,
    invited_by: invite.invitedBy,
    state: invite.state,
    created_at: timestamp(invite.createdAt, 'createdAt'),
    expires_at: timestamp(invite.expiresAt, 'expiresAt'),
    accepted_at: optionalTimestamp(invite.acceptedAt, 'acceptedAt'),
    last_updated_at: timestamp(invite.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function apiKeyRow(key: ApiKeyRecord): AdminRow {
  return {
    id: key.id,
    key_hash: key.keyHash,
    masked_key: key.maskedKey,
    name: key.name,
    description: key.description,
    type: key.type,
    organisation_id: key.organisationId,
    workspace_id: key.workspaceId,
    user_id: key.userId,
    scopes: key.scopes,
    status: key.status,
    expires_at: optionalTimestamp(key.expiresAt, 'expiresAt'),
    creation_mode: key.creationMode,
    rate_limits: json(key.rateLimits),
    usage_limits: optionalJson(key.usageLimits),
    defaults: optionalJson(key.defaults),
    alert_emails: key.alertEmails,
    previous_key_hash: key.previousKeyHash,
    previous_key_expires_at: optionalTimestamp(key.previousKeyExpiresAt, 'previousKeyExpiresAt'),
    last_rotated_at: optionalTimestamp(key.lastRotatedAt, 'lastRotatedAt'),
    created_at: timestamp(key.createdAt, 'createdAt'),
    last_updated_at: timestamp(key.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function virtualKeyRow(key: VirtualKeyRecord): AdminRow {
  return {
    id: key.id,
    slug: key.slug,
    organisation_id: key.organisationId,
    workspace_id: key.workspaceId,
    name: key.name,
    note: key.note,
    provider: key.provider,
    sealed_keys: key.sealedKeys,
    masked_key: key.maskedKey,
    custom_host: key.customHost,
    sealed_model_config: key.sealedModelConfig,
    rate_limits: json(key.rateLimits),
    usage_limits: optionalJson(key.usageLimits),
    status: key.status,
    expires_at: optionalTimestamp(key.expiresAt, 'expiresAt'),
    created_at: timestamp(key.createdAt, 'createdAt'),
    last_updated_at: timestamp(key.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function collectionRow(collection: CollectionRecord): AdminRow {
  return {
    id: collection.id,
    slug: collection.slug,
    organisation_id: collection.organisationId,
    workspace_id: collection.workspaceId,
    name: collection.name,
    parent_collection_id: collection.parentCollectionId,
    is_default: collection.isDefault,
    // The key that allows one default collection per workspace (see duckdb-schema.ts).
    default_workspace_id: collection.isDefault ? collection.workspaceId : null,
    status: collection.status,
    created_at: timestamp(collection.createdAt, 'createdAt'),
    last_updated_at: timestamp(collection.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function promptRow(prompt: PromptRecord): AdminRow {
  return {
    id: prompt.id,
    slug: prompt.slug,
    organisation_id: prompt.organisationId,
    workspace_id: prompt.workspaceId,
    collection_id: prompt.collectionId,
    name: prompt.name,
    status: prompt.status,
    published_version: integer(prompt.publishedVersion, 'publishedVersion'),
    latest_version: integer(prompt.latestVersion, 'latestVersion'),
    created_at: timestamp(prompt.createdAt, 'createdAt'),
    last_updated_at: timestamp(prompt.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

/** The single-column key of a version number of a prompt or partial (see duckdb-schema.ts). */
export function versionKey(ownerId: string, version: number): string {
  return JSON.stringify([ownerId, version])
}

/** The single-column key of a label on a version of a prompt, or `NULL` without one (see duckdb-schema.ts). */
export function labelKey(promptId: string, labelId: string | null): string | null {
  return labelId === null ? null : JSON.stringify([promptId, labelId])
}

export function promptVersionRow(version: PromptVersionRecord): AdminRow {
  return {
    id: version.id,
    prompt_id: version.promptId,
    organisation_id: version.organisationId,
    workspace_id: version.workspaceId,
    version: integer(version.version, 'version'),
    version_key: versionKey(version.promptId, version.version),
    template: version.template,
    parameters: json(version.parameters),
    model: version.model,
    virtual_key: version.virtualKey,
    functions: optionalJson(version.functions),
    tools: optionalJson(version.tools),
    tool_choice: optionalJsonValue(version.toolChoice),
    description: version.description,
    template_metadata: optionalJson(version.templateMetadata),
    is_raw_template: version.isRawTemplate,
    label_id: version.labelId,
    label_key: labelKey(version.promptId, version.labelId),
    status: version.status,
    created_at: timestamp(version.createdAt, 'createdAt'),
  }
}

export function labelRow(label: LabelRecord): AdminRow {
  return {
    id: label.id,
    organisation_id: label.organisationId,
    workspace_id: label.workspaceId,
    // The key that makes names unique per workspace, and built-in names per organisation (see duckdb-schema.ts).
    scope: label.isUniversal ? '' : (label.workspaceId ?? ''),
    name: label.name,
    description: label.description,
    color_code: label.colorCode,
    is_universal: label.isUniversal,
    status: label.status,
    created_at: timestamp(label.createdAt, 'createdAt'),
    last_updated_at: timestamp(label.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function partialRow(partial: PartialRecord): AdminRow {
  return {
    id: partial.id,
    slug: partial.slug,
    organisation_id: partial.organisationId,
    workspace_id: partial.workspaceId,
    collection_id: partial.collectionId,
    name: partial.name,
    status: partial.status,
    published_version: integer(partial.publishedVersion, 'publishedVersion'),
    latest_version: integer(partial.latestVersion, 'latestVersion'),
    created_at: timestamp(partial.createdAt, 'createdAt'),
    last_updated_at: timestamp(partial.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function partialVersionRow(version: PartialVersionRecord): AdminRow {
  return {
    id: version.id,
    partial_id: version.partialId,
    organisation_id: version.organisationId,
    workspace_id: version.workspaceId,
    version: integer(version.version, 'version'),
    version_key: versionKey(version.partialId, version.version),
    template: version.template,
    description: version.description,
    status: version.status,
    created_at: timestamp(version.createdAt, 'createdAt'),
  }
}

/** The single-column key of a slug in an organisation (see duckdb-schema.ts `configs`). */
export function slugKey(organisationId: string, slug: string): string {
  return JSON.stringify([organisationId, slug])
}

export function configRow(config: ConfigRecord): AdminRow {
  return {
    id: config.id,
    slug: config.slug,
    slug_key: slugKey(config.organisationId, config.slug),
    organisation_id: config.organisationId,
    workspace_id: config.workspaceId,
    name: config.name,
    config: config.config,
    version: integer(config.version, 'version'),
    version_id: config.versionId,
    is_default: config.isDefault,
    // The key that allows one default config per workspace (see duckdb-schema.ts).
    default_workspace_id: config.isDefault ? config.workspaceId : null,
    status: config.status,
    owner_id: config.ownerId,
    updated_by: config.updatedBy,
    created_at: timestamp(config.createdAt, 'createdAt'),
    last_updated_at: timestamp(config.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function configVersionRow(version: ConfigVersionRecord): AdminRow {
  return {
    id: version.id,
    config_id: version.configId,
    organisation_id: version.organisationId,
    workspace_id: version.workspaceId,
    version: integer(version.version, 'version'),
    version_key: versionKey(version.configId, version.version),
    config: version.config,
    created_by: version.createdBy,
    created_at: timestamp(version.createdAt, 'createdAt'),
  }
}

export function auditRow(entry: AuditEntry): AdminRow {
  if (!Number.isInteger(entry.responseStatusCode)) {
    throw gatewayError(ERRORS.GW_ADMIN_VALIDATION, 'responseStatusCode is not an integer', { param: 'responseStatusCode' })
  }
  return {
    id: entry.id,
    timestamp: timestamp(entry.timestamp, 'timestamp'),
    organisation_id: entry.organisationId,
    workspace_id: entry.workspaceId,
    user_id: entry.userId,
    user_type: entry.userType,
    api_key_id: entry.apiKeyId,
    method: entry.method,
    uri: entry.uri,
    request_id: entry.requestId,
    request_body: entry.requestBody,
    query_params: entry.queryParams,
    response_status_code: entry.responseStatusCode,
    resource_type: entry.resourceType,
    action: entry.action,
    resource_id: entry.resourceId,
    client_ip: entry.clientIp,
  }
}

// ---------------------------------------------------------------------------------------------
// Reading

/** `SELECT` lists, in the column order of the matching `*Row` function (prefixable for joins). */
export const COLUMNS = {
  organisations: ['id', 'name', 'created_at', 'jwt_settings'],
  users: [
    'id', 'organisation_id', 'email', 'first_name', 'last_name', 'role', 'password_hash', 'created_at', 'last_updated_at',
  ],
  workspaces: [
    'id', 'slug', 'organisation_id', 'name', 'description', 'defaults', 'usage_limits', 'rate_limits', 'created_at',
    'last_updated_at',
  ],
  workspace_members: ['workspace_id', 'user_id', 'organisation_id', 'role', 'created_at', 'last_updated_at'],
  invites: [
    'id', 'organisation_id', 'token_hash', 'email', 'role', 'workspaces', 'api_key_scopes', 'invited_by', 'state',
    'created_at', 'expires_at', 'accepted_at', 'last_updated_at',
  ],
  api_keys: [
    'id', 'key_hash', 'masked_key', 'name', 'description', 'type', 'organisation_id', 'workspace_id', 'user_id', 'scopes',
    'status', 'expires_at', 'creation_mode', 'rate_limits', 'usage_limits', 'defaults', 'alert_emails', 'previous_key_hash',
    'previous_key_expires_at', 'last_rotated_at', 'created_at', 'last_updated_at',
  ],
  virtual_keys: [
    'id', 'slug', 'organisation_id', 'workspace_id', 'name', 'note', 'provider', 'sealed_keys', 'masked_key', 'custom_host',
    'sealed_model_config', 'rate_limits', 'usage_limits', 'status', 'expires_at', 'created_at', 'last_updated_at',
  ],
  collections: [
    'id', 'slug', 'organisation_id', 'workspace_id', 'name', 'parent_collection_id', 'is_default', 'default_workspace_id',
    'status', 'created_at', 'last_updated_at',
  ],
  prompts: [
    'id', 'slug', 'organisation_id', 'workspace_id', 'collection_id', 'name', 'status', 'published_version', 'latest_version',
    'created_at', 'last_updated_at',
  ],
  prompt_versions: [
    'id', 'prompt_id', 'organisation_id', 'workspace_id', 'version', 'version_key', 'template', 'parameters', 'model',
    'virtual_key', 'functions', 'tools', 'tool_choice', 'description', 'template_metadata', 'is_raw_template', 'label_id',
    'label_key', 'status', 'created_at',
  ],
  labels: [
    'id', 'organisation_id', 'workspace_id', 'scope', 'name', 'description', 'color_code', 'is_universal', 'status',
    'created_at', 'last_updated_at',
  ],
  partials: [
    'id', 'slug', 'organisation_id', 'workspace_id', 'collection_id', 'name', 'status', 'published_version', 'latest_version',
    'created_at', 'last_updated_at',
  ],
  partial_versions: [
    'id', 'partial_id', 'organisation_id', 'workspace_id', 'version', 'version_key', 'template', 'description', 'status',
    'created_at',
  ],
  configs: [
    'id', 'slug', 'slug_key', 'organisation_id', 'workspace_id', 'name', 'config', 'version', 'version_id', 'is_default',
    'default_workspace_id', 'status', 'owner_id', 'updated_by', 'created_at', 'last_updated_at',
  ],
  config_versions: ['id', 'config_id', 'organisation_id', 'workspace_id', 'version', 'version_key', 'config', 'created_by', 'created_at'],
  audit_log: [
    'id', 'timestamp', 'organisation_id', 'workspace_id', 'user_id', 'user_type', 'method', 'uri', 'request_id',
    'request_body', 'query_params', 'response_status_code', 'resource_type', 'action', 'resource_id', 'client_ip',
    'api_key_id',
  ],
} as const satisfies Record<string, readonly string[]>

/**
 * A `SELECT` list for `table`'s columns. With `alias`, columns are qualified by it; with `prefix`,
 * each is renamed `<prefix><column>` so two tables' columns can share one joined row.
 */
export function selectList(table: keyof typeof COLUMNS, alias = '', prefix = ''): string {
  const qualifier = alias === '' ? '' : `${alias}.`
  const rename = (column: string): string => (prefix === '' ? '' : ` AS ${prefix}${column}`)
  return COLUMNS[table].map((column) => `${qualifier}${column}${rename(column)}`).join(', ')
}

function broken(column: string, what: string): Error {
  return new Error(`DuckDB admin store: column ${column} is not ${what}`)
}

/** Reads the columns of one table from a row whose column names may carry a prefix. */
class RowReader {
  readonly #row: SqlRow
  readonly #prefix: string

  constructor(row: SqlRow, prefix: string) {
    this.#row = row
    this.#prefix = prefix
  }

  #value(column: string): unknown {
    return this.#row[this.#prefix + column]
  }

  text(column: string): string {
    const value = this.#value(column)
    if (typeof value !== 'string') throw broken(column, 'text')
    return value
  }

  optionalText(column: string): string | null {
    const value = this.#value(column)
    return value === null || value === undefined ? null : this.text(column)
  }

  iso(column: string): string {
    const value = this.#value(column)
    if (!(value instanceof Date)) throw broken(column, 'a timestamp')
    return value.toISOString()
  }

  optionalIso(column: string): string | null {
    const value = this.#value(column)
    return value === null || value === undefined ? null : this.iso(column)
  }

  integer(column: string): number {
    const value = this.#value(column)
    if (typeof value === 'number' && Number.isInteger(value)) return value
    if (typeof value === 'bigint') return Number(value)
    throw broken(column, 'an integer')
  }

  boolean(column: string): boolean {
    const value = this.#value(column)
    if (typeof value !== 'boolean') throw broken(column, 'a boolean')
    return value
  }

  textList(column: string): string[] {
    const value = this.#value(column)
    if (!Array.isArray(value)) throw broken(column, 'a list')
    return value.map((item) => String(item))
  }

  optionalTextList(column: string): string[] | null {
    const value = this.#value(column)
    return value === null || value === undefined ? null : this.textList(column)
  }

  /** JSON text holding an array (the element shape is the record type's, as written). */
  jsonList<T>(column: string): T[] {
    const value: unknown = JSON.parse(this.text(column))
    if (!Array.isArray(value)) throw broken(column, 'a JSON array')
    return value as T[]
  }

  /** JSON text holding an array, or `NULL`. */
  optionalJsonList<T>(column: string): T[] | null {
    return this.optionalText(column) === null ? null : this.jsonList<T>(column)
  }

  /** JSON text holding an object. */
  jsonObject<T>(column: string): T {
    const value = this.optionalJsonObject<T>(column)
    if (value === null) throw broken(column, 'a JSON object')
    return value
  }

  /** JSON text holding any value; `NULL` reads as `null`. */
  optionalJsonValue(column: string): unknown {
    const source = this.optionalText(column)
    return source === null ? null : (JSON.parse(source) as unknown)
  }

  /** JSON text holding an object, or `NULL`. */
  optionalJsonObject<T>(column: string): T | null {
    const source = this.optionalText(column)
    if (source === null) return null
    const value: unknown = JSON.parse(source)
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw broken(column, 'a JSON object')
    return value as T
  }
}

export function toOrganisation(row: SqlRow, prefix = ''): OrganisationRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    name: read.text('name'),
    createdAt: read.iso('created_at'),
    jwt: jwtSettingsOf(read.optionalJsonObject<StoredJwtSettings>('jwt_settings')),
  }
}

/** JWT settings as stored: files written before issuer and audience existed lack them. */
type StoredJwtSettings = Omit<JwtSettings, 'issuer' | 'audience'> & Partial<Pick<JwtSettings, 'issuer' | 'audience'>>

/**
 * The settings are one JSON text column, so adding a member needs no column migration: a member
 * missing from older text reads as `null` (not set), which is what it meant when it was written.
 */
function jwtSettingsOf(stored: StoredJwtSettings | null): JwtSettings | null {
  if (stored === null) return null
  return {
    jwksUrl: stored.jwksUrl,
    jwks: stored.jwks,
    issuer: stored.issuer ?? null,
    audience: stored.audience ?? null,
    updatedAt: stored.updatedAt,
  }
}

export function toUser(row: SqlRow, prefix = ''): UserRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    organisationId: read.text('organisation_id'),
    email: read.text('email'),
    firstName: read.text('first_name'),
    lastName: read.text('last_name'),
    role: read.text('role') as OrganisationRole,
    passwordHash: read.optionalText('password_hash'),
    createdAt: read.iso('created_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toWorkspace(row: SqlRow, prefix = ''): WorkspaceRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    slug: read.text('slug'),
    organisationId: read.text('organisation_id'),
    name: read.text('name'),
    description: read.optionalText('description'),
    defaults: read.optionalJsonObject<RequestDefaults>('defaults'),
    usageLimits: read.jsonList<UsageLimitRule>('usage_limits'),
    rateLimits: read.jsonList<RateLimitRule>('rate_limits'),
    createdAt: read.iso('created_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toMember(row: SqlRow, prefix = ''): WorkspaceMemberRecord {
  const read = new RowReader(row, prefix)
  return {
    workspaceId: read.text('workspace_id'),
    userId: read.text('user_id'),
    organisationId: read.text('organisation_id'),
    role: read.text('role') as WorkspaceRole,
    createdAt: read.iso('created_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toInvite(row: SqlRow, prefix = ''): InviteRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    organisationId: read.text('organisation_id'),
    tokenHash: read.text('token_hash'),
    email: read.text('email'),
    role: read.text('role') as InviteRecord['role'],
    workspaces: read.jsonList<InviteRecord['workspaces'][number]>('workspaces'),
    apiKeyScopes: read.optionalTextList('api_key_scopes'),
    invitedBy: read.optionalText('invited_by'),
    state: read.text('state') as InviteState,
    createdAt: read.iso('created_at'),
    expiresAt: read.iso('expires_at'),
    acceptedAt: read.optionalIso('accepted_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toApiKey(row: SqlRow, prefix = ''): ApiKeyRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    keyHash: read.text('key_hash'),
    maskedKey: read.text('masked_key'),
    name: read.text('name'),
    description: read.optionalText('description'),
    type: read.text('type') as ApiKeyType,
    organisationId: read.text('organisation_id'),
    workspaceId: read.optionalText('workspace_id'),
    userId: read.optionalText('user_id'),
    scopes: read.textList('scopes'),
    status: read.text('status') as ApiKeyStatus,
    expiresAt: read.optionalIso('expires_at'),
    creationMode: read.text('creation_mode') as ApiKeyRecord['creationMode'],
    rateLimits: read.jsonList<RateLimitRule>('rate_limits'),
    usageLimits: read.optionalJsonObject<UsageLimitRule>('usage_limits'),
    defaults: read.optionalJsonObject<RequestDefaults>('defaults'),
    alertEmails: read.textList('alert_emails'),
    previousKeyHash: read.optionalText('previous_key_hash'),
    previousKeyExpiresAt: read.optionalIso('previous_key_expires_at'),
    lastRotatedAt: read.optionalIso('last_rotated_at'),
    createdAt: read.iso('created_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toVirtualKey(row: SqlRow, prefix = ''): VirtualKeyRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    slug: read.text('slug'),
    organisationId: read.text('organisation_id'),
    workspaceId: read.text('workspace_id'),
    name: read.text('name'),
    note: read.optionalText('note'),
    provider: read.text('provider'),
    sealedKeys: read.textList('sealed_keys'),
    maskedKey: read.optionalText('masked_key'),
    customHost: read.optionalText('custom_host'),
    sealedModelConfig: read.optionalText('sealed_model_config'),
    rateLimits: read.jsonList<RateLimitRule>('rate_limits'),
    usageLimits: read.optionalJsonObject<UsageLimitRule>('usage_limits'),
    status: read.text('status') as VirtualKeyStatus,
    expiresAt: read.optionalIso('expires_at'),
    createdAt: read.iso('created_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toAuditEntry(row: SqlRow, prefix = ''): AuditEntry {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    timestamp: read.iso('timestamp'),
    organisationId: read.optionalText('organisation_id'),
    workspaceId: read.optionalText('workspace_id'),
    userId: read.optionalText('user_id'),
    userType: read.text('user_type') as AuditEntry['userType'],
    apiKeyId: read.optionalText('api_key_id'),
    method: read.text('method'),
    uri: read.text('uri'),
    requestId: read.text('request_id'),
    requestBody: read.optionalText('request_body'),
    queryParams: read.text('query_params'),
    responseStatusCode: read.integer('response_status_code'),
    resourceType: read.text('resource_type'),
    action: read.text('action'),
    resourceId: read.optionalText('resource_id'),
    clientIp: read.optionalText('client_ip'),
  }
}

export function toCollection(row: SqlRow, prefix = ''): CollectionRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    slug: read.text('slug'),
    organisationId: read.text('organisation_id'),
    workspaceId: read.text('workspace_id'),
    name: read.text('name'),
    parentCollectionId: read.optionalText('parent_collection_id'),
    isDefault: read.boolean('is_default'),
    status: read.text('status') as PromptStatus,
    createdAt: read.iso('created_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toPrompt(row: SqlRow, prefix = ''): PromptRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    slug: read.text('slug'),
    organisationId: read.text('organisation_id'),
    workspaceId: read.text('workspace_id'),
    collectionId: read.text('collection_id'),
    name: read.text('name'),
    status: read.text('status') as PromptStatus,
    publishedVersion: read.integer('published_version'),
    latestVersion: read.integer('latest_version'),
    createdAt: read.iso('created_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toPromptVersion(row: SqlRow, prefix = ''): PromptVersionRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    promptId: read.text('prompt_id'),
    organisationId: read.text('organisation_id'),
    workspaceId: read.text('workspace_id'),
    version: read.integer('version'),
    template: read.text('template'),
    parameters: read.jsonObject<Record<string, unknown>>('parameters'),
    model: read.optionalText('model'),
    virtualKey: read.optionalText('virtual_key'),
    functions: read.optionalJsonList<unknown>('functions'),
    tools: read.optionalJsonList<unknown>('tools'),
    toolChoice: read.optionalJsonValue('tool_choice'),
    description: read.optionalText('description'),
    templateMetadata: read.optionalJsonObject<Record<string, unknown>>('template_metadata'),
    isRawTemplate: read.boolean('is_raw_template'),
    labelId: read.optionalText('label_id'),
    status: read.text('status') as PromptStatus,
    createdAt: read.iso('created_at'),
  }
}

export function toLabel(row: SqlRow, prefix = ''): LabelRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    organisationId: read.text('organisation_id'),
    workspaceId: read.optionalText('workspace_id'),
    name: read.text('name'),
    description: read.optionalText('description'),
    colorCode: read.optionalText('color_code'),
    isUniversal: read.boolean('is_universal'),
    status: read.text('status') as PromptStatus,
    createdAt: read.iso('created_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toPartial(row: SqlRow, prefix = ''): PartialRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    slug: read.text('slug'),
    organisationId: read.text('organisation_id'),
    workspaceId: read.text('workspace_id'),
    collectionId: read.optionalText('collection_id'),
    name: read.text('name'),
    status: read.text('status') as PromptStatus,
    publishedVersion: read.integer('published_version'),
    latestVersion: read.integer('latest_version'),
    createdAt: read.iso('created_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toPartialVersion(row: SqlRow, prefix = ''): PartialVersionRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    partialId: read.text('partial_id'),
    organisationId: read.text('organisation_id'),
    workspaceId: read.text('workspace_id'),
    version: read.integer('version'),
    template: read.text('template'),
    description: read.optionalText('description'),
    status: read.text('status') as PromptStatus,
    createdAt: read.iso('created_at'),
  }
}

export function toConfig(row: SqlRow, prefix = ''): ConfigRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    slug: read.text('slug'),
    organisationId: read.text('organisation_id'),
    workspaceId: read.text('workspace_id'),
    name: read.text('name'),
    config: read.text('config'),
    version: read.integer('version'),
    versionId: read.text('version_id'),
    isDefault: read.boolean('is_default'),
    status: read.text('status') as ConfigStatus,
    ownerId: read.optionalText('owner_id'),
    updatedBy: read.optionalText('updated_by'),
    createdAt: read.iso('created_at'),
    lastUpdatedAt: read.iso('last_updated_at'),
  }
}

export function toConfigVersion(row: SqlRow, prefix = ''): ConfigVersionRecord {
  const read = new RowReader(row, prefix)
  return {
    id: read.text('id'),
    configId: read.text('config_id'),
    organisationId: read.text('organisation_id'),
    workspaceId: read.text('workspace_id'),
    version: read.integer('version'),
    config: read.text('config'),
    createdBy: read.optionalText('created_by'),
    createdAt: read.iso('created_at'),
  }
}
