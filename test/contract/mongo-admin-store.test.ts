import { createHash, randomUUID } from 'node:crypto'
import { BSON, MongoClient, MongoServerError, type ClientSession } from 'mongodb'
import { afterAll, describe, expect, it } from 'vitest'
import {
  ADMIN_COLLECTION_SPECS,
  indexDescription,
  type AdminCollectionRole,
  type AdminCollections,
} from '../../adapters/mongo/mongo-admin-collections.js'
import {
  apiKeyFromDocument,
  apiKeyToDocument,
  auditFromDocument,
  auditToDocument,
  collectionFromDocument,
  collectionToDocument,
  configFromDocument,
  configToDocument,
  configVersionFromDocument,
  configVersionToDocument,
  inviteFromDocument,
  inviteToDocument,
  labelFromDocument,
  labelToDocument,
  memberFromDocument,
  memberToDocument,
  organisationFromDocument,
  organisationToDocument,
  partialFromDocument,
  partialToDocument,
  partialVersionFromDocument,
  partialVersionToDocument,
  promptFromDocument,
  promptToDocument,
  promptVersionFromDocument,
  promptVersionToDocument,
  toDate,
  userFromDocument,
  userToDocument,
  workspaceFromDocument,
  workspaceToDocument,
} from '../../adapters/mongo/mongo-admin-documents.js'
import {
  apiKeyQuery,
  auditQuery,
  collectionQuery,
  configDependantQuery,
  configQuery,
  escapeRegex,
  inviteQuery,
  labelQuery,
  memberQuery,
  partialQuery,
  promptQuery,
  userQuery,
  workspaceQuery,
} from '../../adapters/mongo/mongo-admin-filters.js'
import { MongoAdminStore } from '../../adapters/mongo/mongo-admin-store.js'
import { MongoAdminWriter } from '../../adapters/mongo/mongo-admin-writer.js'
import { conflictFor, isDuplicateKeyError } from '../../adapters/mongo/mongo-conflicts.js'
import { databaseNameOf, supportsTransactions } from '../../adapters/mongo/mongo-connection.js'
import type {
  ApiKeyRecord,
  AuditEntry,
  BootstrapSeed,
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
  UserRecord,
  WorkspaceMemberRecord,
  WorkspaceRecord,
} from '../../core/admin-records.js'
import { isGatewayError } from '../../core/errors.js'
import type { AdminWriter } from '../../core/ports.js'
import { mongoTarget } from '../helpers/mongod.js'
import { freePorts } from '../helpers/services.js'
import { describeAdminStoreContract } from './admin-store.contract.js'

const SKIPPED = 'MongoDB contract suite skipped: set MONGODB_URI or put mongod on the PATH'

const T0 = Date.parse('2024-03-01T10:00:00.000Z')

function at(offsetMs: number): string {
  return new Date(T0 + offsetMs).toISOString()
}

