import { describe, expect, it } from 'vitest'
import { eventSeparatorAfter, nextSequenceNumber, serializeSseEvent, SseParser } from '../../../core/http/sse.js'

function feed(parts: Array<string | Buffer>): Array<{ data: string; otherLines: readonly string[] }> {
  const parser = new SseParser()
  const events = parts.flatMap((part) => parser.push(Buffer.isBuffer(part) ? part : Buffer.from(part)))
  return [...events, ...parser.end()]
}

describe('SseParser', () => {
  it('splits events on blank lines and joins multi-line data', () => {
    expect(feed(['data: a\n\ndata: b\ndata: c\n\n'])).toEqual([
      { data: 'a', otherLines: [] },
      { data: 'b\nc', otherLines: [] },
    ])
  })

  it('handles events split at every byte, CRLF separators and other fields', () => {
    const text = 'event: message\r\nid: 7\r\ndata: {"x":1}\r\n\r\n: comment\r\ndata: [DONE]\r\n\r\n'
    const parts = [...Buffer.from(text)].map((byte) => Buffer.from([byte]))
    expect(feed(parts)).toEqual([
      { data: '{"x":1}', otherLines: ['event: message', 'id: 7'] },
      { data: '[DONE]', otherLines: [': comment'] },
    ])
  })

  it('keeps a UTF-8 character split across reads intact', () => {
    const bytes = Buffer.from('data: héllo 🌍\n\n')
    expect(feed([bytes.subarray(0, 8), bytes.subarray(8, 15), bytes.subarray(15)])).toEqual([{ data: 'héllo 🌍', otherLines: [] }])
  })

  it('emits a final event without a trailing blank line at end of stream', () => {
    expect(feed(['data: tail'])).toEqual([{ data: 'tail', otherLines: [] }])
  })

  it('serialises back to the wire form', () => {
    expect(serializeSseEvent({ data: 'a\nb' }, ['event: x'])).toBe('event: x\ndata: a\ndata: b\n\n')
  })
})

describe('eventSeparatorAfter', () => {
  /** What an SSE reader makes of `relayed` + separator + an error event: the last event's name and data. */
  function lastEvent(relayed: string): { event: string | null; data: string } {
    const text = relayed + eventSeparatorAfter(Buffer.from(relayed)) + 'event: error\ndata: {"type":"error"}\n\n'
    const events = feed([text]).map((event) => ({ event: event.otherLines.find((line) => line.startsWith('event:'))?.slice(7) ?? null, data: event.data }))
    return events.at(-1)!
  }

  it('adds nothing after a complete event, whatever its line endings', () => {
    for (const relayed of ['data: a\n\n', 'data: a\r\n\r\n', 'data: a\r\r']) {
      expect(eventSeparatorAfter(Buffer.from(relayed))).toBe('')
      expect(lastEvent(relayed)).toEqual({ event: 'error', data: '{"type":"error"}' })
    }
    expect(eventSeparatorAfter(null)).toBe('')
  })

  it('closes an event cut inside a line or after its last line, so the next event stands alone', () => {
    for (const relayed of ['data: {"type":"x","seq', 'event: x\ndata: {}\n', 'data: {}\r\n', 'data: {}\r', 'event: response.output_text.delta\n']) {
      expect(lastEvent(relayed), JSON.stringify(relayed)).toEqual({ event: 'error', data: '{"type":"error"}' })
    }
  })
})

describe('nextSequenceNumber', () => {
  const event = (n: number, spaced = false): Buffer =>
    Buffer.from(`event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"x","sequence_number"${spaced ? ' : ' : ':'}${n}}\n\n`)

  it('is one past the last sequence_number in the final bytes', () => {
    expect(nextSequenceNumber(null, Buffer.concat([event(3), event(4)]))).toBe(5)
    expect(nextSequenceNumber(event(6), event(7, true))).toBe(8)
  })

  it('looks into the previous chunk when the last one holds none, also across the two', () => {
    expect(nextSequenceNumber(event(9), Buffer.from('event: response.output_text.delta\ndata: {"type":"response.output_text.delta","de'))).toBe(10)
    const whole = event(11)
    const cut = whole.indexOf('number') + 2
    expect(nextSequenceNumber(whole.subarray(0, cut), whole.subarray(cut))).toBe(12)
  })

  it('is 0 when the stream carried none (or only a key without a number)', () => {
    expect(nextSequenceNumber(null, null)).toBe(0)
    expect(nextSequenceNumber(Buffer.from('data: {"a":1}\n\n'), Buffer.from('data: {"b":2}\n\n'))).toBe(0)
    expect(nextSequenceNumber(null, Buffer.from('data: {"sequence_number":"x"}\n\n'))).toBe(0)
  })
})
