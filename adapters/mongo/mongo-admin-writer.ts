/**
 * The `AdminWriter` of one MongoDB transaction attempt (see `MongoAdminStore.write`).
 *
 * Every operation carries the transaction's session. Operations run one at a time in call order,
 * even when the caller starts several at once, because the driver does not support parallel
 * operations inside a transaction. The first failed operation poisons the writer: MongoDB aborts
 * the transaction on a failed write, so every later operation rejects with that same error instead
 * of a confusing "no such transaction" (which the driver would retry as transient), and the
 * transaction fails with it even if the caller swallowed it.
 */
import type { ClientSession, Collection, Filter, OptionalUnlessRequiredId, WithoutId } from 'mongodb'
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
import type { AdminCollectionRole, AdminCollections, ApiKeyDocument } from './mongo-admin-collections.js'
import {
  apiKeyFromDocument,
  apiKeyToDocument,
  collectionToDocument,
  configToDocument,
  configVersionToDocument,
  inviteToDocument,
  labelToDocument,
  memberToDocument,
  organisationToDocument,
  partialToDocument,
  partialVersionToDocument,
  promptToDocument,
  promptVersionToDocument,
  toDate,
  userToDocument,
  virtualKeyFromDocument,
  virtualKeyToDocument,
  workspaceToDocument,
} from './mongo-admin-documents.js'
import { withConflicts } from './mongo-conflicts.js'

function ignore(): void {}

type DocumentOf<R extends AdminCollectionRole> = AdminCollections[R] extends Collection<infer D> ? D : never

/** The filter of an optimistic update of a document scoped by organisation and versioned by `last_updated_at`. */
function versionOf(
  document: { readonly _id: string; readonly organisation_id: string },
  expectedLastUpdatedAt: string,
): { _id: string; organisation_id: string; last_updated_at: Date } {
  return { _id: document._id, organisation_id: document.organisation_id, last_updated_at: toDate(expectedLastUpdatedAt, 'lastUpdatedAt') }
}

