import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { DuckDbAdminStore } from '../../adapters/embedded/duckdb-admin-store.js'
import { conflictFor } from '../../adapters/embedded/duckdb-conflicts.js'
import { DuckDbDatabase } from '../../adapters/embedded/duckdb-database.js'
import { ADMIN_TABLES } from '../../adapters/embedded/duckdb-schema.js'
import type { BootstrapSeed } from '../../core/ports.js'
import { describeAdminStoreContract } from './admin-store.contract.js'

const directories: string[] = []
const databases: DuckDbDatabase[] = []

async function freshPath(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'gw-duckdb-admin-'))
  directories.push(directory)
  // A nested directory that does not exist yet: the database must create it.
  return join(directory, 'data', 'gateway.duckdb')
}

async function startStore(path: string): Promise<{ database: DuckDbDatabase; store: DuckDbAdminStore }> {
  const database = new DuckDbDatabase({ path })
  databases.push(database)
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

function seed(): BootstrapSeed {
  const organisationId = randomUUID()
  const ownerId = randomUUID()
  const created = '2024-05-06T07:08:09.123Z'
  return {
    organisation: { id: organisationId, name: 'Persistent Org', createdAt: created },
    owner: {
      id: ownerId,
      organisationId,
      email: 'persist@example.test',
      firstName: 'Grace',
      lastName: 'Hopper',
      role: 'owner',
      createdAt: created,
    },
    workspace: {
      id: randomUUID(),
      slug: 'ws-default-abc123',
      organisationId,
      name: 'Default',
      description: null,
      createdAt: created,
      lastUpdatedAt: created,
    },
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
      createdAt: created,
      lastUpdatedAt: created,
    },
  }
}

describe('DuckDbAdminStore on a file', () => {
  it('creates the parent directory and keeps data across close and reopen', async () => {
    const path = await freshPath()
    const first = await startStore(path)
    expect(existsSync(path)).toBe(true)
    const records = seed()
    await first.store.bootstrap(records)
    await first.store.close()
    await first.database.close()

    const second = await startStore(path)
    expect(await second.store.findFirstOrganisation()).toEqual(records.organisation)
    expect(await second.store.findUser(records.organisation.id, records.owner.id)).toEqual(records.owner)
    expect(await second.store.findWorkspace(records.organisation.id, records.workspace.slug)).toEqual(records.workspace)
    expect(await second.store.findApiKeyByHash(records.adminKey.keyHash)).toEqual(records.adminKey)
    // Uniqueness still holds after reopening (the indexes were persisted too).
    await expect(second.store.bootstrap({ ...seed(), adminKey: { ...seed().adminKey, keyHash: records.adminKey.keyHash } }))
      .rejects.toMatchObject({ code: 'GW_ADMIN_CONFLICT' })
  })

  it('names the field in conflict messages', async () => {
    const { store } = await startStore(await freshPath())
    const records = seed()
    await store.bootstrap(records)

    await expect(store.insertWorkspace({ ...records.workspace, id: randomUUID() })).rejects.toMatchObject({
      message: 'A workspace with this slug already exists in the organisation',
      param: 'slug',
    })
    await expect(store.insertWorkspace({ ...records.workspace, slug: 'another' })).rejects.toMatchObject({
      message: 'A workspace with this id already exists',
      param: 'id',
    })
    await expect(store.insertApiKey({ ...records.adminKey, id: randomUUID() })).rejects.toMatchObject({
      message: 'An API key with this key hash already exists',
      param: 'keyHash',
    })
    await expect(store.bootstrap(records)).rejects.toMatchObject({ message: 'An organisation with this id already exists' })
  })

  it('maps a duplicate user email in one organisation to a conflict naming the email', async () => {
    const { database, store } = await startStore(await freshPath())
    const records = seed()
    await store.bootstrap(records)
    const session = await database.openSession()
    const error = await session
      .run(
        'INSERT INTO users (id, organisation_id, email, first_name, last_name, role, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [randomUUID(), records.organisation.id, records.owner.email, 'X', 'Y', 'member', new Date()],
      )
      .then(
        () => null,
        (caught: unknown) => caught,
      )
    const users = ADMIN_TABLES.find((table) => table.name === 'users')
    expect(users).toBeDefined()
    const conflict = users === undefined ? null : conflictFor(users, error)
    expect(conflict).toMatchObject({
      code: 'GW_ADMIN_CONFLICT',
      message: 'A user with this email already exists in the organisation',
      param: 'email',
    })
    expect(conflictFor(users ?? ADMIN_TABLES[0], new Error('IO Error: disk full'))).toBeNull()
    await session.close()
  })

  it('does not echo the duplicate value in the message', async () => {
    const { store } = await startStore(await freshPath())
    const records = seed()
    await store.bootstrap(records)
    const error = await store.insertApiKey({ ...records.adminKey, id: randomUUID() }).catch((caught: unknown) => caught)
    expect(String((error as Error).message)).not.toContain(records.adminKey.keyHash)
  })

  it('rejects an invalid timestamp with a validation error and writes nothing', async () => {
    const { store } = await startStore(await freshPath())
    const records = seed()
    await expect(store.bootstrap({ ...records, workspace: { ...records.workspace, createdAt: 'yesterday' } }))
      .rejects.toMatchObject({ code: 'GW_ADMIN_VALIDATION' })
    expect(await store.findFirstOrganisation()).toBeNull()
  })

  it('rejects with a non-conflict error when used after close (callers fail closed)', async () => {
    const { store } = await startStore(await freshPath())
    await store.close()
    const error = await store.findApiKeyByHash('b'.repeat(64)).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(Error)
    expect((error as { code?: string }).code).not.toBe('GW_ADMIN_CONFLICT')
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
})
