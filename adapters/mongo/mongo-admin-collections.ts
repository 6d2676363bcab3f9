/**
 * The MongoDB layout of the admin store: one collection per resource, the document shapes, and the
 * indexes created at start. Field names are snake_case; ids are the records' UUID strings kept in
 * `_id` (memberships, which have no id of their own, get a driver-made ObjectId); timestamps are BSON
 * dates.
 *
 * Each unique index carries the conflict it stands for, so a duplicate-key error (which reports the
 * index's key pattern) can be turned into `GW_ADMIN_CONFLICT` naming the request field.
 */
import type { Collection, Db, IndexDescription, ObjectId } from 'mongodb'

/** Collection names, by role. */
export const ADMIN_COLLECTIONS = {
  organisations: 'organisations',
  users: 'users',
  workspaces: 'workspaces',
  members: 'workspace_members',
  invites: 'invites',
  apiKeys: 'api_keys',
  virtualKeys: 'virtual_keys',
  audit: 'audit_entries',
  promptCollections: 'collections',
  prompts: 'prompts',
  promptVersions: 'prompt_versions',
  labels: 'labels',
  partials: 'partials',
  partialVersions: 'partial_versions',
  configs: 'configs',
  configVersions: 'config_versions',
} as const

export type AdminCollectionRole = keyof typeof ADMIN_COLLECTIONS

export interface JwtSettingsDocument {
  jwks_url: string | null
  /**
   * The static JWKS as JSON text: its member names come from an identity provider and must
   * round-trip exactly, whatever characters (`$`, `.`) they hold.
   */
  jwks_json: string | null
  /** Absent in documents written before issuer and audience existed: read as `null`. */
  issuer?: string | null
  audience?: string[] | null
  updated_at: Date
}

export interface OrganisationDocument {
  _id: string
  name: string
  created_at: Date
  jwt: JwtSettingsDocument | null
}

export interface UserDocument {
  _id: string
  organisation_id: string
  email: string
  first_name: string
  last_name: string
  role: 'owner' | 'admin' | 'member'
  password_hash: string | null
  created_at: Date
  last_updated_at: Date
}

export interface RateLimitDocument {
  type: 'requests' | 'tokens'
  unit: 'rps' | 'rpm' | 'rph' | 'rpd' | 'rpw'
  value: number
}

export interface UsageLimitDocument {
  type: 'cost' | 'tokens'
  credit_limit: number
  alert_threshold: number | null
  periodic_reset: 'weekly' | 'monthly' | null
  periodic_reset_days: number | null
}

export interface RequestDefaultsDocument {
  /**
   * Metadata as ordered pairs: keys are tenant-chosen and may contain `.` or start with `$`, which
   * MongoDB field names handle badly.
   */
  metadata: Array<{ key: string; value: string }> | null
  config_id: string | null
}

export interface WorkspaceDocument {
  _id: string
  slug: string
  organisation_id: string
  name: string
  description: string | null
  defaults: RequestDefaultsDocument | null
  usage_limits: UsageLimitDocument[]
  rate_limits: RateLimitDocument[]
  created_at: Date
  last_updated_at: Date
}

export interface MemberDocument {
  _id?: ObjectId
  workspace_id: string
  user_id: string
  organisation_id: string
  role: 'admin' | 'manager' | 'member'
  created_at: Date
  last_updated_at: Date
}

/** A membership joined with its user (`$lookup`). */
export interface MemberWithUserDocument extends MemberDocument {
  user: UserDocument
}

export interface InviteDocument {
  _id: string
  organisation_id: string
  token_hash: string
  email: string
  role: 'admin' | 'member'
  workspaces: Array<{ workspace_id: string; role: 'admin' | 'manager' | 'member' }>
  api_key_scopes: string[] | null
  invited_by: string | null
  state: 'pending' | 'accepted' | 'cancelled'
  created_at: Date
  expires_at: Date
  accepted_at: Date | null
  last_updated_at: Date
}

export interface ApiKeyDocument {
  _id: string
  key_hash: string
  masked_key: string
  name: string
  description: string | null
  type: 'organisation-service' | 'workspace-service' | 'workspace-user'
  organisation_id: string
  workspace_id: string | null
  user_id: string | null
  scopes: string[]
  status: 'active' | 'exhausted' | 'expired'
  expires_at: Date | null
  creation_mode: 'api' | 'auto' | 'ui'
  rate_limits: RateLimitDocument[]
  usage_limits: UsageLimitDocument | null
  defaults: RequestDefaultsDocument | null
  alert_emails: string[]
  /** Absent (not `null`) when unset, so the sparse index holds rotated keys only. */
  previous_key_hash?: string
  previous_key_expires_at: Date | null
  last_rotated_at: Date | null
  created_at: Date
  last_updated_at: Date
}

