/**
 * Pure helpers of the rate-limit plugin: rules → buckets, the token estimate, refusal messages.
 *
 * Bucket keys are `rl:{<workspace UUID>}:<subject kind>:<subject id>:<type>:<unit>`. The braces
 * are a Redis Cluster hash tag: every key of one request lands in one slot, so one Lua script can
 * check them all (every subject of a request, API key, workspace and virtual key, belongs to the
 * caller's workspace).
 */
import type { RateLimitRule } from '../../core/admin-records.js'
import type { JsonObject } from '../../core/context.js'
import type { BucketSpec, LimitSubject } from '../../core/limits.js'

export type RateLimitUnit = RateLimitRule['unit']

/** Window of each unit: the bucket refills completely in this time. */
export const WINDOW_MS: Readonly<Record<RateLimitUnit, number>> = Object.freeze({
  rps: 1_000,
  rpm: 60_000,
  rph: 3_600_000,
  rpd: 86_400_000,
  rpw: 604_800_000,
})

const UNIT_WORD: Readonly<Record<RateLimitUnit, string>> = Object.freeze({
  rps: 'second',
  rpm: 'minute',
  rph: 'hour',
  rpd: 'day',
  rpw: 'week',
})

/** One rule of one subject, ready to check. */
export interface CompiledRule {
  readonly subject: LimitSubject
  readonly type: RateLimitRule['type']
  readonly unit: RateLimitUnit
  readonly bucket: BucketSpec
}

/**
 * The buckets of a subject's rules under hash tag `tag`. Two rules of the same type and unit would
 * share a key, so they are merged into one with the lower value.
 */
export function compileRules(subject: LimitSubject, tag: string): CompiledRule[] {
  const byKey = new Map<string, CompiledRule>()
  for (const rule of subject.rateLimits) {
    const key = `rl:{${tag}}:${subject.kind}:${subject.id}:${rule.type}:${rule.unit}`
    const existing = byKey.get(key)
    if (existing !== undefined && existing.bucket.capacity <= rule.value) continue
    byKey.set(key, { subject, type: rule.type, unit: rule.unit, bucket: { key, capacity: rule.value, windowMs: WINDOW_MS[rule.unit] } })
  }
  return [...byKey.values()]
}

function positiveInteger(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 1 ? Math.floor(value) : null
}

/**
 * Tokens a request may use, checked against `tokens` rules before forwarding: `max_tokens`, else
 * `max_completion_tokens`, else 1.
 */
export function tokenEstimate(body: JsonObject | null): number {
  if (body === null) return 1
  return positiveInteger(body.max_tokens) ?? positiveInteger(body.max_completion_tokens) ?? 1
}

/**
 * The estimate from a raw (pass-through) body: parsed only when it looks like JSON and mentions a
 * token field, so other bodies cost one substring search.
 */
export function tokenEstimateOfRaw(raw: Buffer | null, contentType: string | undefined): number {
  if (raw === null || raw.length === 0 || contentType === undefined || !contentType.includes('json')) return 1
  if (raw.indexOf('max_tokens') < 0 && raw.indexOf('max_completion_tokens') < 0) return 1
  try {
    const parsed: unknown = JSON.parse(raw.toString('utf8'))
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? tokenEstimate(parsed as JsonObject) : 1
  } catch {
    return 1
  }
}

/** `Retry-After` seconds: whole seconds, rounded up, at least 1. */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000))
}

/** The 429 message: names the entity (its label is already masked), the limit and its unit. */
export function refusalMessage(rule: CompiledRule, estimate: number): string {
  const noun = rule.bucket.capacity === 1 ? rule.type.slice(0, -1) : rule.type
  const limit = `${rule.bucket.capacity} ${noun} per ${UNIT_WORD[rule.unit]}`
  const base = `Rate limit exceeded for ${rule.subject.label}: ${limit}`
  if (rule.bucket.capacity === 0) return `${base} (this limit blocks every request)`
  if (rule.type === 'tokens' && estimate > rule.bucket.capacity) {
    return `${base}; this request asks for up to ${estimate} tokens (max_tokens), more than the limit allows`
  }
  return base
}