function hashOf(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

// ---------------------------------------------------------------------------------------------
// Records with every field set, so round trips cover each mapping.

function organisation(overrides: Partial<OrganisationRecord> = {}): OrganisationRecord {
  return {
    id: randomUUID(),
    name: 'Acme Ltd',
    createdAt: at(0),
    jwt: {
      jwksUrl: null,
      jwks: { keys: [{ kty: 'RSA', kid: 'k1', n: 'abc', e: 'AQAB', $odd: 1, 'dotted.name': [1, { nested: null }] }] },
      issuer: 'https://idp.test/',
      audience: ['gateway', 'api.example.test'],
      updatedAt: at(1),
    },
    ...overrides,
  }
}

function user(organisationId: string, overrides: Partial<UserRecord> = {}): UserRecord {
  return {
    id: randomUUID(),
    organisationId,
    email: 'ada@acme.test',
    firstName: 'Ada',
    lastName: 'Lovelace',
    role: 'owner',
    passwordHash: 'scrypt$16384$8$1$c2FsdA$aGFzaA',
    createdAt: at(0),
    lastUpdatedAt: at(10),
    ...overrides,
  }
}

function workspace(organisationId: string, overrides: Partial<WorkspaceRecord> = {}): WorkspaceRecord {
  const id = randomUUID()
  return {
    id,
    slug: `ws-${id.slice(0, 8)}`,
    organisationId,
    name: 'Research',
    description: 'R&D',
    defaults: {
      // Keys MongoDB field names handle badly, and one that must stay data.
      metadata: Object.fromEntries([
        ['team', 'a'],
        ['a.b', 'dotted'],
        ['$set', 'dollar'],
        ['__proto__', 'proto'],
      ]),
      configId: 'cfg-1',
    },
    usageLimits: [{ type: 'cost', creditLimit: 12.5, alertThreshold: 10, periodicReset: 'monthly', periodicResetDays: null }],
    rateLimits: [{ type: 'requests', unit: 'rpm', value: 600 }],
    createdAt: at(1_000),
    lastUpdatedAt: at(2_000),
    ...overrides,
  }
}

function member(organisationId: string, workspaceId: string, userId: string, overrides: Partial<WorkspaceMemberRecord> = {}): WorkspaceMemberRecord {
  return {
    workspaceId,
    userId,
    organisationId,
    role: 'admin',
    createdAt: at(3_000),
    lastUpdatedAt: at(3_000),
    ...overrides,
  }
}

function invite(organisationId: string, overrides: Partial<InviteRecord> = {}): InviteRecord {
  return {
    id: randomUUID(),
    organisationId,
    tokenHash: hashOf(randomUUID()),
    email: 'grace@acme.test',
    role: 'member',
    workspaces: [{ workspaceId: randomUUID(), role: 'manager' }],
    apiKeyScopes: ['completions.write'],
    invitedBy: randomUUID(),
    state: 'pending',
    createdAt: at(4_000),
    expiresAt: at(86_400_000),
    acceptedAt: null,
    lastUpdatedAt: at(4_000),
    ...overrides,
  }
}

function apiKey(organisationId: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return {
    id: randomUUID(),
    keyHash: hashOf(randomUUID()),
    maskedKey: 'gw********xyz',
    name: 'Key',
    description: null,
    type: 'workspace-service',
    organisationId,
    workspaceId: randomUUID(),
    userId: null,
    scopes: ['z.last', 'a.first', '', 'ünïcödé ✓', 'same', 'same'],
    status: 'active',
    expiresAt: at(172_800_000),
    creationMode: 'api',
    rateLimits: [{ type: 'tokens', unit: 'rpd', value: 1_000_000 }],
    usageLimits: { type: 'tokens', creditLimit: 5e9, alertThreshold: null, periodicReset: null, periodicResetDays: 7 },
    defaults: { metadata: null, configId: null },
    alertEmails: ['ops@acme.test'],
    previousKeyHash: null,
    previousKeyExpiresAt: null,
    lastRotatedAt: null,
    createdAt: at(5_000),
    lastUpdatedAt: at(6_000),
    ...overrides,
  }
}

function auditEntry(organisationId: string | null, overrides: Partial<AuditEntry> = {}): AuditEntry {
  return {
    id: randomUUID(),
    timestamp: at(7_000),
    organisationId,
    workspaceId: null,
    userId: randomUUID(),
    userType: 'api_key',
    apiKeyId: null,
    method: 'POST',
    uri: '/v1/admin/workspaces?x=1',
    requestId: randomUUID(),
    requestBody: '{"name":"Research"}',
    queryParams: '{"x":"1"}',
    responseStatusCode: 200,
    resourceType: 'workspace',
    action: 'create',
    resourceId: null,
    clientIp: '127.0.0.1',
    ...overrides,
  }
}

function collection(organisationId: string, overrides: Partial<CollectionRecord> = {}): CollectionRecord {
  return {
    id: randomUUID(),
    slug: 'default-a1b2c3',
    organisationId,
    workspaceId: randomUUID(),
    name: 'Default',
    parentCollectionId: randomUUID(),
    isDefault: true,
    status: 'active',
    createdAt: at(8_000),
    lastUpdatedAt: at(8_001),
    ...overrides,
  }
}

function prompt(organisationId: string, overrides: Partial<PromptRecord> = {}): PromptRecord {
  return {
    id: randomUUID(),
    slug: 'pp-support-a1b2c3',
    organisationId,
    workspaceId: randomUUID(),
    collectionId: randomUUID(),
    name: 'Support',
    status: 'active',
    publishedVersion: 1,
    latestVersion: 2,
    createdAt: at(9_000),
    lastUpdatedAt: at(9_001),
    ...overrides,
  }
}

function promptVersion(owner: PromptRecord, overrides: Partial<PromptVersionRecord> = {}): PromptVersionRecord {
  return {
    id: randomUUID(),
    promptId: owner.id,
    organisationId: owner.organisationId,
    workspaceId: owner.workspaceId,
    version: 2,
    template: '[{"role":"user","content":"{{q}}"}]',
    // Member names MongoDB field names handle badly, and one that must stay data.
    parameters: Object.fromEntries([
      ['temperature', 0.5],
      ['max_tokens', 2 ** 40],
      ['a.b', 'dotted'],
      ['$set', { nested: [1, null, true] }],
      ['__proto__', 'proto'],
    ]),
    model: 'gpt-4o-mini',
    virtualKey: 'vk-main',
    functions: [{ name: 'f', parameters: { $ref: '#/x' } }],
    tools: [{ type: 'function', function: { name: 'f' } }],
    toolChoice: { type: 'function', function: { name: 'f' } },
    description: 'second',
    templateMetadata: { 'owner.team': 'ai' },
    isRawTemplate: true,
    labelId: randomUUID(),
    status: 'archived',
    createdAt: at(9_002),
    ...overrides,
  }
}

function label(organisationId: string, overrides: Partial<LabelRecord> = {}): LabelRecord {
  return {
    id: randomUUID(),
    organisationId,
    workspaceId: randomUUID(),
    name: 'canary',
    description: 'Canary "builds"',
    colorCode: '#ff0000',
    isUniversal: false,
    status: 'active',
    createdAt: at(10_000),
    lastUpdatedAt: at(10_001),
    ...overrides,
  }
}

function partial(organisationId: string, overrides: Partial<PartialRecord> = {}): PartialRecord {
  return {
    id: randomUUID(),
    slug: 'footer-a1b2c3',
    organisationId,
    workspaceId: randomUUID(),
    collectionId: randomUUID(),
    name: 'footer',
    status: 'active',
    publishedVersion: 2,
    latestVersion: 3,
    createdAt: at(11_000),
    lastUpdatedAt: at(11_001),
    ...overrides,
  }
}

function partialVersion(owner: PartialRecord, overrides: Partial<PartialVersionRecord> = {}): PartialVersionRecord {
  return {
    id: randomUUID(),
    partialId: owner.id,
    organisationId: owner.organisationId,
    workspaceId: owner.workspaceId,
    version: 3,
    template: 'Regards, {{name}}',
    description: 'third',
    status: 'active',
    createdAt: at(11_002),
    ...overrides,
  }
}

/** Config JSON with member names MongoDB field names handle badly (`$`, `.`) and a `__proto__` key. */
const ODD_CONFIG = '{"strategy":{"mode":"conditional","conditions":[{"query":{"metadata.a.b":{"$in":["x"]}},"then":"t"}]},"targets":[{"name":"t","virtual_key":"vk","override_params":{"$set":1,"__proto__":{"a":null}}}]}'

function config(organisationId: string, overrides: Partial<ConfigRecord> = {}): ConfigRecord {
  return {
    id: randomUUID(),
    slug: 'pc-main-a1b2c3',
    organisationId,
    workspaceId: randomUUID(),
    name: 'Main "routing"',
    config: ODD_CONFIG,
    version: 3,
    versionId: randomUUID(),
    isDefault: true,
    status: 'archived',
    ownerId: randomUUID(),
    updatedBy: 'key-1',
    createdAt: at(12_000),
    lastUpdatedAt: at(12_001),
    ...overrides,
  }
}

function configVersion(owner: ConfigRecord, overrides: Partial<ConfigVersionRecord> = {}): ConfigVersionRecord {
  return {
    id: owner.versionId,
    configId: owner.id,
    organisationId: owner.organisationId,
    workspaceId: owner.workspaceId,
    version: owner.version,
    config: owner.config,
    createdBy: owner.updatedBy,
    createdAt: at(12_002),
    ...overrides,
  }
}

function seed(options: { keyHash?: string } = {}): BootstrapSeed {
  const org = organisation({ jwt: null })
  const owner = user(org.id)
  const defaultWorkspace = workspace(org.id, { name: 'Default', createdAt: org.createdAt, lastUpdatedAt: org.createdAt })
  return {
    organisation: org,
    owner,
    workspace: defaultWorkspace,
    membership: member(org.id, defaultWorkspace.id, owner.id),
    adminKey: apiKey(org.id, {
      type: 'organisation-service',
      workspaceId: null,
      userId: owner.id,
      keyHash: options.keyHash ?? hashOf(randomUUID()),
    }),
  }
}

/** A driver error as `insertOne` raises it for a duplicate (`MongoServerError` built from the write error). */
function duplicateKeyError(keyPattern: Record<string, 1> | undefined, indexName: string, message: 'errmsg' | 'message' = 'errmsg'): MongoServerError {
  return new MongoServerError({
    index: 0,
    code: 11000,
    [message]: `E11000 duplicate key error collection: gw.x index: ${indexName} dup key: { key_hash: "secret-value-123" }`,
    ...(keyPattern === undefined ? {} : { keyPattern, keyValue: Object.fromEntries(Object.keys(keyPattern).map((field) => [field, 'secret-value-123'])) }),
  })
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => null,
    (error: unknown) => error,
  )
}

// ---------------------------------------------------------------------------------------------
// Against a real MongoDB, when there is one.

const target = await mongoTarget()

