/**
 * Finds the token usage in the end of a response body (an OpenAI JSON reply or SSE stream, whose
 * last `"usage"` object is the one that counts) without parsing or even decoding the whole body:
 * it searches the bytes, and only the usage object itself becomes a string. Scanning UTF-8 bytes
 * for ASCII punctuation is safe: every byte of a multi-byte character is 0x80 or above.
 */
import type { Usage } from '../../core/context.js'

const USAGE_KEY = Buffer.from('"usage"')

/** Returns the usage in `tail`, or `null` when there is none (or it is cut off). */
export function extractUsage(tail: Buffer): Usage | null {
  let at = tail.lastIndexOf(USAGE_KEY)
  while (at >= 0) {
    const object = objectAfter(tail, at + USAGE_KEY.length)
    if (object !== null) return usageOf(object)
    // A negative offset would count from the end and find the same match again.
    at = at === 0 ? -1 : tail.lastIndexOf(USAGE_KEY, at - 1)
  }
  return null
}

const SPACE = 0x20
const TAB = 0x09
const NEWLINE = 0x0a
const RETURN = 0x0d
const COLON = 0x3a
const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN = 0x7b
const CLOSE = 0x7d

/** The JSON object that follows `"usage"` and a colon, or `null`. */
function objectAfter(bytes: Buffer, from: number): Record<string, unknown> | null {
  let i = from
  for (let c = bytes[i]; c === SPACE || c === COLON || c === NEWLINE || c === RETURN || c === TAB; c = bytes[++i]);
  if (bytes[i] !== OPEN) return null
  const start = i
  let depth = 0
  let inString = false
  for (; i < bytes.length; i++) {
    const c = bytes[i]
    if (inString) {
      if (c === BACKSLASH) i++
      else if (c === QUOTE) inString = false
    } else if (c === QUOTE) inString = true
    else if (c === OPEN) depth++
    else if (c === CLOSE && --depth === 0) {
      try {
        const parsed: unknown = JSON.parse(bytes.toString('utf8', start, i + 1))
        return parsed !== null && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : null
      } catch {
        return null
      }
    }
  }
  return null
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0
}

function usageOf(raw: Record<string, unknown>): Usage | null {
  const details = raw.prompt_tokens_details
  const promptTokens = count(raw.prompt_tokens ?? raw.input_tokens)
  const completionTokens = count(raw.completion_tokens ?? raw.output_tokens)
  if (promptTokens === 0 && completionTokens === 0 && raw.total_tokens === undefined) return null
  return {
    promptTokens,
    completionTokens,
    totalTokens: count(raw.total_tokens) || promptTokens + completionTokens,
    cachedTokens: details !== null && typeof details === 'object' ? count((details as Record<string, unknown>).cached_tokens) : 0,
  }
}
