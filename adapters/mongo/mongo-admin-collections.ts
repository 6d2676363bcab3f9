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
]

/** The driver's description of an index spec (for `createIndexes`). */
export function indexDescription(spec: AdminIndexSpec): IndexDescription {
  return {
    name: spec.name,
    key: { ...spec.key },
    ...(spec.unique === true ? { unique: true } : {}),
    ...(spec.sparse === true ? { sparse: true } : {}),
  }
}

export function collectionSpec(role: AdminCollectionRole): AdminCollectionSpec {
  const spec = ADMIN_COLLECTION_SPECS.find((candidate) => candidate.role === role)
  if (spec === undefined) throw new Error(`MongoDB admin store: no spec for collection ${role}`)
  return spec
}
