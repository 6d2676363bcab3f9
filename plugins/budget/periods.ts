/**
 * Budget periods (API.md §6), all in UTC and independent of when a limit was created:
 * - `weekly`: from Sunday 00:00 to the next Sunday 00:00;
 * - `monthly`: from the 1st 00:00 to the next month's 1st;
 * - every N days (`periodic_reset_days`, which wins over `periodic_reset`): N-day blocks counted
 *   from the Unix epoch (1970-01-01), so every instance agrees without stored state;
 * - neither: one lifetime period.
 * A manual reset (`reset_usage`) starts a new period at its time, until the next periodic boundary.
 */
import type { UsageLimitRule } from '../../core/admin-records.js'

export const DAY_MS = 86_400_000
/** 1970-01-01 was a Thursday: day 0 is weekday 4 (Sunday = 0). */
const EPOCH_WEEKDAY = 4

/** A half-open span `[start, end)` of epoch ms; `end` is `null` for a lifetime period. */
export interface Period {
  readonly start: number
  readonly end: number | null
}

function mod(value: number, divisor: number): number {
  return ((value % divisor) + divisor) % divisor
}

/** The calendar period of `rule` containing `nowMs`. */
export function periodOf(rule: Pick<UsageLimitRule, 'periodicReset' | 'periodicResetDays'>, nowMs: number): Period {
  const day = Math.floor(nowMs / DAY_MS)
  if (rule.periodicResetDays !== null && rule.periodicResetDays > 0) {
    const days = Math.floor(rule.periodicResetDays)
    const first = day - mod(day, days)
    return { start: first * DAY_MS, end: (first + days) * DAY_MS }
  }
  if (rule.periodicReset === 'weekly') {
    const sunday = day - mod(day + EPOCH_WEEKDAY, 7)
    return { start: sunday * DAY_MS, end: (sunday + 7) * DAY_MS }
  }
  if (rule.periodicReset === 'monthly') {
    const now = new Date(nowMs)
    const year = now.getUTCFullYear()
    const month = now.getUTCMonth()
    return { start: Date.UTC(year, month, 1), end: Date.UTC(year, month + 1, 1) }
  }
  return { start: 0, end: null }
}

/**
 * The span usage counts over now: the calendar period, started later by a manual reset made
 * within it (`resetAt`, epoch ms, or `null`).
 */
export function usageWindow(rule: Pick<UsageLimitRule, 'periodicReset' | 'periodicResetDays'>, nowMs: number, resetAt: number | null): Period {
  const period = periodOf(rule, nowMs)
  if (resetAt === null || resetAt <= period.start) return period
  return { start: resetAt, end: period.end }
}
