/**
 * `AdminStore` on MongoDB (official driver): the production admin store.
 *
 * MongoDB must run as a replica set (a single-node one is fine: `mongod --replSet rs0` then
 * `rs.initiate()`) or be reached through mongos, because every admin action and its audit entry
 * are written in one multi-document transaction; `start()` refuses a standalone server.
 *
 * - Layout: one collection per resource with the indexes of mongo-admin-collections.ts, created at
 *   start when missing. Ids are string `_id`s, timestamps BSON dates read back as
 *   `Date#toISOString()`.
 * - Transactions use `session.withTransaction` (snapshot reads, majority commit). The driver retries
 *   an attempt that failed with a transient error (a write conflict with a concurrent transaction,
 *   a primary step-down), so the `work` given to `write` may run more than once and must keep its
 *   side effects inside the writer until it returns.
 * - Uniqueness violations reject with `GW_ADMIN_CONFLICT` naming the field, unparsable timestamps
 *   with `GW_ADMIN_VALIDATION`; anything else (server unreachable, store closed) rejects with the
 *   driver's error, never a `GatewayError`, so callers fail closed.
 * - The driver's defaults apply to connection behaviour; set `serverSelectionTimeoutMS` and the
 *   like in the URI.
 */
import {
  MongoClient,
  WriteConcern,
  type ClientSession,
  type Collection,
  type Db,
  type Document,
  type Filter,
  type Sort,
  type WithId,
} from 'mongodb'
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
  ADMIN_COLLECTIONS,
  adminCollections,
  type AdminCollections,
  type LabelDocument,
  type MemberDocument,
  type MemberWithUserDocument,
} from './mongo-admin-collections.js'
import {
  apiKeyFromDocument,
  apiKeyToDocument,
  auditFromDocument,
  auditToDocument,
  collectionFromDocument,
  configFromDocument,
  configVersionFromDocument,
  inviteFromDocument,
  labelFromDocument,
  labelToDocument,
  memberFromDocument,
  memberToDocument,
  memberWithUserFromDocument,
  organisationFromDocument,
  organisationToDocument,
  partialFromDocument,
  partialVersionFromDocument,
  promptFromDocument,
  promptVersionFromDocument,
  toDate,
  userFromDocument,
  userToDocument,
  virtualKeyFromDocument,
  workspaceFromDocument,
  workspaceToDocument,
} from './mongo-admin-documents.js'
import {
  apiKeyQuery,
  auditQuery,
  collectionQuery,
  configDependantQuery,
  configQuery,
  inviteQuery,
  labelQuery,
  memberQuery,
  partialQuery,
  promptQuery,
  userQuery,
  virtualKeyQuery,
  workspaceQuery,
} from './mongo-admin-filters.js'
import { MongoAdminWriter } from './mongo-admin-writer.js'
import { isDuplicateKeyError, withConflicts } from './mongo-conflicts.js'
import { DEFAULT_DATABASE_NAME, databaseNameOf, ensureAdminCollections, supportsTransactions } from './mongo-connection.js'

export interface MongoAdminStoreOptions {
  /** Connection string, e.g. `mongodb://db1,db2,db3/gateway?replicaSet=rs0`. */
  readonly uri: string
  /** Defaults to the database in the URI's path, else `gateway`. */
  readonly databaseName?: string
}

const HEALTH_TIMEOUT_MS = 2_000

const TRANSACTION_OPTIONS = {
  readConcern: { level: 'snapshot' },
  writeConcern: new WriteConcern('majority'),
  readPreference: 'primary',
} as const

const BY_CREATION: Sort = { created_at: 1, _id: 1 }
const NEWEST_FIRST: Sort = { created_at: -1, _id: 1 }
const BUILT_IN_FIRST: Sort = { is_universal: -1, created_at: 1, _id: 1 }
const BY_VERSION_DESCENDING: Sort = { version: -1 }

