import { describe, expect, it } from 'vitest'
import { headerLimitProblem, MAX_HEADER_BYTES, MAX_HEADER_FIELDS } from '../../../core/http/header-limits.js'

describe('headerLimitProblem', () => {
  it('accepts up to 100 fields and 16 KB, and names the limit that was passed', () => {
    expect(MAX_HEADER_FIELDS).toBe(100)
    expect(MAX_HEADER_BYTES).toBe(16_384)
    expect(headerLimitProblem(100, 16_384)).toBeNull()
    expect(headerLimitProblem(101, 10)).toBe('The request has 101 header fields; at most 100 are accepted')
    expect(headerLimitProblem(3, 16_385)).toBe('The request header fields take 16385 bytes; at most 16384 are accepted')
  })
})
