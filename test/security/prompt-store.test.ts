/**
 * The prompt store against a tenant who tries to reach another organisation's prompt templates
 * (issue 14): ids and slugs chosen to collide with another tenant's, search text written as SQL or
 * regular-expression syntax, and writes naming another organisation's records. Run on the real
 * DuckDB admin store (`:memory:`); the same rules are in the admin store contract, which the
 * MongoDB store runs too when `MONGODB_URI` is set.
 */
import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { DuckDbAdminStore } from '../../adapters/embedded/duckdb-admin-store.js'
import { DuckDbDatabase } from '../../adapters/embedded/duckdb-database.js'
import type {
  AuditEntry,
  CollectionRecord,
  LabelRecord,
  PartialRecord,
  PartialVersionRecord,
  PromptRecord,
  PromptVersionRecord,
} from '../../core/admin-records.js'
import type { AdminWriter } from '../../core/ports.js'

const NOW = '2024-06-01T12:00:00.000Z'
const everything = { offset: 0, limit: 100 }

interface Tenant {
  readonly organisationId: string
  readonly workspaceId: string
  readonly collection: CollectionRecord
}

function tenant(): Tenant {
  const organisationId = randomUUID()
  const workspaceId = randomUUID()
  return {
    organisationId,
    workspaceId,
    collection: {
      id: randomUUID(),
      slug: `default-${randomUUID().slice(0, 6)}`,
      organisationId,
      workspaceId,
      name: 'Default',
      parentCollectionId: null,
      isDefault: true,
      status: 'active',
      createdAt: NOW,
      lastUpdatedAt: NOW,
    },
  }
}

function promptOf(owner: Tenant, overrides: Partial<PromptRecord> = {}): PromptRecord {
  return {
    id: randomUUID(),
    slug: `pp-${randomUUID().slice(0, 6)}`,
    organisationId: owner.organisationId,
    workspaceId: owner.workspaceId,
    collectionId: owner.collection.id,
    name: 'Prompt',
    status: 'active',
    publishedVersion: 1,
    latestVersion: 1,
    createdAt: NOW,
    lastUpdatedAt: NOW,
    ...overrides,
  }
}

function versionOf(prompt: PromptRecord, overrides: Partial<PromptVersionRecord> = {}): PromptVersionRecord {
  return {
    id: randomUUID(),
    promptId: prompt.id,
    organisationId: prompt.organisationId,
    workspaceId: prompt.workspaceId,
    version: 1,
    template: '[{"role":"user","content":"{{question}}"}]',
    parameters: {},
    model: 'gpt-4o-mini',
    virtualKey: null,
    functions: null,
    tools: null,
    toolChoice: null,
    description: null,
    templateMetadata: null,
    isRawTemplate: false,
    labelId: null,
    status: 'active',
    createdAt: NOW,
    ...overrides,
  }
}

function labelOf(owner: Tenant, name: string): LabelRecord {
  return {
    id: randomUUID(),
    organisationId: owner.organisationId,
    workspaceId: owner.workspaceId,
    name,
    description: null,
    colorCode: null,
    isUniversal: false,
    status: 'active',
    createdAt: NOW,
    lastUpdatedAt: NOW,
  }
}

function partialOf(owner: Tenant, overrides: Partial<PartialRecord> = {}): { partial: PartialRecord; first: PartialVersionRecord } {
  const partial: PartialRecord = {
    id: randomUUID(),
    slug: `partial-${randomUUID().slice(0, 6)}`,
    organisationId: owner.organisationId,
    workspaceId: owner.workspaceId,
    collectionId: null,
    name: `footer_${randomUUID().slice(0, 6)}`,
    status: 'active',
    publishedVersion: 1,
    latestVersion: 1,
    createdAt: NOW,
    lastUpdatedAt: NOW,
    ...overrides,
  }
  const first: PartialVersionRecord = {
    id: randomUUID(),
    partialId: partial.id,
    organisationId: partial.organisationId,
    workspaceId: partial.workspaceId,
    version: 1,
    template: 'Regards',
    description: null,
    status: 'active',
    createdAt: NOW,
  }
  return { partial, first }
}