export interface VirtualKeyDocument {
  _id: string
  slug: string
  organisation_id: string
  workspace_id: string
  name: string
  note: string | null
  provider: string
  /** Sealed provider keys, in round-robin order. */
  sealed_keys: string[]
  masked_key: string | null
  custom_host: string | null
  sealed_model_config: string | null
  rate_limits: RateLimitDocument[]
  usage_limits: UsageLimitDocument | null
  status: 'active' | 'exhausted' | 'expired'
  expires_at: Date | null
  created_at: Date
  last_updated_at: Date
}

export interface AuditDocument {
  _id: string
  timestamp: Date
  organisation_id: string | null
  workspace_id: string | null
  user_id: string | null
  user_type: 'user' | 'api_key'
  /** Absent in entries written before it was recorded. */
  api_key_id?: string | null
  method: string
  uri: string
  request_id: string
  request_body: string | null
  query_params: string
  response_status_code: number
  resource_type: string
  action: string
  resource_id: string | null
  client_ip: string | null
}

export interface CollectionDocument {
  _id: string
  slug: string
  organisation_id: string
  workspace_id: string
  name: string
  parent_collection_id: string | null
  is_default: boolean
  status: 'active' | 'archived'
  created_at: Date
  last_updated_at: Date
}

export interface PromptDocument {
  _id: string
  slug: string
  organisation_id: string
  workspace_id: string
  collection_id: string
  name: string
  status: 'active' | 'archived'
  published_version: number
  latest_version: number
  created_at: Date
  last_updated_at: Date
}

/**
 * One version of a prompt. The tenant's JSON values (parameters, functions, tools, tool choice,
 * template metadata) are kept as JSON text, like `jwks_json`: their member names are the tenant's
 * and must round-trip exactly, whatever characters (`$`, `.`) they hold. `null` text: not set.
 */
export interface PromptVersionDocument {
  _id: string
  prompt_id: string
  organisation_id: string
  workspace_id: string
  version: number
  template: string
  parameters_json: string
  model: string | null
  virtual_key: string | null
  functions_json: string | null
  tools_json: string | null
  tool_choice_json: string | null
  description: string | null
  template_metadata_json: string | null
  is_raw_template: boolean
  label_id: string | null
  status: 'active' | 'archived'
  created_at: Date
}

export interface LabelDocument {
  _id: string
  organisation_id: string
  /** `null` for a built-in (universal) label. */
  workspace_id: string | null
  name: string
  description: string | null
  color_code: string | null
  is_universal: boolean
  status: 'active' | 'archived'
  created_at: Date
  last_updated_at: Date
}

export interface PartialDocument {
  _id: string
  slug: string
  organisation_id: string
  workspace_id: string
  collection_id: string | null
  name: string
  status: 'active' | 'archived'
  published_version: number
  latest_version: number
  created_at: Date
  last_updated_at: Date
}

export interface PartialVersionDocument {
  _id: string
  partial_id: string
  organisation_id: string
  workspace_id: string
  version: number
  template: string
  description: string | null
  status: 'active' | 'archived'
  created_at: Date
}

/**
 * A saved config with its latest version's JSON. The config is kept as JSON text: its member names
 * (`override_params` keys, metadata keys in conditions, `$eq` operators) are the tenant's and must
 * round-trip exactly, whatever characters (`$`, `.`) they hold.
 */
export interface ConfigDocument {
  _id: string
  slug: string
  organisation_id: string
  workspace_id: string
  name: string
  config_json: string
  version: number
  version_id: string
  is_default: boolean
  status: 'active' | 'archived'
  owner_id: string | null
  updated_by: string | null
  created_at: Date
  last_updated_at: Date
}

export interface ConfigVersionDocument {
  _id: string
  config_id: string
  organisation_id: string
  workspace_id: string
  version: number
  config_json: string
  created_by: string | null
  created_at: Date
}

