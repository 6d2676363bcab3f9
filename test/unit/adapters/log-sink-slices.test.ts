import { afterEach, describe, expect, it } from 'vitest'
import { CHARS_PER_SLICE, RECORDS_PER_SLICE, decodeLines, encodeLines, mapInSlices } from '../../../adapters/log-sink/slices.js'
import { countTurns, type TurnCounter } from '../../helpers/event-loop-turns.js'

let turns: TurnCounter | null = null

afterEach(() => {
  turns?.stop()
  turns = null
})

const BATCH = 10_000

describe('log batch slices', () => {
  it('serialises a 10 000-item batch a slice at a time, encoded per slice, byte for byte', async () => {
    turns = countTurns()
    const counter = turns
    const items = Array.from({ length: BATCH }, (_, index) => ({ index, text: `é-${index}` }))
    const encoded = await encodeLines(items, (item) => {
      counter.mark()
      return JSON.stringify(item)
    })
    expect(counter.marks).toBe(BATCH)
    expect(counter.mostInOneTurn).toBeLessThanOrEqual(RECORDS_PER_SLICE)
    expect(counter.turnsUsed).toBeGreaterThanOrEqual(BATCH / RECORDS_PER_SLICE)
    expect(encoded.chunks.length).toBe(BATCH / RECORDS_PER_SLICE)
    const whole = Buffer.concat(encoded.chunks)
    expect(encoded.bytes).toBe(whole.length)
    expect(whole.toString('utf8')).toBe(items.map((item) => `${JSON.stringify(item)}\n`).join(''))
  })

  it('ends a slice early once it holds CHARS_PER_SLICE characters, and never splits a record', async () => {
    turns = countTurns()
    const counter = turns
    const large = 'x'.repeat(CHARS_PER_SLICE / 4)
    const items = Array.from({ length: 40 }, () => large)
    const encoded = await encodeLines(items, (item) => {
      counter.mark()
      return item
    })
    // Four lines of a quarter slice each pass the bound: at most five per turn, not forty.
    expect(counter.mostInOneTurn).toBeLessThanOrEqual(5)
    expect(encoded.chunks.length).toBeGreaterThanOrEqual(8)
    expect(Buffer.concat(encoded.chunks).toString()).toBe(items.map((item) => `${item}\n`).join(''))
  })

  it('parses a 10 000-line batch a slice at a time, skipping empty lines', async () => {
    const lines = Array.from({ length: BATCH }, (_, index) => JSON.stringify({ index }))
    const bytes = Buffer.from(`${lines.join('\n')}\n\n`)
    turns = countTurns()
    const counter = turns
    const items = await decodeLines(bytes, (line) => {
      counter.mark()
      return JSON.parse(line) as { index: number }
    })
    expect(items.map((item) => item.index)).toEqual(lines.map((_, index) => index))
    expect(counter.mostInOneTurn).toBeLessThanOrEqual(RECORDS_PER_SLICE)
    await expect(decodeLines(Buffer.from('{"a":1}\n{broken\n'), (line): unknown => JSON.parse(line))).rejects.toThrow(SyntaxError)
  })

  it('maps a 10 000-item batch a slice at a time', async () => {
    turns = countTurns()
    const counter = turns
    const items = Array.from({ length: BATCH }, (_, index) => index)
    const doubled = await mapInSlices(items, (item) => {
      counter.mark()
      return item * 2
    })
    expect(doubled).toEqual(items.map((item) => item * 2))
    expect(counter.mostInOneTurn).toBeLessThanOrEqual(RECORDS_PER_SLICE)
  })
})