/** Deletes the API keys `filter` matches and returns them: exactly the keys read, so the list equals what was removed. */
async function deleteApiKeys(apiKeys: Collection<ApiKeyDocument>, session: ClientSession, filter: Filter<ApiKeyDocument>): Promise<ApiKeyRecord[]> {
  const keys = await apiKeys.find(filter, { session }).toArray()
  if (keys.length > 0) await apiKeys.deleteMany({ _id: { $in: keys.map((key) => key._id) } }, { session })
  return keys.map(apiKeyFromDocument)
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

/** What deleteCollection found: a refusal is reported after the queue, so it does not poison the transaction. */
type CollectionDeletion = 'not-empty' | 'deleted' | 'absent'

export class MongoAdminWriter implements AdminWriter {
  readonly #collections: AdminCollections
  readonly #session: ClientSession
  #tail: Promise<void> = Promise.resolve()
  #failure: { readonly error: unknown } | null = null
  #retired = false

  constructor(collections: AdminCollections, session: ClientSession) {
    this.#collections = collections
    this.#session = session
  }

  /** Waits for every queued operation; rejects with the first failure, if any. */
  async settle(): Promise<void> {
    await this.#tail
    if (this.#failure !== null) throw this.#failure.error
  }

  /**
   * Refuses further operations and waits for the one in flight: the session is reused by the next
   * attempt, which a late operation of this one must never join.
   */
  async retire(): Promise<void> {
    this.#retired = true
    await this.#tail
  }

  async updateOrganisation(organisation: OrganisationRecord): Promise<void> {
    const document = organisationToDocument(organisation)
    await this.#replace('organisations', { _id: document._id }, document)
  }

  async insertUser(user: UserRecord): Promise<void> {
    await this.#insert('users', userToDocument(user))
  }

  async updateUser(user: UserRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = userToDocument(user)
    return this.#replace('users', versionOf(document, expectedLastUpdatedAt), document)
  }

  async deleteUser(organisationId: string, userId: string): Promise<readonly ApiKeyRecord[]> {
    const session = this.#session
    const { apiKeys, members, users } = this.#collections
    return this.#run(async () => {
      const keys = await deleteApiKeys(apiKeys, session, { organisation_id: organisationId, user_id: userId, type: 'workspace-user' })
      await members.deleteMany({ organisation_id: organisationId, user_id: userId }, { session })
      await users.deleteOne({ _id: userId, organisation_id: organisationId }, { session })
      return keys
    })
  }

  async insertWorkspace(workspace: WorkspaceRecord): Promise<void> {
    await this.#insert('workspaces', workspaceToDocument(workspace))
  }

  async updateWorkspace(workspace: WorkspaceRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = workspaceToDocument(workspace)
    return this.#replace('workspaces', versionOf(document, expectedLastUpdatedAt), document)
  }

  async deleteWorkspace(organisationId: string, workspaceId: string): Promise<readonly ApiKeyRecord[]> {
    const session = this.#session
    const collections = this.#collections
    const { apiKeys, members, workspaces } = collections
    return this.#run(async () => {
      const keys = await deleteApiKeys(apiKeys, session, { organisation_id: organisationId, workspace_id: workspaceId })
      const owned = { organisation_id: organisationId, workspace_id: workspaceId }
      await collections.virtualKeys.deleteMany(owned, { session })
      await collections.configVersions.deleteMany(owned, { session })
      await collections.configs.deleteMany(owned, { session })
      // Prompt and partial versions carry the workspace too, so none is left orphaned.
      await collections.promptVersions.deleteMany(owned, { session })
      await collections.prompts.deleteMany(owned, { session })
      await collections.partialVersions.deleteMany(owned, { session })
      await collections.partials.deleteMany(owned, { session })
      await collections.promptCollections.deleteMany(owned, { session })
      await collections.labels.deleteMany(owned, { session })
      await members.deleteMany({ organisation_id: organisationId, workspace_id: workspaceId }, { session })
      await workspaces.deleteOne({ _id: workspaceId, organisation_id: organisationId }, { session })
      return keys
    })
  }

  async insertMember(member: WorkspaceMemberRecord): Promise<void> {
    await this.#insert('members', memberToDocument(member))
  }

  async updateMember(member: WorkspaceMemberRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = memberToDocument(member)
    const filter = {
      workspace_id: document.workspace_id,
      user_id: document.user_id,
      organisation_id: document.organisation_id,
      last_updated_at: toDate(expectedLastUpdatedAt, 'lastUpdatedAt'),
    }
    return this.#replace('members', filter, document)
  }

  async deleteMember(workspaceId: string, userId: string): Promise<boolean> {
    const result = await this.#run(() =>
      this.#collections.members.deleteOne({ workspace_id: workspaceId, user_id: userId }, { session: this.#session }),
    )
    return result.deletedCount === 1
  }

  async insertInvite(invite: InviteRecord): Promise<void> {
    await this.#insert('invites', inviteToDocument(invite))
  }

  async updateInvite(invite: InviteRecord, expectedState: InviteState): Promise<boolean> {
    const document = inviteToDocument(invite)
    return this.#replace('invites', { _id: document._id, organisation_id: document.organisation_id, state: expectedState }, document)
  }

  async insertApiKey(key: ApiKeyRecord): Promise<void> {
    await this.#insert('apiKeys', apiKeyToDocument(key))
  }

  async updateApiKey(key: ApiKeyRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = apiKeyToDocument(key)
    return this.#replace('apiKeys', versionOf(document, expectedLastUpdatedAt), document)
  }

  async deleteApiKey(organisationId: string, keyId: string): Promise<ApiKeyRecord | null> {
    const document = await this.#run(() =>
      this.#collections.apiKeys.findOneAndDelete({ _id: keyId, organisation_id: organisationId }, { session: this.#session }),
    )
    return document === null ? null : apiKeyFromDocument(document)
  }

  async insertVirtualKey(key: VirtualKeyRecord): Promise<void> {
    await this.#insert('virtualKeys', virtualKeyToDocument(key))
  }

  async updateVirtualKey(key: VirtualKeyRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = virtualKeyToDocument(key)
    return this.#replace('virtualKeys', versionOf(document, expectedLastUpdatedAt), document)
  }

  async deleteVirtualKey(organisationId: string, virtualKeyId: string): Promise<VirtualKeyRecord | null> {
    const document = await this.#run(() =>
      this.#collections.virtualKeys.findOneAndDelete({ _id: virtualKeyId, organisation_id: organisationId }, { session: this.#session }),
    )
    return document === null ? null : virtualKeyFromDocument(document)
  }

  async insertCollection(collection: CollectionRecord): Promise<void> {
    await this.#insert('promptCollections', collectionToDocument(collection))
  }

  async updateCollection(collection: CollectionRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = collectionToDocument(collection)
    return this.#replace('promptCollections', versionOf(document, expectedLastUpdatedAt), document)
  }

  async deleteCollection(organisationId: string, collectionId: string): Promise<boolean> {
    const session = this.#session
    const { prompts, partials, promptCollections } = this.#collections
    const outcome = await this.#run(async (): Promise<CollectionDeletion> => {
      const inside = { organisation_id: organisationId, collection_id: collectionId }
      const used =
        (await prompts.findOne(inside, { session, projection: { _id: 1 } })) !== null ||
        (await partials.findOne(inside, { session, projection: { _id: 1 } })) !== null ||
        (await promptCollections.findOne({ organisation_id: organisationId, parent_collection_id: collectionId }, { session, projection: { _id: 1 } })) !==
          null
      if (used) return 'not-empty'
      const result = await promptCollections.deleteOne({ _id: collectionId, organisation_id: organisationId }, { session })
      return result.deletedCount === 1 ? 'deleted' : 'absent'
    })
    if (outcome === 'not-empty') {
      throw gatewayError(ERRORS.GW_ADMIN_CONFLICT, 'The collection is not empty: move or delete its prompts, partials and collections first', {
        param: 'collectionId',
      })
    }
    return outcome === 'deleted'
  }

  async insertPrompt(prompt: PromptRecord, first: PromptVersionRecord): Promise<void> {
    checkFirstVersion(prompt, first, first.promptId)
    const promptDocument = promptToDocument(prompt)
    const versionDocument = promptVersionToDocument(first)
    const session = this.#session
    const { prompts, promptVersions } = this.#collections
    await this.#run(async () => {
      await withConflicts('prompts', () => prompts.insertOne(promptDocument, { session }))
      await withConflicts('promptVersions', () => promptVersions.insertOne(versionDocument, { session }))
    })
  }

  async updatePrompt(prompt: PromptRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = promptToDocument(prompt)
    return this.#replace('prompts', versionOf(document, expectedLastUpdatedAt), document)
  }

  async insertPromptVersion(version: PromptVersionRecord): Promise<void> {
    await this.#insert('promptVersions', promptVersionToDocument(version))
  }

  async setPromptVersionLabel(promptId: string, versionId: string, labelId: string | null): Promise<boolean> {
    const session = this.#session
    const { promptVersions } = this.#collections
    return this.#run(async () => {
      const found = await promptVersions.findOne({ _id: versionId, prompt_id: promptId }, { session, projection: { _id: 1 } })
      if (found === null) return false
      // Off the other version first, so the (prompt_id, label_id) index never holds the label twice.
      if (labelId !== null) {
        await promptVersions.updateMany({ prompt_id: promptId, label_id: labelId, _id: { $ne: versionId } }, { $set: { label_id: null } }, { session })
      }
      await withConflicts('promptVersions', () =>
        promptVersions.updateOne({ _id: versionId, prompt_id: promptId }, { $set: { label_id: labelId } }, { session }),
      )
      return true
    })
  }

  async deletePrompt(organisationId: string, promptId: string): Promise<boolean> {
    const session = this.#session
    const { prompts, promptVersions } = this.#collections
    return this.#run(async () => {
      const result = await prompts.deleteOne({ _id: promptId, organisation_id: organisationId }, { session })
      await promptVersions.deleteMany({ organisation_id: organisationId, prompt_id: promptId }, { session })
      return result.deletedCount === 1
    })
  }

  async insertLabel(label: LabelRecord): Promise<void> {
    refuseBuiltInLabelName(label)
    await this.#insert('labels', labelToDocument(label))
  }

  async updateLabel(label: LabelRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    refuseBuiltInLabelName(label)
    const document = labelToDocument(label)
    return this.#replace('labels', versionOf(document, expectedLastUpdatedAt), document)
  }

  async deleteLabel(organisationId: string, labelId: string): Promise<boolean> {
    const session = this.#session
    const { labels, promptVersions } = this.#collections
    return this.#run(async () => {
      const result = await labels.deleteOne({ _id: labelId, organisation_id: organisationId }, { session })
      if (result.deletedCount !== 1) return false
      await promptVersions.updateMany({ organisation_id: organisationId, label_id: labelId }, { $set: { label_id: null } }, { session })
      return true
    })
  }

  async insertPartial(partial: PartialRecord, first: PartialVersionRecord): Promise<void> {
    checkFirstVersion(partial, first, first.partialId)
    const partialDocument = partialToDocument(partial)
    const versionDocument = partialVersionToDocument(first)
    const session = this.#session
    const { partials, partialVersions } = this.#collections
    await this.#run(async () => {
      await withConflicts('partials', () => partials.insertOne(partialDocument, { session }))
      await withConflicts('partialVersions', () => partialVersions.insertOne(versionDocument, { session }))
    })
  }

  async updatePartial(partial: PartialRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = partialToDocument(partial)
    return this.#replace('partials', versionOf(document, expectedLastUpdatedAt), document)
  }

  async insertPartialVersion(version: PartialVersionRecord): Promise<void> {
    await this.#insert('partialVersions', partialVersionToDocument(version))
  }

  async deletePartial(organisationId: string, partialId: string): Promise<boolean> {
    const session = this.#session
    const { partials, partialVersions } = this.#collections
    return this.#run(async () => {
      const result = await partials.deleteOne({ _id: partialId, organisation_id: organisationId }, { session })
      await partialVersions.deleteMany({ organisation_id: organisationId, partial_id: partialId }, { session })
      return result.deletedCount === 1
    })
  }

  async insertConfig(config: ConfigRecord, first: ConfigVersionRecord): Promise<void> {
    checkFirstConfigVersion(config, first)
    const configDocument = configToDocument(config)
    const versionDocument = configVersionToDocument(first)
    const session = this.#session
    const { configs, configVersions } = this.#collections
    await this.#run(async () => {
      await withConflicts('configs', () => configs.insertOne(configDocument, { session }))
      await withConflicts('configVersions', () => configVersions.insertOne(versionDocument, { session }))
    })
  }

  async updateConfig(config: ConfigRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = configToDocument(config)
    return this.#replace('configs', versionOf(document, expectedLastUpdatedAt), document)
  }

  async insertConfigVersion(version: ConfigVersionRecord): Promise<void> {
    await this.#insert('configVersions', configVersionToDocument(version))
  }

  async deleteConfig(organisationId: string, configId: string): Promise<boolean> {
    const session = this.#session
    const { configs, configVersions } = this.#collections
    return this.#run(async () => {
      const result = await configs.deleteOne({ _id: configId, organisation_id: organisationId }, { session })
      await configVersions.deleteMany({ organisation_id: organisationId, config_id: configId }, { session })
      return result.deletedCount === 1
    })
  }

  /** Queues one insert into `role`'s collection; a duplicate key rejects with `GW_ADMIN_CONFLICT`. */
  async #insert<R extends AdminCollectionRole>(role: R, document: OptionalUnlessRequiredId<DocumentOf<R>>): Promise<void> {
    const collection = this.#collections[role] as unknown as Collection<DocumentOf<R>>
    await this.#run(() => withConflicts(role, () => collection.insertOne(document, { session: this.#session })))
  }

  /**
   * Queues one replacement of the document `filter` matches (its identity and, for an optimistic
   * update, the version the caller read); whether one matched. A duplicate key rejects with
   * `GW_ADMIN_CONFLICT`.
   */
  async #replace<R extends AdminCollectionRole>(role: R, filter: Filter<DocumentOf<R>>, document: WithoutId<DocumentOf<R>>): Promise<boolean> {
    const collection = this.#collections[role] as unknown as Collection<DocumentOf<R>>
    const result = await this.#run(() => withConflicts(role, () => collection.replaceOne(filter, document, { session: this.#session })))
    return result.matchedCount === 1
  }

  /**
   * Queues `operation` behind the previous ones. Records are converted (and validated) by the
   * callers before queueing, so a validation error never poisons the transaction.
   */
  #run<T>(operation: () => Promise<T>): Promise<T> {
    if (this.#retired) return Promise.reject(new Error('MongoDB admin store: writer used after its transaction ended'))
    const result = this.#tail.then(() => {
      if (this.#retired) throw new Error('MongoDB admin store: writer used after its transaction ended')
      if (this.#failure !== null) throw this.#failure.error
      return operation()
    })
    this.#tail = result.then(ignore, (error: unknown) => {
      this.#failure ??= { error }
    })
    return result
  }
}
