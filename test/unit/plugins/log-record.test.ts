import { describe, expect, it } from 'vitest'
import type { ModelPrice, PriceTable } from '../../../core/budgets.js'
import { cappedBody, recordCost, recordMetadata } from '../../../plugins/log/record.js'

const PRICES: PriceTable = {
  find: (_provider: string | null, model: string): ModelPrice | null =>
    model === 'listed' ? { input: 1, output: 2, cachedInput: null, reasoning: null } : null,
}

describe('log record helpers', () => {
  it('prices usage: null without usage, 0 for an unlisted or unnamed model', () => {
    const usage = { promptTokens: 10, completionTokens: 5, totalTokens: 15, cachedTokens: 0 }
    expect(recordCost(PRICES, 'openai', 'listed', usage)).toBe(10 * 1000 + 5 * 2000)
    expect(recordCost(PRICES, 'openai', 'unlisted', usage)).toBe(0)
    expect(recordCost(PRICES, 'openai', null, usage)).toBe(0)
    expect(recordCost(PRICES, 'openai', 'listed', null)).toBeNull()
  })

  it('keeps bodies up to the limit and marks a cut one', () => {
    expect(cappedBody(null, 4)).toBeNull()
    expect(cappedBody(Buffer.from('abcd'), 4)).toBe('abcd')
    expect(cappedBody(Buffer.from('abcdef'), 4)).toBe('abcd[truncated]')
  })

  it('marks at the start a tail that is only the end of the body', () => {
    expect(cappedBody(Buffer.from('wxyz'), 4, true)).toBe('[truncated]wxyz')
    expect(cappedBody(Buffer.from('uvwxyz'), 4, true)).toBe('[truncated]uvwx[truncated]')
  })

  it('stores the metadata core checked, unless the header is longer than the configured cap', () => {
    const header = '{"_user":"alice"}'
    const checked = { _user: 'alice' }
    expect(recordMetadata({ metadata: checked, headers: { 'x-gateway-metadata': header } }, 8192)).toBe(checked)
    expect(recordMetadata({ metadata: checked, headers: { 'x-gateway-metadata': header } }, header.length)).toBe(checked)
    expect(recordMetadata({ metadata: checked, headers: { 'x-gateway-metadata': header } }, header.length - 1)).toBeNull()
    // The record never parses the header itself: without core's slot there is nothing to store.
    expect(recordMetadata({ metadata: null, headers: { 'x-gateway-metadata': header } }, 8192)).toBeNull()
  })
})
