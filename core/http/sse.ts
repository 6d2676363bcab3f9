/**
 * Incremental Server-Sent Events parsing and serialisation, used only when a pipeline has
 * `onChunk` hooks (otherwise streamed bytes are relayed untouched). Events may be split across
 * reads in any place, including inside a UTF-8 character or between `\r` and `\n`.
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
