import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import {
  COLUMNS,
  apiKeyRow,
  auditRow,
  collectionRow,
  configRow,
  configVersionRow,
  inviteRow,
  labelRow,
  memberRow,
  organisationRow,
  partialRow,
  partialVersionRow,
  promptRow,
  promptVersionRow,
  userRow,
  virtualKeyRow,
  workspaceRow,
} from '../../adapters/embedded/duckdb-admin-rows.js'
import { DuckDbAdminStore } from '../../adapters/embedded/duckdb-admin-store.js'
import { conflictFor } from '../../adapters/embedded/duckdb-conflicts.js'
import { DuckDbDatabase } from '../../adapters/embedded/duckdb-database.js'
import { ADMIN_TABLES } from '../../adapters/embedded/duckdb-schema.js'
import type {
  AuditEntry,
  BootstrapSeed,
  CollectionRecord,
  ConfigRecord,
  InviteRecord,
  LabelRecord,
  PartialRecord,
  PartialVersionRecord,
  PromptRecord,
  PromptVersionRecord,
  VirtualKeyRecord,
} from '../../core/admin-records.js'
import { describeAdminStoreContract } from './admin-store.contract.js'

const directories: string[] = []
const databases: DuckDbDatabase[] = []

async function freshPath(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'gw-duckdb-admin-'))
  directories.push(directory)
  // A nested directory that does not exist yet: the database must create it.
  return join(directory, 'data', 'gateway.duckdb')
}

async function openDatabase(path: string): Promise<DuckDbDatabase> {
  const database = new DuckDbDatabase({ path })
  databases.push(database)
  await database.start()
  return database
}

async function startStore(path: string): Promise<{ database: DuckDbDatabase; store: DuckDbAdminStore }> {
  const database = await openDatabase(path)
  const store = new DuckDbAdminStore(database)
  await store.start()
  return { database, store }
}

afterEach(async () => {
  await Promise.all(databases.splice(0).map((database) => database.close()))
})

afterAll(async () => {
  await Promise.all(directories.splice(0).map((directory) => rm(directory, { recursive: true, force: true })))
})

describeAdminStoreContract('DuckDB file', async () => (await startStore(await freshPath())).store)

describeAdminStoreContract('DuckDB :memory:', async () => (await startStore(':memory:')).store)

const CREATED = '2024-05-06T07:08:09.123Z'

function seed(): BootstrapSeed {
  const organisationId = randomUUID()
  const ownerId = randomUUID()
  const workspaceId = randomUUID()
  return {
    organisation: { id: organisationId, name: 'Persistent Org', createdAt: CREATED, jwt: null },
    owner: {
      id: ownerId,
      organisationId,
      email: 'persist@example.test',
      firstName: 'Grace',
      lastName: 'Hopper',
      role: 'owner',
      passwordHash: null,
      createdAt: CREATED,
      lastUpdatedAt: CREATED,
    },
    workspace: {
      id: workspaceId,
      slug: 'ws-default-abc123',
      organisationId,
      name: 'Default',
      description: null,
      defaults: null,
      usageLimits: [],
      rateLimits: [],
      createdAt: CREATED,
      lastUpdatedAt: CREATED,
    },
    membership: { workspaceId, userId: ownerId, organisationId, role: 'admin', createdAt: CREATED, lastUpdatedAt: CREATED },
    adminKey: {
      id: randomUUID(),
      keyHash: 'a'.repeat(64),
      maskedKey: 'gw********abc',
      name: 'Admin',
      description: null,
      type: 'organisation-service',
      organisationId,
      workspaceId: null,
      userId: ownerId,
      scopes: ['organisation.admin', 'workspaces.write'],
      status: 'active',
      expiresAt: '2030-01-01T00:00:00.000Z',
      creationMode: 'auto',
      rateLimits: [{ type: 'requests', unit: 'rpm', value: 60 }],
      usageLimits: null,
      defaults: null,
      alertEmails: ['ops@example.test'],
      previousKeyHash: null,
      previousKeyExpiresAt: null,
      lastRotatedAt: null,
      createdAt: CREATED,
      lastUpdatedAt: CREATED,
    },
  }
}

