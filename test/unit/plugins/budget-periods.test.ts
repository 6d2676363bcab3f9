import { describe, expect, it } from 'vitest'
import type { UsageLimitRule } from '../../../core/admin-records.js'
import { DAY_MS, periodOf, usageWindow } from '../../../plugins/budget/periods.js'

type Reset = Pick<UsageLimitRule, 'periodicReset' | 'periodicResetDays'>

const WEEKLY: Reset = { periodicReset: 'weekly', periodicResetDays: null }
const MONTHLY: Reset = { periodicReset: 'monthly', periodicResetDays: null }
const LIFETIME: Reset = { periodicReset: null, periodicResetDays: null }
const every = (days: number): Reset => ({ periodicReset: null, periodicResetDays: days })

const at = (iso: string): number => Date.parse(iso)
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString())
const span = (rule: Reset, now: string) => {
  const period = periodOf(rule, at(now))
  return { start: iso(period.start), end: iso(period.end) }
}

describe('budget periods: weekly (Sunday 00:00 UTC)', () => {
  it('runs from the last Sunday 00:00 to the next', () => {
    // 2024-03-06 is a Wednesday.
    expect(span(WEEKLY, '2024-03-06T12:00:00.000Z')).toEqual({ start: '2024-03-03T00:00:00.000Z', end: '2024-03-10T00:00:00.000Z' })
  })

  it('changes exactly at Sunday 00:00 UTC', () => {
    expect(span(WEEKLY, '2024-03-09T23:59:59.999Z')).toEqual({ start: '2024-03-03T00:00:00.000Z', end: '2024-03-10T00:00:00.000Z' })
    expect(span(WEEKLY, '2024-03-10T00:00:00.000Z')).toEqual({ start: '2024-03-10T00:00:00.000Z', end: '2024-03-17T00:00:00.000Z' })
  })

  it('starts on a Sunday across month and year ends', () => {
    expect(span(WEEKLY, '2024-12-31T10:00:00.000Z')).toEqual({ start: '2024-12-29T00:00:00.000Z', end: '2025-01-05T00:00:00.000Z' })
    expect(new Date(periodOf(WEEKLY, at('2031-07-15T05:00:00.000Z')).start).getUTCDay()).toBe(0)
    // The week holding the epoch (a Thursday) started on Sunday 1969-12-28.
    expect(span(WEEKLY, '1970-01-01T00:00:00.000Z')).toEqual({ start: '1969-12-28T00:00:00.000Z', end: '1970-01-04T00:00:00.000Z' })
  })

  it('covers leap days like any other day', () => {
    expect(span(WEEKLY, '2024-02-29T08:00:00.000Z')).toEqual({ start: '2024-02-25T00:00:00.000Z', end: '2024-03-03T00:00:00.000Z' })
  })
})

describe('budget periods: monthly (the 1st 00:00 UTC)', () => {
  it('runs from the 1st to the next 1st', () => {
    expect(span(MONTHLY, '2024-05-17T12:34:56.000Z')).toEqual({ start: '2024-05-01T00:00:00.000Z', end: '2024-06-01T00:00:00.000Z' })
  })

  it('changes exactly at the 1st 00:00 UTC', () => {
    expect(span(MONTHLY, '2024-01-31T23:59:59.999Z')).toEqual({ start: '2024-01-01T00:00:00.000Z', end: '2024-02-01T00:00:00.000Z' })
    expect(span(MONTHLY, '2024-02-01T00:00:00.000Z')).toEqual({ start: '2024-02-01T00:00:00.000Z', end: '2024-03-01T00:00:00.000Z' })
  })

  it('ends February on the 29th in leap years and the 28th otherwise', () => {
    expect(span(MONTHLY, '2024-02-29T23:59:59.999Z')).toEqual({ start: '2024-02-01T00:00:00.000Z', end: '2024-03-01T00:00:00.000Z' })
    expect(span(MONTHLY, '2024-03-01T00:00:00.000Z').start).toBe('2024-03-01T00:00:00.000Z')
    expect(span(MONTHLY, '2023-02-28T23:59:59.999Z')).toEqual({ start: '2023-02-01T00:00:00.000Z', end: '2023-03-01T00:00:00.000Z' })
    // 2100 is not a leap year (divisible by 100), 2000 was (divisible by 400).
    expect(periodOf(MONTHLY, at('2100-02-15T00:00:00.000Z')).end).toBe(at('2100-03-01T00:00:00.000Z'))
    expect(periodOf(MONTHLY, at('2000-02-29T12:00:00.000Z')).end).toBe(at('2000-03-01T00:00:00.000Z'))
  })

  it('rolls over the year in December', () => {
    expect(span(MONTHLY, '2024-12-31T23:00:00.000Z')).toEqual({ start: '2024-12-01T00:00:00.000Z', end: '2025-01-01T00:00:00.000Z' })
  })
})

