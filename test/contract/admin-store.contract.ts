/**
 * The `AdminStore` contract: behaviour every adapter must show, asserted through the port only.
 *
 * `makeStore` must return a started, empty store; the suite closes it after each test. Timestamps
 * are written in `Date#toISOString()` form, the form every store returns, and emails lower-cased,
 * as the Admin API writes them. Ordering ties (equal `createdAt`) are broken by id, compared as
 * plain strings (UUIDs are lower-case hex, so every store's string order agrees).
 */
import { createHash, randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type {
  ApiKeyRecord,
  AuditEntry,
  AuditFilter,
  BootstrapSeed,
  CollectionRecord,
  ConfigRecord,
  ConfigVersionRecord,
  InviteRecord,
  JwtSettings,
  LabelRecord,
  OrganisationRecord,
  PartialRecord,
  PartialVersionRecord,
  PromptRecord,
  PromptVersionRecord,
  UserRecord,
  VirtualKeyRecord,
  WorkspaceMemberRecord,
  WorkspaceRecord,
} from '../../core/admin-records.js'
import { isGatewayError } from '../../core/errors.js'
import type { AdminStore, AdminWriter } from '../../core/ports.js'

const BASE_TIME = Date.parse('2024-03-01T10:00:00.000Z')
const DAY_MS = 86_400_000

function at(offsetMs: number): string {
  return new Date(BASE_TIME + offsetMs).toISOString()
}

function hashOf(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** The listing order of users, workspaces, API keys and virtual keys: `createdAt`, then id. */
function byCreation<T extends { readonly createdAt: string; readonly id: string }>(records: readonly T[]): T[] {
  return [...records].sort((a, b) => compareText(a.createdAt, b.createdAt) || compareText(a.id, b.id))
}

function makeOrganisation(overrides: Partial<OrganisationRecord> = {}): OrganisationRecord {
  return { id: randomUUID(), name: 'Acme Ltd', createdAt: at(0), jwt: null, ...overrides }
}

function makeUser(organisationId: string, overrides: Partial<UserRecord> = {}): UserRecord {
  const id = randomUUID()
  return {
    id,
    organisationId,
    email: `user-${id.slice(0, 8)}@acme.test`,
    firstName: 'Grace',
    lastName: 'Hopper',
    role: 'member',
    passwordHash: null,
    createdAt: at(500),
    lastUpdatedAt: at(500),
    ...overrides,
  }
}

function makeWorkspace(organisationId: string, overrides: Partial<WorkspaceRecord> = {}): WorkspaceRecord {
  const id = randomUUID()
  return {
    id,
    slug: `ws-${id.slice(0, 8)}`,
    organisationId,
    name: 'Workspace',
    description: null,
    defaults: null,
    usageLimits: [],
    rateLimits: [],
    createdAt: at(1_000),
    lastUpdatedAt: at(2_000),
    ...overrides,
  }
}

function makeMember(workspace: WorkspaceRecord, user: UserRecord, overrides: Partial<WorkspaceMemberRecord> = {}): WorkspaceMemberRecord {
  return {
    workspaceId: workspace.id,
    userId: user.id,
    organisationId: workspace.organisationId,
    role: 'member',
    createdAt: at(2_500),
    lastUpdatedAt: at(2_500),
    ...overrides,
  }
}

function makeInvite(organisationId: string, overrides: Partial<InviteRecord> = {}): InviteRecord {
  return {
    id: randomUUID(),
    organisationId,
    tokenHash: hashOf(randomUUID()),
    email: 'invitee@acme.test',
    role: 'member',
    workspaces: [],
    apiKeyScopes: null,
    invitedBy: null,
    state: 'pending',
    createdAt: at(5_000),
    expiresAt: at(5_000 + 7 * DAY_MS),
    acceptedAt: null,
    lastUpdatedAt: at(5_000),
    ...overrides,
  }
}

function makeApiKey(organisationId: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return {
    id: randomUUID(),
    keyHash: hashOf(randomUUID()),
    maskedKey: 'gw********xyz',
    name: 'Key',
    description: null,
    type: 'workspace-service',
    organisationId,
    workspaceId: null,
    userId: null,
    scopes: ['completions.write'],
    status: 'active',
    expiresAt: null,
    creationMode: 'api',
    rateLimits: [],
    usageLimits: null,
    defaults: null,
    alertEmails: [],
    previousKeyHash: null,
    previousKeyExpiresAt: null,
    lastRotatedAt: null,
    createdAt: at(3_000),
    lastUpdatedAt: at(4_000),
    ...overrides,
  }
}

function makeVirtualKey(organisationId: string, workspaceId: string, overrides: Partial<VirtualKeyRecord> = {}): VirtualKeyRecord {
  const id = randomUUID()
  return {
    id,
    slug: `vk-${id.slice(0, 8)}`,
    organisationId,
    workspaceId,
    name: 'OpenAI main',
    note: null,
    provider: 'openai',
    sealedKeys: [`sealed-key-${id}`],
    maskedKey: 'sk********xyz',
    customHost: null,
    sealedModelConfig: null,
    rateLimits: [],
    usageLimits: null,
    status: 'active',
    expiresAt: null,
    createdAt: at(3_000),
    lastUpdatedAt: at(4_000),
    ...overrides,
  }
}

function makeAudit(organisationId: string | null, overrides: Partial<AuditEntry> = {}): AuditEntry {
  return {
    id: randomUUID(),
    timestamp: at(10_000),
    organisationId,
    workspaceId: null,
    userId: null,
    userType: 'api_key',
    apiKeyId: null,
    method: 'POST',
    uri: '/v1/admin/workspaces',
    requestId: randomUUID(),
    requestBody: '{"name":"Research"}',
    queryParams: '{}',
    responseStatusCode: 200,
    resourceType: 'workspace',
    action: 'create',
    resourceId: null,
    clientIp: '127.0.0.1',
    ...overrides,
  }
}

function makeCollection(organisationId: string, workspaceId: string, overrides: Partial<CollectionRecord> = {}): CollectionRecord {
  const id = randomUUID()
  return {
    id,
    slug: `collection-${id.slice(0, 6)}`,
    organisationId,
    workspaceId,
    name: 'Collection',
    parentCollectionId: null,
    isDefault: false,
    status: 'active',
    createdAt: at(3_000),
    lastUpdatedAt: at(4_000),
    ...overrides,
  }
}

function makePrompt(collection: CollectionRecord, overrides: Partial<PromptRecord> = {}): PromptRecord {
  const id = randomUUID()
  return {
    id,
    slug: `pp-prompt-${id.slice(0, 6)}`,
    organisationId: collection.organisationId,
    workspaceId: collection.workspaceId,
    collectionId: collection.id,
    name: 'Prompt',
    status: 'active',
    publishedVersion: 1,
    latestVersion: 1,
    createdAt: at(5_000),
    lastUpdatedAt: at(5_000),
    ...overrides,
  }
}

function makePromptVersion(prompt: PromptRecord, version: number, overrides: Partial<PromptVersionRecord> = {}): PromptVersionRecord {
  return {
    id: randomUUID(),
    promptId: prompt.id,
    organisationId: prompt.organisationId,
    workspaceId: prompt.workspaceId,
    version,
    template: `[{"role":"user","content":"Version ${version}: {{question}}"}]`,
    parameters: { temperature: 0.5 },
    model: 'gpt-4o-mini',
    virtualKey: 'vk-main',
    functions: null,
    tools: null,
    toolChoice: null,
    description: null,
    templateMetadata: null,
    isRawTemplate: false,
    labelId: null,
    status: 'active',
    createdAt: at(5_000 + version),
    ...overrides,
  }
}

function makeLabel(organisationId: string, workspaceId: string | null, overrides: Partial<LabelRecord> = {}): LabelRecord {
  const id = randomUUID()
  return {
    id,
    organisationId,
    workspaceId,
    name: `label-${id.slice(0, 6)}`,
    description: null,
    colorCode: null,
    isUniversal: workspaceId === null,
    status: 'active',
    createdAt: at(6_000),
    lastUpdatedAt: at(6_000),
    ...overrides,
  }
}

function makePartial(organisationId: string, workspaceId: string, overrides: Partial<PartialRecord> = {}): PartialRecord {
  const id = randomUUID()
  return {
    id,
    slug: `partial-${id.slice(0, 6)}`,
    organisationId,
    workspaceId,
    collectionId: null,
    name: `partial_${id.slice(0, 6)}`,
    status: 'active',
    publishedVersion: 1,
    latestVersion: 1,
    createdAt: at(7_000),
    lastUpdatedAt: at(7_000),
    ...overrides,
  }
}

function makePartialVersion(partial: PartialRecord, version: number, overrides: Partial<PartialVersionRecord> = {}): PartialVersionRecord {
  return {
    id: randomUUID(),
    partialId: partial.id,
    organisationId: partial.organisationId,
    workspaceId: partial.workspaceId,
    version,
    template: `Partial version ${version} for {{name}}`,
    description: null,
    status: 'active',
    createdAt: at(7_000 + version),
    ...overrides,
  }
}

/** A config at version 1 with that first version (an overridden `config` text goes into both). */
function makeConfig(organisationId: string, workspaceId: string, overrides: Partial<ConfigRecord> = {}): { config: ConfigRecord; first: ConfigVersionRecord } {
  const id = overrides.id ?? randomUUID()
  const text = overrides.config ?? '{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"vk-a"},{"virtual_key":"vk-b"}]}'
  const versionId = randomUUID()
  const config: ConfigRecord = {
    id,
    slug: `pc-config-${id.slice(0, 6)}`,
    organisationId,
    workspaceId,
    name: 'Config',
    config: text,
    version: 1,
    versionId,
    isDefault: false,
    status: 'active',
    ownerId: 'user-1',
    updatedBy: 'user-1',
    createdAt: at(8_000),
    lastUpdatedAt: at(8_000),
    ...overrides,
  }
  const first: ConfigVersionRecord = {
    id: versionId,
    configId: id,
    organisationId,
    workspaceId,
    version: 1,
    config: text,
    createdBy: config.ownerId,
    createdAt: config.createdAt,
  }
  return { config: { ...config, version: 1, versionId, config: text }, first }
}

function makeConfigVersion(config: ConfigRecord, version: number, overrides: Partial<ConfigVersionRecord> = {}): ConfigVersionRecord {
  return {
    id: randomUUID(),
    configId: config.id,
    organisationId: config.organisationId,
    workspaceId: config.workspaceId,
    version,
    config: `{"retry":{"attempts":${version}}}`,
    createdBy: 'key-2',
    createdAt: at(8_000 + version),
    ...overrides,
  }
}

function makeSeed(options: { createdOffsetMs?: number; keyHash?: string } = {}): BootstrapSeed {
  const created = at(options.createdOffsetMs ?? 0)
  const organisation = makeOrganisation({ createdAt: created })
  const owner = makeUser(organisation.id, {
    email: 'owner@acme.test',
    firstName: 'Ada',
    lastName: 'Lovelace',
    role: 'owner',
    createdAt: created,
    lastUpdatedAt: created,
  })
  const workspace = makeWorkspace(organisation.id, {
    name: 'Default',
    description: 'The default workspace',
    createdAt: created,
    lastUpdatedAt: created,
  })
  return {
    organisation,
    owner,
    workspace,
    membership: makeMember(workspace, owner, { role: 'admin', createdAt: created, lastUpdatedAt: created }),
    adminKey: makeApiKey(organisation.id, {
      keyHash: options.keyHash ?? hashOf(randomUUID()),
      maskedKey: 'gw********adm',
      name: 'Admin key',
      description: 'Created at bootstrap',
      type: 'organisation-service',
      userId: owner.id,
      scopes: ['organisation.admin', 'workspaces.read', 'workspaces.write'],
      creationMode: 'auto',
      createdAt: created,
      lastUpdatedAt: created,
    }),
  }
}

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected the promise to reject')
    },
    (caught: unknown) => caught,
  )
}

/** Expects a `GW_ADMIN_CONFLICT`, naming `param` when given. */
async function expectConflict(promise: Promise<unknown>, param?: string): Promise<void> {
  const error = await rejectionOf(promise)
  expect(isGatewayError(error), `expected a GatewayError, got ${String(error)}`).toBe(true)
  expect(error).toMatchObject({ code: 'GW_ADMIN_CONFLICT', status: 409 })
  if (param !== undefined) expect(error).toMatchObject({ param })
}

