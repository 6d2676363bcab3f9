/**
 * Incremental Server-Sent Events parsing and serialisation, used only when a pipeline has
 * `onChunk` hooks (otherwise streamed bytes are relayed untouched). Events may be split across
 * reads in any place, including inside a UTF-8 character or between `\r` and `\n`.
 * Also the two byte scans that end a failed stream with an error event (`eventSeparatorAfter`,
 * `nextSequenceNumber`): they run only when a stream fails, so relaying parses nothing for them.
 */
import { StringDecoder } from 'node:string_decoder'
import type { SseEvent } from '../context.js'

/** One parsed event: its joined `data` and every other line (`event:`, `id:`, comments) kept verbatim. */
export interface ParsedSseEvent extends SseEvent {
  readonly otherLines: readonly string[]
}

const SEPARATOR = /\r\n\r\n|\n\n|\r\r/

export class SseParser {
  readonly #decoder = new StringDecoder('utf8')
  #buffer = ''

  /** Feeds bytes; returns the events completed by them. */
  push(chunk: Buffer): ParsedSseEvent[] {
    this.#buffer += this.#decoder.write(chunk)
    return this.#drain(false)
  }

  /** Ends the stream; returns a last event that had no trailing blank line, if any. */
  end(): ParsedSseEvent[] {
    this.#buffer += this.#decoder.end()
    return this.#drain(true)
  }

  #drain(final: boolean): ParsedSseEvent[] {
    const events: ParsedSseEvent[] = []
    for (;;) {
      const match = SEPARATOR.exec(this.#buffer)
      // A lone trailing `\r` may be the first half of `\r\n`: wait for more bytes.
      if (match === null || (!final && match[0] === '\r\r' && this.#buffer.length === match.index + 2)) break
      const block = this.#buffer.slice(0, match.index)
      this.#buffer = this.#buffer.slice(match.index + match[0].length)
      const event = parseBlock(block)
      if (event !== null) events.push(event)
    }
    if (final && this.#buffer.trim().length > 0) {
      const event = parseBlock(this.#buffer)
      this.#buffer = ''
      if (event !== null) events.push(event)
    }
    return events
  }
}

function parseBlock(block: string): ParsedSseEvent | null {
  const dataLines: string[] = []
  const otherLines: string[] = []
  for (const line of block.split(/\r\n|\n|\r/)) {
    if (line.startsWith('data:')) dataLines.push(line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5))
    else if (line.length > 0) otherLines.push(line)
  }
  if (dataLines.length === 0 && otherLines.length === 0) return null
  return { data: dataLines.join('\n'), otherLines }
}

/** Serialises an event back to wire form (`data:` lines, then a blank line). */
export function serializeSseEvent(event: SseEvent, otherLines: readonly string[] = []): string {
  let text = ''
  for (const line of otherLines) text += `${line}\n`
  for (const line of event.data.split('\n')) text += `data: ${line}\n`
  return `${text}\n`
}

const LF = 0x0a
const CR = 0x0d
const SEQUENCE_KEY = '"sequence_number"'

/**
 * What to write after `last` (the last relayed bytes) so that the next bytes begin a new event. A
 * provider that fails inside an event leaves it open; closing it keeps the error event whole (the
 * cut event itself is lost either way).
 */
export function eventSeparatorAfter(last: Buffer | null): string {
  if (last === null || last.length === 0) return ''
  let end = last.length
  const final = last[end - 1]
  if (final === LF) {
    end--
    if (end > 0 && last[end - 1] === CR) end--
  } else if (final === CR) {
    end--
    // A lone CR ends a line, but a reader waits to see whether LF follows: "\n" alone would only complete it.
    if (end > 0 && last[end - 1] !== LF && last[end - 1] !== CR) return '\n\n'
  } else {
    return '\n\n'
  }
  // One line end stripped: another one before it means the event was already closed by a blank line.
  if (end === 0 || last[end - 1] === LF || last[end - 1] === CR) return ''
  return '\n'
}

/**
 * The `sequence_number` for a Responses stream's closing error event: one more than the last one in
 * the stream's final bytes (`previous` + `last`, the two most recent upstream chunks), or 0 when
 * they hold none. Runs only when a stream fails, so the relay never parses events for it.
 */
export function nextSequenceNumber(previous: Buffer | null, last: Buffer | null): number {
  if (last === null) return 0
  const found = lastSequenceNumber(last)
  if (found !== null) return found + 1
  if (previous === null) return 0
  const joined = lastSequenceNumber(Buffer.concat([previous, last]))
  return joined === null ? 0 : joined + 1
}

function lastSequenceNumber(bytes: Buffer): number | null {
  let at = bytes.lastIndexOf(SEQUENCE_KEY)
  while (at >= 0) {
    let i = at + SEQUENCE_KEY.length
    while (i < bytes.length && (bytes[i] === 0x20 || bytes[i] === 0x09)) i++
    if (bytes[i] === 0x3a) {
      i++
      while (i < bytes.length && (bytes[i] === 0x20 || bytes[i] === 0x09)) i++
      let value = 0
      let digits = 0
      while (i < bytes.length && digits < 15 && (bytes[i] as number) >= 0x30 && (bytes[i] as number) <= 0x39) {
        value = value * 10 + ((bytes[i] as number) - 0x30)
        digits++
        i++
      }
      if (digits > 0) return value
    }
    at = at === 0 ? -1 : bytes.lastIndexOf(SEQUENCE_KEY, at - 1)
  }
  return null
}
