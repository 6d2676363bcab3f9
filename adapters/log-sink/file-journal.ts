/**
 * An append-only on-disk journal of batches a log sink could not write to its store, replayed
 * oldest first once the store is back.
 *
 * - One file per batch, `<seq>-<kind>-<count>.jsonl` (one JSON value per line), so the journal's
 *   record count and order are known from a directory listing, without reading the files.
 * - Batches are serialised and parsed a slice at a time (slices.ts), never in one event-loop turn.
 * - `append` writes a temporary file, fsyncs it, renames it into place and fsyncs the directory:
 *   after it resolves the batch survives a crash or power loss, and a batch is never seen half
 *   written (a stray temporary file from a crash is removed at `open`).
 * - The journal is bounded by `maxBytes`: `append` refuses a batch that would exceed it, and the
 *   caller counts that batch as lost.
 * - A file that cannot be parsed is set aside as `*.corrupt` (kept for the operator, never replayed,
 *   never overwritten by a later one).
 *
 * One journal directory belongs to one process at a time (the sink that owns it).
 */
import { constants } from 'node:fs'
import { copyFile, link, mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { decodeLines, encodeLines } from './slices.js'

/** What a journaled batch holds. */
export type JournalKind = 'logs' | 'feedback'

export interface JournalEntry {
  readonly file: string
  readonly seq: number
  readonly kind: JournalKind
  /** Records in the batch. */
  readonly count: number
  readonly bytes: number
}

export interface FileJournalOptions {
  readonly directory: string
  /** Bytes the journal may hold in total. */
  readonly maxBytes: number
}

const ENTRY_NAME = /^(\d{12})-(logs|feedback)-(\d+)\.jsonl$/
const TEMPORARY_SUFFIX = '.tmp'

/** Names tried for one quarantined file before it is left in place. */
const MAX_QUARANTINE_NAMES = 1000

/**
 * Links `source` under `target`, or copies it where the file system has no hard links; both fail
 * on an existing `target` (a rename would replace it). `'failed'` when `source` is missing or
 * neither works.
 */
async function keepUnder(source: string, target: string): Promise<'kept' | 'taken' | 'failed'> {
  try {
    await link(source, target)
    return 'kept'
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EEXIST') return 'taken'
    if (code === 'ENOENT') return 'failed'
  }
  try {
    await copyFile(source, target, constants.COPYFILE_EXCL)
    return 'kept'
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EEXIST' ? 'taken' : 'failed'
  }
}

function entryName(seq: number, kind: JournalKind, count: number): string {
  return `${String(seq).padStart(12, '0')}-${kind}-${count}.jsonl`
}

export class FileJournal {
  readonly directory: string
  readonly #maxBytes: number
  #entries: JournalEntry[] = []
  #nextSeq = 1
  #bytes = 0
  #records = 0
  #opened = false

  constructor(options: FileJournalOptions) {
    if (!Number.isInteger(options.maxBytes) || options.maxBytes < 1) throw new RangeError('FileJournal: maxBytes must be a positive integer')
    this.directory = options.directory
    this.#maxBytes = options.maxBytes
  }

  /**
   * Creates the directory (owner-only, 0700: batches hold request logs, bodies included), removes
   * leftovers of an interrupted append and lists what is waiting. Idempotent.
   */
  async open(): Promise<void> {
    if (this.#opened) return
    await mkdir(this.directory, { recursive: true, mode: 0o700 })
    const entries: JournalEntry[] = []
    for (const file of await readdir(this.directory)) {
      if (file.endsWith(TEMPORARY_SUFFIX)) {
        await rm(join(this.directory, file), { force: true })
        continue
      }
      const match = ENTRY_NAME.exec(file)
      if (match === null) continue
      const info = await stat(join(this.directory, file))
      entries.push({ file, seq: Number(match[1]), kind: match[2] as JournalKind, count: Number(match[3]), bytes: info.size })
    }
    entries.sort((a, b) => a.seq - b.seq)
    this.#entries = entries
    this.#bytes = entries.reduce((sum, entry) => sum + entry.bytes, 0)
    this.#records = entries.reduce((sum, entry) => sum + entry.count, 0)
    this.#nextSeq = (entries.at(-1)?.seq ?? 0) + 1
    this.#opened = true
  }

  /** Records waiting in the journal. */
  get records(): number {
    return this.#records
  }

  get bytes(): number {
    return this.#bytes
  }

  get length(): number {
    return this.#entries.length
  }

  /** The oldest waiting batch. */
  oldest(): JournalEntry | undefined {
    return this.#entries[0]
  }

  /**
   * Appends one batch durably. Resolves `false` (writing nothing) when it would take the journal
   * past `maxBytes`; rejects when the disk refuses the write.
   */
  async append(kind: JournalKind, items: readonly unknown[]): Promise<boolean> {
    if (!this.#opened) throw new Error('FileJournal is not open')
    if (items.length === 0) return true
    // Taken at the call, so batches replay in the order they were handed over (a refused batch leaves a gap).
    const seq = this.#nextSeq++
    const { chunks, bytes } = await encodeLines(items, (item) => JSON.stringify(item))
    if (this.#bytes + bytes > this.#maxBytes) return false
    // Reserved before the next await, so concurrent appends cannot overshoot the bound together.
    this.#bytes += bytes
    const file = entryName(seq, kind, items.length)
    const path = join(this.directory, file)
    const temporary = `${path}${TEMPORARY_SUFFIX}`
    try {
      const handle = await open(temporary, 'w', 0o600)
      try {
        // One request for every slice (libuv loops over partial writes and IOV_MAX itself).
        const { bytesWritten } = await handle.writev(chunks as Buffer[])
        if (bytesWritten !== bytes) throw new Error(`journal write of ${file} stopped after ${bytesWritten} of ${bytes} bytes`)
        await handle.sync()
      } finally {
        await handle.close()
      }
      await rename(temporary, path)
      await this.#syncDirectory()
    } catch (error) {
      this.#bytes -= bytes
      await rm(temporary, { force: true }).catch(() => undefined)
      throw error
    }
    const entry: JournalEntry = { file, seq, kind, count: items.length, bytes }
    // Concurrent appends may finish out of order; replays go by sequence number.
    let index = this.#entries.length
    while (index > 0 && (this.#entries[index - 1] as JournalEntry).seq > seq) index -= 1
    this.#entries.splice(index, 0, entry)
    this.#records += items.length
    return true
  }

  /**
   * The batch's items, in the order they were appended, parsed a slice at a time. Rejects when the
   * file is unreadable or not valid JSON lines.
   */
  async read(entry: JournalEntry): Promise<unknown[]> {
    const items = await decodeLines(await readFile(join(this.directory, entry.file)), (line): unknown => JSON.parse(line))
    if (items.length !== entry.count) throw new Error(`journal file ${entry.file} holds ${items.length} records, its name says ${entry.count}`)
    return items
  }

  /** Deletes a replayed batch. */
  async remove(entry: JournalEntry): Promise<void> {
    await rm(join(this.directory, entry.file), { force: true })
    this.#forget(entry)
  }

  /**
   * Sets aside a batch that cannot be read, so it no longer blocks the journal. It keeps its name
   * with `.corrupt` appended, or `.<n>.corrupt` when that is taken: sequence numbers start again
   * at 1 once the journal is empty, so a later batch may carry the name of one set aside earlier,
   * and neither may overwrite the other. Resolves with the name it was kept under, or `null` when
   * the file was gone or could not be moved (it then stays in place, forgotten until the next
   * `open`, as before).
   */
  async quarantine(entry: JournalEntry): Promise<string | null> {
    this.#forget(entry)
    const source = join(this.directory, entry.file)
    for (let attempt = 1; attempt <= MAX_QUARANTINE_NAMES; attempt += 1) {
      const name = attempt === 1 ? `${entry.file}.corrupt` : `${entry.file}.${attempt}.corrupt`
      const outcome = await keepUnder(source, join(this.directory, name))
      if (outcome === 'taken') continue
      if (outcome === 'kept') {
        await rm(source, { force: true }).catch(() => undefined)
        return name
      }
      return null
    }
    return null
  }

  #forget(entry: JournalEntry): void {
    const index = this.#entries.indexOf(entry)
    if (index < 0) return
    this.#entries.splice(index, 1)
    this.#bytes -= entry.bytes
    this.#records -= entry.count
  }

  /** A rename is durable only once the directory itself is synced. */
  async #syncDirectory(): Promise<void> {
    const handle = await open(this.directory, 'r')
    try {
      await handle.sync()
    } finally {
      await handle.close()
    }
  }
}