if (target === null) {
  console.warn(SKIPPED)
  describe.skip('AdminStore contract: MongoDB', () => {
    it(SKIPPED, () => {})
  })
} else {
  const uri = target.uri
  const databases: string[] = []
  const stores: MongoAdminStore[] = []

  async function startStore(databaseName = `gw_test_${randomUUID().replaceAll('-', '')}`): Promise<MongoAdminStore> {
    if (!databases.includes(databaseName)) databases.push(databaseName)
    const store = new MongoAdminStore({ uri, databaseName })
    stores.push(store)
    await store.start()
    return store
  }

  afterAll(async () => {
    await Promise.allSettled(stores.splice(0).map((store) => store.close()))
    const client = new MongoClient(uri)
    try {
      for (const name of databases.splice(0)) await client.db(name).dropDatabase()
    } finally {
      await client.close()
      await target.stop()
    }
  })

  describeAdminStoreContract('MongoDB', () => startStore())

  describe('MongoAdminStore on a real server', () => {
    it('names the field of every unique index in conflicts, without echoing values', async () => {
      const store = await startStore()
      const records = seed()
      await store.bootstrap(records)
      const orgId = records.organisation.id
      const pendingInvite = invite(orgId)
      await store.write(auditEntry(orgId), (writer) => writer.insertInvite(pendingInvite))

      const cases: Array<[string, (writer: AdminWriter) => Promise<unknown>]> = [
        ['id', (writer) => writer.insertWorkspace(workspace(orgId, { id: records.workspace.id, slug: 'other' }))],
        ['slug', (writer) => writer.insertWorkspace(workspace(orgId, { slug: records.workspace.slug }))],
        ['email', (writer) => writer.insertUser(user(orgId, { email: records.owner.email }))],
        ['userId', (writer) => writer.insertMember(member(orgId, records.workspace.id, records.owner.id))],
        ['tokenHash', (writer) => writer.insertInvite(invite(orgId, { tokenHash: pendingInvite.tokenHash }))],
        ['keyHash', (writer) => writer.insertApiKey(apiKey(orgId, { keyHash: records.adminKey.keyHash }))],
      ]
      for (const [param, work] of cases) {
        const error = await rejection(store.write(auditEntry(orgId), work))
        expect(isGatewayError(error), `${param}: ${String(error)}`).toBe(true)
        expect(error).toMatchObject({ code: 'GW_ADMIN_CONFLICT', param })
        expect((error as Error).message).not.toContain(records.adminKey.keyHash)
        expect((error as Error).message).not.toContain(records.owner.email)
      }
      const audit = await store.listAuditEntries(orgId, {}, { offset: 0, limit: 50 })
      expect(audit.total).toBe(1)
    })

    it('keeps nothing of a write whose work swallowed a conflict, and rejects with that conflict', async () => {
      const store = await startStore()
      const records = seed()
      await store.bootstrap(records)
      const orgId = records.organisation.id
      const fresh = workspace(orgId)
      const error = await rejection(
        store.write(auditEntry(orgId), async (writer) => {
          await writer.insertApiKey(apiKey(orgId, { keyHash: records.adminKey.keyHash })).catch(() => undefined)
          await writer.insertWorkspace(fresh).catch(() => undefined)
        }),
      )
      expect(error).toMatchObject({ code: 'GW_ADMIN_CONFLICT', param: 'keyHash' })
      expect(await store.findWorkspace(orgId, fresh.id)).toBeNull()
      expect((await store.listAuditEntries(orgId, {}, { offset: 0, limit: 10 })).total).toBe(0)
    })

    it('lets one of two concurrent optimistic updates win', async () => {
      const store = await startStore()
      const records = seed()
      await store.bootstrap(records)
      const orgId = records.organisation.id
      const results = await Promise.all(
        ['First', 'Second'].map((name, index) =>
          store.write(auditEntry(orgId), (writer) =>
            writer.updateWorkspace({ ...records.workspace, name, lastUpdatedAt: at(10_000 + index) }, records.workspace.lastUpdatedAt),
          ),
        ),
      )
      expect(results.filter(Boolean)).toHaveLength(1)
      const stored = await store.findWorkspace(orgId, records.workspace.id)
      expect(['First', 'Second']).toContain(stored?.name)
    })

    it('prefers a current key hash over another key’s rotated-out one', async () => {
      const store = await startStore()
      const records = seed()
      await store.bootstrap(records)
      const orgId = records.organisation.id
      const shared = hashOf('shared')
      const rotated = apiKey(orgId, { previousKeyHash: shared, previousKeyExpiresAt: at(60_000), lastRotatedAt: at(1) })
      const current = apiKey(orgId, { keyHash: shared })
      await store.write(auditEntry(orgId), async (writer) => {
        await writer.insertApiKey(rotated)
        await writer.insertApiKey(current)
      })
      expect(await store.findApiKeyByHash(shared)).toEqual(current)
      expect(await store.findApiKeyByHash(rotated.keyHash)).toEqual(rotated)
    })

    it('filters workspace names by a literal substring, even with regex characters', async () => {
      const store = await startStore()
      const records = seed()
      await store.bootstrap(records)
      const orgId = records.organisation.id
      const tricky = workspace(orgId, { name: 'Team (a+b)* [x]' })
      await store.write(auditEntry(orgId), async (writer) => {
        await writer.insertWorkspace(tricky)
        await writer.insertWorkspace(workspace(orgId, { name: 'Team aab' }))
      })
      const page = await store.listWorkspaces(orgId, { name: '(a+b)*' }, { offset: 0, limit: 10 })
      expect(page).toEqual({ total: 1, items: [tricky] })
      expect((await store.listWorkspaces(orgId, { name: 'team' }, { offset: 0, limit: 10 })).total).toBe(0)
    })

    it('filters audit entries by exact path (any query string) or prefix, newest first', async () => {
      const store = await startStore()
      const orgId = randomUUID()
      const older = auditEntry(orgId, { uri: '/v1/admin/workspaces', timestamp: at(1) })
      const newer = auditEntry(orgId, { uri: '/v1/admin/workspaces?limit=2', timestamp: at(2) })
      const nested = auditEntry(orgId, { uri: '/v1/admin/workspaces/ws-1', timestamp: at(3) })
      for (const entry of [older, newer, nested]) await store.recordAudit(entry)
      expect(await store.listAuditEntries(orgId, { uri: '/v1/admin/workspaces' }, { offset: 0, limit: 10 })).toEqual({
        total: 2,
        items: [newer, older],
      })
      expect((await store.listAuditEntries(orgId, { uri: '/v1/admin/work*' }, { offset: 0, limit: 10 })).items).toEqual([nested, newer, older])
      expect((await store.listAuditEntries(orgId, { uri: '/v1/admin/work.*' }, { offset: 0, limit: 10 })).total).toBe(0)
    })

    it('starts again on the same database without losing data', async () => {
      const name = `gw_test_${randomUUID().replaceAll('-', '')}`
      const first = await startStore(name)
      const records = seed()
      await first.bootstrap(records)
      await first.close()
      const second = await startStore(name)
      expect(await second.findApiKeyByHash(records.adminKey.keyHash)).toEqual(records.adminKey)
      expect(await rejection(second.bootstrap(seed({ keyHash: records.adminKey.keyHash })))).toMatchObject({ code: 'GW_ADMIN_CONFLICT' })
    })

    it('rejects with a non-GatewayError after close and reports unhealthy', async () => {
      const store = await startStore()
      await store.close()
      const error = await rejection(store.findApiKeyByHash(hashOf('x')))
      expect(error).toBeInstanceOf(Error)
      expect(isGatewayError(error)).toBe(false)
      expect((await store.health()).ok).toBe(false)
    })
  })
}

// ---------------------------------------------------------------------------------------------
// Pure parts, no server needed.