function audit(organisationId: string): AuditEntry {
  return {
    id: randomUUID(),
    timestamp: NOW,
    organisationId,
    workspaceId: null,
    userId: null,
    userType: 'api_key',
    apiKeyId: null,
    method: 'POST',
    uri: '/v1/prompts',
    requestId: randomUUID(),
    requestBody: null,
    queryParams: '{}',
    responseStatusCode: 200,
    resourceType: 'prompt',
    action: 'create',
    resourceId: null,
    clientIp: null,
  }
}

describe('prompt store: one tenant against another', () => {
  let database: DuckDbDatabase
  let store: DuckDbAdminStore
  let victim: Tenant
  let attacker: Tenant

  function as<T>(owner: Tenant, work: (writer: AdminWriter) => Promise<T>): Promise<T> {
    return store.write(audit(owner.organisationId), work)
  }

  beforeEach(async () => {
    database = new DuckDbDatabase({ path: ':memory:' })
    await database.start()
    store = new DuckDbAdminStore(database)
    await store.start()
    victim = tenant()
    attacker = tenant()
    for (const owner of [victim, attacker]) await as(owner, (writer) => writer.insertCollection(owner.collection))
  })

  afterEach(async () => {
    await store.close()
    await database.close()
  })

  it('a slug chosen to equal another tenant’s id finds the attacker’s own record, never the victim’s', async () => {
    const secret = promptOf(victim)
    const decoy = promptOf(attacker, { slug: secret.id })
    const victimPartial = partialOf(victim)
    const decoyPartial = partialOf(attacker, { slug: victimPartial.partial.id })
    const decoyCollection: CollectionRecord = { ...attacker.collection, id: randomUUID(), slug: victim.collection.id, isDefault: false }
    await as(victim, async (writer) => {
      await writer.insertPrompt(secret, versionOf(secret))
      await writer.insertPartial(victimPartial.partial, victimPartial.first)
    })
    await as(attacker, async (writer) => {
      await writer.insertPrompt(decoy, versionOf(decoy))
      await writer.insertPartial(decoyPartial.partial, decoyPartial.first)
      await writer.insertCollection(decoyCollection)
    })

    expect(await store.findPrompt(attacker.organisationId, secret.id)).toEqual(decoy)
    expect(await store.findPartial(attacker.organisationId, victimPartial.partial.id)).toEqual(decoyPartial.partial)
    expect(await store.findCollection(attacker.organisationId, victim.collection.id)).toEqual(decoyCollection)
    // The victim still finds their own by id: an id match wins within one organisation only.
    expect(await store.findPrompt(victim.organisationId, secret.id)).toEqual(secret)
  })

  it('search text written as SQL or a regular expression is matched literally and widens nothing', async () => {
    const named = promptOf(victim, { name: `O'Brien's "quote" 50%_done \\ (x)` })
    await as(victim, (writer) => writer.insertPrompt(named, versionOf(named)))
    const other = promptOf(attacker)
    await as(attacker, (writer) => writer.insertPrompt(other, versionOf(other)))

    for (const search of ["' OR '1'='1", "') OR 1=1 --", '%', '_', '.*', '(?i).', '[^x]', '\\', '$where']) {
      expect((await store.listPrompts(attacker.organisationId, { search }, everything)).items, search).not.toContainEqual(named)
      expect((await store.listLabels(attacker.organisationId, { search }, everything)).total, search).toBe(0)
      expect((await store.listCollections(attacker.organisationId, { search }, everything)).total, search).toBe(0)
    }
    // In the victim's own organisation the same characters are plain text.
    expect((await store.listPrompts(victim.organisationId, { search: "o'brien's" }, everything)).items).toEqual([named])
    expect((await store.listPrompts(victim.organisationId, { search: '50%_DONE \\ (X)' }, everything)).items).toEqual([named])
    expect((await store.listPrompts(victim.organisationId, { search: '%' }, everything)).items).toEqual([named])
    expect((await store.listPrompts(victim.organisationId, { search: '.*' }, everything)).items).toEqual([])
  })

  it('writes naming the victim’s records from the attacker’s organisation change nothing', async () => {
    await store.ensureBuiltInLabels(victim.organisationId, NOW)
    const secret = promptOf(victim)
    const first = versionOf(secret)
    const label = labelOf(victim, 'canary')
    const piece = partialOf(victim)
    const empty: CollectionRecord = { ...victim.collection, id: randomUUID(), slug: 'empty-aaaaaa', isDefault: false }
    await as(victim, async (writer) => {
      await writer.insertPrompt(secret, first)
      await writer.insertLabel(label)
      await writer.setPromptVersionLabel(secret.id, first.id, label.id)
      await writer.insertPartial(piece.partial, piece.first)
      await writer.insertCollection(empty)
    })
    const hijack = { organisationId: attacker.organisationId, lastUpdatedAt: '2024-07-01T00:00:00.000Z' }

    await as(attacker, async (writer) => {
      expect(await writer.updatePrompt({ ...secret, ...hijack, name: 'pwned' }, secret.lastUpdatedAt)).toBe(false)
      expect(await writer.updateLabel({ ...label, ...hijack, name: 'pwned' }, label.lastUpdatedAt)).toBe(false)
      expect(await writer.updatePartial({ ...piece.partial, ...hijack, name: 'pwned' }, piece.partial.lastUpdatedAt)).toBe(false)
      expect(await writer.updateCollection({ ...empty, ...hijack, name: 'pwned' }, empty.lastUpdatedAt)).toBe(false)
      expect(await writer.deleteLabel(attacker.organisationId, label.id)).toBe(false)
      expect(await writer.deletePrompt(attacker.organisationId, secret.id)).toBe(false)
      expect(await writer.deletePartial(attacker.organisationId, piece.partial.id)).toBe(false)
      expect(await writer.deleteCollection(attacker.organisationId, empty.id)).toBe(false)
      // A workspace of the attacker's organisation with the victim's workspace id.
      await writer.deleteWorkspace(attacker.organisationId, victim.workspaceId)
    })

    expect(await store.findPrompt(victim.organisationId, secret.id)).toEqual(secret)
    expect(await store.listPromptVersions(secret.id)).toEqual([{ ...first, labelId: label.id }])
    expect(await store.findLabel(victim.organisationId, label.id)).toEqual(label)
    expect(await store.findPartial(victim.organisationId, piece.partial.id)).toEqual(piece.partial)
    expect(await store.findCollection(victim.organisationId, empty.id)).toEqual(empty)
    expect(await store.findDefaultCollection(victim.workspaceId)).toEqual(victim.collection)
    // Reads scoped by organisation answer nothing of the victim's.
    expect(await store.findLabel(attacker.organisationId, label.id)).toBeNull()
    expect(await store.findLabelByName(attacker.organisationId, victim.workspaceId, 'canary')).toBeNull()
    expect(await store.findLabelByName(attacker.organisationId, victim.workspaceId, 'production')).toBeNull()
    expect((await store.listPrompts(attacker.organisationId, { workspaceId: victim.workspaceId }, everything)).total).toBe(0)
    expect((await store.listLabels(attacker.organisationId, { workspaceId: victim.workspaceId }, everything)).total).toBe(0)
    expect((await store.listPartials(attacker.organisationId, { workspaceId: victim.workspaceId }, everything)).total).toBe(0)
    expect(await store.workspaceDependants(attacker.organisationId, victim.workspaceId)).toMatchObject({ prompts: 0 })
  })
})
