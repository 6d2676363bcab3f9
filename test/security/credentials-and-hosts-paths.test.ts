/**
 * The path rule (issue 12, item 6) as a unit: `hasDotSegment` and the route table's `bad-path`
 * answer for every spelling of a `.`/`..` segment an upstream server may fold, and none for paths
 * that only look alike.
 */
import { describe, expect, it } from 'vitest'
import { hasDotSegment, RouteTable } from '../../core/routes.js'

const DOT_SEGMENTS = [
  '/v1/..',
  '/v1/.',
  '/v1/../x',
  '/v1/./x',
  '/v1/a/../b',
  '/v1/a/..',
  '/v1/%2e%2e/x',
  '/v1/%2E%2E/x',
  '/v1/%2e%2E/x',
  '/v1/%2e./x',
  '/v1/.%2e/x',
  '/v1/%2e/x',
  '/v1/a\\..\\b',
  '/v1/a\\..',
  '/v1/a%5c..%5cb',
  '/v1/a%5C%2e%2e',
  '/v1/a%2f..%2fb',
  '/v1/a%2F..',
  '/v1/a%2f%2e%2e%2fb',
  '/v1/%252e%252e/x',
  '/v1/%252E./x',
  '/v1/a%252f..%252fb',
  '/v1/%25252e%25252e/x',
  '/v1/..;/x',
  '/v1/.;jsessionid=1/x',
  '/v1/%2e%2e;x/y',
  // Still holding dot escapes after three rounds of decoding: refused rather than decoded on.
  '/v1/%2525252e%2525252e/x',
]

const HARMLESS = [
  '/v1/chat/completions',
  '/v1/files',
  '/v1/files/a.b',
  '/v1/files/.hidden',
  '/v1/files/hidden.',
  '/v1/files/...',
  '/v1/files/x..y',
  '/v1/files/a%2Fb',
  '/v1/files/a%5Cb',
  '/v1/files/100%25',
  '/v1/files/%2e%2ex',
  '/v1/files/%2ehidden',
  '/v1/files/a;b',
  '/v1/files/%zz',
  '/v1/files/%',
  '/v1//double//slash',
  '/v1/models/ft:gpt-4o:org.name',
]

describe('hasDotSegment', () => {
  it.each(DOT_SEGMENTS)('finds the dot segment in %s', (path) => {
    expect(hasDotSegment(path)).toBe(true)
  })

  it.each(HARMLESS)('finds none in %s', (path) => {
    expect(hasDotSegment(path)).toBe(false)
  })
})

describe('RouteTable and dot segments', () => {
  const table = new RouteTable()

  it.each(DOT_SEGMENTS)('answers bad-path to %s, with or without a provider selection', (path) => {
    expect(table.lookup('GET', path, true).kind).toBe('bad-path')
    expect(table.lookup('POST', path, false).kind).toBe('bad-path')
  })

  it('leaves first-class routes, paths outside /v1 and harmless pass-through paths alone', () => {
    expect(table.lookup('POST', '/v1/chat/completions', true).kind).toBe('route')
    expect(table.lookup('GET', '/v2/../v1/x', true).kind).toBe('not-found')
    for (const path of HARMLESS) expect(table.lookup('GET', path, true).kind, path).toBe('route')
  })
})