describe('MongoDB admin store: regex escaping', () => {
  const samples = ['plain', 'a.c', '(a+b)*', '[x]{2}', '^start$', 'back\\slash', 'pipe|or', 'q?', 'dash-slash/', 'nul\0byte', 'ünï ✓']

  it('matches exactly the text, as a substring', () => {
    for (const text of samples) {
      const pattern = new RegExp(escapeRegex(text))
      expect(pattern.test(`xx${text}yy`), text).toBe(true)
      expect(new RegExp(`^${escapeRegex(text)}$`).test(text), text).toBe(true)
    }
  })

  it('gives metacharacters no meaning', () => {
    expect(new RegExp(escapeRegex('a.c')).test('abc')).toBe(false)
    expect(new RegExp(escapeRegex('(a+b)*')).test('aab')).toBe(false)
    expect(new RegExp(escapeRegex('x|y')).test('y')).toBe(false)
    expect(new RegExp(`^${escapeRegex('^$')}$`).test('')).toBe(false)
  })

  it('never puts a NUL byte into the pattern (the server refuses one)', () => {
    expect(escapeRegex('a\0b')).toBe('a\\x00b')
    expect(escapeRegex('a\0b')).not.toContain('\0')
  })
})

describe('MongoDB admin store: document mappers', () => {
  const orgId = randomUUID()

  it('round-trips every record type exactly', () => {
    const org = organisation()
    expect(organisationFromDocument(organisationToDocument(org))).toEqual(org)
    expect(organisationFromDocument(organisationToDocument({ ...org, jwt: null }))).toEqual({ ...org, jwt: null })
    const urlJwt = { ...org, jwt: { jwksUrl: 'https://idp.test/jwks.json', jwks: null, issuer: null, audience: null, updatedAt: at(5) } }
    expect(organisationFromDocument(organisationToDocument(urlJwt))).toEqual(urlJwt)
    // A document written before issuer and audience existed lacks them: not set.
    const { issuer: _issuer, audience: _audience, ...olderJwt } = organisationToDocument(urlJwt).jwt as NonNullable<ReturnType<typeof organisationToDocument>['jwt']>
    expect(organisationFromDocument({ ...organisationToDocument(urlJwt), jwt: olderJwt })).toEqual(urlJwt)

    const owner = user(orgId)
    expect(userFromDocument(userToDocument(owner))).toEqual(owner)
    expect(userFromDocument(userToDocument({ ...owner, passwordHash: null }))).toEqual({ ...owner, passwordHash: null })

    const ws = workspace(orgId)
    const wsBack = workspaceFromDocument(workspaceToDocument(ws))
    expect(wsBack).toEqual(ws)
    expect(Object.keys(wsBack.defaults?.metadata ?? {})).toEqual(['team', 'a.b', '$set', '__proto__'])
    expect(Object.getPrototypeOf(wsBack.defaults?.metadata)).toBe(Object.prototype)
    const bare = { ...ws, description: null, defaults: null, usageLimits: [], rateLimits: [] }
    expect(workspaceFromDocument(workspaceToDocument(bare))).toEqual(bare)

    const membership = member(orgId, ws.id, owner.id)
    expect(memberFromDocument(memberToDocument(membership))).toEqual(membership)

    const pending = invite(orgId)
    expect(inviteFromDocument(inviteToDocument(pending))).toEqual(pending)
    const accepted = { ...pending, state: 'accepted' as const, acceptedAt: at(9), apiKeyScopes: null, invitedBy: null, workspaces: [] }
    expect(inviteFromDocument(inviteToDocument(accepted))).toEqual(accepted)

    const key = apiKey(orgId)
    expect(apiKeyFromDocument(apiKeyToDocument(key))).toEqual(key)
    const rotated = apiKey(orgId, {
      previousKeyHash: hashOf('old'),
      previousKeyExpiresAt: at(60_000),
      lastRotatedAt: at(1),
      expiresAt: null,
      usageLimits: null,
      defaults: null,
      workspaceId: null,
      scopes: [],
      alertEmails: [],
      rateLimits: [],
    })
    expect(apiKeyFromDocument(apiKeyToDocument(rotated))).toEqual(rotated)

    const entry = auditEntry(orgId)
    expect(auditFromDocument(auditToDocument(entry))).toEqual(entry)
    const anonymous = auditEntry(null, { userId: null, workspaceId: null, requestBody: null, clientIp: null, resourceId: 'r-1' })
    expect(auditFromDocument(auditToDocument(anonymous))).toEqual(anonymous)
  })

  it('round-trips prompt template records exactly: JSON values with odd member names, nulls and booleans', () => {
    const folder = collection(orgId)
    expect(collectionFromDocument(collectionToDocument(folder))).toEqual(folder)
    const plainFolder = { ...folder, parentCollectionId: null, isDefault: false, status: 'archived' as const }
    expect(collectionFromDocument(collectionToDocument(plainFolder))).toEqual(plainFolder)

    const owner = prompt(orgId)
    expect(promptFromDocument(promptToDocument(owner))).toEqual(owner)
    const full = promptVersion(owner)
    const fullBack = promptVersionFromDocument(promptVersionToDocument(full))
    expect(fullBack).toEqual(full)
    expect(Object.keys(fullBack.parameters)).toEqual(['temperature', 'max_tokens', 'a.b', '$set', '__proto__'])
    expect(Object.getPrototypeOf(fullBack.parameters)).toBe(Object.prototype)
    const bare = promptVersion(owner, {
      parameters: {},
      model: null,
      virtualKey: null,
      functions: null,
      tools: null,
      toolChoice: null,
      description: null,
      templateMetadata: null,
      isRawTemplate: false,
      labelId: null,
    })
    expect(promptVersionFromDocument(promptVersionToDocument(bare))).toEqual(bare)
    const stringChoice = promptVersion(owner, { toolChoice: 'auto', functions: [], tools: [], templateMetadata: {} })
    expect(promptVersionFromDocument(promptVersionToDocument(stringChoice))).toEqual(stringChoice)

    const custom = label(orgId)
    expect(labelFromDocument(labelToDocument(custom))).toEqual(custom)
    const builtIn = label(orgId, { workspaceId: null, isUniversal: true, name: 'production', description: null, colorCode: null })
    expect(labelFromDocument(labelToDocument(builtIn))).toEqual(builtIn)

    const piece = partial(orgId)
    expect(partialFromDocument(partialToDocument(piece))).toEqual(piece)
    expect(partialFromDocument(partialToDocument({ ...piece, collectionId: null }))).toEqual({ ...piece, collectionId: null })
    const pieceVersion = partialVersion(piece)
    expect(partialVersionFromDocument(partialVersionToDocument(pieceVersion))).toEqual(pieceVersion)
    expect(partialVersionFromDocument(partialVersionToDocument({ ...pieceVersion, description: null }))).toEqual({ ...pieceVersion, description: null })
  })

  it('round-trips prompt template documents through BSON, keeping the tenant’s JSON as text', () => {
    const viaBson = <T extends object>(document: T): T => BSON.deserialize(BSON.serialize(document)) as T
    const owner = prompt(orgId)
    const version = promptVersion(owner)
    const document = promptVersionToDocument(version)
    expect(typeof document.parameters_json).toBe('string')
    expect(document.label_id).toBe(version.labelId)
    expect(promptVersionFromDocument(viaBson(document))).toEqual(version)
    expect(promptFromDocument(viaBson(promptToDocument(owner)))).toEqual(owner)
    const folder = collection(orgId)
    expect(collectionFromDocument(viaBson(collectionToDocument(folder)))).toEqual(folder)
    const builtIn = label(orgId, { workspaceId: null, isUniversal: true })
    expect(labelFromDocument(viaBson(labelToDocument(builtIn)))).toEqual(builtIn)
    const piece = partial(orgId)
    expect(partialFromDocument(viaBson(partialToDocument(piece)))).toEqual(piece)
    const pieceVersion = partialVersion(piece)
    expect(partialVersionFromDocument(viaBson(partialVersionToDocument(pieceVersion)))).toEqual(pieceVersion)
  })

  it('round-trips config records and documents exactly, through BSON too, keeping the config as the text it was', () => {
    const viaBson = <T extends object>(document: T): T => BSON.deserialize(BSON.serialize(document)) as T
    const saved = config(orgId)
    const document = configToDocument(saved)
    expect(document.config_json).toBe(ODD_CONFIG)
    expect(configFromDocument(document)).toEqual(saved)
    expect(configFromDocument(viaBson(document))).toEqual(saved)
    const plain = config(orgId, { isDefault: false, status: 'active', ownerId: null, updatedBy: null, version: 1 })
    expect(configFromDocument(viaBson(configToDocument(plain)))).toEqual(plain)
    const version = configVersion(saved)
    expect(configVersionFromDocument(configVersionToDocument(version))).toEqual(version)
    expect(configVersionFromDocument(viaBson(configVersionToDocument({ ...version, createdBy: null })))).toEqual({ ...version, createdBy: null })
    expect(() => configToDocument({ ...saved, version: 1.5 })).toThrow(expect.objectContaining({ code: 'GW_ADMIN_VALIDATION', param: 'version' }))
    expect(() => configVersionToDocument({ ...version, createdAt: 'never' })).toThrow(expect.objectContaining({ code: 'GW_ADMIN_VALIDATION', param: 'createdAt' }))
    // A document edited by hand to hold a parsed object fails loudly, not as a GatewayError.
    const edited = { ...document, config_json: { strategy: { mode: 'single' } } } as unknown as typeof document
    expect(() => configFromDocument(edited)).toThrow(/config_json is not JSON text/)
  })

  it('rejects a version number that is not an integer with GW_ADMIN_VALIDATION naming the field', () => {
    const owner = prompt(orgId)
    expect(() => promptVersionToDocument(promptVersion(owner, { version: 1.5 }))).toThrow(
      expect.objectContaining({ code: 'GW_ADMIN_VALIDATION', param: 'version' }),
    )
    expect(() => promptToDocument({ ...owner, publishedVersion: Number.NaN })).toThrow(expect.objectContaining({ param: 'publishedVersion' }))
    expect(() => partialToDocument(partial(orgId, { latestVersion: 2 ** 60 }))).toThrow(expect.objectContaining({ param: 'latestVersion' }))
  })

  it('round-trips through BSON as the driver encodes it (numbers, dates, odd keys)', () => {
    const viaBson = <T extends object>(document: T): T => BSON.deserialize(BSON.serialize(document)) as T
    const ws = workspace(orgId)
    expect(workspaceFromDocument(viaBson(workspaceToDocument(ws)))).toEqual(ws)
    const key = apiKey(orgId, { previousKeyHash: hashOf('old'), previousKeyExpiresAt: at(1), lastRotatedAt: at(2) })
    expect(apiKeyFromDocument(viaBson(apiKeyToDocument(key)))).toEqual(key)
    const org = organisation()
    expect(organisationFromDocument(viaBson(organisationToDocument(org)))).toEqual(org)
    const pending = invite(orgId)
    expect(inviteFromDocument(viaBson(inviteToDocument(pending)))).toEqual(pending)
    const entry = auditEntry(orgId)
    expect(auditFromDocument(viaBson(auditToDocument(entry)))).toEqual(entry)
    expect(() => BSON.serialize(workspaceQuery('o', { name: 'a\0b' }))).not.toThrow()
    expect(() => BSON.serialize(auditQuery('o', { uri: '/v1/x\0*' }))).not.toThrow()
  })

  it('stores ids as _id, timestamps as dates, and leaves an unset previous key hash out', () => {
    const key = apiKey(orgId)
    const document = apiKeyToDocument(key)
    expect(document._id).toBe(key.id)
    expect(document.created_at).toBeInstanceOf(Date)
    expect(document.created_at.toISOString()).toBe(key.createdAt)
    expect('previous_key_hash' in document).toBe(false)
    expect(apiKeyToDocument({ ...key, previousKeyHash: 'abc' }).previous_key_hash).toBe('abc')
    expect(typeof organisationToDocument(organisation()).jwt?.jwks_json).toBe('string')
  })

  it('rejects an unparsable timestamp with GW_ADMIN_VALIDATION naming the field', () => {
    const bad = (): unknown => workspaceToDocument(workspace(orgId, { lastUpdatedAt: 'yesterday' }))
    expect(bad).toThrow(expect.objectContaining({ code: 'GW_ADMIN_VALIDATION', param: 'lastUpdatedAt' }))
    expect(() => toDate('not a date', 'startTime')).toThrow(expect.objectContaining({ code: 'GW_ADMIN_VALIDATION', param: 'startTime' }))
    expect(toDate('2024-03-01T10:00:00.000Z', 'x').getTime()).toBe(T0)
  })

  it('fails loudly, and not as a GatewayError, on a stored field that is not a date', () => {
    const document = { ...userToDocument(user(orgId)), created_at: 'text' as unknown as Date }
    let error: unknown
    try {
      userFromDocument(document)
    } catch (caught) {
      error = caught
    }
    expect(error).toBeInstanceOf(Error)
    expect(isGatewayError(error)).toBe(false)
  })
})

