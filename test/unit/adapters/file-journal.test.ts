import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { FileJournal } from '../../../adapters/log-sink/file-journal.js'
import { RECORDS_PER_SLICE } from '../../../adapters/log-sink/slices.js'
import { countTurns } from '../../helpers/event-loop-turns.js'

const directories: string[] = []

async function freshDirectory(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'gw-journal-'))
  directories.push(directory)
  return join(directory, 'journal')
}

afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })))
})

describe('FileJournal', () => {
  it('keeps batches in order across a reopen, and forgets removed ones', async () => {
    const directory = await freshDirectory()
    const journal = new FileJournal({ directory, maxBytes: 1_000_000 })
    await journal.open()
    expect(await journal.append('logs', [{ n: 1 }, { n: 2 }])).toBe(true)
    expect(await journal.append('feedback', [{ n: 3 }])).toBe(true)
    expect(await journal.append('logs', [{ n: 4 }])).toBe(true)
    expect(journal.records).toBe(4)
    expect(journal.length).toBe(3)

    const reopened = new FileJournal({ directory, maxBytes: 1_000_000 })
    await reopened.open()
    expect(reopened.records).toBe(4)
    expect(reopened.bytes).toBe(journal.bytes)
    const first = reopened.oldest()
    expect(first).toMatchObject({ kind: 'logs', count: 2 })
    expect(await reopened.read(first!)).toEqual([{ n: 1 }, { n: 2 }])
    await reopened.remove(first!)
    expect(reopened.oldest()).toMatchObject({ kind: 'feedback', count: 1 })
    expect(await reopened.read(reopened.oldest()!)).toEqual([{ n: 3 }])
    await reopened.remove(reopened.oldest()!)
    // New batches continue the sequence after the ones still waiting.
    expect(await reopened.append('logs', [{ n: 5 }])).toBe(true)
    const order: unknown[] = []
    for (let entry = reopened.oldest(); entry !== undefined; entry = reopened.oldest()) {
      order.push(...(await reopened.read(entry)))
      await reopened.remove(entry)
    }
    expect(order).toEqual([{ n: 4 }, { n: 5 }])
    expect(reopened.records).toBe(0)
    expect(reopened.bytes).toBe(0)
    expect(await readdir(directory)).toEqual([])
  })

  it('refuses a batch that would take it past maxBytes, and writes nothing for it', async () => {
    const directory = await freshDirectory()
    const journal = new FileJournal({ directory, maxBytes: 100 })
    await journal.open()
    expect(await journal.append('logs', [{ text: 'x'.repeat(40) }])).toBe(true)
    expect(await journal.append('logs', [{ text: 'y'.repeat(60) }])).toBe(false)
    expect(journal.records).toBe(1)
    expect(await readdir(directory)).toHaveLength(1)
  })

  it('removes leftovers of an interrupted append and sets aside an unreadable batch', async () => {
    const directory = await freshDirectory()
    const journal = new FileJournal({ directory, maxBytes: 1_000_000 })
    await journal.open()
    await journal.append('logs', [{ n: 1 }])
    await writeFile(join(directory, '000000000007-logs-1.jsonl.tmp'), '{"half":')
    await writeFile(join(directory, '000000000005-logs-2.jsonl'), '{"n":2}\n{broken\n')
    const reopened = new FileJournal({ directory, maxBytes: 1_000_000 })
    await reopened.open()
    expect(reopened.records).toBe(3)
    expect(await reopened.read(reopened.oldest()!)).toEqual([{ n: 1 }])
    await reopened.remove(reopened.oldest()!)
    const damaged = reopened.oldest()!
    await expect(reopened.read(damaged)).rejects.toThrow()
    await reopened.quarantine(damaged)
    expect(reopened.records).toBe(0)
    expect(await readdir(directory)).toEqual(['000000000005-logs-2.jsonl.corrupt'])
    expect(await reopened.append('logs', [{ n: 3 }])).toBe(true)
    expect(reopened.oldest()?.seq).toBe(6)
  })
})

describe('FileJournal quarantine', () => {
  it('never overwrites a batch set aside earlier, also when a later batch carries the same name', async () => {
    const directory = await freshDirectory()
    const setAside: string[] = []
    // Sequence numbers start again at 1 once the journal is empty, so each round writes the same file name.
    for (const round of ['first', 'second', 'third']) {
      const journal = new FileJournal({ directory, maxBytes: 1_000_000 })
      await journal.open()
      expect(journal.length).toBe(0)
      expect(await journal.append('logs', [{ round }])).toBe(true)
      const entry = journal.oldest()!
      expect(entry.file).toBe('000000000001-logs-1.jsonl')
      await writeFile(join(directory, entry.file), `{"${round}":\n`)
      await expect(journal.read(entry)).rejects.toThrow()
      const kept = await journal.quarantine(entry)
      expect(kept).not.toBeNull()
      setAside.push(kept!)
      expect(journal.records).toBe(0)
    }
    // Every batch set aside is still there, with its own bytes.
    const files = await readdir(directory)
    const contents = await Promise.all(files.map((file) => readFile(join(directory, file), 'utf8')))
    expect(contents.sort()).toEqual(['{"first":\n', '{"second":\n', '{"third":\n'])
    expect(setAside).toEqual(['000000000001-logs-1.jsonl.corrupt', '000000000001-logs-1.jsonl.2.corrupt', '000000000001-logs-1.jsonl.3.corrupt'])
    expect(files.sort()).toEqual([...setAside].sort())
  })

  it('forgets a batch whose file is already gone', async () => {
    const directory = await freshDirectory()
    const journal = new FileJournal({ directory, maxBytes: 1_000_000 })
    await journal.open()
    await journal.append('logs', [{ n: 1 }])
    const entry = journal.oldest()!
    await rm(join(directory, entry.file))
    expect(await journal.quarantine(entry)).toBeNull()
    expect(journal.length).toBe(0)
    expect(await readdir(directory)).toEqual([])
  })
})

describe('FileJournal and the event loop', () => {
  it('serialises and parses a 10 000-record batch a slice at a time, never in one turn', async () => {
    const directory = await freshDirectory()
    const journal = new FileJournal({ directory, maxBytes: 100_000_000 })
    await journal.open()
    const turns = countTurns()
    try {
      // JSON.stringify calls toJSON once per item: each call marks the turn it runs in.
      const items = Array.from({ length: 10_000 }, (_, index) => ({ toJSON: () => (turns.mark(), { index, body: 'b'.repeat(200) }) }))
      expect(await journal.append('logs', items)).toBe(true)
      expect(turns.marks).toBe(10_000)
      expect(turns.mostInOneTurn).toBeLessThanOrEqual(RECORDS_PER_SLICE)
    } finally {
      turns.stop()
    }
    const entry = journal.oldest()!
    expect(entry.bytes).toBe((await stat(join(directory, entry.file))).size)

    const parsing = countTurns()
    const parse = JSON.parse
    const spy = vi.spyOn(JSON, 'parse').mockImplementation((text: string, reviver?: (key: string, value: unknown) => unknown) => {
      parsing.mark()
      return parse(text, reviver)
    })
    try {
      const read = (await journal.read(entry)) as { index: number }[]
      expect(read.map((item) => item.index)).toEqual(Array.from({ length: 10_000 }, (_, index) => index))
      expect(parsing.marks).toBe(10_000)
      expect(parsing.mostInOneTurn).toBeLessThanOrEqual(RECORDS_PER_SLICE)
    } finally {
      spy.mockRestore()
      parsing.stop()
    }
  })
})
