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
import type {
  ApiKeyRecord,
  InviteRecord,
  InviteState,
  OrganisationRecord,
  UserRecord,
  VirtualKeyRecord,
  WorkspaceMemberRecord,
  WorkspaceRecord,
} from '../../core/admin-records.js'
import type { AdminWriter } from '../../core/ports.js'
import type { AdminCollectionRole, AdminCollections, ApiKeyDocument } from './mongo-admin-collections.js'
import {
  apiKeyFromDocument,
  apiKeyToDocument,
  inviteToDocument,
  memberToDocument,
  organisationToDocument,
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
    const { apiKeys, virtualKeys, members, workspaces } = this.#collections
    return this.#run(async () => {
      const keys = await deleteApiKeys(apiKeys, session, { organisation_id: organisationId, workspace_id: workspaceId })
      await virtualKeys.deleteMany({ organisation_id: organisationId, workspace_id: workspaceId }, { session })
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