describe('MongoDB admin store: duplicate keys → conflicts', () => {
  const byRole = (role: AdminCollectionRole): readonly (typeof ADMIN_COLLECTION_SPECS)[number]['indexes'][number][] =>
    ADMIN_COLLECTION_SPECS.find((spec) => spec.role === role)?.indexes ?? []

  it('maps each unique index by key pattern to its field, without echoing values', () => {
    const expected: Array<[AdminCollectionRole, string, string]> = [
      ['users', 'organisation_id_1_email_1', 'email'],
      ['workspaces', 'organisation_id_1_slug_1', 'slug'],
      ['members', 'workspace_id_1_user_id_1', 'userId'],
      ['invites', 'token_hash_1', 'tokenHash'],
      ['apiKeys', 'key_hash_1', 'keyHash'],
      ['promptCollections', 'organisation_id_1_slug_1', 'slug'],
      ['promptCollections', 'workspace_id_1_is_default_1', 'isDefault'],
      ['prompts', 'organisation_id_1_slug_1', 'slug'],
      ['promptVersions', 'prompt_id_1_version_1', 'version'],
      ['promptVersions', 'prompt_id_1_label_id_1', 'labelId'],
      ['labels', 'organisation_id_1_workspace_id_1_name_1', 'name'],
      ['partials', 'organisation_id_1_slug_1', 'slug'],
      ['partials', 'workspace_id_1_name_1', 'name'],
      ['partialVersions', 'partial_id_1_version_1', 'version'],
      ['configs', 'organisation_id_1_slug_1', 'slug'],
      ['configs', 'workspace_id_1_is_default_1', 'isDefault'],
      ['configVersions', 'config_id_1_version_1', 'version'],
    ]
    for (const [role, indexName, param] of expected) {
      const index = byRole(role).find((candidate) => candidate.name === indexName)
      expect(index?.unique, indexName).toBe(true)
      const error = conflictFor(role, duplicateKeyError({ ...index?.key } as Record<string, 1>, indexName))
      expect(error).toMatchObject({ code: 'GW_ADMIN_CONFLICT', status: 409, param })
      expect(error?.message).not.toContain('secret-value-123')
    }
  })

  it('covers every unique index of the layout', () => {
    for (const spec of ADMIN_COLLECTION_SPECS) {
      for (const index of spec.indexes.filter((candidate) => candidate.unique === true)) {
        expect(index.conflict, `${spec.role}.${index.name}`).toBeDefined()
        const error = conflictFor(spec.role, duplicateKeyError({ ...index.key } as Record<string, 1>, index.name))
        expect(error?.param).toBe(index.conflict?.param)
      }
    }
  })

  it('maps a duplicate _id to `id`', () => {
    expect(conflictFor('workspaces', duplicateKeyError({ _id: 1 }, '_id_'))).toMatchObject({
      param: 'id',
      message: 'A workspace with this id already exists',
    })
    expect(conflictFor('apiKeys', duplicateKeyError(undefined, '_id_'))?.message).toBe('An API key with this id already exists')
  })

  it('falls back to the index name in the message when the key pattern is missing', () => {
    expect(conflictFor('users', duplicateKeyError(undefined, 'organisation_id_1_email_1'))).toMatchObject({ param: 'email' })
    expect(conflictFor('users', duplicateKeyError(undefined, 'organisation_id_1_email_1', 'message'))).toMatchObject({ param: 'email' })
  })

  it('still reports a conflict, naming no field, for an unknown index', () => {
    const error = conflictFor('invites', duplicateKeyError({ other: 1 }, 'other_1'))
    expect(error).toMatchObject({ code: 'GW_ADMIN_CONFLICT', param: null })
    expect(error?.message).toBe('An invite with the same values already exists')
  })

  it('leaves other errors alone, including transient duplicates the driver retries', () => {
    expect(conflictFor('users', new Error('connection refused'))).toBeNull()
    expect(conflictFor('users', new MongoServerError({ code: 112, errmsg: 'WriteConflict' }))).toBeNull()
    expect(conflictFor('users', null)).toBeNull()
    const transient = new MongoServerError({ code: 11000, errmsg: 'E11000', keyPattern: { _id: 1 }, errorLabels: ['TransientTransactionError'] })
    expect(isDuplicateKeyError(transient)).toBe(false)
    expect(conflictFor('users', transient)).toBeNull()
    expect(isDuplicateKeyError(duplicateKeyError({ _id: 1 }, '_id_'))).toBe(true)
  })
})

