/**
 * The `x-gateway-metadata` request header (API.md §2): a JSON object of string values, at most
 * `MAX_METADATA_KEYS` keys and `MAX_METADATA_VALUE_CHARS` characters per value; `_user` names the
 * end user. A value that breaks these rules is refused with 400 naming the problem, never dropped
 * silently: a client whose metadata vanished from its logs would not know why.
 */
import { ERRORS, gatewayError, type GatewayError } from './errors.js'

export const METADATA_HEADER = 'x-gateway-metadata'
export const MAX_METADATA_KEYS = 64
export const MAX_METADATA_VALUE_CHARS = 1024
/**
 * Longest header value. 64 full values would not fit, but the request header block is itself
 * limited to 16 KB (core/http), and this was the log plugin's cap before the header was checked.
 */
export const MAX_METADATA_HEADER_CHARS = 8192

/** Keys are quoted in messages, cut so a hostile key cannot make the error body large. */
function quoted(key: string): string {
  return JSON.stringify(key.length > 64 ? `${key.slice(0, 64)}…` : key)
}

function refused(problem: string): GatewayError {
  return gatewayError(ERRORS.GW_REQ_INVALID, `Invalid ${METADATA_HEADER} header: ${problem}`, { param: METADATA_HEADER })
}

/**
 * The header's pairs, or the 400 to answer. The parsed object itself is returned (no copy): every
 * value was checked to be a string, and `JSON.parse` makes a `__proto__` key an own property.
 */
export function parseMetadataHeader(raw: string): Readonly<Record<string, string>> | GatewayError {
  if (raw.length > MAX_METADATA_HEADER_CHARS) return refused(`it is longer than ${MAX_METADATA_HEADER_CHARS} characters`)
  let parsed: unknown
  try {
    parsed = JSON.parse(raw)
  } catch {
    return refused('it is not valid JSON; send a JSON object of strings, e.g. {"_user":"u1"}')
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return refused('it must be a JSON object of strings, e.g. {"_user":"u1"}')
  }
  const record = parsed as Record<string, unknown>
  let keys = 0
  for (const key in record) {
    if (++keys > MAX_METADATA_KEYS) return refused(`it has more than ${MAX_METADATA_KEYS} keys`)
    const value = record[key]
    if (typeof value !== 'string') return refused(`the value of ${quoted(key)} must be a string`)
    if (value.length > MAX_METADATA_VALUE_CHARS) return refused(`the value of ${quoted(key)} is longer than ${MAX_METADATA_VALUE_CHARS} characters`)
  }
  return record as Record<string, string>
}
