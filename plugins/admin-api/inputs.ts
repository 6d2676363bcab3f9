/** Validated Admin API input (snake_case) → admin store record fields (camelCase). */
import type { z } from 'zod'
import type { RateLimitRule, RequestDefaults, UsageLimitRule } from '../../core/admin-records.js'
import type { rateLimitRule, requestDefaults, usageLimitRule } from './schemas.js'

export function rateLimitsOf(input: ReadonlyArray<z.output<typeof rateLimitRule>> | null | undefined): RateLimitRule[] {
  return (input ?? []).map((rule) => ({ type: rule.type, unit: rule.unit, value: rule.value }))
}

export function usageLimitOf(input: z.output<typeof usageLimitRule>): UsageLimitRule {
  return {
    type: input.type,
    creditLimit: input.credit_limit,
    alertThreshold: input.alert_threshold ?? null,
    periodicReset: input.periodic_reset ?? null,
    periodicResetDays: input.periodic_reset_days ?? null,
  }
}

export function defaultsOf(input: z.output<typeof requestDefaults> | null | undefined): RequestDefaults | null {
  if (input === null || input === undefined) return null
  return { metadata: input.metadata ?? null, configId: input.config_id ?? null }
}