describe('MongoDB admin store: queries', () => {
  it('builds list filters as documented on the filter types', () => {
    expect(userQuery('o', {})).toEqual({ organisation_id: 'o' })
    expect(userQuery('o', { role: 'admin', email: 'a@b.test' })).toEqual({ organisation_id: 'o', role: 'admin', email: 'a@b.test' })

    expect(workspaceQuery('o', { name: 'a.b', exactName: 'x a.b', ids: ['w1', 'w2'] })).toEqual({
      organisation_id: 'o',
      name: { $regex: 'a\\.b', $eq: 'x a.b' },
      _id: { $in: ['w1', 'w2'] },
    })
    expect(workspaceQuery('o', {})).toEqual({ organisation_id: 'o' })

    expect(memberQuery('w', undefined, null)).toEqual({ workspace_id: 'w' })
    expect(memberQuery('w', 'manager', ['u1'])).toEqual({ workspace_id: 'w', role: 'manager', user_id: { $in: ['u1'] } })

    expect(apiKeyQuery('o', { workspaceId: 'w', types: ['workspace-user'] })).toEqual({
      organisation_id: 'o',
      workspace_id: 'w',
      type: { $in: ['workspace-user'] },
    })
  })

  it('builds the prompt template filters: case-insensitive literal search of name or slug, a workspace’s labels with the built-in ones', () => {
    expect(promptQuery('o', {})).toEqual({ organisation_id: 'o' })
    expect(promptQuery('o', { workspaceId: 'w', collectionId: 'c', search: 'a.b(' })).toEqual({
      organisation_id: 'o',
      workspace_id: 'w',
      collection_id: 'c',
      $or: [{ name: { $regex: 'a\\.b\\(', $options: 'i' } }, { slug: { $regex: 'a\\.b\\(', $options: 'i' } }],
    })
    expect(collectionQuery('o', { workspaceId: 'w', search: 'x' })).toEqual({
      organisation_id: 'o',
      workspace_id: 'w',
      $or: [{ name: { $regex: 'x', $options: 'i' } }, { slug: { $regex: 'x', $options: 'i' } }],
    })
    expect(labelQuery('o', {})).toEqual({ organisation_id: 'o' })
    expect(labelQuery('o', { workspaceId: 'w', search: '%' })).toEqual({
      organisation_id: 'o',
      $and: [{ $or: [{ workspace_id: 'w' }, { is_universal: true }] }, { $or: [{ name: { $regex: '%', $options: 'i' } }] }],
    })
    expect(partialQuery('o', { workspaceId: 'w', collectionId: 'c' })).toEqual({ organisation_id: 'o', workspace_id: 'w', collection_id: 'c' })
  })

  it('builds the config filters: workspace and default flag; dependants by default config id or slug, matched exactly', () => {
    expect(configQuery('o', {})).toEqual({ organisation_id: 'o' })
    expect(configQuery('o', { workspaceId: 'w', isDefault: false })).toEqual({ organisation_id: 'o', workspace_id: 'w', is_default: false })
    expect(configDependantQuery('o', ['id-1', 'pc-a.*'])).toEqual({ organisation_id: 'o', 'defaults.config_id': { $in: ['id-1', 'pc-a.*'] } })
  })

  it('derives invite status from state and expiry', () => {
    const now = at(0)
    const nowDate = new Date(now)
    expect(inviteQuery('o', { status: 'pending' }, now)).toEqual({ organisation_id: 'o', state: 'pending', expires_at: { $gt: nowDate } })
    expect(inviteQuery('o', { status: 'expired' }, now)).toEqual({ organisation_id: 'o', state: 'pending', expires_at: { $lte: nowDate } })
    expect(inviteQuery('o', { status: 'accepted', role: 'admin', email: 'x@y.test' }, now)).toEqual({
      organisation_id: 'o',
      role: 'admin',
      email: 'x@y.test',
      state: 'accepted',
    })
    expect(() => inviteQuery('o', { status: 'pending' }, 'soon')).toThrow(expect.objectContaining({ code: 'GW_ADMIN_VALIDATION' }))
  })

  it('builds audit filters: time bounds inclusive, exact fields, exact path or prefix', () => {
    expect(
      auditQuery('o', {
        startTime: at(0),
        endTime: at(1),
        method: 'POST',
        requestId: 'r',
        userId: 'u',
        userType: 'user',
        workspaceId: 'w',
        resourceType: 'workspace',
        action: 'create',
        responseStatusCode: 409,
        clientIp: '::1',
      }),
    ).toEqual({
      organisation_id: 'o',
      timestamp: { $gte: new Date(at(0)), $lte: new Date(at(1)) },
      method: 'POST',
      request_id: 'r',
      user_id: 'u',
      user_type: 'user',
      workspace_id: 'w',
      resource_type: 'workspace',
      action: 'create',
      response_status_code: 409,
      client_ip: '::1',
    })
    expect(auditQuery('o', { uri: '/v1/a.b' })).toEqual({
      organisation_id: 'o',
      $or: [{ uri: '/v1/a.b' }, { uri: { $regex: '^\\/v1\\/a\\.b\\?' } }],
    })
    expect(auditQuery('o', { uri: '/v1/admin*' })).toEqual({ organisation_id: 'o', uri: { $regex: '^\\/v1\\/admin' } })
    expect(() => auditQuery('o', { endTime: 'later' })).toThrow(expect.objectContaining({ param: 'endTime' }))
  })
})

