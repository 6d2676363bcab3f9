/**
 * Record ↔ document mappers of the MongoDB admin store. Writing validates timestamps (an unparsable
 * one is `GW_ADMIN_VALIDATION`, so nothing half-written reaches the database); reading turns BSON
 * dates back into `Date#toISOString()` strings.
 */
import type {
  ApiKeyRecord,
  AuditEntry,
  CollectionRecord,
  ConfigRecord,
  ConfigVersionRecord,
  InviteRecord,
  LabelRecord,
  OrganisationRecord,
  PartialRecord,
  PartialVersionRecord,
  PromptRecord,
  PromptVersionRecord,
  RateLimitRule,
  RequestDefaults,
  UsageLimitRule,
  UserRecord,
  VirtualKeyRecord,
  WorkspaceMemberRecord,
  WorkspaceMemberWithUser,
  WorkspaceRecord,
} from '../../core/admin-records.js'
import { ERRORS, gatewayError } from '../../core/errors.js'
import type {
  ApiKeyDocument,
  AuditDocument,
  CollectionDocument,
  ConfigDocument,
  ConfigVersionDocument,
  InviteDocument,
  LabelDocument,
  PartialDocument,
  PartialVersionDocument,
  PromptDocument,
  PromptVersionDocument,
  MemberDocument,
  MemberWithUserDocument,
  OrganisationDocument,
  RateLimitDocument,
  RequestDefaultsDocument,
  UsageLimitDocument,
  UserDocument,
  VirtualKeyDocument,
  WorkspaceDocument,
} from './mongo-admin-collections.js'

/** The BSON date of an ISO 8601 timestamp; `field` names the record field in the validation error. */
export function toDate(value: string, field: string): Date {
  const date = new Date(value)
  if (Number.isNaN(date.getTime())) {
    throw gatewayError(ERRORS.GW_ADMIN_VALIDATION, `${field} is not an ISO 8601 timestamp`, { param: field })
  }
  return date
}

function toOptionalDate(value: string | null, field: string): Date | null {
  return value === null ? null : toDate(value, field)
}

/** Documents edited by hand may hold anything; a non-date fails loudly instead of as a TypeError later. */
function iso(value: Date, field: string): string {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new Error(`MongoDB admin store: field ${field} is not a date`)
  }
  return value.toISOString()
}

function optionalIso(value: Date | null, field: string): string | null {
  return value === null ? null : iso(value, field)
}

/** A version number: a safe integer, else the caller's mistake, named by `field`. */
function integer(value: number, field: string): number {
  if (!Number.isSafeInteger(value)) {
    throw gatewayError(ERRORS.GW_ADMIN_VALIDATION, `${field} is not an integer`, { param: field })
  }
  return value
}

/** JSON text of a tenant's value; `null` (and a missing value) is stored as `null`. */
function jsonText(value: unknown): string | null {
  return value === null || value === undefined ? null : JSON.stringify(value)
}

function parsedJson(text: string | null, field: string): unknown {
  if (text === null) return null
  if (typeof text !== 'string') throw new Error(`MongoDB admin store: field ${field} is not JSON text`)
  return JSON.parse(text) as unknown
}

function parsedObject(text: string | null, field: string): Record<string, unknown> | null {
  const value = parsedJson(text, field)
  if (value === null) return null
  if (typeof value !== 'object' || Array.isArray(value)) throw new Error(`MongoDB admin store: field ${field} is not a JSON object`)
  return value as Record<string, unknown>
}

function parsedList(text: string | null, field: string): unknown[] | null {
  const value = parsedJson(text, field)
  if (value !== null && !Array.isArray(value)) throw new Error(`MongoDB admin store: field ${field} is not a JSON array`)
  return value
}

function rateLimitsToDocuments(rules: readonly RateLimitRule[]): RateLimitDocument[] {
  return rules.map((rule) => ({ type: rule.type, unit: rule.unit, value: rule.value }))
}

function rateLimitsFromDocuments(documents: readonly RateLimitDocument[]): RateLimitRule[] {
  return documents.map((rule) => ({ type: rule.type, unit: rule.unit, value: rule.value }))
}

function usageLimitToDocument(rule: UsageLimitRule): UsageLimitDocument {
  return {
    type: rule.type,
    credit_limit: rule.creditLimit,
    alert_threshold: rule.alertThreshold,
    periodic_reset: rule.periodicReset,
    periodic_reset_days: rule.periodicResetDays,
  }
}

function usageLimitFromDocument(document: UsageLimitDocument): UsageLimitRule {
  return {
    type: document.type,
    creditLimit: document.credit_limit,
    alertThreshold: document.alert_threshold,
    periodicReset: document.periodic_reset,
    periodicResetDays: document.periodic_reset_days,
  }
}

