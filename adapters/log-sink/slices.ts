/**
 * Per-record work on a whole batch (checking, serialising, parsing), done a slice at a time with a
 * yield to the event loop between slices, so a 10 000-record batch never holds the loop for more
 * than one slice: requests keep being served while a batch is written, journaled or replayed.
 *
 * A slice ends after `RECORDS_PER_SLICE` records, or earlier once it has produced
 * `CHARS_PER_SLICE` characters (records with large bodies); one record is never split, so a
 * single huge record is a slice by itself. Text is encoded to UTF-8 a slice at a time too, and
 * kept as a list of buffers: one string of a whole batch would be encoded (and measured) in one go.
 */

/** Records handled per event-loop turn, at most. */
export const RECORDS_PER_SLICE = 100

/** Characters of text produced (or parsed) per event-loop turn before a slice ends early. */
export const CHARS_PER_SLICE = 256 * 1024

/** Resolves in a later event-loop turn, after pending I/O callbacks (`setImmediate`). */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

/** Lines of a batch, UTF-8, each ending in `\n`, as buffers of one slice each. */
export interface EncodedLines {
  readonly chunks: readonly Buffer[]
  /** Total bytes of `chunks`. */
  readonly bytes: number
}

/** The items as lines (`line(item)` each, then `\n`), built and encoded a slice at a time. */
export async function encodeLines<T>(items: readonly T[], line: (item: T) => string): Promise<EncodedLines> {
  const chunks: Buffer[] = []
  let bytes = 0
  let text = ''
  let inSlice = 0
  for (let index = 0; index < items.length; index += 1) {
    text += `${line(items[index] as T)}\n`
    inSlice += 1
    if (inSlice < RECORDS_PER_SLICE && text.length < CHARS_PER_SLICE && index + 1 < items.length) continue
    const chunk = Buffer.from(text)
    chunks.push(chunk)
    bytes += chunk.length
    text = ''
    inSlice = 0
    if (index + 1 < items.length) await nextTurn()
  }
  return { chunks, bytes }
}

/**
 * The values of the non-empty lines of `bytes` (`parse(line)` each), a slice at a time. Line ends
 * are found with the native `Buffer#indexOf`; only one line at a time becomes a string. Rejects
 * with what `parse` throws.
 */
export async function decodeLines<T>(bytes: Buffer, parse: (line: string) => T): Promise<T[]> {
  const items: T[] = []
  let inSlice = 0
  let chars = 0
  for (let start = 0; start < bytes.length; ) {
    let end = bytes.indexOf(0x0a, start)
    if (end < 0) end = bytes.length
    if (end > start) {
      items.push(parse(bytes.toString('utf8', start, end)))
      inSlice += 1
      chars += end - start
    }
    start = end + 1
    if ((inSlice >= RECORDS_PER_SLICE || chars >= CHARS_PER_SLICE) && start < bytes.length) {
      inSlice = 0
      chars = 0
      await nextTurn()
    }
  }
  return items
}

/** `map(item)` of every item, a slice at a time. Rejects with what `map` throws. */
export async function mapInSlices<T, R>(items: readonly T[], map: (item: T) => R): Promise<R[]> {
  const results: R[] = []
  for (let index = 0; index < items.length; index += 1) {
    if (index > 0 && index % RECORDS_PER_SLICE === 0) await nextTurn()
    results.push(map(items[index] as T))
  }
  return results
}