describe('MongoDB admin store: connection helpers', () => {
  it('reads the database name from the URI path, else none', () => {
    expect(databaseNameOf('mongodb://127.0.0.1:27017/gw?replicaSet=rs0')).toBe('gw')
    expect(databaseNameOf('mongodb://u:p%40ss@h1:1,h2:2/admin_store')).toBe('admin_store')
    expect(databaseNameOf('mongodb+srv://user:pw@cluster.example.net/prod?retryWrites=true')).toBe('prod')
    expect(databaseNameOf('mongodb://h1,h2/?replicaSet=rs0')).toBeNull()
    expect(databaseNameOf('mongodb://h1')).toBeNull()
    expect(databaseNameOf('mongodb://%2Ftmp%2Fmongodb-27017.sock/sockdb')).toBe('sockdb')
    expect(databaseNameOf('mongodb://h/?appName=a/b@c')).toBeNull()
    expect(databaseNameOf('http://h/db')).toBeNull()
  })

  it('recognises deployments that run transactions', () => {
    expect(supportsTransactions({ isWritablePrimary: true, setName: 'rs0' })).toBe(true)
    expect(supportsTransactions({ isWritablePrimary: true, msg: 'isdbgrid' })).toBe(true)
    expect(supportsTransactions({ isWritablePrimary: true })).toBe(false)
  })

  it('describes indexes for createIndexes', () => {
    expect(indexDescription({ name: 'k', key: { a: 1 }, unique: true })).toEqual({ name: 'k', key: { a: 1 }, unique: true })
    expect(indexDescription({ name: 's', key: { b: -1 }, sparse: true })).toEqual({ name: 's', key: { b: -1 }, sparse: true })
    expect(indexDescription({ name: 'p', key: { c: 1 }, unique: true, partialFilter: { c: { $type: 'string' } } })).toEqual({
      name: 'p',
      key: { c: 1 },
      unique: true,
      partialFilterExpression: { c: { $type: 'string' } },
    })
  })

  it('fails closed, with a non-GatewayError, when the server cannot be reached or the store is not started', async () => {
    const [port] = (await freePorts(1)) as [number]
    const store = new MongoAdminStore({ uri: `mongodb://127.0.0.1:${port}/gw?serverSelectionTimeoutMS=300` })
    expect(await store.health()).toEqual({ ok: false, detail: 'admin store is not started' })
    const notStarted = await rejection(store.findUser('o', 'u'))
    expect(notStarted).toBeInstanceOf(Error)
    expect(isGatewayError(notStarted)).toBe(false)
    const unreachable = await rejection(store.start())
    expect(unreachable).toBeInstanceOf(Error)
    expect(isGatewayError(unreachable)).toBe(false)
    expect((await store.health()).ok).toBe(false)
  })
})

