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
import type { ClientSession } from 'mongodb'
import type {
  AdminWriter,
  ApiKeyRecord,
  InviteRecord,
  InviteState,
  OrganisationRecord,
  UserRecord,
  VirtualKeyRecord,
  WorkspaceMemberRecord,
  WorkspaceRecord,
} from '../../core/ports.js'
import type { AdminCollections } from './mongo-admin-collections.js'
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
    await this.#run(() =>
      withConflicts('organisations', () =>
        this.#collections.organisations.replaceOne({ _id: document._id }, document, { session: this.#session }),
      ),
    )
  }

  async insertUser(user: UserRecord): Promise<void> {
    const document = userToDocument(user)
    await this.#run(() =>
      withConflicts('users', () => this.#collections.users.insertOne(document, { session: this.#session })),
    )
  }

  async updateUser(user: UserRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = userToDocument(user)
    const expected = toDate(expectedLastUpdatedAt, 'lastUpdatedAt')
    const result = await this.#run(() =>
      withConflicts('users', () =>
        this.#collections.users.replaceOne(
          { _id: document._id, organisation_id: document.organisation_id, last_updated_at: expected },
          document,
          { session: this.#session },
        ),
      ),
    )
    return result.matchedCount === 1
  }

  async deleteUser(organisationId: string, userId: string): Promise<readonly ApiKeyRecord[]> {
    const session = this.#session
    const { apiKeys, members, users } = this.#collections
    return this.#run(async () => {
      const keys = await apiKeys
        .find({ organisation_id: organisationId, user_id: userId, type: 'workspace-user' }, { session })
        .toArray()
      // Deleting exactly the keys read keeps the returned list equal to what was removed.
      if (keys.length > 0) await apiKeys.deleteMany({ _id: { $in: keys.map((key) => key._id) } }, { session })
      await members.deleteMany({ organisation_id: organisationId, user_id: userId }, { session })
      await users.deleteOne({ _id: userId, organisation_id: organisationId }, { session })
      return keys.map(apiKeyFromDocument)
    })
  }

  async insertWorkspace(workspace: WorkspaceRecord): Promise<void> {
    const document = workspaceToDocument(workspace)
    await this.#run(() =>
      withConflicts('workspaces', () => this.#collections.workspaces.insertOne(document, { session: this.#session })),
    )
  }

  async updateWorkspace(workspace: WorkspaceRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = workspaceToDocument(workspace)
    const expected = toDate(expectedLastUpdatedAt, 'lastUpdatedAt')
    const result = await this.#run(() =>
      withConflicts('workspaces', () =>
        this.#collections.workspaces.replaceOne(
          { _id: document._id, organisation_id: document.organisation_id, last_updated_at: expected },
          document,
          { session: this.#session },
        ),
      ),
    )
    return result.matchedCount === 1
  }

  async deleteWorkspace(organisationId: string, workspaceId: string): Promise<readonly ApiKeyRecord[]> {
    const session = this.#session
    const { apiKeys, virtualKeys, members, workspaces } = this.#collections
    return this.#run(async () => {
      const keys = await apiKeys.find({ organisation_id: organisationId, workspace_id: workspaceId }, { session }).toArray()
      if (keys.length > 0) await apiKeys.deleteMany({ _id: { $in: keys.map((key) => key._id) } }, { session })
      await virtualKeys.deleteMany({ organisation_id: organisationId, workspace_id: workspaceId }, { session })
      await members.deleteMany({ organisation_id: organisationId, workspace_id: workspaceId }, { session })
      await workspaces.deleteOne({ _id: workspaceId, organisation_id: organisationId }, { session })
      return keys.map(apiKeyFromDocument)
    })
  }

  async insertMember(member: WorkspaceMemberRecord): Promise<void> {
    const document = memberToDocument(member)
    await this.#run(() =>
      withConflicts('members', () => this.#collections.members.insertOne(document, { session: this.#session })),
    )
  }

  async updateMember(member: WorkspaceMemberRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = memberToDocument(member)
    const expected = toDate(expectedLastUpdatedAt, 'lastUpdatedAt')
    const result = await this.#run(() =>
      withConflicts('members', () =>
        this.#collections.members.replaceOne(
          {
            workspace_id: document.workspace_id,
            user_id: document.user_id,
            organisation_id: document.organisation_id,
            last_updated_at: expected,
          },
          document,
          { session: this.#session },
        ),
      ),
    )
    return result.matchedCount === 1
  }

  async deleteMember(workspaceId: string, userId: string): Promise<boolean> {
    const result = await this.#run(() =>
      this.#collections.members.deleteOne({ workspace_id: workspaceId, user_id: userId }, { session: this.#session }),
    )
    return result.deletedCount === 1
  }

  async insertInvite(invite: InviteRecord): Promise<void> {
    const document = inviteToDocument(invite)
    await this.#run(() =>
      withConflicts('invites', () => this.#collections.invites.insertOne(document, { session: this.#session })),
    )
  }

  async updateInvite(invite: InviteRecord, expectedState: InviteState): Promise<boolean> {
    const document = inviteToDocument(invite)
    const result = await this.#run(() =>
      withConflicts('invites', () =>
        this.#collections.invites.replaceOne(
          { _id: document._id, organisation_id: document.organisation_id, state: expectedState },
          document,
          { session: this.#session },
        ),
      ),
    )
    return result.matchedCount === 1
  }

  async insertApiKey(key: ApiKeyRecord): Promise<void> {
    const document = apiKeyToDocument(key)
    await this.#run(() =>
      withConflicts('apiKeys', () => this.#collections.apiKeys.insertOne(document, { session: this.#session })),
    )
  }

  async updateApiKey(key: ApiKeyRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = apiKeyToDocument(key)
    const expected = toDate(expectedLastUpdatedAt, 'lastUpdatedAt')
    const result = await this.#run(() =>
      withConflicts('apiKeys', () =>
        this.#collections.apiKeys.replaceOne(
          { _id: document._id, organisation_id: document.organisation_id, last_updated_at: expected },
          document,
          { session: this.#session },
        ),
      ),
    )
    return result.matchedCount === 1
  }

  async deleteApiKey(organisationId: string, keyId: string): Promise<ApiKeyRecord | null> {
    const document = await this.#run(() =>
      this.#collections.apiKeys.findOneAndDelete({ _id: keyId, organisation_id: organisationId }, { session: this.#session }),
    )
    return document === null ? null : apiKeyFromDocument(document)
  }

  async insertVirtualKey(key: VirtualKeyRecord): Promise<void> {
    const document = virtualKeyToDocument(key)
    await this.#run(() =>
      withConflicts('virtualKeys', () => this.#collections.virtualKeys.insertOne(document, { session: this.#session })),
    )
  }

  async updateVirtualKey(key: VirtualKeyRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const document = virtualKeyToDocument(key)
    const expected = toDate(expectedLastUpdatedAt, 'lastUpdatedAt')
    const result = await this.#run(() =>
      withConflicts('virtualKeys', () =>
        this.#collections.virtualKeys.replaceOne(
          { _id: document._id, organisation_id: document.organisation_id, last_updated_at: expected },
          document,
          { session: this.#session },
        ),
      ),
    )
    return result.matchedCount === 1
  }

  async deleteVirtualKey(organisationId: string, virtualKeyId: string): Promise<VirtualKeyRecord | null> {
    const document = await this.#run(() =>
      this.#collections.virtualKeys.findOneAndDelete({ _id: virtualKeyId, organisation_id: organisationId }, { session: this.#session }),
    )
    return document === null ? null : virtualKeyFromDocument(document)
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
