/**
 * The `AdminStore` contract: behaviour every adapter must show, asserted through the port only.
 *
 * `makeStore` must return a started, empty store; the suite closes it after each test. Timestamps
 * are written in `Date#toISOString()` form, the form every store returns.
 */
import { createHash, randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { isGatewayError } from '../../core/errors.js'
import type { AdminStore, ApiKeyRecord, BootstrapSeed, WorkspaceRecord } from '../../core/ports.js'

const BASE_TIME = Date.parse('2024-03-01T10:00:00.000Z')

function at(offsetMs: number): string {
  return new Date(BASE_TIME + offsetMs).toISOString()
}

function hashOf(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

function makeWorkspace(organisationId: string, overrides: Partial<WorkspaceRecord> = {}): WorkspaceRecord {
  const id = randomUUID()
  return {
    id,
    slug: `ws-${id.slice(0, 8)}`,
    organisationId,
    name: 'Workspace',
    description: null,
    createdAt: at(1_000),
    lastUpdatedAt: at(2_000),
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
    createdAt: at(3_000),
    lastUpdatedAt: at(4_000),
    ...overrides,
  }
}

function makeSeed(options: { createdOffsetMs?: number; keyHash?: string } = {}): BootstrapSeed {
  const organisationId = randomUUID()
  const created = at(options.createdOffsetMs ?? 0)
  const ownerId = randomUUID()
  const workspace = makeWorkspace(organisationId, {
    name: 'Default',
    description: 'The default workspace',
    createdAt: created,
    lastUpdatedAt: created,
  })
  return {
    organisation: { id: organisationId, name: 'Acme Ltd', createdAt: created },
    owner: {
      id: ownerId,
      organisationId,
      email: 'owner@acme.test',
      firstName: 'Ada',
      lastName: 'Lovelace',
      role: 'owner',
      createdAt: created,
    },
    workspace,
    adminKey: makeApiKey(organisationId, {
      keyHash: options.keyHash ?? hashOf(randomUUID()),
      maskedKey: 'gw********adm',
      name: 'Admin key',
      description: 'Created at bootstrap',
      type: 'organisation-service',
      userId: ownerId,
      scopes: ['organisation.admin', 'workspaces.read', 'workspaces.write'],
      expiresAt: null,
      creationMode: 'auto',
      createdAt: created,
      lastUpdatedAt: created,
    }),
  }
}

async function expectConflict(promise: Promise<unknown>): Promise<void> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  )
  expect(error, 'expected the write to reject').not.toBeNull()
  expect(isGatewayError(error), `expected a GatewayError, got ${String(error)}`).toBe(true)
  expect(error).toMatchObject({ code: 'GW_ADMIN_CONFLICT', status: 409 })
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

    it('reports healthy once started', async () => {
      expect((await store.health()).ok).toBe(true)
    })

    it('has no organisation before bootstrap', async () => {
      expect(await store.findFirstOrganisation()).toBeNull()
    })

    it('finds every bootstrap record back', async () => {
      const seed = makeSeed()
      await store.bootstrap(seed)

      expect(await store.findFirstOrganisation()).toEqual(seed.organisation)
      expect(await store.findUser(seed.organisation.id, seed.owner.id)).toEqual(seed.owner)
      expect(await store.findWorkspace(seed.organisation.id, seed.workspace.id)).toEqual(seed.workspace)
      expect(await store.findApiKeyByHash(seed.adminKey.keyHash)).toEqual(seed.adminKey)
    })

    it('returns the oldest organisation first', async () => {
      const newer = makeSeed({ createdOffsetMs: 60_000 })
      const older = makeSeed({ createdOffsetMs: -60_000 })
      await store.bootstrap(newer)
      await store.bootstrap(older)
      expect(await store.findFirstOrganisation()).toEqual(older.organisation)
    })

    it('writes nothing from a bootstrap whose API key hash is taken', async () => {
      const first = makeSeed()
      await store.bootstrap(first)
      // Older than `first`, so a leaked organisation would become the first one.
      const second = makeSeed({ createdOffsetMs: -60_000, keyHash: first.adminKey.keyHash })

      await expectConflict(store.bootstrap(second))

      expect(await store.findFirstOrganisation()).toEqual(first.organisation)
      expect(await store.findUser(second.organisation.id, second.owner.id)).toBeNull()
      expect(await store.findWorkspace(second.organisation.id, second.workspace.id)).toBeNull()
      expect(await store.findWorkspace(second.organisation.id, second.workspace.slug)).toBeNull()
      expect(await store.findApiKeyByHash(first.adminKey.keyHash)).toEqual(first.adminKey)
    })

    it('can bootstrap again after a failed bootstrap', async () => {
      const first = makeSeed()
      await store.bootstrap(first)
      const clash = makeSeed({ keyHash: first.adminKey.keyHash })
      await expectConflict(store.bootstrap(clash))

      const retry: BootstrapSeed = { ...clash, adminKey: { ...clash.adminKey, keyHash: hashOf(randomUUID()) } }
      await store.bootstrap(retry)
      expect(await store.findUser(retry.organisation.id, retry.owner.id)).toEqual(retry.owner)
      expect(await store.findApiKeyByHash(retry.adminKey.keyHash)).toEqual(retry.adminKey)
    })

    it('returns null for an unknown key hash', async () => {
      await store.bootstrap(makeSeed())
      expect(await store.findApiKeyByHash(hashOf('no such secret'))).toBeNull()
    })

    it('inserts API keys and finds them by hash', async () => {
      const seed = makeSeed()
      await store.bootstrap(seed)
      const key = makeApiKey(seed.organisation.id, {
        type: 'workspace-user',
        workspaceId: seed.workspace.id,
        userId: seed.owner.id,
        description: 'A user key',
        expiresAt: at(86_400_000),
        status: 'exhausted',
        creationMode: 'ui',
      })
      await store.insertApiKey(key)
      expect(await store.findApiKeyByHash(key.keyHash)).toEqual(key)
    })

    it('rejects an API key whose hash is taken', async () => {
      const seed = makeSeed()
      await store.bootstrap(seed)
      await expectConflict(store.insertApiKey(makeApiKey(seed.organisation.id, { keyHash: seed.adminKey.keyHash })))
      expect(await store.findApiKeyByHash(seed.adminKey.keyHash)).toEqual(seed.adminKey)
    })

    it('round-trips scopes exactly: order, empty lists and unusual characters', async () => {
      const seed = makeSeed()
      await store.bootstrap(seed)
      const scopeSets: string[][] = [
        [],
        ['z.last', 'a.first', 'm.middle'],
        ['same', 'same'],
        ['with space', 'comma,inside', 'quote"s', "apostrophe's", '[brackets]', '{braces}', 'ünïcödé ✓', ''],
      ]
      const keys = scopeSets.map((scopes) => makeApiKey(seed.organisation.id, { scopes }))
      for (const key of keys) await store.insertApiKey(key)
      for (const key of keys) {
        const found = await store.findApiKeyByHash(key.keyHash)
        expect(found?.scopes).toEqual(key.scopes)
      }
    })

    it('rejects a duplicate workspace slug in the same organisation', async () => {
      const seed = makeSeed()
      await store.bootstrap(seed)
      const duplicate = makeWorkspace(seed.organisation.id, { slug: seed.workspace.slug })
      await expectConflict(store.insertWorkspace(duplicate))
      expect(await store.findWorkspace(seed.organisation.id, duplicate.id)).toBeNull()
      expect(await store.findWorkspace(seed.organisation.id, seed.workspace.slug)).toEqual(seed.workspace)
    })

    it('allows the same workspace slug in another organisation', async () => {
      const first = makeSeed()
      const second = makeSeed()
      await store.bootstrap(first)
      await store.bootstrap(second)
      const sameSlug = makeWorkspace(second.organisation.id, { slug: first.workspace.slug })
      await store.insertWorkspace(sameSlug)
      expect(await store.findWorkspace(second.organisation.id, first.workspace.slug)).toEqual(sameSlug)
      expect(await store.findWorkspace(first.organisation.id, first.workspace.slug)).toEqual(first.workspace)
    })

    it('finds a workspace by id and by slug, only within its organisation', async () => {
      const first = makeSeed()
      const second = makeSeed()
      await store.bootstrap(first)
      await store.bootstrap(second)
      const workspace = makeWorkspace(first.organisation.id, { name: 'Research', description: 'R&D' })
      await store.insertWorkspace(workspace)

      expect(await store.findWorkspace(first.organisation.id, workspace.id)).toEqual(workspace)
      expect(await store.findWorkspace(first.organisation.id, workspace.slug)).toEqual(workspace)
      expect(await store.findWorkspace(second.organisation.id, workspace.id)).toBeNull()
      expect(await store.findWorkspace(second.organisation.id, workspace.slug)).toBeNull()
      expect(await store.findWorkspace(first.organisation.id, 'ws-unknown')).toBeNull()
      expect(await store.findWorkspace(first.organisation.id, randomUUID())).toBeNull()
    })

    it('finds a user only within its organisation', async () => {
      const first = makeSeed()
      const second = makeSeed()
      await store.bootstrap(first)
      await store.bootstrap(second)
      expect(await store.findUser(first.organisation.id, first.owner.id)).toEqual(first.owner)
      expect(await store.findUser(second.organisation.id, first.owner.id)).toBeNull()
      expect(await store.findUser(first.organisation.id, randomUUID())).toBeNull()
    })

    it('allows the same owner email in two organisations', async () => {
      const first = makeSeed()
      const second = makeSeed()
      expect(second.owner.email).toBe(first.owner.email)
      await store.bootstrap(first)
      await store.bootstrap(second)
      expect(await store.findUser(second.organisation.id, second.owner.id)).toEqual(second.owner)
    })

    it('lands every one of 50 concurrent workspace inserts', async () => {
      const seed = makeSeed()
      await store.bootstrap(seed)
      const workspaces = Array.from({ length: 50 }, (_, index) =>
        makeWorkspace(seed.organisation.id, { slug: `concurrent-${index}`, name: `Concurrent ${index}` }),
      )
      await Promise.all(workspaces.map((workspace) => store.insertWorkspace(workspace)))
      const found = await Promise.all(workspaces.map((workspace) => store.findWorkspace(seed.organisation.id, workspace.slug)))
      expect(found).toEqual(workspaces)
    })

    it('keeps concurrent bootstraps apart: the good ones land whole, a conflicting one leaves nothing', async () => {
      const existing = makeSeed()
      await store.bootstrap(existing)
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
    })

    it('lets exactly one of several concurrent inserts of the same slug win', async () => {
      const seed = makeSeed()
      await store.bootstrap(seed)
      const contenders = Array.from({ length: 5 }, () => makeWorkspace(seed.organisation.id, { slug: 'contested' }))
      const results = await Promise.allSettled(contenders.map((workspace) => store.insertWorkspace(workspace)))
      expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(1)
      for (const result of results) {
        if (result.status === 'rejected') expect(result.reason).toMatchObject({ code: 'GW_ADMIN_CONFLICT' })
      }
      const winner = await store.findWorkspace(seed.organisation.id, 'contested')
      expect(contenders).toContainEqual(winner)
    })
  })
}