describe('MongoAdminWriter queueing (stub collections, no server)', () => {
  type Call = { name: string; args: unknown[] }

  /** Collections whose every method records the call and defers to `respond`. */
  function stubCollections(calls: Call[], respond: (name: string) => Promise<unknown>): AdminCollections {
    const collection = (collectionName: string): unknown =>
      new Proxy(
        {},
        {
          get: (_target, method) => (...args: unknown[]) => {
            const name = `${collectionName}.${String(method)}`
            calls.push({ name, args })
            return respond(name)
          },
        },
      )
    return new Proxy({}, { get: (_target, role) => collection(String(role)) }) as AdminCollections
  }

  const session = {} as ClientSession
  const orgId = randomUUID()

  it('runs operations one at a time in call order, each with the session', async () => {
    const calls: Call[] = []
    let release: () => void = () => {}
    const first = new Promise<void>((resolve) => {
      release = resolve
    })
    const writer = new MongoAdminWriter(
      stubCollections(calls, (name) => (name === 'users.insertOne' ? first.then(() => ({})) : Promise.resolve({}))),
      session,
    )
    const both = Promise.all([writer.insertUser(user(orgId)), writer.insertWorkspace(workspace(orgId))])
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(calls.map((call) => call.name)).toEqual(['users.insertOne'])
    release()
    await both
    expect(calls.map((call) => call.name)).toEqual(['users.insertOne', 'workspaces.insertOne'])
    expect(calls.every((call) => (call.args[1] as { session?: unknown }).session === session)).toBe(true)
    await writer.settle()
  })

  it('poisons itself after a failed write: later operations and settle reject with that error', async () => {
    const calls: Call[] = []
    const writer = new MongoAdminWriter(
      stubCollections(calls, (name) =>
        name === 'users.insertOne'
          ? Promise.reject(duplicateKeyError({ organisation_id: 1, email: 1 }, 'organisation_id_1_email_1'))
          : Promise.resolve({}),
      ),
      session,
    )
    const conflict = await rejection(writer.insertUser(user(orgId)))
    expect(conflict).toMatchObject({ code: 'GW_ADMIN_CONFLICT', param: 'email' })
    expect(await rejection(writer.insertWorkspace(workspace(orgId)))).toBe(conflict)
    expect(await rejection(writer.settle())).toBe(conflict)
    expect(calls.map((call) => call.name)).toEqual(['users.insertOne'])
  })

  it('is not poisoned by a validation error, which never reaches the server', async () => {
    const calls: Call[] = []
    const writer = new MongoAdminWriter(stubCollections(calls, () => Promise.resolve({})), session)
    expect(await rejection(writer.insertUser(user(orgId, { createdAt: 'nope' })))).toMatchObject({ code: 'GW_ADMIN_VALIDATION' })
    await writer.insertWorkspace(workspace(orgId))
    await writer.settle()
    expect(calls.map((call) => call.name)).toEqual(['workspaces.insertOne'])
  })

  it('reports optimistic updates by matched count, matching on the expected timestamp or state', async () => {
    const calls: Call[] = []
    let matched = 1
    const writer = new MongoAdminWriter(stubCollections(calls, () => Promise.resolve({ matchedCount: matched })), session)
    const ws = workspace(orgId)
    expect(await writer.updateWorkspace(ws, at(2_000))).toBe(true)
    matched = 0
    expect(await writer.updateWorkspace(ws, at(2_000))).toBe(false)
    expect(calls[0]?.args[0]).toEqual({ _id: ws.id, organisation_id: orgId, last_updated_at: new Date(at(2_000)) })
    const pending = invite(orgId, { state: 'accepted' })
    await writer.updateInvite(pending, 'pending')
    expect(calls[2]?.args[0]).toEqual({ _id: pending.id, organisation_id: orgId, state: 'pending' })
  })

  it('refuses to delete a non-empty collection without poisoning the transaction', async () => {
    const calls: Call[] = []
    const writer = new MongoAdminWriter(
      stubCollections(calls, (name) => Promise.resolve(name === 'prompts.findOne' ? { _id: 'p1' } : name.endsWith('findOne') ? null : { deletedCount: 1 })),
      session,
    )
    expect(await rejection(writer.deleteCollection(orgId, 'c1'))).toMatchObject({ code: 'GW_ADMIN_CONFLICT', param: 'collectionId' })
    expect(calls.map((call) => call.name)).toEqual(['prompts.findOne'])
    expect(calls[0]?.args[0]).toEqual({ organisation_id: orgId, collection_id: 'c1' })
    await writer.insertWorkspace(workspace(orgId))
    await writer.settle()
  })

  it('deletes an empty collection after looking for prompts, partials and child collections in it', async () => {
    const calls: Call[] = []
    const writer = new MongoAdminWriter(
      stubCollections(calls, (name) => Promise.resolve(name.endsWith('findOne') ? null : { deletedCount: 1 })),
      session,
    )
    expect(await writer.deleteCollection(orgId, 'c1')).toBe(true)
    expect(calls.map((call) => [call.name, call.args[0]])).toEqual([
      ['prompts.findOne', { organisation_id: orgId, collection_id: 'c1' }],
      ['partials.findOne', { organisation_id: orgId, collection_id: 'c1' }],
      ['promptCollections.findOne', { organisation_id: orgId, parent_collection_id: 'c1' }],
      ['promptCollections.deleteOne', { _id: 'c1', organisation_id: orgId }],
    ])
  })

  it('moves a label: off the prompt’s other version first, then onto the version; nothing for an unknown version', async () => {
    const calls: Call[] = []
    let found: unknown = { _id: 'v2' }
    const writer = new MongoAdminWriter(stubCollections(calls, (name) => Promise.resolve(name.endsWith('findOne') ? found : {})), session)
    expect(await writer.setPromptVersionLabel('p1', 'v2', 'l1')).toBe(true)
    expect(calls.map((call) => [call.name, call.args[0], call.args[1]])).toEqual([
      ['promptVersions.findOne', { _id: 'v2', prompt_id: 'p1' }, expect.anything()],
      ['promptVersions.updateMany', { prompt_id: 'p1', label_id: 'l1', _id: { $ne: 'v2' } }, { $set: { label_id: null } }],
      ['promptVersions.updateOne', { _id: 'v2', prompt_id: 'p1' }, { $set: { label_id: 'l1' } }],
    ])
    calls.length = 0
    expect(await writer.setPromptVersionLabel('p1', 'v2', null)).toBe(true)
    expect(calls.map((call) => call.name)).toEqual(['promptVersions.findOne', 'promptVersions.updateOne'])
    calls.length = 0
    found = null
    expect(await writer.setPromptVersionLabel('p1', 'v9', 'l1')).toBe(false)
    expect(calls.map((call) => call.name)).toEqual(['promptVersions.findOne'])
  })

  it('cascades a workspace delete to every prompt template collection, scoped by organisation', async () => {
    const calls: Call[] = []
    // `find` answers a cursor, not a promise.
    const cursor = { toArray: async () => [] }
    const writer = new MongoAdminWriter(
      stubCollections(calls, (name) => (name.endsWith('.find') ? (cursor as unknown as Promise<unknown>) : Promise.resolve({}))),
      session,
    )
    await writer.deleteWorkspace(orgId, 'w1')
    const deletions = calls.filter((call) => call.name.endsWith('deleteMany')).map((call) => [call.name, call.args[0]])
    const owned = { organisation_id: orgId, workspace_id: 'w1' }
    expect(deletions).toEqual(
      expect.arrayContaining(
        ['configVersions', 'configs', 'promptVersions', 'prompts', 'partialVersions', 'partials', 'promptCollections', 'labels', 'virtualKeys', 'members'].map((role) => [
          `${role}.deleteMany`,
          owned,
        ]),
      ),
    )
  })

  it('inserts a config with its first version, and deletes a config with its versions, scoped by organisation', async () => {
    const calls: Call[] = []
    const writer = new MongoAdminWriter(stubCollections(calls, () => Promise.resolve({ deletedCount: 1 })), session)
    const saved = config(orgId, { version: 1 })
    await writer.insertConfig(saved, configVersion(saved))
    expect(await writer.deleteConfig(orgId, saved.id)).toBe(true)
    expect(calls.map((call) => [call.name, call.args[0]])).toEqual([
      ['configs.insertOne', configToDocument(saved)],
      ['configVersions.insertOne', configVersionToDocument(configVersion(saved))],
      ['configs.deleteOne', { _id: saved.id, organisation_id: orgId }],
      ['configVersions.deleteMany', { organisation_id: orgId, config_id: saved.id }],
    ])
    await writer.settle()
  })

  it('refuses a config whose first version is not version 1 of it, before reaching the server', async () => {
    const calls: Call[] = []
    const writer = new MongoAdminWriter(stubCollections(calls, () => Promise.resolve({})), session)
    const saved = config(orgId, { version: 1 })
    expect(await rejection(writer.insertConfig(saved, configVersion(saved, { config: '{}' })))).toBeInstanceOf(TypeError)
    expect(await rejection(writer.insertConfig(saved, configVersion(saved, { configId: randomUUID() })))).toBeInstanceOf(TypeError)
    expect(await rejection(writer.insertConfig({ ...saved, version: 2 }, configVersion(saved, { version: 2 })))).toBeInstanceOf(TypeError)
    expect(calls).toEqual([])
    await writer.settle()
  })

  it('refuses a custom label with a built-in name before reaching the server', async () => {
    const calls: Call[] = []
    const writer = new MongoAdminWriter(stubCollections(calls, () => Promise.resolve({ matchedCount: 1 })), session)
    expect(await rejection(writer.insertLabel(label(orgId, { name: 'production' })))).toMatchObject({ code: 'GW_ADMIN_CONFLICT', param: 'name' })
    const custom = label(orgId)
    expect(await rejection(writer.updateLabel({ ...custom, name: 'staging' }, custom.lastUpdatedAt))).toMatchObject({ param: 'name' })
    await writer.insertLabel(label(orgId, { workspaceId: null, isUniversal: true, name: 'production' }))
    expect(calls.map((call) => call.name)).toEqual(['labels.insertOne'])
    await writer.settle()
  })

  it('refuses work after retirement with a plain error', async () => {
    const writer = new MongoAdminWriter(stubCollections([], () => Promise.resolve({})), session)
    await writer.retire()
    const error = await rejection(writer.insertUser(user(orgId)))
    expect(error).toBeInstanceOf(Error)
    expect(isGatewayError(error)).toBe(false)
  })
})
