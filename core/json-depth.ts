/**
 * The nesting limit of JSON the gateway parses (API.md §2: deeper than 64 levels → 400, never a 500).
 *
 * V8's `JSON.parse` copes with any depth, but what runs on the parsed value afterwards does not:
 * `JSON.stringify`, `structuredClone`, zod and every recursive walk throw a `RangeError` (stack
 * overflow) a few thousand levels down. So every parsed body is checked right after the parse.
 *
 * The check runs on every JSON body, so the common case is nearly free: text with at most
 * `MAX_JSON_DEPTH` opening brackets cannot nest deeper than that, and counting them is a handful
 * of native `Buffer.indexOf` calls (a typical chat body has fewer than ten; 0.4 µs for 1 KB). Only
 * text with more openers gets the exact check, a walk of the parsed value that stops at the limit
 * (it visits containers and their entries, not bytes: 5 µs for a 78 KB chat of 400 messages, whose
 * parse takes 320 µs; a byte scan that skips strings took 30-130 µs there).
 */

/** Deepest nesting accepted: `{}` is 1 level, `{"a":[{}]}` 3. */
export const MAX_JSON_DEPTH = 64

/** The refusal's message, one wording wherever a client hits the limit. */
export const JSON_TOO_DEEP_MESSAGE = `The JSON body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`

const OPEN_BRACE = 0x7b
const OPEN_BRACKET = 0x5b

/**
 * Whether `value`, parsed from the JSON text `bytes`, nests objects and arrays deeper than `limit`.
 * `bytes` only serves the quick answer for text with few brackets.
 */
export function jsonTooDeep(bytes: Buffer, value: unknown, limit: number = MAX_JSON_DEPTH): boolean {
  if (!hasMoreOpeners(bytes, limit)) return false
  return typeof value === 'object' && value !== null && nestsDeeper(value, limit)
}

/** Whether `bytes` holds more than `limit` `{` and `[` bytes in total (each opens at most one level). */
function hasMoreOpeners(bytes: Buffer, limit: number): boolean {
  let openers = 0
  for (let at = bytes.indexOf(OPEN_BRACE); at !== -1; at = bytes.indexOf(OPEN_BRACE, at + 1)) {
    if (++openers > limit) return true
  }
  for (let at = bytes.indexOf(OPEN_BRACKET); at !== -1; at = bytes.indexOf(OPEN_BRACKET, at + 1)) {
    if (++openers > limit) return true
  }
  return false
}

/** `container` is one level; recursion stops at `levels` deep, so the stack stays shallow. */
function nestsDeeper(container: object, levels: number): boolean {
  if (levels === 0) return true
  if (Array.isArray(container)) {
    for (let i = 0; i < container.length; i++) {
      const item: unknown = container[i]
      if (typeof item === 'object' && item !== null && nestsDeeper(item, levels - 1)) return true
    }
    return false
  }
  const record = container as Record<string, unknown>
  for (const key in record) {
    const field = record[key]
    if (typeof field === 'object' && field !== null && nestsDeeper(field, levels - 1)) return true
  }
  return false
}