function virtualKey(organisationId: string, workspaceId: string, overrides: Partial<VirtualKeyRecord> = {}): VirtualKeyRecord {
  return {
    id: randomUUID(),
    slug: 'main-258f4d',
    organisationId,
    workspaceId,
    name: 'Main',
    note: null,
    provider: 'openai',
    sealedKeys: ['v1.k1.sealed'],
    maskedKey: 'sk********xyz',
    customHost: null,
    sealedModelConfig: null,
    rateLimits: [],
    usageLimits: null,
    status: 'active',
    expiresAt: null,
    createdAt: CREATED,
    lastUpdatedAt: CREATED,
    ...overrides,
  }
}

function promptCollection(organisationId: string, workspaceId: string): CollectionRecord {
  return {
    id: randomUUID(),
    slug: `default-${randomUUID().slice(0, 6)}`,
    organisationId,
    workspaceId,
    name: 'Default',
    parentCollectionId: null,
    isDefault: true,
    status: 'active',
    createdAt: CREATED,
    lastUpdatedAt: CREATED,
  }
}

function promptOf(collection: CollectionRecord): PromptRecord {
  return {
    id: randomUUID(),
    slug: `pp-support-${randomUUID().slice(0, 6)}`,
    organisationId: collection.organisationId,
    workspaceId: collection.workspaceId,
    collectionId: collection.id,
    name: 'Support',
    status: 'active',
    publishedVersion: 1,
    latestVersion: 1,
    createdAt: CREATED,
    lastUpdatedAt: CREATED,
  }
}

function promptVersion(prompt: PromptRecord): PromptVersionRecord {
  return {
    id: randomUUID(),
    promptId: prompt.id,
    organisationId: prompt.organisationId,
    workspaceId: prompt.workspaceId,
    version: 1,
    template: '[{"role":"user","content":"{{question}}"}]',
    parameters: { temperature: 0 },
    model: 'gpt-4o-mini',
    virtualKey: null,
    functions: null,
    tools: [{ type: 'function', function: { name: 'f' } }],
    toolChoice: 'auto',
    description: null,
    templateMetadata: null,
    isRawTemplate: false,
    labelId: null,
    status: 'active',
    createdAt: CREATED,
  }
}

function audit(organisationId: string | null, overrides: Partial<AuditEntry> = {}): AuditEntry {
  return {
    id: randomUUID(),
    timestamp: CREATED,
    organisationId,
    workspaceId: null,
    userId: null,
    userType: 'api_key',
    apiKeyId: null,
    method: 'POST',
    uri: '/v1/admin/workspaces',
    requestId: randomUUID(),
    requestBody: null,
    queryParams: '{}',
    responseStatusCode: 200,
    resourceType: 'workspace',
    action: 'create',
    resourceId: null,
    clientIp: null,
    ...overrides,
  }
}

/** The tables exactly as the first release created them (before users, limits, members, invites and audit). */
/** The audit log table as written before `api_key_id` was added. */
const AUDIT_LOG_BEFORE_API_KEY_ID = `CREATE TABLE audit_log (
  id VARCHAR PRIMARY KEY, timestamp TIMESTAMP NOT NULL, organisation_id VARCHAR, workspace_id VARCHAR, user_id VARCHAR,
  user_type VARCHAR NOT NULL, method VARCHAR NOT NULL, uri VARCHAR NOT NULL, request_id VARCHAR NOT NULL, request_body VARCHAR,
  query_params VARCHAR NOT NULL, response_status_code INTEGER NOT NULL, resource_type VARCHAR NOT NULL, action VARCHAR NOT NULL,
  resource_id VARCHAR, client_ip VARCHAR
)`

