/**
 * The records the admin store keeps (the `AdminStore` port in core/ports.ts reads and writes them).
 *
 * Conventions every adapter keeps:
 * - ids are UUID strings; a workspace also has a slug unique in its organisation;
 * - timestamps are ISO 8601 strings in `Date#toISOString()` form (UTC, milliseconds, `Z`);
 * - emails are stored lower-cased (the Admin API lower-cases them), so equality is exact;
 * - arrays keep their order; `null` means "not set", never "empty".
 */
/** Types of API key (API.md §1). */
export type ApiKeyType = 'organisation-service' | 'workspace-service' | 'workspace-user'

export type OrganisationRole = 'owner' | 'admin' | 'member'
export type WorkspaceRole = 'admin' | 'manager' | 'member'

/** A JSON Web Key Set as published by an identity provider (public parameters only). */
export interface JsonWebKeySet {
  readonly keys: ReadonlyArray<Readonly<Record<string, unknown>>>
}

/**
 * How JWTs of an organisation are verified (API.md §1): a JWKS URL or a static JWKS, never both;
 * optionally the issuer and audience tokens must carry.
 */
export interface JwtSettings {
  readonly jwksUrl: string | null
  readonly jwks: JsonWebKeySet | null
  /** When set, a token's `iss` must equal it. */
  readonly issuer: string | null
  /** When set (non-empty), a token's `aud` (a string or an array) must contain at least one of these. */
  readonly audience: readonly string[] | null
  readonly updatedAt: string
}

export interface OrganisationRecord {
  readonly id: string
  readonly name: string
  readonly createdAt: string
  /** `null` when JWT authentication is not configured. */
  readonly jwt: JwtSettings | null
}

