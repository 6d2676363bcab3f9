import { describe, expect, it } from 'vitest'
import { SseParser, serializeSseEvent } from '../../../core/http/sse.js'

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