/** The one of `documents` (a look-up by id or slug) whose id matches: a slug may equal another record's id. */
function idMatchFirst<D extends { readonly _id: string }>(documents: readonly D[], idOrSlug: string): D | null {
  return documents.find((candidate) => candidate._id === idOrSlug) ?? documents[0] ?? null
}

/** The version number a selector names given the owner's numbers; `null` for a label (or a non-integer). */
function selectedNumber(selector: VersionSelector, owner: { published_version: number; latest_version: number } | null): number | null {
  switch (selector.kind) {
    case 'number':
      return Number.isSafeInteger(selector.version) ? selector.version : null
    case 'published':
      return owner?.published_version ?? null
    case 'latest':
      return owner?.latest_version ?? null
    case 'label':
      return null
  }
}

interface Connected {
  readonly client: MongoClient
  readonly db: Db
  readonly collections: AdminCollections
}

function pageBound(value: number, field: 'offset' | 'limit'): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw gatewayError(ERRORS.GW_ADMIN_VALIDATION, `${field} must be a non-negative integer`, { param: field })
  }
  return value
}

/** Checked paging bounds. A `limit` of 0 must skip the query: the driver reads `limit(0)` as "no limit". */
function pageBounds(page: PageRequest): { skip: number; limit: number } {
  return { skip: pageBound(page.offset, 'offset'), limit: pageBound(page.limit, 'limit') }
}

async function pageOf<TSchema extends Document, R>(
  collection: Collection<TSchema>,
  query: Filter<TSchema>,
  sort: Sort,
  page: PageRequest,
  map: (document: WithId<TSchema>) => R,
): Promise<Paged<R>> {
  const { skip, limit } = pageBounds(page)
  const [total, documents] = await Promise.all([
    collection.countDocuments(query),
    limit === 0 ? Promise.resolve([]) : collection.find(query).sort(sort).skip(skip).limit(limit).toArray(),
  ])
  return { total, items: documents.map(map) }
}

/** Joins each membership with its user. */
const WITH_USER: Document[] = [
  { $lookup: { from: ADMIN_COLLECTIONS.users, localField: 'user_id', foreignField: '_id', as: 'user' } },
  // A membership without its user exists only inside a concurrent deleteUser; it is left out.
  { $unwind: '$user' },
]

export class MongoAdminStore implements AdminStore {
  readonly #uri: string
  readonly #databaseName: string
  #connected: Connected | null = null
  #starting: Promise<void> | null = null

  constructor(options: MongoAdminStoreOptions) {
    this.#uri = options.uri
    this.#databaseName = options.databaseName ?? databaseNameOf(options.uri) ?? DEFAULT_DATABASE_NAME
  }