function defaultsToDocument(defaults: RequestDefaults | null): RequestDefaultsDocument | null {
  if (defaults === null) return null
  return {
    metadata:
      defaults.metadata === null ? null : Object.entries(defaults.metadata).map(([key, value]) => ({ key, value })),
    config_id: defaults.configId,
  }
}

function defaultsFromDocument(document: RequestDefaultsDocument | null): RequestDefaults | null {
  if (document === null) return null
  return {
    // fromEntries defines own properties, so a `__proto__` key stays data.
    metadata: document.metadata === null ? null : Object.fromEntries(document.metadata.map((pair) => [pair.key, pair.value])),
    configId: document.config_id,
  }
}

export function organisationToDocument(organisation: OrganisationRecord): OrganisationDocument {
  const jwt = organisation.jwt
  return {
    _id: organisation.id,
    name: organisation.name,
    created_at: toDate(organisation.createdAt, 'createdAt'),
    jwt:
      jwt === null
        ? null
        : {
            jwks_url: jwt.jwksUrl,
            jwks_json: jwt.jwks === null ? null : JSON.stringify(jwt.jwks),
            issuer: jwt.issuer,
            audience: jwt.audience === null ? null : [...jwt.audience],
            updated_at: toDate(jwt.updatedAt, 'jwt.updatedAt'),
          },
  }
}

export function organisationFromDocument(document: OrganisationDocument): OrganisationRecord {
  const jwt = document.jwt
  return {
    id: document._id,
    name: document.name,
    createdAt: iso(document.created_at, 'created_at'),
    jwt:
      jwt === null
        ? null
        : {
            jwksUrl: jwt.jwks_url,
            jwks: jwt.jwks_json === null ? null : (JSON.parse(jwt.jwks_json) as NonNullable<OrganisationRecord['jwt']>['jwks']),
            issuer: jwt.issuer ?? null,
            audience: jwt.audience ?? null,
            updatedAt: iso(jwt.updated_at, 'jwt.updated_at'),
          },
  }
}

