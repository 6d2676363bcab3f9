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
  it('adds the counter end column to a file written before counters kept their end; its rows are kept until written again', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'gw-duckdb-usage-old-'))
    const path = join(directory, 'gateway.duckdb')
    try {
      const old = new DuckDbDatabase({ path })
      await old.start()
      const session = await old.openSession()
      await session.run('CREATE TABLE budget_usage (counter_key VARCHAR PRIMARY KEY, total BIGINT NOT NULL, updated_at TIMESTAMP NOT NULL)')
      await session.run("INSERT INTO budget_usage VALUES ('old-dead', 5, now()), ('old-live', 7, now())")
      await session.close()
      await old.close()

      const database = new DuckDbDatabase({ path })
      const store = new DuckDbUsageStore(database)
      await store.start()
      try {
        expect(await store.prune(Date.now())).toBe(0)
        // The live counter is written again and so learns its end; the dead one never is.
        await store.add([{ key: 'old-live', amount: 1, expiresAt: 1_000 }])
        expect(await store.totals(['old-dead', 'old-live'])).toEqual([5, 8])
        expect(await store.prune(2_000)).toBe(1)
        expect(await store.totals(['old-dead', 'old-live'])).toEqual([5, 0])
      } finally {
        await store.close()
        await database.close()
      }
    } finally {
      await rm(directory, { recursive: true, force: true })
    }
  })

  it('fails, never silently, before start()', async () => {
    const store = new DuckDbUsageStore(new DuckDbDatabase({ path: ':memory:' }))
    await expect(store.totals(['k'])).rejects.toThrow(/not started/)
    expect((await store.health()).ok).toBe(false)
  })
})
