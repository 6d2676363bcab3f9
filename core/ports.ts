/**
 * Ports: the interfaces plugins depend on, each with a same-named token used by the composition
 * root (config/wiring.ts) to inject the configured adapter. Adapters live in `adapters/` and
 * implement them. The basics every port is built from (tokens, `Service`, `Logger`, `Clock`) are in
 * core/service.ts; the records the admin store holds in core/admin-records.ts; the log records in
 * core/logs.ts; the limit ports in core/rate-limits.ts and core/budgets.ts.
 */
import type {
  ApiKeyFilter,
  ApiKeyRecord,
  AuditEntry,
  AuditFilter,
  BootstrapSeed,
  CollectionFilter,
  CollectionRecord,
  ConfigDependants,
  ConfigFilter,
  ConfigRecord,
  ConfigVersionRecord,
  LabelFilter,
  LabelRecord,
  PartialFilter,
  PartialRecord,
  PartialVersionRecord,
  PromptFilter,
  PromptRecord,
  PromptVersionRecord,
  VersionSelector,
  InviteFilter,
  InviteRecord,
  InviteState,
  MemberFilter,
  OrganisationRecord,
  Paged,
  PageRequest,
  UserFilter,
  UserRecord,
  VirtualKeyFilter,
  VirtualKeyRecord,
  WorkspaceDependants,
  WorkspaceFilter,
  WorkspaceMemberRecord,
  WorkspaceMemberWithUser,
  WorkspaceRecord,
} from './admin-records.js'
import type { GatewayError } from './errors.js'
import type { FeedbackRecord, LogRecord } from './logs.js'
import type { BreakerSetting } from './routing-config.js'
import { portToken, type Service } from './service.js'

// ---------------------------------------------------------------------------------------------
// Admin store

/**
 * The writes of one admin action, bound to one transaction (see `AdminStore.write`). Updates are
 * optimistic: they apply only when the stored row still has the `lastUpdatedAt` (or invite state)
 * the caller read, and return `false` otherwise, so concurrent edits are never silently merged.
 * Uniqueness violations reject with `GW_ADMIN_CONFLICT` naming the field.
 */
export interface AdminWriter {
  updateOrganisation(organisation: OrganisationRecord): Promise<void>

