import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { DuckDbDatabase, type DuckDbSession } from '../../../adapters/embedded/duckdb-database.js'

const directories: string[] = []
const databases: DuckDbDatabase[] = []

async function open(path = ':memory:'): Promise<{ database: DuckDbDatabase; session: DuckDbSession }> {
  const database = new DuckDbDatabase({ path })
  databases.push(database)
  await database.start()
  const session = await database.openSession()
  await session.run('CREATE TABLE IF NOT EXISTS items (id VARCHAR PRIMARY KEY, tags VARCHAR[], seen_at TIMESTAMP, n INTEGER)')
  return { database, session }
}

async function count(session: DuckDbSession): Promise<number> {
  const rows = await session.query('SELECT count(*) AS n FROM items')
  return Number(rows[0]?.n)
}

afterEach(async () => {
  await Promise.all(databases.splice(0).map((database) => database.close()))
})

afterAll(async () => {
  await Promise.all(directories.splice(0).map((directory) => rm(directory, { recursive: true, force: true })))
})

describe('DuckDbDatabase', () => {
  it('binds values as data, never as SQL', async () => {
    const { session } = await open()
    const hostile = "x'); DROP TABLE items; --"
    await session.run('INSERT INTO items (id) VALUES ($1)', [hostile])
    const rows = await session.query('SELECT id FROM items WHERE id = $1', [hostile])
    expect(rows).toEqual([{ id: hostile }])
  })

  it('round-trips Date and string-array parameters, including an empty array', async () => {
    const { session } = await open()
    const at = new Date('2024-02-29T23:59:59.999Z')
    await session.run('INSERT INTO items (id, tags, seen_at) VALUES ($1, $2, $3)', ['a', ['b', 'a', 'b'], at])
    await session.run('INSERT INTO items (id, tags, seen_at) VALUES ($1, $2, $3)', ['e', [], null])
    const rows = await session.query('SELECT id, tags, seen_at FROM items ORDER BY id')
    expect(rows).toEqual([
      { id: 'a', tags: ['b', 'a', 'b'], seen_at: at },
      { id: 'e', tags: [], seen_at: null },
    ])
  })

  it('rolls a transaction back when its work throws', async () => {
    const { session } = await open()
    await expect(
      session.transaction(async (tx) => {
        await tx.run("INSERT INTO items (id) VALUES ('one')")
        throw new Error('changed my mind')
      }),
    ).rejects.toThrow('changed my mind')
    expect(await count(session)).toBe(0)
  })

  it('rolls back even when the work swallows a failed statement', async () => {
    const { session } = await open()
    await session.run("INSERT INTO items (id) VALUES ('taken')")
    await expect(
      session.transaction(async (tx) => {
        await tx.run("INSERT INTO items (id) VALUES ('fresh')")
        await tx.run("INSERT INTO items (id) VALUES ('taken')").catch(() => undefined)
      }),
    ).rejects.toThrow(/aborted/)
    expect(await count(session)).toBe(1)
  })

  it('runs concurrent transactions on one session one after another', async () => {
    const { session } = await open()
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        session.transaction(async (tx) => {
          const before = Number((await tx.query('SELECT count(*) AS n FROM items'))[0]?.n)
          await tx.run('INSERT INTO items (id, n) VALUES ($1, $2)', [`item-${index}`, before])
          return before
        }),
      ),
    )
    // Each transaction saw all the earlier ones and none of the later ones.
    expect([...results].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, index) => index))
    expect(await count(session)).toBe(20)
  })

  it('creates the parent directory, closes open sessions on close, and reopens', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'gw-duckdb-db-'))
    directories.push(directory)
    const path = join(directory, 'nested', 'deeper', 'gateway.duckdb')
    const { database, session } = await open(path)
    expect(existsSync(path)).toBe(true)
    await session.run("INSERT INTO items (id) VALUES ('kept')")
    await database.close()
    await database.close()
    expect(session.closed).toBe(true)
    await expect(session.query('SELECT 1')).rejects.toThrow(/closed/)
    expect((await database.health()).ok).toBe(false)

    await database.start()
    expect((await database.health()).ok).toBe(true)
    const again = await database.openSession()
    expect(await count(again)).toBe(1)
  })

  it('applies its memory limit and keeps to one thread', async () => {
    const database = new DuckDbDatabase({ path: ':memory:', memoryLimit: '48MB' })
    databases.push(database)
    await database.start()
    const session = await database.openSession()
    const [row] = await session.query("SELECT current_setting('memory_limit') AS memory, current_setting('threads') AS threads")
    // DuckDB reports the limit in its own units (48MB = 45.7 MiB).
    expect(String(row?.memory)).toMatch(/^45\.\d MiB$/)
    expect(Number(row?.threads)).toBe(1)
  })

  it('refuses sessions before start', async () => {
    const database = new DuckDbDatabase({ path: ':memory:' })
    await expect(database.openSession()).rejects.toThrow(/not started/)
  })
})
