import { describe, expect, it } from 'vitest'
import { jsonTooDeep, MAX_JSON_DEPTH } from '../../../core/json-depth.js'

/** `levels` nested arrays around `inner`. */
function arrays(levels: number, inner = ''): string {
  return `${'['.repeat(levels)}${inner}${']'.repeat(levels)}`
}

/** `levels` nested objects `{"a":{"a":...}}`. */
function objects(levels: number): string {
  return `${'{"a":'.repeat(levels - 1)}{}${'}'.repeat(levels - 1)}`
}

function check(text: string, limit?: number): boolean {
  return jsonTooDeep(Buffer.from(text), JSON.parse(text), limit)
}

describe('jsonTooDeep', () => {
  it('accepts 64 levels and refuses 65, for arrays, objects and a mix', () => {
    expect(MAX_JSON_DEPTH).toBe(64)
    expect(check(arrays(64))).toBe(false)
    expect(check(arrays(65))).toBe(true)
    expect(check(objects(64))).toBe(false)
    expect(check(objects(65))).toBe(true)
    const mixed = (levels: number): string => `${'[{"k":'.repeat(levels / 2)}1${'}]'.repeat(levels / 2)}`
    expect(check(mixed(64))).toBe(false)
    expect(check(mixed(66))).toBe(true)
  })

  it('refuses 100 000 levels without overflowing the stack', () => {
    expect(check(arrays(100_000))).toBe(true)
    expect(check(`{"model_config":${objects(100_000)}}`)).toBe(true)
  })

  it('counts depth, not brackets: many shallow containers pass', () => {
    const wide = JSON.stringify({ messages: Array.from({ length: 500 }, (_, i) => ({ role: 'user', content: `m${i}`, tags: [[i]] })) })
    expect(check(wide)).toBe(false)
  })

  it('finds one deep branch among shallow ones', () => {
    const text = JSON.stringify({ a: Array.from({ length: 100 }, () => ({})), b: [1, 2], c: 'x' }).replace('"c":"x"', `"c":${arrays(70)}`)
    expect(check(text)).toBe(true)
  })

  it('ignores brackets inside strings (escaped quotes included)', () => {
    const text = JSON.stringify({ content: '['.repeat(1000), other: `\\"${'{'.repeat(200)}"` })
    expect(check(text)).toBe(false)
  })

  it('takes the limit as a parameter and treats scalars as depth 0', () => {
    expect(check('{"a":[1]}', 2)).toBe(false)
    expect(check('{"a":[1]}', 1)).toBe(true)
    expect(check('"["', 0)).toBe(false)
    expect(check('12', 0)).toBe(false)
  })
})
