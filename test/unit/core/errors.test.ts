import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import {
  ERROR_TYPES,
  ERRORS,
  GatewayError,
  gatewayError,
  toControlPlaneBody,
  toDataPlaneBody,
  toMessagesBody,
  toStreamErrorEvent,
} from '../../../core/errors.js'

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8')

/** Rows of the README's error table: code, status, type, admin code. */
function readmeErrorRows(): Array<[string, number, string, string]> {
  const rows: Array<[string, number, string, string]> = []
  for (const line of readme.split('\n')) {
    const match = /^\| `(GW_[A-Z_]+)` \| (\d+) \| ([a-z_]+) \| (AB\d\d) \|/.exec(line)
    if (match) rows.push([match[1] as string, Number(match[2]), match[3] as string, match[4] as string])
  }
  return rows
}

describe('error catalogue', () => {
  it('keys equal their codes, codes are unique, types are known', () => {
    const codes = new Set<string>()
    for (const [key, spec] of Object.entries(ERRORS)) {
      expect(spec.code).toBe(key)
      expect(codes.has(spec.code)).toBe(false)
      codes.add(spec.code)
      expect(ERROR_TYPES).toContain(spec.type)
      expect(spec.status).toBeGreaterThanOrEqual(400)
    }
  })

  it('matches the README error table in both directions', () => {
    const fromReadme = readmeErrorRows()
    const fromCatalogue = Object.values(ERRORS).map((spec) => [spec.code, spec.status, spec.type, spec.adminCode])
    expect(fromReadme.sort()).toEqual(fromCatalogue.sort())
  })

  it('maps statuses to the documented Admin API codes', () => {
    const expected: Record<number, string> = { 400: 'AB01', 401: 'AB05', 403: 'AB03', 404: 'AB08', 409: 'AB07', 500: 'AB04' }
    for (const spec of Object.values(ERRORS)) {
      if (expected[spec.status] !== undefined) expect(spec.adminCode).toBe(expected[spec.status])
    }
  })

  it('serialises to the data-plane, control-plane and stream shapes', () => {
    const error = gatewayError(ERRORS.GW_REQ_PROVIDER_UNKNOWN, 'Unknown provider "x"', { param: 'x-gateway-provider' })
    expect(error).toBeInstanceOf(GatewayError)
    expect(JSON.parse(toDataPlaneBody(error))).toEqual({
      error: { message: 'Unknown provider "x"', type: 'invalid_request_error', param: 'x-gateway-provider', code: 'GW_REQ_PROVIDER_UNKNOWN' },
    })
    expect(JSON.parse(toControlPlaneBody(error))).toEqual({ success: false, data: { message: 'Unknown provider "x"', errorCode: 'AB01' } })
    const event = toStreamErrorEvent(gatewayError(ERRORS.GW_UPSTREAM_STREAM_BROKEN))
    expect(event.startsWith('data: ')).toBe(true)
    expect(event.endsWith('\n\n')).toBe(true)
    expect(JSON.parse(event.slice(6))).toEqual({
      error: { message: 'The provider stream ended with an error', type: 'upstream_error', code: 'GW_UPSTREAM_STREAM_BROKEN' },
    })
  })

  it('serialises to the Messages body and to the Responses and Messages stream error events', () => {
    const error = gatewayError(ERRORS.GW_UPSTREAM_TIMEOUT)
    expect(JSON.parse(toMessagesBody(error))).toEqual({ type: 'error', error: { type: 'timeout_error', message: 'The provider did not answer in time' } })
    expect(toStreamErrorEvent(error, 'openai', 7)).toBe(toStreamErrorEvent(error))

    const responses = toStreamErrorEvent(error, 'responses', 7)
    expect(responses.startsWith('event: error\ndata: ')).toBe(true)
    expect(responses.endsWith('}\n\n')).toBe(true)
    expect(JSON.parse(responses.slice('event: error\ndata: '.length))).toEqual({
      type: 'error',
      code: 'GW_UPSTREAM_TIMEOUT',
      message: 'The provider did not answer in time',
      param: null,
      sequence_number: 7,
    })

    const messages = toStreamErrorEvent(error, 'messages')
    expect(messages).toBe(`event: error\ndata: ${toMessagesBody(error)}\n\n`)
  })
})