describe('budget periods: every N days (counted from 1970-01-01 UTC)', () => {
  it('splits time into N-day blocks from the epoch', () => {
    expect(span(every(30), '1970-01-30T23:59:59.999Z')).toEqual({ start: '1970-01-01T00:00:00.000Z', end: '1970-01-31T00:00:00.000Z' })
    expect(span(every(30), '1970-01-31T00:00:00.000Z')).toEqual({ start: '1970-01-31T00:00:00.000Z', end: '1970-03-02T00:00:00.000Z' })
  })

  it('agrees for any moment inside one block, and blocks are N days long', () => {
    for (const days of [1, 7, 10, 30, 365]) {
      const now = at('2024-02-29T13:14:15.000Z')
      const period = periodOf(every(days), now)
      expect(period.start % (days * DAY_MS)).toBe(0)
      expect(period.end).toBe(period.start + days * DAY_MS)
      expect(period.start).toBeLessThanOrEqual(now)
      expect(now).toBeLessThan(period.end as number)
      expect(periodOf(every(days), period.start)).toEqual(period)
      expect(periodOf(every(days), (period.end as number) - 1)).toEqual(period)
    }
  })

  it('counts a leap day as one day', () => {
    // Day 19782 (2024-02-29) is even: a 2-day block starts on it.
    expect(span(every(2), '2024-02-29T05:00:00.000Z')).toEqual({ start: '2024-02-29T00:00:00.000Z', end: '2024-03-02T00:00:00.000Z' })
    expect(span(every(1), '2024-02-29T05:00:00.000Z')).toEqual({ start: '2024-02-29T00:00:00.000Z', end: '2024-03-01T00:00:00.000Z' })
  })

  it('wins over periodic_reset when both are set', () => {
    expect(periodOf({ periodicReset: 'monthly', periodicResetDays: 1 }, at('2024-05-17T12:00:00.000Z'))).toEqual({
      start: at('2024-05-17T00:00:00.000Z'),
      end: at('2024-05-18T00:00:00.000Z'),
    })
  })
})

describe('budget periods: lifetime and manual resets', () => {
  it('is one period without periodic reset', () => {
    expect(periodOf(LIFETIME, at('2024-05-17T12:00:00.000Z'))).toEqual({ start: 0, end: null })
  })

  it('starts the window at a manual reset made in the current period', () => {
    const now = at('2024-05-17T12:00:00.000Z')
    const reset = at('2024-05-10T08:00:00.000Z')
    expect(usageWindow(MONTHLY, now, reset)).toEqual({ start: reset, end: at('2024-06-01T00:00:00.000Z') })
    expect(usageWindow(LIFETIME, now, reset)).toEqual({ start: reset, end: null })
  })

  it('ignores a manual reset older than the period (the periodic reset came after it)', () => {
    const now = at('2024-05-17T12:00:00.000Z')
    expect(usageWindow(MONTHLY, now, at('2024-04-20T00:00:00.000Z'))).toEqual(periodOf(MONTHLY, now))
    expect(usageWindow(WEEKLY, now, null)).toEqual(periodOf(WEEKLY, now))
  })
})
