/**
 * JWT settings written by a version without `issuer` / `audience`: the embedded store keeps the
 * settings as one JSON text column, so an older file needs no column migration; the missing members
 * read as not set.
 */
import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { DuckDbAdminStore } from '../../adapters/embedded/duckdb-admin-store.js'
import { DuckDbDatabase } from '../../adapters/embedded/duckdb-database.js'

const cleanups: Array<() => Promise<void>> = []

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

describe('DuckDbAdminStore: JWT settings from before issuer and audience', () => {
  it('reads them as not set (null)', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'gw-duckdb-jwt-'))
    cleanups.push(() => rm(directory, { recursive: true, force: true }))
    const path = join(directory, 'gateway.duckdb')
    const id = randomUUID()
    const older = { jwksUrl: 'https://idp.example.test/jwks.json', jwks: null, updatedAt: '2024-01-02T03:04:05.678Z' }

    const database = new DuckDbDatabase({ path })
    const store = new DuckDbAdminStore(database)
    await store.start()
    const session = await database.openSession()
    await session.run('INSERT INTO organisations (id, name, created_at, jwt_settings) VALUES ($1, $2, $3, $4)', [
      id,
      'Older Org',
      new Date('2024-01-01T00:00:00.000Z'),
      JSON.stringify(older),
    ])
    await session.close()
    await store.close()
    await database.close()

    const reopened = new DuckDbDatabase({ path })
    cleanups.push(() => reopened.close())
    const again = new DuckDbAdminStore(reopened)
    await again.start()
    cleanups.push(() => again.close())
    const organisation = await again.findOrganisation(id)
    expect(organisation?.jwt).toEqual({ ...older, issuer: null, audience: null })
  })
})