  /** Connects, checks that transactions are available, and creates missing collections and indexes. */
  async start(): Promise<void> {
    if (this.#connected !== null) return
    // Concurrent calls share one connection attempt instead of racing two clients.
    this.#starting ??= this.#connect().finally(() => {
      this.#starting = null
    })
    await this.#starting
  }

  async close(): Promise<void> {
    const connected = this.#connected
    this.#connected = null
    await connected?.client.close()
  }

  async health(): Promise<HealthStatus> {
    const connected = this.#connected
    if (connected === null) return { ok: false, detail: 'admin store is not started' }
    try {
      await connected.db.command({ ping: 1 }, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) })
      return { ok: true }
    } catch {
      return { ok: false, detail: 'admin store database does not answer' }
    }
  }

  async write<T>(audit: AuditEntry, work: (writer: AdminWriter) => Promise<T>): Promise<T> {
    const auditDocument = auditToDocument(audit)
    const { collections } = this.#open()
    return this.#transaction(async (session) => {
      const writer = new MongoAdminWriter(collections, session)
      try {
        const result = await work(writer)
        await writer.settle()
        await withConflicts('audit', () => collections.audit.insertOne({ ...auditDocument }, { session }))
        return result
      } finally {
        await writer.retire()
      }
    })
  }

  async recordAudit(entry: AuditEntry): Promise<void> {
    const document = auditToDocument(entry)
    await withConflicts('audit', () => this.#open().collections.audit.insertOne(document))
  }

  async listAuditEntries(organisationId: string, filter: AuditFilter, page: PageRequest): Promise<Paged<AuditEntry>> {
    const query = auditQuery(organisationId, filter)
    return pageOf(this.#open().collections.audit, query, { timestamp: -1, _id: 1 }, page, auditFromDocument)
  }

  async findFirstOrganisation(): Promise<OrganisationRecord | null> {
    const document = await this.#open().collections.organisations.findOne({}, { sort: BY_CREATION })
    return document === null ? null : organisationFromDocument(document)
  }

  async findOrganisation(organisationId: string): Promise<OrganisationRecord | null> {
    const document = await this.#open().collections.organisations.findOne({ _id: organisationId })
    return document === null ? null : organisationFromDocument(document)
  }

  async bootstrap(seed: BootstrapSeed): Promise<void> {
    // Convert (and validate) everything before the transaction opens.
    const organisation = organisationToDocument(seed.organisation)
    const owner = userToDocument(seed.owner)
    const workspace = workspaceToDocument(seed.workspace)
    const membership = memberToDocument(seed.membership)
    const adminKey = apiKeyToDocument(seed.adminKey)
    const { collections } = this.#open()
    await this.#transaction(async (session) => {
      // Copies: the driver adds an `_id` to a membership it inserts, and a retried attempt starts from the documents as built.
      await withConflicts('organisations', () => collections.organisations.insertOne({ ...organisation }, { session }))
      await withConflicts('users', () => collections.users.insertOne({ ...owner }, { session }))
      await withConflicts('workspaces', () => collections.workspaces.insertOne({ ...workspace }, { session }))
      await withConflicts('members', () => collections.members.insertOne({ ...membership }, { session }))
      await withConflicts('apiKeys', () => collections.apiKeys.insertOne({ ...adminKey }, { session }))
    })
  }

  async findUser(organisationId: string, userId: string): Promise<UserRecord | null> {
    const document = await this.#open().collections.users.findOne({ _id: userId, organisation_id: organisationId })
    return document === null ? null : userFromDocument(document)
  }

  async findUserByEmail(organisationId: string, email: string): Promise<UserRecord | null> {
    const document = await this.#open().collections.users.findOne({ organisation_id: organisationId, email })
    return document === null ? null : userFromDocument(document)
  }

  async listUsers(organisationId: string, filter: UserFilter, page: PageRequest): Promise<Paged<UserRecord>> {
    return pageOf(this.#open().collections.users, userQuery(organisationId, filter), BY_CREATION, page, userFromDocument)
  }

  async findWorkspace(organisationId: string, idOrSlug: string): Promise<WorkspaceRecord | null> {
    const documents = await this.#open()
      .collections.workspaces.find({ organisation_id: organisationId, $or: [{ _id: idOrSlug }, { slug: idOrSlug }] })
      .limit(2)
      .toArray()
    // A slug may equal another workspace's id; the id match wins.
    const document = documents.find((candidate) => candidate._id === idOrSlug) ?? documents[0]
    return document === undefined ? null : workspaceFromDocument(document)
  }

  async listWorkspaces(organisationId: string, filter: WorkspaceFilter, page: PageRequest): Promise<Paged<WorkspaceRecord>> {
    const query = workspaceQuery(organisationId, filter)
    return pageOf(this.#open().collections.workspaces, query, BY_CREATION, page, workspaceFromDocument)
  }

  async workspaceDependants(organisationId: string, workspaceId: string): Promise<WorkspaceDependants> {
    const { collections } = this.#open()
    const query = { organisation_id: organisationId, workspace_id: workspaceId }
    const [apiKeys, virtualKeys, configs, prompts] = await Promise.all([
      collections.apiKeys.countDocuments(query),
      collections.virtualKeys.countDocuments(query),
      collections.configs.countDocuments(query),
      collections.prompts.countDocuments(query),
    ])
    return { apiKeys, virtualKeys, configs, prompts }
  }

  async findMember(workspaceId: string, userId: string): Promise<WorkspaceMemberWithUser | null> {
    const [document] = await this.#open()
      .collections.members.aggregate<MemberWithUserDocument>([
        { $match: { workspace_id: workspaceId, user_id: userId } },
        { $limit: 1 },
        ...WITH_USER,
      ])
      .toArray()
    return document === undefined ? null : memberWithUserFromDocument(document)
  }

  async listMembers(workspaceId: string, filter: MemberFilter, page: PageRequest): Promise<Paged<WorkspaceMemberWithUser>> {
    const { collections } = this.#open()
    const userIds = filter.email === undefined ? null : await this.#userIdsByEmail(workspaceId, filter.email)
    const query: Filter<MemberDocument> = memberQuery(workspaceId, filter.role, userIds)
    const { skip, limit } = pageBounds(page)
    const [total, documents] = await Promise.all([
      collections.members.countDocuments(query),
      limit === 0
        ? Promise.resolve([])
        : collections.members
            .aggregate<MemberWithUserDocument>([
              { $match: query },
              { $sort: { created_at: 1, user_id: 1 } },
              { $skip: skip },
              { $limit: limit },
              ...WITH_USER,
            ])
            .toArray(),
    ])
    return { total, items: documents.map(memberWithUserFromDocument) }
  }

  async listMembershipsOfUser(organisationId: string, userId: string): Promise<readonly WorkspaceMemberRecord[]> {
    const documents = await this.#open()
      .collections.members.aggregate<MemberDocument>([
        { $match: { organisation_id: organisationId, user_id: userId } },
        { $lookup: { from: ADMIN_COLLECTIONS.workspaces, localField: 'workspace_id', foreignField: '_id', as: 'workspace' } },
        // Kept without its workspace, and then listed last, so a membership never disappears.
        { $unwind: { path: '$workspace', preserveNullAndEmptyArrays: true } },
        { $addFields: { workspace_missing: { $eq: [{ $type: '$workspace' }, 'missing'] } } },
        { $sort: { workspace_missing: 1, 'workspace.created_at': 1, workspace_id: 1 } },
        { $project: { workspace: 0, workspace_missing: 0 } },
      ])
      .toArray()
    return documents.map(memberFromDocument)
  }

  async findInvite(organisationId: string, inviteId: string): Promise<InviteRecord | null> {
    const document = await this.#open().collections.invites.findOne({ _id: inviteId, organisation_id: organisationId })
    return document === null ? null : inviteFromDocument(document)
  }

  async findInviteByTokenHash(tokenHash: string): Promise<InviteRecord | null> {
    const document = await this.#open().collections.invites.findOne({ token_hash: tokenHash })
    return document === null ? null : inviteFromDocument(document)
  }

  async listInvites(organisationId: string, filter: InviteFilter, page: PageRequest, now: string): Promise<Paged<InviteRecord>> {
    const query = inviteQuery(organisationId, filter, now)
    return pageOf(this.#open().collections.invites, query, NEWEST_FIRST, page, inviteFromDocument)
  }

  async findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const documents = await this.#open()
      .collections.apiKeys.find({ $or: [{ key_hash: keyHash }, { previous_key_hash: keyHash }] })
      .limit(2)
      .toArray()
    // A current secret wins over another key's rotated-out one.
    const document = documents.find((candidate) => candidate.key_hash === keyHash) ?? documents[0]
    return document === undefined ? null : apiKeyFromDocument(document)
  }

  async findApiKey(organisationId: string, keyId: string): Promise<ApiKeyRecord | null> {
    const document = await this.#open().collections.apiKeys.findOne({ _id: keyId, organisation_id: organisationId })
    return document === null ? null : apiKeyFromDocument(document)
  }

  async listApiKeys(organisationId: string, filter: ApiKeyFilter, page: PageRequest): Promise<Paged<ApiKeyRecord>> {
    return pageOf(this.#open().collections.apiKeys, apiKeyQuery(organisationId, filter), BY_CREATION, page, apiKeyFromDocument)
  }

  async findVirtualKey(organisationId: string, idOrSlug: string): Promise<VirtualKeyRecord | null> {
    const documents = await this.#open()
      .collections.virtualKeys.find({ organisation_id: organisationId, $or: [{ _id: idOrSlug }, { slug: idOrSlug }] })
      .limit(2)
      .toArray()
    // A slug may equal another virtual key's id; the id match wins.
    const document = documents.find((candidate) => candidate._id === idOrSlug) ?? documents[0]
    return document === undefined ? null : virtualKeyFromDocument(document)
  }

  async listVirtualKeys(organisationId: string, filter: VirtualKeyFilter, page: PageRequest): Promise<Paged<VirtualKeyRecord>> {
    const query = virtualKeyQuery(organisationId, filter)
    return pageOf(this.#open().collections.virtualKeys, query, BY_CREATION, page, virtualKeyFromDocument)
  }

  async sampleSealedSecret(): Promise<string | null> {
    const document = await this.#open().collections.virtualKeys.findOne(
      { $or: [{ 'sealed_keys.0': { $exists: true } }, { sealed_model_config: { $type: 'string' } }] },
      { projection: { sealed_keys: { $slice: 1 }, sealed_model_config: 1 } },
    )
    if (document === null) return null
    return document.sealed_keys[0] ?? document.sealed_model_config ?? null
  }

  async findCollection(organisationId: string, idOrSlug: string): Promise<CollectionRecord | null> {
    const documents = await this.#open()
      .collections.promptCollections.find({ organisation_id: organisationId, $or: [{ _id: idOrSlug }, { slug: idOrSlug }] })
      .limit(2)
      .toArray()
    const document = idMatchFirst(documents, idOrSlug)
    return document === null ? null : collectionFromDocument(document)
  }

  async findDefaultCollection(workspaceId: string): Promise<CollectionRecord | null> {
    const document = await this.#open().collections.promptCollections.findOne({ workspace_id: workspaceId, is_default: true })
    return document === null ? null : collectionFromDocument(document)
  }

  async listCollections(organisationId: string, filter: CollectionFilter, page: PageRequest): Promise<Paged<CollectionRecord>> {
    const query = collectionQuery(organisationId, filter)
    return pageOf(this.#open().collections.promptCollections, query, BY_CREATION, page, collectionFromDocument)
  }

  async findPrompt(organisationId: string, idOrSlug: string): Promise<PromptRecord | null> {
    const documents = await this.#open()
      .collections.prompts.find({ organisation_id: organisationId, $or: [{ _id: idOrSlug }, { slug: idOrSlug }] })
      .limit(2)
      .toArray()
    const document = idMatchFirst(documents, idOrSlug)
    return document === null ? null : promptFromDocument(document)
  }

  async listPrompts(organisationId: string, filter: PromptFilter, page: PageRequest): Promise<Paged<PromptRecord>> {
    return pageOf(this.#open().collections.prompts, promptQuery(organisationId, filter), BY_CREATION, page, promptFromDocument)
  }

  async findPromptVersion(promptId: string, selector: VersionSelector): Promise<PromptVersionRecord | null> {
    const { prompts, promptVersions } = this.#open().collections
    // Both look-ups go through the unique (prompt_id, version) and (prompt_id, label_id) indexes.
    if (selector.kind === 'label') {
      const labelled = await promptVersions.findOne({ prompt_id: promptId, label_id: selector.labelId })
      return labelled === null ? null : promptVersionFromDocument(labelled)
    }
    const owner =
      selector.kind === 'number'
        ? null
        : await prompts.findOne({ _id: promptId }, { projection: { published_version: 1, latest_version: 1 } })
    const number = selectedNumber(selector, owner)
    if (number === null) return null
    const document = await promptVersions.findOne({ prompt_id: promptId, version: number })
    return document === null ? null : promptVersionFromDocument(document)
  }

  async findPromptVersionById(promptId: string, versionId: string): Promise<PromptVersionRecord | null> {
    const document = await this.#open().collections.promptVersions.findOne({ _id: versionId, prompt_id: promptId })
    return document === null ? null : promptVersionFromDocument(document)
  }

  async listPromptVersions(promptId: string): Promise<readonly PromptVersionRecord[]> {
    const documents = await this.#open().collections.promptVersions.find({ prompt_id: promptId }).sort(BY_VERSION_DESCENDING).toArray()
    return documents.map(promptVersionFromDocument)
  }

  async findLabel(organisationId: string, labelId: string): Promise<LabelRecord | null> {
    const document = await this.#open().collections.labels.findOne({ _id: labelId, organisation_id: organisationId })
    return document === null ? null : labelFromDocument(document)
  }

  async findLabelByName(organisationId: string, workspaceId: string, name: string): Promise<LabelRecord | null> {
    // At most one of each (the unique index), read through it: the workspace's own wins.
    const documents = await this.#open()
      .collections.labels.find({ organisation_id: organisationId, workspace_id: { $in: [workspaceId, null] }, name })
      .limit(2)
      .toArray()
    const document = documents.find((candidate) => candidate.workspace_id === workspaceId) ?? documents.find((candidate) => candidate.is_universal)
    return document === undefined ? null : labelFromDocument(document)
  }

  async listLabels(organisationId: string, filter: LabelFilter, page: PageRequest): Promise<Paged<LabelRecord>> {
    return pageOf(this.#open().collections.labels, labelQuery(organisationId, filter), BUILT_IN_FIRST, page, labelFromDocument)
  }

  async ensureBuiltInLabels(organisationId: string, now: string): Promise<void> {
    const at = toDate(now, 'now').toISOString()
    const { labels } = this.#open().collections
    // Usually they exist: one indexed count answers that without any write.
    const present = await labels.countDocuments({ organisation_id: organisationId, workspace_id: null, name: { $in: [...BUILT_IN_LABEL_NAMES] } })
    if (present === BUILT_IN_LABEL_NAMES.length) return
    for (const name of BUILT_IN_LABEL_NAMES) {
      const label: LabelRecord = {
        id: randomUUID(),
        organisationId,
        workspaceId: null,
        name,
        description: null,
        colorCode: null,
        isUniversal: true,
        status: 'active',
        createdAt: at,
        lastUpdatedAt: at,
      }
      const { organisation_id, workspace_id, name: _name, ...onInsert } = labelToDocument(label)
      const identity: Pick<LabelDocument, 'organisation_id' | 'workspace_id' | 'name'> = { organisation_id, workspace_id, name }
      try {
        // The filter is the key of the unique (organisation_id, workspace_id, name) index, so two
        // instances upserting at once cannot both insert.
        await labels.updateOne(identity, { $setOnInsert: onInsert }, { upsert: true })
      } catch (error) {
        // The upsert that lost such a race (when the server did not retry it): the label exists,
        // which is all that was asked.
        if (!isDuplicateKeyError(error)) throw error
      }
    }
  }

  async findPartial(organisationId: string, idOrSlug: string): Promise<PartialRecord | null> {
    const documents = await this.#open()
      .collections.partials.find({ organisation_id: organisationId, $or: [{ _id: idOrSlug }, { slug: idOrSlug }] })
      .limit(2)
      .toArray()
    const document = idMatchFirst(documents, idOrSlug)
    return document === null ? null : partialFromDocument(document)
  }

  async findPartialByName(workspaceId: string, name: string): Promise<PartialRecord | null> {
    const document = await this.#open().collections.partials.findOne({ workspace_id: workspaceId, name })
    return document === null ? null : partialFromDocument(document)
  }

  async listPartials(organisationId: string, filter: PartialFilter, page: PageRequest): Promise<Paged<PartialRecord>> {
    return pageOf(this.#open().collections.partials, partialQuery(organisationId, filter), BY_CREATION, page, partialFromDocument)
  }

  async findPartialVersion(partialId: string, selector: VersionSelector): Promise<PartialVersionRecord | null> {
    if (selector.kind === 'label') return null
    const { partials, partialVersions } = this.#open().collections
    const owner =
      selector.kind === 'number'
        ? null
        : await partials.findOne({ _id: partialId }, { projection: { published_version: 1, latest_version: 1 } })
    const number = selectedNumber(selector, owner)
    if (number === null) return null
    const document = await partialVersions.findOne({ partial_id: partialId, version: number })
    return document === null ? null : partialVersionFromDocument(document)
  }

  async listPartialVersions(partialId: string): Promise<readonly PartialVersionRecord[]> {
    const documents = await this.#open().collections.partialVersions.find({ partial_id: partialId }).sort(BY_VERSION_DESCENDING).toArray()
    return documents.map(partialVersionFromDocument)
  }

  async findConfig(organisationId: string, slugOrId: string): Promise<ConfigRecord | null> {
    // Through `_id` and the unique (organisation_id, slug) index: at most two documents.
    const documents = await this.#open()
      .collections.configs.find({ organisation_id: organisationId, $or: [{ _id: slugOrId }, { slug: slugOrId }] })
      .limit(2)
      .toArray()
    const document = idMatchFirst(documents, slugOrId)
    return document === null ? null : configFromDocument(document)
  }

  async listConfigs(organisationId: string, filter: ConfigFilter, page: PageRequest): Promise<Paged<ConfigRecord>> {
    return pageOf(this.#open().collections.configs, configQuery(organisationId, filter), BY_CREATION, page, configFromDocument)
  }

  async listConfigVersions(configId: string, page: PageRequest): Promise<Paged<ConfigVersionRecord>> {
    return pageOf(this.#open().collections.configVersions, { config_id: configId }, BY_VERSION_DESCENDING, page, configVersionFromDocument)
  }

  async configDependants(organisationId: string, refs: readonly string[]): Promise<ConfigDependants> {
    if (refs.length === 0) return { apiKeys: [], workspaces: [] }
    const { apiKeys, workspaces } = this.#open().collections
    const query = configDependantQuery(organisationId, refs)
    const [keys, spaces] = await Promise.all([apiKeys.find(query).sort(BY_CREATION).toArray(), workspaces.find(query).sort(BY_CREATION).toArray()])
    return { apiKeys: keys.map(apiKeyFromDocument), workspaces: spaces.map(workspaceFromDocument) }
  }

  /** One connection attempt; the client is closed again when any step fails. */
  async #connect(): Promise<void> {
    const client = new MongoClient(this.#uri)
    try {
      await client.connect()
      const db = client.db(this.#databaseName)
      const hello = await db.command({ hello: 1 })
      if (!supportsTransactions(hello)) {
        throw new Error(
          'MongoDB admin store needs a replica set or mongos (it writes in transactions); ' +
            'a single-node replica set is enough: start mongod with --replSet and run rs.initiate()',
        )
      }
      await ensureAdminCollections(db)
      this.#connected = { client, db, collections: adminCollections(db) }
    } catch (error) {
      await client.close().catch(() => undefined)
      throw error
    }
  }

  /**
   * The user (at most one: emails are unique per organisation) with this email in the workspace's
   * organisation, found through the `(organisation_id, email)` index rather than a join.
   */
  async #userIdsByEmail(workspaceId: string, email: string): Promise<string[]> {
    const { workspaces, users } = this.#open().collections
    const workspace = await workspaces.findOne({ _id: workspaceId }, { projection: { organisation_id: 1 } })
    if (workspace === null) return []
    const user = await users.findOne({ organisation_id: workspace.organisation_id, email }, { projection: { _id: 1 } })
    return user === null ? [] : [user._id]
  }

  async #transaction<T>(work: (session: ClientSession) => Promise<T>): Promise<T> {
    const session = this.#open().client.startSession()
    try {
      return await session.withTransaction(work, TRANSACTION_OPTIONS)
    } finally {
      await session.endSession()
    }
  }

  #open(): Connected {
    if (this.#connected === null) throw new Error('MongoDB admin store is not started')
    return this.#connected
  }
}