/** Registers the contract suite for one `AdminStore` implementation. */
export function describeAdminStoreContract(name: string, makeStore: () => Promise<AdminStore>): void {
  describe(`AdminStore contract: ${name}`, () => {
    let store: AdminStore

    beforeEach(async () => {
      store = await makeStore()
    })

    afterEach(async () => {
      await store.close()
    })

    /** Test set-up writes: audited under an organisation of their own, so audit listings stay clean. */
    function arrange<T>(work: (writer: AdminWriter) => Promise<T>): Promise<T> {
      return store.write(makeAudit(randomUUID(), { action: 'arrange' }), work)
    }

    async function bootstrapped(options: { createdOffsetMs?: number } = {}): Promise<BootstrapSeed> {
      const seed = makeSeed(options)
      await store.bootstrap(seed)
      return seed
    }

    async function auditsOf(organisationId: string, filter: AuditFilter = {}): Promise<AuditEntry[]> {
      return [...(await store.listAuditEntries(organisationId, filter, { offset: 0, limit: 100 })).items]
    }

    describe('lifecycle and bootstrap', () => {
      it('reports healthy once started', async () => {
        expect((await store.health()).ok).toBe(true)
      })

      it('has no organisation before bootstrap', async () => {
        expect(await store.findFirstOrganisation()).toBeNull()
        expect(await store.findOrganisation(randomUUID())).toBeNull()
      })

      it('finds every bootstrap record back', async () => {
        const seed = await bootstrapped()
        const organisationId = seed.organisation.id

        expect(await store.findFirstOrganisation()).toEqual(seed.organisation)
        expect(await store.findOrganisation(organisationId)).toEqual(seed.organisation)
        expect(await store.findUser(organisationId, seed.owner.id)).toEqual(seed.owner)
        expect(await store.findWorkspace(organisationId, seed.workspace.id)).toEqual(seed.workspace)
        expect(await store.findMember(seed.workspace.id, seed.owner.id)).toEqual({ member: seed.membership, user: seed.owner })
        expect(await store.listMembershipsOfUser(organisationId, seed.owner.id)).toEqual([seed.membership])
        expect(await store.findApiKeyByHash(seed.adminKey.keyHash)).toEqual(seed.adminKey)
        expect(await store.findApiKey(organisationId, seed.adminKey.id)).toEqual(seed.adminKey)
      })

      it('returns the oldest organisation first', async () => {
        await bootstrapped({ createdOffsetMs: 60_000 })
        const older = await bootstrapped({ createdOffsetMs: -60_000 })
        expect(await store.findFirstOrganisation()).toEqual(older.organisation)
      })

      it('writes nothing from a bootstrap whose API key hash is taken', async () => {
        const first = await bootstrapped()
        // Older than `first`, so a leaked organisation would become the first one.
        const second = makeSeed({ createdOffsetMs: -60_000, keyHash: first.adminKey.keyHash })

        await expectConflict(store.bootstrap(second), 'keyHash')

        expect(await store.findFirstOrganisation()).toEqual(first.organisation)
        expect(await store.findOrganisation(second.organisation.id)).toBeNull()
        expect(await store.findUser(second.organisation.id, second.owner.id)).toBeNull()
        expect(await store.findWorkspace(second.organisation.id, second.workspace.id)).toBeNull()
        expect(await store.findWorkspace(second.organisation.id, second.workspace.slug)).toBeNull()
        expect(await store.findMember(second.workspace.id, second.owner.id)).toBeNull()
        expect(await store.findApiKeyByHash(first.adminKey.keyHash)).toEqual(first.adminKey)
      })

      it('can bootstrap again after a failed bootstrap', async () => {
        const first = await bootstrapped()
        const clash = makeSeed({ keyHash: first.adminKey.keyHash })
        await expectConflict(store.bootstrap(clash))

        const retry: BootstrapSeed = { ...clash, adminKey: { ...clash.adminKey, keyHash: hashOf(randomUUID()) } }
        await store.bootstrap(retry)
        expect(await store.findUser(retry.organisation.id, retry.owner.id)).toEqual(retry.owner)
        expect(await store.findMember(retry.workspace.id, retry.owner.id)).toEqual({ member: retry.membership, user: retry.owner })
        expect(await store.findApiKeyByHash(retry.adminKey.keyHash)).toEqual(retry.adminKey)
      })

      it('keeps concurrent bootstraps apart: the good ones land whole, a conflicting one leaves nothing', async () => {
        const existing = await bootstrapped()
        const good = Array.from({ length: 8 }, () => makeSeed())
        const bad = makeSeed({ keyHash: existing.adminKey.keyHash })
        const results = await Promise.allSettled([...good, bad].map((seed) => store.bootstrap(seed)))

        expect(results.slice(0, good.length).every((result) => result.status === 'fulfilled')).toBe(true)
        expect(results[good.length]).toMatchObject({ status: 'rejected', reason: { code: 'GW_ADMIN_CONFLICT' } })
        for (const seed of good) {
          expect(await store.findUser(seed.organisation.id, seed.owner.id)).toEqual(seed.owner)
          expect(await store.findWorkspace(seed.organisation.id, seed.workspace.slug)).toEqual(seed.workspace)
          expect(await store.findApiKeyByHash(seed.adminKey.keyHash)).toEqual(seed.adminKey)
        }
        expect(await store.findUser(bad.organisation.id, bad.owner.id)).toBeNull()
        expect(await store.findWorkspace(bad.organisation.id, bad.workspace.id)).toBeNull()
        expect(await store.findMember(bad.workspace.id, bad.owner.id)).toBeNull()
      })
    })

    describe('round trips', () => {
      it('keeps organisation JWT settings exactly: static JWKS, JWKS URL, issuer and audiences, and none', async () => {
        const seed = await bootstrapped()
        const withJwks: OrganisationRecord = {
          ...seed.organisation,
          name: 'Acme Renamed',
          jwt: {
            jwksUrl: null,
            jwks: {
              keys: [
                { kty: 'RSA', kid: 'key-1', use: 'sig', alg: 'RS256', n: 'sXch', e: 'AQAB' },
                { kty: 'RSA', kid: 'key-2', key_ops: ['verify'], n: 'xYz', e: 'AQAB', ext: true },
              ],
            },
            issuer: 'https://idp.example.test/',
            audience: ['gateway', 'api://Ünïcödé'],
            updatedAt: at(60_000),
          },
        }
        await arrange((writer) => writer.updateOrganisation(withJwks))
        expect(await store.findOrganisation(seed.organisation.id)).toEqual(withJwks)

        const withUrl: OrganisationRecord = {
          ...withJwks,
          jwt: { jwksUrl: 'https://idp.example.test/.well-known/jwks.json', jwks: null, issuer: 'idp', audience: null, updatedAt: at(120_000) },
        }
        await arrange((writer) => writer.updateOrganisation(withUrl))
        expect(await store.findOrganisation(seed.organisation.id)).toEqual(withUrl)

        // Clearing the issuer and audience stores them as not set (null), not as left over.
        const plain: OrganisationRecord = { ...withUrl, jwt: { ...(withUrl.jwt as JwtSettings), issuer: null, audience: null, updatedAt: at(150_000) } }
        await arrange((writer) => writer.updateOrganisation(plain))
        expect(await store.findOrganisation(seed.organisation.id)).toEqual(plain)

        const without: OrganisationRecord = { ...withUrl, jwt: null }
        await arrange((writer) => writer.updateOrganisation(without))
        expect(await store.findOrganisation(seed.organisation.id)).toEqual(without)
        expect(await store.findFirstOrganisation()).toEqual(without)
      })

      it('keeps users exactly, with and without a password hash', async () => {
        const seed = await bootstrapped()
        const plain = makeUser(seed.organisation.id, { firstName: 'Ünïcödé', lastName: "O'Brien" })
        const withPassword = makeUser(seed.organisation.id, {
          role: 'admin',
          passwordHash: 'scrypt$16384$8$1$c2FsdA$aGFzaA',
          createdAt: at(700),
          lastUpdatedAt: at(900),
        })
        await arrange(async (writer) => {
          await writer.insertUser(plain)
          await writer.insertUser(withPassword)
        })
        expect(await store.findUser(seed.organisation.id, plain.id)).toEqual(plain)
        expect(await store.findUser(seed.organisation.id, withPassword.id)).toEqual(withPassword)
      })

      it('keeps workspaces exactly: defaults, usage limits and rate limits, set and empty', async () => {
        const seed = await bootstrapped()
        const full = makeWorkspace(seed.organisation.id, {
          name: 'Research',
          description: 'R&D "lab"',
          defaults: { metadata: { team: 'research', _user: 'ada', 'with space': 'ü' }, configId: 'cfg-main' },
          usageLimits: [
            { type: 'cost', creditLimit: 125.5, alertThreshold: 100, periodicReset: 'monthly', periodicResetDays: null },
            { type: 'tokens', creditLimit: 1_000_000, alertThreshold: null, periodicReset: null, periodicResetDays: 14 },
          ],
          rateLimits: [
            { type: 'requests', unit: 'rpm', value: 600 },
            { type: 'tokens', unit: 'rpd', value: 2_000_000 },
          ],
        })
        const sparse = makeWorkspace(seed.organisation.id, { defaults: { metadata: null, configId: null } })
        const bare = makeWorkspace(seed.organisation.id, { defaults: { metadata: {}, configId: null } })
        await arrange(async (writer) => {
          for (const workspace of [full, sparse, bare]) await writer.insertWorkspace(workspace)
        })
        for (const workspace of [full, sparse, bare]) {
          expect(await store.findWorkspace(seed.organisation.id, workspace.id)).toEqual(workspace)
        }
      })

      it('keeps API keys exactly, every optional field set and every one unset', async () => {
        const seed = await bootstrapped()
        const full = makeApiKey(seed.organisation.id, {
          type: 'workspace-user',
          workspaceId: seed.workspace.id,
          userId: seed.owner.id,
          description: 'A user key',
          status: 'exhausted',
          expiresAt: at(30 * DAY_MS),
          creationMode: 'ui',
          rateLimits: [
            { type: 'requests', unit: 'rps', value: 5 },
            { type: 'requests', unit: 'rpw', value: 10_000 },
          ],
          usageLimits: { type: 'cost', creditLimit: 20, alertThreshold: 15.25, periodicReset: 'weekly', periodicResetDays: null },
          defaults: { metadata: { env: 'prod' }, configId: 'pc-abc' },
          alertEmails: ['ops@acme.test', 'finance@acme.test'],
          previousKeyHash: hashOf('old secret'),
          previousKeyExpiresAt: at(DAY_MS),
          lastRotatedAt: at(DAY_MS / 2),
        })
        const bare = makeApiKey(seed.organisation.id)
        await arrange(async (writer) => {
          await writer.insertApiKey(full)
          await writer.insertApiKey(bare)
        })
        expect(await store.findApiKeyByHash(full.keyHash)).toEqual(full)
        expect(await store.findApiKey(seed.organisation.id, full.id)).toEqual(full)
        expect(await store.findApiKey(seed.organisation.id, bare.id)).toEqual(bare)
      })

      it('round-trips string lists exactly: order, duplicates, empty lists and unusual characters', async () => {
        const seed = await bootstrapped()
        const lists: string[][] = [
          [],
          ['z.last', 'a.first', 'm.middle'],
          ['same', 'same'],
          ['with space', 'comma,inside', 'quote"s', "apostrophe's", '[brackets]', '{braces}', 'ünïcödé ✓', ''],
        ]
        const keys = lists.map((list) => makeApiKey(seed.organisation.id, { scopes: list, alertEmails: [...list].reverse() }))
        await arrange(async (writer) => {
          for (const key of keys) await writer.insertApiKey(key)
        })
        for (const key of keys) {
          const found = await store.findApiKeyByHash(key.keyHash)
          expect(found?.scopes).toEqual(key.scopes)
          expect(found?.alertEmails).toEqual(key.alertEmails)
        }
      })

      it('keeps invites exactly: workspaces, key scopes unset, empty or listed, acceptance', async () => {
        const seed = await bootstrapped()
        const other = makeWorkspace(seed.organisation.id)
        const invites = [
          makeInvite(seed.organisation.id),
          makeInvite(seed.organisation.id, {
            email: 'second@acme.test',
            role: 'admin',
            workspaces: [
              { workspaceId: seed.workspace.id, role: 'manager' },
              { workspaceId: other.id, role: 'member' },
            ],
            apiKeyScopes: ['completions.write', 'logs.read'],
            invitedBy: seed.owner.id,
          }),
          makeInvite(seed.organisation.id, {
            email: 'third@acme.test',
            apiKeyScopes: [],
            state: 'accepted',
            acceptedAt: at(6_000),
            lastUpdatedAt: at(6_000),
          }),
        ]
        await arrange(async (writer) => {
          await writer.insertWorkspace(other)
          for (const invite of invites) await writer.insertInvite(invite)
        })
        for (const invite of invites) {
          expect(await store.findInvite(seed.organisation.id, invite.id)).toEqual(invite)
          expect(await store.findInviteByTokenHash(invite.tokenHash)).toEqual(invite)
        }
      })

      it('keeps audit entries exactly, with every optional field set and unset', async () => {
        const seed = await bootstrapped()
        const full = makeAudit(seed.organisation.id, {
          workspaceId: seed.workspace.id,
          userId: seed.owner.id,
          userType: 'user',
          apiKeyId: seed.adminKey.id,
          method: 'PUT',
          uri: '/v1/admin/workspaces/ws-1?force=true',
          requestBody: '{"name":"x","api_key":"gw********abc"}',
          queryParams: '{"force":"true"}',
          responseStatusCode: 409,
          action: 'update',
          resourceId: seed.workspace.slug,
          clientIp: '2001:db8::1',
        })
        const bare = makeAudit(seed.organisation.id, {
          timestamp: at(20_000),
          requestBody: null,
          resourceId: null,
          clientIp: null,
          method: 'DELETE',
        })
        await store.recordAudit(full)
        await store.recordAudit(bare)
        expect(await auditsOf(seed.organisation.id)).toEqual([bare, full])
      })
    })

    describe('uniqueness', () => {
      it('rejects an API key whose hash is taken, naming keyHash', async () => {
        const seed = await bootstrapped()
        await expectConflict(arrange((writer) => writer.insertApiKey(makeApiKey(seed.organisation.id, { keyHash: seed.adminKey.keyHash }))), 'keyHash')
        expect(await store.findApiKeyByHash(seed.adminKey.keyHash)).toEqual(seed.adminKey)
      })

      it('rejects a duplicate workspace slug in the same organisation, allows it in another', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        const duplicate = makeWorkspace(first.organisation.id, { slug: first.workspace.slug })
        await expectConflict(arrange((writer) => writer.insertWorkspace(duplicate)), 'slug')
        expect(await store.findWorkspace(first.organisation.id, duplicate.id)).toBeNull()
        expect(await store.findWorkspace(first.organisation.id, first.workspace.slug)).toEqual(first.workspace)

        const sameSlug = makeWorkspace(second.organisation.id, { slug: first.workspace.slug })
        await arrange((writer) => writer.insertWorkspace(sameSlug))
        expect(await store.findWorkspace(second.organisation.id, first.workspace.slug)).toEqual(sameSlug)
        expect(await store.findWorkspace(first.organisation.id, first.workspace.slug)).toEqual(first.workspace)
      })

      it('rejects a duplicate user email in the same organisation, allows it in another', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        expect(second.owner.email).toBe(first.owner.email)
        await expectConflict(arrange((writer) => writer.insertUser(makeUser(first.organisation.id, { email: first.owner.email }))), 'email')
        expect(await store.findUser(second.organisation.id, second.owner.id)).toEqual(second.owner)
        expect((await store.listUsers(first.organisation.id, {}, { offset: 0, limit: 10 })).total).toBe(1)
      })

      it('rejects a second membership of the same user in a workspace, naming userId', async () => {
        const seed = await bootstrapped()
        await expectConflict(
          arrange((writer) => writer.insertMember(makeMember(seed.workspace, seed.owner, { role: 'member', createdAt: at(9_000) }))),
          'userId',
        )
        expect(await store.findMember(seed.workspace.id, seed.owner.id)).toEqual({ member: seed.membership, user: seed.owner })
      })

      it('rejects an invite whose token hash is taken, naming tokenHash', async () => {
        const seed = await bootstrapped()
        const invite = makeInvite(seed.organisation.id)
        await arrange((writer) => writer.insertInvite(invite))
        await expectConflict(arrange((writer) => writer.insertInvite(makeInvite(seed.organisation.id, { tokenHash: invite.tokenHash }))), 'tokenHash')
        expect(await store.findInviteByTokenHash(invite.tokenHash)).toEqual(invite)
      })

      it('names the field of a clash with a row written earlier in the same write', async () => {
        const seed = await bootstrapped()
        const first = makeWorkspace(seed.organisation.id, { slug: 'twice' })
        await expectConflict(
          arrange(async (writer) => {
            await writer.insertWorkspace(first)
            await writer.insertWorkspace(makeWorkspace(seed.organisation.id, { slug: 'twice' }))
          }),
          'slug',
        )
        const user = makeUser(seed.organisation.id)
        await expectConflict(
          arrange(async (writer) => {
            await writer.insertUser(user)
            await writer.insertMember(makeMember(seed.workspace, user))
            await writer.insertMember(makeMember(seed.workspace, user, { role: 'manager' }))
          }),
          'userId',
        )
        expect(await store.findWorkspace(seed.organisation.id, 'twice')).toBeNull()
        expect(await store.findUser(seed.organisation.id, user.id)).toBeNull()
      })

      it('rejects an update that takes another record’s unique value', async () => {
        const seed = await bootstrapped()
        const user = makeUser(seed.organisation.id)
        const key = makeApiKey(seed.organisation.id)
        const workspace = makeWorkspace(seed.organisation.id)
        await arrange(async (writer) => {
          await writer.insertUser(user)
          await writer.insertApiKey(key)
          await writer.insertWorkspace(workspace)
        })
        await expectConflict(
          arrange((writer) => writer.updateUser({ ...user, email: seed.owner.email, lastUpdatedAt: at(9_000) }, user.lastUpdatedAt)),
          'email',
        )
        await expectConflict(
          arrange((writer) => writer.updateApiKey({ ...key, keyHash: seed.adminKey.keyHash, lastUpdatedAt: at(9_000) }, key.lastUpdatedAt)),
          'keyHash',
        )
        await expectConflict(
          arrange((writer) =>
            writer.updateWorkspace({ ...workspace, slug: seed.workspace.slug, lastUpdatedAt: at(9_000) }, workspace.lastUpdatedAt),
          ),
          'slug',
        )
        expect(await store.findUser(seed.organisation.id, user.id)).toEqual(user)
        expect(await store.findApiKey(seed.organisation.id, key.id)).toEqual(key)
        expect(await store.findWorkspace(seed.organisation.id, workspace.id)).toEqual(workspace)
      })

      it('lets exactly one of several concurrent inserts of the same slug win', async () => {
        const seed = await bootstrapped()
        const contenders = Array.from({ length: 5 }, () => makeWorkspace(seed.organisation.id, { slug: 'contested' }))
        const results = await Promise.allSettled(contenders.map((workspace) => arrange((writer) => writer.insertWorkspace(workspace))))
        expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(1)
        for (const result of results) {
          if (result.status === 'rejected') expect(result.reason).toMatchObject({ code: 'GW_ADMIN_CONFLICT', param: 'slug' })
        }
        const winner = await store.findWorkspace(seed.organisation.id, 'contested')
        expect(contenders).toContainEqual(winner)
      })
    })

    describe('finding records', () => {
      it('finds a workspace by id and by slug, only within its organisation', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        const workspace = makeWorkspace(first.organisation.id, { name: 'Research', description: 'R&D' })
        await arrange((writer) => writer.insertWorkspace(workspace))

        expect(await store.findWorkspace(first.organisation.id, workspace.id)).toEqual(workspace)
        expect(await store.findWorkspace(first.organisation.id, workspace.slug)).toEqual(workspace)
        expect(await store.findWorkspace(second.organisation.id, workspace.id)).toBeNull()
        expect(await store.findWorkspace(second.organisation.id, workspace.slug)).toBeNull()
        expect(await store.findWorkspace(first.organisation.id, 'ws-unknown')).toBeNull()
        expect(await store.findWorkspace(first.organisation.id, randomUUID())).toBeNull()
      })

      it('prefers an id match over a slug match', async () => {
        const seed = await bootstrapped()
        const target = makeWorkspace(seed.organisation.id)
        const impostor = makeWorkspace(seed.organisation.id, { slug: target.id })
        await arrange(async (writer) => {
          await writer.insertWorkspace(impostor)
          await writer.insertWorkspace(target)
        })
        expect(await store.findWorkspace(seed.organisation.id, target.id)).toEqual(target)
      })

      it('finds a user by id and by email, only within its organisation', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        expect(await store.findUser(first.organisation.id, first.owner.id)).toEqual(first.owner)
        expect(await store.findUser(second.organisation.id, first.owner.id)).toBeNull()
        expect(await store.findUser(first.organisation.id, randomUUID())).toBeNull()
        expect(await store.findUserByEmail(first.organisation.id, 'owner@acme.test')).toEqual(first.owner)
        expect(await store.findUserByEmail(second.organisation.id, 'owner@acme.test')).toEqual(second.owner)
        expect(await store.findUserByEmail(first.organisation.id, 'nobody@acme.test')).toBeNull()
      })

      it('matches emails exactly in their stored lower-case form', async () => {
        const seed = await bootstrapped()
        const user = makeUser(seed.organisation.id, { email: 'mixed.case@acme.test' })
        const member = makeMember(seed.workspace, user)
        const invite = makeInvite(seed.organisation.id, { email: 'mixed.case@acme.test' })
        await arrange(async (writer) => {
          await writer.insertUser(user)
          await writer.insertMember(member)
          await writer.insertInvite(invite)
        })
        const everything = { offset: 0, limit: 10 }
        expect(await store.findUserByEmail(seed.organisation.id, 'mixed.case@acme.test')).toEqual(user)
        expect((await store.listUsers(seed.organisation.id, { email: 'mixed.case@acme.test' }, everything)).items).toEqual([user])
        expect((await store.listMembers(seed.workspace.id, { email: 'mixed.case@acme.test' }, everything)).items).toEqual([{ member, user }])
        expect((await store.listInvites(seed.organisation.id, { email: 'mixed.case@acme.test' }, everything, at(0))).items).toEqual([invite])
        expect((await store.listUsers(seed.organisation.id, { email: 'mixed.case' }, everything)).total).toBe(0)
      })

      it('finds API keys by id within the organisation, and by current or rotated-out hash', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        const previousHash = hashOf('rotated out')
        const rotated = makeApiKey(first.organisation.id, { previousKeyHash: previousHash, previousKeyExpiresAt: at(DAY_MS) })
        await arrange((writer) => writer.insertApiKey(rotated))

        expect(await store.findApiKey(first.organisation.id, rotated.id)).toEqual(rotated)
        expect(await store.findApiKey(second.organisation.id, rotated.id)).toBeNull()
        expect(await store.findApiKey(first.organisation.id, randomUUID())).toBeNull()
        expect(await store.findApiKeyByHash(rotated.keyHash)).toEqual(rotated)
        expect(await store.findApiKeyByHash(previousHash)).toEqual(rotated)
        expect(await store.findApiKeyByHash(hashOf('no such secret'))).toBeNull()
      })

      it('finds invites by id within the organisation, and by token hash', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        const invite = makeInvite(first.organisation.id)
        await arrange((writer) => writer.insertInvite(invite))
        expect(await store.findInvite(first.organisation.id, invite.id)).toEqual(invite)
        expect(await store.findInvite(second.organisation.id, invite.id)).toBeNull()
        expect(await store.findInviteByTokenHash(invite.tokenHash)).toEqual(invite)
        expect(await store.findInviteByTokenHash(hashOf('unknown token'))).toBeNull()
      })

      it('finds a membership with its user, and nothing for a non-member', async () => {
        const seed = await bootstrapped()
        const user = makeUser(seed.organisation.id)
        await arrange((writer) => writer.insertUser(user))
        expect(await store.findMember(seed.workspace.id, user.id)).toBeNull()
        const member = makeMember(seed.workspace, user, { role: 'manager' })
        await arrange((writer) => writer.insertMember(member))
        expect(await store.findMember(seed.workspace.id, user.id)).toEqual({ member, user })
        expect(await store.findMember(randomUUID(), user.id)).toBeNull()
      })
    })

    describe('listings', () => {
      it('lists users in creation order with filters, paging and a total across pages', async () => {
        const seed = await bootstrapped({ createdOffsetMs: -DAY_MS })
        const other = await bootstrapped()
        const users = [
          makeUser(seed.organisation.id, { role: 'admin', createdAt: at(3_000) }),
          makeUser(seed.organisation.id, { createdAt: at(1_000) }),
          makeUser(seed.organisation.id, { createdAt: at(2_000) }),
          makeUser(seed.organisation.id, { role: 'admin', createdAt: at(2_000) }),
          makeUser(seed.organisation.id, { createdAt: at(2_000) }),
        ]
        await arrange(async (writer) => {
          for (const user of users) await writer.insertUser(user)
          await writer.insertUser(makeUser(other.organisation.id))
        })
        const all = byCreation([seed.owner, ...users])

        const firstPage = await store.listUsers(seed.organisation.id, {}, { offset: 0, limit: 4 })
        expect(firstPage).toEqual({ total: 6, items: all.slice(0, 4) })
        const secondPage = await store.listUsers(seed.organisation.id, {}, { offset: 4, limit: 4 })
        expect(secondPage).toEqual({ total: 6, items: all.slice(4) })
        expect(await store.listUsers(seed.organisation.id, {}, { offset: 10, limit: 4 })).toEqual({ total: 6, items: [] })

        const admins = all.filter((user) => user.role === 'admin')
        expect(await store.listUsers(seed.organisation.id, { role: 'admin' }, { offset: 0, limit: 10 })).toEqual({ total: 2, items: admins })
        expect(await store.listUsers(seed.organisation.id, { role: 'admin' }, { offset: 1, limit: 1 })).toEqual({
          total: 2,
          items: admins.slice(1),
        })
        expect(await store.listUsers(seed.organisation.id, { role: 'owner', email: seed.owner.email }, { offset: 0, limit: 10 })).toEqual({
          total: 1,
          items: [seed.owner],
        })
        expect(await store.listUsers(seed.organisation.id, { role: 'member', email: seed.owner.email }, { offset: 0, limit: 10 })).toEqual({
          total: 0,
          items: [],
        })
        expect((await store.listUsers(randomUUID(), {}, { offset: 0, limit: 10 })).total).toBe(0)
      })

      it('lists workspaces in creation order by name substring, exact name and ids', async () => {
        const seed = await bootstrapped({ createdOffsetMs: -DAY_MS })
        const other = await bootstrapped()
        const workspaces = [
          makeWorkspace(seed.organisation.id, { name: 'Research Lab', createdAt: at(4_000) }),
          makeWorkspace(seed.organisation.id, { name: 'research', createdAt: at(1_000) }),
          makeWorkspace(seed.organisation.id, { name: 'Research', createdAt: at(2_000) }),
          makeWorkspace(seed.organisation.id, { name: 'Sales', createdAt: at(2_000) }),
        ]
        await arrange(async (writer) => {
          for (const workspace of workspaces) await writer.insertWorkspace(workspace)
          await writer.insertWorkspace(makeWorkspace(other.organisation.id, { name: 'Research' }))
        })
        const all = byCreation([seed.workspace, ...workspaces])
        const everything = { offset: 0, limit: 10 }

        expect(await store.listWorkspaces(seed.organisation.id, {}, everything)).toEqual({ total: 5, items: all })
        expect(await store.listWorkspaces(seed.organisation.id, {}, { offset: 1, limit: 2 })).toEqual({ total: 5, items: all.slice(1, 3) })

        const containing = all.filter((workspace) => workspace.name.includes('Research'))
        expect(await store.listWorkspaces(seed.organisation.id, { name: 'Research' }, everything)).toEqual({ total: 2, items: containing })
        expect(await store.listWorkspaces(seed.organisation.id, { name: 'earch' }, everything)).toEqual({
          total: 3,
          items: all.filter((workspace) => workspace.name.includes('earch')),
        })
        expect(await store.listWorkspaces(seed.organisation.id, { name: '%' }, everything)).toEqual({ total: 0, items: [] })
        expect(await store.listWorkspaces(seed.organisation.id, { exactName: 'Research' }, everything)).toEqual({
          total: 1,
          items: [workspaces[2]],
        })

        const chosen = [workspaces[0], workspaces[3]].map((workspace) => workspace?.id ?? '')
        expect(await store.listWorkspaces(seed.organisation.id, { ids: chosen }, everything)).toEqual({
          total: 2,
          items: all.filter((workspace) => chosen.includes(workspace.id)),
        })
        expect(await store.listWorkspaces(seed.organisation.id, { ids: [] }, everything)).toEqual({ total: 0, items: [] })
        expect(await store.listWorkspaces(other.organisation.id, { ids: chosen }, everything)).toEqual({ total: 0, items: [] })
        expect(await store.listWorkspaces(seed.organisation.id, { ids: chosen, name: 'Sales' }, everything)).toEqual({
          total: 1,
          items: [workspaces[3]],
        })
      })

      it('lists members with their users in membership order, by role and email', async () => {
        const seed = await bootstrapped()
        const users = Array.from({ length: 4 }, () => makeUser(seed.organisation.id))
        const [u0, u1, u2, u3] = users as [UserRecord, UserRecord, UserRecord, UserRecord]
        const members = [
          makeMember(seed.workspace, u0, { role: 'manager', createdAt: at(9_000) }),
          makeMember(seed.workspace, u1, { createdAt: at(7_000) }),
          makeMember(seed.workspace, u2, { createdAt: at(7_000) }),
          makeMember(seed.workspace, u3, { role: 'manager', createdAt: at(8_000) }),
        ]
        const elsewhere = makeWorkspace(seed.organisation.id)
        await arrange(async (writer) => {
          for (const user of users) await writer.insertUser(user)
          for (const member of members) await writer.insertMember(member)
          await writer.insertWorkspace(elsewhere)
          await writer.insertMember(makeMember(elsewhere, u0))
        })
        const userOf = new Map([seed.owner, ...users].map((user) => [user.id, user]))
        const all = [seed.membership, ...members]
          .sort((a, b) => compareText(a.createdAt, b.createdAt) || compareText(a.userId, b.userId))
          .map((member) => ({ member, user: userOf.get(member.userId) }))

        expect(await store.listMembers(seed.workspace.id, {}, { offset: 0, limit: 10 })).toEqual({ total: 5, items: all })
        expect(await store.listMembers(seed.workspace.id, {}, { offset: 2, limit: 2 })).toEqual({ total: 5, items: all.slice(2, 4) })
        expect(await store.listMembers(seed.workspace.id, { role: 'manager' }, { offset: 0, limit: 10 })).toEqual({
          total: 2,
          items: all.filter((entry) => entry.member.role === 'manager'),
        })
        expect(await store.listMembers(seed.workspace.id, { email: u2.email }, { offset: 0, limit: 10 })).toEqual({
          total: 1,
          items: [{ member: members[2], user: u2 }],
        })
        expect(await store.listMembers(seed.workspace.id, { email: u2.email, role: 'admin' }, { offset: 0, limit: 10 })).toEqual({
          total: 0,
          items: [],
        })
        expect(await store.listMembers(elsewhere.id, {}, { offset: 0, limit: 10 })).toMatchObject({ total: 1 })
      })

      it('lists the memberships of a user in workspace creation order', async () => {
        const seed = await bootstrapped()
        const user = makeUser(seed.organisation.id)
        const late = makeWorkspace(seed.organisation.id, { createdAt: at(50_000) })
        const early = makeWorkspace(seed.organisation.id, { createdAt: at(-50_000) })
        const memberships = [
          makeMember(late, user, { createdAt: at(60_000) }),
          makeMember(seed.workspace, user, { createdAt: at(70_000), role: 'manager' }),
          makeMember(early, user, { createdAt: at(80_000) }),
        ]
        await arrange(async (writer) => {
          await writer.insertUser(user)
          await writer.insertWorkspace(late)
          await writer.insertWorkspace(early)
          for (const member of memberships) await writer.insertMember(member)
        })
        expect(await store.listMembershipsOfUser(seed.organisation.id, user.id)).toEqual([memberships[2], memberships[1], memberships[0]])
        expect(await store.listMembershipsOfUser(randomUUID(), user.id)).toEqual([])
      })

      it('lists invites newest first, with status derived from the given time', async () => {
        const seed = await bootstrapped()
        const now = at(10 * DAY_MS)
        const pending = makeInvite(seed.organisation.id, { email: 'a@acme.test', createdAt: at(5 * DAY_MS), expiresAt: at(12 * DAY_MS) })
        const expired = makeInvite(seed.organisation.id, { email: 'b@acme.test', createdAt: at(1 * DAY_MS), expiresAt: at(8 * DAY_MS) })
        const expiringNow = makeInvite(seed.organisation.id, { email: 'c@acme.test', createdAt: at(3 * DAY_MS), expiresAt: now })
        const accepted = makeInvite(seed.organisation.id, {
          email: 'd@acme.test',
          role: 'admin',
          state: 'accepted',
          createdAt: at(2 * DAY_MS),
          expiresAt: at(9 * DAY_MS),
          acceptedAt: at(2 * DAY_MS + 1),
        })
        const cancelled = makeInvite(seed.organisation.id, {
          email: 'e@acme.test',
          state: 'cancelled',
          createdAt: at(4 * DAY_MS),
          expiresAt: at(11 * DAY_MS),
        })
        const invites = [pending, expired, expiringNow, accepted, cancelled]
        await arrange(async (writer) => {
          for (const invite of invites) await writer.insertInvite(invite)
          await writer.insertInvite(makeInvite(randomUUID()))
        })
        const newestFirst = [...invites].sort((a, b) => compareText(b.createdAt, a.createdAt))
        const everything = { offset: 0, limit: 10 }

        expect(await store.listInvites(seed.organisation.id, {}, everything, now)).toEqual({ total: 5, items: newestFirst })
        expect(await store.listInvites(seed.organisation.id, {}, { offset: 1, limit: 2 }, now)).toEqual({
          total: 5,
          items: newestFirst.slice(1, 3),
        })
        expect(await store.listInvites(seed.organisation.id, { status: 'pending' }, everything, now)).toEqual({ total: 1, items: [pending] })
        expect(await store.listInvites(seed.organisation.id, { status: 'expired' }, everything, now)).toEqual({
          total: 2,
          items: [expiringNow, expired],
        })
        expect(await store.listInvites(seed.organisation.id, { status: 'accepted' }, everything, now)).toEqual({ total: 1, items: [accepted] })
        expect(await store.listInvites(seed.organisation.id, { status: 'cancelled' }, everything, now)).toEqual({ total: 1, items: [cancelled] })
        // An earlier `now`: every pending invite is still pending.
        expect(await store.listInvites(seed.organisation.id, { status: 'pending' }, everything, at(0))).toMatchObject({ total: 3 })
        expect(await store.listInvites(seed.organisation.id, { role: 'admin' }, everything, now)).toEqual({ total: 1, items: [accepted] })
        expect(await store.listInvites(seed.organisation.id, { email: 'b@acme.test', status: 'expired' }, everything, now)).toEqual({
          total: 1,
          items: [expired],
        })
        expect(await store.listInvites(seed.organisation.id, { email: 'b@acme.test', status: 'pending' }, everything, now)).toEqual({
          total: 0,
          items: [],
        })
      })

      it('lists API keys in creation order by workspace and types', async () => {
        const seed = await bootstrapped({ createdOffsetMs: -DAY_MS })
        const other = makeWorkspace(seed.organisation.id)
        const keys = [
          makeApiKey(seed.organisation.id, { workspaceId: seed.workspace.id, createdAt: at(2_000) }),
          makeApiKey(seed.organisation.id, { workspaceId: other.id, createdAt: at(1_000) }),
          makeApiKey(seed.organisation.id, {
            type: 'workspace-user',
            workspaceId: seed.workspace.id,
            userId: seed.owner.id,
            createdAt: at(2_000),
          }),
          makeApiKey(seed.organisation.id, { workspaceId: seed.workspace.id, createdAt: at(2_000) }),
        ]
        await arrange(async (writer) => {
          await writer.insertWorkspace(other)
          for (const key of keys) await writer.insertApiKey(key)
          await writer.insertApiKey(makeApiKey(randomUUID(), { workspaceId: seed.workspace.id }))
        })
        const all = byCreation([seed.adminKey, ...keys])
        const everything = { offset: 0, limit: 10 }

        expect(await store.listApiKeys(seed.organisation.id, {}, everything)).toEqual({ total: 5, items: all })
        expect(await store.listApiKeys(seed.organisation.id, {}, { offset: 3, limit: 10 })).toEqual({ total: 5, items: all.slice(3) })
        const inDefault = all.filter((key) => key.workspaceId === seed.workspace.id)
        expect(await store.listApiKeys(seed.organisation.id, { workspaceId: seed.workspace.id }, everything)).toEqual({
          total: 3,
          items: inDefault,
        })
        expect(await store.listApiKeys(seed.organisation.id, { types: ['organisation-service'] }, everything)).toEqual({
          total: 1,
          items: [seed.adminKey],
        })
        expect(await store.listApiKeys(seed.organisation.id, { types: ['workspace-service', 'workspace-user'] }, everything)).toEqual({
          total: 4,
          items: all.filter((key) => key.type !== 'organisation-service'),
        })
        expect(await store.listApiKeys(seed.organisation.id, { types: [] }, everything)).toEqual({ total: 0, items: [] })
        expect(
          await store.listApiKeys(seed.organisation.id, { workspaceId: seed.workspace.id, types: ['workspace-user'] }, { offset: 0, limit: 1 }),
        ).toEqual({ total: 1, items: [keys[2]] })
      })

      it('lists audit entries newest first with every filter, within the organisation', async () => {
        const seed = await bootstrapped()
        const organisationId = seed.organisation.id
        const entries = [
          makeAudit(organisationId, { timestamp: at(1_000), method: 'POST', uri: '/v1/admin/workspaces', action: 'create' }),
          makeAudit(organisationId, {
            timestamp: at(2_000),
            method: 'PUT',
            uri: '/v1/admin/workspaces/ws-1?force=true',
            action: 'update',
            workspaceId: seed.workspace.id,
            userId: seed.owner.id,
            userType: 'user',
            apiKeyId: seed.adminKey.id,
            responseStatusCode: 409,
            clientIp: '10.0.0.7',
          }),
          makeAudit(organisationId, {
            timestamp: at(3_000),
            method: 'DELETE',
            uri: '/v1/admin/workspaces/ws-1',
            action: 'delete',
            resourceType: 'workspace',
            workspaceId: seed.workspace.id,
          }),
          makeAudit(organisationId, {
            timestamp: at(4_000),
            method: 'POST',
            uri: '/v1/admin/users/invites',
            resourceType: 'invite',
            action: 'create',
            responseStatusCode: 201,
            userId: seed.adminKey.id,
            apiKeyId: seed.adminKey.id,
          }),
        ]
        for (const entry of entries) await store.recordAudit(entry)
        await store.recordAudit(makeAudit(randomUUID(), { timestamp: at(2_500) }))
        await store.recordAudit(makeAudit(null, { timestamp: at(2_600) }))
        const [e0, e1, e2, e3] = entries as [AuditEntry, AuditEntry, AuditEntry, AuditEntry]

        expect(await store.listAuditEntries(organisationId, {}, { offset: 0, limit: 10 })).toEqual({ total: 4, items: [e3, e2, e1, e0] })
        expect(await store.listAuditEntries(organisationId, {}, { offset: 1, limit: 2 })).toEqual({ total: 4, items: [e2, e1] })

        const cases: Array<[AuditFilter, AuditEntry[]]> = [
          [{ startTime: at(2_000) }, [e3, e2, e1]],
          [{ endTime: at(2_000) }, [e1, e0]],
          [{ startTime: at(2_000), endTime: at(3_000) }, [e2, e1]],
          [{ method: 'POST' }, [e3, e0]],
          [{ uri: '/v1/admin/workspaces/ws-1' }, [e2, e1]],
          [{ uri: '/v1/admin/workspaces' }, [e0]],
          [{ uri: '/v1/admin/workspaces*' }, [e2, e1, e0]],
          [{ uri: '/v1/admin/users/*' }, [e3]],
          [{ requestId: e2.requestId }, [e2]],
          [{ userId: seed.owner.id }, [e1]],
          [{ userType: 'user' }, [e1]],
          [{ userType: 'api_key' }, [e3, e2, e0]],
          [{ apiKeyId: seed.adminKey.id }, [e3, e1]],
          [{ apiKeyId: randomUUID() }, []],
          [{ workspaceId: seed.workspace.id }, [e2, e1]],
          [{ resourceType: 'invite' }, [e3]],
          [{ action: 'create' }, [e3, e0]],
          [{ responseStatusCode: 409 }, [e1]],
          [{ clientIp: '10.0.0.7' }, [e1]],
          [{ method: 'POST', resourceType: 'workspace' }, [e0]],
          [{ method: 'GET' }, []],
        ]
        for (const [filter, expected] of cases) {
          const page = await store.listAuditEntries(organisationId, filter, { offset: 0, limit: 10 })
          expect(page, JSON.stringify(filter)).toEqual({ total: expected.length, items: expected })
        }
      })
    })

    describe('optimistic updates', () => {
      it('updates a user only at the version read', async () => {
        const seed = await bootstrapped()
        const renamed: UserRecord = { ...seed.owner, firstName: 'Augusta', passwordHash: 'scrypt$1$2$3$s$h', lastUpdatedAt: at(50_000) }
        expect(await arrange((writer) => writer.updateUser(renamed, seed.owner.lastUpdatedAt))).toBe(true)
        expect(await store.findUser(seed.organisation.id, seed.owner.id)).toEqual(renamed)

        const stale: UserRecord = { ...seed.owner, lastName: 'Stale', lastUpdatedAt: at(60_000) }
        expect(await arrange((writer) => writer.updateUser(stale, seed.owner.lastUpdatedAt))).toBe(false)
        expect(await store.findUser(seed.organisation.id, seed.owner.id)).toEqual(renamed)

        const elsewhere = { ...renamed, organisationId: randomUUID(), lastUpdatedAt: at(70_000) }
        expect(await arrange((writer) => writer.updateUser(elsewhere, renamed.lastUpdatedAt))).toBe(false)
        expect(await arrange((writer) => writer.updateUser(makeUser(seed.organisation.id), at(500)))).toBe(false)
        expect(await store.findUser(seed.organisation.id, seed.owner.id)).toEqual(renamed)
      })

      it('updates a workspace only at the version read', async () => {
        const seed = await bootstrapped()
        const updated: WorkspaceRecord = {
          ...seed.workspace,
          name: 'Renamed',
          description: null,
          defaults: { metadata: { team: 'a' }, configId: null },
          rateLimits: [{ type: 'requests', unit: 'rph', value: 100 }],
          usageLimits: [{ type: 'cost', creditLimit: 5, alertThreshold: null, periodicReset: null, periodicResetDays: null }],
          lastUpdatedAt: at(50_000),
        }
        expect(await arrange((writer) => writer.updateWorkspace(updated, seed.workspace.lastUpdatedAt))).toBe(true)
        expect(await store.findWorkspace(seed.organisation.id, seed.workspace.id)).toEqual(updated)
        expect(await arrange((writer) => writer.updateWorkspace({ ...updated, name: 'Stale' }, seed.workspace.lastUpdatedAt))).toBe(false)
        expect(await store.findWorkspace(seed.organisation.id, seed.workspace.slug)).toEqual(updated)
      })

      it('updates a membership only at the version read', async () => {
        const seed = await bootstrapped()
        const demoted: WorkspaceMemberRecord = { ...seed.membership, role: 'member', lastUpdatedAt: at(50_000) }
        expect(await arrange((writer) => writer.updateMember(demoted, seed.membership.lastUpdatedAt))).toBe(true)
        expect(await store.findMember(seed.workspace.id, seed.owner.id)).toEqual({ member: demoted, user: seed.owner })
        expect(await arrange((writer) => writer.updateMember({ ...demoted, role: 'manager' }, seed.membership.lastUpdatedAt))).toBe(false)
        expect(await store.findMember(seed.workspace.id, seed.owner.id)).toEqual({ member: demoted, user: seed.owner })
      })

      it('rotates an API key at the version read; both hashes then find it', async () => {
        const seed = await bootstrapped()
        const rotated: ApiKeyRecord = {
          ...seed.adminKey,
          keyHash: hashOf('new secret'),
          maskedKey: 'gw********new',
          previousKeyHash: seed.adminKey.keyHash,
          previousKeyExpiresAt: at(DAY_MS),
          lastRotatedAt: at(50_000),
          lastUpdatedAt: at(50_000),
        }
        expect(await arrange((writer) => writer.updateApiKey(rotated, seed.adminKey.lastUpdatedAt))).toBe(true)
        expect(await store.findApiKeyByHash(rotated.keyHash)).toEqual(rotated)
        expect(await store.findApiKeyByHash(seed.adminKey.keyHash)).toEqual(rotated)
        expect(await store.findApiKey(seed.organisation.id, seed.adminKey.id)).toEqual(rotated)

        const again: ApiKeyRecord = { ...rotated, keyHash: hashOf('another secret'), lastUpdatedAt: at(60_000) }
        expect(await arrange((writer) => writer.updateApiKey(again, seed.adminKey.lastUpdatedAt))).toBe(false)
        expect(await store.findApiKeyByHash(again.keyHash)).toBeNull()
        expect(await store.findApiKey(seed.organisation.id, seed.adminKey.id)).toEqual(rotated)
      })

      it('moves an invite out of pending only once', async () => {
        const seed = await bootstrapped()
        const invite = makeInvite(seed.organisation.id)
        await arrange((writer) => writer.insertInvite(invite))
        const accepted: InviteRecord = { ...invite, state: 'accepted', acceptedAt: at(6_000), lastUpdatedAt: at(6_000) }
        const cancelled: InviteRecord = { ...invite, state: 'cancelled', lastUpdatedAt: at(6_500) }

        expect(await arrange((writer) => writer.updateInvite(accepted, 'pending'))).toBe(true)
        expect(await arrange((writer) => writer.updateInvite(accepted, 'pending'))).toBe(false)
        expect(await arrange((writer) => writer.updateInvite(cancelled, 'pending'))).toBe(false)
        expect(await store.findInvite(seed.organisation.id, invite.id)).toEqual(accepted)

        const other = makeInvite(seed.organisation.id)
        await arrange((writer) => writer.insertInvite(other))
        const resent: InviteRecord = { ...other, tokenHash: hashOf('resent'), expiresAt: at(20 * DAY_MS), lastUpdatedAt: at(7_000) }
        expect(await arrange((writer) => writer.updateInvite(resent, 'pending'))).toBe(true)
        expect(await store.findInviteByTokenHash(resent.tokenHash)).toEqual(resent)
        expect(await store.findInviteByTokenHash(other.tokenHash)).toBeNull()
      })

      it('lets exactly one of two concurrent updates from the same version win', async () => {
        const seed = await bootstrapped()
        const edits = ['First', 'Second'].map((firstName, index) => ({ ...seed.owner, firstName, lastUpdatedAt: at(50_000 + index) }))
        const results = await Promise.all(edits.map((edit) => arrange((writer) => writer.updateUser(edit, seed.owner.lastUpdatedAt))))
        expect(results.filter(Boolean)).toHaveLength(1)
        const winner = edits[results.indexOf(true)]
        expect(await store.findUser(seed.organisation.id, seed.owner.id)).toEqual(winner)
      })

      it('updates an organisation', async () => {
        const seed = await bootstrapped()
        const renamed: OrganisationRecord = { ...seed.organisation, name: 'Acme Holdings' }
        await arrange((writer) => writer.updateOrganisation(renamed))
        expect(await store.findOrganisation(seed.organisation.id)).toEqual(renamed)
      })
    })

    describe('deletes', () => {
      it('deletes a user with their memberships and workspace user keys, returning those keys', async () => {
        const seed = await bootstrapped()
        const user = makeUser(seed.organisation.id)
        const bystander = makeUser(seed.organisation.id)
        const second = makeWorkspace(seed.organisation.id)
        const userKeys = [
          makeApiKey(seed.organisation.id, { type: 'workspace-user', workspaceId: seed.workspace.id, userId: user.id, createdAt: at(3_000) }),
          makeApiKey(seed.organisation.id, { type: 'workspace-user', workspaceId: second.id, userId: user.id, createdAt: at(1_000) }),
        ]
        const kept = [
          makeApiKey(seed.organisation.id, { type: 'workspace-service', workspaceId: seed.workspace.id, userId: user.id }),
          makeApiKey(seed.organisation.id, { type: 'workspace-user', workspaceId: seed.workspace.id, userId: bystander.id }),
        ]
        await arrange(async (writer) => {
          await writer.insertUser(user)
          await writer.insertUser(bystander)
          await writer.insertWorkspace(second)
          await writer.insertMember(makeMember(seed.workspace, user))
          await writer.insertMember(makeMember(second, user))
          await writer.insertMember(makeMember(second, bystander))
          for (const key of [...userKeys, ...kept]) await writer.insertApiKey(key)
        })

        const deleted = await arrange((writer) => writer.deleteUser(seed.organisation.id, user.id))
        expect(byCreation(deleted)).toEqual(byCreation(userKeys))
        expect(deleted).toHaveLength(2)

        expect(await store.findUser(seed.organisation.id, user.id)).toBeNull()
        expect(await store.listMembershipsOfUser(seed.organisation.id, user.id)).toEqual([])
        expect(await store.findMember(second.id, user.id)).toBeNull()
        for (const key of userKeys) expect(await store.findApiKeyByHash(key.keyHash)).toBeNull()
        for (const key of kept) expect(await store.findApiKeyByHash(key.keyHash)).toEqual(key)
        expect(await store.findUser(seed.organisation.id, bystander.id)).toEqual(bystander)
        expect((await store.listMembers(second.id, {}, { offset: 0, limit: 10 })).total).toBe(1)
        expect(await arrange((writer) => writer.deleteUser(seed.organisation.id, user.id))).toEqual([])
      })

      it('does not delete a user of another organisation', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        expect(await arrange((writer) => writer.deleteUser(second.organisation.id, first.owner.id))).toEqual([])
        expect(await store.findUser(first.organisation.id, first.owner.id)).toEqual(first.owner)
        expect(await store.findMember(first.workspace.id, first.owner.id)).not.toBeNull()
      })

      it('deletes a workspace with its memberships and API keys, returning those keys', async () => {
        const seed = await bootstrapped()
        const doomed = makeWorkspace(seed.organisation.id)
        const user = makeUser(seed.organisation.id)
        const doomedKeys = [
          makeApiKey(seed.organisation.id, { workspaceId: doomed.id, createdAt: at(2_000) }),
          makeApiKey(seed.organisation.id, { type: 'workspace-user', workspaceId: doomed.id, userId: user.id, createdAt: at(1_000) }),
        ]
        const keptKey = makeApiKey(seed.organisation.id, { workspaceId: seed.workspace.id })
        const doomedVirtualKeys = [
          makeVirtualKey(seed.organisation.id, doomed.id),
          makeVirtualKey(seed.organisation.id, doomed.id, { sealedKeys: [], maskedKey: null }),
        ]
        const keptVirtualKey = makeVirtualKey(seed.organisation.id, seed.workspace.id)
        // Same workspace UUID under another organisation: neither counted nor deleted.
        const foreignVirtualKey = makeVirtualKey(randomUUID(), doomed.id)
        await arrange(async (writer) => {
          await writer.insertWorkspace(doomed)
          await writer.insertUser(user)
          await writer.insertMember(makeMember(doomed, user))
          await writer.insertMember(makeMember(doomed, seed.owner))
          await writer.insertMember(makeMember(seed.workspace, user))
          for (const key of [...doomedKeys, keptKey]) await writer.insertApiKey(key)
          for (const key of [...doomedVirtualKeys, keptVirtualKey, foreignVirtualKey]) await writer.insertVirtualKey(key)
        })
        expect(await store.workspaceDependants(seed.organisation.id, doomed.id)).toEqual({ apiKeys: 2, virtualKeys: 2, configs: 0, prompts: 0 })
        expect(await store.workspaceDependants(seed.organisation.id, seed.workspace.id)).toEqual({ apiKeys: 1, virtualKeys: 1, configs: 0, prompts: 0 })

        const deleted = await arrange((writer) => writer.deleteWorkspace(seed.organisation.id, doomed.id))
        expect(byCreation(deleted)).toEqual(byCreation(doomedKeys))
        expect(deleted).toHaveLength(2)

        expect(await store.findWorkspace(seed.organisation.id, doomed.id)).toBeNull()
        expect(await store.listMembers(doomed.id, {}, { offset: 0, limit: 10 })).toEqual({ total: 0, items: [] })
        expect(await store.listMembershipsOfUser(seed.organisation.id, user.id)).toEqual([makeMember(seed.workspace, user)])
        for (const key of doomedKeys) expect(await store.findApiKeyByHash(key.keyHash)).toBeNull()
        expect(await store.findApiKeyByHash(keptKey.keyHash)).toEqual(keptKey)
        for (const key of doomedVirtualKeys) expect(await store.findVirtualKey(seed.organisation.id, key.id)).toBeNull()
        expect(await store.listVirtualKeys(seed.organisation.id, { workspaceId: doomed.id }, { offset: 0, limit: 10 })).toEqual({
          total: 0,
          items: [],
        })
        expect(await store.findVirtualKey(seed.organisation.id, keptVirtualKey.id)).toEqual(keptVirtualKey)
        expect(await store.findVirtualKey(foreignVirtualKey.organisationId, foreignVirtualKey.id)).toEqual(foreignVirtualKey)
        expect(await store.workspaceDependants(seed.organisation.id, doomed.id)).toEqual({ apiKeys: 0, virtualKeys: 0, configs: 0, prompts: 0 })
        expect(await store.findUser(seed.organisation.id, user.id)).toEqual(user)
      })

      it('does not delete a workspace of another organisation', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        const key = makeApiKey(first.organisation.id, { workspaceId: first.workspace.id })
        const virtualKey = makeVirtualKey(first.organisation.id, first.workspace.id)
        await arrange(async (writer) => {
          await writer.insertApiKey(key)
          await writer.insertVirtualKey(virtualKey)
        })
        expect(await arrange((writer) => writer.deleteWorkspace(second.organisation.id, first.workspace.id))).toEqual([])
        expect(await store.findWorkspace(first.organisation.id, first.workspace.id)).toEqual(first.workspace)
        expect(await store.findApiKeyByHash(key.keyHash)).toEqual(key)
        expect(await store.findVirtualKey(first.organisation.id, virtualKey.id)).toEqual(virtualKey)
        expect(await store.workspaceDependants(second.organisation.id, first.workspace.id)).toEqual({ apiKeys: 0, virtualKeys: 0, configs: 0, prompts: 0 })
      })

      it('deletes a membership and reports whether there was one', async () => {
        const seed = await bootstrapped()
        expect(await arrange((writer) => writer.deleteMember(seed.workspace.id, seed.owner.id))).toBe(true)
        expect(await store.findMember(seed.workspace.id, seed.owner.id)).toBeNull()
        expect(await arrange((writer) => writer.deleteMember(seed.workspace.id, seed.owner.id))).toBe(false)
        expect(await store.findUser(seed.organisation.id, seed.owner.id)).toEqual(seed.owner)
      })

      it('deletes an API key of the organisation and returns it', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        const key = makeApiKey(first.organisation.id, { alertEmails: ['a@acme.test'], rateLimits: [{ type: 'tokens', unit: 'rpm', value: 1 }] })
        await arrange((writer) => writer.insertApiKey(key))
        expect(await arrange((writer) => writer.deleteApiKey(second.organisation.id, key.id))).toBeNull()
        expect(await store.findApiKeyByHash(key.keyHash)).toEqual(key)
        expect(await arrange((writer) => writer.deleteApiKey(first.organisation.id, key.id))).toEqual(key)
        expect(await store.findApiKeyByHash(key.keyHash)).toBeNull()
        expect(await arrange((writer) => writer.deleteApiKey(first.organisation.id, key.id))).toBeNull()
      })

      it('can delete and re-create a record with the same unique values in one write', async () => {
        const seed = await bootstrapped()
        const key = makeApiKey(seed.organisation.id)
        await arrange((writer) => writer.insertApiKey(key))
        const replacement = makeApiKey(seed.organisation.id, { keyHash: key.keyHash, name: 'Replacement' })
        await arrange(async (writer) => {
          await writer.deleteApiKey(seed.organisation.id, key.id)
          await writer.insertApiKey(replacement)
        })
        expect(await store.findApiKeyByHash(key.keyHash)).toEqual(replacement)
      })
    })

    describe('virtual keys', () => {
      it('keeps virtual keys exactly: sealed keys in order, every optional field set and every one unset', async () => {
        const seed = await bootstrapped()
        const full = makeVirtualKey(seed.organisation.id, seed.workspace.id, {
          name: 'Azure EU',
          note: 'Failover for the EU region',
          provider: 'azure-openai',
          sealedKeys: ['v1.k1.zulu', 'v1.k1.alpha', 'v1.k1.mike', 'v1.k1.alpha'],
          maskedKey: 'az********eu1',
          customHost: 'https://llm.internal.test/v1',
          sealedModelConfig: 'v1.k1.model-config',
          rateLimits: [
            { type: 'requests', unit: 'rpm', value: 600 },
            { type: 'tokens', unit: 'rpd', value: 1_000_000 },
          ],
          usageLimits: { type: 'tokens', creditLimit: 5_000_000, alertThreshold: 4_000_000, periodicReset: null, periodicResetDays: 30 },
          status: 'exhausted',
          expiresAt: at(90 * DAY_MS),
        })
        const bare = makeVirtualKey(seed.organisation.id, seed.workspace.id, { provider: 'ollama', sealedKeys: [], maskedKey: null })
        await arrange(async (writer) => {
          await writer.insertVirtualKey(full)
          await writer.insertVirtualKey(bare)
        })
        for (const key of [full, bare]) {
          expect(await store.findVirtualKey(seed.organisation.id, key.id)).toEqual(key)
          expect(await store.findVirtualKey(seed.organisation.id, key.slug)).toEqual(key)
        }
      })

      it('rejects a duplicate slug in the same organisation, naming slug; allows it in another', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        const original = makeVirtualKey(first.organisation.id, first.workspace.id, { slug: 'main-258f4d' })
        await arrange((writer) => writer.insertVirtualKey(original))

        // Another workspace of the same organisation does not make the slug free.
        const duplicate = makeVirtualKey(first.organisation.id, randomUUID(), { slug: original.slug })
        await expectConflict(arrange((writer) => writer.insertVirtualKey(duplicate)), 'slug')
        expect(await store.findVirtualKey(first.organisation.id, duplicate.id)).toBeNull()
        expect(await store.findVirtualKey(first.organisation.id, original.slug)).toEqual(original)

        await expectConflict(
          arrange(async (writer) => {
            const twice = makeVirtualKey(first.organisation.id, first.workspace.id, { slug: 'twice' })
            await writer.insertVirtualKey(twice)
            await writer.insertVirtualKey(makeVirtualKey(first.organisation.id, first.workspace.id, { slug: 'twice' }))
          }),
          'slug',
        )
        expect(await store.findVirtualKey(first.organisation.id, 'twice')).toBeNull()

        const sameSlug = makeVirtualKey(second.organisation.id, second.workspace.id, { slug: original.slug })
        await arrange((writer) => writer.insertVirtualKey(sameSlug))
        expect(await store.findVirtualKey(second.organisation.id, original.slug)).toEqual(sameSlug)
        expect(await store.findVirtualKey(first.organisation.id, original.slug)).toEqual(original)
      })

      it('finds a virtual key by id and by slug, only within its organisation; an id match wins', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        const target = makeVirtualKey(first.organisation.id, first.workspace.id)
        const impostor = makeVirtualKey(first.organisation.id, first.workspace.id, { slug: target.id })
        await arrange(async (writer) => {
          await writer.insertVirtualKey(impostor)
          await writer.insertVirtualKey(target)
        })

        expect(await store.findVirtualKey(first.organisation.id, target.id)).toEqual(target)
        expect(await store.findVirtualKey(first.organisation.id, target.slug)).toEqual(target)
        expect(await store.findVirtualKey(first.organisation.id, impostor.id)).toEqual(impostor)
        expect(await store.findVirtualKey(second.organisation.id, target.id)).toBeNull()
        expect(await store.findVirtualKey(second.organisation.id, target.slug)).toBeNull()
        expect(await store.findVirtualKey(first.organisation.id, 'vk-unknown')).toBeNull()
        expect(await store.findVirtualKey(first.organisation.id, randomUUID())).toBeNull()
      })

      it('lists virtual keys in creation order by workspace, with paging and totals, within the organisation', async () => {
        const seed = await bootstrapped()
        const other = makeWorkspace(seed.organisation.id)
        const keys = [
          makeVirtualKey(seed.organisation.id, seed.workspace.id, { createdAt: at(2_000) }),
          makeVirtualKey(seed.organisation.id, other.id, { createdAt: at(1_000) }),
          makeVirtualKey(seed.organisation.id, seed.workspace.id, { createdAt: at(2_000) }),
          makeVirtualKey(seed.organisation.id, seed.workspace.id, { createdAt: at(500) }),
          makeVirtualKey(seed.organisation.id, other.id, { createdAt: at(3_000) }),
        ]
        await arrange(async (writer) => {
          await writer.insertWorkspace(other)
          for (const key of keys) await writer.insertVirtualKey(key)
          await writer.insertVirtualKey(makeVirtualKey(randomUUID(), seed.workspace.id, { createdAt: at(0) }))
        })
        const all = byCreation(keys)
        const everything = { offset: 0, limit: 10 }

        expect(await store.listVirtualKeys(seed.organisation.id, {}, everything)).toEqual({ total: 5, items: all })
        expect(await store.listVirtualKeys(seed.organisation.id, {}, { offset: 1, limit: 2 })).toEqual({ total: 5, items: all.slice(1, 3) })
        expect(await store.listVirtualKeys(seed.organisation.id, {}, { offset: 5, limit: 2 })).toEqual({ total: 5, items: [] })
        expect(await store.listVirtualKeys(seed.organisation.id, {}, { offset: 0, limit: 0 })).toEqual({ total: 5, items: [] })
        const inDefault = all.filter((key) => key.workspaceId === seed.workspace.id)
        expect(await store.listVirtualKeys(seed.organisation.id, { workspaceId: seed.workspace.id }, everything)).toEqual({
          total: 3,
          items: inDefault,
        })
        expect(await store.listVirtualKeys(seed.organisation.id, { workspaceId: other.id }, { offset: 1, limit: 5 })).toEqual({
          total: 2,
          items: all.filter((key) => key.workspaceId === other.id).slice(1),
        })
        expect(await store.listVirtualKeys(seed.organisation.id, { workspaceId: randomUUID() }, everything)).toEqual({ total: 0, items: [] })
        expect(await store.listVirtualKeys(randomUUID(), {}, everything)).toEqual({ total: 0, items: [] })
      })

      it('updates a virtual key only at the version read', async () => {
        const seed = await bootstrapped()
        const key = makeVirtualKey(seed.organisation.id, seed.workspace.id, { sealedKeys: ['v1.k1.a', 'v1.k1.b'] })
        await arrange((writer) => writer.insertVirtualKey(key))
        const updated: VirtualKeyRecord = {
          ...key,
          slug: 'renamed-1a2b3c',
          name: 'Renamed',
          note: 'now with a note',
          sealedKeys: ['v1.k1.c', 'v1.k1.a'],
          maskedKey: 'sk********ccc',
          customHost: 'https://proxy.internal.test',
          sealedModelConfig: 'v1.k1.config',
          rateLimits: [{ type: 'requests', unit: 'rph', value: 100 }],
          usageLimits: { type: 'cost', creditLimit: 50, alertThreshold: null, periodicReset: 'monthly', periodicResetDays: null },
          expiresAt: at(DAY_MS),
          lastUpdatedAt: at(50_000),
        }
        expect(await arrange((writer) => writer.updateVirtualKey(updated, key.lastUpdatedAt))).toBe(true)
        expect(await store.findVirtualKey(seed.organisation.id, key.id)).toEqual(updated)
        expect(await store.findVirtualKey(seed.organisation.id, 'renamed-1a2b3c')).toEqual(updated)
        expect(await store.findVirtualKey(seed.organisation.id, key.slug)).toBeNull()

        const stale: VirtualKeyRecord = { ...key, name: 'Stale', lastUpdatedAt: at(60_000) }
        expect(await arrange((writer) => writer.updateVirtualKey(stale, key.lastUpdatedAt))).toBe(false)
        const elsewhere: VirtualKeyRecord = { ...updated, organisationId: randomUUID(), lastUpdatedAt: at(70_000) }
        expect(await arrange((writer) => writer.updateVirtualKey(elsewhere, updated.lastUpdatedAt))).toBe(false)
        const missing = makeVirtualKey(seed.organisation.id, seed.workspace.id)
        expect(await arrange((writer) => writer.updateVirtualKey(missing, missing.lastUpdatedAt))).toBe(false)
        expect(await store.findVirtualKey(seed.organisation.id, key.id)).toEqual(updated)
        expect(await store.findVirtualKey(seed.organisation.id, missing.id)).toBeNull()
      })

      it('rejects an update that takes another virtual key’s slug, naming slug', async () => {
        const seed = await bootstrapped()
        const taken = makeVirtualKey(seed.organisation.id, seed.workspace.id)
        const key = makeVirtualKey(seed.organisation.id, seed.workspace.id)
        await arrange(async (writer) => {
          await writer.insertVirtualKey(taken)
          await writer.insertVirtualKey(key)
        })
        await expectConflict(
          arrange((writer) => writer.updateVirtualKey({ ...key, slug: taken.slug, lastUpdatedAt: at(9_000) }, key.lastUpdatedAt)),
          'slug',
        )
        expect(await store.findVirtualKey(seed.organisation.id, key.id)).toEqual(key)
        expect(await store.findVirtualKey(seed.organisation.id, taken.slug)).toEqual(taken)
      })

      it('deletes a virtual key of the organisation and returns it', async () => {
        const first = await bootstrapped()
        const second = await bootstrapped()
        const key = makeVirtualKey(first.organisation.id, first.workspace.id, {
          sealedKeys: ['v1.k1.b', 'v1.k1.a'],
          sealedModelConfig: 'v1.k1.config',
          rateLimits: [{ type: 'tokens', unit: 'rpm', value: 1 }],
        })
        await arrange((writer) => writer.insertVirtualKey(key))
        expect(await arrange((writer) => writer.deleteVirtualKey(second.organisation.id, key.id))).toBeNull()
        expect(await store.findVirtualKey(first.organisation.id, key.id)).toEqual(key)
        expect(await arrange((writer) => writer.deleteVirtualKey(first.organisation.id, key.id))).toEqual(key)
        expect(await store.findVirtualKey(first.organisation.id, key.id)).toBeNull()
        expect(await store.workspaceDependants(first.organisation.id, first.workspace.id)).toMatchObject({ virtualKeys: 0 })
        expect(await arrange((writer) => writer.deleteVirtualKey(first.organisation.id, key.id))).toBeNull()
      })

      it('samples a sealed secret of any organisation: none at first, then a first key or a model config', async () => {
        expect(await store.sampleSealedSecret()).toBeNull()
        const first = await bootstrapped()
        const second = await bootstrapped()
        await arrange((writer) =>
          writer.insertVirtualKey(makeVirtualKey(first.organisation.id, first.workspace.id, { sealedKeys: [], maskedKey: null })),
        )
        expect(await store.sampleSealedSecret()).toBeNull()

        const configOnly = makeVirtualKey(second.organisation.id, second.workspace.id, {
          sealedKeys: [],
          maskedKey: null,
          sealedModelConfig: 'v1.k1.config',
        })
        await arrange((writer) => writer.insertVirtualKey(configOnly))
        expect(await store.sampleSealedSecret()).toBe('v1.k1.config')

        const withKeys = makeVirtualKey(first.organisation.id, first.workspace.id, { sealedKeys: ['v1.k1.first', 'v1.k1.second'] })
        await arrange((writer) => writer.insertVirtualKey(withKeys))
        expect(['v1.k1.config', 'v1.k1.first']).toContain(await store.sampleSealedSecret())
      })
    })

    describe('write and the audit log', () => {
      it('stores the audit entry with the work and returns what the work returned', async () => {
        const seed = await bootstrapped()
        const workspace = makeWorkspace(seed.organisation.id)
        const audit = makeAudit(seed.organisation.id, { resourceId: workspace.slug, workspaceId: workspace.id })
        const result = await store.write(audit, async (writer) => {
          await writer.insertWorkspace(workspace)
          return 'done'
        })
        expect(result).toBe('done')
        expect(await store.findWorkspace(seed.organisation.id, workspace.id)).toEqual(workspace)
        expect(await auditsOf(seed.organisation.id)).toEqual([audit])
      })

      it('keeps nothing, audit entry included, when a later write of the work conflicts', async () => {
        const seed = await bootstrapped()
        const workspace = makeWorkspace(seed.organisation.id)
        const key = makeApiKey(seed.organisation.id, { workspaceId: workspace.id, keyHash: seed.adminKey.keyHash })
        const audit = makeAudit(seed.organisation.id)

        await expectConflict(
          store.write(audit, async (writer) => {
            await writer.insertWorkspace(workspace)
            await writer.insertApiKey(key)
          }),
          'keyHash',
        )
        expect(await store.findWorkspace(seed.organisation.id, workspace.id)).toBeNull()
        expect(await store.findApiKey(seed.organisation.id, key.id)).toBeNull()
        expect(await auditsOf(seed.organisation.id)).toEqual([])
      })

      it('keeps nothing, audit entry included, when a virtual key insert of the work conflicts', async () => {
        const seed = await bootstrapped()
        const existing = makeVirtualKey(seed.organisation.id, seed.workspace.id)
        await arrange((writer) => writer.insertVirtualKey(existing))
        const workspace = makeWorkspace(seed.organisation.id)
        const fresh = makeVirtualKey(seed.organisation.id, workspace.id)
        const clash = makeVirtualKey(seed.organisation.id, workspace.id, { slug: existing.slug })

        await expectConflict(
          store.write(makeAudit(seed.organisation.id, { resourceType: 'virtual_key' }), async (writer) => {
            await writer.insertWorkspace(workspace)
            await writer.insertVirtualKey(fresh)
            await writer.insertVirtualKey(clash)
          }),
          'slug',
        )
        expect(await store.findWorkspace(seed.organisation.id, workspace.id)).toBeNull()
        expect(await store.findVirtualKey(seed.organisation.id, fresh.id)).toBeNull()
        expect(await store.findVirtualKey(seed.organisation.id, clash.id)).toBeNull()
        expect(await store.findVirtualKey(seed.organisation.id, existing.slug)).toEqual(existing)
        expect(await store.workspaceDependants(seed.organisation.id, workspace.id)).toEqual({ apiKeys: 0, virtualKeys: 0, configs: 0, prompts: 0 })
        expect(await auditsOf(seed.organisation.id)).toEqual([])
      })

      it('keeps nothing and rethrows the error itself when the work throws', async () => {
        const seed = await bootstrapped()
        const user = makeUser(seed.organisation.id)
        const failure = new Error('changed my mind')
        const error = await rejectionOf(
          store.write(makeAudit(seed.organisation.id), async (writer) => {
            await writer.insertUser(user)
            await writer.deleteMember(seed.workspace.id, seed.owner.id)
            throw failure
          }),
        )
        expect(error).toBe(failure)
        expect(await store.findUser(seed.organisation.id, user.id)).toBeNull()
        expect(await store.findMember(seed.workspace.id, seed.owner.id)).not.toBeNull()
        expect(await auditsOf(seed.organisation.id)).toEqual([])
      })

      it('records a refusal on its own after a failed write', async () => {
        const seed = await bootstrapped()
        const refused = makeAudit(seed.organisation.id, { responseStatusCode: 409, action: 'create' })
        await expectConflict(store.write(refused, (writer) => writer.insertWorkspace({ ...seed.workspace })))
        await store.recordAudit(refused)
        expect(await auditsOf(seed.organisation.id)).toEqual([refused])
      })

      it('lands every one of 30 concurrent writes with its audit entry', async () => {
        const seed = await bootstrapped()
        const workspaces = Array.from({ length: 30 }, (_, index) =>
          makeWorkspace(seed.organisation.id, { slug: `concurrent-${index}`, name: `Concurrent ${index}` }),
        )
        const audits = workspaces.map((workspace, index) => makeAudit(seed.organisation.id, { resourceId: workspace.slug, timestamp: at(index) }))
        await Promise.all(workspaces.map((workspace, index) => store.write(audits[index] as AuditEntry, (writer) => writer.insertWorkspace(workspace))))
        const found = await Promise.all(workspaces.map((workspace) => store.findWorkspace(seed.organisation.id, workspace.slug)))
        expect(found).toEqual(workspaces)
        const listed = await store.listAuditEntries(seed.organisation.id, {}, { offset: 0, limit: 100 })
        expect(listed).toEqual({ total: 30, items: [...audits].reverse() })
      })

      it('answers reads issued while a write is in progress', async () => {
        const seed = await bootstrapped()
        const user = makeUser(seed.organisation.id)
        const found = await store.write(makeAudit(seed.organisation.id), async (writer) => {
          await writer.insertUser(user)
          // Committed before this write began, so visible whatever a store's isolation.
          return store.findUser(seed.organisation.id, seed.owner.id)
        })
        expect(found).toEqual(seed.owner)
        expect(await store.findUser(seed.organisation.id, user.id)).toEqual(user)
      })

      it('rejects an audit entry whose id is taken', async () => {
        const seed = await bootstrapped()
        const entry = makeAudit(seed.organisation.id)
        await store.recordAudit(entry)
        await expectConflict(store.recordAudit({ ...entry, action: 'again' }))
        expect(await auditsOf(seed.organisation.id)).toEqual([entry])
      })
    })

    describe('prompt templates', () => {
      const everything = { offset: 0, limit: 100 }

      /** A prompt with its versions 1..count, inserted; version n is created at `5_000 + n`. */
      async function promptWithVersions(
        collection: CollectionRecord,
        count: number,
        overrides: Partial<PromptRecord> = {},
      ): Promise<{ prompt: PromptRecord; versions: PromptVersionRecord[] }> {
        const prompt = makePrompt(collection, { latestVersion: count, ...overrides })
        const versions = Array.from({ length: count }, (_, index) => makePromptVersion(prompt, index + 1))
        await arrange(async (writer) => {
          await writer.insertPrompt(prompt, versions[0] as PromptVersionRecord)
          for (const version of versions.slice(1)) await writer.insertPromptVersion(version)
        })
        return { prompt, versions }
      }

      async function defaultCollection(seed: BootstrapSeed): Promise<CollectionRecord> {
        const collection = makeCollection(seed.organisation.id, seed.workspace.id, { name: 'Default', isDefault: true })
        await arrange((writer) => writer.insertCollection(collection))
        return collection
      }

      describe('round trips', () => {
        it('keeps a prompt and its versions exactly: JSON values, nulls and booleans', async () => {
          const seed = await bootstrapped()
          const collection = await defaultCollection(seed)
          const prompt = makePrompt(collection, { name: 'Ünïcödé "support" prompt', latestVersion: 3, status: 'archived' })
          const label = makeLabel(seed.organisation.id, seed.workspace.id)
          const full = makePromptVersion(prompt, 1, {
            template: '[{"role":"system","content":"Be {{tone}}"},{"role":"user","content":[{"type":"text","text":"{{q}}"}]}]',
            parameters: {
              temperature: 0.25,
              max_tokens: 512,
              stop: ['\\n\\n', '"}]'],
              logit_bias: { '50256': -100 },
              response_format: { type: 'json_schema', json_schema: { name: 'answer', strict: true, schema: { type: 'object' } } },
              stream: false,
              seed: null,
              'odd.key': 1,
              $dollar: 'kept',
            },
            model: 'claude-3-5-sonnet',
            virtualKey: 'vk-anthropic',
            functions: [{ name: 'lookup', parameters: { type: 'object', properties: { id: { type: 'string' } } } }],
            tools: [{ type: 'function', function: { name: 'lookup', description: 'Finds "things"', parameters: {} } }, null, 3],
            toolChoice: { type: 'function', function: { name: 'lookup' } },
            description: 'First cut',
            templateMetadata: { owner: 'ada', tags: ['a', 'b'], nested: { deep: [1, 2.5, true, null] }, ['__proto__']: 'data' },
            isRawTemplate: true,
            labelId: label.id,
            status: 'archived',
          })
          const bare = makePromptVersion(prompt, 2, { parameters: {}, model: null, virtualKey: null, template: 'Plain {{text}}' })
          const stringChoice = makePromptVersion(prompt, 3, { toolChoice: 'auto', functions: [], tools: [], templateMetadata: {} })
          await arrange(async (writer) => {
            await writer.insertLabel(label)
            await writer.insertPrompt(prompt, full)
            await writer.insertPromptVersion(bare)
            await writer.insertPromptVersion(stringChoice)
          })

          expect(await store.findPrompt(seed.organisation.id, prompt.id)).toEqual(prompt)
          expect(await store.findPromptVersionById(prompt.id, full.id)).toEqual(full)
          expect(await store.findPromptVersionById(prompt.id, bare.id)).toEqual(bare)
          expect(await store.findPromptVersionById(prompt.id, stringChoice.id)).toEqual(stringChoice)
          const read = await store.findPromptVersionById(prompt.id, full.id)
          expect(Object.getPrototypeOf(read?.templateMetadata)).toBe(Object.prototype)
          expect(Object.keys(read?.templateMetadata ?? {})).toEqual(['owner', 'tags', 'nested', '__proto__'])
        })

        it('keeps collections, labels, partials and partial versions exactly', async () => {
          const seed = await bootstrapped()
          const root = makeCollection(seed.organisation.id, seed.workspace.id, { isDefault: true, name: 'Default' })
          const child = makeCollection(seed.organisation.id, seed.workspace.id, { parentCollectionId: root.id, status: 'archived', name: 'Ünïcödé' })
          const custom = makeLabel(seed.organisation.id, seed.workspace.id, { description: 'QA "gate"', colorCode: '#ff8800', status: 'archived' })
          const universal = makeLabel(seed.organisation.id, null, { name: 'org-wide' })
          const partial = makePartial(seed.organisation.id, seed.workspace.id, { collectionId: child.id, publishedVersion: 1, latestVersion: 2 })
          const first = makePartialVersion(partial, 1, { description: 'first', template: '{{#items}}- {{.}}\\n{{/items}}' })
          const second = makePartialVersion(partial, 2, { status: 'archived' })
          const loose = makePartial(seed.organisation.id, seed.workspace.id)
          const looseFirst = makePartialVersion(loose, 1)
          await arrange(async (writer) => {
            await writer.insertCollection(root)
            await writer.insertCollection(child)
            await writer.insertLabel(custom)
            await writer.insertLabel(universal)
            await writer.insertPartial(partial, first)
            await writer.insertPartialVersion(second)
            await writer.insertPartial(loose, looseFirst)
          })
          expect(await store.findCollection(seed.organisation.id, root.id)).toEqual(root)
          expect(await store.findCollection(seed.organisation.id, child.slug)).toEqual(child)
          expect(await store.findDefaultCollection(seed.workspace.id)).toEqual(root)
          expect(await store.findLabel(seed.organisation.id, custom.id)).toEqual(custom)
          expect(await store.findLabel(seed.organisation.id, universal.id)).toEqual(universal)
          expect(await store.findPartial(seed.organisation.id, partial.slug)).toEqual(partial)
          expect(await store.findPartial(seed.organisation.id, loose.id)).toEqual(loose)
          expect(await store.listPartialVersions(partial.id)).toEqual([second, first])
          expect(await store.findPartialVersion(loose.id, { kind: 'published' })).toEqual(looseFirst)
        })
      })

      describe('finding', () => {
        it('finds prompts, collections and partials by id or slug, only within their organisation', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const collection = await defaultCollection(first)
          const { prompt } = await promptWithVersions(collection, 1)
          const partial = makePartial(first.organisation.id, first.workspace.id)
          const label = makeLabel(first.organisation.id, first.workspace.id)
          await arrange(async (writer) => {
            await writer.insertPartial(partial, makePartialVersion(partial, 1))
            await writer.insertLabel(label)
          })

          for (const key of [prompt.id, prompt.slug]) {
            expect(await store.findPrompt(first.organisation.id, key)).toEqual(prompt)
            expect(await store.findPrompt(second.organisation.id, key)).toBeNull()
          }
          for (const key of [collection.id, collection.slug]) {
            expect(await store.findCollection(first.organisation.id, key)).toEqual(collection)
            expect(await store.findCollection(second.organisation.id, key)).toBeNull()
          }
          for (const key of [partial.id, partial.slug]) {
            expect(await store.findPartial(first.organisation.id, key)).toEqual(partial)
            expect(await store.findPartial(second.organisation.id, key)).toBeNull()
          }
          expect(await store.findLabel(first.organisation.id, label.id)).toEqual(label)
          expect(await store.findLabel(second.organisation.id, label.id)).toBeNull()
          expect(await store.findPrompt(first.organisation.id, 'pp-unknown')).toBeNull()
          expect(await store.findCollection(first.organisation.id, randomUUID())).toBeNull()
          expect(await store.findPartial(first.organisation.id, randomUUID())).toBeNull()
          expect(await store.findLabel(first.organisation.id, randomUUID())).toBeNull()
          expect(await store.findDefaultCollection(second.workspace.id)).toBeNull()
        })

        it('prefers an id match over a slug match', async () => {
          const seed = await bootstrapped()
          const collection = makeCollection(seed.organisation.id, seed.workspace.id)
          const collectionImpostor = makeCollection(seed.organisation.id, seed.workspace.id, { slug: collection.id })
          const prompt = makePrompt(collection)
          const promptImpostor = makePrompt(collection, { slug: prompt.id })
          const partial = makePartial(seed.organisation.id, seed.workspace.id)
          const partialImpostor = makePartial(seed.organisation.id, seed.workspace.id, { slug: partial.id })
          await arrange(async (writer) => {
            await writer.insertCollection(collectionImpostor)
            await writer.insertCollection(collection)
            await writer.insertPrompt(promptImpostor, makePromptVersion(promptImpostor, 1))
            await writer.insertPrompt(prompt, makePromptVersion(prompt, 1))
            await writer.insertPartial(partialImpostor, makePartialVersion(partialImpostor, 1))
            await writer.insertPartial(partial, makePartialVersion(partial, 1))
          })
          expect(await store.findCollection(seed.organisation.id, collection.id)).toEqual(collection)
          expect(await store.findPrompt(seed.organisation.id, prompt.id)).toEqual(prompt)
          expect(await store.findPartial(seed.organisation.id, partial.id)).toEqual(partial)
        })

        it('finds a partial by name within its workspace only', async () => {
          const seed = await bootstrapped()
          const other = makeWorkspace(seed.organisation.id)
          const partial = makePartial(seed.organisation.id, seed.workspace.id, { name: 'signature' })
          await arrange(async (writer) => {
            await writer.insertWorkspace(other)
            await writer.insertPartial(partial, makePartialVersion(partial, 1))
          })
          expect(await store.findPartialByName(seed.workspace.id, 'signature')).toEqual(partial)
          expect(await store.findPartialByName(other.id, 'signature')).toBeNull()
          expect(await store.findPartialByName(seed.workspace.id, 'Signature')).toBeNull()
        })
      })

      describe('versions', () => {
        it('resolves published, latest, numbered and labelled versions of a prompt', async () => {
          const seed = await bootstrapped()
          const collection = await defaultCollection(seed)
          const { prompt, versions } = await promptWithVersions(collection, 3, { publishedVersion: 1 })
          const [v1, v2, v3] = versions as [PromptVersionRecord, PromptVersionRecord, PromptVersionRecord]
          const label = makeLabel(seed.organisation.id, seed.workspace.id, { name: 'canary' })
          await arrange(async (writer) => {
            await writer.insertLabel(label)
            expect(await writer.setPromptVersionLabel(prompt.id, v2.id, label.id)).toBe(true)
          })
          const labelled = { ...v2, labelId: label.id }

          expect(await store.findPromptVersion(prompt.id, { kind: 'published' })).toEqual(v1)
          expect(await store.findPromptVersion(prompt.id, { kind: 'latest' })).toEqual(v3)
          expect(await store.findPromptVersion(prompt.id, { kind: 'number', version: 2 })).toEqual(labelled)
          expect(await store.findPromptVersion(prompt.id, { kind: 'number', version: 4 })).toBeNull()
          expect(await store.findPromptVersion(prompt.id, { kind: 'number', version: 0 })).toBeNull()
          expect(await store.findPromptVersion(prompt.id, { kind: 'number', version: 1.5 })).toBeNull()
          expect(await store.findPromptVersion(prompt.id, { kind: 'label', labelId: label.id })).toEqual(labelled)
          expect(await store.findPromptVersion(prompt.id, { kind: 'label', labelId: randomUUID() })).toBeNull()
          expect(await store.findPromptVersion(randomUUID(), { kind: 'published' })).toBeNull()
          expect(await store.findPromptVersion(randomUUID(), { kind: 'latest' })).toBeNull()
          expect(await store.listPromptVersions(prompt.id)).toEqual([v3, labelled, v1])
          expect(await store.listPromptVersions(randomUUID())).toEqual([])
          expect(await store.findPromptVersionById(prompt.id, v3.id)).toEqual(v3)

          // Publishing moves what "published" resolves to; the numbers come from the prompt record.
          const published = { ...prompt, publishedVersion: 3, lastUpdatedAt: at(9_000) }
          expect(await arrange((writer) => writer.updatePrompt(published, prompt.lastUpdatedAt))).toBe(true)
          expect(await store.findPromptVersion(prompt.id, { kind: 'published' })).toEqual(v3)
          expect(await store.findPrompt(seed.organisation.id, prompt.id)).toEqual(published)
        })

        it('finds a version by id only under its own prompt', async () => {
          const seed = await bootstrapped()
          const collection = await defaultCollection(seed)
          const first = await promptWithVersions(collection, 1)
          const second = await promptWithVersions(collection, 1)
          const version = first.versions[0] as PromptVersionRecord
          expect(await store.findPromptVersionById(first.prompt.id, version.id)).toEqual(version)
          expect(await store.findPromptVersionById(second.prompt.id, version.id)).toBeNull()
          expect(await store.findPromptVersionById(first.prompt.id, randomUUID())).toBeNull()
        })

        it('resolves partial versions by published, latest and number, never by label', async () => {
          const seed = await bootstrapped()
          const partial = makePartial(seed.organisation.id, seed.workspace.id, { publishedVersion: 2, latestVersion: 3 })
          const versions = [1, 2, 3].map((number) => makePartialVersion(partial, number))
          const [p1, p2, p3] = versions as [PartialVersionRecord, PartialVersionRecord, PartialVersionRecord]
          await arrange(async (writer) => {
            await writer.insertPartial(partial, p1)
            await writer.insertPartialVersion(p2)
            await writer.insertPartialVersion(p3)
          })
          expect(await store.findPartialVersion(partial.id, { kind: 'published' })).toEqual(p2)
          expect(await store.findPartialVersion(partial.id, { kind: 'latest' })).toEqual(p3)
          expect(await store.findPartialVersion(partial.id, { kind: 'number', version: 1 })).toEqual(p1)
          expect(await store.findPartialVersion(partial.id, { kind: 'number', version: 9 })).toBeNull()
          expect(await store.findPartialVersion(partial.id, { kind: 'label', labelId: randomUUID() })).toBeNull()
          expect(await store.findPartialVersion(randomUUID(), { kind: 'latest' })).toBeNull()
          expect(await store.listPartialVersions(partial.id)).toEqual([p3, p2, p1])

          const updated = { ...partial, publishedVersion: 3, name: 'renamed', lastUpdatedAt: at(9_000) }
          expect(await arrange((writer) => writer.updatePartial(updated, partial.lastUpdatedAt))).toBe(true)
          expect(await store.findPartialVersion(partial.id, { kind: 'published' })).toEqual(p3)
          expect(await store.findPartialByName(seed.workspace.id, 'renamed')).toEqual(updated)
        })
      })

      describe('labels on versions', () => {
        it('moves a label between versions of one prompt, and lets it mark versions of other prompts at once', async () => {
          const seed = await bootstrapped()
          const collection = await defaultCollection(seed)
          await store.ensureBuiltInLabels(seed.organisation.id, at(0))
          const production = await store.findLabelByName(seed.organisation.id, seed.workspace.id, 'production')
          if (production === null) throw new Error('built-in label missing')
          const staging = await store.findLabelByName(seed.organisation.id, seed.workspace.id, 'staging')
          if (staging === null) throw new Error('built-in label missing')
          const first = await promptWithVersions(collection, 3)
          const second = await promptWithVersions(collection, 2)
          const [a1, a2, a3] = first.versions as [PromptVersionRecord, PromptVersionRecord, PromptVersionRecord]
          const [b1] = second.versions as [PromptVersionRecord]

          await arrange(async (writer) => {
            expect(await writer.setPromptVersionLabel(first.prompt.id, a1.id, production.id)).toBe(true)
            expect(await writer.setPromptVersionLabel(second.prompt.id, b1.id, production.id)).toBe(true)
            expect(await writer.setPromptVersionLabel(first.prompt.id, a3.id, staging.id)).toBe(true)
          })
          expect(await store.findPromptVersion(first.prompt.id, { kind: 'label', labelId: production.id })).toEqual({ ...a1, labelId: production.id })
          expect(await store.findPromptVersion(second.prompt.id, { kind: 'label', labelId: production.id })).toEqual({ ...b1, labelId: production.id })

          // Moving it within the first prompt takes it off a1 only; the second prompt keeps its own.
          await arrange(async (writer) => {
            expect(await writer.setPromptVersionLabel(first.prompt.id, a2.id, production.id)).toBe(true)
          })
          expect(await store.listPromptVersions(first.prompt.id)).toEqual([
            { ...a3, labelId: staging.id },
            { ...a2, labelId: production.id },
            a1,
          ])
          expect(await store.findPromptVersion(second.prompt.id, { kind: 'label', labelId: production.id })).toEqual({ ...b1, labelId: production.id })

          // Setting the label a version already carries changes nothing; a version carries one label.
          await arrange(async (writer) => {
            expect(await writer.setPromptVersionLabel(first.prompt.id, a2.id, production.id)).toBe(true)
            expect(await writer.setPromptVersionLabel(first.prompt.id, a3.id, production.id)).toBe(true)
          })
          expect(await store.listPromptVersions(first.prompt.id)).toEqual([{ ...a3, labelId: production.id }, a2, a1])
          expect(await store.findPromptVersion(first.prompt.id, { kind: 'label', labelId: staging.id })).toBeNull()

          // null takes it off.
          await arrange(async (writer) => {
            expect(await writer.setPromptVersionLabel(first.prompt.id, a3.id, null)).toBe(true)
          })
          expect(await store.listPromptVersions(first.prompt.id)).toEqual([a3, a2, a1])
        })

        it('reports an unknown version, or one of another prompt, and changes nothing', async () => {
          const seed = await bootstrapped()
          const collection = await defaultCollection(seed)
          const label = makeLabel(seed.organisation.id, seed.workspace.id)
          const first = await promptWithVersions(collection, 1)
          const second = await promptWithVersions(collection, 1)
          const a1 = first.versions[0] as PromptVersionRecord
          const b1 = second.versions[0] as PromptVersionRecord
          await arrange(async (writer) => {
            await writer.insertLabel(label)
            expect(await writer.setPromptVersionLabel(first.prompt.id, a1.id, label.id)).toBe(true)
          })
          await arrange(async (writer) => {
            expect(await writer.setPromptVersionLabel(first.prompt.id, b1.id, label.id)).toBe(false)
            expect(await writer.setPromptVersionLabel(first.prompt.id, randomUUID(), label.id)).toBe(false)
            expect(await writer.setPromptVersionLabel(randomUUID(), a1.id, null)).toBe(false)
          })
          expect(await store.listPromptVersions(first.prompt.id)).toEqual([{ ...a1, labelId: label.id }])
          expect(await store.listPromptVersions(second.prompt.id)).toEqual([b1])
        })

        it('deleting a label takes it off every version that carried it', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const collection = await defaultCollection(first)
          const label = makeLabel(first.organisation.id, first.workspace.id)
          const kept = makeLabel(first.organisation.id, first.workspace.id)
          const a = await promptWithVersions(collection, 2)
          const b = await promptWithVersions(collection, 1)
          const [a1, a2] = a.versions as [PromptVersionRecord, PromptVersionRecord]
          const b1 = b.versions[0] as PromptVersionRecord
          await arrange(async (writer) => {
            await writer.insertLabel(label)
            await writer.insertLabel(kept)
            await writer.setPromptVersionLabel(a.prompt.id, a1.id, label.id)
            await writer.setPromptVersionLabel(a.prompt.id, a2.id, kept.id)
            await writer.setPromptVersionLabel(b.prompt.id, b1.id, label.id)
          })

          expect(await arrange((writer) => writer.deleteLabel(second.organisation.id, label.id))).toBe(false)
          expect(await store.findLabel(first.organisation.id, label.id)).toEqual(label)

          expect(await arrange((writer) => writer.deleteLabel(first.organisation.id, label.id))).toBe(true)
          expect(await store.findLabel(first.organisation.id, label.id)).toBeNull()
          expect(await store.findPromptVersion(a.prompt.id, { kind: 'label', labelId: label.id })).toBeNull()
          expect(await store.findPromptVersion(b.prompt.id, { kind: 'label', labelId: label.id })).toBeNull()
          expect(await store.listPromptVersions(a.prompt.id)).toEqual([{ ...a2, labelId: kept.id }, a1])
          expect(await store.listPromptVersions(b.prompt.id)).toEqual([b1])
          expect(await arrange((writer) => writer.deleteLabel(first.organisation.id, label.id))).toBe(false)
        })
      })

      describe('labels', () => {
        it('creates the built-in labels once, however often and concurrently asked, per organisation', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          await Promise.all(Array.from({ length: 6 }, () => store.ensureBuiltInLabels(first.organisation.id, at(1_000))))
          await store.ensureBuiltInLabels(first.organisation.id, at(2_000))
          const listed = await store.listLabels(first.organisation.id, {}, everything)
          expect(listed.total).toBe(3)
          expect(listed.items.map((label) => label.name).sort()).toEqual(['development', 'production', 'staging'])
          for (const label of listed.items) {
            expect(label).toMatchObject({
              organisationId: first.organisation.id,
              workspaceId: null,
              isUniversal: true,
              status: 'active',
              createdAt: at(1_000),
              lastUpdatedAt: at(1_000),
            })
            expect(await store.findLabel(first.organisation.id, label.id)).toEqual(label)
            expect(await store.findLabel(second.organisation.id, label.id)).toBeNull()
          }
          expect((await store.listLabels(second.organisation.id, {}, everything)).total).toBe(0)
          await store.ensureBuiltInLabels(second.organisation.id, at(1_000))
          expect((await store.listLabels(second.organisation.id, {}, everything)).total).toBe(3)
          expect((await store.listLabels(first.organisation.id, {}, everything)).items).toEqual(listed.items)
        })

        it('finds a label by name: the workspace’s own first, else a built-in one, never another workspace’s', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const other = makeWorkspace(first.organisation.id)
          await store.ensureBuiltInLabels(first.organisation.id, at(0))
          const orgWide = makeLabel(first.organisation.id, null, { name: 'qa', createdAt: at(100), lastUpdatedAt: at(100) })
          const own = makeLabel(first.organisation.id, first.workspace.id, { name: 'qa' })
          const elsewhere = makeLabel(first.organisation.id, other.id, { name: 'nightly' })
          await arrange(async (writer) => {
            await writer.insertWorkspace(other)
            await writer.insertLabel(orgWide)
            await writer.insertLabel(own)
            await writer.insertLabel(elsewhere)
          })
          expect(await store.findLabelByName(first.organisation.id, first.workspace.id, 'qa')).toEqual(own)
          expect(await store.findLabelByName(first.organisation.id, other.id, 'qa')).toEqual(orgWide)
          expect(await store.findLabelByName(first.organisation.id, other.id, 'nightly')).toEqual(elsewhere)
          expect(await store.findLabelByName(first.organisation.id, first.workspace.id, 'nightly')).toBeNull()
          expect(await store.findLabelByName(first.organisation.id, first.workspace.id, 'production')).toMatchObject({
            name: 'production',
            isUniversal: true,
          })
          expect(await store.findLabelByName(first.organisation.id, first.workspace.id, 'Production')).toBeNull()
          expect(await store.findLabelByName(second.organisation.id, second.workspace.id, 'production')).toBeNull()
          expect(await store.findLabelByName(second.organisation.id, first.workspace.id, 'qa')).toBeNull()
        })

        it('lists a workspace’s labels with the built-in ones first, with search and paging', async () => {
          const seed = await bootstrapped()
          const other = makeWorkspace(seed.organisation.id)
          await arrange((writer) => writer.insertWorkspace(other))
          await store.ensureBuiltInLabels(seed.organisation.id, at(50_000))
          const own = [
            makeLabel(seed.organisation.id, seed.workspace.id, { name: 'Nightly-Build', createdAt: at(3_000) }),
            makeLabel(seed.organisation.id, seed.workspace.id, { name: 'canary', createdAt: at(1_000) }),
            makeLabel(seed.organisation.id, seed.workspace.id, { name: 'beta', createdAt: at(1_000) }),
          ]
          const foreign = makeLabel(seed.organisation.id, other.id, { name: 'nightly-other', createdAt: at(0) })
          await arrange(async (writer) => {
            for (const label of [...own, foreign]) await writer.insertLabel(label)
          })
          const builtIns = (await store.listLabels(seed.organisation.id, {}, everything)).items.filter((label) => label.isUniversal)
          expect(builtIns).toHaveLength(3)
          expect(builtIns).toEqual(byCreation(builtIns))

          const listed = await store.listLabels(seed.organisation.id, { workspaceId: seed.workspace.id }, everything)
          expect(listed).toEqual({ total: 6, items: [...builtIns, ...byCreation(own)] })
          const page = await store.listLabels(seed.organisation.id, { workspaceId: seed.workspace.id }, { offset: 2, limit: 2 })
          expect(page).toEqual({ total: 6, items: listed.items.slice(2, 4) })
          const searched = await store.listLabels(seed.organisation.id, { workspaceId: seed.workspace.id, search: 'NIGHTLY' }, everything)
          expect(searched).toEqual({ total: 1, items: [own[0]] })
          const everywhere = await store.listLabels(seed.organisation.id, { search: 'nightly' }, everything)
          expect(everywhere).toEqual({ total: 2, items: [foreign, own[0]] })
          expect((await store.listLabels(seed.organisation.id, { search: '%' }, everything)).total).toBe(0)
        })

        it('refuses a custom label with a built-in name, or a name taken in its workspace', async () => {
          const seed = await bootstrapped()
          const other = makeWorkspace(seed.organisation.id)
          await arrange((writer) => writer.insertWorkspace(other))
          await store.ensureBuiltInLabels(seed.organisation.id, at(0))
          for (const name of ['production', 'staging', 'development']) {
            await expectConflict(arrange((writer) => writer.insertLabel(makeLabel(seed.organisation.id, seed.workspace.id, { name }))), 'name')
          }
          const canary = makeLabel(seed.organisation.id, seed.workspace.id, { name: 'canary' })
          await arrange((writer) => writer.insertLabel(canary))
          await expectConflict(arrange((writer) => writer.insertLabel(makeLabel(seed.organisation.id, seed.workspace.id, { name: 'canary' }))), 'name')
          await expectConflict(
            arrange((writer) => writer.updateLabel({ ...canary, name: 'production', lastUpdatedAt: at(9_000) }, canary.lastUpdatedAt)),
            'name',
          )
          // The same name in another workspace is another label.
          const elsewhere = makeLabel(seed.organisation.id, other.id, { name: 'canary' })
          await arrange((writer) => writer.insertLabel(elsewhere))
          await expectConflict(
            arrange((writer) => writer.updateLabel({ ...elsewhere, workspaceId: seed.workspace.id, lastUpdatedAt: at(9_000) }, elsewhere.lastUpdatedAt)),
            'name',
          )
          // A second built-in of the same name in one organisation is refused too.
          await expectConflict(arrange((writer) => writer.insertLabel(makeLabel(seed.organisation.id, null, { name: 'staging' }))), 'name')
          expect((await store.listLabels(seed.organisation.id, {}, everything)).total).toBe(5)
          expect(await store.findLabel(seed.organisation.id, canary.id)).toEqual(canary)
        })
      })

      describe('listings', () => {
        it('lists prompts in creation order with workspace, collection and search filters, paging and totals', async () => {
          const seed = await bootstrapped()
          const stranger = await bootstrapped()
          const other = makeWorkspace(seed.organisation.id)
          const main = makeCollection(seed.organisation.id, seed.workspace.id, { isDefault: true })
          const side = makeCollection(seed.organisation.id, seed.workspace.id)
          const elsewhere = makeCollection(seed.organisation.id, other.id, { isDefault: true })
          const foreignCollection = makeCollection(stranger.organisation.id, stranger.workspace.id, { isDefault: true })
          await arrange(async (writer) => {
            await writer.insertWorkspace(other)
            for (const collection of [main, side, elsewhere, foreignCollection]) await writer.insertCollection(collection)
          })
          const prompts = [
            makePrompt(main, { name: 'Support Reply', slug: 'pp-support-reply-a1b2c3', createdAt: at(3_000) }),
            makePrompt(main, { name: 'Summariser', slug: 'pp-summariser-d4e5f6', createdAt: at(1_000) }),
            makePrompt(side, { name: 'Translator', slug: 'pp-translator-0a0b0c', createdAt: at(1_000) }),
            makePrompt(side, { name: 'Classifier', slug: 'pp-support-triage-ffffff', createdAt: at(2_000) }),
            makePrompt(elsewhere, { name: 'support (other workspace)', slug: 'pp-other-111111', createdAt: at(500) }),
          ]
          const foreign = makePrompt(foreignCollection, { name: 'Support Reply', slug: 'pp-support-reply-a1b2c3' })
          await arrange(async (writer) => {
            for (const prompt of [...prompts, foreign]) await writer.insertPrompt(prompt, makePromptVersion(prompt, 1))
          })
          const [reply, summariser, translator, classifier, otherPrompt] = prompts as [PromptRecord, PromptRecord, PromptRecord, PromptRecord, PromptRecord]

          const all = await store.listPrompts(seed.organisation.id, {}, everything)
          expect(all).toEqual({ total: 5, items: byCreation(prompts) })
          const inWorkspace = byCreation([reply, summariser, translator, classifier])
          expect(await store.listPrompts(seed.organisation.id, { workspaceId: seed.workspace.id }, everything)).toEqual({ total: 4, items: inWorkspace })
          expect(await store.listPrompts(seed.organisation.id, { workspaceId: seed.workspace.id }, { offset: 1, limit: 2 })).toEqual({
            total: 4,
            items: inWorkspace.slice(1, 3),
          })
          expect(await store.listPrompts(seed.organisation.id, { workspaceId: seed.workspace.id }, { offset: 10, limit: 2 })).toEqual({ total: 4, items: [] })
          expect(await store.listPrompts(seed.organisation.id, { collectionId: side.id }, everything)).toEqual({
            total: 2,
            items: byCreation([translator, classifier]),
          })
          // Case-insensitive substring of the name or the slug.
          expect(await store.listPrompts(seed.organisation.id, { search: 'SUPPORT' }, everything)).toEqual({
            total: 3,
            items: byCreation([otherPrompt, reply, classifier]),
          })
          expect(await store.listPrompts(seed.organisation.id, { workspaceId: seed.workspace.id, search: 'sUpPoRt' }, everything)).toEqual({
            total: 2,
            items: byCreation([reply, classifier]),
          })
          expect(await store.listPrompts(seed.organisation.id, { search: 'mmaris' }, everything)).toEqual({ total: 1, items: [summariser] })
          expect(await store.listPrompts(seed.organisation.id, { search: '(other' }, everything)).toEqual({ total: 1, items: [otherPrompt] })
          for (const literal of ['%', '_', '.*', '[a-z]']) {
            expect((await store.listPrompts(seed.organisation.id, { search: literal }, everything)).total, literal).toBe(0)
          }
          expect(await store.listPrompts(stranger.organisation.id, {}, everything)).toEqual({ total: 1, items: [foreign] })
        })

        it('lists collections and partials in creation order with their filters', async () => {
          const seed = await bootstrapped()
          const stranger = await bootstrapped()
          const other = makeWorkspace(seed.organisation.id)
          const collections = [
            makeCollection(seed.organisation.id, seed.workspace.id, { name: 'Default', slug: 'default-aaaaaa', isDefault: true, createdAt: at(2_000) }),
            makeCollection(seed.organisation.id, seed.workspace.id, { name: 'Marketing Copy', slug: 'marketing-bbbbbb', createdAt: at(1_000) }),
            makeCollection(seed.organisation.id, other.id, { name: 'Default', slug: 'default-cccccc', isDefault: true, createdAt: at(1_000) }),
          ]
          const foreign = makeCollection(stranger.organisation.id, stranger.workspace.id, { name: 'Marketing' })
          const [defaultOne, marketing, otherDefault] = collections as [CollectionRecord, CollectionRecord, CollectionRecord]
          const partials = [
            makePartial(seed.organisation.id, seed.workspace.id, { collectionId: marketing.id, createdAt: at(3_000) }),
            makePartial(seed.organisation.id, seed.workspace.id, { createdAt: at(1_000) }),
            makePartial(seed.organisation.id, other.id, { collectionId: otherDefault.id, createdAt: at(2_000) }),
          ]
          await arrange(async (writer) => {
            await writer.insertWorkspace(other)
            for (const collection of [...collections, foreign]) await writer.insertCollection(collection)
            for (const partial of partials) await writer.insertPartial(partial, makePartialVersion(partial, 1))
          })
          expect(await store.listCollections(seed.organisation.id, {}, everything)).toEqual({ total: 3, items: byCreation(collections) })
          expect(await store.listCollections(seed.organisation.id, { workspaceId: seed.workspace.id }, everything)).toEqual({
            total: 2,
            items: [marketing, defaultOne],
          })
          expect(await store.listCollections(seed.organisation.id, { workspaceId: seed.workspace.id }, { offset: 1, limit: 1 })).toEqual({
            total: 2,
            items: [defaultOne],
          })
          expect(await store.listCollections(seed.organisation.id, { search: 'MARKET' }, everything)).toEqual({ total: 1, items: [marketing] })
          expect(await store.listCollections(seed.organisation.id, { search: 'cccccc' }, everything)).toEqual({ total: 1, items: [otherDefault] })
          expect(await store.findDefaultCollection(other.id)).toEqual(otherDefault)

          const [inMarketing, loose, inOther] = partials as [PartialRecord, PartialRecord, PartialRecord]
          expect(await store.listPartials(seed.organisation.id, {}, everything)).toEqual({ total: 3, items: [loose, inOther, inMarketing] })
          expect(await store.listPartials(seed.organisation.id, { workspaceId: seed.workspace.id }, everything)).toEqual({
            total: 2,
            items: [loose, inMarketing],
          })
          expect(await store.listPartials(seed.organisation.id, { collectionId: marketing.id }, everything)).toEqual({ total: 1, items: [inMarketing] })
          expect(await store.listPartials(seed.organisation.id, {}, { offset: 2, limit: 5 })).toEqual({ total: 3, items: [inMarketing] })
          expect(await store.listPartials(stranger.organisation.id, {}, everything)).toEqual({ total: 0, items: [] })
        })
      })

      describe('uniqueness', () => {
        it('refuses duplicate prompt slugs in an organisation and duplicate version numbers of a prompt', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const collection = await defaultCollection(first)
          const secondCollection = await defaultCollection(second)
          const { prompt, versions } = await promptWithVersions(collection, 2)
          const twin = makePrompt(collection, { slug: prompt.slug })
          await expectConflict(arrange((writer) => writer.insertPrompt(twin, makePromptVersion(twin, 1))), 'slug')
          expect(await store.findPrompt(first.organisation.id, twin.id)).toBeNull()
          expect(await store.listPromptVersions(twin.id)).toEqual([])

          await expectConflict(arrange((writer) => writer.insertPromptVersion(makePromptVersion(prompt, 2))), 'version')
          expect(await store.listPromptVersions(prompt.id)).toEqual([...versions].reverse())

          // Another organisation may use the slug; another prompt the version numbers.
          const elsewhere = makePrompt(secondCollection, { slug: prompt.slug })
          await arrange((writer) => writer.insertPrompt(elsewhere, makePromptVersion(elsewhere, 1)))
          expect(await store.findPrompt(second.organisation.id, prompt.slug)).toEqual(elsewhere)
          expect(await store.findPrompt(first.organisation.id, prompt.slug)).toEqual(prompt)

          const renamed = await promptWithVersions(collection, 1)
          await expectConflict(
            arrange((writer) => writer.updatePrompt({ ...renamed.prompt, slug: prompt.slug, lastUpdatedAt: at(9_000) }, renamed.prompt.lastUpdatedAt)),
            'slug',
          )
        })

        it('refuses a second default collection of a workspace and a duplicate collection slug', async () => {
          const seed = await bootstrapped()
          const other = makeWorkspace(seed.organisation.id)
          await arrange((writer) => writer.insertWorkspace(other))
          const main = await defaultCollection(seed)
          await expectConflict(
            arrange((writer) => writer.insertCollection(makeCollection(seed.organisation.id, seed.workspace.id, { isDefault: true }))),
            'isDefault',
          )
          await expectConflict(
            arrange((writer) => writer.insertCollection(makeCollection(seed.organisation.id, other.id, { slug: main.slug }))),
            'slug',
          )
          // Any number of other collections, and another workspace's default.
          const plain = [makeCollection(seed.organisation.id, seed.workspace.id), makeCollection(seed.organisation.id, seed.workspace.id)]
          const otherDefault = makeCollection(seed.organisation.id, other.id, { isDefault: true })
          await arrange(async (writer) => {
            for (const collection of [...plain, otherDefault]) await writer.insertCollection(collection)
          })
          await expectConflict(
            arrange((writer) =>
              writer.updateCollection({ ...(plain[0] as CollectionRecord), isDefault: true, lastUpdatedAt: at(9_000) }, (plain[0] as CollectionRecord).lastUpdatedAt),
            ),
            'isDefault',
          )
          expect(await store.findDefaultCollection(seed.workspace.id)).toEqual(main)
          expect(await store.findDefaultCollection(other.id)).toEqual(otherDefault)

          // Handing the default over within one write: the old one first stops being the default.
          const next = plain[1] as CollectionRecord
          await arrange(async (writer) => {
            expect(await writer.updateCollection({ ...main, isDefault: false, lastUpdatedAt: at(9_000) }, main.lastUpdatedAt)).toBe(true)
            expect(await writer.updateCollection({ ...next, isDefault: true, lastUpdatedAt: at(9_000) }, next.lastUpdatedAt)).toBe(true)
          })
          expect(await store.findDefaultCollection(seed.workspace.id)).toEqual({ ...next, isDefault: true, lastUpdatedAt: at(9_000) })
        })

        it('refuses duplicate partial slugs in an organisation, names in a workspace, and version numbers', async () => {
          const seed = await bootstrapped()
          const other = makeWorkspace(seed.organisation.id)
          await arrange((writer) => writer.insertWorkspace(other))
          const partial = makePartial(seed.organisation.id, seed.workspace.id, { name: 'greeting' })
          await arrange((writer) => writer.insertPartial(partial, makePartialVersion(partial, 1)))
          const sameSlug = makePartial(seed.organisation.id, other.id, { slug: partial.slug })
          await expectConflict(arrange((writer) => writer.insertPartial(sameSlug, makePartialVersion(sameSlug, 1))), 'slug')
          const sameName = makePartial(seed.organisation.id, seed.workspace.id, { name: 'greeting' })
          await expectConflict(arrange((writer) => writer.insertPartial(sameName, makePartialVersion(sameName, 1))), 'name')
          await expectConflict(arrange((writer) => writer.insertPartialVersion(makePartialVersion(partial, 1))), 'version')
          expect(await store.listPartialVersions(sameName.id)).toEqual([])

          const elsewhere = makePartial(seed.organisation.id, other.id, { name: 'greeting' })
          await arrange((writer) => writer.insertPartial(elsewhere, makePartialVersion(elsewhere, 1)))
          expect(await store.findPartialByName(other.id, 'greeting')).toEqual(elsewhere)
          await expectConflict(
            arrange((writer) => writer.updatePartial({ ...elsewhere, workspaceId: seed.workspace.id, lastUpdatedAt: at(9_000) }, elsewhere.lastUpdatedAt)),
            'name',
          )
          expect(await store.findPartialByName(seed.workspace.id, 'greeting')).toEqual(partial)
        })
      })

      describe('optimistic updates', () => {
        it('applies prompt, collection, label and partial updates only at the expected lastUpdatedAt, within the organisation', async () => {
          const seed = await bootstrapped()
          const stranger = await bootstrapped()
          const collection = await defaultCollection(seed)
          const { prompt } = await promptWithVersions(collection, 1)
          const label = makeLabel(seed.organisation.id, seed.workspace.id)
          const partial = makePartial(seed.organisation.id, seed.workspace.id)
          await arrange(async (writer) => {
            await writer.insertLabel(label)
            await writer.insertPartial(partial, makePartialVersion(partial, 1))
          })
          const later = at(60_000)
          const stale = at(59_000)
          const cases = [
            {
              stale: (writer: AdminWriter) => writer.updatePrompt({ ...prompt, name: 'Stale' }, stale),
              foreign: (writer: AdminWriter) => writer.updatePrompt({ ...prompt, organisationId: stranger.organisation.id, name: 'Foreign' }, prompt.lastUpdatedAt),
              fresh: (writer: AdminWriter) => writer.updatePrompt({ ...prompt, name: 'Fresh', lastUpdatedAt: later }, prompt.lastUpdatedAt),
              read: () => store.findPrompt(seed.organisation.id, prompt.id),
              expected: { ...prompt, name: 'Fresh', lastUpdatedAt: later },
            },
            {
              stale: (writer: AdminWriter) => writer.updateCollection({ ...collection, name: 'Stale' }, stale),
              foreign: (writer: AdminWriter) =>
                writer.updateCollection({ ...collection, organisationId: stranger.organisation.id, name: 'Foreign' }, collection.lastUpdatedAt),
              fresh: (writer: AdminWriter) => writer.updateCollection({ ...collection, name: 'Fresh', lastUpdatedAt: later }, collection.lastUpdatedAt),
              read: () => store.findCollection(seed.organisation.id, collection.id),
              expected: { ...collection, name: 'Fresh', lastUpdatedAt: later },
            },
            {
              stale: (writer: AdminWriter) => writer.updateLabel({ ...label, name: 'stale' }, stale),
              foreign: (writer: AdminWriter) => writer.updateLabel({ ...label, organisationId: stranger.organisation.id, name: 'foreign' }, label.lastUpdatedAt),
              fresh: (writer: AdminWriter) =>
                writer.updateLabel({ ...label, name: 'fresh', colorCode: '#000000', lastUpdatedAt: later }, label.lastUpdatedAt),
              read: () => store.findLabel(seed.organisation.id, label.id),
              expected: { ...label, name: 'fresh', colorCode: '#000000', lastUpdatedAt: later },
            },
            {
              stale: (writer: AdminWriter) => writer.updatePartial({ ...partial, name: 'stale' }, stale),
              foreign: (writer: AdminWriter) => writer.updatePartial({ ...partial, organisationId: stranger.organisation.id, name: 'foreign' }, partial.lastUpdatedAt),
              fresh: (writer: AdminWriter) => writer.updatePartial({ ...partial, name: 'fresh', latestVersion: 1, lastUpdatedAt: later }, partial.lastUpdatedAt),
              read: () => store.findPartial(seed.organisation.id, partial.id),
              expected: { ...partial, name: 'fresh', lastUpdatedAt: later },
            },
          ]
          for (const [index, step] of cases.entries()) {
            const before = await step.read()
            expect(await arrange(step.stale), `stale ${index}`).toBe(false)
            expect(await arrange(step.foreign), `foreign ${index}`).toBe(false)
            expect(await step.read()).toEqual(before)
            expect(await arrange(step.fresh), `fresh ${index}`).toBe(true)
            expect(await step.read()).toEqual(step.expected)
            // The version read before the update is stale now.
            expect(await arrange(step.fresh), `again ${index}`).toBe(false)
          }
        })
      })

      describe('deletes', () => {
        it('deletes a prompt with all its versions, and partials with theirs, within the organisation', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const collection = await defaultCollection(first)
          const doomed = await promptWithVersions(collection, 3)
          const kept = await promptWithVersions(collection, 1)
          const partial = makePartial(first.organisation.id, first.workspace.id)
          const partialVersions = [makePartialVersion(partial, 1), makePartialVersion(partial, 2)]
          await arrange(async (writer) => {
            await writer.insertPartial(partial, partialVersions[0] as PartialVersionRecord)
            await writer.insertPartialVersion(partialVersions[1] as PartialVersionRecord)
          })

          expect(await arrange((writer) => writer.deletePrompt(second.organisation.id, doomed.prompt.id))).toBe(false)
          expect(await store.listPromptVersions(doomed.prompt.id)).toHaveLength(3)
          expect(await arrange((writer) => writer.deletePrompt(first.organisation.id, doomed.prompt.id))).toBe(true)
          expect(await store.findPrompt(first.organisation.id, doomed.prompt.id)).toBeNull()
          expect(await store.listPromptVersions(doomed.prompt.id)).toEqual([])
          expect(await store.findPromptVersion(doomed.prompt.id, { kind: 'latest' })).toBeNull()
          expect(await store.listPromptVersions(kept.prompt.id)).toEqual(kept.versions)
          expect(await arrange((writer) => writer.deletePrompt(first.organisation.id, doomed.prompt.id))).toBe(false)

          expect(await arrange((writer) => writer.deletePartial(second.organisation.id, partial.id))).toBe(false)
          expect(await arrange((writer) => writer.deletePartial(first.organisation.id, partial.id))).toBe(true)
          expect(await store.findPartial(first.organisation.id, partial.id)).toBeNull()
          expect(await store.findPartialByName(first.workspace.id, partial.name)).toBeNull()
          expect(await store.listPartialVersions(partial.id)).toEqual([])
          expect(await arrange((writer) => writer.deletePartial(first.organisation.id, partial.id))).toBe(false)
        })

        it('deletes only an empty collection: a prompt, a partial or a child collection in it is a conflict', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const withPrompt = makeCollection(first.organisation.id, first.workspace.id)
          const withPartial = makeCollection(first.organisation.id, first.workspace.id)
          const parent = makeCollection(first.organisation.id, first.workspace.id)
          const child = makeCollection(first.organisation.id, first.workspace.id, { parentCollectionId: parent.id })
          const empty = makeCollection(first.organisation.id, first.workspace.id)
          const prompt = makePrompt(withPrompt)
          const partial = makePartial(first.organisation.id, first.workspace.id, { collectionId: withPartial.id })
          await arrange(async (writer) => {
            for (const collection of [withPrompt, withPartial, parent, child, empty]) await writer.insertCollection(collection)
            await writer.insertPrompt(prompt, makePromptVersion(prompt, 1))
            await writer.insertPartial(partial, makePartialVersion(partial, 1))
          })
          for (const collection of [withPrompt, withPartial, parent]) {
            await expectConflict(arrange((writer) => writer.deleteCollection(first.organisation.id, collection.id)), 'collectionId')
            expect(await store.findCollection(first.organisation.id, collection.id)).toEqual(collection)
          }
          expect(await arrange((writer) => writer.deleteCollection(second.organisation.id, empty.id))).toBe(false)
          expect(await arrange((writer) => writer.deleteCollection(first.organisation.id, empty.id))).toBe(true)
          expect(await store.findCollection(first.organisation.id, empty.id)).toBeNull()
          expect(await arrange((writer) => writer.deleteCollection(first.organisation.id, empty.id))).toBe(false)

          // Emptied, they go: the prompt deleted, the partial moved out, the child deleted first.
          await arrange(async (writer) => {
            await writer.deletePrompt(first.organisation.id, prompt.id)
            expect(await writer.deleteCollection(first.organisation.id, withPrompt.id)).toBe(true)
            await writer.updatePartial({ ...partial, collectionId: null, lastUpdatedAt: at(9_000) }, partial.lastUpdatedAt)
            expect(await writer.deleteCollection(first.organisation.id, withPartial.id)).toBe(true)
            expect(await writer.deleteCollection(first.organisation.id, child.id)).toBe(true)
            expect(await writer.deleteCollection(first.organisation.id, parent.id)).toBe(true)
          })
          expect((await store.listCollections(first.organisation.id, {}, everything)).total).toBe(0)
        })

        it('deletes a workspace with its collections, prompts, versions, partials and labels; counts its prompts as dependants', async () => {
          const seed = await bootstrapped()
          const doomed = makeWorkspace(seed.organisation.id)
          await arrange((writer) => writer.insertWorkspace(doomed))
          await store.ensureBuiltInLabels(seed.organisation.id, at(0))
          const doomedCollection = makeCollection(seed.organisation.id, doomed.id, { isDefault: true })
          const keptCollection = await defaultCollection(seed)
          await arrange((writer) => writer.insertCollection(doomedCollection))
          const doomedPrompts = [await promptWithVersions(doomedCollection, 2), await promptWithVersions(doomedCollection, 1)]
          const keptPrompt = await promptWithVersions(keptCollection, 2)
          const doomedLabel = makeLabel(seed.organisation.id, doomed.id, { name: 'canary' })
          const keptLabel = makeLabel(seed.organisation.id, seed.workspace.id, { name: 'canary' })
          const doomedPartial = makePartial(seed.organisation.id, doomed.id, { name: 'footer', collectionId: doomedCollection.id })
          const keptPartial = makePartial(seed.organisation.id, seed.workspace.id, { name: 'footer' })
          await arrange(async (writer) => {
            await writer.insertLabel(doomedLabel)
            await writer.insertLabel(keptLabel)
            await writer.insertPartial(doomedPartial, makePartialVersion(doomedPartial, 1))
            await writer.insertPartialVersion(makePartialVersion(doomedPartial, 2))
            await writer.insertPartial(keptPartial, makePartialVersion(keptPartial, 1))
            const [labelled] = doomedPrompts
            if (labelled !== undefined) await writer.setPromptVersionLabel(labelled.prompt.id, labelled.versions[0]?.id ?? '', doomedLabel.id)
          })
          expect(await store.workspaceDependants(seed.organisation.id, doomed.id)).toEqual({ apiKeys: 0, virtualKeys: 0, configs: 0, prompts: 2 })
          expect(await store.workspaceDependants(seed.organisation.id, seed.workspace.id)).toEqual({ apiKeys: 0, virtualKeys: 0, configs: 0, prompts: 1 })

          await arrange((writer) => writer.deleteWorkspace(seed.organisation.id, doomed.id))

          expect(await store.workspaceDependants(seed.organisation.id, doomed.id)).toEqual({ apiKeys: 0, virtualKeys: 0, configs: 0, prompts: 0 })
          expect(await store.findCollection(seed.organisation.id, doomedCollection.id)).toBeNull()
          expect(await store.findDefaultCollection(doomed.id)).toBeNull()
          for (const { prompt } of doomedPrompts) {
            expect(await store.findPrompt(seed.organisation.id, prompt.id)).toBeNull()
            expect(await store.listPromptVersions(prompt.id)).toEqual([])
          }
          expect(await store.findLabel(seed.organisation.id, doomedLabel.id)).toBeNull()
          expect(await store.findPartial(seed.organisation.id, doomedPartial.id)).toBeNull()
          expect(await store.listPartialVersions(doomedPartial.id)).toEqual([])
          expect(await store.findPartialByName(doomed.id, 'footer')).toBeNull()

          expect(await store.findDefaultCollection(seed.workspace.id)).toEqual(keptCollection)
          expect(await store.listPromptVersions(keptPrompt.prompt.id)).toEqual([...keptPrompt.versions].reverse())
          expect(await store.findLabelByName(seed.organisation.id, seed.workspace.id, 'canary')).toEqual(keptLabel)
          expect(await store.findPartialByName(seed.workspace.id, 'footer')).toEqual(keptPartial)
          // The built-in labels belong to the organisation and stay.
          expect((await store.listLabels(seed.organisation.id, {}, everything)).items.filter((label) => label.isUniversal)).toHaveLength(3)
        })

        it('does not cascade into a workspace of another organisation with the same id', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const collection = await defaultCollection(first)
          const { prompt, versions } = await promptWithVersions(collection, 1)
          expect(await store.workspaceDependants(second.organisation.id, first.workspace.id)).toMatchObject({ prompts: 0 })
          await arrange((writer) => writer.deleteWorkspace(second.organisation.id, first.workspace.id))
          expect(await store.findPrompt(first.organisation.id, prompt.id)).toEqual(prompt)
          expect(await store.listPromptVersions(prompt.id)).toEqual(versions)
          expect(await store.findDefaultCollection(first.workspace.id)).toEqual(collection)
        })
      })

      describe('write', () => {
        it('keeps nothing of a prompt write, audit entry included, when the work throws', async () => {
          const seed = await bootstrapped()
          const collection = await defaultCollection(seed)
          const existing = await promptWithVersions(collection, 1)
          const existingVersion = existing.versions[0] as PromptVersionRecord
          const label = makeLabel(seed.organisation.id, seed.workspace.id)
          await arrange((writer) => writer.insertLabel(label))
          const fresh = makeCollection(seed.organisation.id, seed.workspace.id)
          const prompt = makePrompt(fresh)
          const partial = makePartial(seed.organisation.id, seed.workspace.id)
          const failure = new Error('changed my mind')
          const audit = makeAudit(seed.organisation.id, { resourceType: 'prompt' })

          const error = await rejectionOf(
            store.write(audit, async (writer) => {
              await writer.insertCollection(fresh)
              await writer.insertPrompt(prompt, makePromptVersion(prompt, 1))
              await writer.insertPromptVersion(makePromptVersion(prompt, 2))
              await writer.insertPromptVersion(makePromptVersion(existing.prompt, 2))
              await writer.updatePrompt({ ...existing.prompt, latestVersion: 2, lastUpdatedAt: at(9_000) }, existing.prompt.lastUpdatedAt)
              await writer.setPromptVersionLabel(existing.prompt.id, existingVersion.id, label.id)
              await writer.deleteLabel(seed.organisation.id, label.id)
              await writer.insertPartial(partial, makePartialVersion(partial, 1))
              throw failure
            }),
          )
          expect(error).toBe(failure)
          expect(await store.findCollection(seed.organisation.id, fresh.id)).toBeNull()
          expect(await store.findPrompt(seed.organisation.id, prompt.id)).toBeNull()
          expect(await store.listPromptVersions(prompt.id)).toEqual([])
          expect(await store.findPrompt(seed.organisation.id, existing.prompt.id)).toEqual(existing.prompt)
          expect(await store.listPromptVersions(existing.prompt.id)).toEqual(existing.versions)
          expect(await store.findLabel(seed.organisation.id, label.id)).toEqual(label)
          expect(await store.findPartial(seed.organisation.id, partial.id)).toBeNull()
          expect(await auditsOf(seed.organisation.id)).toEqual([])
        })

        it('stores a prompt with its first version and the audit entry together', async () => {
          const seed = await bootstrapped()
          const collection = makeCollection(seed.organisation.id, seed.workspace.id, { isDefault: true })
          const prompt = makePrompt(collection)
          const version = makePromptVersion(prompt, 1)
          const audit = makeAudit(seed.organisation.id, { resourceType: 'prompt', resourceId: prompt.slug })
          const result = await store.write(audit, async (writer) => {
            await writer.insertCollection(collection)
            await writer.insertPrompt(prompt, version)
            return prompt.id
          })
          expect(result).toBe(prompt.id)
          expect(await store.findPrompt(seed.organisation.id, prompt.slug)).toEqual(prompt)
          expect(await store.findPromptVersion(prompt.id, { kind: 'published' })).toEqual(version)
          expect(await auditsOf(seed.organisation.id)).toEqual([audit])
        })
      })
    })
    describe('configs', () => {
      const everything = { offset: 0, limit: 100 }

      /** A config with versions 1..count inserted; the record carries version `count` as its latest. */
      async function configWithVersions(
        organisationId: string,
        workspaceId: string,
        count: number,
        overrides: Partial<ConfigRecord> = {},
      ): Promise<{ config: ConfigRecord; versions: ConfigVersionRecord[] }> {
        const { config: initial, first } = makeConfig(organisationId, workspaceId, overrides)
        const later = Array.from({ length: count - 1 }, (_, index) => makeConfigVersion(initial, index + 2))
        const latest = later.at(-1) ?? first
        const config: ConfigRecord = { ...initial, version: latest.version, versionId: latest.id, config: latest.config, lastUpdatedAt: at(9_000) }
        await arrange(async (writer) => {
          await writer.insertConfig(initial, first)
          for (const version of later) await writer.insertConfigVersion(version)
          if (later.length > 0) expect(await writer.updateConfig(config, initial.lastUpdatedAt)).toBe(true)
        })
        return { config: later.length > 0 ? config : initial, versions: [first, ...later] }
      }

      describe('round trips and finding', () => {
        it('keeps a config and its versions exactly: the JSON text byte for byte, nulls and flags', async () => {
          const seed = await bootstrapped()
          const text =
            '{"strategy":{"mode":"conditional","conditions":[{"query":{"metadata.$tier.x":{"$in":["a\\"b","ü"]}},"then":"t1"}],"default":"t1"},' +
            '"targets":[{"name":"t1","virtual_key":"vk-ünï","override_params":{"__proto__":1,"a.b":{"$set":null}},"custom_host":"http://127.0.0.1:9/v1"}]}'
          const { config, first } = makeConfig(seed.organisation.id, seed.workspace.id, {
            config: text,
            name: 'Ünïcödé "routing"',
            isDefault: true,
            status: 'archived',
            ownerId: null,
            updatedBy: null,
          })
          await arrange((writer) => writer.insertConfig(config, first))
          expect(await store.findConfig(seed.organisation.id, config.id)).toEqual(config)
          expect(await store.findConfig(seed.organisation.id, config.slug)).toEqual(config)
          expect((await store.findConfig(seed.organisation.id, config.slug))?.config).toBe(text)
          expect(await store.listConfigVersions(config.id, everything)).toEqual({ total: 1, items: [first] })
        })

        it('finds a config by id or slug only within its organisation; an id match wins over a slug match', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const { config } = await configWithVersions(first.organisation.id, first.workspace.id, 1)
          for (const key of [config.id, config.slug]) {
            expect(await store.findConfig(first.organisation.id, key)).toEqual(config)
            expect(await store.findConfig(second.organisation.id, key)).toBeNull()
          }
          expect(await store.findConfig(first.organisation.id, 'pc-unknown')).toBeNull()
          expect(await store.findConfig(first.organisation.id, randomUUID())).toBeNull()
          expect(await store.findConfig(first.organisation.id, '')).toBeNull()

          const impostor = makeConfig(first.organisation.id, first.workspace.id, { slug: randomUUID() })
          const target = makeConfig(first.organisation.id, first.workspace.id, { id: impostor.config.slug })
          await arrange(async (writer) => {
            await writer.insertConfig(impostor.config, impostor.first)
            await writer.insertConfig(target.config, target.first)
          })
          expect(await store.findConfig(first.organisation.id, impostor.config.slug)).toEqual(target.config)
          expect(await store.findConfig(first.organisation.id, impostor.config.id)).toEqual(impostor.config)
        })

        it('serves the latest version from the record once an update moves it', async () => {
          const seed = await bootstrapped()
          const { config, versions } = await configWithVersions(seed.organisation.id, seed.workspace.id, 3)
          const latest = versions[2] as ConfigVersionRecord
          const found = await store.findConfig(seed.organisation.id, config.slug)
          expect(found).toMatchObject({ version: 3, versionId: latest.id, config: latest.config })
        })
      })

      describe('versions', () => {
        it('lists versions newest first, paged, with the total', async () => {
          const seed = await bootstrapped()
          const { config, versions } = await configWithVersions(seed.organisation.id, seed.workspace.id, 4)
          const newestFirst = [...versions].reverse()
          expect(await store.listConfigVersions(config.id, everything)).toEqual({ total: 4, items: newestFirst })
          expect(await store.listConfigVersions(config.id, { offset: 1, limit: 2 })).toEqual({ total: 4, items: newestFirst.slice(1, 3) })
          expect(await store.listConfigVersions(config.id, { offset: 10, limit: 2 })).toEqual({ total: 4, items: [] })
          expect(await store.listConfigVersions(randomUUID(), everything)).toEqual({ total: 0, items: [] })
          const other = await configWithVersions(seed.organisation.id, seed.workspace.id, 1)
          expect((await store.listConfigVersions(other.config.id, everything)).items).toEqual(other.versions)
        })

        it('refuses a version number a config already has, and a first version that is not the record’s', async () => {
          const seed = await bootstrapped()
          const { config, versions } = await configWithVersions(seed.organisation.id, seed.workspace.id, 2)
          await expectConflict(arrange((writer) => writer.insertConfigVersion(makeConfigVersion(config, 2))), 'version')
          expect((await store.listConfigVersions(config.id, everything)).items).toEqual([...versions].reverse())
          // Another config may use the same numbers.
          const other = makeConfig(seed.organisation.id, seed.workspace.id)
          await arrange(async (writer) => {
            await writer.insertConfig(other.config, other.first)
            await writer.insertConfigVersion(makeConfigVersion(other.config, 2))
          })
          const mismatched = makeConfig(seed.organisation.id, seed.workspace.id)
          await expect(arrange((writer) => writer.insertConfig(mismatched.config, { ...mismatched.first, config: '{}' }))).rejects.toThrow()
          await expect(arrange((writer) => writer.insertConfig(mismatched.config, { ...mismatched.first, version: 2 }))).rejects.toThrow()
          expect(await store.findConfig(seed.organisation.id, mismatched.config.id)).toBeNull()
        })
      })

      describe('listings', () => {
        it('lists configs in creation order with workspace and default filters, paging and totals', async () => {
          const seed = await bootstrapped()
          const stranger = await bootstrapped()
          const other = makeWorkspace(seed.organisation.id)
          await arrange((writer) => writer.insertWorkspace(other))
          const made = [
            makeConfig(seed.organisation.id, seed.workspace.id, { createdAt: at(3_000), isDefault: true }),
            makeConfig(seed.organisation.id, seed.workspace.id, { createdAt: at(1_000) }),
            makeConfig(seed.organisation.id, other.id, { createdAt: at(2_000), isDefault: true }),
            makeConfig(seed.organisation.id, seed.workspace.id, { createdAt: at(1_000) }),
          ]
          const foreign = makeConfig(stranger.organisation.id, stranger.workspace.id)
          await arrange(async (writer) => {
            for (const { config, first } of [...made, foreign]) await writer.insertConfig(config, first)
          })
          const configs = made.map((entry) => entry.config)
          const [main, , otherDefault] = configs as [ConfigRecord, ConfigRecord, ConfigRecord, ConfigRecord]
          expect(await store.listConfigs(seed.organisation.id, {}, everything)).toEqual({ total: 4, items: byCreation(configs) })
          const inWorkspace = byCreation(configs.filter((config) => config.workspaceId === seed.workspace.id))
          expect(await store.listConfigs(seed.organisation.id, { workspaceId: seed.workspace.id }, everything)).toEqual({ total: 3, items: inWorkspace })
          expect(await store.listConfigs(seed.organisation.id, { workspaceId: seed.workspace.id }, { offset: 1, limit: 1 })).toEqual({
            total: 3,
            items: inWorkspace.slice(1, 2),
          })
          expect(await store.listConfigs(seed.organisation.id, { workspaceId: seed.workspace.id, isDefault: true }, everything)).toEqual({ total: 1, items: [main] })
          expect(await store.listConfigs(seed.organisation.id, { isDefault: true }, everything)).toEqual({ total: 2, items: byCreation([main, otherDefault]) })
          expect((await store.listConfigs(seed.organisation.id, { isDefault: false }, everything)).total).toBe(2)
          expect(await store.listConfigs(stranger.organisation.id, {}, everything)).toEqual({ total: 1, items: [foreign.config] })
        })
      })

      describe('uniqueness', () => {
        it('refuses a slug used in the organisation, and a second default config of a workspace', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const other = makeWorkspace(first.organisation.id)
          await arrange((writer) => writer.insertWorkspace(other))
          const { config } = await configWithVersions(first.organisation.id, first.workspace.id, 1, { isDefault: true })
          const twin = makeConfig(first.organisation.id, other.id, { slug: config.slug })
          await expectConflict(arrange((writer) => writer.insertConfig(twin.config, twin.first)), 'slug')
          expect(await store.findConfig(first.organisation.id, twin.config.id)).toBeNull()
          expect((await store.listConfigVersions(twin.config.id, everything)).total).toBe(0)
          // Another organisation may use the slug.
          const elsewhere = makeConfig(second.organisation.id, second.workspace.id, { slug: config.slug })
          await arrange((writer) => writer.insertConfig(elsewhere.config, elsewhere.first))
          expect(await store.findConfig(second.organisation.id, config.slug)).toEqual(elsewhere.config)
          expect(await store.findConfig(first.organisation.id, config.slug)).toEqual(config)

          const secondDefault = makeConfig(first.organisation.id, first.workspace.id, { isDefault: true })
          await expectConflict(arrange((writer) => writer.insertConfig(secondDefault.config, secondDefault.first)), 'isDefault')
          // Any number of other configs, and another workspace's default.
          const plain = makeConfig(first.organisation.id, first.workspace.id)
          const otherDefault = makeConfig(first.organisation.id, other.id, { isDefault: true })
          await arrange(async (writer) => {
            await writer.insertConfig(plain.config, plain.first)
            await writer.insertConfig(otherDefault.config, otherDefault.first)
          })
          await expectConflict(
            arrange((writer) => writer.updateConfig({ ...plain.config, isDefault: true, lastUpdatedAt: at(9_500) }, plain.config.lastUpdatedAt)),
            'isDefault',
          )
          // Handing the default over within one write: the old one first stops being the default.
          await arrange(async (writer) => {
            expect(await writer.updateConfig({ ...config, isDefault: false, lastUpdatedAt: at(9_500) }, config.lastUpdatedAt)).toBe(true)
            expect(await writer.updateConfig({ ...plain.config, isDefault: true, lastUpdatedAt: at(9_500) }, plain.config.lastUpdatedAt)).toBe(true)
          })
          expect(await store.listConfigs(first.organisation.id, { workspaceId: first.workspace.id, isDefault: true }, everything)).toEqual({
            total: 1,
            items: [{ ...plain.config, isDefault: true, lastUpdatedAt: at(9_500) }],
          })
        })
      })

      describe('optimistic updates', () => {
        it('applies a config update only at the expected lastUpdatedAt, within the organisation', async () => {
          const seed = await bootstrapped()
          const stranger = await bootstrapped()
          const { config } = await configWithVersions(seed.organisation.id, seed.workspace.id, 1)
          const later = at(60_000)
          expect(await arrange((writer) => writer.updateConfig({ ...config, name: 'Stale' }, at(59_000)))).toBe(false)
          expect(await arrange((writer) => writer.updateConfig({ ...config, organisationId: stranger.organisation.id, name: 'Foreign' }, config.lastUpdatedAt))).toBe(false)
          expect(await store.findConfig(seed.organisation.id, config.id)).toEqual(config)
          const fresh = { ...config, name: 'Fresh', status: 'archived' as const, updatedBy: 'user-9', lastUpdatedAt: later }
          expect(await arrange((writer) => writer.updateConfig(fresh, config.lastUpdatedAt))).toBe(true)
          expect(await store.findConfig(seed.organisation.id, config.slug)).toEqual(fresh)
          // The version read before the update is stale now.
          expect(await arrange((writer) => writer.updateConfig({ ...fresh, name: 'Again' }, config.lastUpdatedAt))).toBe(false)
        })
      })

      describe('dependants', () => {
        it('finds the API keys and workspaces whose default config is the config, by id or by slug, in the organisation only', async () => {
          const seed = await bootstrapped()
          const stranger = await bootstrapped()
          const { config } = await configWithVersions(seed.organisation.id, seed.workspace.id, 1)
          const bySlug = makeApiKey(seed.organisation.id, { workspaceId: seed.workspace.id, defaults: { metadata: { team: 'a' }, configId: config.slug }, createdAt: at(3_500) })
          const byId = makeApiKey(seed.organisation.id, { workspaceId: seed.workspace.id, defaults: { metadata: null, configId: config.id }, createdAt: at(3_000) })
          const unrelated = makeApiKey(seed.organisation.id, { workspaceId: seed.workspace.id, defaults: { metadata: null, configId: 'pc-other' } })
          const bare = makeApiKey(seed.organisation.id, { workspaceId: seed.workspace.id, defaults: null })
          const noConfig = makeApiKey(seed.organisation.id, { workspaceId: seed.workspace.id, defaults: { metadata: { a: 'b' }, configId: null } })
          const foreign = makeApiKey(stranger.organisation.id, { defaults: { metadata: null, configId: config.slug } })
          const workspace = makeWorkspace(seed.organisation.id, { defaults: { metadata: null, configId: config.slug } })
          const otherWorkspace = makeWorkspace(seed.organisation.id, { defaults: { metadata: null, configId: null } })
          await arrange(async (writer) => {
            for (const key of [bySlug, byId, unrelated, bare, noConfig, foreign]) await writer.insertApiKey(key)
            await writer.insertWorkspace(workspace)
            await writer.insertWorkspace(otherWorkspace)
          })
          expect(await store.configDependants(seed.organisation.id, [config.id, config.slug])).toEqual({ apiKeys: [byId, bySlug], workspaces: [workspace] })
          expect(await store.configDependants(seed.organisation.id, [config.slug])).toEqual({ apiKeys: [bySlug], workspaces: [workspace] })
          expect(await store.configDependants(seed.organisation.id, [])).toEqual({ apiKeys: [], workspaces: [] })
          expect(await store.configDependants(stranger.organisation.id, [config.id, config.slug])).toEqual({ apiKeys: [foreign], workspaces: [] })
          // Written SQL or regex is matched literally.
          expect(await store.configDependants(seed.organisation.id, ["pc-%' OR '1'='1", '.*'])).toEqual({ apiKeys: [], workspaces: [] })
        })
      })

      describe('deletes', () => {
        it('deletes a config with all its versions, within the organisation', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const doomed = await configWithVersions(first.organisation.id, first.workspace.id, 3)
          const kept = await configWithVersions(first.organisation.id, first.workspace.id, 2)
          expect(await arrange((writer) => writer.deleteConfig(second.organisation.id, doomed.config.id))).toBe(false)
          expect((await store.listConfigVersions(doomed.config.id, everything)).total).toBe(3)
          expect(await arrange((writer) => writer.deleteConfig(first.organisation.id, doomed.config.id))).toBe(true)
          expect(await store.findConfig(first.organisation.id, doomed.config.id)).toBeNull()
          expect(await store.findConfig(first.organisation.id, doomed.config.slug)).toBeNull()
          expect(await store.listConfigVersions(doomed.config.id, everything)).toEqual({ total: 0, items: [] })
          expect((await store.listConfigVersions(kept.config.id, everything)).items).toEqual([...kept.versions].reverse())
          expect(await arrange((writer) => writer.deleteConfig(first.organisation.id, doomed.config.id))).toBe(false)
          // The slug is free again.
          const reused = makeConfig(first.organisation.id, first.workspace.id, { slug: doomed.config.slug })
          await arrange((writer) => writer.insertConfig(reused.config, reused.first))
          expect(await store.findConfig(first.organisation.id, doomed.config.slug)).toEqual(reused.config)
        })

        it('deletes a workspace with its configs and their versions; counts its configs as dependants', async () => {
          const seed = await bootstrapped()
          const doomed = makeWorkspace(seed.organisation.id)
          await arrange((writer) => writer.insertWorkspace(doomed))
          const doomedConfigs = [
            await configWithVersions(seed.organisation.id, doomed.id, 2, { isDefault: true }),
            await configWithVersions(seed.organisation.id, doomed.id, 1),
          ]
          const kept = await configWithVersions(seed.organisation.id, seed.workspace.id, 2)
          expect(await store.workspaceDependants(seed.organisation.id, doomed.id)).toEqual({ apiKeys: 0, virtualKeys: 0, configs: 2, prompts: 0 })
          expect(await store.workspaceDependants(seed.organisation.id, seed.workspace.id)).toMatchObject({ configs: 1 })

          await arrange((writer) => writer.deleteWorkspace(seed.organisation.id, doomed.id))

          expect(await store.workspaceDependants(seed.organisation.id, doomed.id)).toMatchObject({ configs: 0 })
          for (const { config } of doomedConfigs) {
            expect(await store.findConfig(seed.organisation.id, config.id)).toBeNull()
            expect(await store.listConfigVersions(config.id, everything)).toEqual({ total: 0, items: [] })
          }
          expect(await store.findConfig(seed.organisation.id, kept.config.slug)).toEqual(kept.config)
          expect((await store.listConfigVersions(kept.config.id, everything)).total).toBe(2)
        })

        it('does not cascade into a workspace of another organisation with the same id', async () => {
          const first = await bootstrapped()
          const second = await bootstrapped()
          const { config, versions } = await configWithVersions(first.organisation.id, first.workspace.id, 2)
          expect(await store.workspaceDependants(second.organisation.id, first.workspace.id)).toMatchObject({ configs: 0 })
          await arrange((writer) => writer.deleteWorkspace(second.organisation.id, first.workspace.id))
          expect(await store.findConfig(first.organisation.id, config.id)).toEqual(config)
          expect((await store.listConfigVersions(config.id, everything)).items).toEqual([...versions].reverse())
        })
      })

      describe('write', () => {
        it('keeps nothing of a config write, audit entry included, when the work throws', async () => {
          const seed = await bootstrapped()
          const existing = await configWithVersions(seed.organisation.id, seed.workspace.id, 1)
          const fresh = makeConfig(seed.organisation.id, seed.workspace.id)
          const next = makeConfigVersion(existing.config, 2)
          const failure = new Error('changed my mind')
          const audit = makeAudit(seed.organisation.id, { resourceType: 'config' })
          const error = await rejectionOf(
            store.write(audit, async (writer) => {
              await writer.insertConfig(fresh.config, fresh.first)
              await writer.insertConfigVersion(next)
              await writer.updateConfig({ ...existing.config, version: 2, versionId: next.id, config: next.config, lastUpdatedAt: at(9_900) }, existing.config.lastUpdatedAt)
              throw failure
            }),
          )
          expect(error).toBe(failure)
          expect(await store.findConfig(seed.organisation.id, fresh.config.id)).toBeNull()
          expect(await store.findConfig(seed.organisation.id, existing.config.id)).toEqual(existing.config)
          expect((await store.listConfigVersions(existing.config.id, everything)).items).toEqual(existing.versions)
          expect(await auditsOf(seed.organisation.id)).toEqual([])

          const removal = await rejectionOf(
            store.write(audit, async (writer) => {
              await writer.deleteConfig(seed.organisation.id, existing.config.id)
              throw failure
            }),
          )
          expect(removal).toBe(failure)
          expect(await store.findConfig(seed.organisation.id, existing.config.id)).toEqual(existing.config)
        })

        it('stores a config with its first version and the audit entry together', async () => {
          const seed = await bootstrapped()
          const { config, first } = makeConfig(seed.organisation.id, seed.workspace.id)
          const audit = makeAudit(seed.organisation.id, { resourceType: 'config', resourceId: config.id })
          const result = await store.write(audit, async (writer) => {
            await writer.insertConfig(config, first)
            return config.slug
          })
          expect(result).toBe(config.slug)
          expect(await store.findConfig(seed.organisation.id, config.slug)).toEqual(config)
          expect(await store.listConfigVersions(config.id, everything)).toEqual({ total: 1, items: [first] })
          expect(await auditsOf(seed.organisation.id)).toEqual([audit])
        })
      })
    })
  })
}
