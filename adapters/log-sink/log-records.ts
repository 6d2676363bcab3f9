/**
 * Checks records before they are batched: a record a store cannot represent (a non-finite time, a
 * missing id, a non-object) is refused here with a `TypeError`, so it is dropped and counted
 * instead of failing, and then blocking, a whole batch forever. Values out of a column's range
 * that are optional become `null` (token counts, cost), as both stores' columns allow.
 *
 * The result is a plain object holding exactly the `LogRecord` fields, so it can be journaled as
 * JSON and read back unchanged.
 */
import { MAX_LOG_ATTEMPTS, type CacheStatus, type FeedbackRecord, type LogAttempt, type LogRecord } from '../../core/logs.js'

const INT32_MAX = 2_147_483_647
const UINT16_MAX = 65_535

function text(value: unknown, field: string): string {
  if (typeof value !== 'string') throw new TypeError(`${field} is not a string`)
  return value
}

function nullableText(value: unknown): string | null {
  return typeof value === 'string' ? value : null
}

function finite(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new TypeError(`${field} is not a finite number`)
  return value
}

function nullableFinite(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null
}

function integerIn(value: unknown, min: number, max: number): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max ? value : null
}

function metadataOf(value: unknown): Record<string, string> | null {
  if (value === null || value === undefined || typeof value !== 'object' || Array.isArray(value)) return null
  const metadata: Record<string, string> = {}
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) if (typeof item === 'string') metadata[key] = item
  return metadata
}

function cacheStatusOf(value: unknown): CacheStatus | null {
  return value === 'disabled' || value === 'miss' || value === 'hit' || value === 'semantic_hit' || value === 'refresh' ? value : null
}

/**
 * The attempts of a config-routed request: at most `MAX_LOG_ATTEMPTS` (the first ones and the
 * last), each with its fields checked; anything that is not a list of objects is `null` (a
 * journaled record of an older version has none).
 */
function attemptsOf(value: unknown): LogAttempt[] | null {
  if (!Array.isArray(value) || value.length === 0) return null
  const items = value.length <= MAX_LOG_ATTEMPTS ? value : [...value.slice(0, MAX_LOG_ATTEMPTS - 1), value[value.length - 1]]
  const attempts: LogAttempt[] = []
  for (const item of items) {
    if (item === null || typeof item !== 'object') continue
    const attempt = item as Record<string, unknown>
    attempts.push({
      target: typeof attempt.target === 'string' ? attempt.target : '',
      provider: nullableText(attempt.provider),
      virtual_key: nullableText(attempt.virtual_key),
      status: integerIn(attempt.status, 0, UINT16_MAX) ?? 0,
      latency_ms: nullableFinite(attempt.latency_ms),
      retry: integerIn(attempt.retry, 0, UINT16_MAX) ?? 0,
      error_code: nullableText(attempt.error_code),
      cache_status: cacheStatusOf(attempt.cache_status),
    })
  }
  return attempts.length === 0 ? null : attempts
}

