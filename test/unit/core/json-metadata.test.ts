import { describe, expect, it } from 'vitest'
import { ERRORS, GatewayError } from '../../../core/errors.js'
import { MAX_METADATA_HEADER_CHARS, parseMetadataHeader } from '../../../core/json-metadata.js'

function refusal(raw: string): GatewayError {
  const result = parseMetadataHeader(raw)
  if (!(result instanceof GatewayError)) throw new Error(`expected a refusal for ${raw.slice(0, 40)}`)
  expect(result.code).toBe(ERRORS.GW_REQ_INVALID.code)
  expect(result.status).toBe(400)
  expect(result.param).toBe('x-gateway-metadata')
  return result
}

describe('parseMetadataHeader', () => {
  it('returns the pairs of a JSON object of strings', () => {
    expect(parseMetadataHeader('{"_user":"alice","env":"prod"}')).toEqual({ _user: 'alice', env: 'prod' })
    expect(parseMetadataHeader('{}')).toEqual({})
    const many = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`k${i}`, 'v'.repeat(100)]))
    expect(parseMetadataHeader(JSON.stringify(many))).toEqual(many)
    expect(parseMetadataHeader(JSON.stringify({ long: 'x'.repeat(1024) }))).toEqual({ long: 'x'.repeat(1024) })
  })

  it('refuses text that is not JSON, and JSON that is not an object', () => {
    expect(refusal('user=alice').message).toContain('not valid JSON')
    expect(refusal('').message).toContain('not valid JSON')
    for (const raw of ['null', '[]', '["a"]', '"alice"', '42', 'true']) expect(refusal(raw).message).toContain('must be a JSON object of strings')
  })

  it('names the key whose value is not a string', () => {
    expect(refusal('{"ok":"x","n":1}').message).toContain('the value of "n" must be a string')
    expect(refusal('{"b":true}').message).toContain('"b"')
    expect(refusal('{"o":{"x":"y"}}').message).toContain('"o"')
    expect(refusal('{"z":null}').message).toContain('"z"')
    expect(refusal(`{"deep":${'['.repeat(3000)}${']'.repeat(3000)}}`).message).toContain('"deep"')
  })

  it('refuses more than 64 keys, a value over 1024 characters and a header over 8192 characters', () => {
    const keys = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v']))
    expect(refusal(JSON.stringify(keys)).message).toContain('more than 64 keys')
    expect(refusal(JSON.stringify({ long: 'x'.repeat(1025) })).message).toContain('"long" is longer than 1024 characters')
    expect(MAX_METADATA_HEADER_CHARS).toBe(8192)
    const wide = JSON.stringify(Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`k${i}`, 'x'.repeat(1000)])))
    expect(wide.length).toBeGreaterThan(8192)
    expect(refusal(wide).message).toContain('longer than 8192 characters')
  })

  it('quotes a hostile key cut short, so the message stays small', () => {
    const message = refusal(JSON.stringify({ ['k'.repeat(5000)]: 1 })).message
    expect(message.length).toBeLessThan(200)
  })
})