const FIRST_RELEASE_DDL = [
  `CREATE TABLE organisations (
    id VARCHAR PRIMARY KEY,
    name VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL
  )`,
  `CREATE TABLE users (
    id VARCHAR PRIMARY KEY,
    organisation_id VARCHAR NOT NULL,
    email VARCHAR NOT NULL,
    first_name VARCHAR NOT NULL,
    last_name VARCHAR NOT NULL,
    role VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL,
    UNIQUE (organisation_id, email)
  )`,
  `CREATE TABLE workspaces (
    id VARCHAR PRIMARY KEY,
    slug VARCHAR NOT NULL,
    organisation_id VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    description VARCHAR,
    created_at TIMESTAMP NOT NULL,
    last_updated_at TIMESTAMP NOT NULL,
    UNIQUE (organisation_id, slug)
  )`,
  `CREATE TABLE api_keys (
    id VARCHAR PRIMARY KEY,
    key_hash VARCHAR NOT NULL UNIQUE,
    masked_key VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    description VARCHAR,
    type VARCHAR NOT NULL,
    organisation_id VARCHAR NOT NULL,
    workspace_id VARCHAR,
    user_id VARCHAR,
    scopes VARCHAR[] NOT NULL,
    status VARCHAR NOT NULL,
    expires_at TIMESTAMP,
    creation_mode VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL,
    last_updated_at TIMESTAMP NOT NULL
  )`,
]