/** The record with every field checked, or a `TypeError` naming the first unrepresentable field. */
export function checkLogRecord(record: LogRecord): LogRecord {
  if (record === null || typeof record !== 'object') throw new TypeError('a log record must be an object')
  const status = integerIn(record.status, 0, UINT16_MAX)
  if (status === null) throw new TypeError('status is not an HTTP status')
  const outcome = record.outcome
  if (outcome !== 'completed' && outcome !== 'errored' && outcome !== 'aborted') throw new TypeError('outcome is not a known outcome')
  const createdAt = finite(record.createdAt, 'createdAt')
  if (createdAt < 0) throw new TypeError('createdAt is before 1970')
  return {
    id: text(record.id, 'id'),
    traceId: text(record.traceId, 'traceId'),
    source: record.source === 'custom' ? 'custom' : 'gateway',
    createdAt: Math.round(createdAt),
    organisationId: nullableText(record.organisationId),
    workspaceId: nullableText(record.workspaceId),
    apiKeyId: nullableText(record.apiKeyId),
    user: nullableText(record.user),
    virtualKey: nullableText(record.virtualKey),
    config: nullableText(record.config),
    configVersion: integerIn(record.configVersion, 0, INT32_MAX),
    promptSlug: nullableText(record.promptSlug),
    promptVersion: integerIn(record.promptVersion, 0, INT32_MAX),
    method: text(record.method, 'method'),
    route: text(record.route, 'route'),
    path: text(record.path, 'path'),
    provider: nullableText(record.provider),
    model: nullableText(record.model),
    status,
    outcome,
    streaming: record.streaming === true,
    latencyMs: finite(record.latencyMs, 'latencyMs'),
    ttftMs: nullableFinite(record.ttftMs),
    promptTokens: integerIn(record.promptTokens, 0, INT32_MAX),
    completionTokens: integerIn(record.completionTokens, 0, INT32_MAX),
    totalTokens: integerIn(record.totalTokens, 0, INT32_MAX),
    cachedTokens: integerIn(record.cachedTokens, 0, INT32_MAX),
    costNanoUsd: integerIn(record.costNanoUsd, 0, Number.MAX_SAFE_INTEGER),
    cacheStatus: cacheStatusOf(record.cacheStatus) ?? 'disabled',
    retryCount: integerIn(record.retryCount, 0, UINT16_MAX) ?? 0,
    fallbackIndex: integerIn(record.fallbackIndex, 0, 32_767),
    errorCode: nullableText(record.errorCode),
    errorType: nullableText(record.errorType),
    metadata: metadataOf(record.metadata),
    requestBody: nullableText(record.requestBody),
    responseBody: nullableText(record.responseBody),
    attempts: attemptsOf(record.attempts),
  }
}

/** The attempts as the stores keep them: JSON text, or `NULL`. */
export function attemptsJson(attempts: readonly LogAttempt[] | null): string | null {
  return attempts === null ? null : JSON.stringify(attempts)
}

/** The feedback entry with every field checked, or a `TypeError`. */
export function checkFeedbackRecord(record: FeedbackRecord): FeedbackRecord {
  if (record === null || typeof record !== 'object') throw new TypeError('a feedback record must be an object')
  const value = integerIn(record.value, -10, 10)
  if (value === null) throw new TypeError('value is not an integer from -10 to 10')
  const weight = finite(record.weight, 'weight')
  if (weight < 0 || weight > 1) throw new TypeError('weight is not between 0 and 1')
  const createdAt = finite(record.createdAt, 'createdAt')
  const updatedAt = finite(record.updatedAt, 'updatedAt')
  if (createdAt < 0 || updatedAt < 0) throw new TypeError('a time is before 1970')
  return {
    id: text(record.id, 'id'),
    traceId: text(record.traceId, 'traceId'),
    organisationId: text(record.organisationId, 'organisationId'),
    workspaceId: nullableText(record.workspaceId),
    value,
    weight,
    metadata: metadataOf(record.metadata),
    createdAt: Math.round(createdAt),
    updatedAt: Math.round(updatedAt),
  }
}

/** Identifies one version of a feedback entry (the same id may be stored once per `updatedAt`). */
export function feedbackVersionKey(id: string, updatedAt: number): string {
  return `${id}\n${updatedAt}`
}

/** Metadata as the stores keep it: two parallel lists. */
export function metadataLists(metadata: Readonly<Record<string, string>> | null): { keys: string[]; values: string[] } {
  const keys: string[] = []
  const values: string[] = []
  if (metadata !== null) {
    for (const [key, value] of Object.entries(metadata)) {
      keys.push(key)
      values.push(value)
    }
  }
  return { keys, values }
}

/** Metadata from the stores' two lists; `null` when they are empty (the stores do not tell `{}` from no metadata). */
export function metadataFromLists(keys: readonly unknown[], values: readonly unknown[]): Record<string, string> | null {
  if (keys.length === 0) return null
  const metadata: Record<string, string> = {}
  for (let index = 0; index < keys.length; index += 1) metadata[String(keys[index])] = String(values[index] ?? '')
  return metadata
}
