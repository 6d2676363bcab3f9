/**
 * FileExportStore on a real temporary directory: jobs survive a restart (a running one comes back
 * `failed`), updates are optimistic, data files appear only on commit, and ids never become paths.
 */
import { randomUUID } from 'node:crypto'
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { FileExportStore } from '../../../adapters/embedded/file-export-store.js'
import type { ExportRecord } from '../../../core/log-exports.js'
import type { ByteStream } from '../../../core/ports.js'

let root: string
let dir: string

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'gw-exports-'))
  dir = join(root, 'exports')
})

afterEach(() => {
  rmSync(root, { recursive: true, force: true })
})

function record(overrides: Partial<ExportRecord> = {}): ExportRecord {
  const now = new Date().toISOString()
  return {
    id: randomUUID(),
    organisationId: 'org-1',
    workspaceId: 'ws-1',
    filters: { time_of_generation_min: now, time_of_generation_max: now },
    requestedData: ['id'],
    description: null,
    status: 'draft',
    total: 0,
    error: null,
    createdBy: 'key-1',
    createdAt: now,
    lastUpdatedAt: now,
    signingKey: 'k',
    ...overrides,
  }
}

function readAll(stream: ByteStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    stream.consume((chunk) => chunks.push(chunk), () => resolve(Buffer.concat(chunks).toString('utf8')), reject)
  })
}

describe('FileExportStore', () => {
  it('keeps jobs across restarts, scoped by organisation and workspace, newest first', async () => {
    const store = new FileExportStore({ dir })
    await store.start()
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    const first = record({ createdAt: '2026-01-01T00:00:00.000Z' })
    const second = record({ createdAt: '2026-01-02T00:00:00.000Z', workspaceId: 'ws-2' })
    await store.insert(first)
    await store.insert(second)
    await store.insert(record({ organisationId: 'org-2' }))
    await store.close()

    const reopened = new FileExportStore({ dir })
    await reopened.start()
    expect((await reopened.list('org-1', {}, { offset: 0, limit: 10 })).items.map((item) => item.id)).toEqual([second.id, first.id])
    expect((await reopened.list('org-1', { workspaceId: 'ws-1' }, { offset: 0, limit: 10 })).items.map((item) => item.id)).toEqual([first.id])
    expect(await reopened.find('org-2', first.id)).toBeNull()
    expect((await reopened.find(null, first.id))?.id).toBe(first.id)
  })

  it('updates optimistically and marks a job that was running at a stop as failed', async () => {
    const store = new FileExportStore({ dir })
    await store.start()
    const job = record()
    await store.insert(job)
    const running = { ...job, status: 'in_progress' as const, lastUpdatedAt: '2099-01-01T00:00:00.000Z' }
    expect(await store.update(running, job.lastUpdatedAt)).toBe(true)
    expect(await store.update({ ...running, description: 'late' }, job.lastUpdatedAt)).toBe(false)
    await store.close()

    const reopened = new FileExportStore({ dir })
    await reopened.start()
    expect(await reopened.find('org-1', job.id)).toMatchObject({ status: 'failed', error: expect.stringContaining('interrupted') })
  })

  it('shows a data file only once committed; abort leaves the earlier one', async () => {
    const store = new FileExportStore({ dir })
    await store.start()
    const id = randomUUID()
    expect(await store.openReader(id)).toBeNull()
    const writer = await store.openWriter(id)
    await writer.write('{"id":1}\n')
    expect(await store.openReader(id)).toBeNull()
    await writer.commit()
    expect(await readAll((await store.openReader(id)) as ByteStream)).toBe('{"id":1}\n')

    const second = await store.openWriter(id)
    await second.write('{"id":2}\n')
    await second.abort()
    expect(await readAll((await store.openReader(id)) as ByteStream)).toBe('{"id":1}\n')
    expect(readdirSync(dir).filter((name) => name.endsWith('.tmp'))).toEqual([])
    expect(statSync(join(dir, `${id}.jsonl`)).mode & 0o777).toBe(0o600)
  })

  it('never turns a non-UUID id into a path', async () => {
    const store = new FileExportStore({ dir })
    await store.start()
    await expect(store.openWriter('../../etc/passwd')).rejects.toThrow('invalid export id')
    await expect(store.openReader('../x')).rejects.toThrow('invalid export id')
    await expect(store.insert(record({ id: '../x' }))).rejects.toThrow('invalid export id')
  })
})