/** The typed collections of one database. */
export interface AdminCollections {
  readonly organisations: Collection<OrganisationDocument>
  readonly users: Collection<UserDocument>
  readonly workspaces: Collection<WorkspaceDocument>
  readonly members: Collection<MemberDocument>
  readonly invites: Collection<InviteDocument>
  readonly apiKeys: Collection<ApiKeyDocument>
  readonly virtualKeys: Collection<VirtualKeyDocument>
  readonly audit: Collection<AuditDocument>
  readonly promptCollections: Collection<CollectionDocument>
  readonly prompts: Collection<PromptDocument>
  readonly promptVersions: Collection<PromptVersionDocument>
  readonly labels: Collection<LabelDocument>
  readonly partials: Collection<PartialDocument>
  readonly partialVersions: Collection<PartialVersionDocument>
  readonly configs: Collection<ConfigDocument>
  readonly configVersions: Collection<ConfigVersionDocument>
}

export function adminCollections(db: Db): AdminCollections {
  return {
    organisations: db.collection<OrganisationDocument>(ADMIN_COLLECTIONS.organisations),
    users: db.collection<UserDocument>(ADMIN_COLLECTIONS.users),
    workspaces: db.collection<WorkspaceDocument>(ADMIN_COLLECTIONS.workspaces),
    members: db.collection<MemberDocument>(ADMIN_COLLECTIONS.members),
    invites: db.collection<InviteDocument>(ADMIN_COLLECTIONS.invites),
    apiKeys: db.collection<ApiKeyDocument>(ADMIN_COLLECTIONS.apiKeys),
    virtualKeys: db.collection<VirtualKeyDocument>(ADMIN_COLLECTIONS.virtualKeys),
    audit: db.collection<AuditDocument>(ADMIN_COLLECTIONS.audit),
    promptCollections: db.collection<CollectionDocument>(ADMIN_COLLECTIONS.promptCollections),
    prompts: db.collection<PromptDocument>(ADMIN_COLLECTIONS.prompts),
    promptVersions: db.collection<PromptVersionDocument>(ADMIN_COLLECTIONS.promptVersions),
    labels: db.collection<LabelDocument>(ADMIN_COLLECTIONS.labels),
    partials: db.collection<PartialDocument>(ADMIN_COLLECTIONS.partials),
    partialVersions: db.collection<PartialVersionDocument>(ADMIN_COLLECTIONS.partialVersions),
    configs: db.collection<ConfigDocument>(ADMIN_COLLECTIONS.configs),
    configVersions: db.collection<ConfigVersionDocument>(ADMIN_COLLECTIONS.configVersions),
  }
}

/** What a duplicate on a unique index means to a client: the request field and a value-free message. */
export interface ConflictSpec {
  readonly param: string
  readonly message: string
}

/** An index created at start; unique ones say which conflict a duplicate on them is. */
export interface AdminIndexSpec {
  readonly name: string
  readonly key: Readonly<Record<string, 1 | -1>>
  readonly unique?: boolean
  readonly sparse?: boolean
  /** Only documents matching this filter are indexed (and, for a unique index, checked). */
  readonly partialFilter?: Readonly<Record<string, unknown>>
  readonly conflict?: ConflictSpec
}

/** Per collection: the entity noun (for messages) and the indexes besides `_id`. */
export interface AdminCollectionSpec {
  readonly role: AdminCollectionRole
  readonly entity: string
  readonly indexes: readonly AdminIndexSpec[]
}

