import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { DuckDbDatabase } from '../../adapters/embedded/duckdb-database.js'
import { DuckDbUsageStore } from '../../adapters/embedded/duckdb-usage-store.js'
import { describeUsageStoreContract } from './budget-usage-store.contract.js'

describeUsageStoreContract('DuckDB', async () => {
  const directory = await mkdtemp(join(tmpdir(), 'gw-duckdb-usage-'))
  const path = join(directory, 'gateway.duckdb')
  let database = new DuckDbDatabase({ path })
  let store = new DuckDbUsageStore(database)
  await store.start()
  return {
    get store() {
      return store
    },
    async reopen() {
      await store.close()
      await database.close()
      database = new DuckDbDatabase({ path })
      store = new DuckDbUsageStore(database)
      await store.start()
      return store
    },
    async close() {
      await store.close()
      await database.close()
      await rm(directory, { recursive: true, force: true })
    },
  }
})

describe('DuckDbUsageStore', () => {
  it('fails, never silently, before start()', async () => {
    const store = new DuckDbUsageStore(new DuckDbDatabase({ path: ':memory:' }))
    await expect(store.totals(['k'])).rejects.toThrow(/not started/)
    expect((await store.health()).ok).toBe(false)
  })
})