  insertUser(user: UserRecord): Promise<void>
  updateUser(user: UserRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /** Deletes the user, their memberships and their `workspace-user` keys; returns those keys. */
  deleteUser(organisationId: string, userId: string): Promise<readonly ApiKeyRecord[]>

  insertWorkspace(workspace: WorkspaceRecord): Promise<void>
  updateWorkspace(workspace: WorkspaceRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /**
   * Deletes the workspace with its memberships and every dependant (API keys, virtual keys, configs
   * with their versions, prompts and partials with their versions, custom labels, collections).
   * Returns the deleted API keys (their caches must be evicted).
   */
  deleteWorkspace(organisationId: string, workspaceId: string): Promise<readonly ApiKeyRecord[]>

  /** Adds a membership; an existing (workspace, user) pair is a conflict on `userId`. */
  insertMember(member: WorkspaceMemberRecord): Promise<void>
  updateMember(member: WorkspaceMemberRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /** Returns whether a membership was removed. */
  deleteMember(workspaceId: string, userId: string): Promise<boolean>

  insertInvite(invite: InviteRecord): Promise<void>
  /** Applies only while the stored invite is still in `expectedState`. */
  updateInvite(invite: InviteRecord, expectedState: InviteState): Promise<boolean>

  insertApiKey(key: ApiKeyRecord): Promise<void>
  updateApiKey(key: ApiKeyRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /** Returns the deleted key, or `null` when there was none. */
  deleteApiKey(organisationId: string, keyId: string): Promise<ApiKeyRecord | null>

  /** A slug already used in the organisation is a conflict on `slug`. */
  insertVirtualKey(key: VirtualKeyRecord): Promise<void>
  updateVirtualKey(key: VirtualKeyRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /** Returns the deleted virtual key, or `null` when there was none. */
  deleteVirtualKey(organisationId: string, virtualKeyId: string): Promise<VirtualKeyRecord | null>

  /** A slug already used in the organisation is a conflict on `slug`; a second default collection of a workspace on `isDefault`. */
  insertCollection(collection: CollectionRecord): Promise<void>
  updateCollection(collection: CollectionRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /** Deletes an empty collection (no prompts, partials or child collections: else a conflict on `collectionId`); returns whether one was deleted. */
  deleteCollection(organisationId: string, collectionId: string): Promise<boolean>

  /** Inserts a prompt with its first version (version 1). A slug already used in the organisation is a conflict on `slug`. */
  insertPrompt(prompt: PromptRecord, first: PromptVersionRecord): Promise<void>
  /** Updates the prompt record (name, collection, published and latest version numbers, status). */
  updatePrompt(prompt: PromptRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /** A version number already used by the prompt is a conflict on `version`; a label another version of the prompt carries, on `labelId`. */
  insertPromptVersion(version: PromptVersionRecord): Promise<void>
  /**
   * Puts `labelId` on one version of a prompt (`null` removes it), taking it off any other version
   * of the same prompt first, so a label marks at most one version per prompt. Returns whether the
   * version exists.
   */
  setPromptVersionLabel(promptId: string, versionId: string, labelId: string | null): Promise<boolean>
  /** Deletes the prompt and all its versions; returns whether one was deleted. */
  deletePrompt(organisationId: string, promptId: string): Promise<boolean>

  /**
   * A name already used in the workspace (built-in labels: in the organisation), or a custom label
   * taking a built-in name (`BUILT_IN_LABEL_NAMES`), is a conflict on `name`.
   */
  insertLabel(label: LabelRecord): Promise<void>
  updateLabel(label: LabelRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /** Deletes the label and takes it off every version that carried it; returns whether one was deleted. */
  deleteLabel(organisationId: string, labelId: string): Promise<boolean>

  /** Inserts a partial with its version 1. A slug used in the organisation, or a name used in the workspace, is a conflict. */
  insertPartial(partial: PartialRecord, first: PartialVersionRecord): Promise<void>
  updatePartial(partial: PartialRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /** A version number already used by the partial is a conflict on `version`. */
  insertPartialVersion(version: PartialVersionRecord): Promise<void>
  /** Deletes the partial and its versions; returns whether one was deleted. */
  deletePartial(organisationId: string, partialId: string): Promise<boolean>

  /**
   * Inserts a config with its version 1 (`first`, whose number, id and JSON the record carries as
   * its latest). A slug already used in the organisation is a conflict on `slug`; a second default
   * config of a workspace, on `isDefault`.
   */
  insertConfig(config: ConfigRecord, first: ConfigVersionRecord): Promise<void>
  /**
   * Replaces the config record (name, status, default flag, and the latest version's number, id and
   * JSON when a version is added with `insertConfigVersion` in the same transaction). A second
   * default config of a workspace is a conflict on `isDefault`.
   */
  updateConfig(config: ConfigRecord, expectedLastUpdatedAt: string): Promise<boolean>
  /** A version number already used by the config is a conflict on `version`. */
  insertConfigVersion(version: ConfigVersionRecord): Promise<void>
  /** Deletes the config and all its versions; returns whether one was deleted. */
  deleteConfig(organisationId: string, configId: string): Promise<boolean>
}

/**
 * Organisations, users, workspaces, members, invites, API keys, virtual keys, configs, prompt
 * templates and the audit log (API.md §5).
 * Every read is scoped by organisation. Writes go through `write`, which stores the action's audit
 * entry in the same transaction: an admin action and its audit entry succeed or fail together.
 * A store that cannot be reached rejects with an error that is not a `GatewayError` (callers fail
 * closed).
 */
export interface AdminStore extends Service {
  /**
   * Runs `work` in one transaction and inserts `audit` in it. If `work` rejects (or returns and the
   * commit fails), nothing of it is kept and the rejection propagates; the caller then records the
   * refusal with `recordAudit`. Once a writer operation has failed, the transaction is lost: the
   * whole `write` rejects even if `work` caught the error. `work` may run more than once (MongoDB
   * retries transient transaction errors), so it must have no effects outside the writer.
   */
  write<T>(audit: AuditEntry, work: (writer: AdminWriter) => Promise<T>): Promise<T>
  /** Stores an audit entry on its own (refused or failed actions). */
  recordAudit(entry: AuditEntry): Promise<void>
  listAuditEntries(organisationId: string, filter: AuditFilter, page: PageRequest): Promise<Paged<AuditEntry>>

  /** The organisation of a single-organisation deployment: the oldest one, or `null` before bootstrap. */
  findFirstOrganisation(): Promise<OrganisationRecord | null>
  findOrganisation(organisationId: string): Promise<OrganisationRecord | null>
  /** Writes the bootstrap records in one transaction. */
  bootstrap(seed: BootstrapSeed): Promise<void>

  findUser(organisationId: string, userId: string): Promise<UserRecord | null>
  /** `email` lower-cased. */
  findUserByEmail(organisationId: string, email: string): Promise<UserRecord | null>
  /** Ordered by `createdAt`, then id. */
  listUsers(organisationId: string, filter: UserFilter, page: PageRequest): Promise<Paged<UserRecord>>

  /** Finds a workspace of the organisation by UUID or slug (an id match wins). */
  findWorkspace(organisationId: string, idOrSlug: string): Promise<WorkspaceRecord | null>
  /** Ordered by `createdAt`, then id. */
  listWorkspaces(organisationId: string, filter: WorkspaceFilter, page: PageRequest): Promise<Paged<WorkspaceRecord>>
  workspaceDependants(organisationId: string, workspaceId: string): Promise<WorkspaceDependants>

  findMember(workspaceId: string, userId: string): Promise<WorkspaceMemberWithUser | null>
  /** Ordered by membership `createdAt`, then user id. */
  listMembers(workspaceId: string, filter: MemberFilter, page: PageRequest): Promise<Paged<WorkspaceMemberWithUser>>
  /** Every membership of a user, ordered by workspace `createdAt`. */
  listMembershipsOfUser(organisationId: string, userId: string): Promise<readonly WorkspaceMemberRecord[]>

  findInvite(organisationId: string, inviteId: string): Promise<InviteRecord | null>
  findInviteByTokenHash(tokenHash: string): Promise<InviteRecord | null>
  /** `now` (ISO 8601) decides which pending invites count as `expired` for the status filter. Newest first. */
  listInvites(organisationId: string, filter: InviteFilter, page: PageRequest, now: string): Promise<Paged<InviteRecord>>

  /** The key whose current or previous (rotated-out) secret has this hash. */
  findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null>
  findApiKey(organisationId: string, keyId: string): Promise<ApiKeyRecord | null>
  /** Ordered by `createdAt`, then id. */
  listApiKeys(organisationId: string, filter: ApiKeyFilter, page: PageRequest): Promise<Paged<ApiKeyRecord>>

  /** Finds a virtual key of the organisation by UUID or slug (an id match wins). */
  findVirtualKey(organisationId: string, idOrSlug: string): Promise<VirtualKeyRecord | null>
  /** Ordered by `createdAt`, then id. */
  listVirtualKeys(organisationId: string, filter: VirtualKeyFilter, page: PageRequest): Promise<Paged<VirtualKeyRecord>>
  /** Any one sealed secret of any organisation, or `null` when none is stored (boot checks the master key with it). */
  sampleSealedSecret(): Promise<string | null>

  /** Finds a collection of the organisation by UUID or slug (an id match wins). */
  findCollection(organisationId: string, idOrSlug: string): Promise<CollectionRecord | null>
  /** The workspace's default collection, or `null` before its first use. */
  findDefaultCollection(workspaceId: string): Promise<CollectionRecord | null>
  /** Ordered by `createdAt`, then id. */
  listCollections(organisationId: string, filter: CollectionFilter, page: PageRequest): Promise<Paged<CollectionRecord>>

  /** Finds a prompt of the organisation by UUID or slug (an id match wins). */
  findPrompt(organisationId: string, idOrSlug: string): Promise<PromptRecord | null>
  /** Ordered by `createdAt`, then id. */
  listPrompts(organisationId: string, filter: PromptFilter, page: PageRequest): Promise<Paged<PromptRecord>>
  /**
   * The version `selector` names: `published` and `latest` read the prompt's own numbers, `label`
   * the version carrying that label. `null` when there is none.
   */
  findPromptVersion(promptId: string, selector: VersionSelector): Promise<PromptVersionRecord | null>
  findPromptVersionById(promptId: string, versionId: string): Promise<PromptVersionRecord | null>
  /** Every version of a prompt, newest first. */
  listPromptVersions(promptId: string): Promise<readonly PromptVersionRecord[]>

  /** Finds a label by UUID: a built-in one, or one of the organisation's workspaces. */
  findLabel(organisationId: string, labelId: string): Promise<LabelRecord | null>
  /** The label called `name` that a prompt of `workspaceId` can carry: the workspace's own, else a built-in one. */
  findLabelByName(organisationId: string, workspaceId: string, name: string): Promise<LabelRecord | null>
  /** Built-in labels first, then by `createdAt`, then id. */
  listLabels(organisationId: string, filter: LabelFilter, page: PageRequest): Promise<Paged<LabelRecord>>
  /** Creates the organisation's built-in labels (`production`, `staging`, `development`) when missing; idempotent. */
  ensureBuiltInLabels(organisationId: string, now: string): Promise<void>

  /** Finds a partial of the organisation by UUID or slug (an id match wins). */
  findPartial(organisationId: string, idOrSlug: string): Promise<PartialRecord | null>
  /** The partial a template of `workspaceId` calls `{{>name}}`. */
  findPartialByName(workspaceId: string, name: string): Promise<PartialRecord | null>
  /** Ordered by `createdAt`, then id. */
  listPartials(organisationId: string, filter: PartialFilter, page: PageRequest): Promise<Paged<PartialRecord>>
  /** The version `selector` names (`label` never matches: partials carry no labels). */
  findPartialVersion(partialId: string, selector: VersionSelector): Promise<PartialVersionRecord | null>
  /** Every version of a partial, newest first. */
  listPartialVersions(partialId: string): Promise<readonly PartialVersionRecord[]>

  /**
   * The data plane's look-up of a saved config (`x-gateway-config: <slug>`, or an API key's
   * default): a config of the organisation by slug or UUID (an id match wins), carrying its latest
   * version's JSON text, version number and id, its slug, id, workspace and status. Reads only,
   * through unique indexes (no scan); `null` when there is none. Callers cache the answer and drop
   * it on a `configs` change notification (core/channels.ts).
   */
  findConfig(organisationId: string, slugOrId: string): Promise<ConfigRecord | null>
  /** Ordered by `createdAt`, then id. */
  listConfigs(organisationId: string, filter: ConfigFilter, page: PageRequest): Promise<Paged<ConfigRecord>>
  /** One page of a config's versions, newest (highest number) first. */
  listConfigVersions(configId: string, page: PageRequest): Promise<Paged<ConfigVersionRecord>>
  /**
   * The API keys and workspaces of the organisation whose `defaults.configId` equals one of `refs`
   * (a config's id and slug), each ordered by `createdAt`, then id.
   */
  configDependants(organisationId: string, refs: readonly string[]): Promise<ConfigDependants>
}
export const AdminStore = portToken<AdminStore>('AdminStore')

// ---------------------------------------------------------------------------------------------
// Secrets at rest

/**
 * Seals provider credentials with the master key (AES-256-GCM; `GATEWAY_MASTER_KEY`, or a 0600 key
 * file made on the first embedded start). Sealed text names the key it was sealed with, so `open`
 * under another master key throws instead of returning garbage. Never log either side.
 */
export interface SecretCipher {
  seal(plaintext: string): string
  /** Throws when the text was sealed under another key or was tampered with. */
  open(sealed: string): string
}
export const SecretCipher = portToken<SecretCipher>('SecretCipher')

// ---------------------------------------------------------------------------------------------
// Request logs

/**
 * The log store (sink or analytics) failed to do what was asked: unreachable, timing out, or
 * refusing. The Admin API answers 503 for it; any other error on a log route is a bug (500).
 */
export class LogStoreUnavailableError extends Error {
  constructor(store: string, cause: unknown) {
    super(`the ${store} log store failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause })
    this.name = 'LogStoreUnavailableError'
  }
}

/**
 * Where log records go. `enqueue` is synchronous and never blocks or throws (hot path); records are
 * written in batches. Losses are counted in `stats()`, never silent.
 */
export interface LogSink extends Service {
  enqueue(record: LogRecord): void
  /**
   * Stores feedback entries (a later `updatedAt` of the same id replaces the earlier one). Resolves
   * once they are written, or safely journaled when the store is unreachable; rejects (with a
   * `LogStoreUnavailableError`) only when neither was possible, or with a `TypeError` for an
   * invalid record.
   */
  recordFeedback(records: readonly FeedbackRecord[]): Promise<void>
  /**
   * Writes everything queued so far (replaying the journal first when the store answers). Rejects
   * with a `LogStoreUnavailableError` when the store could not take them; they are then journaled.
   */
  flush(): Promise<void>
  stats(): LogSinkStats
}
export interface LogSinkStats {
  /** Records waiting in memory. */
  readonly queued: number
  /** Records written to the store (replays included, each record once). */
  readonly written: number
  /** Records lost (queue overflow, unrepresentable records, journal failures). */
  readonly dropped: number
  /** Records currently held in the on-disk journal, waiting for the store to come back. */
  readonly journaled: number
}
export const LogSink = portToken<LogSink>('LogSink')

// ---------------------------------------------------------------------------------------------
// Providers and the upstream client

export type ProviderAuthStyle = 'bearer' | 'header' | 'query' | 'none'

/** One provider of the registry. OpenAI-compatible providers are pure data. */
export interface ProviderSpec {
  readonly slug: string
  /** Base URL including its API prefix, e.g. `https://api.groq.com/openai/v1`. Empty when a custom host is required. */
  readonly baseUrl: string
  readonly authStyle: ProviderAuthStyle
  /** Header name for `header`, query parameter for `query`. */
  readonly authName?: string
  /** Whether it speaks the OpenAI wire format (requests and responses pass through unchanged). */
  readonly openAiCompatible: boolean
  /** Route ids it does not serve (first-class routes only; pass-through goes anywhere). */
  readonly unsupportedRoutes?: readonly string[]
}

export type CustomHostCheck =
  | { readonly ok: true; readonly origin: string; readonly basePath: string }
  | { readonly ok: false; readonly reason: string }

export interface ProviderRegistry {
  get(slug: string): ProviderSpec | undefined
  list(): readonly ProviderSpec[]
  /**
   * Validates a custom host URL against the operator's allow-list (SSRF guard): http(s) only, no
   * credentials, link-local and cloud-metadata addresses always refused, private and loopback
   * addresses only when allowed by `GATEWAY_ALLOWED_CUSTOM_HOSTS`. A verdict already known (cached)
   * comes back as a plain value, so the request path need not await it.
   */
  checkCustomHost(url: string): CustomHostCheck | Promise<CustomHostCheck>
}
export const ProviderRegistry = portToken<ProviderRegistry>('ProviderRegistry')

/**
 * An abort signal in the shape undici accepts besides a DOM `AbortSignal`: EventEmitter-like, with
 * `aborted`, `reason` and `on`/`once`/`removeListener('abort')`. Core hands requests a light one
 * (`ClientAbort`), because an `AbortController` per request costs about 10 µs of CPU in undici's
 * EventTarget listener bookkeeping (measured with the bench's upstream).
 */
export interface AbortSource {
  readonly aborted: boolean
  readonly reason: unknown
  on(event: 'abort', listener: () => void): unknown
  once(event: 'abort', listener: () => void): unknown
  removeListener(event: 'abort', listener: () => void): unknown
}

export interface UpstreamRequest {
  /** `https://host:port` */
  readonly origin: string
  /** Path with query string. */
  readonly path: string
  readonly method: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array | string | null
  /** Client disconnect aborts the upstream request. */
  readonly signal: AbortSignal | AbortSource
  /** Timeout asked for by the request (`x-gateway-request-timeout`); expiry → 408. `null` → the gateway default (→ 504). */
  readonly requestTimeoutMs: number | null
  /**
   * Longest silence allowed between two chunks of the response body once the headers arrived
   * (a stream's events, or the parts of a whole body); expiry aborts the upstream request and the
   * body fails (mapped by `toError`: 408 with a `requestTimeoutMs`, else 504). Absent or `null` →
   * the client's own default.
   */
  readonly idleTimeoutMs?: number | null
}

/**
 * A response body pushed from the provider connection as bytes arrive (no Node stream in between:
 * chunks reach the consumer synchronously from the socket read, like the bench's bare forwarder).
 * Attach one consumer with `consume`; chunks that arrived before it are delivered first. Exactly one
 * of `onEnd` / `onError` follows the chunks, unless the body is destroyed.
 */
export interface ByteStream {
  consume(onData: (chunk: Buffer) => void, onEnd: () => void, onError: (error: unknown) => void): void
  /** Stops reading from the provider (backpressure) until `resume`. */
  pause(): void
  resume(): void
  /** Abandons the body: stops reading, frees the connection, no more callbacks. */
  destroy(): void
}

export interface UpstreamResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
  readonly body: ByteStream
}

/**
 * Sends requests upstream over pooled keep-alive connections. `send` rejects only with a
 * `GatewayError` (`GW_UPSTREAM_UNREACHABLE`, `GW_UPSTREAM_TIMEOUT`, `GW_UPSTREAM_REQUEST_TIMEOUT`);
 * errors raised later by the response body are mapped with `toError`.
 */
export interface UpstreamClient extends Service {
  send(request: UpstreamRequest): Promise<UpstreamResponse>
  toError(error: unknown, requestTimeoutMs: number | null): GatewayError
}
export const UpstreamClient = portToken<UpstreamClient>('UpstreamClient')

/**
 * `fetch` for the gateway's own requests to URLs an operator or tenant configured (a JWKS URL), with
 * the same connect-time address policy as custom hosts: every address a host name resolves to when
 * the connection opens must pass the SSRF rules, so a name that re-resolves to a private or metadata
 * address (DNS rebinding) is refused, not fetched.
 */
export interface OutboundFetch extends Service {
  readonly fetch: typeof globalThis.fetch
}
export const OutboundFetch = portToken<OutboundFetch>('OutboundFetch')

// ---------------------------------------------------------------------------------------------
// Change notifications

/**
 * Publish/subscribe across gateway instances, used to invalidate in-process caches (a revoked key
 * stops working everywhere within 1 s). In-process when there is no Redis.
 */
export interface ChangeNotifier extends Service {
  publish(channel: string, message: string): void
  /** Returns an unsubscribe function. */
  subscribe(channel: string, handler: (message: string) => void): () => void
}
export const ChangeNotifier = portToken<ChangeNotifier>('ChangeNotifier')

// ---------------------------------------------------------------------------------------------
// Response cache

/** A stored reply: what a cache hit sends back as it is. */
export interface CachedResponse {
  readonly status: number
  /**
   * Content headers only (`content-type`): never `x-gateway-*` or other per-request headers, which
   * belong to the request that stored the reply.
   */
  readonly headers: ReadonlyArray<readonly [string, string]>
  /** The body bytes (a streamed request's Server-Sent Events bytes). Readers must not modify them. */
  readonly body: Uint8Array
}

/**
 * Replies of config-routed requests whose target sets `cache` (API.md §4), stored by the cache
 * plugin under keys it derives (a SHA-256 of the workspace, the target and the normalised request);
 * adapters treat keys as opaque. Redis (shared by every instance) when `REDIS_URL` is set, else an
 * in-process LRU bounded by bytes.
 *
 * - `get` resolves `null` for a key never stored, expired or evicted; it rejects when the store
 *   cannot be reached (the plugin then counts a miss, never an error).
 * - `set` stores or replaces the entry for `maxAgeSeconds` (whole seconds, at least 1); bodies are
 *   bytes and come back byte for byte. An adapter may refuse (skip) an entry larger than it holds,
 *   and may drop entries before they expire to stay within its bounds. Rejects when unreachable.
 */
export interface ResponseCache extends Service {
  get(key: string): Promise<CachedResponse | null>
  set(key: string, value: CachedResponse, maxAgeSeconds: number): Promise<void>
}
export const ResponseCache = portToken<ResponseCache>('ResponseCache')

// ---------------------------------------------------------------------------------------------
// Circuit breakers

/** What a breaker needs of a target's `strategy.cb_config` (which statuses fail is the router's call). */
export type CircuitSetting = Pick<BreakerSetting, 'failureThreshold' | 'cooldownMs'>

/**
 * Circuit breakers of config targets (API.md §4 `strategy.cb_config`), one circuit per `key`: the
 * router names a target's identity, e.g. `<workspace id>:<config id>:<target path>`, so keys of
 * different workspaces or configs never meet. Which outcomes are failures is the router's decision;
 * the breaker only counts what `record` reports. Times are the caller's clock (`now`, epoch ms).
 *
 * - closed: every attempt is allowed; failures in a row are counted and a success resets the count.
 *   The `failureThreshold`-th failure in a row opens the circuit for `cooldownMs`.
 * - open: `allow` answers false until the cool-down has passed. Outcomes of attempts allowed
 *   before it opened (stragglers) are ignored meanwhile.
 * - half-open (open and cooled down): exactly one caller gets `true`, the probe, across every
 *   instance sharing the store; the others get false until an outcome is recorded. A success closes
 *   the circuit (count 0), a failure opens it again for `cooldownMs`. A probe that never reports
 *   (its instance died) holds its claim for `cooldownMs` only; then another caller may probe.
 *
 * `allow` sits on the request path of every attempt with a breaker: while the circuit is closed it
 * answers synchronously from the instance's own state (no store round trip, no allocation); it
 * returns a Promise only for a half-open circuit, whose probe is claimed atomically in the store.
 * It never rejects. `record` is fire-and-forget: it never throws and never makes the caller wait;
 * store errors are counted and logged (rate-limited). A success on a circuit with no failures
 * recorded costs one map look-up.
 *
 * Shared stores (Redis) mirror each circuit's state in every instance: state changes are published
 * and reach the other instances within about a second. When the store cannot be reached the breaker
 * never refuses because of it: each instance goes on counting its own outcomes, opening and probing
 * on its own as the in-process breaker does, until the store answers again. Instances keep at most
 * a bounded number of circuits in memory (least recently failed dropped first; a dropped circuit
 * reads as closed).
 */
export interface CircuitBreaker extends Service {
  /** Whether an attempt may go to the target now (see above for when this is a Promise). */
  allow(key: string, setting: CircuitSetting, now: number): boolean | Promise<boolean>
  /** The outcome of an allowed attempt: `success` false counts towards opening the circuit. */
  record(key: string, setting: CircuitSetting, success: boolean, now: number): void
}
export const CircuitBreaker = portToken<CircuitBreaker>('CircuitBreaker')