export const ADMIN_COLLECTION_SPECS: readonly AdminCollectionSpec[] = [
  {
    role: 'organisations',
    entity: 'organisation',
    // findFirstOrganisation: oldest first.
    indexes: [{ name: 'created_at_1__id_1', key: { created_at: 1, _id: 1 } }],
  },
  {
    role: 'users',
    entity: 'user',
    indexes: [
      {
        name: 'organisation_id_1_email_1',
        key: { organisation_id: 1, email: 1 },
        unique: true,
        conflict: { param: 'email', message: 'A user with this email already exists in the organisation' },
      },
      { name: 'organisation_id_1_created_at_1__id_1', key: { organisation_id: 1, created_at: 1, _id: 1 } },
    ],
  },
  {
    role: 'workspaces',
    entity: 'workspace',
    indexes: [
      {
        name: 'organisation_id_1_slug_1',
        key: { organisation_id: 1, slug: 1 },
        unique: true,
        conflict: { param: 'slug', message: 'A workspace with this slug already exists in the organisation' },
      },
      { name: 'organisation_id_1_created_at_1__id_1', key: { organisation_id: 1, created_at: 1, _id: 1 } },
      // configDependants: the workspaces that name a config as their default.
      { name: 'defaults.config_id_1', key: { 'defaults.config_id': 1 } },
    ],
  },
  {
    role: 'members',
    entity: 'membership',
    indexes: [
      {
        name: 'workspace_id_1_user_id_1',
        key: { workspace_id: 1, user_id: 1 },
        unique: true,
        conflict: { param: 'userId', message: 'The user is already a member of the workspace' },
      },
      // deleteUser and listMembershipsOfUser look memberships up by user.
      { name: 'user_id_1', key: { user_id: 1 } },
      { name: 'workspace_id_1_created_at_1_user_id_1', key: { workspace_id: 1, created_at: 1, user_id: 1 } },
    ],
  },
  {
    role: 'invites',
    entity: 'invite',
    indexes: [
      {
        name: 'token_hash_1',
        key: { token_hash: 1 },
        unique: true,
        conflict: { param: 'tokenHash', message: 'An invite with this token hash already exists' },
      },
      { name: 'organisation_id_1_created_at_-1__id_1', key: { organisation_id: 1, created_at: -1, _id: 1 } },
    ],
  },
  {
    role: 'apiKeys',
    entity: 'API key',
    indexes: [
      {
        name: 'key_hash_1',
        key: { key_hash: 1 },
        unique: true,
        conflict: { param: 'keyHash', message: 'An API key with this key hash already exists' },
      },
      // Only rotated keys carry the field; lookups by hash try it after `key_hash`.
      { name: 'previous_key_hash_1', key: { previous_key_hash: 1 }, sparse: true },
      { name: 'organisation_id_1_created_at_1__id_1', key: { organisation_id: 1, created_at: 1, _id: 1 } },
      // Cascades and dependant counts of a workspace or a user.
      { name: 'workspace_id_1', key: { workspace_id: 1 } },
      { name: 'user_id_1', key: { user_id: 1 } },
      // configDependants: the keys that name a config as their default.
      { name: 'defaults.config_id_1', key: { 'defaults.config_id': 1 } },
    ],
  },
  {
    role: 'virtualKeys',
    entity: 'virtual key',
    indexes: [
      {
        name: 'organisation_id_1_slug_1',
        key: { organisation_id: 1, slug: 1 },
        unique: true,
        conflict: { param: 'slug', message: 'A virtual key with this slug already exists in the organisation' },
      },
      { name: 'organisation_id_1_created_at_1__id_1', key: { organisation_id: 1, created_at: 1, _id: 1 } },
      // Cascades and dependant counts of a workspace.
      { name: 'workspace_id_1', key: { workspace_id: 1 } },
    ],
  },
  {
    role: 'audit',
    entity: 'audit entry',
    indexes: [{ name: 'organisation_id_1_timestamp_1', key: { organisation_id: 1, timestamp: 1 } }],
  },
  {
    role: 'promptCollections',
    entity: 'collection',
    indexes: [
      {
        name: 'organisation_id_1_slug_1',
        key: { organisation_id: 1, slug: 1 },
        unique: true,
        conflict: { param: 'slug', message: 'A collection with this slug already exists in the organisation' },
      },
      // One default collection per workspace; findDefaultCollection reads it through this index.
      {
        name: 'workspace_id_1_is_default_1',
        key: { workspace_id: 1, is_default: 1 },
        unique: true,
        partialFilter: { is_default: true },
        conflict: { param: 'isDefault', message: 'The workspace already has a default collection' },
      },
      { name: 'organisation_id_1_created_at_1__id_1', key: { organisation_id: 1, created_at: 1, _id: 1 } },
      // Cascades of a workspace; deleteCollection's look for child collections.
      { name: 'workspace_id_1', key: { workspace_id: 1 } },
      { name: 'parent_collection_id_1', key: { parent_collection_id: 1 } },
    ],
  },
  {
    role: 'prompts',
    entity: 'prompt',
    indexes: [
      {
        name: 'organisation_id_1_slug_1',
        key: { organisation_id: 1, slug: 1 },
        unique: true,
        conflict: { param: 'slug', message: 'A prompt with this slug already exists in the organisation' },
      },
      { name: 'organisation_id_1_created_at_1__id_1', key: { organisation_id: 1, created_at: 1, _id: 1 } },
      // Cascades and dependant counts of a workspace; deleteCollection's look for prompts.
      { name: 'workspace_id_1', key: { workspace_id: 1 } },
      { name: 'collection_id_1', key: { collection_id: 1 } },
    ],
  },
  {
    role: 'promptVersions',
    entity: 'prompt version',
    indexes: [
      // The prompt data plane reads a version on a cache miss by number or by label: both through these.
      {
        name: 'prompt_id_1_version_1',
        key: { prompt_id: 1, version: 1 },
        unique: true,
        conflict: { param: 'version', message: 'The prompt already has a version with this number' },
      },
      {
        name: 'prompt_id_1_label_id_1',
        key: { prompt_id: 1, label_id: 1 },
        unique: true,
        partialFilter: { label_id: { $type: 'string' } },
        conflict: { param: 'labelId', message: 'Another version of the prompt already carries this label' },
      },
      // Cascades of a workspace; deleteLabel takes a label off every version carrying it.
      { name: 'workspace_id_1', key: { workspace_id: 1 } },
      { name: 'label_id_1', key: { label_id: 1 }, partialFilter: { label_id: { $type: 'string' } } },
    ],
  },
  {
    role: 'labels',
    entity: 'label',
    indexes: [
      // Built-in labels have a null workspace_id, so they are unique per organisation by name.
      {
        name: 'organisation_id_1_workspace_id_1_name_1',
        key: { organisation_id: 1, workspace_id: 1, name: 1 },
        unique: true,
        conflict: { param: 'name', message: 'A label with this name already exists' },
      },
      { name: 'organisation_id_1_created_at_1__id_1', key: { organisation_id: 1, created_at: 1, _id: 1 } },
      { name: 'workspace_id_1', key: { workspace_id: 1 } },
    ],
  },
  {
    role: 'partials',
    entity: 'partial',
    indexes: [
      {
        name: 'organisation_id_1_slug_1',
        key: { organisation_id: 1, slug: 1 },
        unique: true,
        conflict: { param: 'slug', message: 'A partial with this slug already exists in the organisation' },
      },
      // findPartialByName, and cascades of a workspace.
      {
        name: 'workspace_id_1_name_1',
        key: { workspace_id: 1, name: 1 },
        unique: true,
        conflict: { param: 'name', message: 'A partial with this name already exists in the workspace' },
      },
      { name: 'organisation_id_1_created_at_1__id_1', key: { organisation_id: 1, created_at: 1, _id: 1 } },
      { name: 'collection_id_1', key: { collection_id: 1 } },
    ],
  },
  {
    role: 'partialVersions',
    entity: 'partial version',
    indexes: [
      {
        name: 'partial_id_1_version_1',
        key: { partial_id: 1, version: 1 },
        unique: true,
        conflict: { param: 'version', message: 'The partial already has a version with this number' },
      },
      { name: 'workspace_id_1', key: { workspace_id: 1 } },
    ],
  },
  {
    role: 'configs',
    entity: 'config',
    indexes: [
      // findConfig (the data plane's look-up on a cache miss) reads by `_id` or through this index.
      {
        name: 'organisation_id_1_slug_1',
        key: { organisation_id: 1, slug: 1 },
        unique: true,
        conflict: { param: 'slug', message: 'A config with this slug already exists in the organisation' },
      },
      // One default config per workspace.
      {
        name: 'workspace_id_1_is_default_1',
        key: { workspace_id: 1, is_default: 1 },
        unique: true,
        partialFilter: { is_default: true },
        conflict: { param: 'isDefault', message: 'The workspace already has a default config' },
      },
      { name: 'organisation_id_1_created_at_1__id_1', key: { organisation_id: 1, created_at: 1, _id: 1 } },
      // Cascades and dependant counts of a workspace.
      { name: 'workspace_id_1', key: { workspace_id: 1 } },
    ],
  },
  {
    role: 'configVersions',
    entity: 'config version',
    indexes: [
      // Version numbers unique per config; listConfigVersions reads newest first through it.
      {
        name: 'config_id_1_version_1',
        key: { config_id: 1, version: 1 },
        unique: true,
        conflict: { param: 'version', message: 'The config already has a version with this number' },
      },
      { name: 'workspace_id_1', key: { workspace_id: 1 } },
    ],
  },
]

/** The driver's description of an index spec (for `createIndexes`). */
export function indexDescription(spec: AdminIndexSpec): IndexDescription {
  return {
    name: spec.name,
    key: { ...spec.key },
    ...(spec.unique === true ? { unique: true } : {}),
    ...(spec.sparse === true ? { sparse: true } : {}),
    ...(spec.partialFilter === undefined ? {} : { partialFilterExpression: { ...spec.partialFilter } }),
  }
}

export function collectionSpec(role: AdminCollectionRole): AdminCollectionSpec {
  const spec = ADMIN_COLLECTION_SPECS.find((candidate) => candidate.role === role)
  if (spec === undefined) throw new Error(`MongoDB admin store: no spec for collection ${role}`)
  return spec
}