export function userToDocument(user: UserRecord): UserDocument {
  return {
    _id: user.id,
    organisation_id: user.organisationId,
    email: user.email,
    first_name: user.firstName,
    last_name: user.lastName,
    role: user.role,
    password_hash: user.passwordHash,
    created_at: toDate(user.createdAt, 'createdAt'),
    last_updated_at: toDate(user.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function userFromDocument(document: UserDocument): UserRecord {
  return {
    id: document._id,
    organisationId: document.organisation_id,
    email: document.email,
    firstName: document.first_name,
    lastName: document.last_name,
    role: document.role,
    passwordHash: document.password_hash,
    createdAt: iso(document.created_at, 'created_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function workspaceToDocument(workspace: WorkspaceRecord): WorkspaceDocument {
  return {
    _id: workspace.id,
    slug: workspace.slug,
    organisation_id: workspace.organisationId,
    name: workspace.name,
    description: workspace.description,
    defaults: defaultsToDocument(workspace.defaults),
    usage_limits: workspace.usageLimits.map(usageLimitToDocument),
    rate_limits: rateLimitsToDocuments(workspace.rateLimits),
    created_at: toDate(workspace.createdAt, 'createdAt'),
    last_updated_at: toDate(workspace.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function workspaceFromDocument(document: WorkspaceDocument): WorkspaceRecord {
  return {
    id: document._id,
    slug: document.slug,
    organisationId: document.organisation_id,
    name: document.name,
    description: document.description,
    defaults: defaultsFromDocument(document.defaults),
    usageLimits: document.usage_limits.map(usageLimitFromDocument),
    rateLimits: rateLimitsFromDocuments(document.rate_limits),
    createdAt: iso(document.created_at, 'created_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function memberToDocument(member: WorkspaceMemberRecord): MemberDocument {
  return {
    workspace_id: member.workspaceId,
    user_id: member.userId,
    organisation_id: member.organisationId,
    role: member.role,
    created_at: toDate(member.createdAt, 'createdAt'),
    last_updated_at: toDate(member.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function memberFromDocument(document: MemberDocument): WorkspaceMemberRecord {
  return {
    workspaceId: document.workspace_id,
    userId: document.user_id,
    organisationId: document.organisation_id,
    role: document.role,
    createdAt: iso(document.created_at, 'created_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function memberWithUserFromDocument(document: MemberWithUserDocument): WorkspaceMemberWithUser {
  return { member: memberFromDocument(document), user: userFromDocument(document.user) }
}

export function inviteToDocument(invite: InviteRecord): InviteDocument {
  return {
    _id: invite.id,
    organisation_id: invite.organisationId,
    token_hash: invite.tokenHash,
    email: invite.email,
    role: invite.role,
    workspaces: invite.workspaces.map((grant) => ({ workspace_id: grant.workspaceId, role: grant.role })),
    api_key_scopes: invite.apiKeyScopes === null ? null : [...invite.apiKeyScopes],
    invited_by: invite.invitedBy,
    state: invite.state,
    created_at: toDate(invite.createdAt, 'createdAt'),
    expires_at: toDate(invite.expiresAt, 'expiresAt'),
    accepted_at: toOptionalDate(invite.acceptedAt, 'acceptedAt'),
    last_updated_at: toDate(invite.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function inviteFromDocument(document: InviteDocument): InviteRecord {
  return {
    id: document._id,
    organisationId: document.organisation_id,
    tokenHash: document.token_hash,
    email: document.email,
    role: document.role,
    workspaces: document.workspaces.map((grant) => ({ workspaceId: grant.workspace_id, role: grant.role })),
    apiKeyScopes: document.api_key_scopes,
    invitedBy: document.invited_by,
    state: document.state,
    createdAt: iso(document.created_at, 'created_at'),
    expiresAt: iso(document.expires_at, 'expires_at'),
    acceptedAt: optionalIso(document.accepted_at, 'accepted_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function apiKeyToDocument(key: ApiKeyRecord): ApiKeyDocument {
  return {
    _id: key.id,
    key_hash: key.keyHash,
    masked_key: key.maskedKey,
    name: key.name,
    description: key.description,
    type: key.type,
    organisation_id: key.organisationId,
    workspace_id: key.workspaceId,
    user_id: key.userId,
    scopes: [...key.scopes],
    status: key.status,
    expires_at: toOptionalDate(key.expiresAt, 'expiresAt'),
    creation_mode: key.creationMode,
    rate_limits: rateLimitsToDocuments(key.rateLimits),
    usage_limits: key.usageLimits === null ? null : usageLimitToDocument(key.usageLimits),
    defaults: defaultsToDocument(key.defaults),
    alert_emails: [...key.alertEmails],
    ...(key.previousKeyHash === null ? {} : { previous_key_hash: key.previousKeyHash }),
    previous_key_expires_at: toOptionalDate(key.previousKeyExpiresAt, 'previousKeyExpiresAt'),
    last_rotated_at: toOptionalDate(key.lastRotatedAt, 'lastRotatedAt'),
    created_at: toDate(key.createdAt, 'createdAt'),
    last_updated_at: toDate(key.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function apiKeyFromDocument(document: ApiKeyDocument): ApiKeyRecord {
  return {
    id: document._id,
    keyHash: document.key_hash,
    maskedKey: document.masked_key,
    name: document.name,
    description: document.description,
    type: document.type,
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    userId: document.user_id,
    scopes: document.scopes,
    status: document.status,
    expiresAt: optionalIso(document.expires_at, 'expires_at'),
    creationMode: document.creation_mode,
    rateLimits: rateLimitsFromDocuments(document.rate_limits),
    usageLimits: document.usage_limits === null ? null : usageLimitFromDocument(document.usage_limits),
    defaults: defaultsFromDocument(document.defaults),
    alertEmails: document.alert_emails,
    previousKeyHash: document.previous_key_hash ?? null,
    previousKeyExpiresAt: optionalIso(document.previous_key_expires_at, 'previous_key_expires_at'),
    lastRotatedAt: optionalIso(document.last_rotated_at, 'last_rotated_at'),
    createdAt: iso(document.created_at, 'created_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function virtualKeyToDocument(key: VirtualKeyRecord): VirtualKeyDocument {
  return {
    _id: key.id,
    slug: key.slug,
    organisation_id: key.organisationId,
    workspace_id: key.workspaceId,
    name: key.name,
    note: key.note,
    provider: key.provider,
    sealed_keys: [...key.sealedKeys],
    masked_key: key.maskedKey,
    custom_host: key.customHost,
    sealed_model_config: key.sealedModelConfig,
    rate_limits: rateLimitsToDocuments(key.rateLimits),
    usage_limits: key.usageLimits === null ? null : usageLimitToDocument(key.usageLimits),
    status: key.status,
    expires_at: toOptionalDate(key.expiresAt, 'expiresAt'),
    created_at: toDate(key.createdAt, 'createdAt'),
    last_updated_at: toDate(key.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function virtualKeyFromDocument(document: VirtualKeyDocument): VirtualKeyRecord {
  return {
    id: document._id,
    slug: document.slug,
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    name: document.name,
    note: document.note,
    provider: document.provider,
    sealedKeys: document.sealed_keys,
    maskedKey: document.masked_key,
    customHost: document.custom_host,
    sealedModelConfig: document.sealed_model_config,
    rateLimits: rateLimitsFromDocuments(document.rate_limits),
    usageLimits: document.usage_limits === null ? null : usageLimitFromDocument(document.usage_limits),
    status: document.status,
    expiresAt: optionalIso(document.expires_at, 'expires_at'),
    createdAt: iso(document.created_at, 'created_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function auditToDocument(entry: AuditEntry): AuditDocument {
  return {
    _id: entry.id,
    timestamp: toDate(entry.timestamp, 'timestamp'),
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

export function auditFromDocument(document: AuditDocument): AuditEntry {
  return {
    id: document._id,
    timestamp: iso(document.timestamp, 'timestamp'),
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    userId: document.user_id,
    userType: document.user_type,
    apiKeyId: document.api_key_id ?? null,
    method: document.method,
    uri: document.uri,
    requestId: document.request_id,
    requestBody: document.request_body,
    queryParams: document.query_params,
    responseStatusCode: document.response_status_code,
    resourceType: document.resource_type,
    action: document.action,
    resourceId: document.resource_id,
    clientIp: document.client_ip,
  }
}

export function collectionToDocument(collection: CollectionRecord): CollectionDocument {
  return {
    _id: collection.id,
    slug: collection.slug,
    organisation_id: collection.organisationId,
    workspace_id: collection.workspaceId,
    name: collection.name,
    parent_collection_id: collection.parentCollectionId,
    is_default: collection.isDefault,
    status: collection.status,
    created_at: toDate(collection.createdAt, 'createdAt'),
    last_updated_at: toDate(collection.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function collectionFromDocument(document: CollectionDocument): CollectionRecord {
  return {
    id: document._id,
    slug: document.slug,
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    name: document.name,
    parentCollectionId: document.parent_collection_id,
    isDefault: document.is_default,
    status: document.status,
    createdAt: iso(document.created_at, 'created_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function promptToDocument(prompt: PromptRecord): PromptDocument {
  return {
    _id: prompt.id,
    slug: prompt.slug,
    organisation_id: prompt.organisationId,
    workspace_id: prompt.workspaceId,
    collection_id: prompt.collectionId,
    name: prompt.name,
    status: prompt.status,
    published_version: integer(prompt.publishedVersion, 'publishedVersion'),
    latest_version: integer(prompt.latestVersion, 'latestVersion'),
    created_at: toDate(prompt.createdAt, 'createdAt'),
    last_updated_at: toDate(prompt.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function promptFromDocument(document: PromptDocument): PromptRecord {
  return {
    id: document._id,
    slug: document.slug,
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    collectionId: document.collection_id,
    name: document.name,
    status: document.status,
    publishedVersion: document.published_version,
    latestVersion: document.latest_version,
    createdAt: iso(document.created_at, 'created_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function promptVersionToDocument(version: PromptVersionRecord): PromptVersionDocument {
  return {
    _id: version.id,
    prompt_id: version.promptId,
    organisation_id: version.organisationId,
    workspace_id: version.workspaceId,
    version: integer(version.version, 'version'),
    template: version.template,
    parameters_json: JSON.stringify(version.parameters),
    model: version.model,
    virtual_key: version.virtualKey,
    functions_json: jsonText(version.functions),
    tools_json: jsonText(version.tools),
    tool_choice_json: jsonText(version.toolChoice),
    description: version.description,
    template_metadata_json: jsonText(version.templateMetadata),
    is_raw_template: version.isRawTemplate,
    label_id: version.labelId,
    status: version.status,
    created_at: toDate(version.createdAt, 'createdAt'),
  }
}

export function promptVersionFromDocument(document: PromptVersionDocument): PromptVersionRecord {
  const parameters = parsedObject(document.parameters_json, 'parameters_json')
  if (parameters === null) throw new Error('MongoDB admin store: field parameters_json is not a JSON object')
  return {
    id: document._id,
    promptId: document.prompt_id,
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    version: document.version,
    template: document.template,
    parameters,
    model: document.model,
    virtualKey: document.virtual_key,
    functions: parsedList(document.functions_json, 'functions_json'),
    tools: parsedList(document.tools_json, 'tools_json'),
    toolChoice: parsedJson(document.tool_choice_json, 'tool_choice_json'),
    description: document.description,
    templateMetadata: parsedObject(document.template_metadata_json, 'template_metadata_json'),
    isRawTemplate: document.is_raw_template,
    labelId: document.label_id,
    status: document.status,
    createdAt: iso(document.created_at, 'created_at'),
  }
}

export function labelToDocument(label: LabelRecord): LabelDocument {
  return {
    _id: label.id,
    organisation_id: label.organisationId,
    workspace_id: label.workspaceId,
    name: label.name,
    description: label.description,
    color_code: label.colorCode,
    is_universal: label.isUniversal,
    status: label.status,
    created_at: toDate(label.createdAt, 'createdAt'),
    last_updated_at: toDate(label.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function labelFromDocument(document: LabelDocument): LabelRecord {
  return {
    id: document._id,
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    name: document.name,
    description: document.description,
    colorCode: document.color_code,
    isUniversal: document.is_universal,
    status: document.status,
    createdAt: iso(document.created_at, 'created_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function partialToDocument(partial: PartialRecord): PartialDocument {
  return {
    _id: partial.id,
    slug: partial.slug,
    organisation_id: partial.organisationId,
    workspace_id: partial.workspaceId,
    collection_id: partial.collectionId,
    name: partial.name,
    status: partial.status,
    published_version: integer(partial.publishedVersion, 'publishedVersion'),
    latest_version: integer(partial.latestVersion, 'latestVersion'),
    created_at: toDate(partial.createdAt, 'createdAt'),
    last_updated_at: toDate(partial.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function partialFromDocument(document: PartialDocument): PartialRecord {
  return {
    id: document._id,
    slug: document.slug,
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    collectionId: document.collection_id,
    name: document.name,
    status: document.status,
    publishedVersion: document.published_version,
    latestVersion: document.latest_version,
    createdAt: iso(document.created_at, 'created_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function partialVersionToDocument(version: PartialVersionRecord): PartialVersionDocument {
  return {
    _id: version.id,
    partial_id: version.partialId,
    organisation_id: version.organisationId,
    workspace_id: version.workspaceId,
    version: integer(version.version, 'version'),
    template: version.template,
    description: version.description,
    status: version.status,
    created_at: toDate(version.createdAt, 'createdAt'),
  }
}

export function partialVersionFromDocument(document: PartialVersionDocument): PartialVersionRecord {
  return {
    id: document._id,
    partialId: document.partial_id,
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    version: document.version,
    template: document.template,
    description: document.description,
    status: document.status,
    createdAt: iso(document.created_at, 'created_at'),
  }
}

/** A config's JSON text as stored; anything else fails loudly (documents edited by hand may hold anything). */
function configText(value: string, field: string): string {
  if (typeof value !== 'string') throw new Error(`MongoDB admin store: field ${field} is not JSON text`)
  return value
}

export function configToDocument(config: ConfigRecord): ConfigDocument {
  return {
    _id: config.id,
    slug: config.slug,
    organisation_id: config.organisationId,
    workspace_id: config.workspaceId,
    name: config.name,
    config_json: config.config,
    version: integer(config.version, 'version'),
    version_id: config.versionId,
    is_default: config.isDefault,
    status: config.status,
    owner_id: config.ownerId,
    updated_by: config.updatedBy,
    created_at: toDate(config.createdAt, 'createdAt'),
    last_updated_at: toDate(config.lastUpdatedAt, 'lastUpdatedAt'),
  }
}

export function configFromDocument(document: ConfigDocument): ConfigRecord {
  return {
    id: document._id,
    slug: document.slug,
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    name: document.name,
    config: configText(document.config_json, 'config_json'),
    version: document.version,
    versionId: document.version_id,
    isDefault: document.is_default,
    status: document.status,
    ownerId: document.owner_id,
    updatedBy: document.updated_by,
    createdAt: iso(document.created_at, 'created_at'),
    lastUpdatedAt: iso(document.last_updated_at, 'last_updated_at'),
  }
}

export function configVersionToDocument(version: ConfigVersionRecord): ConfigVersionDocument {
  return {
    _id: version.id,
    config_id: version.configId,
    organisation_id: version.organisationId,
    workspace_id: version.workspaceId,
    version: integer(version.version, 'version'),
    config_json: version.config,
    created_by: version.createdBy,
    created_at: toDate(version.createdAt, 'createdAt'),
  }
}

export function configVersionFromDocument(document: ConfigVersionDocument): ConfigVersionRecord {
  return {
    id: document._id,
    configId: document.config_id,
    organisationId: document.organisation_id,
    workspaceId: document.workspace_id,
    version: document.version,
    config: configText(document.config_json, 'config_json'),
    createdBy: document.created_by,
    createdAt: iso(document.created_at, 'created_at'),
  }
}