describe('DuckDbAdminStore on a file', () => {
  it('creates the parent directory and keeps data across close and reopen', async () => {
    const path = await freshPath()
    const first = await startStore(path)
    expect(existsSync(path)).toBe(true)
    const records = seed()
    await first.store.bootstrap(records)
    const entry = audit(records.organisation.id)
    await first.store.recordAudit(entry)
    await first.store.close()
    await first.database.close()

    const second = await startStore(path)
    expect(await second.store.findFirstOrganisation()).toEqual(records.organisation)
    expect(await second.store.findUser(records.organisation.id, records.owner.id)).toEqual(records.owner)
    expect(await second.store.findWorkspace(records.organisation.id, records.workspace.slug)).toEqual(records.workspace)
    expect(await second.store.findMember(records.workspace.id, records.owner.id)).toEqual({ member: records.membership, user: records.owner })
    expect(await second.store.findApiKeyByHash(records.adminKey.keyHash)).toEqual(records.adminKey)
    expect((await second.store.listAuditEntries(records.organisation.id, {}, { offset: 0, limit: 10 })).items).toEqual([entry])
    // Uniqueness still holds after reopening (the indexes were persisted too).
    await expect(second.store.bootstrap({ ...seed(), adminKey: { ...seed().adminKey, keyHash: records.adminKey.keyHash } }))
      .rejects.toMatchObject({ code: 'GW_ADMIN_CONFLICT' })
  })

  it('names the field in conflict messages', async () => {
    const { store } = await startStore(await freshPath())
    const records = seed()
    await store.bootstrap(records)
    const orgId = records.organisation.id

    await expect(store.write(audit(orgId), (writer) => writer.insertWorkspace({ ...records.workspace, id: randomUUID() }))).rejects.toMatchObject({
      message: 'A workspace with this slug already exists in the organisation',
      param: 'slug',
    })
    await expect(store.write(audit(orgId), (writer) => writer.insertWorkspace({ ...records.workspace, slug: 'another' }))).rejects.toMatchObject({
      message: 'A workspace with this id already exists',
      param: 'id',
    })
    await expect(store.write(audit(orgId), (writer) => writer.insertApiKey({ ...records.adminKey, id: randomUUID() }))).rejects.toMatchObject({
      message: 'An API key with this key hash already exists',
      param: 'keyHash',
    })
    await expect(store.write(audit(orgId), (writer) => writer.insertMember(records.membership))).rejects.toMatchObject({
      message: 'The user is already a member of this workspace',
      param: 'userId',
    })
    const key = virtualKey(orgId, records.workspace.id)
    await store.write(audit(orgId), (writer) => writer.insertVirtualKey(key))
    await expect(store.write(audit(orgId), (writer) => writer.insertVirtualKey({ ...key, id: randomUUID() }))).rejects.toMatchObject({
      message: 'A virtual key with this slug already exists in the organisation',
      param: 'slug',
    })
    await expect(store.write(audit(orgId), (writer) => writer.insertVirtualKey({ ...key, slug: 'another' }))).rejects.toMatchObject({
      message: 'A virtual key with this id already exists',
      param: 'id',
    })
    await expect(store.bootstrap(records)).rejects.toMatchObject({ message: 'An organisation with this id already exists', param: 'id' })
  })

  it('maps DuckDB duplicate-key errors to conflicts naming the field, also when the columns are not named', async () => {
    const { database, store } = await startStore(await freshPath())
    const records = seed()
    await store.bootstrap(records)
    const session = await database.openSession()
    const users = ADMIN_TABLES.find((table) => table.name === 'users')
    const members = ADMIN_TABLES.find((table) => table.name === 'workspace_members')
    if (users === undefined || members === undefined) throw new Error('tables missing from ADMIN_TABLES')

    // Against a committed row DuckDB names the columns ...
    const committed = await session
      .run(
        `INSERT INTO users (id, organisation_id, email, first_name, last_name, role, created_at, last_updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
        [randomUUID(), records.organisation.id, records.owner.email, 'X', 'Y', 'member', new Date()],
      )
      .then(
        () => null,
        (caught: unknown) => caught,
      )
    expect(conflictFor(users, committed)).toMatchObject({
      code: 'GW_ADMIN_CONFLICT',
      message: 'A user with this email already exists in the organisation',
      param: 'email',
    })

    // ... against a row of the same transaction it gives only the values.
    const sameTransaction = await session
      .transaction(async (tx) => {
        const row = [randomUUID(), randomUUID(), records.organisation.id, 'member', new Date()]
        const insert = `INSERT INTO workspace_members (workspace_id, user_id, organisation_id, role, created_at, last_updated_at)
          VALUES ($1, $2, $3, $4, $5, $5)`
        await tx.run(insert, row)
        await tx.run(insert, row)
      })
      .then(
        () => null,
        (caught: unknown) => caught,
      )
    expect(String(sameTransaction)).not.toMatch(/workspace_id:/)
    expect(conflictFor(members, sameTransaction)).toMatchObject({ code: 'GW_ADMIN_CONFLICT', param: 'userId' })
    expect(conflictFor(users, new Error('IO Error: disk full'))).toBeNull()
    await session.close()
  })

  it('does not echo the duplicate value in the message', async () => {
    const { store } = await startStore(await freshPath())
    const records = seed()
    await store.bootstrap(records)
    const error = await store
      .write(audit(records.organisation.id), (writer) => writer.insertApiKey({ ...records.adminKey, id: randomUUID() }))
      .catch((caught: unknown) => caught)
    expect(String((error as Error).message)).not.toContain(records.adminKey.keyHash)
  })

  it('rejects invalid timestamps and page bounds with validation errors and writes nothing', async () => {
    const { store } = await startStore(await freshPath())
    const records = seed()
    await expect(store.bootstrap({ ...records, workspace: { ...records.workspace, createdAt: 'yesterday' } }))
      .rejects.toMatchObject({ code: 'GW_ADMIN_VALIDATION', param: 'createdAt' })
    expect(await store.findFirstOrganisation()).toBeNull()
    await expect(
      store.bootstrap({ ...records, organisation: { ...records.organisation, jwt: { jwksUrl: null, jwks: null, issuer: null, audience: null, updatedAt: 'soon' } } }),
    ).rejects.toMatchObject({ code: 'GW_ADMIN_VALIDATION', param: 'jwt.updatedAt' })

    await store.bootstrap(records)
    const orgId = records.organisation.id
    const user = { ...records.owner, id: randomUUID(), email: 'other@example.test' }
    await expect(store.write(audit(orgId, { timestamp: 'now' }), (writer) => writer.insertUser(user)))
      .rejects.toMatchObject({ code: 'GW_ADMIN_VALIDATION', param: 'timestamp' })
    await expect(store.write(audit(orgId), (writer) => writer.updateUser(user, 'then')))
      .rejects.toMatchObject({ code: 'GW_ADMIN_VALIDATION', param: 'expectedLastUpdatedAt' })
    expect(await store.findUser(orgId, user.id)).toBeNull()
    expect((await store.listAuditEntries(orgId, {}, { offset: 0, limit: 10 })).total).toBe(0)

    await expect(store.listUsers(orgId, {}, { offset: -1, limit: 10 })).rejects.toMatchObject({ code: 'GW_ADMIN_VALIDATION', param: 'offset' })
    await expect(store.listUsers(orgId, {}, { offset: 0, limit: 1.5 })).rejects.toMatchObject({ code: 'GW_ADMIN_VALIDATION', param: 'limit' })
    await expect(store.listAuditEntries(orgId, { startTime: 'x' }, { offset: 0, limit: 1 })).rejects.toMatchObject({
      code: 'GW_ADMIN_VALIDATION',
      param: 'startTime',
    })
    await expect(store.listInvites(orgId, { status: 'expired' }, { offset: 0, limit: 1 }, 'x')).rejects.toMatchObject({
      code: 'GW_ADMIN_VALIDATION',
      param: 'now',
    })
  })

  it('normalises timestamps to Date#toISOString() form', async () => {
    const { store } = await startStore(await freshPath())
    const records = seed()
    await store.bootstrap({
      ...records,
      organisation: { ...records.organisation, jwt: { jwksUrl: 'https://idp.test/jwks', jwks: null, issuer: null, audience: null, updatedAt: '2024-05-06T09:08:09.5+02:00' } },
      owner: { ...records.owner, createdAt: '2024-05-06T07:08:09Z' },
    })
    expect((await store.findOrganisation(records.organisation.id))?.jwt?.updatedAt).toBe('2024-05-06T07:08:09.500Z')
    expect((await store.findUser(records.organisation.id, records.owner.id))?.createdAt).toBe('2024-05-06T07:08:09.000Z')
  })

  it('rejects with a non-conflict error when used after close (callers fail closed)', async () => {
    const { store } = await startStore(await freshPath())
    await store.close()
    const error = await store.findApiKeyByHash('b'.repeat(64)).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(Error)
    expect((error as { code?: string }).code).not.toBe('GW_ADMIN_CONFLICT')
    await expect(store.write(audit(null), async () => undefined)).rejects.toBeInstanceOf(Error)
    expect((await store.health()).ok).toBe(false)
  })

  it('starts twice on the same database without losing data (tables created only if missing)', async () => {
    const { database, store } = await startStore(await freshPath())
    const records = seed()
    await store.bootstrap(records)
    const again = new DuckDbAdminStore(database)
    await again.start()
    expect(await again.findFirstOrganisation()).toEqual(records.organisation)
    await again.close()
  })

  it('serves reads from the last commit while a write transaction is open, without waiting for it', async () => {
    const { store } = await startStore(await freshPath())
    const records = seed()
    await store.bootstrap(records)
    const orgId = records.organisation.id
    const user = { ...records.owner, id: randomUUID(), email: 'pending@example.test' }
    let release: () => void = () => undefined
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    let inserted: () => void = () => undefined
    const insertedSignal = new Promise<void>((resolve) => {
      inserted = resolve
    })
    const writing = store.write(audit(orgId), async (writer) => {
      await writer.insertUser(user)
      inserted()
      await held
    })
    await insertedSignal
    // The transaction is open and holds an uncommitted user: reads neither see it nor queue behind it.
    expect(await store.findUser(orgId, user.id)).toBeNull()
    expect((await store.listUsers(orgId, {}, { offset: 0, limit: 10 })).total).toBe(1)
    release()
    await writing
    expect(await store.findUser(orgId, user.id)).toEqual(user)
  })

  it('keeps the transaction usable after a conflict the work caught (uniqueness is checked before writing)', async () => {
    const { store } = await startStore(await freshPath())
    const records = seed()
    await store.bootstrap(records)
    const orgId = records.organisation.id
    const workspace = { ...records.workspace, id: randomUUID(), slug: 'fallback' }
    await store.write(audit(orgId), async (writer) => {
      const clash = await writer.insertWorkspace({ ...workspace, slug: records.workspace.slug }).catch((caught: unknown) => caught)
      expect(clash).toMatchObject({ code: 'GW_ADMIN_CONFLICT', param: 'slug' })
      await writer.insertWorkspace(workspace)
    })
    expect(await store.findWorkspace(orgId, 'fallback')).toEqual(workspace)
  })
})

describe('DuckDB admin rows', () => {
  it('reads back every column it writes', () => {
    const records = seed()
    const invite: InviteRecord = {
      id: randomUUID(),
      organisationId: records.organisation.id,
      tokenHash: 'c'.repeat(64),
      email: 'invitee@example.test',
      role: 'member',
      workspaces: [],
      apiKeyScopes: null,
      invitedBy: null,
      state: 'pending',
      createdAt: CREATED,
      expiresAt: CREATED,
      acceptedAt: null,
      lastUpdatedAt: CREATED,
    }
    const collection = promptCollection(records.organisation.id, records.workspace.id)
    const prompt = promptOf(collection)
    const label: LabelRecord = {
      id: randomUUID(),
      organisationId: records.organisation.id,
      workspaceId: records.workspace.id,
      name: 'canary',
      description: null,
      colorCode: null,
      isUniversal: false,
      status: 'active',
      createdAt: CREATED,
      lastUpdatedAt: CREATED,
    }
    const partial: PartialRecord = {
      id: randomUUID(),
      slug: 'partial-abc123',
      organisationId: records.organisation.id,
      workspaceId: records.workspace.id,
      collectionId: null,
      name: 'footer',
      status: 'active',
      publishedVersion: 1,
      latestVersion: 1,
      createdAt: CREATED,
      lastUpdatedAt: CREATED,
    }
    const partialVersion: PartialVersionRecord = {
      id: randomUUID(),
      partialId: partial.id,
      organisationId: partial.organisationId,
      workspaceId: partial.workspaceId,
      version: 1,
      template: 'Regards',
      description: null,
      status: 'active',
      createdAt: CREATED,
    }
    const config: ConfigRecord = {
      id: randomUUID(),
      slug: 'pc-main-abc123',
      organisationId: records.organisation.id,
      workspaceId: records.workspace.id,
      name: 'main',
      config: '{"retry":{"attempts":2}}',
      version: 1,
      versionId: randomUUID(),
      isDefault: true,
      status: 'active',
      ownerId: null,
      updatedBy: null,
      createdAt: CREATED,
      lastUpdatedAt: CREATED,
    }
    const written = {
      organisations: organisationRow(records.organisation),
      users: userRow(records.owner),
      workspaces: workspaceRow(records.workspace),
      workspace_members: memberRow(records.membership),
      invites: inviteRow(invite),
      api_keys: apiKeyRow(records.adminKey),
      virtual_keys: virtualKeyRow(virtualKey(records.organisation.id, records.workspace.id)),
      audit_log: auditRow(audit(null)),
      collections: collectionRow(collection),
      prompts: promptRow(prompt),
      prompt_versions: promptVersionRow(promptVersion(prompt)),
      labels: labelRow(label),
      partials: partialRow(partial),
      partial_versions: partialVersionRow(partialVersion),
      configs: configRow(config),
      config_versions: configVersionRow({
        id: config.versionId,
        configId: config.id,
        organisationId: config.organisationId,
        workspaceId: config.workspaceId,
        version: 1,
        config: config.config,
        createdBy: null,
        createdAt: CREATED,
      }),
    }
    for (const [table, row] of Object.entries(written)) {
      expect([...COLUMNS[table as keyof typeof COLUMNS]].sort(), table).toEqual(Object.keys(row).sort())
    }
    expect(Object.keys(COLUMNS).sort()).toEqual(ADMIN_TABLES.map((table) => table.name).sort())
  })
})

describe('DuckDbAdminStore migration from the first release', () => {
  it('adds the new columns and tables on start, keeping and filling the old rows', async () => {
    const path = await freshPath()
    const database = await openDatabase(path)
    const session = await database.openSession()
    const orgId = randomUUID()
    const userId = randomUUID()
    const workspaceId = randomUUID()
    const keyId = randomUUID()
    const created = new Date('2023-01-02T03:04:05.678Z')
    const updated = new Date('2023-02-03T04:05:06.789Z')
    for (const ddl of FIRST_RELEASE_DDL) await session.run(ddl)
    await session.run('INSERT INTO organisations (id, name, created_at) VALUES ($1, $2, $3)', [orgId, 'Old Org', created])
    await session.run(
      'INSERT INTO users (id, organisation_id, email, first_name, last_name, role, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [userId, orgId, 'old@example.test', 'Old', 'Timer', 'owner', created],
    )
    await session.run(
      `INSERT INTO workspaces (id, slug, organisation_id, name, description, created_at, last_updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [workspaceId, 'ws-old', orgId, 'Old workspace', null, created, updated],
    )
    await session.run(
      `INSERT INTO api_keys (id, key_hash, masked_key, name, description, type, organisation_id, workspace_id, user_id, scopes,
         status, expires_at, creation_mode, created_at, last_updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
      [keyId, 'd'.repeat(64), 'gw********old', 'Old key', null, 'workspace-service', orgId, workspaceId, null, ['completions.write'],
        'active', null, 'api', created, updated],
    )
    // The audit log before it named the key a request came through: a service key's entry, a user's entry.
    await session.run(AUDIT_LOG_BEFORE_API_KEY_ID)
    for (const [id, actor, actorType] of [['old-audit-1', keyId, 'api_key'], ['old-audit-2', userId, 'user']] as const) {
      await session.run(
        `INSERT INTO audit_log (id, timestamp, organisation_id, workspace_id, user_id, user_type, method, uri, request_id, request_body,
           query_params, response_status_code, resource_type, action, resource_id, client_ip)
         VALUES ($1, $2, $3, NULL, $4, $5, 'POST', '/v1/admin/workspaces', 'req-old', NULL, '{}', 200, 'workspace', 'create', NULL, NULL)`,
        [id, created, orgId, actor, actorType],
      )
    }
    await session.close()
    await database.close()

    const { database: reopened, store } = await startStore(path)
    expect(await store.findOrganisation(orgId)).toEqual({ id: orgId, name: 'Old Org', createdAt: created.toISOString(), jwt: null })
    const user = await store.findUser(orgId, userId)
    expect(user).toEqual({
      id: userId,
      organisationId: orgId,
      email: 'old@example.test',
      firstName: 'Old',
      lastName: 'Timer',
      role: 'owner',
      passwordHash: null,
      createdAt: created.toISOString(),
      lastUpdatedAt: created.toISOString(),
    })
    const workspace = await store.findWorkspace(orgId, 'ws-old')
    expect(workspace).toEqual({
      id: workspaceId,
      slug: 'ws-old',
      organisationId: orgId,
      name: 'Old workspace',
      description: null,
      defaults: null,
      usageLimits: [],
      rateLimits: [],
      createdAt: created.toISOString(),
      lastUpdatedAt: updated.toISOString(),
    })
    const key = await store.findApiKeyByHash('d'.repeat(64))
    expect(key).toMatchObject({
      id: keyId,
      scopes: ['completions.write'],
      rateLimits: [],
      usageLimits: null,
      defaults: null,
      alertEmails: [],
      previousKeyHash: null,
      previousKeyExpiresAt: null,
      lastRotatedAt: null,
      lastUpdatedAt: updated.toISOString(),
    })

    // The migrated rows take part in the new features: versioned updates, members, audit.
    if (user === null || workspace === null || key === null) throw new Error('migrated rows missing')
    const later = '2024-01-01T00:00:00.000Z'
    await store.write(audit(orgId), async (writer) => {
      expect(await writer.updateUser({ ...user, passwordHash: 'scrypt$x', lastUpdatedAt: later }, user.lastUpdatedAt)).toBe(true)
      expect(await writer.updateWorkspace({ ...workspace, rateLimits: [{ type: 'requests', unit: 'rpm', value: 5 }], lastUpdatedAt: later }, workspace.lastUpdatedAt)).toBe(true)
      expect(await writer.updateApiKey({ ...key, keyHash: 'e'.repeat(64), previousKeyHash: key.keyHash, lastUpdatedAt: later }, key.lastUpdatedAt)).toBe(true)
      await writer.insertMember({ workspaceId, userId, organisationId: orgId, role: 'admin', createdAt: later, lastUpdatedAt: later })
    })
    expect((await store.findUser(orgId, userId))?.passwordHash).toBe('scrypt$x')
    expect((await store.findApiKeyByHash('d'.repeat(64)))?.keyHash).toBe('e'.repeat(64))
    expect(await store.listMembershipsOfUser(orgId, userId)).toHaveLength(1)
    expect((await store.listAuditEntries(orgId, {}, { offset: 0, limit: 10 })).total).toBe(3)
    // Old entries of a service key name it as the key they came through; a user's entry cannot tell.
    const old = (await store.listAuditEntries(orgId, { requestId: 'req-old' }, { offset: 0, limit: 10 })).items
    expect(old.map((entry) => [entry.id, entry.apiKeyId])).toEqual([['old-audit-1', keyId], ['old-audit-2', null]])

    // The first release had no virtual keys: the table is created on start and takes part in the cascade.
    const providerKey = virtualKey(orgId, workspaceId)
    await store.write(audit(orgId), (writer) => writer.insertVirtualKey(providerKey))
    expect(await store.findVirtualKey(orgId, providerKey.slug)).toEqual(providerKey)
    expect(await store.workspaceDependants(orgId, workspaceId)).toEqual({ apiKeys: 1, virtualKeys: 1, configs: 0, prompts: 0 })

    // Nor prompt templates: their tables are created on start too.
    await store.ensureBuiltInLabels(orgId, later)
    const collection = promptCollection(orgId, workspaceId)
    const prompt = promptOf(collection)
    const firstVersion = promptVersion(prompt)
    await store.write(audit(orgId), async (writer) => {
      await writer.insertCollection(collection)
      await writer.insertPrompt(prompt, firstVersion)
    })
    expect(await store.findPromptVersion(prompt.id, { kind: 'published' })).toEqual(firstVersion)
    expect(await store.findLabelByName(orgId, workspaceId, 'production')).toMatchObject({ isUniversal: true })
    expect(await store.workspaceDependants(orgId, workspaceId)).toEqual({ apiKeys: 1, virtualKeys: 1, configs: 0, prompts: 1 })

    // The filled columns are NOT NULL like in a fresh file, and a second start changes nothing.
    const check = await reopened.openSession()
    const nullable = await check.query(
      `SELECT table_name, column_name FROM information_schema.columns
       WHERE is_nullable = 'YES' AND column_name IN ('last_updated_at', 'usage_limits', 'rate_limits', 'alert_emails')
       ORDER BY table_name, column_name`,
    )
    expect(nullable).toEqual([
      { table_name: 'api_keys', column_name: 'usage_limits' },
      { table_name: 'virtual_keys', column_name: 'usage_limits' },
    ])
    await check.close()
    await store.close()
    const again = new DuckDbAdminStore(reopened)
    await again.start()
    expect((await again.findUser(orgId, userId))?.lastUpdatedAt).toBe(later)
    await again.close()
  })
})
