/**
 * `ExportStore` on the local disk, under `GATEWAY_DATA_DIR/exports/` (directory 0700, files 0600):
 * `<id>.json` holds the job, `<id>.jsonl` its data. Every file is written to a temporary name and
 * renamed into place, so a crash leaves either the old or the new version, never half of one.
 * Jobs are indexed in memory at start; writes of one job are serialised so renames land in order.
 * A job found `in_progress` at start was cut short by a stop or crash: it is marked `failed`.
 *
 * Exports are local to the instance that ran them: several gateway instances need a shared
 * `GATEWAY_DATA_DIR/exports` (or sticky routing of `/v1/logs/exports`).
 */
import { randomBytes } from 'node:crypto'
import { createReadStream, createWriteStream, type WriteStream } from 'node:fs'
import { access, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { Paged, PageRequest } from '../../core/admin-records.js'
import type { ExportFileWriter, ExportFilter, ExportRecord, ExportStore } from '../../core/log-exports.js'
import type { ByteStream } from '../../core/ports.js'
import type { HealthStatus, Logger } from '../../core/service.js'

export interface FileExportStoreOptions {
  /** The directory, created when missing. */
  readonly dir: string
  readonly logger?: Logger
}

/** Export ids are UUIDs; nothing else may become part of a file name. */
const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

function checkedId(id: string): string {
  if (!ID.test(id)) throw new Error('invalid export id')
  return id
}

function temporaryName(path: string): string {
  return `${path}.${randomBytes(6).toString('hex')}.tmp`
}

export class FileExportStore implements ExportStore {
  readonly #dir: string
  readonly #logger: Logger | null
  readonly #records = new Map<string, ExportRecord>()
  /** The last pending file write of each job: the next one waits for it. */
  readonly #writes = new Map<string, Promise<void>>()

  constructor(options: FileExportStoreOptions) {
    this.#dir = options.dir
    this.#logger = options.logger ?? null
  }

  async start(): Promise<void> {
    await mkdir(this.#dir, { recursive: true, mode: 0o700 })
    for (const name of await readdir(this.#dir)) {
      const path = join(this.#dir, name)
      if (name.endsWith('.tmp')) {
        await rm(path, { force: true })
        continue
      }
      if (!name.endsWith('.json') || !ID.test(name.slice(0, -'.json'.length))) continue
      let record: ExportRecord
      try {
        record = JSON.parse(await readFile(path, 'utf8')) as ExportRecord
      } catch (error) {
        this.#logger?.error({ err: error, path }, 'unreadable export job file skipped')
        continue
      }
      if (record.status === 'in_progress') {
        record = { ...record, status: 'failed', error: 'interrupted: the gateway stopped while the export ran', lastUpdatedAt: new Date().toISOString() }
        await this.#persist(record)
      }
      this.#records.set(record.id, record)
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.#writes.values()])
  }

  async health(): Promise<HealthStatus> {
    try {
      await access(this.#dir)
      return { ok: true }
    } catch {
      return { ok: false, detail: 'the exports directory is not accessible' }
    }
  }

  async insert(record: ExportRecord): Promise<void> {
    checkedId(record.id)
    if (this.#records.has(record.id)) throw new Error(`export ${record.id} exists`)
    this.#records.set(record.id, record)
    await this.#persist(record)
  }

  async find(organisationId: string | null, id: string): Promise<ExportRecord | null> {
    const record = this.#records.get(id)
    if (record === undefined) return null
    return organisationId === null || record.organisationId === organisationId ? record : null
  }

  async list(organisationId: string, filter: ExportFilter, page: PageRequest): Promise<Paged<ExportRecord>> {
    const matching = [...this.#records.values()]
      .filter((record) => record.organisationId === organisationId && (filter.workspaceId === undefined || record.workspaceId === filter.workspaceId))
      .sort((a, b) => (a.createdAt === b.createdAt ? b.id.localeCompare(a.id) : b.createdAt.localeCompare(a.createdAt)))
    return { total: matching.length, items: matching.slice(page.offset, page.offset + page.limit) }
  }

  async update(record: ExportRecord, expectedLastUpdatedAt: string): Promise<boolean> {
    const current = this.#records.get(record.id)
    // Checked and set synchronously: no other update can run in between (one event loop).
    if (current === undefined || current.lastUpdatedAt !== expectedLastUpdatedAt) return false
    this.#records.set(record.id, record)
    await this.#persist(record)
    return true
  }

  async openWriter(id: string): Promise<ExportFileWriter> {
    const target = join(this.#dir, `${checkedId(id)}.jsonl`)
    const temporary = temporaryName(target)
    const stream = createWriteStream(temporary, { mode: 0o600 })
    await new Promise<void>((resolve, reject) => {
      stream.once('open', () => resolve())
      stream.once('error', reject)
    })
    return new FileWriter(stream, temporary, target)
  }

  async openReader(id: string): Promise<ByteStream | null> {
    const path = join(this.#dir, `${checkedId(id)}.jsonl`)
    try {
      if (!(await stat(path)).isFile()) return null
    } catch {
      return null
    }
    return fileByteStream(path)
  }

  /** Writes the job file atomically, after any earlier write of the same job. */
  #persist(record: ExportRecord): Promise<void> {
    const path = join(this.#dir, `${record.id}.json`)
    const previous = this.#writes.get(record.id) ?? Promise.resolve()
    const next = previous
      .catch(() => undefined)
      .then(async () => {
        const temporary = temporaryName(path)
        await writeFile(temporary, JSON.stringify(record), { mode: 0o600 })
        await rename(temporary, path)
      })
    this.#writes.set(record.id, next)
    void next.finally(() => {
      if (this.#writes.get(record.id) === next) this.#writes.delete(record.id)
    }).catch(() => undefined)
    return next
  }
}

class FileWriter implements ExportFileWriter {
  readonly #stream: WriteStream
  readonly #temporary: string
  readonly #target: string
  #error: unknown = null

  constructor(stream: WriteStream, temporary: string, target: string) {
    this.#stream = stream
    this.#temporary = temporary
    this.#target = target
    stream.on('error', (error) => {
      this.#error = error
    })
  }

  async write(text: string): Promise<void> {
    if (this.#error !== null) throw this.#error
    if (this.#stream.write(text)) return
    await new Promise<void>((resolve, reject) => {
      const onDrain = (): void => {
        this.#stream.off('error', onError)
        resolve()
      }
      const onError = (error: unknown): void => {
        this.#stream.off('drain', onDrain)
        reject(error)
      }
      this.#stream.once('drain', onDrain)
      this.#stream.once('error', onError)
    })
  }

  async commit(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      if (this.#error !== null) {
        reject(this.#error)
        return
      }
      this.#stream.once('error', reject)
      this.#stream.end(() => resolve())
    })
    await rename(this.#temporary, this.#target)
  }

  async abort(): Promise<void> {
    this.#stream.destroy()
    await rm(this.#temporary, { force: true })
  }
}

/** A file as a `ByteStream`: reading starts when consumed; `pause`/`resume` give backpressure. */
function fileByteStream(path: string): ByteStream {
  const stream = createReadStream(path)
  // An error before (or after) the consumer attached must not become an unhandled 'error' event.
  stream.on('error', () => undefined)
  return {
    consume(onData, onEnd, onError) {
      stream.on('data', (chunk) => onData(chunk as Buffer))
      stream.once('end', onEnd)
      stream.once('error', onError)
    },
    pause() {
      stream.pause()
    },
    resume() {
      stream.resume()
    },
    destroy() {
      stream.removeAllListeners('data')
      stream.removeAllListeners('end')
      stream.destroy()
    },
  }
}