export interface UserRecord {
  readonly id: string
  readonly organisationId: string
  /** Lower-cased; unique per organisation. */
  readonly email: string
  readonly firstName: string
  readonly lastName: string
  readonly role: OrganisationRole
  /** scrypt hash (`scrypt$N$r$p$salt$hash`, base64url parts) set when the user accepts an invite; `null` before. */
  readonly passwordHash: string | null
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

/** `rate_limits` entry (API.md §6). `rps` and `rpw` only on API keys. */
export interface RateLimitRule {
  readonly type: 'requests' | 'tokens'
  readonly unit: 'rps' | 'rpm' | 'rph' | 'rpd' | 'rpw'
  readonly value: number
}

/** `usage_limits` entry (API.md §6). Running usage is kept by the budget plugin, not here. */
export interface UsageLimitRule {
  readonly type: 'cost' | 'tokens'
  /** USD for `cost`, tokens for `tokens`. */
  readonly creditLimit: number
  /** Same unit as `creditLimit`; crossing it records an alert. */
  readonly alertThreshold: number | null
  readonly periodicReset: 'weekly' | 'monthly' | null
  /** Reset every N days (takes precedence over `periodicReset` when set). */
  readonly periodicResetDays: number | null
}

/** `defaults` of an API key or a workspace: metadata merged into every request, default config. */
export interface RequestDefaults {
  readonly metadata: Readonly<Record<string, string>> | null
  /**
   * Config slug or id. The Admin API checks it names a config of the key's (or workspace's)
   * workspace and stores that config's slug; older records may hold an id.
   */
  readonly configId: string | null
}

export interface WorkspaceRecord {
  /** UUID. */
  readonly id: string
  /** Unique per organisation, e.g. `ws-default-3f9a1c`; accepted wherever an id is. */
  readonly slug: string
  readonly organisationId: string
  readonly name: string
  readonly description: string | null
  readonly defaults: RequestDefaults | null
  readonly usageLimits: readonly UsageLimitRule[]
  readonly rateLimits: readonly RateLimitRule[]
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

/** A user's membership of a workspace. One per (workspace, user). */
export interface WorkspaceMemberRecord {
  /** Workspace UUID. */
  readonly workspaceId: string
  readonly userId: string
  readonly organisationId: string
  readonly role: WorkspaceRole
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

/** A membership together with its user (what member listings show). */
export interface WorkspaceMemberWithUser {
  readonly member: WorkspaceMemberRecord
  readonly user: UserRecord
}

/** Stored invite states; `expired` is derived from `expiresAt` when the stored state is `pending`. */
export type InviteState = 'pending' | 'accepted' | 'cancelled'
export type InviteStatus = InviteState | 'expired'

export interface InviteRecord {
  readonly id: string
  readonly organisationId: string
  /** Hex SHA-256 of the one-time token in the invite link; the token itself is never stored. */
  readonly tokenHash: string
  /** Lower-cased. */
  readonly email: string
  readonly role: 'admin' | 'member'
  /** Workspace UUIDs and the role granted in each. */
  readonly workspaces: ReadonlyArray<{ readonly workspaceId: string; readonly role: WorkspaceRole }>
  /** Scopes of the workspace user key created in each workspace on acceptance; `null` → no keys. */
  readonly apiKeyScopes: readonly string[] | null
  /** User id of the inviter, or `null` when an API key not tied to a user invited. */
  readonly invitedBy: string | null
  readonly state: InviteState
  readonly createdAt: string
  readonly expiresAt: string
  readonly acceptedAt: string | null
  readonly lastUpdatedAt: string
}

export type ApiKeyStatus = 'active' | 'exhausted' | 'expired'

export interface ApiKeyRecord {
  readonly id: string
  /** Hex SHA-256 of the secret; the secret itself is never stored. */
  readonly keyHash: string
  /** Display form of the secret, e.g. `gw********xyz`. */
  readonly maskedKey: string
  readonly name: string
  readonly description: string | null
  readonly type: ApiKeyType
  readonly organisationId: string
  /** Workspace UUID; `null` for organisation keys. */
  readonly workspaceId: string | null
  readonly userId: string | null
  readonly scopes: readonly string[]
  readonly status: ApiKeyStatus
  /** ISO 8601, or `null` for keys that never expire. */
  readonly expiresAt: string | null
  readonly creationMode: 'api' | 'auto' | 'ui'
  readonly rateLimits: readonly RateLimitRule[]
  readonly usageLimits: UsageLimitRule | null
  readonly defaults: RequestDefaults | null
  readonly alertEmails: readonly string[]
  /** Hash of the secret replaced by the last rotation, accepted until `previousKeyExpiresAt`. */
  readonly previousKeyHash: string | null
  readonly previousKeyExpiresAt: string | null
  readonly lastRotatedAt: string | null
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

export type VirtualKeyStatus = 'active' | 'exhausted' | 'expired'

/**
 * A virtual key: a stored provider credential (API.md §5 "virtual keys"). Secrets are kept only in
 * sealed form (`SecretCipher.seal`, AES-256-GCM under the master key); the store never sees them in
 * clear.
 */
export interface VirtualKeyRecord {
  readonly id: string
  /** Unique per organisation, e.g. `main-258f4d`; accepted wherever an id is. */
  readonly slug: string
  readonly organisationId: string
  /** Workspace UUID. */
  readonly workspaceId: string
  readonly name: string
  readonly note: string | null
  /** Provider slug from the registry. */
  readonly provider: string
  /** One or more sealed provider keys, used in turn (round robin); empty when the endpoint needs none. */
  readonly sealedKeys: readonly string[]
  /** Display form of the first provider key, e.g. `sk********xyz`; `null` without keys. */
  readonly maskedKey: string | null
  /** Self-hosted endpoint (checked against the custom-host policy when saved). */
  readonly customHost: string | null
  /** `model_config` (Azure resource/deployment/api-version, AWS region and keys, ...) as sealed JSON, or `null`. */
  readonly sealedModelConfig: string | null
  readonly rateLimits: readonly RateLimitRule[]
  readonly usageLimits: UsageLimitRule | null
  readonly status: VirtualKeyStatus
  readonly expiresAt: string | null
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

export interface VirtualKeyFilter {
  /** Only virtual keys of this workspace (UUID). */
  readonly workspaceId?: string
}

/** One audit log entry (API.md §5 "audit logs"). */
export interface AuditEntry {
  readonly id: string
  readonly timestamp: string
  /** `null` only when the caller could not be attributed to any organisation. */
  readonly organisationId: string | null
  /** Workspace UUID the action touched, when any. */
  readonly workspaceId: string | null
  /** User id, or API key id when `userType` is `api_key`; `null` for unauthenticated callers. */
  readonly userId: string | null
  readonly userType: 'user' | 'api_key'
  /** Id of the API key the request came through (also when it acted for a user); `null` for a JWT or no key. */
  readonly apiKeyId: string | null
  readonly method: string
  /** Path with query string. */
  readonly uri: string
  readonly requestId: string
  /** The JSON body with secrets masked, as text; `null` without a body. */
  readonly requestBody: string | null
  /** Query parameters as a JSON object text (`{}` when none). */
  readonly queryParams: string
  readonly responseStatusCode: number
  /** `workspace`, `workspace_user`, `user`, `invite`, `api_key`, `organisation`, ... */
  readonly resourceType: string
  /** `create`, `update`, `delete`, `rotate`, `resend`, `accept`, ... */
  readonly action: string
  /** Id (or slug) of the resource acted on, when known. */
  readonly resourceId: string | null
  readonly clientIp: string | null
}

/** Offset paging: `limit` rows after skipping `offset`. */
export interface PageRequest {
  readonly offset: number
  readonly limit: number
}

/** One page and the number of rows across all pages. */
export interface Paged<T> {
  readonly total: number
  readonly items: readonly T[]
}

/** What the first start writes, all or nothing. */
export interface BootstrapSeed {
  readonly organisation: OrganisationRecord
  readonly owner: UserRecord
  readonly workspace: WorkspaceRecord
  /** The owner's admin membership of the default workspace. */
  readonly membership: WorkspaceMemberRecord
  readonly adminKey: ApiKeyRecord
}

export interface UserFilter {
  readonly role?: OrganisationRole
  /** Exact, lower-cased. */
  readonly email?: string
}

export interface WorkspaceFilter {
  /** Case-sensitive substring of the name. */
  readonly name?: string
  /** Exact name. */
  readonly exactName?: string
  /** Only these workspaces (UUIDs): a workspace key lists only its own. */
  readonly ids?: readonly string[]
}

export interface MemberFilter {
  readonly role?: WorkspaceRole
  /** Exact, lower-cased. */
  readonly email?: string
}

export interface InviteFilter {
  readonly role?: 'admin' | 'member'
  readonly email?: string
  readonly status?: InviteStatus
}

export interface ApiKeyFilter {
  /** Only keys of this workspace (UUID). */
  readonly workspaceId?: string
  /** Only keys of these types. */
  readonly types?: readonly ApiKeyType[]
}

/** Filters of `GET /v1/audit-logs`; all optional, combined with AND. */
export interface AuditFilter {
  /** Inclusive lower bound (ISO 8601). */
  readonly startTime?: string
  /** Inclusive upper bound (ISO 8601). */
  readonly endTime?: string
  readonly method?: string
  /** Exact path (without query string) or, ending in `*`, a path prefix. */
  readonly uri?: string
  readonly requestId?: string
  readonly userId?: string
  readonly userType?: 'user' | 'api_key'
  /** The API key the request came through. */
  readonly apiKeyId?: string
  readonly workspaceId?: string
  readonly resourceType?: string
  readonly action?: string
  readonly responseStatusCode?: number
  readonly clientIp?: string
}

/** What cascades when a workspace is force-deleted or still blocks a plain delete. */
export interface WorkspaceDependants {
  readonly apiKeys: number
  readonly virtualKeys: number
  readonly configs: number
  /** Prompt templates (partials not counted: they go with the workspace). */
  readonly prompts: number
}

// ---------------------------------------------------------------------------------------------
// Prompt templates (API.md §3, §5; reference/admin-api.md §13)

/** `active` or `archived` (archived resources are kept, hidden from defaults). */
export type PromptStatus = 'active' | 'archived'

/**
 * A folder of prompts in a workspace. Every workspace has one default collection (`isDefault`),
 * made on first use, which prompts created without `collection_id` go to.
 */
export interface CollectionRecord {
  readonly id: string
  /** Unique in the organisation (`<name>-<6 hex>`). */
  readonly slug: string
  readonly organisationId: string
  readonly workspaceId: string
  readonly name: string
  readonly parentCollectionId: string | null
  readonly isDefault: boolean
  readonly status: PromptStatus
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

/**
 * A prompt template: what stays the same across its versions. The content lives in numbered
 * `PromptVersionRecord`s; `publishedVersion` is the one a call without a suffix runs, and
 * `latestVersion` the newest.
 */
export interface PromptRecord {
  readonly id: string
  /** Unique in the organisation (`pp-<name>-<6 hex>`). */
  readonly slug: string
  readonly organisationId: string
  readonly workspaceId: string
  readonly collectionId: string
  readonly name: string
  readonly status: PromptStatus
  /** Version number a call without a suffix runs (1 until another is published). */
  readonly publishedVersion: number
  /** Highest version number (versions are 1, 2, 3, ... and never reused). */
  readonly latestVersion: number
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

/** One immutable version of a prompt's content; only its label can change. */
export interface PromptVersionRecord {
  readonly id: string
  readonly promptId: string
  readonly organisationId: string
  readonly workspaceId: string
  /** 1, 2, 3, ... per prompt. */
  readonly version: number
  /** The template (`string`): a JSON array of chat messages, or plain text for a completion template. */
  readonly template: string
  /** Saved hyperparameters (`temperature`, `max_tokens`, ...), sent with the rendered request. */
  readonly parameters: Readonly<Record<string, unknown>>
  readonly model: string | null
  /** Slug of the virtual key the prompt runs with. */
  readonly virtualKey: string | null
  readonly functions: readonly unknown[] | null
  readonly tools: readonly unknown[] | null
  readonly toolChoice: unknown
  readonly description: string | null
  readonly templateMetadata: Readonly<Record<string, unknown>> | null
  /** Rendered as text without treating it as chat messages. */
  readonly isRawTemplate: boolean
  /** The label this version carries; a label marks at most one version of a prompt. */
  readonly labelId: string | null
  readonly status: PromptStatus
  readonly createdAt: string
}

/**
 * A version label (`production`, `staging`, `development` are built in to every organisation,
 * `isUniversal` with no workspace; custom ones belong to a workspace). Names follow the reference's
 * rule: not `latest`, `default` or all digits, no `@` or white space.
 */
export interface LabelRecord {
  readonly id: string
  readonly organisationId: string
  /** `null` for the built-in (universal) labels. */
  readonly workspaceId: string | null
  /** Unique per workspace, and no custom label takes a built-in name. */
  readonly name: string
  readonly description: string | null
  readonly colorCode: string | null
  readonly isUniversal: boolean
  readonly status: PromptStatus
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

/**
 * The names of the built-in labels every organisation has (`ensureBuiltInLabels`); a custom label
 * may not take one of them (the store refuses it as a conflict on `name`).
 */
export const BUILT_IN_LABEL_NAMES: readonly string[] = ['production', 'staging', 'development']

/** A reusable template piece, used as `{{>name}}`; versioned and published like a prompt. */
export interface PartialRecord {
  readonly id: string
  /** Unique in the organisation. */
  readonly slug: string
  readonly organisationId: string
  readonly workspaceId: string
  readonly collectionId: string | null
  /** What templates call it by (`{{>name}}`); unique per workspace. */
  readonly name: string
  readonly status: PromptStatus
  readonly publishedVersion: number
  readonly latestVersion: number
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

export interface PartialVersionRecord {
  readonly id: string
  readonly partialId: string
  readonly organisationId: string
  readonly workspaceId: string
  readonly version: number
  readonly template: string
  readonly description: string | null
  readonly status: PromptStatus
  readonly createdAt: string
}

/** Which version of a prompt or partial: a number, the newest, the published one, or (prompts) a label's. */
export type VersionSelector =
  | { readonly kind: 'published' }
  | { readonly kind: 'latest' }
  | { readonly kind: 'number'; readonly version: number }
  | { readonly kind: 'label'; readonly labelId: string }

export interface PromptFilter {
  readonly workspaceId?: string
  readonly collectionId?: string
  /** Case-insensitive substring of the name or slug. */
  readonly search?: string
}

export interface CollectionFilter {
  readonly workspaceId?: string
  /** Case-insensitive substring of the name or slug. */
  readonly search?: string
}

export interface LabelFilter {
  /** Labels of this workspace plus the built-in ones. */
  readonly workspaceId?: string
  /** Case-insensitive substring of the name. */
  readonly search?: string
}

export interface PartialFilter {
  readonly workspaceId?: string
  readonly collectionId?: string
}

// ---------------------------------------------------------------------------------------------
// Configs (API.md §4, §5; reference/admin-api.md §6)

/** `active` or `archived` (an archived config is kept with its versions). */
export type ConfigStatus = 'active' | 'archived'

/**
 * A saved routing config of a workspace. It carries its latest version's JSON (`config`, `version`,
 * `versionId`), so the data plane reads one record per look-up (`AdminStore.findConfig`); every
 * version, the latest included, is also kept as a `ConfigVersionRecord`. The Admin API writes the
 * record and its new version in one transaction.
 */
export interface ConfigRecord {
  readonly id: string
  /** Unique in the organisation (`pc-<name>-<6 hex>`); accepted wherever an id is. */
  readonly slug: string
  readonly organisationId: string
  readonly workspaceId: string
  readonly name: string
  /**
   * The latest version's config as JSON text: the object as sent, serialised without white space,
   * after `checkRoutingConfig(…, 'saved')` (core/routing-config.ts) accepted it.
   */
  readonly config: string
  /** The latest version's number (1, 2, 3, ... never reused) and id. */
  readonly version: number
  readonly versionId: string
  /** The workspace's default config (at most one per workspace). */
  readonly isDefault: boolean
  readonly status: ConfigStatus
  /** Who created it: a user id, else the id of the API key (a JWT's subject) that did. */
  readonly ownerId: string | null
  /** Who changed it last, in the same form. */
  readonly updatedBy: string | null
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

/** One immutable version of a config's JSON. */
export interface ConfigVersionRecord {
  readonly id: string
  readonly configId: string
  readonly organisationId: string
  readonly workspaceId: string
  /** 1, 2, 3, ... per config. */
  readonly version: number
  /** JSON text, as `ConfigRecord.config`. */
  readonly config: string
  /** Who made this version (as `ConfigRecord.ownerId`). */
  readonly createdBy: string | null
  readonly createdAt: string
}

export interface ConfigFilter {
  readonly workspaceId?: string
  /** Only the default config (`true`) or only the others (`false`). */
  readonly isDefault?: boolean
}

/**
 * What names a config as its default (`defaults.configId`, holding the config's id or slug): the
 * API keys and workspaces a delete of the config must leave without a default first.
 */
export interface ConfigDependants {
  readonly apiKeys: readonly ApiKeyRecord[]
  readonly workspaces: readonly WorkspaceRecord[]
}
